//! Webhooks: endpoints made, changed and refused; every event of their types delivered to a
//! loopback receiver, signed as Standard Webhooks 1.0 says (each delivery checked by the
//! `standardwebhooks` crate, which nobody here wrote); failures walked through the retry schedule
//! with the test clock; a `410`, a redirect, a `429` with `Retry-After` and a timeout; rotation,
//! redelivery, replay and the test message.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::helpers::{TestApp, spawn_app, spawn_app_in, spawn_app_with_test_clock};
use crate::outreach::advance;
use crate::sequences::{insert_sender, send_key, sequence};

/// How the receiver answers.
#[derive(Debug, Clone)]
pub enum Answer {
    Ok,
    Status(u16),
    Redirect,
    RetryAfter(u16, &'static str),
    Slow(Duration),
    /// 200 with a few bytes of a GIF, NUL included.
    Binary,
}

/// A request the receiver took.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    /// When it arrived, in Unix seconds of the system clock.
    pub arrived_s: i64,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
    }
}

#[derive(Clone, Default)]
struct Script {
    answer: Arc<Mutex<Option<Answer>>>,
    received: Arc<Mutex<Vec<Received>>>,
    redirected: Arc<Mutex<usize>>,
}

/// A loopback receiver of webhooks that keeps what it took and answers as told.
pub struct Receiver {
    pub url: String,
    script: Script,
}

async fn take(State(script): State<Script>, headers: HeaderMap, body: Bytes) -> Response {
    script
        .received
        .lock()
        .expect("the receiver's log")
        .push(Received {
            headers,
            body,
            arrived_s: unix_seconds(),
        });
    let answer = script
        .answer
        .lock()
        .expect("the receiver's script")
        .clone()
        .unwrap_or(Answer::Ok);
    match answer {
        Answer::Ok => (StatusCode::OK, "ok").into_response(),
        Answer::Status(code) => (
            StatusCode::from_u16(code).expect("a status"),
            "not this time",
        )
            .into_response(),
        Answer::Redirect => {
            (StatusCode::FOUND, [("location", "/elsewhere")], "moved").into_response()
        }
        Answer::RetryAfter(code, after) => (
            StatusCode::from_u16(code).expect("a status"),
            [("retry-after", after)],
            "later",
        )
            .into_response(),
        Answer::Binary => (
            StatusCode::OK,
            [("content-type", "image/gif")],
            b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff".to_vec(),
        )
            .into_response(),
        Answer::Slow(pause) => {
            tokio::time::sleep(pause).await;
            (StatusCode::OK, "late").into_response()
        }
    }
}

async fn elsewhere(State(script): State<Script>) -> &'static str {
    *script.redirected.lock().expect("the redirect count") += 1;
    "followed"
}

impl Receiver {
    pub async fn start() -> Self {
        let script = Script::default();
        let app = Router::new()
            .route("/hooks", axum::routing::post(take))
            .route("/elsewhere", axum::routing::any(elsewhere))
            .with_state(script.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address: SocketAddr = listener.local_addr().expect("an address");
        tokio::spawn(async move {
            axum::serve(listener, app).await.ok();
        });
        Self {
            url: format!("http://{address}/hooks"),
            script,
        }
    }

    pub fn answer(&self, answer: Answer) {
        *self.script.answer.lock().expect("the receiver's script") = Some(answer);
    }

    pub fn received(&self) -> Vec<Received> {
        self.script
            .received
            .lock()
            .expect("the receiver's log")
            .clone()
    }

    /// Waits (real time) until the receiver has taken `count` requests; answers them.
    pub async fn wait_for(&self, count: usize) -> Vec<Received> {
        eventually(&format!("the receiver taking {count} requests"), || {
            let received = self.received();
            async move { (received.len() >= count).then_some(received) }
        })
        .await
    }
}

/// Asks `check` every 20 ms of real time, for up to 30 s, until it answers; panics naming `what`
/// otherwise.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    for _ in 0..1500 {
        if let Some(found) = check().await {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{what} did not happen within 30 s");
}

fn unix_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs() as i64)
}

/// The tolerance of the `standardwebhooks` crate for `webhook-timestamp`.
const TOLERANCE_S: i64 = 5 * 60;

/// Checks a delivery with the `standardwebhooks` crate: the signature under `secret`, and the
/// timestamp within the crate's 5 minutes of when the message arrived. A message checked within
/// a few minutes of its arrival goes through the crate's own `verify`; one checked later (the
/// month test checks them all at its end) is signed again with the crate's `sign` and its
/// timestamp judged against its arrival, as `verify` would have judged it then.
pub fn verify(secret: &str, received: &Received) {
    let webhook = standardwebhooks::Webhook::new(secret).expect("a secret the crate takes");
    if unix_seconds() - received.arrived_s < TOLERANCE_S - 30 {
        webhook
            .verify(&received.body, &received.headers)
            .unwrap_or_else(|error| panic!("{error:?}: {received:?}"));
        return;
    }
    let timestamp: i64 = received
        .header("webhook-timestamp")
        .parse()
        .unwrap_or_else(|_| panic!("a timestamp: {received:?}"));
    assert!(
        (received.arrived_s - timestamp).abs() <= TOLERANCE_S,
        "the timestamp is {timestamp}, the message arrived at {}",
        received.arrived_s
    );
    let expected = webhook
        .sign(received.header("webhook-id"), timestamp, &received.body)
        .expect("the crate signs");
    assert!(
        received
            .header("webhook-signature")
            .split(' ')
            .any(|signature| signature == expected),
        "no signature is {expected}: {received:?}"
    );
}

/// Makes an endpoint of `url` for `types` (all when empty); answers its id and secret.
pub async fn make_endpoint(app: &TestApp, url: &str, types: &[&str]) -> (String, String) {
    let mut body = json!({"url": url, "description": "Test receiver"});
    if !types.is_empty() {
        body["event_types"] = json!(types);
    }
    let made = app.post_json("/webhook-endpoints", &app.key, body).await;
    let made = made.expect(201);
    (
        made["id"].as_str().expect("an id").to_owned(),
        made["secret"].as_str().expect("a secret").to_owned(),
    )
}

/// Activates, pauses and resumes a new sequence: three events.
pub async fn three_events(app: &TestApp) -> String {
    let send = send_key(app).await;
    let sender = insert_sender(app, &app.workspace_id, "Ada's account", "connected").await;
    let id = sequence(app, &[&sender]).await;
    for step in ["activate", "pause", "resume"] {
        app.post_json(&format!("/sequences/{id}/{step}"), &send, json!({}))
            .await
            .expect(200);
    }
    id
}

async fn deliveries(app: &TestApp, endpoint: &str) -> Vec<Value> {
    let page = app
        .get(
            &format!("/webhook-endpoints/{endpoint}/deliveries?limit=200"),
            &app.key,
        )
        .await;
    page.expect(200)["items"].as_array().expect("items").clone()
}

/// Waits until the endpoint has deliveries and each has made `attempts` attempts; answers them.
async fn until_attempted(app: &TestApp, endpoint: &str, attempts: i64) -> Vec<Value> {
    eventually(
        &format!("every delivery reaching attempt {attempts}"),
        || async move {
            let listed = deliveries(app, endpoint).await;
            let reached = !listed.is_empty()
                && listed
                    .iter()
                    .all(|delivery| delivery["attempt"].as_i64() >= Some(attempts));
            reached.then_some(listed)
        },
    )
    .await
}

async fn count(app: &TestApp, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("select count(*) from {table}")))
        .fetch_one(app.db.pool())
        .await
        .expect("a count")
}

#[tokio::test]
async fn every_event_reaches_the_endpoint_signed_once_and_in_order() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let (endpoint, secret) = make_endpoint(&app, &receiver.url, &[]).await;
    let sequence = three_events(&app).await;

    let received = receiver.wait_for(3).await;
    let events = app.get("/events?limit=50", &app.key).await;
    let mut events = events.expect(200)["items"]
        .as_array()
        .expect("items")
        .clone();
    events.reverse();
    assert_eq!(received.len(), events.len());
    for (got, event) in received.iter().zip(&events) {
        verify(&secret, got);
        let body = got.json();
        assert_eq!(body["id"], event["id"]);
        assert_eq!(body["type"], event["type"]);
        assert_eq!(body["timestamp"], event["created_at"]);
        assert_eq!(body["data"], json!({"sequence_id": sequence}));
        assert_eq!(got.header("webhook-id"), event["id"].as_str().expect("id"));
        assert_eq!(got.header("content-type"), "application/json");
        assert!(got.header("user-agent").starts_with("outreach-webhooks/"));
        assert_eq!(got.header("webhook-signature").split(' ').count(), 1);
    }

    let listed = until_attempted(&app, &endpoint, 1).await;
    assert_eq!(listed.len(), 3);
    for delivery in &listed {
        assert_eq!(delivery["status"], "succeeded", "{delivery}");
        assert_eq!(delivery["attempt"], 1);
        assert_eq!(delivery["response_status"], 200);
        assert_eq!(delivery["response_body"], "ok");
        assert_eq!(delivery["next_attempt_at"], Value::Null);
        assert!(delivery["duration_ms"].as_i64().is_some(), "{delivery}");
    }
    // Nothing more arrives: each event went once.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 3);

    // The same over MCP, and the endpoint never shows its secret again.
    let (is_error, shown) = app
        .mcp_call(
            &app.key,
            "service_get_webhook_endpoint",
            json!({"id": endpoint}),
        )
        .await;
    assert!(!is_error, "{shown}");
    assert!(shown.get("secret").is_none(), "{shown}");
    assert_eq!(shown["event_types"], Value::Null);
    assert!(!shown.to_string().contains(&secret));
}

#[tokio::test]
async fn an_endpoint_gets_only_its_types_and_a_disabled_one_nothing() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let (_, secret) = make_endpoint(&app, &receiver.url, &["sequence.paused"]).await;
    let quiet = Receiver::start().await;
    let (off, _) = make_endpoint(&app, &quiet.url, &[]).await;
    let disabled = app
        .patch_json(
            &format!("/webhook-endpoints/{off}"),
            &app.key,
            json!({"enabled": false}),
        )
        .await;
    assert_eq!(disabled.expect(200)["enabled"], false);
    three_events(&app).await;
    let received = receiver.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 1);
    verify(&secret, &received[0]);
    assert_eq!(received[0].json()["type"], "sequence.paused");
    assert!(quiet.received().is_empty());
}

#[tokio::test]
async fn bad_endpoints_are_refused_with_their_sentence_and_nothing_is_written() {
    let app = spawn_app().await;
    for (body, needle) in [
        (json!({"url": "http://10.0.0.1/hooks"}), "private"),
        (json!({"url": "http://169.254.169.254/latest"}), "metadata"),
        (json!({"url": "ftp://127.0.0.1/hooks"}), "https"),
        (json!({"url": "not a url"}), "URL of a host"),
        (
            json!({"url": "https://user:pw@93.184.216.34/"}),
            "user name",
        ),
        (
            json!({"url": "https://93.184.216.34:99999/"}),
            "absolute URL",
        ),
        (
            json!({"url": "http://127.0.0.1:9/hooks", "event_types": ["sequence.deleted"]}),
            "sequence.paused",
        ),
    ] {
        let refused = app
            .post_json("/webhook-endpoints", &app.key, body.clone())
            .await;
        let sentence = refused.expect_error(400, "invalid_request");
        assert!(sentence.contains(needle), "{body}: {sentence}");
    }
    assert_eq!(count(&app, "webhook_endpoints").await, 0);

    for n in 0..16 {
        make_endpoint(
            &app,
            &format!("http://127.0.0.1:9/hooks/{n}"),
            &["sequence.paused"],
        )
        .await;
    }
    let seventeenth = app
        .post_json(
            "/webhook-endpoints",
            &app.key,
            json!({"url": "http://127.0.0.1:9/hooks/16"}),
        )
        .await;
    let sentence = seventeenth.expect_error(409, "too_many_webhook_endpoints");
    assert!(sentence.contains("16"), "{sentence}");
    assert_eq!(count(&app, "webhook_endpoints").await, 16);

    // A read key sees endpoints and changes none.
    let read = app.read_key().await;
    app.get("/webhook-endpoints", &read).await.expect(200);
    app.post_json(
        "/webhook-endpoints",
        &read,
        json!({"url": "http://127.0.0.1:9/x"}),
    )
    .await
    .expect_error(403, "insufficient_scope");
}

#[tokio::test]
async fn production_takes_only_https_to_public_addresses() {
    let app = spawn_app_in("production").await;
    for (url, needle) in [
        ("http://93.184.216.34/hooks", "https"),
        ("https://127.0.0.1/hooks", "loopback"),
        ("https://localhost/hooks", "loopback"),
        ("https://[::1]/hooks", "loopback"),
        ("https://192.168.0.10/hooks", "private"),
    ] {
        let refused = app
            .post_json("/webhook-endpoints", &app.key, json!({"url": url}))
            .await;
        let sentence = refused.expect_error(400, "invalid_request");
        assert!(sentence.contains(needle), "{url}: {sentence}");
    }
    let made = app
        .post_json(
            "/webhook-endpoints",
            &app.key,
            json!({"url": "https://93.184.216.34/hooks"}),
        )
        .await;
    made.expect(201);
}

#[tokio::test]
async fn failures_walk_the_retry_schedule_on_the_test_clock_then_fail() {
    let app = spawn_app_with_test_clock().await;
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Status(500));
    let (endpoint, secret) = make_endpoint(&app, &receiver.url, &["sequence.activated"]).await;
    let send = send_key(&app).await;
    let sender = insert_sender(&app, &app.workspace_id, "Ada's account", "connected").await;
    let sequence = sequence(&app, &[&sender]).await;
    app.post_json(&format!("/sequences/{sequence}/activate"), &send, json!({}))
        .await
        .expect(200);

    let delays = [5, 300, 1800, 7200, 18_000, 36_000, 36_000];
    let mut listed = until_attempted(&app, &endpoint, 1).await;
    for (n, delay) in delays.iter().enumerate() {
        let delivery = &listed[0];
        assert_eq!(delivery["status"], "pending", "{delivery}");
        assert_eq!(delivery["response_status"], 500);
        assert_eq!(
            delivery["error"],
            "the endpoint answered 500 Internal Server Error"
        );
        let last = time_ms(&delivery["last_attempt_at"]);
        let next = time_ms(&delivery["next_attempt_at"]);
        let waited = next - last;
        assert!(
            (delay * 1000..=delay * 1100 + 50).contains(&waited),
            "attempt {}: the next is {waited} ms later, not {delay} s and up to 10 %",
            n + 1
        );
        // Not due yet: nothing happens.
        assert_eq!(receiver.received().len(), n + 1);
        advance(&app, delay * 11 / 10 + 1).await;
        listed = until_attempted(&app, &endpoint, n as i64 + 2).await;
    }
    let delivery = &listed[0];
    assert_eq!(delivery["status"], "failed", "{delivery}");
    assert_eq!(delivery["attempt"], 8);
    assert_eq!(delivery["next_attempt_at"], Value::Null);
    let received = receiver.received();
    assert_eq!(received.len(), 8);
    let id = received[0].header("webhook-id").to_owned();
    for got in &received {
        verify(&secret, got);
        assert_eq!(got.header("webhook-id"), id, "the same id on every retry");
        assert_eq!(got.body, received[0].body, "the same body on every retry");
    }
    // A day later nothing more is tried.
    advance(&app, 86_400).await;
    assert_eq!(receiver.received().len(), 8);

    // The events some endpoint has not received are listed as such; a success clears it.
    let undelivered = app.get("/events?delivery_success=false", &app.key).await;
    let undelivered = undelivered.expect(200);
    assert_eq!(undelivered["items"][0]["id"], json!(id), "{undelivered}");
}

fn time_ms(value: &Value) -> i64 {
    let text = value.as_str().unwrap_or_else(|| panic!("a time: {value}"));
    text.parse::<jiff::Timestamp>()
        .expect("RFC 3339")
        .as_millisecond()
}

#[tokio::test]
async fn a_410_disables_the_endpoint_at_once_with_its_reason_and_an_event() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Status(410));
    let (endpoint, _) = make_endpoint(&app, &receiver.url, &["sequence.activated"]).await;
    let listener = Receiver::start().await;
    let (_, listener_secret) =
        make_endpoint(&app, &listener.url, &["webhook_endpoint.disabled"]).await;
    three_events(&app).await;
    receiver.wait_for(1).await;
    let shown = wait_disabled(&app, &endpoint).await;
    assert_eq!(shown["disabled_reason"], "the endpoint answered 410 Gone");
    let heard = listener.wait_for(1).await;
    verify(&listener_secret, &heard[0]);
    assert_eq!(
        heard[0].json()["data"],
        json!({"webhook_endpoint_id": endpoint, "reason": "the endpoint answered 410 Gone"})
    );
    // The second `sequence.activated` was never attempted: queued before the disabling, its
    // delivery failed; queued while the endpoint was being disabled, it failed when its run found
    // it so; written after, it was not queued at all.
    let listed = eventually("no delivery left pending", || async {
        let listed = deliveries(&app, &endpoint).await;
        listed
            .iter()
            .all(|d| d["status"] != "pending")
            .then_some(listed)
    })
    .await;
    assert!((1..=2).contains(&listed.len()), "{listed:?}");
    assert!(listed.iter().all(|d| d["status"] == "failed"), "{listed:?}");
    assert_eq!(receiver.received().len(), 1);

    // Replays and redeliveries to it are refused until it is enabled again.
    let replay = app
        .post_json(
            &format!("/webhook-endpoints/{endpoint}/replay"),
            &app.key,
            json!({"since": outreach_runtime::clock::rfc3339(app.clock.now_ms() - 86_400_000)}),
        )
        .await;
    replay.expect_error(422, "webhook_endpoint_disabled");
    let enabled = app
        .patch_json(
            &format!("/webhook-endpoints/{endpoint}"),
            &app.key,
            json!({"enabled": true}),
        )
        .await;
    let enabled = enabled.expect(200);
    assert_eq!(enabled["enabled"], true);
    assert_eq!(enabled["disabled_reason"], Value::Null);
}

async fn wait_disabled(app: &TestApp, endpoint: &str) -> Value {
    eventually("the endpoint being disabled", || async move {
        let shown = app
            .get(&format!("/webhook-endpoints/{endpoint}"), &app.key)
            .await;
        let shown = shown.expect(200).clone();
        (shown["enabled"] == false).then_some(shown)
    })
    .await
}

#[tokio::test]
async fn a_redirect_is_a_failure_and_is_not_followed() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Redirect);
    let (endpoint, _) = make_endpoint(&app, &receiver.url, &["sequence.activated"]).await;
    three_events(&app).await;
    let listed = until_attempted(&app, &endpoint, 1).await;
    assert_eq!(listed[0]["status"], "pending");
    assert_eq!(listed[0]["response_status"], 302);
    assert!(
        listed[0]["error"]
            .as_str()
            .is_some_and(|error| error.contains("redirects are not followed")),
        "{}",
        listed[0]
    );
    assert_eq!(*receiver.script.redirected.lock().expect("count"), 0);
}

#[tokio::test]
async fn retry_after_is_honoured_when_longer_than_the_schedule() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    receiver.answer(Answer::RetryAfter(429, "7200"));
    let (endpoint, _) = make_endpoint(&app, &receiver.url, &["sequence.activated"]).await;
    three_events(&app).await;
    let listed = until_attempted(&app, &endpoint, 1).await;
    let waited = time_ms(&listed[0]["next_attempt_at"]) - time_ms(&listed[0]["last_attempt_at"]);
    assert!(
        (7_199_000..7_201_000).contains(&waited),
        "the next attempt is {waited} ms later"
    );
    // A shorter one than the schedule's is not: 5 s and up to 10 %.
    receiver.answer(Answer::RetryAfter(503, "1"));
    let (other, _) = make_endpoint(&app, &receiver.url, &["sequence.paused"]).await;
    three_events(&app).await;
    let listed = until_attempted(&app, &other, 1).await;
    let waited = time_ms(&listed[0]["next_attempt_at"]) - time_ms(&listed[0]["last_attempt_at"]);
    assert!((5_000..=5_550).contains(&waited), "{waited}");
}

#[tokio::test]
async fn an_attempt_gives_up_after_15_seconds() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Slow(Duration::from_secs(20)));
    let (endpoint, _) = make_endpoint(&app, &receiver.url, &["sequence.activated"]).await;
    three_events(&app).await;
    let listed = until_attempted(&app, &endpoint, 1).await;
    assert_eq!(listed[0]["status"], "pending");
    assert_eq!(listed[0]["response_status"], Value::Null);
    assert_eq!(listed[0]["error"], "no answer within 15 seconds");
    let took = listed[0]["duration_ms"].as_i64().expect("a duration");
    assert!((15_000..20_000).contains(&took), "{took}");
}

#[tokio::test]
async fn a_rotated_secret_signs_beside_the_new_one_for_a_day() {
    let app = spawn_app_with_test_clock().await;
    let receiver = Receiver::start().await;
    let (endpoint, old) = make_endpoint(&app, &receiver.url, &[]).await;
    let rotated = app
        .post_json(
            &format!("/webhook-endpoints/{endpoint}/rotate-secret"),
            &app.key,
            json!({}),
        )
        .await;
    let new = rotated.expect(200)["secret"]
        .as_str()
        .expect("a secret")
        .to_owned();
    assert_ne!(new, old);
    let tested = app
        .post_json(
            &format!("/webhook-endpoints/{endpoint}/test"),
            &app.key,
            json!({}),
        )
        .await;
    let tested = tested.expect(200);
    assert_eq!(tested["succeeded"], true, "{tested}");
    assert_eq!(tested["response_status"], 200);
    let got = receiver.wait_for(1).await;
    assert_eq!(got[0].header("webhook-signature").split(' ').count(), 2);
    verify(&old, &got[0]);
    verify(&new, &got[0]);
    assert_eq!(got[0].json()["type"], "webhook.test");
    assert_eq!(
        got[0].header("webhook-id"),
        tested["id"].as_str().expect("id")
    );
    // The test message is no event of the workspace.
    let found = app
        .get(
            &format!("/events/{}", tested["id"].as_str().expect("id")),
            &app.key,
        )
        .await;
    found.expect_error(404, "not_found");

    advance(&app, 24 * 3600 + 1).await;
    app.post_json(
        &format!("/webhook-endpoints/{endpoint}/test"),
        &app.key,
        json!({}),
    )
    .await
    .expect(200);
    let got = receiver.wait_for(2).await;
    assert_eq!(got[1].header("webhook-signature").split(' ').count(), 1);
    verify(&new, &got[1]);
}

#[tokio::test]
async fn redelivery_and_replay_send_again_what_the_endpoint_takes() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let (endpoint, secret) = make_endpoint(&app, &receiver.url, &["sequence.paused"]).await;
    three_events(&app).await;
    receiver.wait_for(1).await;
    let events = app.get("/events?limit=50", &app.key).await;
    let events = events.expect(200)["items"]
        .as_array()
        .expect("items")
        .clone();
    let paused = events
        .iter()
        .find(|event| event["type"] == "sequence.paused")
        .expect("a paused event");
    let activated = events
        .iter()
        .find(|event| event["type"] == "sequence.activated")
        .expect("an activated event");

    let again = app
        .post_json(
            &format!("/webhook-endpoints/{endpoint}/redeliver"),
            &app.key,
            json!({"event_id": paused["id"]}),
        )
        .await;
    assert_eq!(again.expect(200)["status"], "pending");
    let got = receiver.wait_for(2).await;
    verify(&secret, &got[1]);
    assert_eq!(got[1].header("webhook-id"), got[0].header("webhook-id"));

    let before = count(&app, "webhook_deliveries").await;
    let excluded = app
        .post_json(
            &format!("/webhook-endpoints/{endpoint}/redeliver"),
            &app.key,
            json!({"event_id": activated["id"]}),
        )
        .await;
    let sentence = excluded.expect_error(422, "event_type_not_subscribed");
    assert!(sentence.contains("sequence.activated"), "{sentence}");
    for (body, status, code) in [
        (
            json!({"since": "2026-01-01T00:00:00Z", "until": "2026-03-01T00:00:00Z"}),
            400,
            "invalid_request",
        ),
        (
            json!({"since": "2026-03-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}),
            400,
            "invalid_request",
        ),
    ] {
        let refused = app
            .post_json(
                &format!("/webhook-endpoints/{endpoint}/replay"),
                &app.key,
                body,
            )
            .await;
        refused.expect_error(status, code);
    }
    assert_eq!(count(&app, "webhook_deliveries").await, before);

    let since = time_ms(&activated["created_at"]) - 60_000;
    let replayed = app
        .post_json(
            &format!("/webhook-endpoints/{endpoint}/replay"),
            &app.key,
            json!({"since": outreach_runtime::clock::rfc3339(since)}),
        )
        .await;
    assert_eq!(replayed.expect(200)["queued"], 1);
    let got = receiver.wait_for(3).await;
    verify(&secret, &got[2]);
    assert_eq!(got[2].json()["type"], "sequence.paused");
}

#[tokio::test]
async fn an_action_that_fails_queues_no_delivery() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    make_endpoint(&app, &receiver.url, &[]).await;
    let send = send_key(&app).await;
    // Activating a sequence with no sender fails, and writes nothing.
    let id = sequence(&app, &[]).await;
    let refused = app
        .post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await;
    assert!(refused.status.is_client_error(), "{}", refused.body);
    assert_eq!(count(&app, "webhook_deliveries").await, 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(receiver.received().is_empty());
}

#[tokio::test]
async fn five_days_of_failures_disable_the_endpoint() {
    let app = spawn_app_with_test_clock().await;
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Status(503));
    let (endpoint, _) = make_endpoint(
        &app,
        &receiver.url,
        &["sequence.activated", "sequence.paused"],
    )
    .await;
    let send = send_key(&app).await;
    let id = three_events(&app).await;
    until_attempted(&app, &endpoint, 1).await;
    // A change a day, each delivery failing: still enabled after four days.
    for day in 1..=4 {
        advance(&app, 86_400).await;
        let step = if day % 2 == 1 { "pause" } else { "resume" };
        app.post_json(&format!("/sequences/{id}/{step}"), &send, json!({}))
            .await
            .expect(200);
        settle_deliveries(&app).await;
        let shown = app
            .get(&format!("/webhook-endpoints/{endpoint}"), &app.key)
            .await;
        assert_eq!(shown.expect(200)["enabled"], true, "day {day}");
    }
    // On the fifth day the next failed attempt disables it.
    advance(&app, 86_400).await;
    app.post_json(&format!("/sequences/{id}/pause"), &send, json!({}))
        .await
        .expect(200);
    let shown = wait_disabled(&app, &endpoint).await;
    assert_eq!(
        shown["disabled_reason"],
        "every delivery failed for 5 days in a row"
    );
    let disabled = app
        .get("/events?type=webhook_endpoint.disabled", &app.key)
        .await;
    assert_eq!(
        disabled.expect(200)["items"].as_array().map(Vec::len),
        Some(1)
    );
}

#[tokio::test]
async fn failures_days_apart_are_no_run_of_failures() {
    let app = spawn_app_with_test_clock().await;
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Status(503));
    let (endpoint, _) = make_endpoint(&app, &receiver.url, &["sequence.paused"]).await;
    let send = send_key(&app).await;
    let id = three_events(&app).await;
    until_attempted(&app, &endpoint, 1).await;
    // Its retries spent, nothing is tried for days; one more failure does not disable it.
    advance(&app, 6 * 86_400).await;
    app.post_json(&format!("/sequences/{id}/pause"), &send, json!({}))
        .await
        .expect(200);
    settle_deliveries(&app).await;
    let shown = app
        .get(&format!("/webhook-endpoints/{endpoint}"), &app.key)
        .await;
    assert_eq!(shown.expect(200)["enabled"], true);
}

/// Waits until no delivery is in an attempt and none is due (real time).
async fn settle_deliveries(app: &TestApp) {
    eventually("the deliveries settling", || async move {
        let busy: i64 = sqlx::query_scalar(
            "select count(*) from webhook_deliveries where status = 'pending' \
             and (claimed_by is not null or next_attempt_at <= $1)",
        )
        .bind(app.clock.now_ms())
        .fetch_one(app.db.pool())
        .await
        .expect("count");
        (busy == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_binary_answer_is_kept_as_text() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Binary);
    let (endpoint, _) = make_endpoint(&app, &receiver.url, &["sequence.activated"]).await;
    three_events(&app).await;
    let listed = until_attempted(&app, &endpoint, 1).await;
    assert_eq!(listed[0]["status"], "succeeded", "{}", listed[0]);
    let body = listed[0]["response_body"].as_str().expect("a body");
    assert!(body.starts_with("GIF89a"), "{body}");
    assert!(!body.contains('\0'));
}

/// `kill -9` while deliveries are in flight loses none: the real binary is killed at random
/// moments while events are written and sent to a slow receiver, restarted on the same
/// database, and every event arrives at least once, signed, and every delivery ends succeeded.
#[tokio::test]
async fn kill_9_during_deliveries_loses_none() {
    use crate::helpers::{TestDatabase, admin_ok, admin_workspace_with_key, serve};

    let database = TestDatabase::create().await;
    let (workspace, key) =
        admin_workspace_with_key(&database, "Webhook crash", "crash@hooks.test").await;
    admin_ok(
        &database,
        &[
            "credits",
            "grant",
            "--workspace",
            &workspace,
            "--amount",
            "100000",
        ],
    )
    .await;
    let db = outreach_runtime::Db::connect(database.url())
        .await
        .expect("connect");
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Slow(Duration::from_millis(40)));
    let client = reqwest::Client::new();
    let mut server = serve(&database).await;
    let made: Value = client
        .post(format!("{}/api/v1/webhook-endpoints", server.base_url))
        .bearer_auth(&key)
        .json(&json!({"url": receiver.url}))
        .send()
        .await
        .expect("create an endpoint")
        .json()
        .await
        .expect("JSON");
    let secret = made["secret"].as_str().expect("a secret").to_owned();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |since| since.as_nanos() as u64);
    println!("kill seed {seed}");
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        state >> 33
    };
    let mut imports = 0;
    for round in 0..6 {
        for _ in 0..8 {
            imports += 1;
            let answer = client
                .post(format!("{}/api/v1/imports", server.base_url))
                .bearer_auth(&key)
                .json(&json!({"rows": [{"first_name": "Crash", "email": format!("crash-{imports}@hooks.test")}]}))
                .send()
                .await
                .expect("an import");
            assert!(
                answer.status().is_success(),
                "round {round}: {}",
                answer.status()
            );
        }
        tokio::time::sleep(Duration::from_millis(next() % 400)).await;
        server.kill().await;
        server = serve(&database).await;
    }
    // After the last restart every delivery ends, each a success.
    let mut unfinished = i64::MAX;
    for _ in 0..1500 {
        unfinished = sqlx::query_scalar(
            "select count(*) from webhook_deliveries where status <> 'succeeded'",
        )
        .fetch_one(db.pool())
        .await
        .expect("count");
        if unfinished == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert_eq!(unfinished, 0, "deliveries left unfinished (seed {seed})");
    let events: BTreeSet<String> = sqlx::query_scalar("select id from events")
        .fetch_all(db.pool())
        .await
        .expect("events")
        .into_iter()
        .collect();
    assert!(events.len() >= imports, "{} events", events.len());
    let received = receiver.received();
    let mut arrived = BTreeSet::new();
    for got in &received {
        verify(&secret, got);
        arrived.insert(got.header("webhook-id").to_owned());
    }
    assert_eq!(arrived, events, "every event arrived (seed {seed})");
    println!(
        "{} events, {} messages: {} sent again after a kill",
        events.len(),
        received.len(),
        received.len() - events.len()
    );
    server.kill().await;
}

/// Two instances on one database, each running its job workers, deliver every event exactly
/// once and in the order the deliveries were queued: an endpoint's runs exclude each other
/// across processes, not only within one.
#[tokio::test]
async fn two_instances_deliver_each_event_once_in_order() {
    let app = spawn_app().await;
    let second = app.second_instance().await;
    app.grant_credits(10_000).await;
    let receiver = Receiver::start().await;
    receiver.answer(Answer::Slow(Duration::from_millis(5)));
    let (endpoint, secret) = make_endpoint(&app, &receiver.url, &["import.completed"]).await;
    let client = reqwest::Client::new();
    for n in 0..40 {
        let base = if n % 2 == 0 {
            app.base_url.clone()
        } else {
            second.base_url.clone()
        };
        let answer = client
            .post(format!("{base}/api/v1/imports"))
            .bearer_auth(&app.key)
            .json(
                &json!({"rows": [{"first_name": "Twice", "email": format!("two-{n}@hooks.test")}]}),
            )
            .send()
            .await
            .expect("an import");
        assert!(answer.status().is_success(), "{}", answer.status());
    }
    let received = receiver.wait_for(40).await;
    // Nothing more comes: each event went once.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), 40);
    let queued: Vec<String> = sqlx::query_scalar(
        "select event_id from webhook_deliveries where endpoint_id = $1 order by seq",
    )
    .bind(&endpoint)
    .fetch_all(app.db.pool())
    .await
    .expect("deliveries");
    let arrived: Vec<String> = received
        .iter()
        .map(|got| {
            verify(&secret, got);
            got.header("webhook-id").to_owned()
        })
        .collect();
    assert_eq!(arrived, queued, "arrived in the order queued");
}

/// The check of a message looked at long after it arrived (as the month test does) still
/// refuses a wrong signature and a timestamp far from the arrival.
#[test]
fn a_message_checked_late_is_judged_as_it_arrived() {
    let secret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    let webhook = standardwebhooks::Webhook::new(secret).expect("a secret");
    let arrived_s = unix_seconds() - 3_600;
    let body = Bytes::from_static(br#"{"id":"evt_1"}"#);
    let message = |timestamp: i64, signature: &str| {
        let mut headers = HeaderMap::new();
        headers.insert("webhook-id", "evt_1".parse().expect("a header"));
        headers.insert(
            "webhook-timestamp",
            timestamp.to_string().parse().expect("a header"),
        );
        headers.insert("webhook-signature", signature.parse().expect("a header"));
        Received {
            headers,
            body: body.clone(),
            arrived_s,
        }
    };
    let signed = webhook.sign("evt_1", arrived_s, &body).expect("signed");
    verify(secret, &message(arrived_s, &signed));
    let wrong = std::panic::catch_unwind(|| verify(secret, &message(arrived_s, "v1,AAAA")));
    assert!(wrong.is_err(), "a wrong signature passed");
    let stale = webhook
        .sign("evt_1", arrived_s - 600, &body)
        .expect("signed");
    let late = std::panic::catch_unwind(|| verify(secret, &message(arrived_s - 600, &stale)));
    assert!(
        late.is_err(),
        "a timestamp 10 minutes before its arrival passed"
    );
}
