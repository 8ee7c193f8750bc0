//! Issue 25: webhook deliveries to a loopback receiver (`--phases webhooks`).
//!
//! Per backend (SQLite always; PostgreSQL when `BENCH_POSTGRES_URL` names a server whose user may
//! create databases), on a fresh database with a workspace, a key and credits (admin CLI), the
//! release server (`serve`, default 4 workers) and a receiver in this process (axum, answering
//! 200 at once, noting when each message arrived):
//!
//! 1. **Baseline:** this process POSTs a signed-size body to the receiver, one request after
//!    another on one keep-alive connection, as many times as there are deliveries below: the
//!    rate a client that sends one at a time can reach here.
//! 2. **Burst:** one endpoint (every type); `--webhook-events` prospects imported into a list and
//!    enrolled in a sequence at once: one `approval.requested` per enrollment, written in one
//!    transaction. Measured: deliveries per second, from the enrollment's answer until the
//!    receiver has them all (an endpoint's deliveries go one at a time, in order), as a ratio to
//!    the baseline.
//! 3. **Latency:** 200 single-row imports, 20 ms apart: the delay from each `import.completed`
//!    event's `created_at` (its change) to its arrival at the receiver (p50, p99).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use hyper::Method;
use serde_json::{Value, json};

use crate::load::{self, Target};
use crate::service;

/// Single-row imports of the latency measurement.
const LATENCY_EVENTS: usize = 200;
/// The pause between two of them.
const LATENCY_GAP: Duration = Duration::from_millis(20);

/// What the receiver saw: (webhook-id, event type, the event's `created_at` in ms, arrival ms).
type Seen = Arc<Mutex<Vec<(String, String, i64, i64)>>>;

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

async fn take(State(seen): State<Seen>, headers: HeaderMap, body: Bytes) -> &'static str {
    let arrived = wall_ms();
    let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let created = serde_json::from_value::<outreach_runtime::Timestamp>(value["timestamp"].clone())
        .map_or(0, |at| at.ms());
    let id = headers
        .get("webhook-id")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let kind = value["type"].as_str().unwrap_or_default().to_owned();
    seen.lock()
        .expect("the receiver's log")
        .push((id, kind, created, arrived));
    "ok"
}

async fn receiver() -> anyhow::Result<(SocketAddr, Seen)> {
    let seen = Seen::default();
    let app = axum::Router::new()
        .route("/hooks", axum::routing::post(take))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    Ok((addr, seen))
}

async fn call(
    addr: SocketAddr,
    method: Method,
    path: &str,
    key: &str,
    body: Value,
) -> anyhow::Result<Value> {
    let target = Target {
        method,
        body: Bytes::from(body.to_string()),
        ..Target::get(addr, path)
    }
    .header("authorization", &format!("Bearer {key}"))?
    .header("content-type", "application/json")?;
    let (status, body) = load::probe(&target).await?;
    ensure!(
        status.is_success(),
        "{path} answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    Ok(serde_json::from_slice(&body)?)
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub async fn run(bin: &Path, dir: &Path, events: usize) -> anyhow::Result<()> {
    sqlx::any::install_default_drivers();
    let mut backends = vec![(
        "SQLite",
        format!("sqlite://{}?mode=rwc", dir.join("webhooks.db").display()),
    )];
    if let Ok(admin_url) = std::env::var("BENCH_POSTGRES_URL") {
        backends.push((
            "PostgreSQL",
            crate::scheduler::fresh_postgres(
                &admin_url,
                &format!("bench_hooks_{}", std::process::id()),
            )
            .await?,
        ));
    }
    let mut report = String::from("\n## issue 25: webhook deliveries to a loopback receiver\n");
    for (name, url) in &backends {
        report.push_str(&measure(bin, dir, name, url, events).await?);
    }
    println!("{report}");
    Ok(())
}

async fn measure(
    bin: &Path,
    dir: &Path,
    backend: &str,
    url: &str,
    events: usize,
) -> anyhow::Result<String> {
    let created = service::admin(
        bin,
        url,
        &[
            "workspace",
            "create",
            "--name",
            "Bench hooks",
            "--owner-email",
            "hooks@bench.test",
        ],
    )
    .await?;
    let workspace = created["workspace_id"]
        .as_str()
        .context("no workspace id")?
        .to_owned();
    let key = service::admin(
        bin,
        url,
        &[
            "key",
            "create",
            "--workspace",
            &workspace,
            "--email",
            "hooks@bench.test",
            "--name",
            "bench",
            "--scopes",
            "read,write",
        ],
    )
    .await?;
    let key = key["key"].as_str().context("no key")?.to_owned();
    service::admin(
        bin,
        url,
        &[
            "credits",
            "grant",
            "--workspace",
            &workspace,
            "--amount",
            "10000000",
        ],
    )
    .await?;
    let (receiver_addr, seen) = receiver().await?;
    let server =
        service::start_server(bin, url, &dir.join(format!("webhooks-{backend}.log"))).await?;
    let addr = server.addr;

    // 1. The baseline: the same number of POSTs, one after another on one connection.
    let sample = json!({
        "data": {"approval_id": "apr_00000000000000000000", "kind": "enrollment",
                 "prospect_id": "prs_00000000000000000000", "run_id": null,
                 "sequence_id": "seq_00000000000000000000"},
        "id": "evt_00000000000000000000",
        "timestamp": "2026-11-27T12:00:00.000Z",
        "type": "approval.requested",
    });
    let baseline_target = Target {
        method: Method::POST,
        body: Bytes::from(sample.to_string()),
        ..Target::get(receiver_addr, "/hooks")
    }
    .header("content-type", "application/json")?
    .header("webhook-id", "evt_00000000000000000000")?;
    let baseline = load::sequential(&baseline_target, events).await?;
    let baseline_rate = events as f64 / baseline.as_secs_f64();
    seen.lock().expect("log").clear();

    // 2. The burst.
    call(
        addr,
        Method::POST,
        "/api/v1/webhook-endpoints",
        &key,
        json!({"url": format!("http://{receiver_addr}/hooks")}),
    )
    .await?;
    let sender = call(
        addr,
        Method::POST,
        "/api/v1/senders",
        &key,
        json!({"name": "Bench sender", "timezone": "UTC"}),
    )
    .await?;
    let sequence = call(
        addr,
        Method::POST,
        "/api/v1/sequences",
        &key,
        json!({"name": "Bench", "sender_ids": [sender["id"]],
               "steps": [{"type": "view_profile", "delay_hours": 0}]}),
    )
    .await?;
    let list = call(
        addr,
        Method::POST,
        "/api/v1/lists",
        &key,
        json!({"name": "Bench list"}),
    )
    .await?;
    let rows: Vec<Value> = (0..events)
        .map(|n| json!({"first_name": format!("P{n}"), "profile_url": format!("https://linkedin.com/in/bench-hook-{n}")}))
        .collect();
    call(
        addr,
        Method::POST,
        "/api/v1/imports",
        &key,
        json!({"rows": rows, "list_id": list["id"]}),
    )
    .await?;
    // The import's own event arrives first; wait for it, then measure the burst alone.
    wait_for(&seen, 1, Duration::from_secs(30)).await?;
    seen.lock().expect("log").clear();
    let started = Instant::now();
    let added = call(
        addr,
        Method::POST,
        &format!(
            "/api/v1/sequences/{}/enrollments",
            sequence["id"].as_str().context("no sequence id")?
        ),
        &key,
        json!({"list_id": list["id"]}),
    )
    .await?;
    ensure!(
        added["added"] == json!(events),
        "enrolled {}",
        added["added"]
    );
    let enrolled = started.elapsed();
    wait_for(&seen, events, Duration::from_secs(600)).await?;
    let burst = started.elapsed();
    let burst_rate = events as f64 / burst.as_secs_f64();
    let in_order = {
        let log = seen.lock().expect("log");
        log.iter()
            .all(|(_, kind, _, _)| kind == "approval.requested")
    };
    ensure!(in_order, "the burst held another event type");
    seen.lock().expect("log").clear();

    // 3. The delay from a change to its delivery.
    for n in 0..LATENCY_EVENTS {
        call(
            addr,
            Method::POST,
            "/api/v1/imports",
            &key,
            json!({"rows": [{"first_name": format!("L{n}"), "email": format!("latency-{n}@bench.test")}]}),
        )
        .await?;
        tokio::time::sleep(LATENCY_GAP).await;
    }
    wait_for(&seen, LATENCY_EVENTS, Duration::from_secs(120)).await?;
    let mut delays: Vec<i64> = seen
        .lock()
        .expect("log")
        .iter()
        .filter(|(_, kind, _, _)| kind == "import.completed")
        .map(|(_, _, created, arrived)| arrived - created)
        .collect();
    delays.sort_unstable();
    server.stop().await.ok();

    Ok(format!(
        "\n### {backend}\n\n\
         | measured | value |\n|---|---|\n\
         | baseline: {events} POSTs to the receiver, one at a time on one connection | {baseline_rate:.0}/s |\n\
         | burst: {events} `approval.requested` (one enrollment call, {enrolled:.2?}) delivered | {burst_rate:.0}/s in {burst:.2?} |\n\
         | burst / baseline | {:.2} |\n\
         | change to delivery ({} single events, {} ms apart): p50 / p99 / max | {} / {} / {} ms |\n",
        burst_rate / baseline_rate,
        delays.len(),
        LATENCY_GAP.as_millis(),
        percentile(&delays, 50.0),
        percentile(&delays, 99.0),
        delays.last().copied().unwrap_or(0),
    ))
}

async fn wait_for(seen: &Seen, count: usize, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if seen.lock().expect("log").len() >= count {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    anyhow::bail!(
        "the receiver took {} messages of {count} within {within:?}",
        seen.lock().expect("log").len()
    )
}
