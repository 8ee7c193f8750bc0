//! Long calls on the MCP face, with no domain: fake actions registered with `mcp_task!`, the real
//! server on port 0 (SQLite, or PostgreSQL when `TEST_DATABASE_URL` names a server), and raw
//! JSON-RPC over HTTP, on both lifecycles: the `initialize` one (a protocol version header of
//! 2025-06-18, answered by the fast path) and the per-request one of 2026-07-28 (answered by
//! rmcp's transport).
//!
//! The fake work is a row the test moves by hand (`set`), so every state a task can show is
//! reached without a worker.

use std::time::Duration;

use outreach_runtime::server::{build_state, serve};
use outreach_runtime::tasks::{TaskProgress, TaskState, TaskView};
use outreach_runtime::{
    ApiError, Clock, Config, Ctx, Db, Environment, ErrorCode, Scope, action, admin, mcp_task,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::Row;
use tokio::net::TcpListener;

// ----- the fake domain: a job that counts to its size -----

#[derive(Serialize, Deserialize, JsonSchema)]
pub struct FakeJob {
    pub id: String,
    /// `queued`, `running`, `done`, `failed` or `canceled`.
    pub status: String,
    pub processed: i64,
    pub size: i64,
    pub error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct StartInput {
    /// How many items the job counts.
    pub size: i64,
}

#[derive(Deserialize, JsonSchema)]
pub struct JobId {
    pub id: String,
}

const AT: &str = "2026-11-21T10:00:00Z";

async fn fetch(ctx: &Ctx, id: &str) -> Result<FakeJob, ApiError> {
    let row = sqlx::query(
        "select id, status, processed, size, error from fake_jobs where id = $1 and workspace_id = $2",
    )
    .bind(id)
    .bind(ctx.workspace_id())
    .fetch_optional(ctx.db().pool())
    .await?
    .ok_or_else(|| ApiError::not_found("job", id))?;
    Ok(FakeJob {
        id: row.get("id"),
        status: row.get("status"),
        processed: row.get("processed"),
        size: row.get("size"),
        error: row.get("error"),
        created_at: AT.into(),
        updated_at: AT.into(),
    })
}

/// Start a fake job.
#[action(scope = "write")]
pub async fn start_job(ctx: Ctx, input: StartInput) -> Result<FakeJob, ApiError> {
    let id = outreach_runtime::ids::new_id("job");
    let mut tx = ctx.tx().await?;
    sqlx::query("insert into fake_jobs (id, workspace_id, status, processed, size) values ($1, $2, 'queued', 0, $3)")
        .bind(&id)
        .bind(ctx.workspace_id())
        .bind(input.size)
        .execute(&mut *tx)
        .await?;
    Ok(FakeJob {
        id,
        status: "queued".into(),
        processed: 0,
        size: input.size,
        error: None,
        created_at: AT.into(),
        updated_at: AT.into(),
    })
}

/// Get a fake job.
#[action(scope = "read")]
pub async fn get_job(ctx: Ctx, input: JobId) -> Result<FakeJob, ApiError> {
    fetch(&ctx, &input.id).await
}

/// Cancel a fake job.
#[action(scope = "write")]
pub async fn cancel_job(ctx: Ctx, input: JobId) -> Result<FakeJob, ApiError> {
    let job = fetch(&ctx, &input.id).await?;
    if !matches!(job.status.as_str(), "queued" | "running") {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "The job is {}; only a queued or running job can be canceled.",
                job.status
            ),
        ));
    }
    let mut tx = ctx.tx().await?;
    sqlx::query("update fake_jobs set status = 'canceled' where id = $1")
        .bind(&input.id)
        .execute(&mut *tx)
        .await?;
    Ok(FakeJob {
        status: "canceled".into(),
        ..job
    })
}

fn job_view(output: &Value) -> Option<TaskView> {
    let job: FakeJob = serde_json::from_value(output.clone()).ok()?;
    let state = match job.status.as_str() {
        "queued" | "running" => TaskState::Working,
        "done" => TaskState::Completed,
        "failed" => TaskState::Failed {
            code: "job_failed".into(),
            message: job.error.clone().unwrap_or_default(),
        },
        _ => TaskState::Cancelled,
    };
    Some(TaskView {
        id: job.id,
        state,
        message: None,
        progress: Some(TaskProgress {
            processed: u64::try_from(job.processed).ok()?,
            total: u64::try_from(job.size).ok(),
        }),
        created_at: job.created_at,
        updated_at: job.updated_at,
    })
}

mcp_task! {
    tool: "start_job", get: "get_job", cancel: "cancel_job", id_prefix: "job_", view: job_view,
}

// ----- the server -----

struct App {
    base_url: String,
    /// Begins the server's graceful shutdown; `stopped` says when it has finished.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    stopped: Option<tokio::task::JoinHandle<()>>,
    db: Db,
    key: String,
    other_key: String,
    http: reqwest::Client,
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

async fn database() -> (String, Database) {
    match std::env::var("TEST_DATABASE_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
    {
        Some(admin_url) => {
            use sqlx::{Connection, Executor};
            let name = format!(
                "outreach_mcp_tasks_{}",
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
                format!("sqlite://{}/mcp_tasks.db", dir.path().display()),
                Database::Sqlite(dir),
            )
        }
    }
}

async fn spawn() -> App {
    spawn_with(|_| {}).await
}

async fn spawn_with(configure: impl FnOnce(&mut Config)) -> App {
    let (url, database) = database().await;
    let db = Db::connect(&url).await.expect("connect");
    db.migrate().await.expect("migrate");
    sqlx::query(
        "create table fake_jobs (id text primary key, workspace_id text not null, status text not null, \
         processed bigint not null, size bigint not null, error text)",
    )
    .execute(db.pool())
    .await
    .expect("the fake jobs' table");
    let clock = Clock::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a port");
    let base_url = format!("http://{}", listener.local_addr().expect("local address"));
    let mut config = Config::new(&base_url, Environment::default());
    config.jobs.workers = 0;
    configure(&mut config);
    let state = build_state(db.clone(), clock.clone(), config).expect("the app state");
    let (stop, stopping) = tokio::sync::oneshot::channel::<()>();
    let stopped = tokio::spawn(async move {
        serve(state, listener, async move {
            stopping.await.ok();
        })
        .await
        .expect("serve");
    });
    let mut keys = Vec::new();
    for (name, email) in [("Fake", "owner@fake.test"), ("Other", "owner@other.test")] {
        let created =
            admin::create_workspace(&db, &clock, name, email, Some("a long enough password"), 0)
                .await
                .expect("a workspace");
        let key = admin::create_key(
            &db,
            &clock,
            &Environment::default(),
            &created.workspace_id,
            email,
            "test",
            Scope::Write,
            None,
        )
        .await
        .expect("a key");
        keys.push(key.key);
    }
    let other_key = keys.pop().expect("two keys");
    App {
        base_url,
        stop: Some(stop),
        stopped: Some(stopped),
        db,
        key: keys.pop().expect("two keys"),
        other_key,
        http: reqwest::Client::new(),
        _database: database,
    }
}

/// The two ways a client frames its requests.
#[derive(Debug, Clone, Copy)]
enum Lifecycle {
    /// After an `initialize` handshake: the version in a header, capabilities (if any) in `_meta`.
    Initialize,
    /// 2026-07-28: every request carries its version, client and capabilities in `_meta`, and
    /// the SEP-2243 routing headers.
    PerRequest,
}

const BOTH: [Lifecycle; 2] = [Lifecycle::Initialize, Lifecycle::PerRequest];

fn tasks_capabilities() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// What came back: the status, the content type and the body's text.
struct Answer {
    status: u16,
    content_type: String,
    text: String,
}

impl Answer {
    /// The JSON-RPC message of a JSON answer.
    fn json(&self) -> Value {
        assert!(
            self.content_type.starts_with("application/json"),
            "{} {}: {}",
            self.status,
            self.content_type,
            self.text
        );
        serde_json::from_str(&self.text).expect("a JSON body")
    }

    /// The JSON-RPC messages of an event stream, in order.
    fn events(&self) -> Vec<Value> {
        assert!(
            self.content_type.starts_with("text/event-stream"),
            "{} {}: {}",
            self.status,
            self.content_type,
            self.text
        );
        self.text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|data| serde_json::from_str(data.trim()).expect("a JSON event"))
            .collect()
    }
}

impl App {
    async fn rpc(
        &self,
        key: &str,
        lifecycle: Lifecycle,
        method: &str,
        mut params: Value,
        capabilities: Option<Value>,
        accept: &str,
    ) -> Answer {
        let mut request = self
            .http
            .post(format!("{}/api/mcp", self.base_url))
            .bearer_auth(key)
            .header("accept", accept)
            .header("content-type", "application/json");
        let meta = params
            .as_object_mut()
            .expect("params are an object")
            .entry("_meta")
            .or_insert_with(|| json!({}));
        match lifecycle {
            Lifecycle::Initialize => {
                request = request.header("mcp-protocol-version", "2025-06-18");
                if let Some(capabilities) = capabilities {
                    meta["io.modelcontextprotocol/clientCapabilities"] = capabilities;
                }
            }
            Lifecycle::PerRequest => {
                request = request
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-method", method);
                meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
                meta["io.modelcontextprotocol/clientInfo"] =
                    json!({"name": "test", "version": "1"});
                meta["io.modelcontextprotocol/clientCapabilities"] =
                    capabilities.unwrap_or_else(|| json!({}));
                let name = params
                    .get("name")
                    .or_else(|| params.get("taskId"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if let Some(name) = name {
                    request = request.header("mcp-name", name);
                }
            }
        }
        if params["_meta"] == json!({}) {
            params.as_object_mut().expect("an object").remove("_meta");
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let response = request.json(&body).send().await.expect("send");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let text = response.text().await.expect("the body");
        Answer {
            status,
            content_type,
            text,
        }
    }

    /// `tools/call start_job` as a client that declared the Tasks extension: the task.
    async fn start_task(&self, lifecycle: Lifecycle) -> Value {
        let answer = self
            .rpc(
                &self.key,
                lifecycle,
                "tools/call",
                json!({"name": "service_start_job", "arguments": {"size": 3}}),
                Some(tasks_capabilities()),
                "application/json, text/event-stream",
            )
            .await
            .json();
        answer["result"].clone()
    }

    /// A task method from a client that declared the extension: the whole JSON-RPC answer.
    async fn task_method(
        &self,
        key: &str,
        lifecycle: Lifecycle,
        method: &str,
        task_id: &str,
    ) -> Value {
        let mut params = json!({"taskId": task_id});
        if method == "tasks/update" {
            params["inputResponses"] = json!({});
        }
        self.rpc(
            key,
            lifecycle,
            method,
            params,
            Some(tasks_capabilities()),
            "application/json, text/event-stream",
        )
        .await
        .json()
    }

    async fn set(&self, id: &str, status: &str, processed: i64, error: Option<&str>) {
        sqlx::query("update fake_jobs set status = $1, processed = $2, error = $3 where id = $4")
            .bind(status)
            .bind(processed)
            .bind(error)
            .bind(id)
            .execute(self.db.pool())
            .await
            .expect("move the fake job");
    }

    async fn status(&self, id: &str) -> String {
        sqlx::query("select status from fake_jobs where id = $1")
            .bind(id)
            .fetch_one(self.db.pool())
            .await
            .expect("the fake job")
            .get(0)
    }
}

// ----- the tests -----

#[tokio::test]
async fn the_server_advertises_the_tasks_extension() {
    let app = spawn().await;
    let initialize = app
        .rpc(
            &app.key,
            Lifecycle::Initialize,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
            None,
            "application/json, text/event-stream",
        )
        .await
        .json();
    assert_eq!(
        initialize["result"]["capabilities"]["extensions"],
        tasks_capabilities()["extensions"],
        "{initialize}"
    );
    let discover = app
        .rpc(
            &app.key,
            Lifecycle::PerRequest,
            "server/discover",
            json!({}),
            None,
            "application/json, text/event-stream",
        )
        .await
        .json();
    assert_eq!(
        discover["result"]["capabilities"]["extensions"],
        tasks_capabilities()["extensions"],
        "{discover}"
    );
}

#[tokio::test]
async fn a_tasks_client_gets_a_task_whose_id_is_the_objects_and_reads_it_to_its_result() {
    let app = spawn().await;
    for lifecycle in BOTH {
        let task = app.start_task(lifecycle).await;
        assert_eq!(task["resultType"], json!("task"), "{lifecycle:?}: {task}");
        assert_eq!(task["status"], json!("working"), "{task}");
        assert_eq!(task["pollIntervalMs"], json!(1000), "{task}");
        assert_eq!(task["ttlMs"], Value::Null, "{task}");
        assert_eq!(task["createdAt"], json!(AT), "{task}");
        let id = task["taskId"].as_str().expect("a task id").to_owned();
        assert!(id.starts_with("job_"), "the task is the job: {task}");
        assert_eq!(app.status(&id).await, "queued", "the call started the job");

        let got = app.task_method(&app.key, lifecycle, "tasks/get", &id).await;
        assert_eq!(got["result"]["status"], json!("working"), "{got}");
        assert_eq!(
            got["result"]["statusMessage"],
            json!("processed 0 of 3"),
            "{got}"
        );
        // No fake work waits for input: an update is acknowledged and changes nothing.
        let ack = app
            .task_method(&app.key, lifecycle, "tasks/update", &id)
            .await;
        assert!(ack["result"].is_object(), "an empty ack: {ack}");
        app.set(&id, "running", 2, None).await;
        let got = app.task_method(&app.key, lifecycle, "tasks/get", &id).await;
        assert_eq!(
            got["result"]["statusMessage"],
            json!("processed 2 of 3"),
            "{got}"
        );

        app.set(&id, "done", 3, None).await;
        let got = app.task_method(&app.key, lifecycle, "tasks/get", &id).await;
        let result = &got["result"];
        assert_eq!(result["taskId"], json!(id), "{got}");
        assert_eq!(result["status"], json!("completed"), "{got}");
        assert_eq!(result["result"]["isError"], json!(false), "{got}");
        let plain = app
            .rpc(
                &app.key,
                lifecycle,
                "tools/call",
                json!({"name": "service_get_job", "arguments": {"id": id}}),
                None,
                "application/json",
            )
            .await
            .json();
        assert_eq!(
            result["result"]["structuredContent"], plain["result"]["structuredContent"],
            "the result is what a plain call of the get tool gives: {got}"
        );
        assert_eq!(
            result["result"]["structuredContent"]["status"],
            json!("done")
        );
    }
}

#[tokio::test]
async fn failed_work_is_a_completed_task_flagged_is_error_and_cancelled_work_has_no_result() {
    let app = spawn().await;
    for lifecycle in BOTH {
        let failed = app.start_task(lifecycle).await["taskId"]
            .as_str()
            .expect("an id")
            .to_owned();
        app.set(&failed, "failed", 1, Some("The count broke."))
            .await;
        let got = app
            .task_method(&app.key, lifecycle, "tasks/get", &failed)
            .await;
        assert_eq!(got["result"]["status"], json!("completed"), "{got}");
        assert_eq!(got["result"]["result"]["isError"], json!(true), "{got}");
        assert_eq!(
            got["result"]["result"]["structuredContent"]["error"],
            json!("The count broke."),
            "{got}"
        );
        assert_eq!(
            got["result"]["statusMessage"],
            json!("The count broke. (job_failed)"),
            "{got}"
        );

        let cancelled = app.start_task(lifecycle).await["taskId"]
            .as_str()
            .expect("an id")
            .to_owned();
        app.set(&cancelled, "canceled", 0, None).await;
        let got = app
            .task_method(&app.key, lifecycle, "tasks/get", &cancelled)
            .await;
        assert_eq!(got["result"]["status"], json!("cancelled"), "{got}");
        assert!(got["result"].get("result").is_none(), "{got}");
    }
}

#[tokio::test]
async fn tasks_cancel_cancels_live_work_and_refuses_finished_work_with_invalid_params() {
    let app = spawn().await;
    for lifecycle in BOTH {
        let id = app.start_task(lifecycle).await["taskId"]
            .as_str()
            .expect("an id")
            .to_owned();
        let ack = app
            .task_method(&app.key, lifecycle, "tasks/cancel", &id)
            .await;
        assert!(ack["result"].is_object(), "an empty ack: {ack}");
        assert!(
            ack["result"]
                .as_object()
                .unwrap()
                .keys()
                .all(|key| key == "resultType"),
            "{ack}"
        );
        assert_eq!(app.status(&id).await, "canceled");
        let got = app.task_method(&app.key, lifecycle, "tasks/get", &id).await;
        assert_eq!(got["result"]["status"], json!("cancelled"), "{got}");

        let again = app
            .task_method(&app.key, lifecycle, "tasks/cancel", &id)
            .await;
        assert_eq!(again["error"]["code"], json!(-32602), "{again}");
        assert_eq!(
            again["error"]["data"]["code"],
            json!("invalid_state"),
            "{again}"
        );
        assert!(
            again["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("canceled"),
            "the sentence says the state: {again}"
        );
    }
}

#[tokio::test]
async fn another_workspaces_task_and_a_nonsense_id_are_invalid_params() {
    let app = spawn().await;
    for lifecycle in BOTH {
        let id = app.start_task(lifecycle).await["taskId"]
            .as_str()
            .expect("an id")
            .to_owned();
        for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
            let foreign = app
                .task_method(&app.other_key, lifecycle, method, &id)
                .await;
            assert_eq!(
                foreign["error"]["code"],
                json!(-32602),
                "{method}: {foreign}"
            );
            assert_eq!(
                foreign["error"]["data"]["code"],
                json!("not_found"),
                "{foreign}"
            );
            let nonsense = app
                .task_method(&app.key, lifecycle, method, "nonsense")
                .await;
            assert_eq!(
                nonsense["error"]["code"],
                json!(-32602),
                "{method}: {nonsense}"
            );
        }
        assert_eq!(
            app.status(&id).await,
            "queued",
            "the other workspace cancelled nothing"
        );
    }
}

#[tokio::test]
async fn a_client_without_the_extension_gets_the_object_and_may_not_use_task_methods() {
    let app = spawn().await;
    for lifecycle in BOTH {
        let plain = app
            .rpc(
                &app.key,
                lifecycle,
                "tools/call",
                json!({"name": "service_start_job", "arguments": {"size": 3}}),
                None,
                "application/json, text/event-stream",
            )
            .await
            .json();
        let result = &plain["result"];
        assert!(
            result
                .get("resultType")
                .is_none_or(|kind| kind == "complete"),
            "{plain}"
        );
        assert_eq!(
            result["structuredContent"]["status"],
            json!("queued"),
            "{plain}"
        );
        let id = result["structuredContent"]["id"].as_str().expect("an id");
        let refused = app
            .rpc(
                &app.key,
                lifecycle,
                "tasks/get",
                json!({"taskId": id}),
                None,
                "application/json, text/event-stream",
            )
            .await
            .json();
        assert_eq!(
            refused["error"]["code"],
            json!(-32021),
            "missing capability: {refused}"
        );
    }
}

#[tokio::test]
async fn a_progress_token_holds_the_call_open_with_progress_until_the_work_ends() {
    let app = spawn().await;
    for lifecycle in BOTH {
        let call = json!({
            "name": "service_start_job",
            "arguments": {"size": 3},
            "_meta": {"progressToken": "p-1"},
        });
        let mover = {
            let db = app.db.clone();
            tokio::spawn(async move {
                // The call has started the job by the time it is found; move it along slowly
                // enough that the held call sees each step.
                let id: String = loop {
                    let found = sqlx::query(
                        "select id from fake_jobs where status = 'queued' order by id desc",
                    )
                    .fetch_optional(db.pool())
                    .await
                    .expect("look for the job");
                    if let Some(row) = found {
                        break row.get(0);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                };
                for (status, processed) in [("running", 1), ("running", 2), ("done", 3)] {
                    tokio::time::sleep(Duration::from_millis(1200)).await;
                    sqlx::query("update fake_jobs set status = $1, processed = $2 where id = $3")
                        .bind(status)
                        .bind(processed)
                        .bind(&id)
                        .execute(db.pool())
                        .await
                        .expect("move the job");
                }
                id
            })
        };
        let answer = app
            .rpc(
                &app.key,
                lifecycle,
                "tools/call",
                call,
                None,
                "application/json, text/event-stream",
            )
            .await;
        let id = mover.await.expect("the mover");
        let events = answer.events();
        let (last, notifications) = events.split_last().expect("events");
        let progress: Vec<(f64, Option<f64>, String)> = notifications
            .iter()
            .map(|event| {
                assert_eq!(event["method"], json!("notifications/progress"), "{event}");
                let params = &event["params"];
                assert_eq!(params["progressToken"], json!("p-1"), "{event}");
                (
                    params["progress"].as_f64().expect("progress"),
                    params["total"].as_f64(),
                    params["message"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            progress,
            [
                (0.0, Some(3.0), "processed 0 of 3".to_owned()),
                (1.0, Some(3.0), "processed 1 of 3".to_owned()),
                (2.0, Some(3.0), "processed 2 of 3".to_owned()),
                (3.0, Some(3.0), "processed 3 of 3".to_owned()),
            ],
            "{lifecycle:?}: {}",
            answer.text
        );
        assert_eq!(last["id"], json!(1), "{last}");
        assert_eq!(
            last["result"]["structuredContent"]["id"],
            json!(id),
            "{last}"
        );
        assert_eq!(
            last["result"]["structuredContent"]["status"],
            json!("done"),
            "{last}"
        );
        assert_eq!(last["result"]["isError"], json!(false), "{last}");
    }
}

#[tokio::test]
async fn a_progress_token_without_an_event_stream_or_for_another_tool_is_answered_at_once() {
    let app = spawn().await;
    for lifecycle in BOTH {
        let call = json!({
            "name": "service_start_job",
            "arguments": {"size": 3},
            "_meta": {"progressToken": 7},
        });
        let answer = app
            .rpc(
                &app.key,
                lifecycle,
                "tools/call",
                call,
                None,
                "application/json",
            )
            .await
            .json();
        assert_eq!(
            answer["result"]["structuredContent"]["status"],
            json!("queued"),
            "{answer}"
        );
        let id = answer["result"]["structuredContent"]["id"]
            .as_str()
            .expect("an id");
        let read = json!({"name": "service_get_job", "arguments": {"id": id}, "_meta": {"progressToken": 8}});
        let answer = app
            .rpc(
                &app.key,
                lifecycle,
                "tools/call",
                read,
                None,
                "application/json, text/event-stream",
            )
            .await
            .json();
        assert_eq!(
            answer["result"]["structuredContent"]["id"],
            json!(id),
            "{answer}"
        );
    }
}

/// The fast path answers a long call from a client with or without the extension as rmcp's
/// transport does (`fast_path_answers_as_rmcp_does` in tests/api/mcp.rs holds the rest).
#[tokio::test]
async fn the_fast_path_answers_long_calls_as_rmcp_does() {
    let fast = spawn().await;
    let rmcp = spawn_with(|config| config.mcp_fast_path = false).await;
    for capabilities in [Some(tasks_capabilities()), None] {
        let mut answers = Vec::new();
        for app in [&fast, &rmcp] {
            let answer = app
                .rpc(
                    &app.key,
                    Lifecycle::Initialize,
                    "tools/call",
                    json!({"name": "service_start_job", "arguments": {"size": 3}}),
                    capabilities.clone(),
                    "application/json, text/event-stream",
                )
                .await;
            let mut body = answer.json();
            let result = &mut body["result"];
            let id = result["taskId"]
                .as_str()
                .or_else(|| result["structuredContent"]["id"].as_str())
                .expect("an id")
                .to_owned();
            let body = body.to_string().replace(&id, "job_X");
            answers.push((answer.status, answer.content_type, body));
        }
        assert_eq!(answers[0], answers[1], "{capabilities:?}");
    }
}

/// A held call does not hold up a graceful shutdown: it answers with the work as it stands.
#[tokio::test]
async fn a_held_call_answers_at_once_when_the_server_shuts_down() {
    let mut app = spawn().await;
    let stop = app.stop.take().expect("a running server");
    let call = json!({"name": "service_start_job", "arguments": {"size": 3}, "_meta": {"progressToken": 1}});
    let held = app.rpc(
        &app.key,
        Lifecycle::PerRequest,
        "tools/call",
        call,
        None,
        "application/json, text/event-stream",
    );
    let stopper = async move {
        tokio::time::sleep(Duration::from_millis(800)).await;
        stop.send(()).ok();
    };
    let started = std::time::Instant::now();
    let (answer, ()) = tokio::join!(held, stopper);
    let events = answer.events();
    let last = events.last().expect("the answer");
    assert_eq!(
        last["result"]["structuredContent"]["status"],
        json!("queued"),
        "{last}"
    );
    let stopped = app.stopped.take().expect("a running server");
    tokio::time::timeout(Duration::from_secs(10), stopped)
        .await
        .expect("the server stopped")
        .expect("serve ended");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
