//! HTTP hygiene: slow bodies, duplicate credentials, CORS for browser apps, per-credential rate
//! limits, and the metrics. Every refusal a client can read is `{error, code}`. Slow, silent and
//! surplus connections are `connections.rs`.

use std::time::Duration;

use outreach_runtime::Scope;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::helpers::{
    ApiResponse, Auth, Body, OWNER_EMAIL, TestDatabase, outreach, spawn_app, spawn_app_with,
};

fn address(base_url: &str) -> String {
    base_url.trim_start_matches("http://").to_owned()
}

/// Reads until the server closes the connection or `within` passes; `None` when it did not.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    match tokio::time::timeout(within, stream.read_to_end(&mut received)).await {
        Ok(_) => Some(received),
        Err(_) => None,
    }
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_a_json_400() {
    let app = spawn_app_with(|config| config.http.body_timeout = Duration::from_millis(500)).await;
    let mut stream = TcpStream::connect(address(&app.base_url))
        .await
        .expect("connect");
    let head = format!(
        "POST /api/v1/prospects HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"email\":",
        app.key
    );
    stream.write_all(head.as_bytes()).await.expect("send");
    let answer = read_until_closed(&mut stream, Duration::from_secs(5))
        .await
        .expect("the server answered and closed within 5 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let body: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("JSON body: {answer}"));
    assert_eq!(body["code"], "invalid_request", "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("did not arrive"),
        "{body}"
    );
}

#[tokio::test]
async fn two_authorization_headers_are_refused_on_rest_and_mcp() {
    let app = spawn_app().await;
    let other = app.read_key().await;
    let response = app
        .client
        .get(app.url("/api/v1/workspace"))
        .bearer_auth(&app.key)
        .header("authorization", format!("Bearer {other}"))
        .send()
        .await
        .expect("send");
    let response = ApiResponse::read(response).await;
    let message = response.expect_error(400, "invalid_request");
    assert!(message.contains("more than one Authorization"), "{message}");

    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let (status, _, body) = app
        .mcp_with_headers(
            Some(&app.key),
            &call,
            &[("authorization", &format!("Bearer {other}"))],
        )
        .await;
    assert_eq!(status.as_u16(), 400, "{body}");
    assert_eq!(body["code"], "invalid_request", "{body}");
}

#[tokio::test]
async fn a_browser_preflight_to_rest_is_answered_without_a_credential() {
    let app = spawn_app().await;
    let preflight = app
        .client
        .request(Method::OPTIONS, app.url("/api/v1/imports"))
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, idempotency-key",
        )
        .send()
        .await
        .expect("send");
    assert!(preflight.status().is_success(), "{}", preflight.status());
    let headers = preflight.headers();
    assert_eq!(headers["access-control-allow-origin"], "*");
    assert!(headers.get("access-control-allow-credentials").is_none());
    let allowed = headers["access-control-allow-headers"]
        .to_str()
        .unwrap_or_default();
    assert!(allowed.contains("idempotency-key"), "{allowed}");

    let call = app
        .client
        .get(app.url("/api/v1/workspace"))
        .bearer_auth(&app.key)
        .header("origin", "https://app.example")
        .send()
        .await
        .expect("send");
    let exposed = call.headers()["access-control-expose-headers"]
        .to_str()
        .unwrap_or_default()
        .to_owned();
    for header in [
        "x-request-id",
        "idempotent-replayed",
        "retry-after",
        "ratelimit",
        "ratelimit-policy",
    ] {
        assert!(exposed.contains(header), "{header} not exposed: {exposed}");
    }
    // Nothing in either answer depends on the Origin or the preflight's headers (any origin,
    // fixed lists), so neither says it varies by them (runtime/src/cors.rs).
    for answer in [headers, call.headers()] {
        let vary: Vec<&str> = answer
            .get_all("vary")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect();
        assert!(
            !vary
                .iter()
                .any(|value| value.contains("origin") || value.contains("access-control-request")),
            "{vary:?}"
        );
    }
}

#[tokio::test]
async fn a_credential_past_its_rate_gets_429_with_retry_after_and_the_others_do_not() {
    let app = spawn_app_with(|config| {
        config.rate_limit.per_second = 1;
        config.rate_limit.burst = 2;
    })
    .await;
    let other = app.create_key(OWNER_EMAIL, Scope::Read).await.key;
    let first = app.get("/workspace", &app.key).await;
    first.expect(200);
    assert_eq!(
        first.header("ratelimit-policy"),
        Some("\"per-credential\";q=2;w=2")
    );
    assert_eq!(
        first.header("ratelimit"),
        Some("\"per-credential\";r=1;t=1")
    );
    app.get("/workspace", &app.key).await.expect(200);

    let refused = app.get("/workspace", &app.key).await;
    let message = refused.expect_error(429, "rate_limited");
    assert!(message.contains("Retry in"), "{message}");
    let retry_after: u64 = refused
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("a Retry-After in seconds");
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    assert_eq!(refused.body["retry_after"], json!(retry_after));
    assert!(
        refused
            .header("ratelimit")
            .is_some_and(|value| value.contains("r=0"))
    );

    // Another credential has its own bucket; MCP shares the credential's.
    app.get("/workspace", &other).await.expect(200);
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let (status, headers, body) = app.mcp_raw(Some(&app.key), &call).await;
    assert_eq!(status.as_u16(), 429, "{body}");
    assert_eq!(body["code"], "rate_limited");
    assert!(headers.get("retry-after").is_some());
}

#[tokio::test]
async fn metrics_count_requests_per_action_and_status() {
    let app = spawn_app().await;
    app.get("/prospects", &app.key).await.expect(200);
    app.get("/prospects/prs_00000000000000000000", &app.key)
        .await
        .expect_error(404, "not_found");
    let response = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 200);
    let text = response.text().await.expect("text");
    assert!(
        text.contains("outreach_http_requests_total{action=\"list_prospects\",status=\"200\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("outreach_http_requests_total{action=\"get_prospect\",status=\"404\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("outreach_http_request_duration_seconds_count{action=\"list_prospects\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn metrics_need_the_token_when_one_is_set() {
    let app = spawn_app_with(|config| config.metrics_token = Some("scrape-me".to_owned())).await;
    let refused = app
        .send(Method::GET, "/metrics", Auth::None, Body::Empty)
        .await;
    refused.expect_error(401, "unauthenticated");
    let allowed = app
        .send(
            Method::GET,
            "/metrics",
            Auth::Header("Bearer scrape-me"),
            Body::Empty,
        )
        .await;
    assert_eq!(allowed.status.as_u16(), 200);
}

/// Starts `outreach serve` with JSON logs at `info` going to `stderr` and `extra` arguments;
/// answers the child and its REST address (ending in `/api/v1`) once it has printed it.
async fn serve_with_json_logs(
    database: &TestDatabase,
    extra: &[&str],
    stderr: std::process::Stdio,
) -> (tokio::process::Child, String) {
    let mut child = outreach()
        .args(["serve", "--addr", "127.0.0.1:0", "--log-format", "json"])
        .args(["--database-url", database.url()])
        .args(extra)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("start outreach serve");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let rest = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = stdout.next_line().await.expect("read stdout") {
            if let Some(rest) = line.strip_prefix("REST:") {
                return rest.trim().to_owned();
            }
        }
        panic!("serve exited before printing its address");
    })
    .await
    .expect("serve prints its address");
    tokio::spawn(async move { while let Ok(Some(_)) = stdout.next_line().await {} });
    (child, rest)
}

#[tokio::test]
async fn json_logs_have_one_access_line_per_request_with_the_route_template() {
    let database = TestDatabase::create().await;
    let (mut child, rest) =
        serve_with_json_logs(&database, &[], std::process::Stdio::piped()).await;
    let base_url = rest.trim_end_matches("/api/v1").to_owned();
    let long = "x".repeat(5_000);
    let client = reqwest::Client::new();
    client
        .get(format!("{base_url}/api/v1/prospects/{long}"))
        .send()
        .await
        .expect("request");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = stderr.next_line().await.expect("read stderr") {
            let value: Value = serde_json::from_str(&line)
                .unwrap_or_else(|_| panic!("a log line that is not JSON: {line}"));
            if value["fields"]["message"] == "request" {
                return value;
            }
        }
        panic!("no access line");
    })
    .await
    .expect("an access line within 30 s");
    let fields = &line["fields"];
    assert_eq!(fields["route"], "/api/v1/prospects/{id}", "{line}");
    assert_eq!(fields["status"], 401, "{line}");
    assert_eq!(fields["method"], "GET", "{line}");
    assert!(
        fields["request_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("req_")),
        "{line}"
    );
    let path = fields["path"].as_str().unwrap_or_default();
    assert!(path.len() < 400 && path.contains("truncated"), "{line}");
    child.kill().await.ok();
}

/// The access log is written by a thread of its own, off the request's path; a server told to
/// stop writes out every line it still holds before it exits, so none is lost.
#[tokio::test]
async fn every_access_line_is_written_before_a_stopped_server_exits() {
    const REQUESTS: usize = 600;
    let database = TestDatabase::create().await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log_path = dir.path().join("server.log");
    let log = std::fs::File::create(&log_path).expect("create the log file");
    let limits = ["--rate-limit", "1000000", "--rate-limit-burst", "1000000"];
    let (mut child, base_url) = serve_with_json_logs(&database, &limits, log.into()).await;

    let client = reqwest::Client::new();
    // Eight connections at a time (a client gets at most 128), each sending its share.
    let mut sent = tokio::task::JoinSet::new();
    for first in 0..8 {
        let client = client.clone();
        let base_url = base_url.clone();
        sent.spawn(async move {
            for n in (first..REQUESTS).step_by(8) {
                let response = client
                    .get(format!("{base_url}/lists/lst_log{n}"))
                    .bearer_auth("sk_test_unknown")
                    .send()
                    .await
                    .expect("request");
                assert_eq!(response.status().as_u16(), 401);
            }
        });
    }
    while let Some(done) = sent.join_next().await {
        done.expect("a request task");
    }
    // Stopped at once, with the last lines perhaps still buffered.
    let pid = child.id().expect("a running server").to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .expect("run kill");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("exits after SIGTERM")
        .expect("wait");
    assert!(status.success(), "{status}");

    let text = std::fs::read_to_string(&log_path).expect("read the log");
    let mut logged = std::collections::BTreeSet::new();
    for line in text.lines() {
        let value: Value = serde_json::from_str(line)
            .unwrap_or_else(|_| panic!("a log line that is not JSON: {line}"));
        let fields = &value["fields"];
        if fields["message"] == "request" && fields["route"] == "/api/v1/lists/{id}" {
            assert_eq!(fields["status"], 401, "{line}");
            logged.insert(fields["path"].as_str().expect("a path").to_owned());
        }
    }
    assert_eq!(
        logged.len(),
        REQUESTS,
        "one access line per request, none lost"
    );
    // The line logged just before the process exits is there too.
    let last: Value = serde_json::from_str(text.lines().last().expect("a line")).expect("JSON");
    assert_eq!(last["fields"]["message"], "stopped", "{last}");
}
