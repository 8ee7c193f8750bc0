//! OAuth access tokens as credentials: accepted on REST and MCP alike, and refused on the next
//! call once their grant is disconnected, they expire, their person leaves the workspace, or they
//! were issued for another resource. An out-of-scope tool call with a token is HTTP 403 with the
//! `insufficient_scope` challenge (step-up), where an API key gets the in-band tool error.
//!
//! The grants and tokens are written straight into the database here, so these tests pin down
//! what the authentication middleware does with a token, whatever issued it; the authorization
//! server's own flows are in `oauth.rs`.

use outreach_runtime::{Role, Scope, ids};
use serde_json::json;

use crate::helpers::{OWNER_EMAIL, TestApp, spawn_app};

/// Issues an access token for `email` in the app's workspace with `scope`, bound to `resource`
/// (the app's MCP address unless given); returns `(grant id, token)`.
pub(crate) async fn issue_token(
    app: &TestApp,
    email: &str,
    scope: Scope,
    resource: Option<&str>,
) -> (String, String) {
    let person_id: String = sqlx::query_scalar("select id from people where email = $1")
        .bind(email)
        .fetch_one(app.db.pool())
        .await
        .expect("the person exists");
    let now = app.clock.now_ms();
    let grant_id = ids::new_id("grt");
    let resource = resource.map_or_else(|| format!("{}/api/mcp", app.base_url), str::to_owned);
    sqlx::query(
        "insert into oauth_grants (id, workspace_id, person_id, client_id, client_name, \
            client_source, scopes, resource, created_at) \
         values ($1, $2, $3, 'cli_test', 'Test Client', 'registration', $4, $5, $6)",
    )
    .bind(&grant_id)
    .bind(&app.workspace_id)
    .bind(&person_id)
    .bind(scope.list_string())
    .bind(resource)
    .bind(now)
    .execute(app.db.pool())
    .await
    .expect("insert the grant");
    let token = ids::new_secret("oat_");
    sqlx::query(
        "insert into oauth_tokens (token_hash, grant_id, kind, expires_at, created_at) \
         values ($1, $2, 'access', $3, $4)",
    )
    .bind(ids::hash_secret(&token))
    .bind(&grant_id)
    .bind(now + 3_600_000)
    .bind(now)
    .execute(app.db.pool())
    .await
    .expect("insert the token");
    (grant_id, token)
}

fn challenge(headers: &reqwest::header::HeaderMap) -> String {
    headers
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn an_access_token_works_on_rest_and_mcp_alike() {
    let app = spawn_app().await;
    let (_, token) = issue_token(&app, OWNER_EMAIL, Scope::Write, None).await;
    let rest = app.get("/workspace", &token).await;
    let rest = rest.expect(200).clone();
    let (is_error, mcp) = app
        .mcp_call(&token, "service_get_workspace", json!({}))
        .await;
    assert!(!is_error, "{mcp}");
    assert_eq!(rest, mcp);
    assert_eq!(rest["caller"]["credential_kind"], "oauth_token", "{rest}");
    // The grant records its use, as keys do.
    let mut used = None;
    for _ in 0..50 {
        used = sqlx::query_scalar::<_, Option<i64>>("select last_used_at from oauth_grants")
            .fetch_one(app.db.pool())
            .await
            .unwrap();
        if used.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(used.is_some(), "last_used_at was never recorded");
}

#[tokio::test]
async fn a_disconnected_grant_is_refused_on_the_next_call() {
    let app = spawn_app().await;
    let (grant_id, token) = issue_token(&app, OWNER_EMAIL, Scope::Write, None).await;
    app.get("/workspace", &token).await.expect(200);
    sqlx::query("update oauth_grants set revoked_at = $1 where id = $2")
        .bind(app.clock.now_ms())
        .bind(&grant_id)
        .execute(app.db.pool())
        .await
        .unwrap();
    let response = app.get("/workspace", &token).await;
    response.expect_error(401, "credential_revoked");
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let (status, headers, body) = app.mcp_raw(Some(&token), &list).await;
    assert_eq!(status.as_u16(), 401, "{body}");
    assert_eq!(body["code"], "credential_revoked");
    let challenge = challenge(&headers);
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
    assert!(
        challenge.contains(&format!(
            "resource_metadata=\"{}/.well-known/oauth-protected-resource/api/mcp\"",
            app.base_url
        )),
        "{challenge}"
    );
}

#[tokio::test]
async fn an_access_token_past_its_hour_is_expired() {
    let app = spawn_app().await;
    let (_, token) = issue_token(&app, OWNER_EMAIL, Scope::Read, None).await;
    app.get("/workspace", &token).await.expect(200);
    app.clock.advance_ms(3_600_000);
    app.get("/workspace", &token)
        .await
        .expect_error(401, "credential_expired");
}

#[tokio::test]
async fn a_token_of_a_removed_person_is_refused() {
    let app = spawn_app().await;
    app.add_member("ann@acme.test", Role::Admin).await;
    let (_, token) = issue_token(&app, "ann@acme.test", Scope::Write, None).await;
    app.get("/workspace", &token).await.expect(200);
    outreach_runtime::admin::remove_member(&app.db, &app.workspace_id, "ann@acme.test")
        .await
        .unwrap();
    app.get("/workspace", &token)
        .await
        .expect_error(401, "not_a_member");
}

#[tokio::test]
async fn a_token_for_another_resource_is_refused() {
    let app = spawn_app().await;
    // A second deployment on the same database answers at another address: the token is bound
    // to this one's MCP address, so it is worthless there.
    let (_, token) = issue_token(&app, OWNER_EMAIL, Scope::Read, None).await;
    let other = app.second_instance().await;
    let response = app
        .client
        .get(format!("{}/api/v1/workspace", other.base_url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["code"], "invalid_credential", "{body}");
    // And a token recorded for another resource is refused here.
    let (_, foreign) = issue_token(
        &app,
        OWNER_EMAIL,
        Scope::Read,
        Some("https://elsewhere.example/api/mcp"),
    )
    .await;
    app.get("/workspace", &foreign)
        .await
        .expect_error(401, "invalid_credential");
}

#[tokio::test]
async fn unknown_and_malformed_tokens_are_invalid_credentials() {
    let app = spawn_app().await;
    let unknown = ids::new_secret("oat_");
    app.get("/workspace", &unknown)
        .await
        .expect_error(401, "invalid_credential");
    app.get("/workspace", "oat_short")
        .await
        .expect_error(401, "invalid_credential");
}

#[tokio::test]
async fn an_out_of_scope_tool_call_with_a_token_is_an_http_403_step_up() {
    let app = spawn_app().await;
    let (_, token) = issue_token(&app, OWNER_EMAIL, Scope::Read, None).await;
    let call = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "service_create_list", "arguments": {"name": "Not allowed"}},
    });
    let (status, headers, body) = app.mcp_raw(Some(&token), &call).await;
    assert_eq!(status.as_u16(), 403, "{body}");
    assert_eq!(body["code"], "insufficient_scope", "{body}");
    assert_eq!(body["required_scope"], "write", "{body}");
    let challenge = challenge(&headers);
    assert!(
        challenge.contains("error=\"insufficient_scope\"")
            && challenge.contains("scope=\"read write\""),
        "{challenge}"
    );
    let lists: i64 = sqlx::query_scalar("select count(*) from lists")
        .fetch_one(app.db.pool())
        .await
        .unwrap();
    assert_eq!(lists, 0, "nothing was created");
    // Reading is within the grant, and so is a price estimate of a priced write action.
    let (is_error, _) = app.mcp_call(&token, "service_list_lists", json!({})).await;
    assert!(!is_error);
    let (is_error, estimate) = app
        .mcp_call(
            &token,
            "service_import_prospects",
            json!({"csv": "Full Name,E-mail\nAda Lovelace,ada@engines.test\n", "estimate_only": true}),
        )
        .await;
    assert!(!is_error, "{estimate}");
    // An API key with the same scope keeps the in-band tool error.
    let read_key = app.read_key().await;
    let (is_error, body) = app
        .mcp_call(&read_key, "service_create_list", json!({"name": "Nope"}))
        .await;
    assert!(is_error);
    assert_eq!(body["code"], "insufficient_scope");
}

#[tokio::test]
async fn a_token_is_capped_by_the_role_on_rest() {
    let app = spawn_app().await;
    app.add_member("mo@acme.test", Role::Member).await;
    let (_, token) = issue_token(&app, "mo@acme.test", Scope::Write, None).await;
    let workspace = app.get("/workspace", &token).await;
    let response = app
        .post_json("/lists", &token, json!({"name": "Capped"}))
        .await;
    response.expect_error(403, "insufficient_scope");
    assert!(
        response
            .header("www-authenticate")
            .is_some_and(|h| h.contains("insufficient_scope")),
        "{:?}",
        response.headers
    );
    assert_eq!(workspace.status.as_u16(), 200);
}
