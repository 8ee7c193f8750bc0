//! A crash costs nothing: the real binary is killed with SIGKILL at random moments of a priced,
//! idempotent call, restarted on the same database, and the books must balance, the work must be
//! all there or not at all, and a retry with the same `Idempotency-Key` must run it exactly once.
//!
//! The delays come from a seeded generator; the seed is printed (set `CRASH_TEST_SEED` to replay
//! one). The same tests run on PostgreSQL with `TEST_DATABASE_URL` set. Also here: concurrent
//! calls to process one list run it once and charge once.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use outreach_runtime::Db;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Row;

use crate::helpers::{
    ApiResponse, Served, TestApp, TestDatabase, admin_ok, admin_workspace_with_key, serve,
    spawn_app,
};

/// Kills per kind of work.
const KILLS: usize = 20;

/// Credits granted at the start: far more than the tests spend.
const GRANTED: i64 = 10_000_000;

/// How long a retry after a restart may keep meeting a busy key before the test calls it stuck.
const RETRY_BOUND: Duration = Duration::from_secs(60);

/// Rows of each import in the import test, members of the list in the other two: sized so that one
/// uninterrupted call takes a fraction of a second in a debug build.
const IMPORT_ROWS: usize = 4000;
const LIST_MEMBERS: usize = 8000;

/// SplitMix64: a small seeded generator, so a failing sequence of kills can be replayed.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn from_env_or_clock() -> (Self, u64) {
        let seed = std::env::var("CRASH_TEST_SEED")
            .ok()
            .and_then(|seed| seed.trim().parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_nanos() as u64)
            });
        (Self(seed), seed)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A whole number of milliseconds in `[0, max]`.
    pub(crate) fn millis_up_to(&mut self, max: Duration) -> Duration {
        let max = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(self.next() % (max + 1))
    }
}

/// The kinds of priced work a crash can interrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Import,
    ListProcessing,
    ScoringRun,
}

impl Kind {
    /// The table holding one row per piece of committed work (with its `credits_spent`).
    fn table(self) -> &'static str {
        match self {
            Kind::Import => "imports",
            Kind::ListProcessing | Kind::ScoringRun => "scoring_runs",
        }
    }

    /// The id of the work a successful answer reports.
    fn work_id(self, body: &Value) -> String {
        let id = match self {
            Kind::Import | Kind::ScoringRun => &body["id"],
            Kind::ListProcessing => &body["scoring_run"]["id"],
        };
        id.as_str()
            .unwrap_or_else(|| panic!("no work id in the answer: {body}"))
            .to_owned()
    }
}

/// A CSV of `rows` new prospects, all distinct from any other tag's, with normalised emails so
/// that processing rewrites nothing.
fn csv(tag: &str, rows: usize) -> String {
    let titles = ["CTO", "VP Engineering", "Engineer", "Head of Sales"];
    let industries = ["Software", "Retail", "Software", "Banking"];
    let mut csv = String::from("First Name,Last Name,Title,Company,Industry,Email,LinkedIn URL\n");
    for row in 0..rows {
        writeln!(
            csv,
            "Ada{row},Crash{tag},{},Acme {},{},ada.{tag}.{row}@acme{}.test,https://linkedin.com/in/ada-{tag}-{row}",
            titles[row % titles.len()],
            row % 97,
            industries[row % industries.len()],
            row % 97,
        )
        .expect("write to a string");
    }
    csv
}

/// The real binary on a database of its own, a workspace with a write key and plenty of credits,
/// and a connection of the test's own to read the books.
struct Crashable {
    database: TestDatabase,
    db: Db,
    server: Option<Served>,
    client: reqwest::Client,
    workspace: String,
    key: String,
}

impl Crashable {
    async fn start() -> Self {
        let database = TestDatabase::create().await;
        let (workspace, key) =
            admin_workspace_with_key(&database, "Crash Test Dummies", "dummy@crash.test").await;
        admin_ok(
            &database,
            &[
                "credits",
                "grant",
                "--workspace",
                &workspace,
                "--amount",
                &GRANTED.to_string(),
            ],
        )
        .await;
        let server = serve(&database).await;
        let db = Db::connect(database.url())
            .await
            .expect("connect to the test database");
        Self {
            database,
            db,
            server: Some(server),
            client: reqwest::Client::new(),
            workspace,
            key,
        }
    }

    fn base_url(&self) -> String {
        self.server
            .as_ref()
            .expect("a running server")
            .base_url
            .clone()
    }

    /// `POST /api/v1{path}`, with an idempotency key when given; an error if the server is gone.
    async fn post(
        &self,
        path: &str,
        idempotency_key: Option<&str>,
        body: &Value,
    ) -> Result<ApiResponse, reqwest::Error> {
        post(
            self.client.clone(),
            format!("{}/api/v1{path}", self.base_url()),
            self.key.clone(),
            idempotency_key.map(str::to_owned),
            body.clone(),
        )
        .await
    }

    /// A call that must succeed.
    async fn post_ok(&self, path: &str, body: Value) -> Value {
        let response = self
            .post(path, None, &body)
            .await
            .expect("the server answers");
        let status = response.status.as_u16();
        assert!(
            status == 200 || status == 201,
            "POST {path}: {status} {}",
            response.body
        );
        response.body
    }

    async fn kill(&mut self) {
        self.server.take().expect("a running server").kill().await;
    }

    async fn restart(&mut self) {
        assert!(self.server.is_none(), "restart after a kill");
        self.server = Some(serve(&self.database).await);
    }

    async fn scalar(&self, sql: &str, binds: &[&str]) -> i64 {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()));
        for bind in binds {
            query = query.bind(*bind);
        }
        query
            .fetch_one(self.db.pool())
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"))
            .try_get::<i64, _>(0)
            .unwrap_or_else(|error| panic!("{sql}: {error}"))
    }

    async fn balance(&self) -> i64 {
        self.scalar(
            "select credits_balance from workspaces where id = $1",
            &[&self.workspace],
        )
        .await
    }

    /// The ids of the committed work of a kind.
    async fn work_ids(&self, kind: Kind) -> BTreeSet<String> {
        let sql = format!("select id from {} where workspace_id = $1", kind.table());
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&self.workspace)
            .fetch_all(self.db.pool())
            .await
            .expect("read the work")
            .iter()
            .map(|row| row.try_get::<String, _>("id").expect("id"))
            .collect()
    }

    /// The books balance: the ledger explains the balance, and the balance is what was granted
    /// less what the committed work says it spent; and every prospect comes from a committed import.
    async fn assert_books_balance(&self, context: &str) {
        let workspace = [self.workspace.as_str()];
        let balance = self.balance().await;
        let ledger = self
            .scalar(
                "select cast(coalesce(sum(amount), 0) as bigint) from credit_ledger where workspace_id = $1",
                &workspace,
            )
            .await;
        assert_eq!(
            ledger, balance,
            "{context}: the ledger sums to {ledger} but the balance is {balance}"
        );
        let imports = self
            .scalar(
                "select cast(coalesce(sum(credits_spent), 0) as bigint) from imports where workspace_id = $1",
                &workspace,
            )
            .await;
        let runs = self
            .scalar(
                "select cast(coalesce(sum(credits_spent), 0) as bigint) from scoring_runs where workspace_id = $1",
                &workspace,
            )
            .await;
        assert_eq!(
            balance,
            GRANTED - imports - runs,
            "{context}: {GRANTED} granted, committed imports spent {imports} and scoring runs {runs}, \
             so the balance should be {} but it is {balance} (credits were lost or given away)",
            GRANTED - imports - runs
        );
        let prospects = self
            .scalar(
                "select count(*) from prospects where workspace_id = $1",
                &workspace,
            )
            .await;
        let created = self
            .scalar(
                "select cast(coalesce(sum(created_count), 0) as bigint) from imports where workspace_id = $1",
                &workspace,
            )
            .await;
        assert_eq!(
            prospects, created,
            "{context}: {prospects} prospects but committed imports created {created} (a half-written import)"
        );
    }

    /// The `spend` rows of an idempotency key: (id, object_id).
    async fn spends(&self, idempotency_key: &str) -> Vec<(String, Option<String>)> {
        sqlx::query(
            "select id, object_id from credit_ledger where workspace_id = $1 and kind = 'spend' and idempotency_key = $2",
        )
        .bind(&self.workspace)
        .bind(idempotency_key)
        .fetch_all(self.db.pool())
        .await
        .expect("read the spends")
        .iter()
        .map(|row| {
            (
                row.try_get("id").expect("id"),
                row.try_get("object_id").expect("object_id"),
            )
        })
        .collect()
    }

    /// Every spend with this key paid for committed work, exactly what that work says it spent.
    async fn assert_spends_belong_to(
        &self,
        kind: Kind,
        idempotency_key: &str,
        committed: &BTreeSet<String>,
        context: &str,
    ) -> usize {
        let spends = self.spends(idempotency_key).await;
        for (spend, object) in &spends {
            let object = object.as_deref().unwrap_or("");
            assert!(
                committed.contains(object),
                "{context}: the spend {spend} of key {idempotency_key} paid for `{object}`, which is no committed work \
                 (credits charged for work that was rolled back)"
            );
            let net = self
                .scalar(
                    "select cast(coalesce(sum(amount), 0) as bigint) from credit_ledger where id = $1 or reservation_id = $1",
                    &[spend],
                )
                .await;
            let spent = self
                .scalar(
                    &format!("select credits_spent from {} where id = $1", kind.table()),
                    &[object],
                )
                .await;
            assert_eq!(
                -net, spent,
                "{context}: the spend {spend} nets {} credits but its work {object} spent {spent}",
                -net
            );
        }
        spends.len()
    }

    /// The stored answers of a key (response bodies), whatever state their record is in.
    async fn stored_answers(&self, idempotency_key: &str) -> Vec<Value> {
        sqlx::query(
            "select response_body from idempotency_records where workspace_id = $1 and key = $2 and response_body is not null",
        )
        .bind(&self.workspace)
        .bind(idempotency_key)
        .fetch_all(self.db.pool())
        .await
        .expect("read the idempotency records")
        .iter()
        .map(|row| {
            let text: String = row.try_get("response_body").expect("response_body");
            serde_json::from_str(&text).expect("a stored answer is JSON")
        })
        .collect()
    }

    async fn lists_processing(&self) -> Vec<String> {
        sqlx::query(
            "select id from lists where workspace_id = $1 and processing_status = 'processing'",
        )
        .bind(&self.workspace)
        .fetch_all(self.db.pool())
        .await
        .expect("read the lists")
        .iter()
        .map(|row| row.try_get("id").expect("id"))
        .collect()
    }

    /// Retries a call with its idempotency key until it is answered other than 409
    /// `idempotency_key_in_use`, sleeping what `Retry-After` says; fails past [`RETRY_BOUND`].
    async fn retry_until_answered(
        &self,
        path: &str,
        idempotency_key: &str,
        body: &Value,
    ) -> ApiResponse {
        let started = Instant::now();
        let mut busy = 0;
        let mut without_retry_after = 0;
        loop {
            let response = self
                .post(path, Some(idempotency_key), body)
                .await
                .expect("the restarted server answers");
            if response.status != StatusCode::CONFLICT
                || response.code() != "idempotency_key_in_use"
            {
                assert_eq!(
                    without_retry_after, 0,
                    "{without_retry_after} of {busy} answers 409 `idempotency_key_in_use` had no `Retry-After` in whole seconds"
                );
                return response;
            }
            busy += 1;
            let wait = match response
                .header("retry-after")
                .and_then(|seconds| seconds.trim().parse::<u64>().ok())
            {
                Some(seconds) => Duration::from_secs(seconds).max(Duration::from_millis(100)),
                None => {
                    without_retry_after += 1;
                    Duration::from_secs(1)
                }
            };
            assert!(
                started.elapsed() + wait <= RETRY_BOUND,
                "the key {idempotency_key} is still in use {:.1} s after the restart ({busy} answers 409 \
                 `idempotency_key_in_use`, {without_retry_after} of them without `Retry-After`): the dead \
                 process's claim is never taken over; last answer: {}",
                started.elapsed().as_secs_f64(),
                response.body
            );
            tokio::time::sleep(wait).await;
        }
    }
}

/// A POST on its own (owned arguments, so it can run on a task the kill interrupts).
async fn post(
    client: reqwest::Client,
    url: String,
    key: String,
    idempotency_key: Option<String>,
    body: Value,
) -> Result<ApiResponse, reqwest::Error> {
    let mut request = client.post(url).bearer_auth(key).json(&body);
    if let Some(idempotency_key) = idempotency_key {
        request = request.header("idempotency-key", idempotency_key);
    }
    let response = request.send().await?;
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.bytes().await?;
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    };
    Ok(ApiResponse {
        status,
        headers,
        body,
        raw: bytes.to_vec(),
    })
}

fn targeting_body() -> Value {
    json!({
        "name": "Engineering leaders",
        "criteria": {
            "titles": {"include": [
                {"value": "CTO", "points": 30},
                {"value": "VP", "points": 20},
            ]},
            "industries": [{"value": "software", "points": 20}],
        },
    })
}

fn id_of(body: &Value) -> String {
    body["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {body}"))
        .to_owned()
}

/// Kills the server `KILLS` times in the middle of one kind of priced call and checks, after each
/// restart, that the crash cost nothing and that a retry with the same key runs the call once.
async fn a_crash_at_any_moment_costs_nothing(kind: Kind) {
    let (mut rng, seed) = Rng::from_env_or_clock();
    println!("{kind:?}: seed {seed} (set CRASH_TEST_SEED={seed} to replay)");
    let mut app = Crashable::start().await;

    // The call each round makes (for imports, a new CSV each round, so each one creates and pays).
    let (path, fixed_body) = match kind {
        Kind::Import => ("/imports".to_owned(), None),
        Kind::ListProcessing | Kind::ScoringRun => {
            let targeting = id_of(&app.post_ok("/targetings", targeting_body()).await);
            let list = id_of(
                &app.post_ok(
                    "/lists",
                    json!({"name": "Crash list", "default_targeting_id": targeting}),
                )
                .await,
            );
            let imported = app
                .post_ok(
                    "/imports",
                    json!({"csv": csv("setup", LIST_MEMBERS), "list_id": list}),
                )
                .await;
            assert_eq!(imported["created"], LIST_MEMBERS, "{imported}");
            if kind == Kind::ListProcessing {
                (format!("/lists/{list}/process"), Some(json!({})))
            } else {
                (
                    "/scoring-runs".to_owned(),
                    Some(json!({"list_id": list, "targeting_id": targeting})),
                )
            }
        }
    };
    let body_for = |round: usize| -> Value {
        fixed_body.clone().unwrap_or_else(
            || json!({"csv": csv(&format!("r{round}"), IMPORT_ROWS), "list_name": "Imported"}),
        )
    };

    // One uninterrupted call: how long the kills have to land in, and the answer to expect.
    let started = Instant::now();
    let measured = app
        .post(&path, Some("crash-measure"), &body_for(0))
        .await
        .expect("the server answers");
    let duration = started.elapsed();
    let expected_status = measured.status;
    assert!(
        expected_status.is_success(),
        "the uninterrupted call: {} {}",
        expected_status,
        measured.body
    );
    println!(
        "{kind:?}: one uninterrupted call takes {} ms",
        duration.as_millis()
    );
    app.assert_books_balance("after the uninterrupted call")
        .await;

    for round in 1..=KILLS {
        let idempotency_key = format!("crash-{seed}-{round}");
        let body = body_for(round);
        let before = app.work_ids(kind).await;
        let delay = rng.millis_up_to(duration);

        let call = tokio::spawn(post(
            app.client.clone(),
            format!("{}/api/v1{path}", app.base_url()),
            app.key.clone(),
            Some(idempotency_key.clone()),
            body.clone(),
        ));
        tokio::time::sleep(delay).await;
        app.kill().await;
        let interrupted = tokio::time::timeout(Duration::from_secs(30), call)
            .await
            .expect("the interrupted call ends when the server dies")
            .expect("the call's task");
        let answered = match &interrupted {
            Ok(response) => format!("answered {}", response.status.as_u16()),
            Err(_) => "cut off".to_owned(),
        };
        app.restart().await;
        let restarted = Instant::now();
        let context = format!(
            "{kind:?} round {round} (seed {seed}, killed after {} ms, call {answered})",
            delay.as_millis()
        );

        // Right after the restart: all of the work, its charge and its answer, or none of them.
        app.assert_books_balance(&format!("{context}, after the restart"))
            .await;
        let after = app.work_ids(kind).await;
        let new: Vec<&String> = after.difference(&before).collect();
        assert!(
            after.is_superset(&before) && new.len() <= 1,
            "{context}: the crash changed the committed work from {before:?} to {after:?}"
        );
        let spends = app
            .assert_spends_belong_to(kind, &idempotency_key, &after, &context)
            .await;
        let answers = app.stored_answers(&idempotency_key).await;
        match new.first() {
            None => {
                assert_eq!(
                    spends, 0,
                    "{context}: no work was committed, yet key {idempotency_key} has a spend"
                );
                assert!(
                    answers.is_empty(),
                    "{context}: no work was committed, yet an answer is stored: {answers:?}"
                );
            }
            Some(work) => {
                assert_eq!(
                    spends, 1,
                    "{context}: the committed work {work} has {spends} spends"
                );
                assert_eq!(
                    answers.len(),
                    1,
                    "{context}: the work {work} was committed but its answer was not stored with it"
                );
                assert_eq!(
                    &kind.work_id(&answers[0]),
                    *work,
                    "{context}: the stored answer names other work: {}",
                    answers[0]
                );
            }
        }
        let committed_before_retry = new.first().map(|work| (*work).clone());
        if let Ok(answer) = &interrupted
            && answer.status.is_success()
        {
            assert_eq!(
                committed_before_retry.as_deref(),
                Some(kind.work_id(&answer.body).as_str()),
                "{context}: the call answered {} but its work did not survive the crash",
                answer.body
            );
        }

        // A retry with the same key completes, and the work exists exactly once.
        let retried = app
            .retry_until_answered(&path, &idempotency_key, &body)
            .await;
        assert_eq!(
            retried.status, expected_status,
            "{context}: the retry answered {}",
            retried.body
        );
        println!(
            "{context}: {}; the retry took {} ms after the restart{}",
            if committed_before_retry.is_some() {
                "the work had committed"
            } else {
                "nothing had committed"
            },
            restarted.elapsed().as_millis(),
            if retried.header("idempotent-replayed") == Some("true") {
                " (replayed)"
            } else {
                ""
            }
        );
        let work = kind.work_id(&retried.body);
        if let Some(committed) = &committed_before_retry {
            assert_eq!(
                &work, committed,
                "{context}: the retry ran the work again instead of replaying it"
            );
            assert_eq!(retried.header("idempotent-replayed"), Some("true"));
        }
        let after_retry = app.work_ids(kind).await;
        let mut expected = before.clone();
        expected.insert(work.clone());
        assert_eq!(
            after_retry, expected,
            "{context}: after the retry the work for key {idempotency_key} should exist exactly once"
        );
        app.assert_books_balance(&format!("{context}, after the retry"))
            .await;
        assert_eq!(
            app.assert_spends_belong_to(kind, &idempotency_key, &after_retry, &context)
                .await,
            1,
            "{context}: key {idempotency_key} is charged once"
        );
        assert_eq!(
            app.lists_processing().await,
            Vec::<String>::new(),
            "{context}: a list is left `processing` after the restart and the retry"
        );

        // A further retry replays the answer and spends nothing.
        let balance = app.balance().await;
        let replay = app
            .post(&path, Some(&idempotency_key), &body)
            .await
            .expect("the server answers");
        assert_eq!(
            replay.header("idempotent-replayed"),
            Some("true"),
            "{context}: {} {}",
            replay.status,
            replay.body
        );
        assert_eq!(replay.status, retried.status, "{context}");
        assert_eq!(replay.body, retried.body, "{context}: the replay differs");
        assert_eq!(
            app.balance().await,
            balance,
            "{context}: a replay spends nothing"
        );
        assert_eq!(app.work_ids(kind).await, after_retry, "{context}");
    }
    if let Some(server) = app.server.take() {
        server.terminate().await;
    }
}

#[tokio::test]
async fn a_crash_at_any_moment_costs_nothing_when_importing_prospects() {
    a_crash_at_any_moment_costs_nothing(Kind::Import).await;
}

#[tokio::test]
async fn a_crash_at_any_moment_costs_nothing_when_processing_a_list() {
    a_crash_at_any_moment_costs_nothing(Kind::ListProcessing).await;
}

#[tokio::test]
async fn a_crash_at_any_moment_costs_nothing_when_starting_a_scoring_run() {
    a_crash_at_any_moment_costs_nothing(Kind::ScoringRun).await;
}

/// Concurrent calls to process one list: one runs, the others are refused and charged nothing.
#[tokio::test]
async fn ten_concurrent_calls_to_process_one_list_run_it_once_and_charge_once() {
    const CALLS: usize = 10;
    let app = spawn_app().await;
    app.grant_credits(GRANTED).await;
    let targeting = id_of(
        app.post_json("/targetings", &app.key, targeting_body())
            .await
            .expect(201),
    );
    let list = id_of(
        app.post_json(
            "/lists",
            &app.key,
            json!({"name": "Race", "default_targeting_id": targeting}),
        )
        .await
        .expect(201),
    );
    let imported = app
        .post_json(
            "/imports",
            &app.key,
            json!({"csv": csv("race", 300), "list_id": list}),
        )
        .await;
    assert_eq!(imported.expect(200)["created"], 300);
    let before = balance(&app).await;

    // All ten calls must be in flight together, however loaded the machine: a transaction of the
    // test's own holds the list's row (PostgreSQL) or the write lock (SQLite), so every call can
    // read and plan but none can mark the list until it ends. Without it, a call that only starts
    // after the first has finished would rightly run again.
    let mut hold = app.db.begin_write().await.expect("a transaction");
    sqlx::query("update lists set updated_at = updated_at where id = $1")
        .bind(&list)
        .execute(&mut *hold)
        .await
        .expect("hold the list");
    let start = Arc::new(tokio::sync::Barrier::new(CALLS));
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..CALLS {
        let start = start.clone();
        let request = post(
            app.client.clone(),
            app.url(&format!("/api/v1/lists/{list}/process")),
            app.key.clone(),
            None,
            json!({}),
        );
        calls.spawn(async move {
            start.wait().await;
            request.await.expect("the server answers")
        });
    }
    // Long enough for ten plans (three small reads each) on a busy machine; far below the
    // ten-second SQLite busy timeout the marks wait under.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    hold.commit().await.expect("release the list");
    let answers = calls.join_all().await;
    let ran: Vec<&ApiResponse> = answers
        .iter()
        .filter(|answer| answer.status == StatusCode::OK)
        .collect();
    let summary: Vec<String> = answers
        .iter()
        .map(|answer| format!("{} {}", answer.status.as_u16(), answer.code()))
        .collect();
    assert_eq!(ran.len(), 1, "exactly one call runs: {summary:?}");
    for answer in answers
        .iter()
        .filter(|answer| answer.status != StatusCode::OK)
    {
        answer.expect_error(409, "invalid_state");
    }
    let charge = ran[0].body["credits_spent"]
        .as_i64()
        .expect("credits_spent");
    assert_eq!(charge, 300, "{}", ran[0].body);

    let spends: Vec<(String, i64)> = sqlx::query(
        "select id, amount from credit_ledger where workspace_id = $1 and kind = 'spend' and action = 'process_list'",
    )
    .bind(&app.workspace_id)
    .fetch_all(app.db.pool())
    .await
    .expect("read the ledger")
    .iter()
    .map(|row| (row.try_get("id").expect("id"), row.try_get("amount").expect("amount")))
    .collect();
    assert_eq!(
        spends.len(),
        1,
        "the ledger holds one spend for the one call that ran, not one per refused call: {spends:?}"
    );
    assert_eq!(balance(&app).await, before - charge);
    let ledger: i64 = sqlx::query(
        "select cast(coalesce(sum(amount), 0) as bigint) as total from credit_ledger where workspace_id = $1",
    )
    .bind(&app.workspace_id)
    .fetch_one(app.db.pool())
    .await
    .expect("sum the ledger")
    .try_get("total")
    .expect("total");
    assert_eq!(ledger, before - charge, "the ledger explains the balance");
    let list_view = app.get(&format!("/lists/{list}"), &app.key).await;
    assert_eq!(list_view.expect(200)["processing_status"], "processed");
}

async fn balance(app: &TestApp) -> i64 {
    app.get("/workspace", &app.key).await.expect(200)["workspace"]["credits_balance"]
        .as_i64()
        .expect("balance")
}

#[tokio::test]
async fn a_list_whose_processing_was_killed_is_free_again_within_seconds_of_the_restart() {
    let mut app = Crashable::start().await;
    let targeting = id_of(&app.post_ok("/targetings", targeting_body()).await);
    let list = id_of(
        &app.post_ok(
            "/lists",
            json!({"name": "Killed list", "default_targeting_id": targeting}),
        )
        .await,
    );
    app.post_ok(
        "/imports",
        json!({"csv": csv("killed", LIST_MEMBERS), "list_id": list}),
    )
    .await;
    let path = format!("/lists/{list}/process");
    let status = |app: &Crashable| {
        let list = list.clone();
        let db = app.db.clone();
        async move {
            sqlx::query("select processing_status from lists where id = $1")
                .bind(&list)
                .fetch_one(db.pool())
                .await
                .expect("the list")
                .get::<String, _>(0)
        }
    };
    // A call without a key, killed while the list is `processing`.
    let call = {
        let (client, url, key) = (
            app.client.clone(),
            format!("{}/api/v1{path}", app.base_url()),
            app.key.clone(),
        );
        tokio::spawn(post(client, url, key, None, json!({})))
    };
    let started = Instant::now();
    while status(&app).await != "processing" {
        assert!(
            started.elapsed() < RETRY_BOUND,
            "the list never showed `processing`"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    app.kill().await;
    call.await.ok();
    if status(&app).await != "processing" {
        // The work committed before the kill: nothing was left behind to recover.
        return;
    }
    app.restart().await;
    let restarted = Instant::now();
    // Recovery waits for the dead call's lease (5 s) instead of the next round 30 s later.
    while status(&app).await == "processing" {
        assert!(
            restarted.elapsed() < Duration::from_secs(25),
            "the list is still `processing` {:.1} s after the restart",
            restarted.elapsed().as_secs_f64()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status(&app).await, "failed");
    // The next call, without a key, processes it at once.
    let again = app.post(&path, None, &json!({})).await.expect("an answer");
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(status(&app).await, "processed");
}
