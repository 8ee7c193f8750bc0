//! Issue 11: the scheduler with the sandbox network (`--phases scheduler`).
//!
//! Per backend (SQLite always; PostgreSQL when `BENCH_POSTGRES_URL` names a server whose user may
//! create databases):
//!
//! 1. A fresh database, a workspace and a read+write key (admin CLI); the release server started
//!    with `--test-clock` makes one sender (all-day working hours in UTC, default limits) and one
//!    sequence whose only step is `view_profile`, through the API; the server is stopped.
//! 2. Seeded straight into the database (as `seed.rs` does for prospects): the sender cloned to
//!    `enrollments / 50` senders, all created 30 days ago (past the warm-up ramp); the sequence
//!    made `active`; `--prospects` prospects with profile URLs; one `scheduled` enrollment per
//!    prospect (senders round robin) with its first step due now (`next_step_at`, as an approval
//!    sets it), its `approved` approval row and its `outreach_step` job, due now.
//! 3. **Drain:** the server started again (`serve --test-clock`, default 4 workers) runs every job
//!    once: the first run of each sender's jobs sends (the sandbox logs it) and the others take
//!    the next slots in the sender's queue, 30-90 s apart, and snooze until theirs (a sender acts
//!    once per 30-90 s: 100,000 sends cannot all happen at once). Every due step is decided in
//!    this drain (sent, or given its slot, by its own run or by the run that queued its sender's
//!    steps together). Measured: due steps decided per second (enrollments over the wall time
//!    until no job is left that was neither run nor moved), sends, slots, and job runs (the
//!    worker's `claimed` counter on `/metrics`).
//! 4. **Follow:** for 30 s of wall time, the test clock is moved 90 s forward (`outreach admin
//!    sandbox advance-clock`) whenever fewer than 1,000 jobs are due, so every sender's gap lapses
//!    again and again; sends per second are sandbox-log rows per wall-clock second.
//! 5. The server's peak RSS (`VmHWM`).
//!
//! Then, on a fresh database per backend, the claim query alone (`jobs::sql::CLAIM_SQLITE` /
//! `CLAIM_POSTGRES`, the statements the worker runs) over 1,000,000 rows in `jobs`: 99% completed,
//! 1% available and due; its plan and its time (claim 4 rows, roll back, 200 times).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use hyper::Method;
use serde_json::{Value, json};
use sqlx::{AnyConnection, Connection, Row};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::load::{self, Target};
use crate::{procfs, service};

/// Prospects per sender: each sender has 50 enrollments, under its 80 profile views a day.
const PER_SENDER: usize = 50;
/// Wall-clock seconds of the follow measurement.
const FOLLOW_SECS: u64 = 30;
/// Rows in `jobs` for the claim query.
const CLAIM_ROWS: i64 = 1_000_000;

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// An id of the service's shape (`prefix_` + 20 base62), distinct per (prefix, index).
fn id(prefix: &str, index: u64) -> String {
    let mut id = String::with_capacity(prefix.len() + 21);
    id.push_str(prefix);
    id.push('_');
    let mut bits = index;
    for _ in 0..20 {
        id.push(char::from(BASE62[(bits % 62) as usize]));
        bits /= 62;
    }
    id
}

fn now_ms() -> anyhow::Result<i64> {
    Ok(i64::try_from(
        SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis(),
    )?)
}

/// A value bound into a batched insert.
enum Val {
    Text(String),
    Int(i64),
}

/// Inserts `rows` into `table` in statements of 100 rows.
async fn insert_rows(
    conn: &mut AnyConnection,
    table: &str,
    columns: &[&str],
    rows: Vec<Vec<Val>>,
) -> anyhow::Result<()> {
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<Vec<Val>> = rows.by_ref().take(100).collect();
        let mut sql = format!("insert into {table} ({}) values ", columns.join(", "));
        let mut n = 0;
        for (i, row) in chunk.iter().enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            for j in 0..row.len() {
                n += 1;
                if j > 0 {
                    sql.push_str(", ");
                }
                sql.push_str(&format!("${n}"));
            }
            sql.push(')');
        }
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for row in chunk {
            for value in row {
                query = match value {
                    Val::Text(text) => query.bind(text),
                    Val::Int(int) => query.bind(int),
                };
            }
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

/// The sequence the enrollments run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// One `view_profile` step (the phase's long-standing measure).
    ViewProfile,
    /// One `connection_request` step with a note: the straight line of the issue-27 comparison.
    Invitation,
    /// A `profile_has` condition (skip competitors: it does not hold, so it goes on at once) to a
    /// `connection_request` step with two A/B variants: a branch and a variant for every enrollment.
    Branching,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Self::ViewProfile => "view_profile",
            Self::Invitation => "invitation",
            Self::Branching => "branching",
        }
    }

    fn steps(self) -> Value {
        match self {
            Self::ViewProfile => json!([{"type": "view_profile"}]),
            Self::Invitation => {
                json!([{"type": "connection_request", "note": "Hi {{first_name}}, glad to connect."}])
            }
            Self::Branching => json!([
                {"type": "condition", "condition": {"kind": "profile_has", "field": "headline", "contains": "competitor"},
                 "then_step": "finish", "else_step": "s2"},
                {"type": "connection_request", "variants": [
                    {"note": "Hi {{first_name}}, glad to connect (A)."},
                    {"note": "Hi {{first_name}}, glad to connect (B)."}]},
            ]),
        }
    }

    /// The approved texts of an enrollment, as `approve_outreach` stores them.
    fn texts(self) -> String {
        match self {
            Self::ViewProfile => "[]".into(),
            Self::Invitation => json!([{"step_index": 0, "type": "connection_request",
                                        "text": "Hi Ada, glad to connect."}])
            .to_string(),
            Self::Branching => json!([
                {"step_index": 1, "type": "connection_request", "variant": "a", "text": "Hi Ada, glad to connect (A)."},
                {"step_index": 1, "type": "connection_request", "variant": "b", "text": "Hi Ada, glad to connect (B)."},
            ])
            .to_string(),
        }
    }

    /// Steps each enrollment has decided once the drain is over.
    fn steps_per_enrollment(self) -> usize {
        match self {
            Self::Branching => 2,
            _ => 1,
        }
    }
}

/// A database for one backend: its URL for the server and the CLI.
struct Backend {
    name: &'static str,
    url: String,
}

/// Runs the phase on SQLite, then on PostgreSQL when `BENCH_POSTGRES_URL` is set.
pub async fn run(bin: &Path, dir: &Path, enrollments: usize) -> anyhow::Result<()> {
    sqlx::any::install_default_drivers();
    let mut backends = vec![Backend {
        name: "SQLite",
        url: format!("sqlite://{}", dir.join("scheduler.db").display()),
    }];
    let mut claim_backends = vec![Backend {
        name: "SQLite",
        url: format!("sqlite://{}", dir.join("claim.db").display()),
    }];
    if let Ok(admin_url) = std::env::var("BENCH_POSTGRES_URL") {
        let suffix = std::process::id();
        backends.push(Backend {
            name: "PostgreSQL",
            url: fresh_postgres(&admin_url, &format!("bench_sched_{suffix}")).await?,
        });
        claim_backends.push(Backend {
            name: "PostgreSQL",
            url: fresh_postgres(&admin_url, &format!("bench_claim_{suffix}")).await?,
        });
    }
    let mut report = String::new();
    for backend in &backends {
        report.push_str(
            &scheduler(bin, dir, backend, enrollments, Shape::ViewProfile)
                .await?
                .0,
        );
    }
    // Issue 27: branches and variants against the straight line, each on a fresh database of
    // its backend, one after the other in this run.
    let mut shapes = String::from(
        "### Branches and variants against the straight line (issue 27)\n\n\
         | Backend | straight (1 invitation): steps/s | branching (condition + 2 variants): steps/s | ratio |\n|---|---|---|---|\n",
    );
    let mut shape_backends = Vec::new();
    for backend in &backends {
        let mut rates = Vec::new();
        for shape in [Shape::Invitation, Shape::Branching] {
            let fresh = match backend.name {
                "SQLite" => Backend {
                    name: backend.name,
                    url: format!(
                        "sqlite://{}",
                        dir.join(format!("scheduler-{}.db", shape.name())).display()
                    ),
                },
                _ => Backend {
                    name: backend.name,
                    url: fresh_postgres(
                        &std::env::var("BENCH_POSTGRES_URL")?,
                        &format!("bench_sched_{}_{}", shape.name(), std::process::id()),
                    )
                    .await?,
                },
            };
            let (text, rate) = scheduler(bin, dir, &fresh, enrollments, shape).await?;
            report.push_str(&text);
            rates.push(rate);
            shape_backends.push(fresh);
        }
        shapes.push_str(&format!(
            "| {} | {:.0} | {:.0} | **{:.2}** |\n",
            backend.name,
            rates[0],
            rates[1],
            rates[1] / rates[0]
        ));
    }
    report.push_str(&shapes);
    report.push('\n');
    for backend in &claim_backends {
        report.push_str(&claim(bin, backend).await?);
    }
    println!("\n{report}");
    if let Ok(admin_url) = std::env::var("BENCH_POSTGRES_URL") {
        let mut conn = AnyConnection::connect(&admin_url).await?;
        for backend in backends
            .iter()
            .chain(&claim_backends)
            .chain(&shape_backends)
        {
            if let Some((_, name)) = backend.url.rsplit_once('/')
                && backend.name == "PostgreSQL"
            {
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "drop database if exists {name}"
                )))
                .execute(&mut conn)
                .await?;
            }
        }
        conn.close().await?;
    }
    Ok(())
}

/// Creates (dropping it first) a database on the server `admin_url` points at; returns its URL.
pub(crate) async fn fresh_postgres(admin_url: &str, name: &str) -> anyhow::Result<String> {
    let mut conn = AnyConnection::connect(admin_url).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database if exists {name}"
    )))
    .execute(&mut conn)
    .await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("create database {name}")))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    let base = admin_url
        .rsplit_once('/')
        .map(|(base, _)| base)
        .context("BENCH_POSTGRES_URL has no database path")?;
    Ok(format!("{base}/{name}"))
}

async fn migrate(bin: &Path, url: &str) -> anyhow::Result<()> {
    let output = Command::new(bin)
        .args(["migrate", "--database-url", url])
        .env_remove("DATABASE_URL")
        .output()
        .await?;
    ensure!(
        output.status.success(),
        "`outreach migrate` failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// The server under test, killed when dropped.
struct Server {
    child: tokio::process::Child,
    pid: u32,
    addr: std::net::SocketAddr,
}

impl Server {
    async fn stop(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

/// `outreach serve --test-clock` on a free port (stderr to `log`), once it listens.
async fn start(bin: &Path, url: &str, log: &Path) -> anyhow::Result<Server> {
    let mut command = Command::new(bin);
    for name in [
        "DATABASE_URL",
        "OUTREACH_ADDR",
        "OUTREACH_BASE_URL",
        "OUTREACH_ENV",
        "OUTREACH_WORKERS",
        "OUTREACH_METRICS_TOKEN",
        "RUST_LOG",
    ] {
        command.env_remove(name);
    }
    command
        .args([
            "serve",
            "--test-clock",
            "--addr",
            "127.0.0.1:0",
            "--database-url",
            url,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log)?)
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let pid = child.id().context("the server exited at once")?;
    let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(rest) = line.strip_prefix("REST: http://") {
                let authority = rest.split('/').next().unwrap_or_default();
                return Ok(authority.parse()?);
            }
        }
        bail!("the server exited before listening; see {}", log.display())
    })
    .await
    .context("the server did not listen within 60 s")??;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Server { child, pid, addr })
}

async fn post(
    addr: std::net::SocketAddr,
    path: &str,
    key: &str,
    body: Value,
) -> anyhow::Result<Value> {
    let target = Target {
        method: Method::POST,
        body: Bytes::from(body.to_string()),
        ..Target::get(addr, path)
    }
    .header("authorization", &format!("Bearer {key}"))?
    .header("content-type", "application/json")?;
    let (status, body) = load::probe(&target).await?;
    let text = String::from_utf8_lossy(&body);
    ensure!(status.is_success(), "POST {path} answered {status}: {text}");
    Ok(serde_json::from_slice(&body)?)
}

/// The worker's counters on `/metrics`: (claimed, completed, snoozed).
async fn job_counters(addr: std::net::SocketAddr) -> anyhow::Result<(u64, u64, u64)> {
    let (status, body) = load::probe(&Target::get(addr, "/metrics")).await?;
    ensure!(status.is_success(), "/metrics answered {status}");
    let text = String::from_utf8_lossy(&body);
    let count = |event: &str| -> u64 {
        let prefix = format!("outreach_job_events_total{{event=\"{event}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    };
    Ok((count("claimed"), count("completed"), count("snoozed")))
}

async fn count(
    conn: &mut AnyConnection,
    sql: &'static str,
    bind: Option<i64>,
) -> anyhow::Result<i64> {
    let mut query = sqlx::query(sql);
    if let Some(bind) = bind {
        query = query.bind(bind);
    }
    Ok(query.fetch_one(conn).await?.try_get::<i64, _>(0)?)
}

/// The service clock's `now` (the real time plus the test clock's offset).
async fn service_now(conn: &mut AnyConnection) -> anyhow::Result<i64> {
    let offset: Option<i64> = sqlx::query("select offset_ms from test_clock where id = 1")
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| row.try_get(0))
        .transpose()?;
    Ok(now_ms()? + offset.unwrap_or(0))
}

/// One drain and follow on `backend`; answers the report and the steps decided per second.
async fn scheduler(
    bin: &Path,
    dir: &Path,
    backend: &Backend,
    enrollments: usize,
    shape: Shape,
) -> anyhow::Result<(String, f64)> {
    let url = backend.url.as_str();
    println!(
        "» scheduler on {} ({}): {enrollments} enrollments due at once",
        backend.name,
        shape.name()
    );
    migrate(bin, url).await?;
    let created = service::admin(
        bin,
        url,
        &[
            "workspace",
            "create",
            "--name",
            "Bench",
            "--owner-email",
            "bench@example.com",
        ],
    )
    .await?;
    let workspace = created["workspace_id"]
        .as_str()
        .context("no workspace_id")?
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
            "bench@example.com",
            "--name",
            "bench",
            "--scopes",
            "read,write",
        ],
    )
    .await?;
    let key = key["key"].as_str().context("no key")?.to_owned();
    let log = dir.join(format!("scheduler-{}-{}.log", backend.name, shape.name()));

    // The sender and the sequence through the API, as a user makes them.
    let server = start(bin, url, &log).await?;
    let all_day = json!([{"start": "00:00", "end": "24:00"}]);
    let sender = post(
        server.addr,
        "/api/v1/senders",
        &key,
        json!({"name": "Bench sender", "timezone": "UTC", "working_hours": {
            "monday": all_day, "tuesday": all_day, "wednesday": all_day, "thursday": all_day,
            "friday": all_day, "saturday": all_day, "sunday": all_day},
            "limits": {"connection_requests_per_day": 40, "connection_requests_per_week": 200}}),
    )
    .await?;
    let sender_id = sender["id"].as_str().context("no sender id")?.to_owned();
    let sequence = post(
        server.addr,
        "/api/v1/sequences",
        &key,
        json!({"name": "Bench sequence", "sender_ids": [sender_id], "steps": shape.steps()}),
    )
    .await?;
    let sequence_id = sequence["id"]
        .as_str()
        .context("no sequence id")?
        .to_owned();
    server.stop().await?;

    // The bulk straight into the database.
    let seeding = Instant::now();
    let senders = enrollments.div_ceil(PER_SENDER).max(1);
    let mut conn = AnyConnection::connect(url).await?;
    let now = now_ms()?;
    let mut tx = conn.begin().await?;
    let mut sender_ids = vec![sender_id.clone()];
    for index in 1..senders {
        let id = id("snd", 1_000_000 + index as u64);
        sqlx::query(
            "insert into senders (id, workspace_id, name, status, timezone, working_hours, limits, created_at, updated_at) \
             select $1, workspace_id, $2, status, timezone, working_hours, limits, created_at, updated_at \
             from senders where id = $3",
        )
        .bind(&id)
        .bind(format!("Bench sender {index}"))
        .bind(&sender_id)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "insert into sequence_senders (sequence_id, sender_id, workspace_id, position) values ($1, $2, $3, $4)",
        )
        .bind(&sequence_id)
        .bind(&id)
        .bind(&workspace)
        .bind(i64::try_from(index)?)
        .execute(&mut *tx)
        .await?;
        sender_ids.push(id);
    }
    // Established accounts: past the warm-up ramp.
    sqlx::query("update senders set created_at = $1, updated_at = $1 where workspace_id = $2")
        .bind(now - 30 * 86_400_000)
        .bind(&workspace)
        .execute(&mut *tx)
        .await?;
    sqlx::query("update sequences set status = 'active', activated_at = $1 where id = $2")
        .bind(now)
        .bind(&sequence_id)
        .execute(&mut *tx)
        .await?;
    let (mut prospects, mut enrolled, mut approvals, mut jobs) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for index in 0..enrollments {
        let i = index as u64;
        let prospect = id("prs", i);
        let enrollment = id("enr", i);
        let sender = &sender_ids[index % senders];
        prospects.push(vec![
            Val::Text(prospect.clone()),
            Val::Text(workspace.clone()),
            Val::Text("Ada".into()),
            Val::Text(format!("Bench {index}")),
            Val::Text(format!("linkedin.com/in/bench-{index}")),
            Val::Text("import".into()),
            Val::Text(format!("ada bench {index}")),
            Val::Int(now),
            Val::Int(now),
        ]);
        enrolled.push(vec![
            Val::Text(enrollment.clone()),
            Val::Text(workspace.clone()),
            Val::Text(sequence_id.clone()),
            Val::Text(prospect.clone()),
            Val::Text(sender.clone()),
            Val::Text("scheduled".into()),
            Val::Int(now),
            Val::Int(now),
            Val::Text("bench".into()),
            Val::Int(now),
            Val::Int(now),
        ]);
        approvals.push(vec![
            Val::Text(id("apr", i)),
            Val::Text(workspace.clone()),
            Val::Text("enrollment".into()),
            Val::Text(enrollment.clone()),
            Val::Text(sequence_id.clone()),
            Val::Text(prospect),
            Val::Text(sender.clone()),
            Val::Text("approved".into()),
            Val::Text(shape.texts()),
            Val::Text("bench".into()),
            Val::Int(now),
            Val::Text("bench".into()),
            Val::Int(now),
        ]);
        jobs.push(vec![
            Val::Text(id("job", i)),
            Val::Text("outreach_step".into()),
            Val::Text(workspace.clone()),
            Val::Text(json!({"enrollment_id": enrollment}).to_string()),
            Val::Text("available".into()),
            Val::Int(0),
            Val::Int(20),
            Val::Int(now),
            Val::Text(format!("enrollment:{enrollment}")),
            Val::Int(now),
            Val::Int(now),
        ]);
    }
    insert_rows(
        &mut tx,
        "prospects",
        &[
            "id",
            "workspace_id",
            "first_name",
            "last_name",
            "profile_url",
            "source",
            "search_text",
            "created_at",
            "updated_at",
        ],
        prospects,
    )
    .await?;
    sqlx::query("insert into prospect_totals (workspace_id, total) values ($1, $2)")
        .bind(&workspace)
        .bind(i64::try_from(enrollments)?)
        .execute(&mut *tx)
        .await?;
    insert_rows(
        &mut tx,
        "enrollments",
        &[
            "id",
            "workspace_id",
            "sequence_id",
            "prospect_id",
            "sender_id",
            "status",
            "next_step_at",
            "approved_at",
            "approved_by",
            "created_at",
            "updated_at",
        ],
        enrolled,
    )
    .await?;
    insert_rows(
        &mut tx,
        "approvals",
        &[
            "id",
            "workspace_id",
            "kind",
            "subject_id",
            "sequence_id",
            "prospect_id",
            "sender_id",
            "status",
            "texts",
            "proposed_by",
            "decided_at",
            "decided_by",
            "created_at",
        ],
        approvals,
    )
    .await?;
    insert_rows(
        &mut tx,
        "jobs",
        &[
            "id",
            "kind",
            "workspace_id",
            "payload",
            "state",
            "attempt",
            "max_attempts",
            "run_at",
            "unique_key",
            "created_at",
            "updated_at",
        ],
        jobs,
    )
    .await?;
    tx.commit().await?;
    if backend.name == "PostgreSQL" {
        sqlx::query("analyze").execute(&mut conn).await?;
    }
    println!(
        "  seeded {senders} senders, {enrollments} prospects, enrollments, approvals and jobs in {:.1} s",
        seeding.elapsed().as_secs_f64()
    );

    // Drain: every job runs once.
    let started = Instant::now();
    let server = start(bin, url, &log).await?;
    let cpu_before = procfs::cpu_time(server.pid)?;
    // A step is decided once it was sent, given a slot in its sender's queue, or put off past
    // the drain by a limit; a view is decided by its job's first run.
    let undecided = match shape {
        Shape::ViewProfile => {
            "select count(*) from jobs where kind = 'outreach_step' and state = 'available' and updated_at <= $1"
        }
        Shape::Invitation => {
            "select count(*) from enrollments where invited_at is null and slot_at is null \
             and next_step_at <= $1 + 3600000"
        }
        Shape::Branching => {
            "select count(*) from enrollments where step_index = 0 or (invited_at is null \
             and slot_at is null and next_step_at <= $1 + 3600000)"
        }
    };
    let drained = loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let unrun = count(&mut conn, undecided, Some(now)).await?;
        let running = count(
            &mut conn,
            "select count(*) from jobs where state = 'running'",
            None,
        )
        .await?;
        if unrun == 0 && running == 0 {
            break started.elapsed();
        }
        ensure!(
            started.elapsed() < Duration::from_secs(900),
            "the drain took over 15 minutes ({unrun} jobs never ran)"
        );
    };
    let drain_cpu = procfs::cpu_time(server.pid)? - cpu_before;
    let (claimed, completed, snoozed) = job_counters(server.addr).await?;
    let sent = count(&mut conn, "select count(*) from sandbox_log", None).await?;
    let events = count(
        &mut conn,
        "select count(*) from enrollments where status = 'finished'",
        None,
    )
    .await?;
    // Every due step was decided: sent, or given its slot in its sender's queue (by its own run
    // or by the run that queued its sender's steps together).
    let queued = count(
        &mut conn,
        "select count(*) from enrollments where slot_at is not null",
        None,
    )
    .await?;
    let decided = enrollments * shape.steps_per_enrollment();
    let rate = decided as f64 / drained.as_secs_f64();
    let runs_rate = claimed as f64 / drained.as_secs_f64();
    println!(
        "  drain: {decided} steps decided in {:.1} s = {rate:.0} steps/s ({sent} sent, {queued} queued); {claimed} runs ({runs_rate:.0}/s: {completed} completed, {snoozed} snoozed), {events} enrollments finished; server CPU {:.0} µs/step",
        drained.as_secs_f64(),
        drain_cpu.as_secs_f64() * 1e6 / enrollments as f64
    );

    // Follow: the test clock moves 90 s whenever the due backlog is small.
    let follow_start = Instant::now();
    let (claimed_0, _, _) = job_counters(server.addr).await?;
    let sent_0 = sent;
    let mut advances = 0;
    while follow_start.elapsed() < Duration::from_secs(FOLLOW_SECS) {
        let service = service_now(&mut conn).await?;
        let due = count(
            &mut conn,
            "select count(*) from jobs where state = 'available' and run_at <= $1",
            Some(service),
        )
        .await?;
        if due < 1_000 {
            service::admin(bin, url, &["sandbox", "advance-clock", "--seconds", "90"]).await?;
            advances += 1;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let followed = follow_start.elapsed();
    let (claimed_1, _, _) = job_counters(server.addr).await?;
    let sent_1 = count(&mut conn, "select count(*) from sandbox_log", None).await?;
    let (hwm_kib, rss_kib) = procfs::rss_kib(server.pid)?;
    server.stop().await?;
    conn.close().await?;
    let follow_runs = claimed_1 - claimed_0;
    let follow_sent = sent_1 - sent_0;
    println!(
        "  follow: {advances} advances of 90 s in {:.1} s: {follow_sent} sends ({:.0}/s), {follow_runs} runs ({:.0}/s); server peak RSS {:.1} MiB",
        followed.as_secs_f64(),
        follow_sent as f64 / followed.as_secs_f64(),
        follow_runs as f64 / followed.as_secs_f64(),
        hwm_kib as f64 / 1024.0
    );
    let aim = if backend.name == "SQLite" {
        format!(
            " (aim >= 2,000: {})",
            if rate >= 2_000.0 { "met" } else { "MISSED" }
        )
    } else {
        String::new()
    };
    let report = format!(
        "### {} ({senders} senders, {enrollments} enrollments, {})\n\n\
         - drain: {decided} due steps decided in {:.1} s = **{rate:.0} steps/s**{aim}: {sent} sent, {queued} queued behind their \
           sender; {claimed} job runs ({runs_rate:.0}/s; {completed} completed, {snoozed} snoozed); server CPU {:.0} µs per step\n\
         - follow ({:.0} s wall, test clock +90 s x {advances}): {follow_sent} sends = **{:.1} sends/s**, {follow_runs} runs = {:.0} runs/s \
           ({:.1} runs per send)\n\
         - server peak RSS {:.1} MiB (aim < 100 MiB: {}), RSS at the end {:.1} MiB\n\n",
        backend.name,
        shape.name(),
        drained.as_secs_f64(),
        drain_cpu.as_secs_f64() * 1e6 / decided as f64,
        followed.as_secs_f64(),
        follow_sent as f64 / followed.as_secs_f64(),
        follow_runs as f64 / followed.as_secs_f64(),
        follow_runs as f64 / follow_sent.max(1) as f64,
        hwm_kib as f64 / 1024.0,
        if hwm_kib < 100 * 1024 {
            "met"
        } else {
            "MISSED"
        },
        rss_kib as f64 / 1024.0,
    );
    Ok((report, rate))
}

/// The claim query over `CLAIM_ROWS` jobs, 1% of them available and due.
async fn claim(bin: &Path, backend: &Backend) -> anyhow::Result<String> {
    println!(
        "» claim query on {}: {CLAIM_ROWS} rows in jobs",
        backend.name
    );
    migrate(bin, &backend.url).await?;
    let mut conn = AnyConnection::connect(&backend.url).await?;
    let now = now_ms()?;
    let postgres = backend.name == "PostgreSQL";
    let filling = Instant::now();
    let select = "select 'job_' || i, 'bench', '{}', \
           case when i % 100 = 0 then 'available' else 'completed' end, 1, 20, $1 - ($2 - i) * 1000, \
           $1, $1, case when i % 100 = 0 then null else $1 end";
    let columns = "insert into jobs (id, kind, payload, state, attempt, max_attempts, run_at, created_at, updated_at, finished_at) ";
    let sql = if postgres {
        format!("{columns}{select} from generate_series(0, $2 - 1) as i")
    } else {
        format!(
            "{columns}with recursive n(i) as (select 0 union all select i + 1 from n where i < $2 - 1) {select} from n"
        )
    };
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(now)
        .bind(CLAIM_ROWS)
        .execute(&mut conn)
        .await?;
    sqlx::query("analyze").execute(&mut conn).await?;
    println!("  filled in {:.1} s", filling.elapsed().as_secs_f64());

    let claim = if postgres {
        outreach_runtime::jobs::sql::CLAIM_POSTGRES
    } else {
        outreach_runtime::jobs::sql::CLAIM_SQLITE
    };
    let explain = if postgres {
        format!("explain (analyze, buffers) {claim}")
    } else {
        format!("explain query plan {claim}")
    };
    // Inside a transaction rolled back, so EXPLAIN ANALYZE's update leaves no trace.
    let mut tx = conn.begin().await?;
    let rows = sqlx::query(sqlx::AssertSqlSafe(explain))
        .bind(now)
        .bind(4_i64)
        .bind("token")
        .bind(now + 30_000)
        .fetch_all(&mut *tx)
        .await?;
    tx.rollback().await?;
    let plan: Vec<String> = rows
        .iter()
        .map(|row| {
            // SQLite: (id, parent, notused, detail); PostgreSQL: one text column.
            let last = row.len() - 1;
            row.try_get::<String, _>(last).unwrap_or_default()
        })
        .collect();
    let mut times = Vec::new();
    for _ in 0..200 {
        let mut tx = conn.begin().await?;
        let began = Instant::now();
        let claimed = sqlx::query(claim)
            .bind(now)
            .bind(4_i64)
            .bind("token")
            .bind(now + 30_000)
            .fetch_all(&mut *tx)
            .await?;
        times.push(began.elapsed());
        ensure!(claimed.len() == 4, "the claim took {} rows", claimed.len());
        tx.rollback().await?;
    }
    conn.close().await?;
    times.sort();
    let us = |at: usize| times[at.min(times.len() - 1)].as_secs_f64() * 1e6;
    let mean = times.iter().map(Duration::as_secs_f64).sum::<f64>() / times.len() as f64 * 1e6;
    println!("  claim of 4: p50 {:.0} µs, p99 {:.0} µs", us(100), us(198));
    Ok(format!(
        "### claim query, {} ({CLAIM_ROWS} rows, 10,000 available and due; claim 4, rolled back, 200 times)\n\n\
         mean {mean:.0} µs, p50 {:.0} µs, p99 {:.0} µs\n\n```text\n{}\n```\n\n",
        backend.name,
        us(100),
        us(198),
        plan.join("\n")
    ))
}
