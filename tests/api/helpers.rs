//! The harness: the app in-process on `127.0.0.1:0` with a fresh database, and a small typed client.
//!
//! Each test gets its own database (a SQLite file in a temporary directory, or a new PostgreSQL
//! database when `TEST_DATABASE_URL` names a server), its own server and its own workspace with
//! an owner and a read+write key, so tests never see each other's rows and can run in parallel.
//! The [`Clock`] is kept so a test can move time (key expiry) without sleeping.

use std::process::{Output, Stdio};
use std::time::Duration;

use outreach_runtime::admin::{self, CreatedKey};
use outreach_runtime::registry::{Action, Registry};
use outreach_runtime::server::{build_state, serve as serve_app};
use outreach_runtime::{Clock, Config, Db, Environment, Role, Scope};
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::Command;
use tokio::sync::oneshot;

// The actions register themselves; this keeps the linker from dropping them.
use outreach_actions as _;

/// The MCP protocol version the tests speak.
pub const MCP_PROTOCOL_VERSION: &str = "2025-06-18";

/// The email of the owner every [`TestApp`] starts with.
pub const OWNER_EMAIL: &str = "owner@acme.test";

/// A database made for one test and dropped after it.
pub enum TestDatabase {
    Sqlite {
        url: String,
        _dir: tempfile::TempDir,
    },
    Postgres {
        url: String,
        admin_url: String,
        name: String,
    },
}

impl TestDatabase {
    /// A fresh SQLite file, or a fresh PostgreSQL database when `TEST_DATABASE_URL` is set.
    pub async fn create() -> Self {
        match std::env::var("TEST_DATABASE_URL")
            .ok()
            .filter(|url| !url.trim().is_empty())
        {
            Some(admin_url) => {
                use sqlx::{Connection, Executor};
                let name = format!(
                    "outreach_test_{}",
                    outreach_runtime::ids::new_id("db").to_lowercase()
                );
                let mut conn = sqlx::PgConnection::connect(&admin_url)
                    .await
                    .expect("connect to TEST_DATABASE_URL");
                conn.execute(sqlx::AssertSqlSafe(format!("create database {name}")))
                    .await
                    .expect("create the test database");
                conn.close().await.ok();
                let url = database_url_with_name(&admin_url, &name);
                Self::Postgres {
                    url,
                    admin_url,
                    name,
                }
            }
            None => {
                let dir = tempfile::tempdir().expect("make a temporary directory");
                let url = format!("sqlite://{}/test.db", dir.path().display());
                Self::Sqlite { url, _dir: dir }
            }
        }
    }

    pub fn url(&self) -> &str {
        match self {
            Self::Sqlite { url, .. } | Self::Postgres { url, .. } => url,
        }
    }
}

/// `postgres://user@host:port/admin?x` with the database name replaced.
fn database_url_with_name(admin_url: &str, name: &str) -> String {
    let (base, query) = admin_url
        .split_once('?')
        .map_or((admin_url, None), |(base, query)| (base, Some(query)));
    let authority_start = base.find("://").map_or(0, |index| index + 3);
    let base = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let Self::Postgres {
            admin_url, name, ..
        } = self
        else {
            return;
        };
        let (admin_url, name) = (admin_url.clone(), name.clone());
        // Drop runs inside the test's runtime, which cannot be blocked on; a thread with its own
        // runtime does the cleanup. `with (force)` ends the server's pooled connections.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                use sqlx::{Connection, Executor};
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url).await {
                    conn.execute(sqlx::AssertSqlSafe(format!(
                        "drop database if exists {name} with (force)"
                    )))
                    .await
                    .ok();
                    conn.close().await.ok();
                }
            });
        });
        cleanup.join().ok();
    }
}

/// One answer of the REST face.
#[derive(Debug)]
pub struct ApiResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// The JSON body; `null` when empty, a string when not JSON.
    pub body: Value,
    /// The body's bytes as sent.
    pub raw: Vec<u8>,
}

/// A REST answer's JSON is compact with every object's keys sorted and none repeated: the bytes
/// a `serde_json::Value` of it writes, which is what the service has always sent (its answers
/// are written straight to bytes now, in that order; `runtime/src/json.rs`).
#[track_caller]
pub fn assert_canonical(body: &Value, raw: &[u8]) {
    if raw.is_empty() || body.is_string() && !raw.starts_with(b"\"") {
        return;
    }
    let canonical = serde_json::to_vec(body).expect("a Value writes");
    assert!(
        canonical == raw,
        "the body is not canonical JSON:\n  sent:      {}\n  canonical: {}",
        String::from_utf8_lossy(raw),
        String::from_utf8_lossy(&canonical)
    );
}

impl ApiResponse {
    /// Reads a response sent with the test's own client.
    pub async fn read(response: reqwest::Response) -> Self {
        read_response(response).await
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    /// The `code` of an error body.
    pub fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }

    /// Asserts the status and returns the body, showing the body when it differs.
    #[track_caller]
    pub fn expect(&self, status: u16) -> &Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            self.body
        );
        &self.body
    }

    /// Asserts an error status, its `code` and the `{error, code}` shape.
    #[track_caller]
    pub fn expect_error(&self, status: u16, code: &str) -> &str {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            self.body
        );
        assert_eq!(self.code(), code, "unexpected code; body: {}", self.body);
        let message = self.body["error"]
            .as_str()
            .unwrap_or_else(|| panic!("error body without a sentence: {}", self.body));
        assert!(!message.is_empty(), "empty error sentence");
        message
    }
}

/// How a request authenticates.
#[derive(Debug, Clone, Copy)]
pub enum Auth<'a> {
    None,
    Key(&'a str),
    /// A raw `Authorization` header value.
    Header(&'a str),
}

/// A request body.
pub enum Body {
    Empty,
    Json(Value),
    /// Raw bytes with an optional content type.
    Raw(Vec<u8>, Option<&'static str>),
}

/// A running app with its own database, workspace and owner key.
pub struct TestApp {
    pub base_url: String,
    pub db: Db,
    pub clock: Clock,
    pub environment: Environment,
    pub client: reqwest::Client,
    pub registry: Registry,
    pub workspace_id: String,
    /// The owner's read+write key.
    pub key: String,
    shutdown: Option<oneshot::Sender<()>>,
    // Last, so the server is told to stop before its database goes away.
    _database: TestDatabase,
}

impl TestApp {
    /// The URL of this app's database, for a process of the binary to share it.
    pub fn database_url(&self) -> &str {
        self._database.url()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            shutdown.send(()).ok();
        }
    }
}

/// An app in the `development` environment (`pk_test_` keys).
pub async fn spawn_app() -> TestApp {
    spawn_app_in("development").await
}

/// An app in the named environment (`production` issues and accepts only `pk_live_` keys).
pub async fn spawn_app_in(environment: &str) -> TestApp {
    spawn_app_configured(Environment::new(environment), Clock::default(), |_| {}).await
}

/// An app whose clock is a shared test clock (`outreach serve --test-clock`): `advance_clock`
/// works, and every instance on the database shows the same time.
pub async fn spawn_app_with_test_clock() -> TestApp {
    spawn_app_configured(Environment::new("development"), Clock::shared(), |_| {}).await
}

/// An app on a shared test clock with its configuration adjusted first (the parity test runs it
/// without a job worker, so nothing it approves is sent while both faces are compared).
pub async fn spawn_app_on_test_clock_with(configure: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_configured(Environment::new("development"), Clock::shared(), configure).await
}

/// Another server over the same database, as a second instance behind a load balancer would be.
pub struct Instance {
    pub base_url: String,
    _shutdown: oneshot::Sender<()>,
}

impl TestApp {
    // ----- administration (what `outreach admin` does) -----

    /// Starts a second server with its own connection pool on this app's database and clock.
    pub async fn second_instance(&self) -> Instance {
        self.second_instance_with_clock(self.clock.clone()).await
    }

    /// Starts a second server on this app's database with a clock of its own, as a second
    /// process would have (a shared test clock still agrees through the database).
    pub async fn second_instance_with_clock(&self, clock: Clock) -> Instance {
        let db = Db::connect(self._database.url())
            .await
            .expect("connect the second instance");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a port");
        let base_url = format!("http://{}", listener.local_addr().expect("local address"));
        let state = build_state(db, clock, Config::new(&base_url, self.environment.clone()))
            .expect("build the second instance's state");
        let (shutdown, stop) = oneshot::channel::<()>();
        tokio::spawn(async move {
            serve_app(state, listener, async move {
                stop.await.ok();
            })
            .await
            .expect("serve the second instance");
        });
        Instance {
            base_url,
            _shutdown: shutdown,
        }
    }

    /// Adds a member to this app's workspace.
    pub async fn add_member(&self, email: &str, role: Role) {
        admin::add_member(
            &self.db,
            &self.clock,
            &self.workspace_id,
            email,
            role,
            Some("correct horse battery"),
        )
        .await
        .expect("add a member");
    }

    /// Creates a key for a member of this app's workspace.
    pub async fn create_key(&self, email: &str, scope: Scope) -> CreatedKey {
        self.try_create_key(email, scope, None)
            .await
            .expect("create a key")
    }

    pub async fn try_create_key(
        &self,
        email: &str,
        scope: Scope,
        expires_at: Option<i64>,
    ) -> anyhow::Result<CreatedKey> {
        admin::create_key(
            &self.db,
            &self.clock,
            &self.environment,
            &self.workspace_id,
            email,
            "a key",
            scope,
            expires_at,
        )
        .await
    }

    /// Adds credits to this app's workspace, for the actions that spend them.
    pub async fn grant_credits(&self, amount: i64) {
        let source = outreach_runtime::credits::Source {
            reason: Some("test grant"),
            ..Default::default()
        };
        outreach_runtime::credits::grant(
            &self.db,
            &self.clock,
            &self.workspace_id,
            amount,
            &source,
        )
        .await
        .expect("grant credits");
    }

    /// This app's database, for starting `outreach serve` processes on it.
    pub(crate) fn database(&self) -> &TestDatabase {
        &self._database
    }

    /// The owner's read-only key.
    pub async fn read_key(&self) -> String {
        self.create_key(OWNER_EMAIL, Scope::Read).await.key
    }

    /// Creates another workspace with its own owner; returns its id and the owner's write key.
    pub async fn other_workspace(&self, name: &str, owner_email: &str) -> (String, String) {
        let created = admin::create_workspace(
            &self.db,
            &self.clock,
            name,
            owner_email,
            Some("correct horse battery"),
            0,
        )
        .await
        .expect("create another workspace");
        let key = admin::create_key(
            &self.db,
            &self.clock,
            &self.environment,
            &created.workspace_id,
            owner_email,
            "other",
            Scope::Write,
            None,
        )
        .await
        .expect("create the other owner's key");
        (created.workspace_id, key.key)
    }

    // ----- REST -----

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// Sends a request to a path of the server (not prefixed).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        auth: Auth<'_>,
        body: Body,
    ) -> ApiResponse {
        let mut request = self.client.request(method, self.url(path));
        request = match auth {
            Auth::None => request,
            Auth::Key(key) => request.bearer_auth(key),
            Auth::Header(value) => request.header("authorization", value),
        };
        request = match body {
            Body::Empty => request,
            Body::Json(value) => request.json(&value),
            Body::Raw(bytes, content_type) => {
                let request = request.body(bytes);
                match content_type {
                    Some(content_type) => request.header("content-type", content_type),
                    None => request,
                }
            }
        };
        let response = request.send().await.expect("send the request");
        let answer = read_response(response).await;
        if path.starts_with("/api/v1/") && !path.starts_with("/api/v1/openapi.json") {
            assert_canonical(&answer.body, &answer.raw);
        }
        answer
    }

    /// `POST /api/v1{path}` with a JSON body and an `Idempotency-Key` header.
    pub async fn post_idempotent(
        &self,
        path: &str,
        key: &str,
        idempotency_key: &str,
        body: &Value,
    ) -> ApiResponse {
        let response = self
            .client
            .post(self.url(&format!("/api/v1{path}")))
            .bearer_auth(key)
            .header("idempotency-key", idempotency_key)
            .json(body)
            .send()
            .await
            .expect("send the request");
        read_response(response).await
    }

    /// `GET /api/v1{path}`.
    pub async fn get(&self, path: &str, key: &str) -> ApiResponse {
        self.send(
            Method::GET,
            &format!("/api/v1{path}"),
            Auth::Key(key),
            Body::Empty,
        )
        .await
    }

    /// `POST /api/v1{path}` with a JSON body.
    pub async fn post_json(&self, path: &str, key: &str, body: Value) -> ApiResponse {
        self.send(
            Method::POST,
            &format!("/api/v1{path}"),
            Auth::Key(key),
            Body::Json(body),
        )
        .await
    }

    /// `PATCH /api/v1{path}` with a JSON body.
    pub async fn patch_json(&self, path: &str, key: &str, body: Value) -> ApiResponse {
        self.send(
            Method::PATCH,
            &format!("/api/v1{path}"),
            Auth::Key(key),
            Body::Json(body),
        )
        .await
    }

    /// `DELETE /api/v1{path}`.
    pub async fn delete(&self, path: &str, key: &str) -> ApiResponse {
        self.send(
            Method::DELETE,
            &format!("/api/v1{path}"),
            Auth::Key(key),
            Body::Empty,
        )
        .await
    }

    /// Creates a prospect with the owner's key; returns it.
    pub async fn create_prospect(&self, body: Value) -> Value {
        self.post_json("/prospects", &self.key, body)
            .await
            .expect(201)
            .clone()
    }

    /// How many prospects the owner's workspace holds.
    pub async fn prospect_count(&self) -> u64 {
        let page = self.get("/prospects?limit=1", &self.key).await;
        page.expect(200)["total"].as_u64().expect("a total")
    }

    /// A transaction that holds what a run of `enrollment`'s step job holds in its outcome
    /// transaction before it writes the prospect: its person's lock (`person_lock`: the prospect's
    /// row, `for no key update`) and a key-share lock on the enrollment (the foreign key of the
    /// history entry it wrote). PostgreSQL only; on SQLite, which runs one writer at a time, an
    /// empty transaction.
    pub async fn hold_step_run(&self, enrollment: &str) -> sqlx::Transaction<'static, sqlx::Any> {
        let mut tx = self.db.pool().begin().await.expect("begin");
        if self.db.backend() == outreach_runtime::Backend::Postgres {
            sqlx::query(
                "select p.id from prospects p join enrollments e on e.prospect_id = p.id \
                 where e.id = $1 for no key update of p",
            )
            .bind(enrollment)
            .fetch_one(&mut *tx)
            .await
            .expect("the run locks its person");
            sqlx::query("select id from enrollments where id = $1 for key share")
                .bind(enrollment)
                .fetch_one(&mut *tx)
                .await
                .expect("the run's history entry references its enrollment");
        }
        tx
    }

    /// Whether, within ten seconds, another session of the app's PostgreSQL database waits for a
    /// lock that `holder` (a transaction the test holds open) holds.
    pub async fn a_session_waits_on(&self, holder: &mut sqlx::AnyConnection) -> bool {
        let pid: i64 = sqlx::query_scalar("select cast(pg_backend_pid() as bigint)")
            .fetch_one(&mut *holder)
            .await
            .expect("the holder's backend");
        for _ in 0..1000 {
            let waiting: i64 = sqlx::query_scalar(
                "select count(*) from pg_stat_activity where datname = current_database() \
                 and cast($1 as integer) = any(pg_blocking_pids(pid))",
            )
            .bind(pid)
            .fetch_one(self.db.pool())
            .await
            .expect("count waiting");
            if waiting > 0 {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    /// Calls an action over REST with an input object, the way a client reading the OpenAPI
    /// document would: path parameters in the path, the rest in the query string (`GET`,
    /// `DELETE`) or the JSON body.
    pub async fn rest_call(&self, action: &Action, auth: Auth<'_>, input: &Value) -> ApiResponse {
        let route = action
            .route
            .as_ref()
            .unwrap_or_else(|| panic!("`{}` has no REST route", action.name()));
        let mut fields: Map<String, Value> = input.as_object().cloned().unwrap_or_default();
        let mut path = route.path.clone();
        for param in &route.path_params {
            let value = fields
                .remove(param)
                .unwrap_or_else(|| json!("prs_00000000000000000000"));
            let text = match value {
                Value::String(text) => text,
                other => other.to_string(),
            };
            path = path.replace(&format!("{{{param}}}"), &encode(&text));
        }
        let has_body = matches!(route.method.as_str(), "POST" | "PATCH" | "PUT");
        let body = if has_body {
            Body::Json(Value::Object(fields))
        } else {
            let query: Vec<String> = fields
                .iter()
                .map(|(name, value)| {
                    let text = match value {
                        Value::String(text) => text.clone(),
                        Value::Array(items) => items
                            .iter()
                            .map(|item| {
                                item.as_str()
                                    .map_or_else(|| item.to_string(), str::to_owned)
                            })
                            .collect::<Vec<_>>()
                            .join(","),
                        other => other.to_string(),
                    };
                    format!("{}={}", encode(name), encode(&text))
                })
                .collect();
            if !query.is_empty() {
                path = format!("{path}?{}", query.join("&"));
            }
            Body::Empty
        };
        self.send(route.method.clone(), &format!("/api/v1{path}"), auth, body)
            .await
    }

    // ----- MCP -----

    /// POSTs one JSON-RPC message to `/api/mcp` with the headers a Streamable HTTP client sends.
    pub async fn mcp_raw(&self, key: Option<&str>, body: &Value) -> (StatusCode, HeaderMap, Value) {
        self.mcp_with_headers(key, body, &[]).await
    }

    /// Like [`Self::mcp_raw`], with extra or overriding headers.
    pub async fn mcp_with_headers(
        &self,
        key: Option<&str>,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, Value) {
        self.mcp_at("/api/mcp", key, body, headers).await
    }

    /// Like [`Self::mcp_with_headers`], at `path` (the MCP URL with a query, or the read-only
    /// one).
    pub async fn mcp_at(
        &self,
        path: &str,
        key: Option<&str>,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, Value) {
        let mut request = self
            .client
            .post(self.url(path))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", MCP_PROTOCOL_VERSION)
            .body(body.to_string());
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        for (name, value) in headers {
            request = request.header(*name, HeaderValue::from_str(value).expect("header value"));
        }
        let response = request.send().await.expect("send the MCP request");
        let response = read_response(response).await;
        (response.status, response.headers, response.body)
    }

    /// `tools/call`: returns `(isError, body)`, checking the envelope on the way: HTTP 200, a
    /// JSON-RPC result, and a text block with the body as JSON. A success carries the body as
    /// `structuredContent` too (the `replayed` mark of a replayed answer is checked against
    /// `_meta` and taken off, so the body compares with REST's); a failure carries none, since
    /// clients validate it against the output schema, and its body is the text block.
    pub async fn mcp_call(&self, key: &str, tool: &str, arguments: Value) -> (bool, Value) {
        let result = self.mcp_call_result(key, tool, arguments).await;
        let is_error = result["isError"].as_bool().unwrap_or(false);
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text block: {result}"));
        let from_text: Value = serde_json::from_str(text).expect("the text block is JSON");
        if is_error {
            assert!(
                result.get("structuredContent").is_none(),
                "a tool error carries no structuredContent: {result}"
            );
            assert!(
                from_text["error"].is_string() && from_text["code"].is_string(),
                "a tool error's text is the {{error, code}} body: {result}"
            );
            return (true, from_text);
        }
        let mut structured = result["structuredContent"].clone();
        assert!(
            !structured.is_null(),
            "tools/call {tool} without structuredContent: {result}"
        );
        assert_eq!(
            from_text, structured,
            "the text block carries the structured content"
        );
        let replayed = structured
            .as_object_mut()
            .and_then(|fields| fields.remove("replayed"));
        assert_eq!(
            replayed.is_some(),
            result["_meta"]["idempotent_replayed"] == json!(true),
            "a replay is marked in structuredContent and _meta alike: {result}"
        );
        (false, structured)
    }

    /// `tools/call`: the JSON-RPC `result`, after checking HTTP 200 and the id.
    pub async fn mcp_call_result(&self, key: &str, tool: &str, arguments: Value) -> Value {
        let request = json!({
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        });
        let (status, _, body) = self.mcp_raw(Some(key), &request).await;
        assert_eq!(status, StatusCode::OK, "tools/call {tool}: {body}");
        assert_eq!(
            body["id"],
            json!(7),
            "the response answers the request: {body}"
        );
        body.get("result")
            .unwrap_or_else(|| panic!("tools/call {tool} gave no result: {body}"))
            .clone()
    }

    /// `tools/list` of every toolset: the tools `key`'s scopes allow.
    pub async fn mcp_tools(&self, key: &str) -> Vec<Value> {
        self.mcp_tools_at("/api/mcp?toolsets=all", key, &[]).await
    }

    /// Every tool: `tools/list` of every toolset for a `send` key.
    pub async fn mcp_every_tool(&self) -> Vec<Value> {
        let key = crate::sequences::send_key(self).await;
        self.mcp_tools(&key).await
    }

    /// `tools/list` at `path` (a query names toolsets) with `headers`: the tools.
    pub async fn mcp_tools_at(
        &self,
        path: &str,
        key: &str,
        headers: &[(&str, &str)],
    ) -> Vec<Value> {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
        let (status, _, body) = self.mcp_at(path, Some(key), &request, headers).await;
        assert_eq!(status, StatusCode::OK, "tools/list: {body}");
        body["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("tools/list without tools: {body}"))
            .clone()
    }
}

async fn read_response(response: reqwest::Response) -> ApiResponse {
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("read the body");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    ApiResponse {
        status,
        headers,
        body,
        raw: bytes.to_vec(),
    }
}

/// Percent-encodes a path segment or query component.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Like [`spawn_app`], with the configuration adjusted first (the OAuth tests relax the client
/// metadata fetch policy to serve documents from the test itself).
pub async fn spawn_app_with(configure: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_configured(Environment::new("development"), Clock::default(), configure).await
}

/// The one way a [`TestApp`] starts: a fresh database, the server on port 0 with the adjusted
/// configuration, and a workspace with its owner and the owner's read+write key.
async fn spawn_app_configured(
    environment: Environment,
    clock: Clock,
    configure: impl FnOnce(&mut Config),
) -> TestApp {
    let database = TestDatabase::create().await;
    let url = database.url().to_owned();
    spawn_app_reaching(database, &url, environment, clock, configure).await
}

/// A development [`TestApp`] on `database` that reaches it at `url` (through a proxy, say),
/// with the adjusted configuration.
pub async fn spawn_app_over(
    database: TestDatabase,
    url: &str,
    configure: impl FnOnce(&mut Config),
) -> TestApp {
    let environment = Environment::new("development");
    spawn_app_reaching(database, url, environment, Clock::default(), configure).await
}

async fn spawn_app_reaching(
    database: TestDatabase,
    url: &str,
    environment: Environment,
    clock: Clock,
    configure: impl FnOnce(&mut Config),
) -> TestApp {
    let db = Db::connect(url)
        .await
        .expect("connect to the test database");
    db.migrate().await.expect("migrate the test database");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a port");
    let base_url = format!("http://{}", listener.local_addr().expect("local address"));
    let mut config = Config::new(&base_url, environment.clone());
    configure(&mut config);
    let state = build_state(db.clone(), clock.clone(), config).expect("build the app state");
    let (shutdown, stop) = oneshot::channel::<()>();
    tokio::spawn(async move {
        serve_app(state, listener, async move {
            stop.await.ok();
        })
        .await
        .expect("serve");
    });
    let created = admin::create_workspace(
        &db,
        &clock,
        "Acme",
        OWNER_EMAIL,
        Some("correct horse battery"),
        0,
    )
    .await
    .expect("create the workspace");
    let key = admin::create_key(
        &db,
        &clock,
        &environment,
        &created.workspace_id,
        OWNER_EMAIL,
        "test key",
        Scope::Write,
        None,
    )
    .await
    .expect("create the owner's key");
    TestApp {
        base_url,
        db,
        clock,
        environment,
        client: reqwest::Client::builder().build().expect("http client"),
        registry: Registry::build().expect("a valid registry"),
        workspace_id: created.workspace_id,
        key: key.key,
        shutdown: Some(shutdown),
        _database: database,
    }
}

// ----- the real binary (`outreach serve`, `outreach admin`) -----

/// The `outreach` binary with a clean environment; killed if the test drops it.
pub(crate) fn outreach() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_outreach"));
    for name in [
        "DATABASE_URL",
        "OUTREACH_ADDR",
        "OUTREACH_BASE_URL",
        "OUTREACH_ENV",
        "OUTREACH_LOG_FORMAT",
        "OUTREACH_RATE_LIMIT",
        "OUTREACH_RATE_LIMIT_BURST",
        "OUTREACH_METRICS_TOKEN",
        "OUTREACH_WORKERS",
        "OUTREACH_JOB_POLL_MS",
        "OUTREACH_NETWORK",
        "OUTREACH_SANDBOX_SEED",
        "UNIPILE_DSN",
        "UNIPILE_API_KEY",
        "UNIPILE_WEBHOOK_SECRET",
        "UNIPILE_TIMEOUT_SECS",
        "LLM_BASE_URL",
        "LLM_API_KEY",
        "LLM_MODEL",
        "LLM_TIMEOUT_MS",
    ] {
        command.env_remove(name);
    }
    // Tests count credits from zero; the starter-credit tests set their own amount.
    command
        .env("OUTREACH_STARTER_CREDITS", "0")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Runs `outreach admin --database-url URL --json ARGS...`.
pub(crate) async fn admin(database: &TestDatabase, args: &[&str]) -> Output {
    let mut command = outreach();
    command
        .args(["admin", "--database-url", database.url(), "--json"])
        .args(args);
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("admin finishes")
        .expect("run outreach")
}

/// Runs an admin command that must succeed; returns its one JSON object.
pub(crate) async fn admin_ok(database: &TestDatabase, args: &[&str]) -> Value {
    let output = admin(database, args).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{args:?} failed: {stdout} {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "{args:?}: --json prints one line: {stdout}");
    let value: Value =
        serde_json::from_str(lines[0]).unwrap_or_else(|_| panic!("{args:?}: not JSON: {stdout}"));
    assert!(value.is_object(), "{args:?}: {value}");
    value
}

/// A workspace made with `outreach admin workspace create` (owned by `email`), and a
/// `read,write` key of its owner made with `outreach admin key create`: (workspace id, key).
pub(crate) async fn admin_workspace_with_key(
    database: &TestDatabase,
    name: &str,
    email: &str,
) -> (String, String) {
    let created = admin_ok(
        database,
        &[
            "workspace",
            "create",
            "--name",
            name,
            "--owner-email",
            email,
        ],
    )
    .await;
    let workspace = field(&created, "workspace_id");
    let key = admin_ok(
        database,
        &[
            "key",
            "create",
            "--workspace",
            &workspace,
            "--email",
            email,
            "--name",
            "tests",
            "--scopes",
            "read,write",
        ],
    )
    .await;
    (workspace, field(&key, "key"))
}

pub(crate) fn field(value: &Value, name: &str) -> String {
    value[name]
        .as_str()
        .unwrap_or_else(|| panic!("no `{name}` in {value}"))
        .to_owned()
}

/// A server started with `outreach serve` on port 0, read from its own output.
pub(crate) struct Served {
    pub(crate) child: tokio::process::Child,
    pub(crate) base_url: String,
    /// What it printed before the addresses.
    pub(crate) banner: Vec<String>,
}

/// Starts `serve` and returns once it has printed its addresses and answers `/healthz`.
pub(crate) async fn serve(database: &TestDatabase) -> Served {
    let served = start_serve(database).await;
    let (status, body) = served.get("/healthz", "").await;
    assert_eq!(status, 200, "the printed address serves: {body}");
    served
}

/// Starts `serve` and returns as soon as it has printed its addresses.
pub(crate) async fn start_serve(database: &TestDatabase) -> Served {
    start_serve_with(database, &[]).await
}

/// Starts `serve` with extra arguments and returns as soon as it has printed its addresses.
pub(crate) async fn start_serve_with(database: &TestDatabase, extra: &[&str]) -> Served {
    start_serve_env(database, extra, &[]).await
}

/// Starts `serve` with extra arguments and environment variables (a drafting model's settings)
/// and returns as soon as it has printed its addresses.
pub(crate) async fn start_serve_env(
    database: &TestDatabase,
    extra: &[&str],
    env: &[(String, String)],
) -> Served {
    let mut child = outreach()
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--database-url",
            database.url(),
        ])
        .args(extra)
        .envs(
            env.iter()
                .map(|(name, value)| (name.as_str(), value.as_str())),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start outreach serve");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut banner = Vec::new();
    let read = async {
        while let Some(line) = lines.next_line().await.expect("read stdout") {
            let done = line.starts_with("Docs:");
            banner.push(line);
            if done {
                return;
            }
        }
        panic!("serve exited before printing its addresses: {banner:?}");
    };
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("serve prints its addresses");
    let rest = banner
        .iter()
        .find_map(|line| line.strip_prefix("REST:"))
        .expect("a REST line")
        .trim()
        .to_owned();
    let base_url = rest
        .strip_suffix("/api/v1")
        .expect("the REST address ends in /api/v1")
        .to_owned();
    // Keep draining stdout so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Served {
        child,
        base_url,
        banner,
    }
}

impl Served {
    pub(crate) async fn get(&self, path: &str, key: &str) -> (u16, Value) {
        let response = reqwest::Client::new()
            .get(format!("{}{path}", self.base_url))
            .bearer_auth(key)
            .send()
            .await
            .expect("request");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub(crate) async fn terminate(mut self) {
        let pid = self.child.id().expect("a running server").to_string();
        let killed = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .expect("run kill");
        assert!(killed.success());
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("exits after SIGTERM")
            .expect("wait");
        assert!(status.success(), "graceful shutdown exits 0, got {status}");
    }

    /// Kills the server with SIGKILL, as a crash would, and waits for it to be gone.
    pub(crate) async fn kill(mut self) {
        self.child.start_kill().expect("send SIGKILL");
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the server dies after SIGKILL")
            .expect("wait");
    }
}

/// Creates a sender through the API and gives it the fixed id `id`, for tests whose sandbox
/// calls name the sender before the app exists (the sandbox helpers take only the workspace's
/// own senders).
pub async fn sender_with_id(app: &TestApp, id: &str) {
    let created = app
        .post_json(
            "/senders",
            &app.key,
            serde_json::json!({"name": id, "timezone": "UTC"}),
        )
        .await;
    let created = created.expect(201)["id"]
        .as_str()
        .expect("a sender id")
        .to_owned();
    sqlx::query("update senders set id = $1 where id = $2")
        .bind(id)
        .bind(&created)
        .execute(app.db.pool())
        .await
        .expect("give the sender its fixed id");
}

/// The two sides of a lock-order test: a transaction the test plays (a run of a step, an
/// approval) and a request it holds back. On PostgreSQL the request starts while the transaction
/// holds its locks, and the transaction goes on once the request waits for them; on SQLite, which
/// runs one writer at a time, the request starts after the transaction committed.
pub struct HeldBack {
    start: Option<oneshot::Sender<()>>,
}

impl HeldBack {
    /// The holder's side, and what the held-back request awaits before it starts.
    pub fn new() -> (Self, oneshot::Receiver<()>) {
        let (start, started) = oneshot::channel();
        (Self { start: Some(start) }, started)
    }

    /// On PostgreSQL: lets the request start and returns once it waits for a lock `holder`
    /// holds; panics with `never` if it does not within ten seconds. On SQLite: nothing.
    pub async fn until_it_waits(
        &mut self,
        app: &TestApp,
        holder: &mut sqlx::AnyConnection,
        never: &str,
    ) {
        if app.db.backend() != outreach_runtime::Backend::Postgres {
            return;
        }
        if let Some(start) = self.start.take() {
            start.send(()).ok();
        }
        assert!(app.a_session_waits_on(holder).await, "{never}");
    }

    /// After the holder committed: lets the request start if it has not yet (SQLite).
    pub fn release(mut self) {
        if let Some(start) = self.start.take() {
            start.send(()).ok();
        }
    }
}

/// A counter of an instance's `/metrics` at `base_url`, e.g.
/// `outreach_connections_closed_total{reason="evicted"}` (0 before its first count).
pub async fn metric(client: &reqwest::Client, base_url: &str, series: &str) -> u64 {
    let text = client
        .get(format!("{base_url}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}
