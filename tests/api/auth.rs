//! Credentials: every request re-reads the key, the membership and the role, so a revocation, an
//! expiry, a removal or a demotion takes effect on the very next call; malformed and foreign
//! credentials get `invalid_credential` with a challenge.

use outreach_runtime::{Role, Scope, admin};
use reqwest::Method;
use serde_json::json;

use crate::helpers::{ApiResponse, Auth, Body, OWNER_EMAIL, TestApp, spawn_app, spawn_app_in};

const ADMIN_EMAIL: &str = "admin@acme.test";

async fn workspace(app: &TestApp, auth: Auth<'_>) -> ApiResponse {
    app.send(Method::GET, "/api/v1/workspace", auth, Body::Empty)
        .await
}

/// Asserts a 401 with this code and an `invalid_token` challenge, on REST and on MCP.
async fn assert_refused(app: &TestApp, key: &str, code: &str) {
    let response = workspace(app, Auth::Key(key)).await;
    response.expect_error(401, code);
    let challenge = response.header("www-authenticate").unwrap_or_default();
    assert!(
        challenge.starts_with("Bearer resource_metadata="),
        "{challenge}"
    );
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");

    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "service_get_workspace", "arguments": {}}});
    let (status, headers, body) = app.mcp_raw(Some(key), &call).await;
    assert_eq!(status.as_u16(), 401, "{body}");
    assert_eq!(body["code"], json!(code), "{body}");
    assert!(headers.contains_key("www-authenticate"));
}

#[tokio::test]
async fn a_valid_key_shows_the_workspace_and_the_caller() {
    let app = spawn_app().await;
    let body = workspace(&app, Auth::Key(&app.key))
        .await
        .expect(200)
        .clone();
    assert_eq!(body["workspace"]["id"], json!(app.workspace_id));
    assert_eq!(body["workspace"]["name"], json!("Acme"));
    assert_eq!(body["workspace"]["environment"], json!("development"));
    assert_eq!(body["workspace"]["sending_terms_accepted"], json!(false));
    assert_eq!(body["caller"]["email"], json!(OWNER_EMAIL));
    assert_eq!(body["caller"]["role"], json!("owner"));
    assert_eq!(body["caller"]["credential_kind"], json!("api_key"));
    assert_eq!(body["caller"]["scopes"], json!(["read", "write"]));
    assert!(app.key.starts_with("pk_test_"), "{}", app.key);
}

#[tokio::test]
async fn revoked_key_is_rejected_on_next_request() {
    let app = spawn_app().await;
    let key = app.create_key(OWNER_EMAIL, Scope::Write).await;
    workspace(&app, Auth::Key(&key.key)).await.expect(200);
    admin::revoke_key(&app.db, &app.clock, &key.id)
        .await
        .expect("revoke");
    assert_refused(&app, &key.key, "credential_revoked").await;
    assert!(
        admin::revoke_key(&app.db, &app.clock, &key.id)
            .await
            .is_err(),
        "revoking twice is refused"
    );
    // The other keys of the same person still work.
    workspace(&app, Auth::Key(&app.key)).await.expect(200);
}

#[tokio::test]
async fn expired_key_is_rejected() {
    let app = spawn_app().await;
    let expires_at = app.clock.now_ms() + 60_000;
    let key = app
        .try_create_key(OWNER_EMAIL, Scope::Read, Some(expires_at))
        .await
        .expect("create an expiring key");
    assert!(key.expires_at.is_some());
    workspace(&app, Auth::Key(&key.key)).await.expect(200);
    app.clock.advance_ms(60_001);
    assert_refused(&app, &key.key, "credential_expired").await;
    // A key without an expiry is unaffected by the passing of time.
    workspace(&app, Auth::Key(&app.key)).await.expect(200);
}

#[tokio::test]
async fn a_key_cannot_be_created_already_expired() {
    let app = spawn_app().await;
    let past = app.clock.now_ms() - 1;
    let error = app
        .try_create_key(OWNER_EMAIL, Scope::Read, Some(past))
        .await
        .expect_err("refused");
    assert!(error.to_string().contains("in the past"), "{error}");
}

#[tokio::test]
async fn removed_members_key_is_rejected_on_next_call() {
    let app = spawn_app().await;
    app.add_member(ADMIN_EMAIL, Role::Admin).await;
    let key = app.create_key(ADMIN_EMAIL, Scope::Write).await;
    app.post_json("/prospects", &key.key, json!({"first_name": "Before"}))
        .await
        .expect(201);
    admin::remove_member(&app.db, &app.workspace_id, ADMIN_EMAIL)
        .await
        .expect("remove");
    assert_refused(&app, &key.key, "not_a_member").await;
    let before = app.prospect_count().await;
    app.post_json("/prospects", &key.key, json!({"first_name": "After"}))
        .await
        .expect_error(401, "not_a_member");
    assert_eq!(app.prospect_count().await, before);
}

#[tokio::test]
async fn the_last_owner_cannot_be_removed_or_demoted() {
    let app = spawn_app().await;
    assert!(
        admin::remove_member(&app.db, &app.workspace_id, OWNER_EMAIL)
            .await
            .is_err()
    );
    assert!(
        admin::set_role(&app.db, &app.workspace_id, OWNER_EMAIL, Role::Member)
            .await
            .is_err()
    );
    workspace(&app, Auth::Key(&app.key)).await.expect(200);
}

#[tokio::test]
async fn role_demotion_caps_scopes_on_next_call() {
    let app = spawn_app().await;
    app.add_member(ADMIN_EMAIL, Role::Admin).await;
    let key = app.create_key(ADMIN_EMAIL, Scope::Write).await;
    app.post_json("/prospects", &key.key, json!({"first_name": "Allowed"}))
        .await
        .expect(201);

    admin::set_role(&app.db, &app.workspace_id, ADMIN_EMAIL, Role::Member)
        .await
        .expect("demote");
    let before = app.prospect_count().await;
    let refused = app
        .post_json("/prospects", &key.key, json!({"first_name": "Refused"}))
        .await;
    let message = refused.expect_error(403, "insufficient_scope");
    assert!(
        message.contains("`member`"),
        "the sentence says why: {message}"
    );
    assert_eq!(
        app.prospect_count().await,
        before,
        "nothing is written by a refused call"
    );
    let (is_error, body) = app
        .mcp_call(
            &key.key,
            "service_create_prospect",
            json!({"first_name": "Refused"}),
        )
        .await;
    assert!(is_error);
    assert_eq!(body["code"], json!("insufficient_scope"));

    let me = workspace(&app, Auth::Key(&key.key))
        .await
        .expect(200)
        .clone();
    assert_eq!(me["caller"]["role"], json!("member"));
    assert_eq!(me["caller"]["scopes"], json!(["read"]));

    // Promotion back restores the key's own scopes on the next call.
    admin::set_role(&app.db, &app.workspace_id, ADMIN_EMAIL, Role::Admin)
        .await
        .expect("promote");
    app.post_json(
        "/prospects",
        &key.key,
        json!({"first_name": "Allowed again"}),
    )
    .await
    .expect(201);
}

#[tokio::test]
async fn a_member_may_hold_only_read_keys() {
    let app = spawn_app().await;
    app.add_member("member@acme.test", Role::Member).await;
    let error = app
        .try_create_key("member@acme.test", Scope::Write, None)
        .await
        .expect_err("refused");
    assert!(error.to_string().contains("member"), "{error}");
    let key = app.create_key("member@acme.test", Scope::Read).await;
    let me = workspace(&app, Auth::Key(&key.key))
        .await
        .expect(200)
        .clone();
    assert_eq!(me["caller"]["scopes"], json!(["read"]));
}

#[tokio::test]
async fn send_is_refused_before_the_terms_are_accepted_and_allowed_after() {
    let app = spawn_app().await;
    let error = app
        .try_create_key(OWNER_EMAIL, Scope::Send, None)
        .await
        .expect_err("send before the terms is refused");
    assert!(
        error.to_string().contains("terms"),
        "the refusal names the sending terms: {error}"
    );

    // A member cannot accept the terms for the workspace.
    app.add_member("member@acme.test", Role::Member).await;
    assert!(
        admin::accept_terms(&app.db, &app.clock, &app.workspace_id, "member@acme.test")
            .await
            .is_err()
    );
    assert!(
        app.try_create_key(OWNER_EMAIL, Scope::Send, None)
            .await
            .is_err()
    );

    admin::accept_terms(&app.db, &app.clock, &app.workspace_id, OWNER_EMAIL)
        .await
        .expect("accept the terms");
    let key = app.create_key(OWNER_EMAIL, Scope::Send).await;
    assert_eq!(
        serde_json::to_value(&key.scopes).expect("scopes"),
        json!(["read", "write", "send"])
    );
    let me = workspace(&app, Auth::Key(&key.key))
        .await
        .expect(200)
        .clone();
    assert_eq!(me["caller"]["scopes"], json!(["read", "write", "send"]));
    assert_eq!(me["workspace"]["sending_terms_accepted"], json!(true));
    assert!(me["workspace"]["sending_terms_accepted_at"].is_string());
}

/// A `send` refusal says whether the sending terms are accepted, and where to accept them, on
/// both faces; and it changes nothing.
#[tokio::test]
async fn a_send_refusal_says_whether_the_terms_are_accepted_and_where() {
    let app = spawn_app().await;
    let path = "/sequences/seq_00000000000NoSuchOne/activate";
    let before = app.post_json(path, &app.key, json!({})).await;
    let message = before.expect_error(403, "insufficient_scope");
    assert!(
        message.contains("sending terms are not accepted yet")
            && message.contains(&format!("{}/settings/sending-terms", app.base_url)),
        "{message}"
    );
    let (is_error, body) = app
        .mcp_call(
            &app.key,
            "service_activate_sequence",
            json!({"id": "seq_00000000000NoSuchOne"}),
        )
        .await;
    assert!(is_error);
    assert_eq!(body["error"].as_str(), Some(message), "MCP says the same");

    admin::accept_terms(&app.db, &app.clock, &app.workspace_id, OWNER_EMAIL)
        .await
        .expect("accept the terms");
    let after = app.post_json(path, &app.key, json!({})).await;
    let message = after.expect_error(403, "insufficient_scope");
    assert!(
        message.contains("sending terms are accepted.")
            && !message.contains("/settings/sending-terms"),
        "{message}"
    );
    // A refusal for `write` says nothing of the terms.
    let read = app.read_key().await;
    let refused = app
        .post_json("/lists", &read, json!({"name": "Leads"}))
        .await;
    assert!(
        !refused
            .expect_error(403, "insufficient_scope")
            .contains("terms")
    );
}

#[tokio::test]
async fn test_key_is_refused_by_a_production_server() {
    let app = spawn_app_in("production").await;
    assert!(
        app.key.starts_with("pk_live_"),
        "production issues live keys: {}",
        app.key
    );
    let me = workspace(&app, Auth::Key(&app.key))
        .await
        .expect(200)
        .clone();
    assert_eq!(me["workspace"]["environment"], json!("production"));

    // A key issued in another environment, for the same person, in the same database.
    let other = admin::create_key(
        &app.db,
        &app.clock,
        &outreach_runtime::Environment::new("development"),
        &app.workspace_id,
        OWNER_EMAIL,
        "test-env key",
        Scope::Read,
        None,
    )
    .await
    .expect("create a test key");
    assert!(other.key.starts_with("pk_test_"));
    let response = workspace(&app, Auth::Key(&other.key)).await;
    let message = response.expect_error(401, "invalid_credential");
    assert!(
        message.contains("production") && message.contains("pk_live_"),
        "{message}"
    );

    // A live key with the test prefix swapped in is not a test key either.
    let forged = app.key.replacen("pk_live_", "pk_test_", 1);
    workspace(&app, Auth::Key(&forged))
        .await
        .expect_error(401, "invalid_credential");
}

#[tokio::test]
async fn live_key_is_refused_by_a_development_server() {
    let app = spawn_app().await;
    let forged = app.key.replacen("pk_test_", "pk_live_", 1);
    let message = workspace(&app, Auth::Key(&forged))
        .await
        .expect_error(401, "invalid_credential")
        .to_owned();
    assert!(message.contains("pk_test_"), "{message}");
}

#[tokio::test]
async fn garbage_bearer_header_is_an_invalid_credential() {
    let app = spawn_app().await;
    for header in [
        "Bearer garbage",
        "Bearer pk_test_short",
        "Bearer pk_test_!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
        "Bearer ",
        "Bearer",
    ] {
        let response = workspace(&app, Auth::Header(header)).await;
        response.expect_error(401, "invalid_credential");
        let challenge = response.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{header}: {challenge}"
        );
    }
}

#[tokio::test]
async fn non_bearer_scheme_is_an_invalid_credential() {
    let app = spawn_app().await;
    let basic = format!("Basic {}", "b3duZXI6cGFzc3dvcmQ=");
    for header in [
        basic.as_str(),
        app.key.as_str(),
        &format!("Token {}", app.key),
    ] {
        let message = workspace(&app, Auth::Header(header))
            .await
            .expect_error(401, "invalid_credential")
            .to_owned();
        assert!(message.contains("Bearer"), "{header}: {message}");
    }
    // The scheme is case-insensitive.
    workspace(&app, Auth::Header(&format!("bearer {}", app.key)))
        .await
        .expect(200);
}

#[tokio::test]
async fn missing_header_is_unauthenticated() {
    let app = spawn_app().await;
    let response = workspace(&app, Auth::None).await;
    let message = response.expect_error(401, "unauthenticated");
    assert!(message.contains("Authorization: Bearer"), "{message}");
    let challenge = response.header("www-authenticate").unwrap_or_default();
    assert_eq!(
        challenge,
        format!(
            "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource\"",
            app.base_url
        )
    );
}

#[tokio::test]
async fn a_key_that_never_existed_is_an_invalid_credential() {
    let app = spawn_app().await;
    let never = format!("pk_test_{}", "A".repeat(43));
    let message = workspace(&app, Auth::Key(&never))
        .await
        .expect_error(401, "invalid_credential")
        .to_owned();
    assert!(message.contains("Unknown"), "{message}");
    assert_refused(&app, &never, "invalid_credential").await;
}

#[tokio::test]
async fn public_documents_need_no_credential() {
    let app = spawn_app().await;
    for path in ["/healthz", "/api/v1/openapi.json", "/api/v1/docs"] {
        let response = app.send(Method::GET, path, Auth::None, Body::Empty).await;
        assert_eq!(response.status.as_u16(), 200, "{path}: {}", response.body);
    }
    let health = app
        .send(Method::GET, "/healthz", Auth::None, Body::Empty)
        .await;
    assert_eq!(health.body, json!({"status": "ok"}));
    let docs = app
        .send(Method::GET, "/api/v1/docs", Auth::None, Body::Empty)
        .await;
    let html = docs.body.as_str().unwrap_or_default();
    assert!(
        html.contains("create_prospect") || html.contains("Create a prospect"),
        "the docs list the operations"
    );
    for remote in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
        "@import url(http",
    ] {
        assert!(
            !html.contains(remote),
            "the docs page loads something from the internet: {remote}"
        );
    }
}
