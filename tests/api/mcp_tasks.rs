//! Agent runs on the MCP face: `service_run_agent` as a task (SEP-2663) for clients that declare
//! the Tasks extension, followed with `tasks/get` and stopped with `tasks/cancel`; as the run
//! itself for clients that do not; and held open with progress notifications for clients that
//! send a progress token. Raw JSON-RPC over HTTP against the real server, on the per-request
//! lifecycle of 2026-07-28 (what the official SDKs speak once `server/discover` succeeds) and
//! on the `initialize` one. The generic machinery is tested with fake actions in
//! `runtime/tests/mcp_tasks.rs`; this file holds it to the real runs.

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_on_test_clock_with};
use crate::outreach::settle;

/// The two ways a client frames its requests.
#[derive(Debug, Clone, Copy)]
pub enum Lifecycle {
    /// After an `initialize` handshake: the version in a header, capabilities in `_meta`.
    Initialize,
    /// 2026-07-28: version, client and capabilities in every request's `_meta`, and the
    /// SEP-2243 routing headers.
    PerRequest,
}

const BOTH: [Lifecycle; 2] = [Lifecycle::Initialize, Lifecycle::PerRequest];

fn tasks() -> Option<Value> {
    Some(json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}))
}

/// What came back: the content type and the body's text.
pub struct Answer {
    content_type: String,
    text: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        assert!(
            self.content_type.starts_with("application/json"),
            "{}: {}",
            self.content_type,
            self.text
        );
        serde_json::from_str(&self.text).expect("a JSON body")
    }

    /// The JSON-RPC messages of an event stream, in order.
    fn events(&self) -> Vec<Value> {
        assert!(
            self.content_type.starts_with("text/event-stream"),
            "{}: {}",
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

pub async fn rpc(
    app: &TestApp,
    key: &str,
    lifecycle: Lifecycle,
    method: &str,
    mut params: Value,
    capabilities: Option<Value>,
) -> Answer {
    let mut request = app
        .client
        .post(app.url("/api/mcp"))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    let name = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut meta = params
        .as_object_mut()
        .expect("params are an object")
        .remove("_meta")
        .unwrap_or_else(|| json!({}));
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
            if let Some(name) = name {
                request = request.header("mcp-name", name);
            }
            meta["io.modelcontextprotocol/protocolVersion"] = json!("2026-07-28");
            meta["io.modelcontextprotocol/clientInfo"] = json!({"name": "e2e", "version": "1"});
            meta["io.modelcontextprotocol/clientCapabilities"] =
                capabilities.unwrap_or_else(|| json!({}));
        }
    }
    if meta != json!({}) {
        params["_meta"] = meta;
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let response = request.json(&body).send().await.expect("send");
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    Answer {
        content_type,
        text: response.text().await.expect("the body"),
    }
}

/// A task method from a client that declared the extension: the JSON-RPC answer.
async fn task_method(
    app: &TestApp,
    key: &str,
    lifecycle: Lifecycle,
    method: &str,
    task_id: &str,
) -> Value {
    rpc(
        app,
        key,
        lifecycle,
        method,
        json!({"taskId": task_id}),
        tasks(),
    )
    .await
    .json()
}

/// A prospector agent of its own sequence, with `prospects` new candidates that match its
/// targeting (a prospect proposed once is not a candidate again), and credits to run it.
async fn agent(app: &TestApp, tag: &str, prospects: usize) -> String {
    app.grant_credits(1000).await;
    let mut made = Vec::new();
    for (path, body) in [
        (
            "/targetings",
            json!({"name": format!("ICP {tag}"), "criteria": {"titles": {"include": [{"value": "engineer", "points": 60}]}}}),
        ),
        ("/lists", json!({"name": format!("Agent list {tag}")})),
        (
            "/sequences",
            json!({"name": format!("Sequence {tag}"), "steps": crate::sequences::steps(), "sender_ids": []}),
        ),
    ] {
        let created = app.post_json(path, &app.key, body).await;
        made.push(
            created.expect(201)["id"]
                .as_str()
                .expect("an id")
                .to_owned(),
        );
    }
    let [targeting, list, sequence] = <[String; 3]>::try_from(made).expect("three inputs");
    for index in 0..prospects {
        app.create_prospect(json!({
            "first_name": format!("Ada{index}"),
            "company_name": "Engines",
            "title": "Engineer",
            "profile_url": format!("https://www.linkedin.com/in/mcp-task-{tag}-{index}/"),
        }))
        .await;
    }
    let created = app
        .post_json(
            "/agents",
            &app.key,
            json!({"name": format!("Finder {tag}"), "kind": "prospector", "targeting_id": targeting,
                   "list_id": list, "sequence_id": sequence}),
        )
        .await
        .expect(201)
        .clone();
    created["id"].as_str().expect("an agent id").to_owned()
}

fn run_call(agent: &str) -> Value {
    json!({"name": "service_run_agent", "arguments": {"id": agent}})
}

async fn run_as_task(app: &TestApp, lifecycle: Lifecycle, agent: &str) -> Value {
    rpc(
        app,
        &app.key,
        lifecycle,
        "tools/call",
        run_call(agent),
        tasks(),
    )
    .await
    .json()["result"]
        .clone()
}

async fn rest_run(app: &TestApp, id: &str) -> Value {
    app.get(&format!("/runs/{id}"), &app.key)
        .await
        .expect(200)
        .clone()
}

#[tokio::test]
async fn a_tasks_client_gets_the_run_as_a_task_and_its_result_once_it_has_run() {
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    for lifecycle in BOTH {
        let agent = agent(&app, &format!("{lifecycle:?}"), 12).await;
        let task = run_as_task(&app, lifecycle, &agent).await;
        assert_eq!(task["resultType"], json!("task"), "{lifecycle:?}: {task}");
        assert_eq!(task["status"], json!("working"), "{task}");
        assert_eq!(task["pollIntervalMs"], json!(1000), "{task}");
        let id = task["taskId"].as_str().expect("a task id").to_owned();
        let run = rest_run(&app, &id).await;
        assert_eq!(run["status"], json!("queued"), "the task is the run: {run}");
        assert_eq!(task["createdAt"], run["created_at"], "{task}");

        let got = task_method(&app, &app.key, lifecycle, "tasks/get", &id).await;
        assert_eq!(got["result"]["status"], json!("working"), "{got}");
        assert_eq!(
            got["result"]["statusMessage"],
            json!("processed 0 of 12"),
            "{got}"
        );

        settle(&app).await;
        let got = task_method(&app, &app.key, lifecycle, "tasks/get", &id).await;
        let result = &got["result"];
        assert_eq!(result["status"], json!("completed"), "{got}");
        assert_eq!(result["result"]["isError"], json!(false), "{got}");
        let run = rest_run(&app, &id).await;
        assert_eq!(run["status"], json!("awaiting_approval"), "{run}");
        assert_eq!(
            result["result"]["structuredContent"], run,
            "the result is the run, as get_run gives it"
        );
        assert_eq!(
            result["statusMessage"],
            json!("processed 12 of 12; 12 proposals wait for a person in the approval queue"),
            "{got}"
        );
    }
}

#[tokio::test]
async fn tasks_cancel_cancels_a_live_run_and_refuses_an_ended_one() {
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    for lifecycle in BOTH {
        let agent = agent(&app, &format!("{lifecycle:?}"), 3).await;
        let id = run_as_task(&app, lifecycle, &agent).await["taskId"]
            .as_str()
            .expect("a task id")
            .to_owned();
        let ack = task_method(&app, &app.key, lifecycle, "tasks/cancel", &id).await;
        let ack = ack["result"].as_object().expect("an ack").clone();
        assert!(ack.keys().all(|key| key == "resultType"), "empty: {ack:?}");
        assert_eq!(rest_run(&app, &id).await["status"], json!("canceled"));
        let got = task_method(&app, &app.key, lifecycle, "tasks/get", &id).await;
        assert_eq!(got["result"]["status"], json!("cancelled"), "{got}");
        assert!(got["result"].get("result").is_none(), "{got}");

        let again = task_method(&app, &app.key, lifecycle, "tasks/cancel", &id).await;
        assert_eq!(again["error"]["code"], json!(-32602), "{again}");
        assert_eq!(
            again["error"]["data"]["code"],
            json!("invalid_state"),
            "{again}"
        );
        settle(&app).await;
    }
}

#[tokio::test]
async fn another_workspaces_run_and_a_nonsense_id_are_unknown_tasks() {
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    let (_, other) = app.other_workspace("Other", "other@example.com").await;
    for lifecycle in BOTH {
        let agent = agent(&app, &format!("{lifecycle:?}"), 3).await;
        let id = run_as_task(&app, lifecycle, &agent).await["taskId"]
            .as_str()
            .expect("a task id")
            .to_owned();
        for method in ["tasks/get", "tasks/cancel"] {
            let foreign = task_method(&app, &other, lifecycle, method, &id).await;
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
            for nonsense in ["nonsense", "run_00000000000NoSuchOne"] {
                let unknown = task_method(&app, &app.key, lifecycle, method, nonsense).await;
                assert_eq!(
                    unknown["error"]["code"],
                    json!(-32602),
                    "{method}: {unknown}"
                );
            }
        }
        assert_eq!(
            rest_run(&app, &id).await["status"],
            json!("queued"),
            "the other workspace changed nothing"
        );
        settle(&app).await;
    }
}

#[tokio::test]
async fn a_client_without_the_extension_gets_the_run_and_an_estimate_is_never_a_task() {
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    for lifecycle in BOTH {
        let agent = agent(&app, &format!("{lifecycle:?}"), 3).await;
        let plain = rpc(
            &app,
            &app.key,
            lifecycle,
            "tools/call",
            run_call(&agent),
            None,
        )
        .await
        .json();
        let run = &plain["result"]["structuredContent"];
        assert_eq!(run["status"], json!("queued"), "{plain}");
        assert!(plain["result"]["resultType"] != json!("task"), "{plain}");
        let id = run["id"].as_str().expect("a run id").to_owned();
        let polled = app
            .mcp_call_result(&app.key, "service_get_run", json!({"id": id}))
            .await;
        assert_eq!(polled["structuredContent"]["id"], json!(id), "{polled}");
        settle(&app).await;

        let estimate = rpc(
            &app,
            &app.key,
            lifecycle,
            "tools/call",
            json!({"name": "service_run_agent", "arguments": {"id": agent, "estimate_only": true}}),
            tasks(),
        )
        .await
        .json();
        assert_eq!(
            estimate["result"]["structuredContent"]["estimate"],
            json!(true),
            "{estimate}"
        );
    }
}

#[tokio::test]
async fn a_progress_token_streams_progress_and_ends_with_the_run() {
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    for lifecycle in BOTH {
        let agent = agent(&app, &format!("{lifecycle:?}"), 12).await;
        let mut call = run_call(&agent);
        call["_meta"] = json!({"progressToken": "run-progress"});
        let held = rpc(&app, &app.key, lifecycle, "tools/call", call, None);
        let runner = async {
            // The held call reads the run every half second; let it see the run queued first.
            tokio::time::sleep(Duration::from_millis(1200)).await;
            settle(&app).await;
        };
        let (answer, ()) = tokio::join!(held, runner);
        let events = answer.events();
        let (last, notifications) = events.split_last().expect("events");
        let mut progress = Vec::new();
        for event in notifications {
            assert_eq!(event["method"], json!("notifications/progress"), "{event}");
            assert_eq!(event["params"]["progressToken"], json!("run-progress"));
            assert_eq!(event["params"]["total"], json!(12.0), "{event}");
            progress.push(event["params"]["progress"].as_f64().expect("progress"));
        }
        assert_eq!(progress.first(), Some(&0.0), "{}", answer.text);
        assert_eq!(progress.last(), Some(&12.0), "{}", answer.text);
        assert!(
            progress.windows(2).all(|pair| pair[0] < pair[1]),
            "progress only increases: {progress:?}"
        );
        let run = &last["result"]["structuredContent"];
        assert_eq!(last["id"], json!(1), "{last}");
        assert_eq!(run["status"], json!("awaiting_approval"), "{last}");
        assert_eq!(run["processed"], json!(12), "{last}");
    }
}

#[tokio::test]
async fn with_a_worker_the_task_completes_on_its_own() {
    let app = spawn_app().await;
    let agent = agent(&app, "worker", 3).await;
    let task = run_as_task(&app, Lifecycle::PerRequest, &agent).await;
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    let mut status = Value::Null;
    for _ in 0..100 {
        let got = task_method(&app, &app.key, Lifecycle::PerRequest, "tasks/get", &id).await;
        status = got["result"]["status"].clone();
        if status != json!("working") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(status, json!("completed"));
}

#[tokio::test]
async fn a_failed_run_is_a_completed_task_whose_result_is_flagged_is_error() {
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    let agent = agent(&app, "failed", 3).await;
    let id = run_as_task(&app, Lifecycle::PerRequest, &agent).await["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    // As the job leaves a run it cannot get past (an input deleted meanwhile, say).
    sqlx::query(
        "update agent_runs set status = 'failed', error_code = 'not_found', \
         error_message = 'The targeting is gone.' where id = $1",
    )
    .bind(&id)
    .execute(app.db.pool())
    .await
    .expect("fail the run");
    let got = task_method(&app, &app.key, Lifecycle::PerRequest, "tasks/get", &id).await;
    let result = &got["result"];
    assert_eq!(result["status"], json!("completed"), "{got}");
    assert_eq!(
        result["statusMessage"],
        json!("The targeting is gone. (not_found)"),
        "{got}"
    );
    assert_eq!(result["result"]["isError"], json!(true), "{got}");
    assert_eq!(
        result["result"]["structuredContent"],
        rest_run(&app, &id).await,
        "the result is still the run: {got}"
    );
}
