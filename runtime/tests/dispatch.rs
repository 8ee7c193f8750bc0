//! The dispatch pipeline as a unit: a fake priced, idempotent action run through
//! [`Dispatcher::dispatch`] with no HTTP, no OAuth and no web pages, on a fresh database (SQLite,
//! or PostgreSQL when `TEST_DATABASE_URL` names a server).
//!
//! The fake action writes one row per unit into a table of its own inside the transaction
//! dispatch gives it, settles its credits, and fails on request after writing, so each test can
//! see whether the work, the charge and the stored answer committed together or not at all.

use std::sync::Arc;

use outreach_runtime::auth::{CredentialKind, Principal, WorkspaceSnapshot};
use outreach_runtime::credits::{self, Source};
use outreach_runtime::dispatch::{Dispatcher, Reply};
use outreach_runtime::registry::Registry;
use outreach_runtime::retry::{Face, Retries};
use outreach_runtime::{
    ApiError, Clock, Config, Ctx, Db, Environment, ErrorCode, Priced, Role, Scope, action, admin,
    price_item,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::Row;

price_item! {
    /// A unit of fake work.
    pub FAKE_UNIT = "fake.unit", 2;
}

#[derive(Deserialize, JsonSchema)]
pub struct WorkInput {
    /// How many units to do.
    pub units: i64,
    /// Fail after writing the units.
    #[serde(default)]
    pub fail: bool,
    /// Meet a conflict (as a deadlock would) after writing the units, on this many runs of the
    /// workspace's calls.
    #[serde(default)]
    pub conflicts: u32,
}

/// Runs of `do_work` per workspace, for `conflicts` (tests share the process).
static RUNS: std::sync::Mutex<Vec<(String, u32)>> = std::sync::Mutex::new(Vec::new());

fn count_run(workspace_id: &str) -> u32 {
    let mut runs = RUNS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, count)) = runs.iter_mut().find(|(id, _)| id == workspace_id) {
        *count += 1;
        return *count;
    }
    runs.push((workspace_id.to_owned(), 1));
    1
}

#[derive(Serialize, JsonSchema)]
pub struct WorkDone {
    pub units: i64,
    pub charged: i64,
}

/// What the price function worked out.
pub struct WorkPlan {
    units: i64,
}

async fn price_work(ctx: &Ctx, input: &WorkInput) -> Result<Priced<WorkPlan>, ApiError> {
    if input.units < 0 {
        return Err(ApiError::invalid_request("`units` must not be negative."));
    }
    Ok(ctx
        .price(FAKE_UNIT, input.units)
        .plan(WorkPlan { units: input.units }))
}

/// Do some fake work.
#[action(scope = "write", credits = price_work, idempotent)]
pub async fn do_work(ctx: Ctx, input: WorkInput, plan: WorkPlan) -> Result<WorkDone, ApiError> {
    let mut tx = ctx.tx().await?;
    for _ in 0..plan.units {
        sqlx::query("insert into fake_effects (workspace_id) values ($1)")
            .bind(ctx.workspace_id())
            .execute(&mut *tx)
            .await?;
    }
    if input.fail {
        return Err(ApiError::new(ErrorCode::INVALID_STATE, "Failing as asked."));
    }
    if count_run(ctx.workspace_id()) <= input.conflicts {
        return Err(ApiError::contention(
            "database: deadlock detected (a fake one)",
        ));
    }
    let charged = plan.units * ctx.unit_price(FAKE_UNIT);
    ctx.settle(&mut tx, charged, "fake_object").await?;
    Ok(WorkDone {
        units: plan.units,
        charged,
    })
}

struct Fixture {
    dispatcher: Dispatcher,
    principal: Arc<Principal>,
    _database: Database,
}

enum Database {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres { admin_url: String, name: String },
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Database::Postgres { admin_url, name } = self {
            let (admin_url, name) = (admin_url.clone(), name.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async move {
                    use sqlx::{Connection, Executor};
                    if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url).await {
                        let drop = format!("drop database if exists {name} with (force)");
                        conn.execute(sqlx::AssertSqlSafe(drop)).await.ok();
                    }
                });
            })
            .join()
            .ok();
        }
    }
}

async fn fixture(balance: i64) -> Fixture {
    let (url, database) = match std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
    {
        Some(admin_url) => {
            use sqlx::{Connection, Executor};
            let name = format!(
                "outreach_dispatch_{}",
                outreach_runtime::ids::new_id("db").to_lowercase()
            );
            let mut conn = sqlx::PgConnection::connect(&admin_url)
                .await
                .expect("connect to TEST_DATABASE_URL");
            conn.execute(sqlx::AssertSqlSafe(format!("create database {name}")))
                .await
                .expect("create a database");
            let base = admin_url
                .rsplit_once('/')
                .map_or(admin_url.as_str(), |(base, _)| base);
            (
                format!("{base}/{name}"),
                Database::Postgres { admin_url, name },
            )
        }
        None => {
            let dir = tempfile::tempdir().expect("a temporary directory");
            (
                format!("sqlite://{}/dispatch.db", dir.path().display()),
                Database::Sqlite(dir),
            )
        }
    };
    let db = Db::connect(&url).await.expect("connect");
    db.migrate().await.expect("migrate");
    sqlx::query("create table fake_effects (workspace_id text not null)")
        .execute(db.pool())
        .await
        .expect("the fake action's table");
    let clock = Clock::default();
    let created = admin::create_workspace(
        &db,
        &clock,
        "Fake",
        "owner@fake.test",
        Some("a long enough password"),
        0,
    )
    .await
    .expect("a workspace");
    if balance > 0 {
        credits::grant(
            &db,
            &clock,
            &created.workspace_id,
            balance,
            &Source::default(),
        )
        .await
        .expect("a grant");
    }
    let principal = Principal {
        workspace_id: created.workspace_id.clone(),
        person_id: created.person_id.clone(),
        email: "owner@fake.test".into(),
        role: Role::Owner,
        credential_kind: CredentialKind::ApiKey,
        credential_id: "key_fake".into(),
        credential_name: "fake".into(),
        granted: Scope::Write,
        effective: Scope::Write,
        terms_accepted: false,
        unattended: false,
        workspace: WorkspaceSnapshot {
            name: "Fake".into(),
            created_at: 0,
            terms_accepted_at: None,
            credits_balance: balance,
        },
    };
    let dispatcher = Dispatcher {
        db,
        clock,
        config: Arc::new(Config::new("http://127.0.0.1:1", Environment::default())),
        registry: Arc::new(Registry::build().expect("the fake registry")),
        retries: Retries::default(),
    };
    Fixture {
        dispatcher,
        principal: Arc::new(principal),
        _database: database,
    }
}

impl Fixture {
    async fn call(&self, input: Value, key: Option<&str>) -> Result<Reply, ApiError> {
        self.call_as(self.principal.clone(), input, key).await
    }

    async fn call_as(
        &self,
        principal: Arc<Principal>,
        input: Value,
        key: Option<&str>,
    ) -> Result<Reply, ApiError> {
        let action = self
            .dispatcher
            .registry
            .get("do_work")
            .expect("the fake action");
        self.dispatcher
            .dispatch(
                principal,
                action,
                input,
                key.map(str::to_owned),
                Arc::from("req_test"),
            )
            .await
    }

    async fn scalar(&self, sql: &str) -> i64 {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .bind(&self.principal.workspace_id)
            .fetch_one(self.dispatcher.db.pool())
            .await
            .expect("a figure")
            .try_get::<i64, _>(0)
            .expect("an integer")
    }

    async fn effects(&self) -> i64 {
        self.scalar("select count(*) from fake_effects where workspace_id = $1")
            .await
    }

    async fn balance(&self) -> i64 {
        self.scalar("select credits_balance from workspaces where id = $1")
            .await
    }

    /// The ledger explains the balance.
    async fn assert_ledger_balances(&self) {
        let sum = self
            .scalar("select cast(coalesce(sum(amount), 0) as bigint) from credit_ledger where workspace_id = $1")
            .await;
        assert_eq!(sum, self.balance().await, "sum(ledger) = balance");
    }

    async fn records(&self) -> i64 {
        self.scalar("select count(*) from idempotency_records where workspace_id = $1")
            .await
    }
}

#[tokio::test]
async fn the_work_its_charge_and_its_answer_commit_together_and_a_retry_replays() {
    let app = fixture(100).await;
    let reply = app
        .call(json!({"units": 3}), Some("k1"))
        .await
        .expect("the work is done");
    assert_eq!(reply.body.to_value(), json!({"units": 3, "charged": 6}));
    assert!(!reply.replayed);
    assert_eq!((app.effects().await, app.balance().await), (3, 94));
    let replay = app
        .call(json!({"units": 3}), Some("k1"))
        .await
        .expect("a replay");
    assert!(replay.replayed);
    assert_eq!(replay.body, reply.body);
    assert_eq!((app.effects().await, app.balance().await), (3, 94));
    app.assert_ledger_balances().await;
}

#[tokio::test]
async fn a_failure_after_writing_leaves_nothing_and_frees_the_key() {
    let app = fixture(100).await;
    let error = app
        .call(json!({"units": 4, "fail": true}), Some("k2"))
        .await
        .expect_err("the action fails");
    assert_eq!(error.code, ErrorCode::INVALID_STATE);
    assert_eq!((app.effects().await, app.balance().await), (0, 100));
    assert_eq!(app.records().await, 0, "the key was freed");
    app.assert_ledger_balances().await;
    // The failed call is not remembered, so the key serves a corrected request.
    let reply = app
        .call(json!({"units": 4}), Some("k2"))
        .await
        .expect("the freed key runs a corrected request");
    assert!(!reply.replayed);
    assert_eq!((app.effects().await, app.balance().await), (4, 92));
}

#[tokio::test]
async fn a_failed_call_can_be_retried_with_the_same_key_and_request() {
    let app = fixture(5).await;
    let error = app
        .call(json!({"units": 4}), Some("k3"))
        .await
        .expect_err("8 credits on a balance of 5");
    assert_eq!(error.code, ErrorCode::INSUFFICIENT_CREDITS);
    assert_eq!(error.extra["price"], json!(8));
    assert_eq!((app.effects().await, app.balance().await), (0, 5));
    assert_eq!(app.records().await, 0);
    credits::grant(
        &app.dispatcher.db,
        &app.dispatcher.clock,
        &app.principal.workspace_id,
        10,
        &Source::default(),
    )
    .await
    .expect("a grant");
    let reply = app
        .call(json!({"units": 4}), Some("k3"))
        .await
        .expect("the retry runs");
    assert!(!reply.replayed);
    assert_eq!((app.effects().await, app.balance().await), (4, 7));
    app.assert_ledger_balances().await;
}

#[tokio::test]
async fn a_plan_that_refuses_the_input_holds_no_key_and_spends_nothing() {
    let app = fixture(100).await;
    let error = app
        .call(json!({"units": -1}), Some("k4"))
        .await
        .expect_err("negative units");
    assert_eq!(error.code, ErrorCode::INVALID_REQUEST);
    assert_eq!(app.records().await, 0);
    assert_eq!(app.balance().await, 100);
}

#[tokio::test]
async fn an_estimate_needs_only_read_and_spends_nothing() {
    let app = fixture(3).await;
    let mut reader = (*app.principal).clone();
    reader.effective = Scope::Read;
    let reply = app
        .call_as(
            Arc::new(reader.clone()),
            json!({"units": 2, "estimate_only": true}),
            None,
        )
        .await
        .expect("an estimate");
    assert_eq!(reply.body.to_value()["price"], json!(4));
    assert_eq!(reply.body.to_value()["sufficient"], json!(false));
    assert_eq!((app.effects().await, app.balance().await), (0, 3));
    let error = app
        .call_as(Arc::new(reader), json!({"units": 1}), None)
        .await
        .expect_err("the work needs write");
    assert_eq!(error.code, ErrorCode::INSUFFICIENT_SCOPE);
}

#[tokio::test]
async fn a_claim_whose_lease_lapsed_is_taken_over_and_a_live_one_says_how_long() {
    let app = fixture(100).await;
    let fingerprint = outreach_runtime::idempotency::fingerprint("do_work", &json!({"units": 1}));
    let now = app.dispatcher.clock.now_ms();
    for (key, lease_expires_at) in [("lapsed", now - 1), ("live", now + 3_500)] {
        sqlx::query(
            "insert into idempotency_records (workspace_id, person_id, action, key, fingerprint, state, created_at, \
             lease_token, lease_expires_at) values ($1, $2, 'do_work', $3, $4, 'running', $5, 'dead', $6)",
        )
        .bind(&app.principal.workspace_id)
        .bind(&app.principal.person_id)
        .bind(key)
        .bind(&fingerprint)
        .bind(now - 10_000)
        .bind(lease_expires_at)
        .execute(app.dispatcher.db.pool())
        .await
        .expect("a claim left by a dead process");
    }
    let reply = app
        .call(json!({"units": 1}), Some("lapsed"))
        .await
        .expect("the lapsed claim is taken over");
    assert!(!reply.replayed);
    assert_eq!(app.effects().await, 1);
    let error = app
        .call(json!({"units": 1}), Some("live"))
        .await
        .expect_err("a live claim is in use");
    assert_eq!(error.code, ErrorCode::IDEMPOTENCY_KEY_IN_USE);
    assert_eq!(error.extra["retry_after"], json!(4), "{}", error.message);
    let retry_after = error
        .headers
        .iter()
        .find(|(name, _)| name == http::header::RETRY_AFTER)
        .map(|(_, value)| value.to_str().expect("ascii").to_owned());
    assert_eq!(retry_after.as_deref(), Some("4"));
    app.dispatcher.clock.advance_ms(4_000);
    let reply = app
        .call(json!({"units": 1}), Some("live"))
        .await
        .expect("once the lease lapses, the key is taken over");
    assert!(!reply.replayed);
    assert_eq!(app.effects().await, 2);
}

#[tokio::test]
async fn recovery_returns_what_a_lapsed_hold_still_keeps() {
    let app = fixture(50).await;
    let (db, clock) = (&app.dispatcher.db, &app.dispatcher.clock);
    let mut tx = db.begin_write().await.expect("a transaction");
    let held = credits::hold(
        &mut tx,
        clock,
        &app.principal.workspace_id,
        20,
        &Source::default(),
        clock.now_ms() + 60_000,
    )
    .await
    .expect("a hold");
    tx.commit().await.expect("committed with its job");
    assert_eq!(app.balance().await, 30);
    assert_eq!(
        outreach_runtime::recovery::run_all(db, clock).await,
        0,
        "a live hold is kept"
    );
    assert_eq!(app.balance().await, 30);
    clock.advance_ms(61_000);
    assert_eq!(outreach_runtime::recovery::run_all(db, clock).await, 1);
    assert_eq!(app.balance().await, 50);
    assert_eq!(
        outreach_runtime::recovery::run_all(db, clock).await,
        0,
        "released once"
    );
    app.assert_ledger_balances().await;
    drop(held);
}

#[tokio::test]
async fn a_conflict_runs_the_call_again_in_place_and_it_counts_once() {
    let app = fixture(100).await;
    let reply = app
        .call(json!({"units": 3, "conflicts": 2}), Some("k-conflict"))
        .await
        .expect("the third run succeeds");
    assert_eq!(reply.body.to_value(), json!({"units": 3, "charged": 6}));
    assert_eq!((app.effects().await, app.balance().await), (3, 94));
    app.assert_ledger_balances().await;
    let retries = &app.dispatcher.retries;
    assert_eq!(retries.get(Face::Request, "retried"), 2);
    assert_eq!(retries.get(Face::Request, "exhausted"), 0);
    let replay = app
        .call(json!({"units": 3, "conflicts": 2}), Some("k-conflict"))
        .await
        .expect("a replay");
    assert!(replay.replayed);
    assert_eq!(app.effects().await, 3);
}

#[tokio::test]
async fn conflicts_past_the_last_try_reach_the_client_as_a_retryable_409_and_change_nothing() {
    let app = fixture(100).await;
    let error = app
        .call(json!({"units": 2, "conflicts": 99}), Some("k-stuck"))
        .await
        .expect_err("every try meets a conflict");
    assert_eq!(error.code, ErrorCode::CONFLICT);
    assert_eq!(error.body()["retryable"], json!(true));
    assert_eq!((app.effects().await, app.balance().await), (0, 100));
    assert_eq!(app.records().await, 0, "the key was freed");
    app.assert_ledger_balances().await;
    let retries = &app.dispatcher.retries;
    assert_eq!(
        retries.get(Face::Request, "retried"),
        u64::from(outreach_runtime::retry::TRIES - 1)
    );
    assert_eq!(retries.get(Face::Request, "exhausted"), 1);
}

#[tokio::test]
async fn a_reused_key_is_refused_before_the_new_body_is_judged() {
    let app = fixture(100).await;
    app.call(json!({"units": 1}), Some("k-reused"))
        .await
        .expect("the first call");
    for other in [
        json!({"units": -1}),
        json!({"units": "many"}),
        json!({"units": 2}),
    ] {
        let error = app
            .call(other.clone(), Some("k-reused"))
            .await
            .expect_err("another request under a used key");
        assert_eq!(
            error.code,
            ErrorCode::IDEMPOTENCY_KEY_REUSED,
            "{other}: {}",
            error.message
        );
    }
    assert_eq!((app.effects().await, app.balance().await), (1, 98));
}
