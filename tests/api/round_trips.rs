//! What one request costs the database: on PostgreSQL an authenticated read such as
//! `GET /workspace` makes exactly one round trip (the credential, its membership, role and
//! workspace in one statement, and no ping of a pooled connection after it), counted by a proxy
//! between the server and PostgreSQL. And the credential reads of concurrent requests, which
//! PostgreSQL batches, still give each request its own credential's answer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use outreach_runtime::{Scope, admin, ids};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::helpers::{OWNER_EMAIL, TestDatabase, spawn_app, spawn_app_over};

/// A TCP proxy in front of PostgreSQL that counts the round trips its clients start: each
/// extended-protocol exchange ends with a `Sync` message (`S`), and a simple query is one `Query`
/// message (`Q`); a pooled connection's ping is a lone `Sync`.
struct CountingProxy {
    address: SocketAddr,
    round_trips: Arc<AtomicU64>,
}

impl CountingProxy {
    async fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let round_trips = Arc::new(AtomicU64::new(0));
        let counter = round_trips.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(&upstream)
                    .await
                    .expect("reach PostgreSQL");
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                tokio::spawn(async move {
                    tokio::io::copy(&mut server_read, &mut client_write)
                        .await
                        .ok();
                });
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut parser = FrontendMessages::default();
                    let mut buffer = vec![0u8; 64 * 1024];
                    loop {
                        let read = match client_read.read(&mut buffer).await {
                            Ok(0) | Err(_) => break,
                            Ok(read) => read,
                        };
                        let trips = parser.feed(&buffer[..read]);
                        counter.fetch_add(trips, Ordering::SeqCst);
                        if server_write.write_all(&buffer[..read]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Self {
            address,
            round_trips,
        }
    }

    fn count(&self) -> u64 {
        self.round_trips.load(Ordering::SeqCst)
    }
}

/// Splits a client's byte stream into PostgreSQL frontend messages: the startup message first
/// (a length and a body), then one type byte and a length each.
#[derive(Default)]
struct FrontendMessages {
    pending: Vec<u8>,
    started: bool,
}

impl FrontendMessages {
    /// Takes the next bytes; answers how many round trips (`Sync` or `Query`) they completed.
    fn feed(&mut self, bytes: &[u8]) -> u64 {
        self.pending.extend_from_slice(bytes);
        let mut trips = 0;
        loop {
            let header = if self.started { 5 } else { 4 };
            if self.pending.len() < header {
                return trips;
            }
            let at = header - 4;
            let length =
                u32::from_be_bytes(self.pending[at..at + 4].try_into().expect("four bytes"))
                    as usize;
            let total = at + length;
            if self.pending.len() < total {
                return trips;
            }
            if self.started {
                if matches!(self.pending[0], b'S' | b'Q') {
                    trips += 1;
                }
            } else {
                self.started = true;
            }
            self.pending.drain(..total);
        }
    }
}

/// The test database's URL through the proxy, without TLS (the proxy reads the messages).
fn through(url: &str, proxy: SocketAddr) -> String {
    let mut url = url::Url::parse(url).expect("a database URL");
    url.set_host(Some(&proxy.ip().to_string())).expect("host");
    url.set_port(Some(proxy.port())).expect("port");
    url.query_pairs_mut().append_pair("sslmode", "disable");
    url.to_string()
}

/// The `host:port` of PostgreSQL in a database URL, where the proxy forwards to.
fn upstream(url: &str) -> String {
    let url = url::Url::parse(url).expect("a database URL");
    format!(
        "{}:{}",
        url.host_str().expect("a host"),
        url.port().unwrap_or(5432)
    )
}

#[tokio::test]
async fn an_authenticated_read_makes_one_round_trip_on_postgresql() {
    let database = TestDatabase::create().await;
    if !database.url().starts_with("postgres") {
        println!("PostgreSQL only: SQLite has no round trips to count");
        return;
    }
    let proxy = CountingProxy::start(upstream(database.url())).await;
    let url = through(database.url(), proxy.address);
    let app = spawn_app_over(database, &url, |config| config.jobs.workers = 0).await;
    let (base_url, key) = (&app.base_url, &app.key);
    let client = reqwest::Client::new();
    let rest = || {
        client
            .get(format!("{base_url}/api/v1/workspace"))
            .bearer_auth(key)
    };
    let mcp = || {
        client
            .post(format!("{base_url}/api/mcp"))
            .bearer_auth(key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", crate::helpers::MCP_PROTOCOL_VERSION)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "service_get_workspace", "arguments": {}}}))
    };
    // The first call records the key's use (a write, once an hour) and opens connections.
    for _ in 0..3 {
        assert_eq!(rest().send().await.expect("request").status(), 200);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Background work (the recovery round a server runs at start) may add a statement to a
    // window; a window of the server's own requests alone shows exactly one round trip each.
    const REQUESTS: u64 = 20;
    for (face, call) in [("REST", &rest as &dyn Fn() -> _), ("MCP", &mcp)] {
        let mut windows = Vec::new();
        for _ in 0..4 {
            let before = proxy.count();
            for _ in 0..REQUESTS {
                let response = call().send().await.expect("request");
                assert_eq!(response.status(), 200);
                let body: Value = response.json().await.expect("JSON");
                assert!(body.get("error").is_none(), "{body}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            let trips = proxy.count() - before;
            windows.push(trips);
            if trips == REQUESTS {
                break;
            }
        }
        println!("{face}: round trips per {REQUESTS} requests, by window: {windows:?}");
        assert!(
            windows.contains(&REQUESTS),
            "{face}: {REQUESTS} requests made {windows:?} round trips, never one each"
        );
        assert!(
            windows.iter().all(|trips| *trips >= REQUESTS),
            "{windows:?}"
        );
    }
}

/// Many requests at once with several keys (one revoked, one unknown) and an OAuth token: on
/// PostgreSQL their credential reads share statements, and each still gets its own answer.
#[tokio::test]
async fn concurrent_requests_with_different_keys_each_get_their_own_answer() {
    let app = spawn_app().await;
    // (key, the credential id and scope it must be answered with, or None for a 401)
    let mut keys: Vec<(String, Option<(String, &str)>)> = Vec::new();
    for (scope, name) in [
        (Scope::Read, "read"),
        (Scope::Write, "write"),
        (Scope::Read, "read"),
    ] {
        let created = app.create_key(OWNER_EMAIL, scope).await;
        keys.push((created.key, Some((created.id, name))));
    }
    let revoked = app.create_key(OWNER_EMAIL, Scope::Read).await;
    admin::revoke_key(&app.db, &app.clock, &revoked.id)
        .await
        .expect("revoke");
    keys.push((revoked.key, None));
    // Well formed, so it is looked up (and not found) rather than refused by its shape.
    keys.push((ids::new_secret(app.environment.key_prefix()), None));
    // An OAuth token is read by the other statement, in the same batches.
    let (grant, token) =
        crate::oauth_tokens::issue_token(&app, OWNER_EMAIL, Scope::Read, None).await;
    keys.push((token, Some((grant, "read"))));

    // Each key 20 times at once (a batch holds the same key more than once), 120 requests in all:
    // under the 128 connections a client may hold.
    let mut calls = tokio::task::JoinSet::new();
    for round in 0..20 {
        for (key, expected) in keys.clone() {
            let client = app.client.clone();
            let url = format!("{}/api/v1/workspace", app.base_url);
            calls.spawn(async move {
                let response = client.get(url).bearer_auth(&key).send().await;
                let response = response.expect("request");
                let status = response.status().as_u16();
                let body: Value = response.json().await.expect("JSON");
                (round, expected, status, body)
            });
        }
    }
    let mut answered = 0;
    while let Some(done) = calls.join_next().await {
        let (round, expected, status, body) = done.expect("a call");
        match expected {
            Some((id, scope)) => {
                assert_eq!(status, 200, "round {round}: {body}");
                let caller = &body["caller"];
                assert_eq!(caller["credential_id"], json!(id), "round {round}: {body}");
                assert_eq!(
                    caller["scopes"].as_array().and_then(|s| s.last()),
                    Some(&json!(scope))
                );
                assert_eq!(body["workspace"]["id"], json!(app.workspace_id), "{body}");
            }
            None => assert_eq!(status, 401, "round {round}: {body}"),
        }
        answered += 1;
    }
    assert_eq!(answered, 20 * keys.len());
}

/// The server's connections to PostgreSQL ended under it (a restart, an administrator, an idle
/// timeout): the next request still succeeds, read on a new connection, and so does the one after.
#[tokio::test]
async fn requests_succeed_after_postgresql_ends_the_server_s_connections() {
    let app = spawn_app().await;
    if app.db.backend() != outreach_runtime::db::Backend::Postgres {
        println!("PostgreSQL only");
        return;
    }
    let workspace = || app.get("/workspace", &app.key);
    for _ in 0..4 {
        workspace().await.expect(200);
    }
    let ended: i64 = sqlx::query_scalar(
        "select count(*) from (select pg_terminate_backend(pid) from pg_stat_activity \
         where datname = current_database() and pid <> pg_backend_pid()) as ended",
    )
    .fetch_one(app.db.pool())
    .await
    .expect("end the other connections");
    assert!(ended >= 1, "no connection to end");
    for _ in 0..4 {
        workspace().await.expect(200);
    }
}
