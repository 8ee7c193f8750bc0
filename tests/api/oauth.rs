//! The OAuth 2.1 authorization server over raw HTTP: discovery, registration, metadata documents,
//! the code flow with PKCE, refresh rotation, revocation, and every bad input of issue 4 refused
//! with the error the RFCs name, with nothing granted afterwards.
//!
//! A test drives a browser the way a person would: a cookie-keeping client that does not follow
//! redirects signs in through `/login` and posts the consent form it was shown. Client metadata
//! documents are served by a small axum server inside the test on `127.0.0.1:0`, with the fetch
//! policy relaxed to loopback and plain http (`cimd.allow_loopback`); the refusal of private
//! addresses is tested with the policy as production has it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use outreach_runtime::{Role, admin};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::helpers::{
    ApiResponse, Auth, Body, OWNER_EMAIL, TestApp, encode, spawn_app, spawn_app_with,
};

const PASSWORD: &str = "correct horse battery";
const REDIRECT: &str = "http://127.0.0.1/callback";
const WEB_REDIRECT: &str = "https://app.example/oauth/callback";

// ----- a browser and a client -----

/// A person's browser: keeps cookies, shows each redirect instead of following it.
struct Browser {
    client: reqwest::Client,
    base_url: String,
}

impl Browser {
    fn new(app: &TestApp) -> Self {
        let client = reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a browser");
        Self {
            client,
            base_url: app.base_url.clone(),
        }
    }

    fn url(&self, path: &str) -> String {
        if path.starts_with("http") {
            path.to_owned()
        } else {
            format!("{}{path}", self.base_url)
        }
    }

    async fn get(&self, path: &str) -> Page {
        let response = self.client.get(self.url(path)).send().await.expect("GET");
        Page::read(response).await
    }

    async fn post_form(&self, path: &str, form: &[(String, String)]) -> Page {
        let response = self
            .client
            .post(self.url(path))
            .form(form)
            .send()
            .await
            .expect("POST");
        Page::read(response).await
    }

    /// Signs in through the login form, as the contract of issue 4 describes it.
    async fn sign_in(&self, email: &str) {
        let page = self.get("/login").await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        let csrf = hidden_inputs(&page.body, "login-form")
            .into_iter()
            .find(|(name, _)| name == "csrf_token")
            .map(|(_, value)| value)
            .expect("a csrf token on the login form");
        let signed_in = self
            .post_form(
                "/login",
                &[
                    ("email".into(), email.into()),
                    ("password".into(), PASSWORD.into()),
                    ("csrf_token".into(), csrf),
                    ("next".into(), "/settings/api".into()),
                ],
            )
            .await;
        assert_eq!(
            signed_in.status,
            StatusCode::SEE_OTHER,
            "{}",
            signed_in.body
        );
    }
}

/// A browser's view of one response.
struct Page {
    status: StatusCode,
    location: Option<String>,
    body: String,
}

impl Page {
    async fn read(response: reqwest::Response) -> Self {
        let status = response.status();
        let location = response
            .headers()
            .get("location")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let body = response.text().await.expect("a body");
        Self {
            status,
            location,
            body,
        }
    }

    /// The query parameters of the redirect this page is.
    fn redirect_params(&self) -> Vec<(String, String)> {
        let location = self
            .location
            .as_deref()
            .unwrap_or_else(|| panic!("not a redirect ({}): {}", self.status, self.body));
        let url = url::Url::parse(location).expect("an absolute redirect");
        url.query_pairs().into_owned().collect()
    }

    fn redirect_param(&self, name: &str) -> Option<String> {
        self.redirect_params()
            .into_iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value)
    }

    /// Asserts the page is the authorization endpoint's error page, not a redirect.
    #[track_caller]
    fn expect_error_page(&self, status: u16, says: &str) {
        assert_eq!(self.status.as_u16(), status, "{}", self.body);
        assert!(self.location.is_none(), "an error page, not a redirect");
        assert!(self.body.contains("id=\"oauth-error\""), "{}", self.body);
        assert!(
            self.body.contains(says),
            "the page should say `{says}`: {}",
            self.body
        );
    }
}

/// Undoes HTML escaping: the named entities and numeric ones (askama writes `&#38;`).
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('&') {
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        let Some(end) = rest.find(';') else { break };
        let entity = &rest[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .or_else(|| entity.strip_prefix("#X"))
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|dec| dec.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!("{name}=\""))? + name.len() + 2;
    let end = tag[start..].find('"')? + start;
    Some(unescape(&tag[start..end]))
}

/// The hidden inputs (and checked radios) of the form with this id.
fn hidden_inputs(html: &str, form_id: &str) -> Vec<(String, String)> {
    let start = html
        .find(&format!("id=\"{form_id}\""))
        .unwrap_or_else(|| panic!("no form #{form_id} in {html}"));
    let end = html[start..]
        .find("</form>")
        .map_or(html.len(), |end| start + end);
    let form = &html[start..end];
    let mut inputs = Vec::new();
    for piece in form.split("<input").skip(1) {
        let tag = &piece[..piece.find('>').unwrap_or(piece.len())];
        let hidden = attribute(tag, "type").as_deref() == Some("hidden");
        if hidden
            && let (Some(name), Some(value)) = (attribute(tag, "name"), attribute(tag, "value"))
        {
            inputs.push((name, value));
        }
    }
    inputs
}

/// A PKCE verifier and its S256 challenge.
struct Pkce {
    verifier: String,
    challenge: String,
}

fn pkce() -> Pkce {
    let verifier = format!(
        "{}-{}",
        outreach_runtime::ids::new_secret(""),
        "x".repeat(10)
    );
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    Pkce {
        verifier,
        challenge,
    }
}

fn query(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The standard authorization request, with `extra` added or (when empty) removed.
fn authorize_path(
    client_id: &str,
    redirect_uri: &str,
    challenge: &str,
    extra: &[(&str, &str)],
) -> String {
    let mut pairs = vec![
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        ("state", "st4te-xyz"),
    ];
    for (name, value) in extra {
        pairs.retain(|(existing, _)| existing != name);
        if !value.is_empty() {
            pairs.push((name, value));
        }
    }
    format!("/oauth/authorize?{}", query(&pairs))
}

async fn register(app: &TestApp, metadata: Value) -> ApiResponse {
    app.send(
        Method::POST,
        "/oauth/register",
        Auth::None,
        Body::Json(metadata),
    )
    .await
}

async fn register_client(app: &TestApp, redirect_uris: &[&str]) -> String {
    let response = register(
        app,
        json!({
            "client_name": "Test Assistant",
            "redirect_uris": redirect_uris,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }),
    )
    .await;
    response.expect(201)["client_id"]
        .as_str()
        .expect("a client id")
        .to_owned()
}

async fn token(app: &TestApp, form: &[(&str, &str)]) -> ApiResponse {
    let response = app
        .client
        .post(app.url("/oauth/token"))
        .form(form)
        .send()
        .await
        .expect("POST /oauth/token");
    ApiResponse::read(response).await
}

/// Asserts an OAuth error body (`{error, error_description}`).
#[track_caller]
fn expect_oauth_error(response: &ApiResponse, status: u16, error: &str) {
    assert_eq!(response.status.as_u16(), status, "{}", response.body);
    assert_eq!(response.body["error"], json!(error), "{}", response.body);
    assert!(
        response.body["error_description"]
            .as_str()
            .is_some_and(|text| !text.is_empty()),
        "{}",
        response.body
    );
}

/// Shows the consent page for `path` (signed in) and posts `decision`; returns the redirect.
async fn consent(browser: &Browser, path: &str, decision: &str) -> Page {
    let page = browser.get(path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let mut form = hidden_inputs(&page.body, "consent");
    form.push(("decision".into(), decision.into()));
    browser.post_form("/oauth/authorize", &form).await
}

/// A code for `client_id` at `redirect_uri`, after signing in and allowing.
async fn authorize(
    app: &TestApp,
    browser: &Browser,
    client_id: &str,
    redirect_uri: &str,
    pkce: &Pkce,
) -> String {
    let _ = app;
    let answer = consent(
        browser,
        &authorize_path(client_id, redirect_uri, &pkce.challenge, &[]),
        "allow",
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    assert_eq!(answer.redirect_param("state").as_deref(), Some("st4te-xyz"));
    answer.redirect_param("code").expect("a code")
}

async fn exchange(
    app: &TestApp,
    client_id: &str,
    redirect_uri: &str,
    code: &str,
    verifier: &str,
) -> ApiResponse {
    token(
        app,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("redirect_uri", redirect_uri),
            ("code", code),
            ("code_verifier", verifier),
        ],
    )
    .await
}

async fn refresh(app: &TestApp, client_id: &str, refresh_token: &str) -> ApiResponse {
    token(
        app,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", client_id),
            ("refresh_token", refresh_token),
        ],
    )
    .await
}

/// A signed-in owner with a registered client and a complete token response.
async fn connected(app: &TestApp) -> (String, Value) {
    let client_id = register_client(app, &[REDIRECT]).await;
    let browser = Browser::new(app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    let code = authorize(app, &browser, &client_id, REDIRECT, &pkce).await;
    let tokens = exchange(app, &client_id, REDIRECT, &code, &pkce.verifier)
        .await
        .expect(200)
        .clone();
    (client_id, tokens)
}

fn text(value: &Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("no `{field}` in {value}"))
        .to_owned()
}

async fn workspace(app: &TestApp, token: &str) -> ApiResponse {
    app.send(
        Method::GET,
        "/api/v1/workspace",
        Auth::Key(token),
        Body::Empty,
    )
    .await
}

async fn count(app: &TestApp, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(app.db.pool())
        .await
        .expect("count")
}

/// Tokens of grants that are not revoked: what a refused request must not have created.
async fn live_tokens(app: &TestApp) -> i64 {
    count(
        app,
        "select count(*) from oauth_tokens t join oauth_grants g on g.id = t.grant_id \
         where g.revoked_at is null and t.revoked_at is null",
    )
    .await
}

// ----- discovery -----

#[tokio::test]
async fn metadata_documents_name_one_issuer_and_the_mcp_resource() {
    let app = spawn_app().await;
    let issuer = app.base_url.clone();
    let mcp = format!("{issuer}/api/mcp");
    for path in [
        "/.well-known/oauth-protected-resource/api/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let document = app.send(Method::GET, path, Auth::None, Body::Empty).await;
        let body = document.expect(200);
        assert_eq!(body["resource"], json!(mcp));
        assert_eq!(body["authorization_servers"], json!([issuer]));
        assert_eq!(body["scopes_supported"], json!(["read", "write", "send"]));
        assert_eq!(body["bearer_methods_supported"], json!(["header"]));
    }
    let response = app
        .send(
            Method::GET,
            "/.well-known/oauth-authorization-server",
            Auth::None,
            Body::Empty,
        )
        .await;
    let server = response.expect(200);
    assert_eq!(server["issuer"], json!(issuer));
    for (field, path) in [
        ("authorization_endpoint", "/oauth/authorize"),
        ("token_endpoint", "/oauth/token"),
        ("registration_endpoint", "/oauth/register"),
        ("revocation_endpoint", "/oauth/revoke"),
    ] {
        assert_eq!(server[field], json!(format!("{issuer}{path}")), "{field}");
    }
    assert_eq!(server["response_types_supported"], json!(["code"]));
    assert_eq!(server["code_challenge_methods_supported"], json!(["S256"]));
    assert_eq!(
        server["grant_types_supported"],
        json!(["authorization_code", "refresh_token"])
    );
    assert_eq!(
        server["token_endpoint_auth_methods_supported"],
        json!(["none"])
    );
    assert_eq!(server["client_id_metadata_document_supported"], json!(true));
    assert_eq!(
        server["authorization_response_iss_parameter_supported"],
        json!(true)
    );

    // A 401 on MCP leads to the protected-resource document.
    let (status, headers, _) = app
        .mcp_raw(
            None,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
    assert_eq!(status.as_u16(), 401);
    let challenge = headers["www-authenticate"].to_str().unwrap_or_default();
    assert!(
        challenge.contains(&format!(
            "resource_metadata=\"{issuer}/.well-known/oauth-protected-resource/api/mcp\""
        )),
        "{challenge}"
    );

    // Browser-based clients may read them and call the endpoints cross-origin.
    let cors = app
        .client
        .get(app.url("/.well-known/oauth-authorization-server"))
        .header("origin", "https://client.example")
        .send()
        .await
        .expect("GET with an Origin");
    assert_eq!(cors.headers()["access-control-allow-origin"], "*");
    let preflight = app
        .client
        .request(Method::OPTIONS, app.url("/oauth/token"))
        .header("origin", "https://client.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .expect("preflight");
    assert!(preflight.status().is_success(), "{}", preflight.status());
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    assert!(
        preflight
            .headers()
            .get("access-control-allow-credentials")
            .is_none()
    );
}

// ----- dynamic client registration -----

#[tokio::test]
async fn registration_echoes_the_metadata_of_a_public_client() {
    let app = spawn_app().await;
    let response = register(
        &app,
        json!({
            "client_name": "Claude",
            "redirect_uris": ["https://claude.example/api/callback", "http://localhost:33418/callback"],
            "grant_types": ["authorization_code", "refresh_token"],
            "client_uri": "https://claude.example",
            "application_type": "native",
        }),
    )
    .await;
    let body = response.expect(201);
    assert_eq!(body["application_type"], json!("native"));
    assert!(text(body, "client_id").starts_with("cli_"), "{body}");
    assert!(body["client_id_issued_at"].as_i64().is_some(), "{body}");
    assert_eq!(body["client_name"], json!("Claude"));
    assert_eq!(
        body["redirect_uris"][1],
        json!("http://localhost:33418/callback")
    );
    assert_eq!(body["token_endpoint_auth_method"], json!("none"));
    assert_eq!(body["response_types"], json!(["code"]));
    assert_eq!(body["client_uri"], json!("https://claude.example"));
    assert!(body.get("client_secret").is_none());
    assert_eq!(response.header("cache-control"), Some("no-store"));
}

#[tokio::test]
async fn registration_refuses_bad_metadata_and_stores_nothing() {
    let app = spawn_app().await;
    let cases = [
        (json!({"client_name": "x"}), "invalid_redirect_uri"),
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (
            json!({"redirect_uris": "https://a.example/cb"}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["http://evil.example/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb#fragment"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["javascript:alert(1)"]}),
            "invalid_redirect_uri",
        ),
        (json!({"redirect_uris": ["cb"]}), "invalid_redirect_uri"),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "token_endpoint_auth_method": "client_secret_basic"}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "grant_types": ["implicit"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "grant_types": ["refresh_token"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "response_types": ["token"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "scope": "read admin"}),
            "invalid_client_metadata",
        ),
        (json!(["https://a.example/cb"]), "invalid_client_metadata"),
        (
            json!({"redirect_uris": ["http://127.0.0.1:7777/cb"], "application_type": "web"}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "application_type": "desktop"}),
            "invalid_client_metadata",
        ),
    ];
    for (metadata, error) in cases {
        let response = register(&app, metadata.clone()).await;
        assert_eq!(
            response.status.as_u16(),
            400,
            "{metadata}: {}",
            response.body
        );
        assert_eq!(
            response.body["error"],
            json!(error),
            "{metadata}: {}",
            response.body
        );
    }
    let not_json = app
        .send(
            Method::POST,
            "/oauth/register",
            Auth::None,
            Body::Raw(b"{not json".to_vec(), Some("application/json")),
        )
        .await;
    expect_oauth_error(&not_json, 400, "invalid_client_metadata");
    assert_eq!(count(&app, "select count(*) from oauth_clients").await, 0);
}

// ----- the code flow -----

#[tokio::test]
async fn code_flow_with_pkce_gives_tokens_accepted_on_rest_and_mcp() {
    let app = spawn_app().await;
    let client_id = register_client(&app, &[REDIRECT]).await;
    let browser = Browser::new(&app);
    let pkce = pkce();
    let path = authorize_path(
        &client_id,
        REDIRECT,
        &pkce.challenge,
        &[("scope", "read write send")],
    );

    // Not signed in: to /login, which comes back to this very request.
    let first = browser.get(&path).await;
    assert_eq!(first.status, StatusCode::SEE_OTHER, "{}", first.body);
    let login = first.location.clone().expect("a redirect to sign in");
    assert!(login.starts_with("/login?next="), "{login}");
    let next: String = url::form_urlencoded::parse(login.trim_start_matches("/login?").as_bytes())
        .find(|(name, _)| name == "next")
        .map(|(_, value)| value.into_owned())
        .expect("next");
    assert_eq!(next, path);
    let form = browser.get(&login).await;
    let mut fields = hidden_inputs(&form.body, "login-form");
    fields.retain(|(name, _)| name != "email" && name != "password");
    fields.push(("email".into(), OWNER_EMAIL.into()));
    fields.push(("password".into(), PASSWORD.into()));
    let signed_in = browser.post_form("/login", &fields).await;
    assert_eq!(
        signed_in.status,
        StatusCode::SEE_OTHER,
        "{}",
        signed_in.body
    );
    assert_eq!(signed_in.location.as_deref(), Some(path.as_str()));

    // The consent page: the client, its redirect host with a loopback warning, the scopes.
    let page = browser.get(&path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("Test Assistant"));
    assert!(
        page.body.contains("id=\"loopback-warning\""),
        "{}",
        page.body
    );
    let granted = &page.body[page.body.find("id=\"granted-scopes\"").expect("granted")..];
    let granted = &granted[..granted.find("</ul>").unwrap_or(granted.len())];
    assert!(granted.contains("data-scope=\"read\"") && granted.contains("data-scope=\"write\""));
    assert!(!granted.contains("data-scope=\"send\""), "{granted}");
    let refused = &page.body[page.body.find("id=\"refused-scopes\"").expect("refused")..];
    assert!(
        refused.contains("data-scope=\"send\"") && refused.contains("sending terms"),
        "{refused}"
    );
    let headers = browser
        .client
        .get(browser.url(&path))
        .send()
        .await
        .expect("GET");
    assert_eq!(headers.headers()["x-frame-options"], "DENY");

    let mut form = hidden_inputs(&page.body, "consent");
    form.push(("decision".into(), "allow".into()));
    let answer = browser.post_form("/oauth/authorize", &form).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    assert!(
        answer
            .location
            .as_deref()
            .unwrap_or_default()
            .starts_with(REDIRECT)
    );
    assert_eq!(answer.redirect_param("state").as_deref(), Some("st4te-xyz"));
    assert_eq!(answer.redirect_param("iss"), Some(app.base_url.clone()));
    let code = answer.redirect_param("code").expect("a code");
    assert!(code.starts_with("oac_"), "{code}");

    let response = exchange(&app, &client_id, REDIRECT, &code, &pkce.verifier).await;
    let tokens = response.expect(200).clone();
    assert_eq!(response.header("cache-control"), Some("no-store"));
    assert_eq!(response.header("pragma"), Some("no-cache"));
    assert_eq!(tokens["token_type"], json!("Bearer"));
    assert_eq!(tokens["expires_in"], json!(3600));
    assert_eq!(tokens["scope"], json!("read write"));
    let access = text(&tokens, "access_token");
    assert!(access.starts_with("oat_") && text(&tokens, "refresh_token").starts_with("ort_"));

    let caller = workspace(&app, &access).await;
    let body = caller.expect(200);
    assert_eq!(body["caller"]["credential_kind"], json!("oauth_token"));
    assert_eq!(body["caller"]["scopes"], json!(["read", "write"]));
    let tools = app.mcp_tools(&access).await;
    assert!(!tools.is_empty());
    let grant: (String, String, String) =
        sqlx::query_as("select client_source, scopes, resource from oauth_grants")
            .fetch_one(app.db.pool())
            .await
            .expect("the grant");
    assert_eq!(
        grant,
        (
            "registration".into(),
            "read,write".into(),
            format!("{}/api/mcp", app.base_url)
        )
    );
    assert_eq!(count(&app, "select count(*) from oauth_tokens where token_hash like 'oat_%' or token_hash like 'ort_%'").await, 0, "only hashes are stored");
}

#[tokio::test]
async fn refresh_rotates_and_a_reused_refresh_token_revokes_the_grant() {
    let app = spawn_app().await;
    let (client_id, tokens) = connected(&app).await;
    let first_refresh = text(&tokens, "refresh_token");
    let rotated = refresh(&app, &client_id, &first_refresh).await;
    let rotated = rotated.expect(200).clone();
    assert_eq!(rotated["scope"], json!("read write"));
    assert_ne!(text(&rotated, "refresh_token"), first_refresh);
    let new_access = text(&rotated, "access_token");
    workspace(&app, &new_access).await.expect(200);

    // Presenting the rotated-out token again: someone else has a copy; the whole grant ends.
    expect_oauth_error(
        &refresh(&app, &client_id, &first_refresh).await,
        400,
        "invalid_grant",
    );
    workspace(&app, &new_access)
        .await
        .expect_error(401, "credential_revoked");
    workspace(&app, &text(&tokens, "access_token"))
        .await
        .expect_error(401, "credential_revoked");
    expect_oauth_error(
        &refresh(&app, &client_id, &text(&rotated, "refresh_token")).await,
        400,
        "invalid_grant",
    );
    assert_eq!(live_tokens(&app).await, 0);
}

#[tokio::test]
async fn refresh_may_narrow_the_scope_but_not_widen_it() {
    let app = spawn_app().await;
    let (client_id, tokens) = connected(&app).await;
    let refresh_token = text(&tokens, "refresh_token");
    let wider = token(
        &app,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", &client_id),
            ("refresh_token", &refresh_token),
            ("scope", "read write send"),
        ],
    )
    .await;
    expect_oauth_error(&wider, 400, "invalid_scope");
    let narrower = token(
        &app,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", &client_id),
            ("refresh_token", &refresh_token),
            ("scope", "read"),
        ],
    )
    .await;
    let narrower = narrower.expect(200).clone();
    assert_eq!(narrower["scope"], json!("read"));
    let caller = workspace(&app, &text(&narrower, "access_token")).await;
    assert_eq!(caller.expect(200)["caller"]["scopes"], json!(["read"]));
    // The rotated refresh token keeps the grant's scopes (RFC 6749 section 6).
    let again = refresh(&app, &client_id, &text(&narrower, "refresh_token")).await;
    assert_eq!(again.expect(200)["scope"], json!("read write"));
}

#[tokio::test]
async fn refresh_tokens_expire_after_thirty_days_and_belong_to_their_client() {
    let app = spawn_app().await;
    let (client_id, tokens) = connected(&app).await;
    let other = register_client(&app, &[REDIRECT]).await;
    let refresh_token = text(&tokens, "refresh_token");
    expect_oauth_error(
        &refresh(&app, &other, &refresh_token).await,
        400,
        "invalid_grant",
    );
    app.clock.advance_ms(60 * 60 * 1000 + 1);
    workspace(&app, &text(&tokens, "access_token"))
        .await
        .expect_error(401, "credential_expired");
    app.clock.advance_ms(30 * 24 * 60 * 60 * 1000);
    expect_oauth_error(
        &refresh(&app, &client_id, &refresh_token).await,
        400,
        "invalid_grant",
    );
}

// ----- PKCE, codes, redirect URIs, resources, scopes -----

#[tokio::test]
async fn pkce_is_required_and_plain_is_refused() {
    let app = spawn_app().await;
    let client_id = register_client(&app, &[REDIRECT]).await;
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    for extra in [
        vec![("code_challenge_method", "")],
        vec![("code_challenge_method", "plain")],
        vec![("code_challenge", "")],
        vec![("code_challenge", "too-short")],
    ] {
        let page = browser
            .get(&authorize_path(
                &client_id,
                REDIRECT,
                &pkce.challenge,
                &extra,
            ))
            .await;
        assert_eq!(
            page.status,
            StatusCode::SEE_OTHER,
            "{extra:?}: {}",
            page.body
        );
        assert_eq!(
            page.redirect_param("error").as_deref(),
            Some("invalid_request"),
            "{extra:?}"
        );
        assert_eq!(page.redirect_param("state").as_deref(), Some("st4te-xyz"));
        assert_eq!(page.redirect_param("iss"), Some(app.base_url.clone()));
        assert!(page.redirect_param("code").is_none());
    }

    // At the token endpoint: a missing or malformed verifier is a bad request, a wrong one a bad
    // grant; none of them uses the code up.
    let code = authorize(&app, &browser, &client_id, REDIRECT, &pkce).await;
    let no_verifier = token(
        &app,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("redirect_uri", REDIRECT),
            ("code", &code),
        ],
    )
    .await;
    expect_oauth_error(&no_verifier, 400, "invalid_request");
    expect_oauth_error(
        &exchange(&app, &client_id, REDIRECT, &code, "short").await,
        400,
        "invalid_request",
    );
    let wrong = pkce_wrong(&pkce);
    expect_oauth_error(
        &exchange(&app, &client_id, REDIRECT, &code, &wrong).await,
        400,
        "invalid_grant",
    );
    assert_eq!(live_tokens(&app).await, 0);
    exchange(&app, &client_id, REDIRECT, &code, &pkce.verifier)
        .await
        .expect(200);
}

fn pkce_wrong(pkce: &Pkce) -> String {
    let mut wrong = pkce.verifier.clone();
    wrong.replace_range(0..1, if wrong.starts_with('A') { "B" } else { "A" });
    wrong
}

#[tokio::test]
async fn a_replayed_code_is_refused_and_revokes_what_it_issued() {
    let app = spawn_app().await;
    let client_id = register_client(&app, &[REDIRECT]).await;
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    let code = authorize(&app, &browser, &client_id, REDIRECT, &pkce).await;
    let tokens = exchange(&app, &client_id, REDIRECT, &code, &pkce.verifier)
        .await
        .expect(200)
        .clone();
    let access = text(&tokens, "access_token");
    workspace(&app, &access).await.expect(200);
    let replay = exchange(&app, &client_id, REDIRECT, &code, &pkce.verifier).await;
    expect_oauth_error(&replay, 400, "invalid_grant");
    workspace(&app, &access)
        .await
        .expect_error(401, "credential_revoked");
    expect_oauth_error(
        &refresh(&app, &client_id, &text(&tokens, "refresh_token")).await,
        400,
        "invalid_grant",
    );
    assert_eq!(live_tokens(&app).await, 0);
}

#[tokio::test]
async fn an_expired_code_is_refused() {
    let app = spawn_app().await;
    let client_id = register_client(&app, &[REDIRECT]).await;
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    let code = authorize(&app, &browser, &client_id, REDIRECT, &pkce).await;
    app.clock.advance_ms(10 * 60 * 1000 + 1);
    let expired = exchange(&app, &client_id, REDIRECT, &code, &pkce.verifier).await;
    expect_oauth_error(&expired, 400, "invalid_grant");
    assert_eq!(count(&app, "select count(*) from oauth_tokens").await, 0);
}

#[tokio::test]
async fn redirect_uris_match_exactly_except_the_loopback_port() {
    let app = spawn_app().await;
    let client_id = register_client(&app, &[REDIRECT, WEB_REDIRECT]).await;
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();

    // Unregistered redirect URIs: a page for the person, never a redirect to them.
    for unregistered in [
        "https://evil.example/oauth/callback",
        "https://app.example/oauth/callback/",
        "https://app.example/oauth/callback?x=1",
        "http://localhost:5555/callback",
        "http://127.0.0.1:5555/other",
    ] {
        let page = browser
            .get(&authorize_path(
                &client_id,
                unregistered,
                &pkce.challenge,
                &[],
            ))
            .await;
        page.expect_error_page(400, "is not one registered");
    }
    // Unknown or missing client: a page too.
    browser
        .get(&authorize_path(
            "cli_00000000000000000000",
            REDIRECT,
            &pkce.challenge,
            &[],
        ))
        .await
        .expect_error_page(400, "is registered");
    browser
        .get(&authorize_path(
            &client_id,
            REDIRECT,
            &pkce.challenge,
            &[("client_id", "")],
        ))
        .await
        .expect_error_page(400, "client_id");
    browser
        .get(&authorize_path(
            &client_id,
            REDIRECT,
            &pkce.challenge,
            &[("redirect_uri", "")],
        ))
        .await
        .expect_error_page(400, "redirect_uri");

    // RFC 8252: a native app's loopback listener may be on any port.
    let with_port = "http://127.0.0.1:54321/callback";
    let code = authorize(&app, &browser, &client_id, with_port, &pkce).await;
    // The token request must repeat the authorization request's URI exactly.
    expect_oauth_error(
        &exchange(&app, &client_id, REDIRECT, &code, &pkce.verifier).await,
        400,
        "invalid_grant",
    );
    exchange(&app, &client_id, with_port, &code, &pkce.verifier)
        .await
        .expect(200);

    // A code for one client is useless to another.
    let other = register_client(&app, &[REDIRECT]).await;
    let code = authorize(&app, &browser, &client_id, REDIRECT, &pkce).await;
    expect_oauth_error(
        &exchange(&app, &other, REDIRECT, &code, &pkce.verifier).await,
        400,
        "invalid_grant",
    );
}

#[tokio::test]
async fn a_token_for_another_resource_is_invalid_target() {
    let app = spawn_app().await;
    let client_id = register_client(&app, &[REDIRECT]).await;
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    let mcp = format!("{}/api/mcp", app.base_url);
    let page = browser
        .get(&authorize_path(
            &client_id,
            REDIRECT,
            &pkce.challenge,
            &[("resource", "https://other.example/api/mcp")],
        ))
        .await;
    assert_eq!(
        page.redirect_param("error").as_deref(),
        Some("invalid_target")
    );
    assert_eq!(page.redirect_param("state").as_deref(), Some("st4te-xyz"));

    let answer = consent(
        &browser,
        &authorize_path(&client_id, REDIRECT, &pkce.challenge, &[("resource", &mcp)]),
        "allow",
    )
    .await;
    let code = answer.redirect_param("code").expect("a code");
    let other = token(
        &app,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("redirect_uri", REDIRECT),
            ("code", &code),
            ("code_verifier", &pkce.verifier),
            ("resource", &format!("{}/api/v1", app.base_url)),
        ],
    )
    .await;
    expect_oauth_error(&other, 400, "invalid_target");
    assert_eq!(count(&app, "select count(*) from oauth_tokens").await, 0);
    let right = token(
        &app,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("redirect_uri", REDIRECT),
            ("code", &code),
            ("code_verifier", &pkce.verifier),
            ("resource", &mcp),
        ],
    )
    .await;
    right.expect(200);
}

#[tokio::test]
async fn bad_authorization_requests_go_back_with_the_rfc_error() {
    let app = spawn_app().await;
    let client_id = register_client(&app, &[REDIRECT]).await;
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    for (extra, error) in [
        (vec![("scope", "read admin")], "invalid_scope"),
        (
            vec![("response_type", "token")],
            "unsupported_response_type",
        ),
        (vec![("response_type", "")], "invalid_request"),
    ] {
        let page = browser
            .get(&authorize_path(
                &client_id,
                REDIRECT,
                &pkce.challenge,
                &extra,
            ))
            .await;
        assert_eq!(
            page.redirect_param("error").as_deref(),
            Some(error),
            "{extra:?}"
        );
        assert_eq!(page.redirect_param("iss"), Some(app.base_url.clone()));
    }
    let repeated = format!(
        "{}&state=again",
        authorize_path(&client_id, REDIRECT, &pkce.challenge, &[])
    );
    assert_eq!(
        browser
            .get(&repeated)
            .await
            .redirect_param("error")
            .as_deref(),
        Some("invalid_request")
    );
    let repeated_redirect = format!(
        "{}&redirect_uri={}",
        authorize_path(&client_id, REDIRECT, &pkce.challenge, &[]),
        encode(WEB_REDIRECT)
    );
    browser
        .get(&repeated_redirect)
        .await
        .expect_error_page(400, "more than once");

    // Deny: access_denied back to the client, and nothing granted.
    let denied = consent(
        &browser,
        &authorize_path(&client_id, REDIRECT, &pkce.challenge, &[]),
        "deny",
    )
    .await;
    assert_eq!(
        denied.redirect_param("error").as_deref(),
        Some("access_denied")
    );
    assert_eq!(denied.redirect_param("state").as_deref(), Some("st4te-xyz"));
    assert_eq!(count(&app, "select count(*) from oauth_grants").await, 0);
}

/// The sign-in page a redirect points to and the `next` it comes back to.
#[track_caller]
fn expect_sign_in(page: &Page, path: &str) {
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    let login = page.location.as_deref().expect("a redirect to sign in");
    assert!(login.starts_with("/login?next="), "{login}");
    let next = url::form_urlencoded::parse(login.trim_start_matches("/login?").as_bytes())
        .find(|(name, _)| name == "next")
        .map(|(_, value)| value.into_owned());
    assert_eq!(next.as_deref(), Some(path));
}

#[tokio::test]
async fn nothing_is_validated_or_redirected_before_sign_in() {
    // RFC 9700 section 4.11.2: registration is open, so an error sent to a registered redirect URI
    // for an anonymous browser would make this server a redirector to any URI anyone registers.
    let app = spawn_app().await;
    let evil = "https://evil.example/";
    let client_id = register_client(&app, &[evil]).await;
    let browser = Browser::new(&app);
    let pkce = pkce();
    let bad_pkce = authorize_path(
        &client_id,
        evil,
        &pkce.challenge,
        &[("code_challenge", "too-short")],
    );
    let unknown_client = authorize_path("cli_00000000000000000000", REDIRECT, &pkce.challenge, &[]);
    let unregistered = authorize_path(
        &client_id,
        "https://elsewhere.example/",
        &pkce.challenge,
        &[],
    );
    let no_response_type =
        authorize_path(&client_id, evil, &pkce.challenge, &[("response_type", "")]);
    for path in [&bad_pkce, &unknown_client, &unregistered, &no_response_type] {
        expect_sign_in(&browser.get(path).await, path);
    }
    // Bare and garbled requests too: sign-in comes first, whatever the parameters.
    expect_sign_in(&browser.get("/oauth/authorize").await, "/oauth/authorize?");
    let garbled =
        "/oauth/authorize?client_id=a&client_id=b&redirect_uri=https%3A%2F%2Fevil.example%2F";
    expect_sign_in(&browser.get(garbled).await, garbled);

    // Signed in, the same requests are judged: an error back to the client once its redirect URI
    // is trusted, a page before that.
    browser.sign_in(OWNER_EMAIL).await;
    let page = browser.get(&bad_pkce).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert!(
        page.location
            .as_deref()
            .unwrap_or_default()
            .starts_with(evil),
        "{:?}",
        page.location
    );
    assert_eq!(
        page.redirect_param("error").as_deref(),
        Some("invalid_request")
    );
    assert!(page.redirect_param("error_description").is_some());
    assert_eq!(page.redirect_param("state").as_deref(), Some("st4te-xyz"));
    assert_eq!(page.redirect_param("iss"), Some(app.base_url.clone()));
    assert!(page.redirect_param("code").is_none());
    browser
        .get(&unknown_client)
        .await
        .expect_error_page(400, "is registered");
    browser
        .get(&unregistered)
        .await
        .expect_error_page(400, "is not one registered");
    browser
        .get(garbled)
        .await
        .expect_error_page(400, "more than once");
    assert_eq!(count(&app, "select count(*) from oauth_grants").await, 0);
}

#[tokio::test]
async fn a_forged_csrf_token_on_the_consent_form_grants_nothing() {
    let app = spawn_app().await;
    let client_id = register_client(&app, &[REDIRECT]).await;
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    let page = browser
        .get(&authorize_path(&client_id, REDIRECT, &pkce.challenge, &[]))
        .await;
    let form = hidden_inputs(&page.body, "consent");
    for forged in [
        "",
        "not-the-token",
        "0000000000000000000000000000000000000000000",
    ] {
        let mut fields: Vec<(String, String)> = form
            .iter()
            .filter(|(name, _)| name != "csrf_token")
            .cloned()
            .collect();
        if !forged.is_empty() {
            fields.push(("csrf_token".into(), forged.into()));
        }
        fields.push(("decision".into(), "allow".into()));
        browser
            .post_form("/oauth/authorize", &fields)
            .await
            .expect_error_page(403, "could not be verified");
    }
    // Another person's session token does not work either.
    let other = Browser::new(&app);
    let mut fields = form.clone();
    fields.push(("decision".into(), "allow".into()));
    let anonymous = other.post_form("/oauth/authorize", &fields).await;
    assert_eq!(anonymous.status, StatusCode::SEE_OTHER);
    assert!(
        anonymous
            .location
            .as_deref()
            .unwrap_or_default()
            .starts_with("/login?next=")
    );
    assert_eq!(count(&app, "select count(*) from oauth_grants").await, 0);
    assert_eq!(count(&app, "select count(*) from oauth_codes").await, 0);
}

#[tokio::test]
async fn a_member_can_grant_only_read_and_sees_why() {
    let app = spawn_app().await;
    app.add_member("member@acme.test", Role::Member).await;
    let client_id = register_client(&app, &[REDIRECT]).await;
    let browser = Browser::new(&app);
    browser.sign_in("member@acme.test").await;
    let pkce = pkce();
    let path = authorize_path(
        &client_id,
        REDIRECT,
        &pkce.challenge,
        &[("scope", "read write")],
    );
    let page = browser.get(&path).await;
    let refused = &page.body[page
        .body
        .find("id=\"refused-scopes\"")
        .expect("refused scopes")..];
    assert!(
        refused.contains("data-scope=\"write\"") && refused.contains("member"),
        "{refused}"
    );
    let answer = consent(&browser, &path, "allow").await;
    let code = answer.redirect_param("code").expect("a code");
    let tokens = exchange(&app, &client_id, REDIRECT, &code, &pkce.verifier).await;
    assert_eq!(tokens.expect(200)["scope"], json!("read"));
}

#[tokio::test]
async fn a_person_in_several_workspaces_chooses_one() {
    let app = spawn_app().await;
    let (other_id, _) = app.other_workspace("Globex", "boss@globex.test").await;
    admin::add_member(
        &app.db,
        &app.clock,
        &other_id,
        OWNER_EMAIL,
        Role::Member,
        None,
    )
    .await
    .expect("add the owner to Globex");
    let client_id = register_client(&app, &[REDIRECT]).await;
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    let page = browser
        .get(&authorize_path(&client_id, REDIRECT, &pkce.challenge, &[]))
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains("id=\"choose-workspace\""),
        "{}",
        page.body
    );
    assert!(page.body.contains(&format!("value=\"{other_id}\"")));
    let path = authorize_path(
        &client_id,
        REDIRECT,
        &pkce.challenge,
        &[("workspace_id", &other_id)],
    );
    let answer = consent(&browser, &path, "allow").await;
    let code = answer.redirect_param("code").expect("a code");
    let tokens = exchange(&app, &client_id, REDIRECT, &code, &pkce.verifier)
        .await
        .expect(200)
        .clone();
    assert_eq!(tokens["scope"], json!("read"));
    let caller = workspace(&app, &text(&tokens, "access_token")).await;
    assert_eq!(caller.expect(200)["workspace"]["id"], json!(other_id));
    browser
        .get(&authorize_path(
            &client_id,
            REDIRECT,
            &pkce.challenge,
            &[("workspace_id", "wsp_00000000000000000000")],
        ))
        .await
        .expect_error_page(400, "not one of yours");
}

// ----- token and revocation endpoints -----

#[tokio::test]
async fn the_token_endpoint_refuses_malformed_requests() {
    let app = spawn_app().await;
    let client_id = register_client(&app, &[REDIRECT]).await;
    expect_oauth_error(
        &token(&app, &[("client_id", &client_id)]).await,
        400,
        "invalid_request",
    );
    expect_oauth_error(
        &token(
            &app,
            &[("grant_type", "password"), ("client_id", &client_id)],
        )
        .await,
        400,
        "unsupported_grant_type",
    );
    expect_oauth_error(
        &token(
            &app,
            &[
                ("grant_type", "authorization_code"),
                ("client_id", "cli_00000000000000000000"),
                ("code", "x"),
            ],
        )
        .await,
        401,
        "invalid_client",
    );
    expect_oauth_error(
        &token(
            &app,
            &[("grant_type", "authorization_code"), ("code", "oac_x")],
        )
        .await,
        400,
        "invalid_request",
    );
    expect_oauth_error(
        &exchange(&app, &client_id, REDIRECT, "oac_unknown", &pkce().verifier).await,
        400,
        "invalid_grant",
    );
    expect_oauth_error(
        &refresh(&app, &client_id, "ort_unknown").await,
        400,
        "invalid_grant",
    );
    let json_body = app
        .send(
            Method::POST,
            "/oauth/token",
            Auth::None,
            Body::Json(json!({"grant_type": "refresh_token", "client_id": client_id})),
        )
        .await;
    expect_oauth_error(&json_body, 400, "invalid_request");
}

async fn revoke(
    app: &TestApp,
    client_id: &str,
    token_value: &str,
    hint: Option<&str>,
) -> ApiResponse {
    let mut form = vec![("token", token_value), ("client_id", client_id)];
    if let Some(hint) = hint {
        form.push(("token_type_hint", hint));
    }
    let response = app
        .client
        .post(app.url("/oauth/revoke"))
        .form(&form)
        .send()
        .await
        .expect("POST /oauth/revoke");
    ApiResponse::read(response).await
}

#[tokio::test]
async fn revocation_ends_an_access_token_or_with_a_refresh_token_the_grant() {
    let app = spawn_app().await;
    let (client_id, tokens) = connected(&app).await;
    revoke(&app, &client_id, "oat_not_a_token", None)
        .await
        .expect(200);
    revoke(
        &app,
        &client_id,
        &text(&tokens, "access_token"),
        Some("access_token"),
    )
    .await
    .expect(200);
    workspace(&app, &text(&tokens, "access_token"))
        .await
        .expect_error(401, "credential_revoked");
    let rotated = refresh(&app, &client_id, &text(&tokens, "refresh_token"))
        .await
        .expect(200)
        .clone();
    workspace(&app, &text(&rotated, "access_token"))
        .await
        .expect(200);

    // Revoking a refresh token is the client saying goodbye: the grant ends, hint or no hint.
    let other = register_client(&app, &[REDIRECT]).await;
    expect_oauth_error(
        &revoke(&app, &other, &text(&rotated, "refresh_token"), None).await,
        401,
        "invalid_client",
    );
    revoke(
        &app,
        &client_id,
        &text(&rotated, "refresh_token"),
        Some("access_token"),
    )
    .await
    .expect(200);
    workspace(&app, &text(&rotated, "access_token"))
        .await
        .expect_error(401, "credential_revoked");
    expect_oauth_error(
        &refresh(&app, &client_id, &text(&rotated, "refresh_token")).await,
        400,
        "invalid_grant",
    );
    assert_eq!(live_tokens(&app).await, 0);
    let missing = app
        .client
        .post(app.url("/oauth/revoke"))
        .form(&[("client_id", client_id.as_str())])
        .send()
        .await
        .expect("POST");
    expect_oauth_error(&ApiResponse::read(missing).await, 400, "invalid_request");
}

#[tokio::test]
async fn a_disconnected_grant_refuses_its_tokens() {
    let app = spawn_app().await;
    let (client_id, tokens) = connected(&app).await;
    sqlx::query("update oauth_grants set revoked_at = $1")
        .bind(app.clock.now_ms())
        .execute(app.db.pool())
        .await
        .expect("disconnect");
    workspace(&app, &text(&tokens, "access_token"))
        .await
        .expect_error(401, "credential_revoked");
    expect_oauth_error(
        &refresh(&app, &client_id, &text(&tokens, "refresh_token")).await,
        400,
        "invalid_grant",
    );
}

// ----- client ID metadata documents -----

/// A small server for metadata documents, counting fetches per path.
struct DocumentServer {
    base: String,
    fetches: Arc<AtomicUsize>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl DocumentServer {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

async fn document_server() -> DocumentServer {
    use axum::http::header;
    use axum::response::IntoResponse;
    use axum::routing::get;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let fetches = Arc::new(AtomicUsize::new(0));
    let document = |id: String, cache: &'static str| {
        move || {
            let body = json!({
                "client_id": id,
                "client_name": "Document Client",
                "redirect_uris": [REDIRECT],
                "grant_types": ["authorization_code", "refresh_token"],
                "token_endpoint_auth_method": "none",
            });
            async move { ([(header::CACHE_CONTROL, cache)], axum::Json(body)).into_response() }
        }
    };
    let counter = fetches.clone();
    let counted = base.clone();
    let router = axum::Router::new()
        .route("/client.json", get(document(format!("{base}/client.json"), "max-age=60")))
        .route("/nostore.json", get(document(format!("{base}/nostore.json"), "no-store")))
        .route(
            "/counted.json",
            get(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                let body = json!({"client_id": format!("{counted}/counted.json"), "client_name": "Counted", "redirect_uris": [REDIRECT]});
                async move { ([(header::CACHE_CONTROL, "max-age=60")], axum::Json(body)).into_response() }
            }),
        )
        .route("/mismatch.json", get(document("https://someone-else.example/client.json".to_owned(), "max-age=60")))
        .route(
            "/no-redirects.json",
            get({
                let id = format!("{base}/no-redirects.json");
                move || async move { axum::Json(json!({"client_id": id, "client_name": "x"})).into_response() }
            }),
        )
        .route(
            "/large.json",
            get({
                let id = format!("{base}/large.json");
                move || async move {
                    axum::Json(json!({"client_id": id, "redirect_uris": [REDIRECT], "padding": "x".repeat(6 * 1024)})).into_response()
                }
            }),
        )
        .route(
            "/redirect.json",
            get({
                let to = format!("{base}/client.json");
                move || async move { axum::response::Redirect::temporary(&to).into_response() }
            }),
        )
        .route("/not-json.json", get(|| async { "<html>hello</html>" }))
        .route("/array.json", get(|| async { axum::Json(json!([1, 2])).into_response() }));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                stopped.await.ok();
            })
            .await
            .ok();
    });
    DocumentServer {
        base,
        fetches,
        _stop: stop,
    }
}

/// A server whose one answer is a chunked body that never ends, to show the size cap stops
/// reading rather than waiting for the end.
async fn endless_server() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                // Read the request head before answering, as a real server would.
                let mut request = Vec::new();
                let mut buffer = [0_u8; 1024];
                while !request.windows(4).any(|window| window == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => request.extend_from_slice(&buffer[..read]),
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                if stream.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = format!("400\r\n{}\r\n", " ".repeat(0x400));
                while stream.write_all(chunk.as_bytes()).await.is_ok() {}
            });
        }
    });
    base
}

async fn cimd_app() -> TestApp {
    spawn_app_with(|config| config.cimd.allow_loopback = true).await
}

#[tokio::test]
async fn a_client_identified_by_its_metadata_document_connects() {
    let app = cimd_app().await;
    let documents = document_server().await;
    let client_id = documents.url("/client.json");
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    let path = authorize_path(&client_id, REDIRECT, &pkce.challenge, &[]);
    let page = browser.get(&path).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("Document Client"), "{}", page.body);
    assert!(page.body.contains("metadata document"), "{}", page.body);
    let code = authorize(&app, &browser, &client_id, REDIRECT, &pkce).await;
    let tokens = exchange(&app, &client_id, REDIRECT, &code, &pkce.verifier)
        .await
        .expect(200)
        .clone();
    workspace(&app, &text(&tokens, "access_token"))
        .await
        .expect(200);
    refresh(&app, &client_id, &text(&tokens, "refresh_token"))
        .await
        .expect(200);
    let source: String = sqlx::query_scalar("select client_source from oauth_grants")
        .fetch_one(app.db.pool())
        .await
        .expect("the grant");
    assert_eq!(source, "metadata_document");
    // Its redirect URIs bind it like a registration's.
    browser
        .get(&authorize_path(
            &client_id,
            WEB_REDIRECT,
            &pkce.challenge,
            &[],
        ))
        .await
        .expect_error_page(400, "is not one registered");
}

#[tokio::test]
async fn metadata_documents_are_cached_per_their_headers_and_failures_never() {
    let app = cimd_app().await;
    let documents = document_server().await;
    let client_id = documents.url("/counted.json");
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    let path = authorize_path(&client_id, REDIRECT, &pkce.challenge, &[]);
    for _ in 0..3 {
        assert_eq!(browser.get(&path).await.status, StatusCode::OK);
    }
    assert_eq!(
        documents.fetches.load(Ordering::SeqCst),
        1,
        "max-age=60 is honoured"
    );
    // A browser without a session is sent to sign in before anything is fetched for it.
    app.clock.advance_ms(61_000);
    let anonymous = Browser::new(&app);
    expect_sign_in(&anonymous.get(&path).await, &path);
    assert_eq!(documents.fetches.load(Ordering::SeqCst), 1);
    assert_eq!(browser.get(&path).await.status, StatusCode::OK);
    assert_eq!(
        documents.fetches.load(Ordering::SeqCst),
        2,
        "fetched again after max-age"
    );
}

#[tokio::test]
async fn bad_metadata_documents_are_refused_with_a_page() {
    let app = cimd_app().await;
    let documents = document_server().await;
    let endless = endless_server().await;
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    for (client_id, says) in [
        (
            documents.url("/mismatch.json"),
            "names a different client_id",
        ),
        (documents.url("/large.json"), "larger than 5120 bytes"),
        (format!("{endless}/endless.json"), "larger than 5120 bytes"),
        (documents.url("/redirect.json"), "redirect"),
        (documents.url("/no-redirects.json"), "redirect_uris"),
        (documents.url("/not-json.json"), "not valid JSON"),
        (documents.url("/array.json"), "not a JSON object"),
        (documents.url("/missing.json"), "404"),
        (documents.url("/./client.json"), "canonical"),
        ("https://10.0.0.1/client.json".to_owned(), "private address"),
        ("http://app.example/client.json".to_owned(), "https"),
    ] {
        let page = browser
            .get(&authorize_path(&client_id, REDIRECT, &pkce.challenge, &[]))
            .await;
        page.expect_error_page(400, says);
    }
    // A failure is not cached: the same URL is fetched again on the next try.
    for _ in 0..2 {
        browser
            .get(&authorize_path(
                &documents.url("/mismatch.json"),
                REDIRECT,
                &pkce.challenge,
                &[],
            ))
            .await
            .expect_error_page(400, "names a different client_id");
    }
    assert_eq!(count(&app, "select count(*) from oauth_grants").await, 0);
}

#[tokio::test]
async fn metadata_documents_on_private_addresses_are_refused() {
    // The production policy: no loopback, https only.
    let app = spawn_app().await;
    let documents = document_server().await;
    let port = documents.base.rsplit(':').next().unwrap_or("80").to_owned();
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    for (client_id, says) in [
        (
            format!("https://127.0.0.1:{port}/client.json"),
            "loopback address",
        ),
        (
            format!("https://[::1]:{port}/client.json"),
            "loopback address",
        ),
        (
            "https://169.254.169.254/latest/meta-data.json".to_owned(),
            "link-local address",
        ),
        (
            "https://[::ffff:a00:1]/client.json".to_owned(),
            "private address",
        ),
        (
            "https://192.168.0.10/client.json".to_owned(),
            "private address",
        ),
        // A name, refused after resolution: like any failure to reach a document, one sentence
        // that does not say why, so the page cannot be used to learn what a name resolves to.
        (
            "https://localhost/client.json".to_owned(),
            "could not be fetched",
        ),
        (documents.url("/client.json"), "https"),
    ] {
        let page = browser
            .get(&authorize_path(&client_id, REDIRECT, &pkce.challenge, &[]))
            .await;
        page.expect_error_page(400, says);
    }
    assert_eq!(documents.fetches.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn metadata_documents_are_fetched_only_from_the_default_https_port() {
    // The production policy: a port of a public host is refused before anything is resolved or
    // connected to, so the server cannot be used to scan ports.
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    for client_id in [
        "https://app.example:8443/client.json",
        "https://app.example:22/client.json",
        "https://93.184.215.14:6379/client.json",
    ] {
        browser
            .get(&authorize_path(client_id, REDIRECT, &pkce.challenge, &[]))
            .await
            .expect_error_page(400, "default https port (443)");
    }
    // The default port is written by leaving it out.
    browser
        .get(&authorize_path(
            "https://app.example:443/client.json",
            REDIRECT,
            &pkce.challenge,
            &[],
        ))
        .await
        .expect_error_page(400, "canonical");
    assert_eq!(count(&app, "select count(*) from oauth_grants").await, 0);
}

#[tokio::test]
async fn failures_to_reach_a_metadata_document_all_read_the_same() {
    let app = cimd_app().await;
    let documents = document_server().await;
    // A port nothing listens on any more.
    let closed = {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        listener.local_addr().expect("address").port()
    };
    let browser = Browser::new(&app);
    browser.sign_in(OWNER_EMAIL).await;
    let pkce = pkce();
    let mut sentences = Vec::new();
    for client_id in [
        // Connection refused.
        format!("http://127.0.0.1:{closed}/client.json"),
        // TLS to a server that speaks plain http.
        documents
            .url("/client.json")
            .replacen("http://", "https://", 1),
        // A name that does not resolve.
        "https://no-such-host.invalid/client.json".to_owned(),
    ] {
        let page = browser
            .get(&authorize_path(&client_id, REDIRECT, &pkce.challenge, &[]))
            .await;
        page.expect_error_page(400, "could not be fetched");
        let message = unescape(&page.body).replace(&client_id, "URL");
        assert!(!message.contains("refused"), "{message}");
        assert!(!message.contains("dns"), "{message}");
        assert!(!message.contains("certificate"), "{message}");
        sentences.push(message);
    }
    assert!(
        sentences.windows(2).all(|pair| pair[0] == pair[1]),
        "{sentences:#?}"
    );
}

#[tokio::test]
async fn serve_refuses_the_loopback_relaxation_in_production() {
    let dir = tempfile::tempdir().expect("a directory");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_outreach"))
        .args(["serve", "--addr", "127.0.0.1:0", "--cimd-allow-loopback"])
        .env("OUTREACH_ENV", "production")
        .env(
            "DATABASE_URL",
            format!("sqlite://{}/refused.db", dir.path().display()),
        )
        .output()
        .await
        .expect("run outreach serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--cimd-allow-loopback"), "{stderr}");
    let missing = tokio::process::Command::new(env!("CARGO_BIN_EXE_outreach"))
        .args(["serve", "--addr", "127.0.0.1:0", "--cimd-root-cert"])
        .arg(dir.path().join("absent.pem"))
        .env(
            "DATABASE_URL",
            format!("sqlite://{}/refused.db", dir.path().display()),
        )
        .output()
        .await
        .expect("run outreach serve");
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("--cimd-root-cert"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
}
