//! The web pages over HTTP, as a browser without script sees them: sign-in and its throttle,
//! CSRF, the API keys page, connected apps, members and the sending terms.
//!
//! Each test drives the real server with a cookie-keeping client that does not follow redirects,
//! so every `303` and its `Location` is checked, and then checks the effect where it matters: on
//! the API (a revoked key's next call) or in the database (nothing created by a refused form).

use outreach_runtime::{Role, Scope, admin};
use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use crate::helpers::{OWNER_EMAIL, TestApp, encode, spawn_app, spawn_app_with};

const PASSWORD: &str = "correct horse battery";

/// One answer of a page.
pub struct Page {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    pub fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("")
    }

    /// The first `csrf_token` hidden input's value.
    pub fn csrf(&self) -> String {
        self.attribute_after("name=\"csrf_token\" value=\"")
    }

    fn attribute_after(&self, marker: &str) -> String {
        let start = self
            .body
            .find(marker)
            .unwrap_or_else(|| panic!("no `{marker}` in the page:\n{}", self.body))
            + marker.len();
        let end = self.body[start..].find('"').expect("a closing quote") + start;
        self.body[start..end].to_owned()
    }

    /// The text of the element with this id.
    pub fn text_of(&self, id: &str) -> Option<String> {
        let marker = format!("id=\"{id}\"");
        let start = self.body.find(&marker)?;
        let open_end = self.body[start..].find('>')? + start + 1;
        let close = self.body[open_end..].find('<')? + open_end;
        Some(self.body[open_end..close].to_owned())
    }

    /// The opening tag of the element with this id.
    pub fn tag_of(&self, id: &str) -> String {
        let marker = format!("id=\"{id}\"");
        let start = self
            .body
            .find(&marker)
            .unwrap_or_else(|| panic!("no #{id} in the page:\n{}", self.body));
        let open = self.body[..start].rfind('<').expect("a tag");
        let end = self.body[start..].find('>').expect("a tag end") + start;
        self.body[open..=end].to_owned()
    }

    #[track_caller]
    pub fn expect(&self, status: u16) -> &Self {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; page:\n{}",
            self.body
        );
        self
    }
}

/// A browser: keeps cookies, does not follow redirects.
pub struct Browser {
    client: reqwest::Client,
    base_url: String,
}

impl Browser {
    fn new(app: &TestApp) -> Self {
        Self {
            client: reqwest::Client::builder()
                .cookie_store(true)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("a browser client"),
            base_url: app.base_url.clone(),
        }
    }

    async fn read(response: reqwest::Response) -> Page {
        Page {
            status: response.status(),
            headers: response.headers().clone(),
            body: response.text().await.expect("a body"),
        }
    }

    pub async fn get(&self, path: &str) -> Page {
        let response = self
            .client
            .get(format!("{}{path}", self.base_url))
            .send()
            .await
            .expect("GET a page");
        Self::read(response).await
    }

    pub async fn post(&self, path: &str, fields: &[(&str, &str)]) -> Page {
        self.post_with_headers(path, fields, &[]).await
    }

    async fn post_with_headers(
        &self,
        path: &str,
        fields: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Page {
        let body = fields
            .iter()
            .map(|(name, value)| format!("{}={}", encode(name), encode(value)))
            .collect::<Vec<_>>()
            .join("&");
        let mut request = self
            .client
            .post(format!("{}{path}", self.base_url))
            .header("content-type", "application/x-www-form-urlencoded");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.body(body).send().await.expect("POST a form");
        Self::read(response).await
    }

    /// Like [`Self::try_sign_in`], with the form posted through a proxy that says the client is
    /// `forwarded_for` (an `X-Forwarded-For` value).
    async fn try_sign_in_forwarded(
        &self,
        email: &str,
        password: &str,
        forwarded_for: &str,
    ) -> Page {
        let form = self.get("/login").await;
        form.expect(200);
        let csrf = form.csrf();
        self.post_with_headers(
            "/login",
            &[
                ("csrf_token", &csrf),
                ("email", email),
                ("password", password),
            ],
            &[("x-forwarded-for", forwarded_for)],
        )
        .await
    }

    /// Fills in the sign-in form (after loading it, for its CSRF cookie).
    async fn try_sign_in(&self, email: &str, password: &str, next: &str) -> Page {
        let form = self.get(&format!("/login?next={}", encode(next))).await;
        form.expect(200);
        let csrf = form.csrf();
        self.post(
            "/login",
            &[
                ("csrf_token", &csrf),
                ("email", email),
                ("password", password),
                ("next", next),
            ],
        )
        .await
    }

    async fn sign_in(&self, email: &str) {
        let page = self.try_sign_in(email, PASSWORD, "").await;
        page.expect(303);
        assert_eq!(page.location(), "/settings/api");
    }

    /// Loads a page and posts a form to `action` with the page's CSRF token.
    pub async fn submit(&self, page: &str, action: &str, fields: &[(&str, &str)]) -> Page {
        let shown = self.get(page).await;
        shown.expect(200);
        let csrf = shown.csrf();
        let mut all = vec![("csrf_token", csrf.as_str())];
        all.extend_from_slice(fields);
        self.post(action, &all).await
    }
}

/// A browser signed in as `email`.
pub async fn signed_in(app: &TestApp, email: &str) -> Browser {
    let browser = Browser::new(app);
    browser.sign_in(email).await;
    browser
}

async fn key_count(app: &TestApp) -> usize {
    admin::list_keys(&app.db, &app.workspace_id, None)
        .await
        .expect("list keys")
        .len()
}

/// Creates a key through the page; returns its value (read from the page shown once).
async fn create_key_in_browser(browser: &Browser, name: &str, scopes: &[&str]) -> String {
    let mut fields = vec![("name", name), ("expires_on", "")];
    fields.extend(scopes.iter().map(|scope| ("scopes", *scope)));
    let created = browser
        .submit("/settings/api", "/settings/api/keys", &fields)
        .await;
    created.expect(303);
    assert_eq!(created.location(), "/settings/api");
    let page = browser.get("/settings/api").await;
    page.expect(200);
    page.text_of("new-key-value")
        .unwrap_or_else(|| panic!("the new key is shown:\n{}", page.body))
}

async fn effective_scopes(app: &TestApp, key: &str) -> serde_json::Value {
    app.get("/workspace", key).await.expect(200)["caller"]["scopes"].clone()
}

#[tokio::test]
async fn settings_without_a_session_go_to_sign_in_and_back() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    let page = browser.get("/settings/members").await;
    page.expect(303);
    assert_eq!(page.location(), "/login?next=%2Fsettings%2Fmembers");
    let signed = browser
        .try_sign_in(OWNER_EMAIL, PASSWORD, "/settings/members")
        .await;
    signed.expect(303);
    assert_eq!(signed.location(), "/settings/members");
    let members = browser.get("/settings/members").await;
    members.expect(200);
    assert!(members.body.contains(OWNER_EMAIL));
    assert_eq!(members.header("cache-control"), "no-store");
    assert_eq!(members.header("x-frame-options"), "DENY");
    assert!(
        members
            .header("content-security-policy")
            .contains("frame-ancestors 'none'")
    );
    // A signed-in person visiting the sign-in page goes straight on.
    let again = browser.get("/login?next=%2Fsettings%2Fsending-terms").await;
    again.expect(303);
    assert_eq!(again.location(), "/settings/sending-terms");
    // The stylesheet and script are served from the binary, cacheable.
    let css = browser.get("/assets/app.css").await;
    css.expect(200);
    assert!(css.header("content-type").starts_with("text/css"));
    assert!(css.header("cache-control").contains("max-age"));
    browser.get("/assets/app.js").await.expect(200);
}

#[tokio::test]
async fn wrong_password_and_unknown_email_get_the_same_refusal() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    let wrong = browser
        .try_sign_in(OWNER_EMAIL, "not the password", "")
        .await;
    wrong.expect(401);
    assert!(wrong.body.contains("class=\"flash-error\""));
    assert!(wrong.body.contains("Wrong email or password."));
    let unknown = browser
        .try_sign_in("nobody@acme.test", "not the password", "")
        .await;
    unknown.expect(401);
    assert!(unknown.body.contains("Wrong email or password."));
    browser.get("/settings/api").await.expect(303);
    // The email is matched however it is typed.
    let page = browser
        .try_sign_in("  Owner@ACME.test ", PASSWORD, "")
        .await;
    page.expect(303);
}

#[tokio::test]
async fn sign_in_with_a_forged_or_missing_csrf_token_is_refused() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    // No cookie at all (the form was never loaded from this site).
    let page = browser
        .post(
            "/login",
            &[
                ("csrf_token", "whatever"),
                ("email", OWNER_EMAIL),
                ("password", PASSWORD),
            ],
        )
        .await;
    page.expect(403);
    // The cookie is there, the submitted token is not it.
    browser.get("/login").await.expect(200);
    let forged = browser
        .post(
            "/login",
            &[
                ("csrf_token", "0000000000000000000000000000000000000000000"),
                ("email", OWNER_EMAIL),
                ("password", PASSWORD),
            ],
        )
        .await;
    forged.expect(403);
    let missing = browser
        .post("/login", &[("email", OWNER_EMAIL), ("password", PASSWORD)])
        .await;
    missing.expect(403);
    // Nothing signed in.
    browser.get("/settings/api").await.expect(303);
}

#[tokio::test]
async fn an_account_is_throttled_after_five_failures_until_the_window_passes() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    for _ in 0..5 {
        browser
            .try_sign_in(OWNER_EMAIL, "wrong password", "")
            .await
            .expect(401);
    }
    // Even the right password is not checked now.
    let throttled = browser.try_sign_in(OWNER_EMAIL, PASSWORD, "").await;
    throttled.expect(429);
    let retry_after: i64 = throttled
        .header("retry-after")
        .parse()
        .expect("a Retry-After in seconds");
    assert!((1..=900).contains(&retry_after), "{retry_after}");
    assert!(throttled.body.contains("Too many failed sign-ins"));
    // Another account from the same address is not affected.
    app.add_member("second@acme.test", Role::Member).await;
    Browser::new(&app).sign_in("second@acme.test").await;
    app.clock.advance_ms(15 * 60 * 1000 + 1000);
    browser.sign_in(OWNER_EMAIL).await;
}

#[tokio::test]
async fn a_success_clears_the_account_failures() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    for _ in 0..4 {
        browser
            .try_sign_in(OWNER_EMAIL, "wrong password", "")
            .await
            .expect(401);
    }
    browser.sign_in(OWNER_EMAIL).await;
    let other = Browser::new(&app);
    for _ in 0..4 {
        other
            .try_sign_in(OWNER_EMAIL, "wrong password", "")
            .await
            .expect(401);
    }
    other.sign_in(OWNER_EMAIL).await;
}

#[tokio::test]
async fn an_address_is_throttled_after_twenty_failures_across_accounts() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    for account in 0..5 {
        for _ in 0..4 {
            browser
                .try_sign_in(&format!("guess{account}@acme.test"), "wrong password", "")
                .await
                .expect(401);
        }
    }
    let throttled = browser.try_sign_in(OWNER_EMAIL, PASSWORD, "").await;
    throttled.expect(429);
    assert!(!throttled.header("retry-after").is_empty());
    app.clock.advance_ms(15 * 60 * 1000 + 1000);
    browser.sign_in(OWNER_EMAIL).await;
}

/// Parallel guesses: the attempt is recorded before the password is checked, so of many sent at
/// once no more than the account's 5 are ever verified, whatever the interleaving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_guesses_cannot_outrun_the_account_throttle() {
    let app = spawn_app().await;
    let mut ready = Vec::new();
    for _ in 0..12 {
        let browser = Browser::new(&app);
        let form = browser.get("/login").await;
        form.expect(200);
        let csrf = form.csrf();
        ready.push((browser, csrf));
    }
    let attempts: Vec<_> = ready
        .into_iter()
        .map(|(browser, csrf)| {
            tokio::spawn(async move {
                browser
                    .post(
                        "/login",
                        &[
                            ("csrf_token", csrf.as_str()),
                            ("email", OWNER_EMAIL),
                            ("password", "wrong password"),
                        ],
                    )
                    .await
            })
        })
        .collect();
    let (mut wrong, mut throttled, mut busy) = (0, 0, 0);
    for attempt in attempts {
        let page = attempt.await.expect("the attempt ran");
        match page.status.as_u16() {
            401 => {
                assert!(page.body.contains("Wrong email or password."));
                wrong += 1;
            }
            429 => {
                assert!(page.body.contains("Too many failed sign-ins"));
                assert!(!page.header("retry-after").is_empty());
                throttled += 1;
            }
            // Past the throttle but no verification slot free in time: still not verified.
            503 => {
                assert_eq!(page.header("retry-after"), "1");
                busy += 1;
            }
            other => panic!("unexpected status {other}:\n{}", page.body),
        }
    }
    assert!(
        wrong + busy <= 5,
        "at most 5 attempts get past the throttle: {wrong} wrong, {busy} busy, {throttled} throttled"
    );
    assert!(throttled >= 7, "{throttled} throttled");
    // Even the right password is not checked now, until the window has passed.
    let browser = Browser::new(&app);
    browser
        .try_sign_in(OWNER_EMAIL, PASSWORD, "")
        .await
        .expect(429);
    app.clock.advance_ms(14 * 60 * 1000);
    browser
        .try_sign_in(OWNER_EMAIL, PASSWORD, "")
        .await
        .expect(429);
    app.clock.advance_ms(60 * 1000 + 1000);
    browser.sign_in(OWNER_EMAIL).await;
}

/// Twenty wrong passwords (four each for five unknown accounts) from one forwarded client.
async fn fail_twenty_times_forwarded(browser: &Browser, forwarded_for: &str) {
    for account in 0..5 {
        for _ in 0..4 {
            browser
                .try_sign_in_forwarded(
                    &format!("guess{account}@acme.test"),
                    "wrong password",
                    forwarded_for,
                )
                .await
                .expect(401);
        }
    }
}

#[tokio::test]
async fn behind_a_trusted_proxy_each_forwarded_client_is_throttled_separately() {
    let app = spawn_app_with(|config| {
        config.trusted_proxies = vec!["127.0.0.1".parse().expect("an address")];
    })
    .await;
    let guesser = Browser::new(&app);
    fail_twenty_times_forwarded(&guesser, "203.0.113.7").await;
    guesser
        .try_sign_in_forwarded(OWNER_EMAIL, PASSWORD, "203.0.113.7")
        .await
        .expect(429);
    // An entry the client wrote itself (left of what the proxy appended) changes nothing.
    guesser
        .try_sign_in_forwarded(OWNER_EMAIL, PASSWORD, "198.51.100.9, 203.0.113.7")
        .await
        .expect(429);
    // Another client behind the same proxy mistypes once, then signs in: its own budget.
    let colleague = Browser::new(&app);
    colleague
        .try_sign_in_forwarded(OWNER_EMAIL, "not the password", "198.51.100.9")
        .await
        .expect(401);
    let page = colleague
        .try_sign_in_forwarded(OWNER_EMAIL, PASSWORD, "198.51.100.9")
        .await;
    page.expect(303);
    let counted: Vec<String> = sqlx::query_scalar(
        "select distinct subject from sign_in_failures where subject like 'address:%' \
         order by subject",
    )
    .fetch_all(app.db.pool())
    .await
    .expect("the recorded addresses");
    assert_eq!(counted, ["address:198.51.100.9", "address:203.0.113.7"]);
}

#[tokio::test]
async fn x_forwarded_for_from_an_untrusted_peer_is_ignored() {
    let app = spawn_app().await;
    let guesser = Browser::new(&app);
    fail_twenty_times_forwarded(&guesser, "203.0.113.7").await;
    // Every attempt counted against the TCP peer, whatever the header said.
    Browser::new(&app)
        .try_sign_in_forwarded(OWNER_EMAIL, PASSWORD, "198.51.100.9")
        .await
        .expect(429);
    Browser::new(&app)
        .try_sign_in(OWNER_EMAIL, PASSWORD, "")
        .await
        .expect(429);
    let counted: Vec<String> = sqlx::query_scalar(
        "select distinct subject from sign_in_failures where subject like 'address:%'",
    )
    .fetch_all(app.db.pool())
    .await
    .expect("the recorded addresses");
    assert_eq!(counted, ["address:127.0.0.1"]);
}

#[tokio::test]
async fn next_must_stay_on_this_site() {
    let app = spawn_app().await;
    for evil in [
        "//evil.example",
        "https://evil.example",
        "/\\evil.example",
        "evil.example",
    ] {
        let browser = Browser::new(&app);
        let page = browser.try_sign_in(OWNER_EMAIL, PASSWORD, evil).await;
        page.expect(303);
        assert_eq!(page.location(), "/settings/api", "next = {evil}");
        let again = browser.get(&format!("/login?next={}", encode(evil))).await;
        again.expect(303);
        assert_eq!(again.location(), "/settings/api", "next = {evil}");
    }
    // A long authorization request comes back intact, escapes and all.
    let authorize = "/oauth/authorize?response_type=code&client_id=https%3A%2F%2Fapp.example%2Fclient.json\
                     &redirect_uri=http%3A%2F%2F127.0.0.1%3A33418%2Fcallback&state=a%2Bb%3D%3D\
                     &code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256";
    let browser = Browser::new(&app);
    let form = browser
        .get(&format!("/login?next={}", encode(authorize)))
        .await;
    form.expect(200);
    assert_eq!(
        form.attribute_after("name=\"next\" value=\""),
        authorize.replace('&', "&#38;"),
        "the hidden field carries the request (HTML-escaped)"
    );
    let page = browser.try_sign_in(OWNER_EMAIL, PASSWORD, authorize).await;
    page.expect(303);
    assert_eq!(page.location(), authorize);
}

#[tokio::test]
async fn a_new_key_is_shown_once_and_works() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    let key = create_key_in_browser(&browser, "CRM sync", &["read", "write"]).await;
    assert!(key.starts_with("pk_test_"), "{key}");
    let reload = browser.get("/settings/api").await;
    reload.expect(200);
    assert!(reload.text_of("new-key-value").is_none());
    assert!(!reload.body.contains(&key));
    assert_eq!(reload.header("cache-control"), "no-store");
    let workspace = app.get("/workspace", &key).await;
    workspace.expect(200);
    assert_eq!(
        effective_scopes(&app, &key).await,
        serde_json::json!(["read", "write"])
    );
    let keys = admin::list_keys(&app.db, &app.workspace_id, None)
        .await
        .expect("keys");
    let created = keys.iter().find(|k| k.name == "CRM sync").expect("listed");
    assert!(
        reload
            .body
            .contains(&format!("data-key-id=\"{}\"", created.id))
    );
    assert!(reload.body.contains(&created.prefix));
}

/// Submits the create-key form without following the redirect to the page that shows the key.
async fn create_key_unshown(browser: &Browser, name: &str) {
    let created = browser
        .submit(
            "/settings/api",
            "/settings/api/keys",
            &[("name", name), ("expires_on", ""), ("scopes", "read")],
        )
        .await;
    created.expect(303);
}

/// The flashes (new keys' values) stored in the database.
async fn stored_flashes(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar("select flash from web_sessions where flash is not null")
        .fetch_all(app.db.pool())
        .await
        .expect("the flashes")
}

#[tokio::test]
async fn a_new_key_not_shown_within_five_minutes_is_not_shown_at_all() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    create_key_unshown(&browser, "never shown").await;
    let flashes = stored_flashes(&app).await;
    assert_eq!(flashes.len(), 1);
    let key = flashes[0].trim_start_matches("new_key:").to_owned();
    assert!(key.starts_with("pk_test_"), "{key}");
    app.clock.advance_ms(6 * 60 * 1000);
    let page = browser.get("/settings/api").await;
    page.expect(200);
    assert!(page.text_of("new-key-value").is_none(), "{}", page.body);
    assert!(!page.body.contains(&key));
    assert!(stored_flashes(&app).await.is_empty(), "cleared when taken");
    let expires: Vec<Option<i64>> = sqlx::query_scalar("select flash_expires_at from web_sessions")
        .fetch_all(app.db.pool())
        .await
        .expect("the flash expiries");
    assert!(expires.iter().all(Option::is_none), "{expires:?}");

    // A flash left behind by another session is cleared once expired, without that session
    // coming back, the next time a flash is written.
    let other = signed_in(&app, OWNER_EMAIL).await;
    create_key_unshown(&other, "left behind").await;
    assert_eq!(stored_flashes(&app).await.len(), 1);
    app.clock.advance_ms(6 * 60 * 1000);
    create_key_unshown(&browser, "shown").await;
    let flashes = stored_flashes(&app).await;
    assert_eq!(flashes.len(), 1);
    // Within five minutes the key is shown once, as always.
    app.clock.advance_ms(4 * 60 * 1000);
    let page = browser.get("/settings/api").await;
    page.expect(200);
    assert_eq!(
        page.text_of("new-key-value").as_deref(),
        Some(flashes[0].trim_start_matches("new_key:"))
    );
    assert!(stored_flashes(&app).await.is_empty());
}

#[tokio::test]
async fn a_key_with_an_expiry_date_stops_after_that_day() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    let past = browser
        .submit(
            "/settings/api",
            "/settings/api/keys",
            &[
                ("name", "old"),
                ("scopes", "read"),
                ("expires_on", "2001-01-01"),
            ],
        )
        .await;
    past.expect(400);
    assert!(past.body.contains("has passed"));
    let bad = browser
        .submit(
            "/settings/api",
            "/settings/api/keys",
            &[("name", "odd"), ("scopes", "read"), ("expires_on", "soon")],
        )
        .await;
    bad.expect(400);
    let none = browser
        .submit(
            "/settings/api",
            "/settings/api/keys",
            &[("name", "none"), ("expires_on", "")],
        )
        .await;
    none.expect(400);
    assert!(none.body.contains("Choose at least one scope"));
    assert_eq!(key_count(&app).await, 1, "nothing created by bad input");

    let tomorrow = outreach_runtime::clock::rfc3339(app.clock.now_ms() + 86_400_000);
    let day = &tomorrow[..10];
    let created = browser
        .submit(
            "/settings/api",
            "/settings/api/keys",
            &[
                ("name", "short-lived"),
                ("scopes", "read"),
                ("expires_on", day),
            ],
        )
        .await;
    created.expect(303);
    let key = browser
        .get("/settings/api")
        .await
        .text_of("new-key-value")
        .expect("the value");
    app.get("/workspace", &key).await.expect(200);
    app.clock.advance_ms(2 * 86_400_000 + 1000);
    app.get("/workspace", &key)
        .await
        .expect_error(401, "credential_expired");
    // Two days on, the session has ended too: sign in again to see the key's status.
    browser.get("/settings/api").await.expect(303);
    let page = signed_in(&app, OWNER_EMAIL)
        .await
        .get("/settings/api")
        .await;
    assert!(page.body.contains("badge-expired"));
}

#[tokio::test]
async fn a_forged_settings_form_changes_nothing() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    let before = key_count(&app).await;
    let forged = browser
        .post(
            "/settings/api/keys",
            &[
                ("csrf_token", "forged"),
                ("name", "sneaky"),
                ("scopes", "write"),
            ],
        )
        .await;
    forged.expect(403);
    let missing = browser
        .post(
            "/settings/api/keys",
            &[("name", "sneaky"), ("scopes", "read")],
        )
        .await;
    missing.expect(403);
    assert_eq!(key_count(&app).await, before);
    let terms = browser
        .post("/settings/sending-terms", &[("csrf_token", "forged")])
        .await;
    terms.expect(403);
    let logout = browser.post("/logout", &[("csrf_token", "forged")]).await;
    logout.expect(403);
    // Still signed in, terms still not accepted.
    let page = browser.get("/settings/sending-terms").await;
    page.expect(200);
    assert!(
        page.text_of("terms-status")
            .expect("a status")
            .contains("Not accepted yet")
    );
    // The CSRF token of another session does not pass either.
    let other = signed_in(&app, OWNER_EMAIL).await;
    let other_token = other.get("/settings/api").await.csrf();
    let cross = browser
        .post(
            "/settings/api/keys",
            &[
                ("csrf_token", &other_token),
                ("name", "x"),
                ("scopes", "read"),
            ],
        )
        .await;
    cross.expect(403);
    assert_eq!(key_count(&app).await, before);
}

#[tokio::test]
async fn a_member_cannot_pick_write_or_send_and_a_forged_form_is_refused() {
    let app = spawn_app().await;
    app.add_member("member@acme.test", Role::Member).await;
    let browser = signed_in(&app, "member@acme.test").await;
    let page = browser.get("/settings/api").await;
    page.expect(200);
    assert!(page.tag_of("scope-write").contains("disabled"));
    assert!(page.tag_of("scope-send").contains("disabled"));
    assert!(!page.tag_of("scope-read").contains("disabled"));
    assert!(
        page.text_of("write-disabled-reason")
            .expect("an explanation")
            .contains("member")
    );
    let before = key_count(&app).await;
    let forged = browser
        .submit(
            "/settings/api",
            "/settings/api/keys",
            &[("name", "more"), ("scopes", "read"), ("scopes", "write")],
        )
        .await;
    forged.expect(403);
    assert!(forged.body.contains("No key was created"));
    assert_eq!(key_count(&app).await, before);
    let key = create_key_in_browser(&browser, "reader", &["read"]).await;
    assert_eq!(
        effective_scopes(&app, &key).await,
        serde_json::json!(["read"])
    );
}

#[tokio::test]
async fn send_waits_for_the_terms_which_record_who_and_when() {
    let app = spawn_app().await;
    app.add_member("member@acme.test", Role::Member).await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    let page = browser.get("/settings/api").await;
    assert!(page.tag_of("scope-send").contains("disabled"));
    assert!(!page.tag_of("scope-write").contains("disabled"));
    assert!(
        page.text_of("send-disabled-reason")
            .expect("an explanation")
            .contains("sending terms")
    );
    let before = key_count(&app).await;
    let forged = browser
        .submit(
            "/settings/api",
            "/settings/api/keys",
            &[("name", "sender"), ("scopes", "send")],
        )
        .await;
    forged.expect(403);
    assert_eq!(key_count(&app).await, before);

    // A member sees the terms but cannot accept them.
    let member = signed_in(&app, "member@acme.test").await;
    let terms = member.get("/settings/sending-terms").await;
    terms.expect(200);
    assert!(!terms.body.contains("id=\"accept-terms\""));
    let refused = member
        .submit("/settings/sending-terms", "/settings/sending-terms", &[])
        .await;
    refused.expect(403);

    let terms = browser.get("/settings/sending-terms").await;
    assert!(terms.body.contains("id=\"accept-terms\""));
    let accepted = browser
        .submit("/settings/sending-terms", "/settings/sending-terms", &[])
        .await;
    accepted.expect(303);
    let terms = browser.get("/settings/sending-terms").await;
    let status = terms.text_of("terms-status").expect("a status");
    assert!(status.contains("Accepted by"), "{status}");
    assert!(status.contains(OWNER_EMAIL), "{status}");
    assert!(status.contains("UTC"), "{status}");

    let page = browser.get("/settings/api").await;
    assert!(!page.tag_of("scope-send").contains("disabled"));
    let key = create_key_in_browser(&browser, "sender", &["read", "write", "send"]).await;
    assert_eq!(
        effective_scopes(&app, &key).await,
        serde_json::json!(["read", "write", "send"])
    );
}

#[tokio::test]
async fn a_revoked_key_is_refused_on_its_next_call() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    let key = create_key_in_browser(&browser, "to revoke", &["read"]).await;
    app.get("/workspace", &key).await.expect(200);
    let id = admin::list_keys(&app.db, &app.workspace_id, None)
        .await
        .expect("keys")
        .into_iter()
        .find(|k| k.name == "to revoke")
        .expect("the key")
        .id;
    let page = browser.get("/settings/api").await;
    assert!(
        page.body
            .contains(&format!("/settings/api/keys/{id}/revoke"))
    );
    let confirm = browser
        .get(&format!("/settings/api/keys/{id}/revoke"))
        .await;
    confirm.expect(200);
    assert!(confirm.body.contains("id=\"confirm-revoke\""));
    let revoked = browser
        .post(
            &format!("/settings/api/keys/{id}/revoke"),
            &[("csrf_token", &confirm.csrf())],
        )
        .await;
    revoked.expect(303);
    app.get("/workspace", &key)
        .await
        .expect_error(401, "credential_revoked");
    let page = browser.get("/settings/api").await;
    assert!(page.body.contains("badge-revoked"));
    browser
        .get(&format!("/settings/api/keys/{id}/revoke"))
        .await
        .expect(409);
}

#[tokio::test]
async fn a_member_sees_and_revokes_only_their_own_keys() {
    let app = spawn_app().await;
    app.add_member("member@acme.test", Role::Member).await;
    let owner_keys = admin::list_keys(&app.db, &app.workspace_id, None)
        .await
        .expect("keys");
    let owner_key = &owner_keys[0];
    let browser = signed_in(&app, "member@acme.test").await;
    let page = browser.get("/settings/api").await;
    assert!(!page.body.contains(&owner_key.id));
    browser
        .get(&format!("/settings/api/keys/{}/revoke", owner_key.id))
        .await
        .expect(403);
    let csrf = page.csrf();
    browser
        .post(
            &format!("/settings/api/keys/{}/revoke", owner_key.id),
            &[("csrf_token", &csrf)],
        )
        .await
        .expect(403);
    app.get("/workspace", &app.key).await.expect(200);
    // Another workspace's key is not found at all.
    let (other_workspace, other_key) = app.other_workspace("Other", "boss@other.test").await;
    let other_id = admin::list_keys(&app.db, &other_workspace, None)
        .await
        .expect("keys")[0]
        .id
        .clone();
    let owner = signed_in(&app, OWNER_EMAIL).await;
    owner
        .get(&format!("/settings/api/keys/{other_id}/revoke"))
        .await
        .expect(404);
    app.get("/workspace", &other_key).await.expect(200);
}

#[tokio::test]
async fn owners_add_change_and_remove_members_with_effect_on_the_next_call() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    // A new person needs a name and a password.
    let short = browser
        .submit(
            "/settings/members",
            "/settings/members",
            &[
                ("email", "new@acme.test"),
                ("display_name", "New Person"),
                ("role", "admin"),
                ("password", "short"),
            ],
        )
        .await;
    short.expect(400);
    assert!(short.body.contains("at least 8 characters"));
    assert!(
        short.body.contains("value=\"new@acme.test\""),
        "the form is kept"
    );
    let added = browser
        .submit(
            "/settings/members",
            "/settings/members",
            &[
                ("email", "new@acme.test"),
                ("display_name", "New Person"),
                ("role", "admin"),
                ("password", PASSWORD),
            ],
        )
        .await;
    added.expect(303);
    let page = browser.get("/settings/members").await;
    assert!(page.body.contains("data-email=\"new@acme.test\""));
    assert!(page.body.contains("New Person"));
    let person_id = admin::list_members(&app.db, &app.workspace_id)
        .await
        .expect("members")
        .into_iter()
        .find(|m| m.email == "new@acme.test")
        .expect("added")
        .person_id;
    // They can sign in and create a write key as an admin.
    let newcomer = signed_in(&app, "new@acme.test").await;
    let key = create_key_in_browser(&newcomer, "theirs", &["read", "write"]).await;
    assert_eq!(
        effective_scopes(&app, &key).await,
        serde_json::json!(["read", "write"])
    );

    // Adding again is a clear conflict.
    let again = browser
        .submit(
            "/settings/members",
            "/settings/members",
            &[("email", "new@acme.test"), ("role", "member")],
        )
        .await;
    again.expect(409);

    // Demotion caps the key on its next call.
    let demoted = browser
        .submit(
            "/settings/members",
            &format!("/settings/members/{person_id}/role"),
            &[("role", "member")],
        )
        .await;
    demoted.expect(303);
    assert_eq!(
        effective_scopes(&app, &key).await,
        serde_json::json!(["read"])
    );

    // Removal refuses it.
    let confirm = browser
        .get(&format!("/settings/members/{person_id}/remove"))
        .await;
    confirm.expect(200);
    assert!(confirm.body.contains("id=\"confirm-remove\""));
    let removed = browser
        .post(
            &format!("/settings/members/{person_id}/remove"),
            &[("csrf_token", &confirm.csrf())],
        )
        .await;
    removed.expect(303);
    app.get("/workspace", &key)
        .await
        .expect_error(401, "not_a_member");
    // Their browser now has no workspace.
    let nothing = newcomer.get("/settings/api").await;
    nothing.expect(200);
    assert!(nothing.body.contains("do not belong to any workspace"));
    // An existing person is added back without a password.
    browser
        .submit(
            "/settings/members",
            "/settings/members",
            &[("email", "new@acme.test"), ("role", "member")],
        )
        .await
        .expect(303);
    newcomer.get("/settings/api").await.expect(200);
    // Unknown ids are not found.
    browser
        .get("/settings/members/psn_00000000000000000000/remove")
        .await
        .expect(404);
}

#[tokio::test]
async fn admins_cannot_touch_owners_and_the_last_owner_stays() {
    let app = spawn_app().await;
    app.add_member("admin@acme.test", Role::Admin).await;
    app.add_member("member@acme.test", Role::Member).await;
    let owner_id = admin::list_members(&app.db, &app.workspace_id)
        .await
        .expect("members")
        .into_iter()
        .find(|m| m.email == OWNER_EMAIL)
        .expect("the owner")
        .person_id;
    let owner = signed_in(&app, OWNER_EMAIL).await;
    let last = owner
        .submit(
            "/settings/members",
            &format!("/settings/members/{owner_id}/role"),
            &[("role", "admin")],
        )
        .await;
    last.expect(409);
    assert!(last.body.contains("last owner"), "{}", last.body);

    let admin_browser = signed_in(&app, "admin@acme.test").await;
    let page = admin_browser.get("/settings/members").await;
    assert!(
        !page
            .body
            .contains(&format!("/settings/members/{owner_id}/remove"))
    );
    admin_browser
        .submit(
            "/settings/members",
            &format!("/settings/members/{owner_id}/role"),
            &[("role", "member")],
        )
        .await
        .expect(403);
    admin_browser
        .submit(
            "/settings/members",
            "/settings/members",
            &[
                ("email", "boss@acme.test"),
                ("display_name", "Boss"),
                ("role", "owner"),
                ("password", PASSWORD),
            ],
        )
        .await
        .expect(403);
    admin_browser
        .get(&format!("/settings/members/{owner_id}/remove"))
        .await
        .expect(403);

    let member = signed_in(&app, "member@acme.test").await;
    let page = member.get("/settings/members").await;
    page.expect(200);
    assert!(!page.body.contains("id=\"add-member\""));
    member
        .submit(
            "/settings/members",
            "/settings/members",
            &[("email", "x@acme.test"), ("role", "member")],
        )
        .await
        .expect(403);
    let members = admin::list_members(&app.db, &app.workspace_id)
        .await
        .expect("members");
    assert_eq!(members.len(), 3);
    assert_eq!(
        members
            .iter()
            .find(|m| m.email == OWNER_EMAIL)
            .map(|m| m.role),
        Some(Role::Owner)
    );
}

/// Inserts a grant as the OAuth server would after a consent.
async fn insert_grant(app: &TestApp, email: &str, client_name: &str, source: &str) -> String {
    let person_id = admin::list_members(&app.db, &app.workspace_id)
        .await
        .expect("members")
        .into_iter()
        .find(|m| m.email == email)
        .expect("a member")
        .person_id;
    let id = outreach_runtime::ids::new_id("grt");
    sqlx::query(
        "insert into oauth_grants (id, workspace_id, person_id, client_id, client_name, \
         client_source, scopes, resource, created_at) values ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&id)
    .bind(&app.workspace_id)
    .bind(&person_id)
    .bind("https://assistant.example/client.json")
    .bind(client_name)
    .bind(source)
    .bind(Scope::Write.list_string())
    .bind(format!("{}/api/mcp", app.base_url))
    .bind(app.clock.now_ms())
    .execute(app.db.pool())
    .await
    .expect("insert a grant");
    // A grant is listed once it has issued a token (a consent never exchanged is no connection).
    sqlx::query(
        "insert into oauth_tokens (token_hash, grant_id, kind, expires_at, created_at) \
         values ($1, $2, 'refresh', $3, $4)",
    )
    .bind(outreach_runtime::ids::hash_secret(&id))
    .bind(&id)
    .bind(app.clock.now_ms() + 3_600_000)
    .bind(app.clock.now_ms())
    .execute(app.db.pool())
    .await
    .expect("insert a token");
    id
}

#[tokio::test]
async fn a_consent_never_exchanged_is_not_listed_as_a_connected_app() {
    let app = spawn_app().await;
    let listed = insert_grant(&app, OWNER_EMAIL, "Listed", "registration").await;
    let unexchanged = outreach_runtime::ids::new_id("grt");
    sqlx::query(
        "insert into oauth_grants (id, workspace_id, person_id, client_id, client_name, \
         client_source, scopes, resource, created_at) \
         select $1, workspace_id, person_id, 'cli_x', 'Never Exchanged', 'registration', 'read', \
                resource, created_at from oauth_grants where id = $2",
    )
    .bind(&unexchanged)
    .bind(&listed)
    .execute(app.db.pool())
    .await
    .expect("insert a grant without tokens");
    let owner = signed_in(&app, OWNER_EMAIL).await;
    let page = owner.get("/settings/api").await;
    assert!(page.body.contains(&format!("data-grant-id=\"{listed}\"")));
    assert!(!page.body.contains(&unexchanged), "{}", page.body);
}

#[tokio::test]
async fn connected_apps_are_listed_and_disconnected() {
    let app = spawn_app().await;
    app.add_member("member@acme.test", Role::Member).await;
    let owners = insert_grant(&app, OWNER_EMAIL, "Desk Assistant", "metadata_document").await;
    let members = insert_grant(&app, "member@acme.test", "Member Tool", "registration").await;

    let member = signed_in(&app, "member@acme.test").await;
    let page = member.get("/settings/api").await;
    assert!(page.body.contains(&format!("data-grant-id=\"{members}\"")));
    assert!(
        !page.body.contains(&owners),
        "a member sees only their own apps"
    );
    assert!(
        page.body
            .contains("Registered by the app (dynamic registration)")
    );
    member
        .get(&format!("/settings/apps/{owners}/disconnect"))
        .await
        .expect(403);

    let browser = signed_in(&app, OWNER_EMAIL).await;
    let page = browser.get("/settings/api").await;
    assert!(page.body.contains(&format!("data-grant-id=\"{owners}\"")));
    assert!(page.body.contains(&format!("data-grant-id=\"{members}\"")));
    assert!(page.body.contains("Desk Assistant"));
    assert!(
        page.body
            .contains("Metadata document at https://assistant.example/client.json")
    );
    assert!(page.body.contains("never"));
    let confirm = browser
        .get(&format!("/settings/apps/{owners}/disconnect"))
        .await;
    confirm.expect(200);
    assert!(confirm.body.contains("id=\"confirm-disconnect\""));
    let forged = browser
        .post(
            &format!("/settings/apps/{owners}/disconnect"),
            &[("csrf_token", "forged")],
        )
        .await;
    forged.expect(403);
    let done = browser
        .post(
            &format!("/settings/apps/{owners}/disconnect"),
            &[("csrf_token", &confirm.csrf())],
        )
        .await;
    done.expect(303);
    let revoked_at: Option<i64> =
        sqlx::query_scalar("select revoked_at from oauth_grants where id = $1")
            .bind(&owners)
            .fetch_one(app.db.pool())
            .await
            .expect("the grant");
    assert!(revoked_at.is_some());
    let page = browser.get("/settings/api").await;
    assert!(!page.body.contains(&owners));
    browser
        .get("/settings/apps/grt_00000000000000000000/disconnect")
        .await
        .expect(404);
}

#[tokio::test]
async fn the_switcher_moves_between_the_person_s_workspaces() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    let page = browser.get("/settings/api").await;
    assert!(
        !page.body.contains("id=\"workspace-switcher\""),
        "one workspace, no switcher"
    );

    let (beta, _) = app.other_workspace("Beta", "boss@beta.test").await;
    admin::add_member(&app.db, &app.clock, &beta, OWNER_EMAIL, Role::Member, None)
        .await
        .expect("join Beta");
    let (gamma, _) = app.other_workspace("Gamma", "boss@gamma.test").await;

    let page = browser.get("/settings/members").await;
    assert!(page.body.contains("id=\"workspace-switcher\""));
    assert_eq!(page.text_of("workspace-name").as_deref(), Some("Acme"));
    let switched = browser
        .submit(
            "/settings/members",
            "/settings/workspace",
            &[("workspace_id", &beta), ("next", "/settings/members")],
        )
        .await;
    switched.expect(303);
    assert_eq!(switched.location(), "/settings/members");
    let page = browser.get("/settings/members").await;
    assert_eq!(page.text_of("workspace-name").as_deref(), Some("Beta"));
    assert!(page.body.contains("boss@beta.test"));
    // In Beta the person is a plain member.
    assert!(
        browser
            .get("/settings/api")
            .await
            .tag_of("scope-write")
            .contains("disabled")
    );
    // A workspace that is not theirs is not found.
    browser
        .submit(
            "/settings/members",
            "/settings/workspace",
            &[("workspace_id", &gamma), ("next", "/settings/members")],
        )
        .await
        .expect(404);
    let evil = browser
        .submit(
            "/settings/members",
            "/settings/workspace",
            &[
                ("workspace_id", &app.workspace_id),
                ("next", "//evil.example"),
            ],
        )
        .await;
    evil.expect(303);
    assert_eq!(evil.location(), "/settings/api");
}

#[tokio::test]
async fn signing_out_ends_the_session() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    let page = browser.get("/settings/api").await;
    let out = browser
        .post("/logout", &[("csrf_token", &page.csrf())])
        .await;
    out.expect(303);
    assert_eq!(out.location(), "/login");
    let after = browser.get("/settings/api").await;
    after.expect(303);
    assert!(after.location().starts_with("/login?next="));
    let sessions: i64 = sqlx::query_scalar("select count(*) from web_sessions")
        .fetch_one(app.db.pool())
        .await
        .expect("count sessions");
    assert_eq!(sessions, 0);
}

#[tokio::test]
async fn a_session_started_on_one_instance_is_honoured_and_ended_on_another() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    let other = app.second_instance().await;
    // Cookies do not name a port, so the browser sends the session to the second instance too.
    let on_other = browser
        .client
        .get(format!("{}/settings/api", other.base_url))
        .send()
        .await
        .expect("GET on the second instance");
    let page = Browser::read(on_other).await;
    page.expect(200);
    let out = browser
        .client
        .post(format!("{}/logout", other.base_url))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf_token={}", encode(&page.csrf())))
        .send()
        .await
        .expect("sign out on the second instance");
    assert_eq!(out.status().as_u16(), 303);
    let after = browser.get("/settings/api").await;
    after.expect(303);
    assert!(after.location().starts_with("/login?next="));
}

#[tokio::test]
async fn successful_sign_ins_do_not_use_up_the_address_budget() {
    let app = spawn_app().await;
    // Twenty-five people behind one address (an office) all sign in within the window.
    for _ in 0..25 {
        let browser = Browser::new(&app);
        browser
            .try_sign_in(OWNER_EMAIL, PASSWORD, "/settings/api")
            .await
            .expect(303);
    }
    let rows: i64 = sqlx::query_scalar("select count(*) from sign_in_failures")
        .fetch_one(app.db.pool())
        .await
        .expect("count attempts");
    assert_eq!(rows, 0, "a success takes its own rows back");
}

async fn password_hash(app: &TestApp, email: &str) -> String {
    sqlx::query_scalar("select password_hash from people where email = $1")
        .bind(email)
        .fetch_one(app.db.pool())
        .await
        .expect("the person")
}

#[tokio::test]
async fn a_password_change_refuses_bad_forms_and_then_works_and_ends_other_sessions() {
    let app = spawn_app().await;
    let browser = signed_in(&app, OWNER_EMAIL).await;
    let other_device = signed_in(&app, OWNER_EMAIL).await;
    let before = password_hash(&app, OWNER_EMAIL).await;
    let page = browser.get("/settings/password").await;
    page.expect(200);
    assert!(page.body.contains("id=\"change-password\""));

    let change = |current: &'static str, new: &'static str, again: &'static str| {
        let browser = &browser;
        async move {
            browser
                .submit(
                    "/settings/password",
                    "/settings/password",
                    &[
                        ("current_password", current),
                        ("new_password", new),
                        ("new_password_again", again),
                    ],
                )
                .await
        }
    };
    let wrong = change("not my password", "a new password 1", "a new password 1").await;
    wrong.expect(403);
    assert!(
        wrong.body.contains("current password is wrong"),
        "{}",
        wrong.body
    );
    let mismatch = change(PASSWORD, "a new password 1", "a new password 2").await;
    mismatch.expect(400);
    assert!(mismatch.body.contains("differ"));
    change(PASSWORD, "short", "short").await.expect(400);
    browser
        .post(
            "/settings/password",
            &[
                ("csrf_token", "forged"),
                ("current_password", PASSWORD),
                ("new_password", "a new password 1"),
                ("new_password_again", "a new password 1"),
            ],
        )
        .await
        .expect(403);
    assert_eq!(
        password_hash(&app, OWNER_EMAIL).await,
        before,
        "refusals change nothing"
    );
    other_device.get("/settings/api").await.expect(200);

    let done = change(PASSWORD, "a new password 1", "a new password 1").await;
    done.expect(303);
    let shown = browser.get(done.location()).await;
    shown.expect(200);
    assert!(shown.body.contains("id=\"password-changed\""));
    browser.get("/settings/api").await.expect(200);
    let ended = other_device.get("/settings/api").await;
    ended.expect(303);
    assert!(
        ended.location().starts_with("/login"),
        "the other device is signed out"
    );

    let fresh = Browser::new(&app);
    fresh
        .try_sign_in(OWNER_EMAIL, PASSWORD, "")
        .await
        .expect(401);
    let signed = fresh.try_sign_in(OWNER_EMAIL, "a new password 1", "").await;
    signed.expect(303);
}

#[tokio::test]
async fn the_credits_page_shows_the_balance_and_the_ledger_newest_first_in_pages() {
    let app = spawn_app().await;
    for amount in 1..=55 {
        outreach_runtime::credits::grant(
            &app.db,
            &app.clock,
            &app.workspace_id,
            amount,
            &outreach_runtime::credits::Source {
                reason: Some("test grant"),
                ..Default::default()
            },
        )
        .await
        .expect("grant");
        app.clock.advance_ms(1000);
    }
    let balance = outreach_runtime::credits::balance(&app.db, &app.workspace_id)
        .await
        .expect("balance");
    let member = {
        app.add_member("member@acme.test", Role::Member).await;
        signed_in(&app, "member@acme.test").await
    };
    let page = member.get("/settings/credits").await;
    page.expect(200);
    assert_eq!(page.text_of("credit-balance"), Some(balance.to_string()));
    assert!(
        page.body
            .contains("href=\"/settings/credits\" aria-current=\"page\"")
    );
    let first_amount = page.body.find("+55").expect("the newest grant first");
    assert!(page.body.find("+54").is_some_and(|at| at > first_amount));
    assert!(!page.body.contains("+5<"), "the oldest is on the next page");
    let older = page.attribute_after("id=\"ledger-older\" href=\"");
    let next = member.get(&older).await;
    next.expect(200);
    assert!(next.body.contains("+5<") && next.body.contains("id=\"ledger-newer\""));
    member.get("/settings/credits?offset=x").await.expect(200);
}

#[tokio::test]
async fn the_landing_page_leads_to_the_docs_and_sign_in_and_assets_are_served() {
    let app = spawn_app().await;
    let browser = Browser::new(&app);
    let landing = browser.get("/").await;
    landing.expect(200);
    assert!(landing.body.contains("href=\"/api/v1/docs\""));
    assert!(landing.body.contains("href=\"/login\""));
    assert!(landing.body.contains("rel=\"icon\""));
    let icon = browser.get("/assets/favicon.svg").await;
    icon.expect(200);
    assert_eq!(icon.header("content-type"), "image/svg+xml");
    browser.get("/favicon.ico").await.expect(200);
    let docs = browser.get("/api/v1/docs").await;
    docs.expect(200);
    assert!(docs.body.contains("id=\"getting-started\""));
    assert!(docs.body.contains("Authorization: Bearer $KEY"));
    assert!(!docs.body.contains("<script") && !docs.body.contains("<style"));
    let css = browser.get("/assets/docs.css").await;
    css.expect(200);
    assert!(css.body.contains("@media"));

    let signed = signed_in(&app, OWNER_EMAIL).await;
    assert!(
        signed
            .get("/")
            .await
            .body
            .contains("href=\"/settings/api\"")
    );
}

#[tokio::test]
async fn refusal_pages_keep_the_navigation_and_show_code_not_backticks() {
    let app = spawn_app().await;
    app.add_member("member@acme.test", Role::Member).await;
    let member = signed_in(&app, "member@acme.test").await;
    let terms = member.get("/settings/sending-terms").await;
    assert!(
        !terms.body.contains("id=\"accept-terms\""),
        "no Accept for a member"
    );
    let refused = member
        .submit("/settings/sending-terms", "/settings/sending-terms", &[])
        .await;
    refused.expect(403);
    assert!(refused.body.contains("id=\"sign-out\""), "{}", refused.body);
    assert!(refused.body.contains("href=\"/settings/credits\""));
    let missing = member
        .get("/settings/api/keys/key_00000000000000000000/revoke")
        .await;
    assert_eq!(missing.status.as_u16(), 404);
    assert!(missing.body.contains("id=\"sign-out\""));
    assert!(!missing.body.contains('`'), "{}", missing.body);

    // Signed out, a refusal is the plain page.
    let stranger = Browser::new(&app);
    let forged = stranger
        .post(
            "/login",
            &[
                ("csrf_token", "x"),
                ("email", "a@b.test"),
                ("password", "x"),
            ],
        )
        .await;
    forged.expect(403);
    assert!(!forged.body.contains("id=\"sign-out\""));
}

#[tokio::test]
async fn the_last_owner_is_offered_neither_removal_nor_a_role_change() {
    let app = spawn_app().await;
    app.add_member("admin@acme.test", Role::Admin).await;
    let owner_id = admin::list_members(&app.db, &app.workspace_id)
        .await
        .expect("members")
        .into_iter()
        .find(|m| m.email == OWNER_EMAIL)
        .expect("the owner")
        .person_id;
    let owner = signed_in(&app, OWNER_EMAIL).await;
    let page = owner.get("/settings/members").await;
    page.expect(200);
    assert!(
        !page
            .body
            .contains(&format!("/settings/members/{owner_id}/remove"))
    );
    assert!(
        !page
            .body
            .contains(&format!("/settings/members/{owner_id}/role"))
    );
    assert!(page.body.contains("make someone else an owner first"));
    admin::add_member(
        &app.db,
        &app.clock,
        &app.workspace_id,
        "second@acme.test",
        Role::Owner,
        Some(PASSWORD),
    )
    .await
    .expect("a second owner");
    let page = owner.get("/settings/members").await;
    assert!(
        page.body
            .contains(&format!("/settings/members/{owner_id}/remove"))
    );
}

#[tokio::test]
async fn sign_in_from_an_oauth_request_names_the_connecting_app() {
    let app = spawn_app().await;
    let registered = app
        .send(
            reqwest::Method::POST,
            "/oauth/register",
            crate::helpers::Auth::None,
            crate::helpers::Body::Json(serde_json::json!({
                "client_name": "Claude <Desktop>",
                "redirect_uris": ["http://127.0.0.1:7777/callback"],
                "token_endpoint_auth_method": "none",
            })),
        )
        .await;
    let client_id = registered.expect(201)["client_id"]
        .as_str()
        .expect("a client id")
        .to_owned();
    let browser = Browser::new(&app);
    let next = format!("/oauth/authorize?response_type=code&client_id={client_id}&state=x");
    let page = browser.get(&format!("/login?next={}", encode(&next))).await;
    page.expect(200);
    assert!(
        page.body
            .contains("<strong>Claude &lt;Desktop&gt;</strong>")
            || page
                .body
                .contains("<strong>Claude &#60;Desktop&#62;</strong>"),
        "{}",
        page.body
    );
    let document = "/oauth/authorize?client_id=https%3A%2F%2Fassistant.example%2Fclient.json";
    let page = browser
        .get(&format!("/login?next={}", encode(document)))
        .await;
    assert!(
        page.body.contains("the app at assistant.example"),
        "{}",
        page.body
    );
    let plain = browser.get("/login").await;
    assert!(!plain.body.contains("id=\"connecting-app\""));
}
