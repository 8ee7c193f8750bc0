//! Agent runs as durable work: fifty concurrent starts with one `Idempotency-Key` across two
//! instances make one run and one reservation; a run killed with SIGKILL mid-way resumes after a
//! restart and is charged exactly what it processed, each prospect proposed once; a run canceled
//! mid-way stops at its next batch and keeps only what it processed; and a `writer` drafts with a
//! drafting model (a loopback fake of a chat-completions endpoint), falling back to the template.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Json;
use axum::routing::post;
use outreach_actions::drafting::DraftingModel;
use serde_json::{Value, json};
use sqlx::Row;
use tokio::net::TcpListener;

use crate::agent_runs::Setup;
use crate::helpers::{
    Served, TestDatabase, admin_ok, admin_workspace_with_key, spawn_app_with, start_serve_env,
};

fn id(value: &Value) -> String {
    value["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {value}"))
        .to_owned()
}

/// A loopback chat-completions endpoint: it waits `delay` per request, then answers a note
/// naming the prospect, or garbage when the prompt names "Garbage".
struct FakeModel {
    url: String,
    calls: Arc<AtomicUsize>,
}

impl FakeModel {
    async fn start(delay: Duration) -> Self {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = calls.clone();
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            post(move |Json(request): Json<Value>| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    let prompt = request.to_string();
                    if prompt.contains("Garbage") {
                        return Json(json!({"choices": []}));
                    }
                    let name = ["Ada", "Grace", "Lead"]
                        .into_iter()
                        .find(|name| prompt.contains(name))
                        .unwrap_or("there");
                    Json(json!({"choices": [{"message": {"role": "assistant",
                        "content": format!("\"Hello {name}, a note the model wrote for you.\"")}}]}))
                }
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, app).await.ok() });
        Self { url, calls }
    }

    fn settings(&self) -> DraftingModel {
        DraftingModel::from_settings(
            Some(&self.url),
            Some("sk-test"),
            Some("fake-1"),
            Some("5000"),
        )
        .expect("valid settings")
        .expect("a model")
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("LLM_BASE_URL".to_owned(), self.url.clone()),
            ("LLM_API_KEY".to_owned(), "sk-test".to_owned()),
            ("LLM_MODEL".to_owned(), "fake-1".to_owned()),
        ]
    }
}

#[tokio::test]
async fn fifty_concurrent_starts_with_one_key_across_two_instances_make_one_run() {
    let setup = Setup::new(4).await;
    let app = &setup.app;
    let agent = setup.prospector(json!({})).await;
    let second = app.second_instance().await;
    let before = setup.balance().await;
    let client = reqwest::Client::new();
    let mut calls = Vec::new();
    for n in 0..50 {
        let base = if n % 2 == 0 {
            app.base_url.clone()
        } else {
            second.base_url.clone()
        };
        let (client, key, agent) = (client.clone(), app.key.clone(), agent.clone());
        calls.push(tokio::spawn(async move {
            let started = Instant::now();
            loop {
                let response = client
                    .post(format!("{base}/api/v1/agents/{agent}/run"))
                    .bearer_auth(&key)
                    .header("idempotency-key", "start-finder-once")
                    .json(&json!({}))
                    .send()
                    .await
                    .expect("send");
                let status = response.status().as_u16();
                let replayed = response.headers().contains_key("idempotent-replayed");
                let body: Value = response.json().await.expect("JSON");
                if status == 409 && body["code"] == json!("idempotency_key_in_use") {
                    assert!(started.elapsed() < Duration::from_secs(60), "stuck: {body}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                return (status, replayed, body);
            }
        }));
    }
    let mut runs = HashSet::new();
    let mut first_answers = 0;
    for call in calls {
        let (status, replayed, body) = call.await.expect("the call");
        assert_eq!(status, 200, "{body}");
        runs.insert(id(&body));
        if !replayed {
            first_answers += 1;
        }
    }
    assert_eq!(runs.len(), 1, "one run, every answer naming it: {runs:?}");
    assert_eq!(first_answers, 1, "the rest replay the first answer");
    let count = |sql: &'static str| async move {
        let row = sqlx::query(sql)
            .fetch_one(app.db.pool())
            .await
            .expect("count");
        row.get::<i64, _>(0)
    };
    assert_eq!(count("select count(*) from agent_runs").await, 1);
    assert_eq!(
        count("select count(*) from credit_ledger where kind = 'spend' and action = 'run_agent'")
            .await,
        1,
        "one reservation"
    );
    assert!(setup.balance().await >= before - 5);

    // The same key with another body is a 422 on either instance, and starts nothing.
    for base in [&app.base_url, &second.base_url] {
        let response = client
            .post(format!("{base}/api/v1/agents/{agent}/run"))
            .bearer_auth(&app.key)
            .header("idempotency-key", "start-finder-once")
            .json(&json!({"max_prospects": 1}))
            .send()
            .await
            .expect("send");
        assert_eq!(response.status().as_u16(), 422);
        let body: Value = response.json().await.expect("JSON");
        assert_eq!(body["code"], json!("idempotency_key_reused"), "{body}");
    }
    assert_eq!(count("select count(*) from agent_runs").await, 1);
}

/// The real binary over its own database: a workspace, a write key, credits, a draft sequence
/// and `prospects` reachable prospects in a list; a writer agent over them.
struct RealServer {
    database: TestDatabase,
    server: Option<Served>,
    env: Vec<(String, String)>,
    key: String,
    workspace: String,
    db: outreach_runtime::Db,
    client: reqwest::Client,
}

impl RealServer {
    async fn start(env: Vec<(String, String)>) -> Self {
        let database = TestDatabase::create().await;
        let (workspace, key) = admin_workspace_with_key(&database, "Runs", "runs@crash.test").await;
        admin_ok(
            &database,
            &[
                "credits",
                "grant",
                "--workspace",
                &workspace,
                "--amount",
                "1000",
            ],
        )
        .await;
        let server = start_serve_env(&database, &[], &env).await;
        let db = outreach_runtime::Db::connect(database.url())
            .await
            .expect("connect");
        Self {
            database,
            server: Some(server),
            env,
            key,
            workspace,
            db,
            client: reqwest::Client::new(),
        }
    }

    fn base(&self) -> String {
        self.server.as_ref().expect("a server").base_url.clone()
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .client
            .request(method, format!("{}/api/v1{path}", self.base()))
            .bearer_auth(&self.key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        let body: Value = response.json().await.expect("JSON");
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> Value {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// A list of `prospects` reachable prospects, a draft sequence of one connection note, and
    /// a writer over them; returns the agent.
    async fn writer(&self, prospects: usize) -> String {
        let list = id(&self.post("/lists", json!({"name": "Writer's list"})).await);
        let mut ids = Vec::new();
        for n in 0..prospects {
            let prospect = self
                .post(
                    "/prospects",
                    json!({"first_name": format!("Lead{n}"), "company_name": "Acme",
                           "profile_url": format!("https://linkedin.com/in/writer-lead-{n}")}),
                )
                .await;
            ids.push(id(&prospect));
        }
        for chunk in ids.chunks(500) {
            self.post(
                &format!("/lists/{list}/prospects"),
                json!({"prospect_ids": chunk}),
            )
            .await;
        }
        let sequence = self
            .post(
                "/sequences",
                json!({"name": "Writer's sequence", "steps": [
                    {"type": "connection_request", "note": "Hi {{first_name}}, glad to connect."}]}),
            )
            .await;
        let agent = self
            .post(
                "/agents",
                json!({"name": "Writer", "kind": "writer", "list_id": list, "sequence_id": id(&sequence),
                       "max_prospects_per_run": prospects}),
            )
            .await;
        id(&agent)
    }

    async fn kill(&mut self) {
        self.server.take().expect("a server").kill().await;
    }

    async fn restart(&mut self) {
        self.server = Some(start_serve_env(&self.database, &[], &self.env).await);
    }

    async fn scalar(&self, sql: &str, bind: &str) -> i64 {
        sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .bind(bind)
            .fetch_one(self.db.pool())
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"))
            .get::<i64, _>(0)
    }
}

#[tokio::test]
async fn a_run_killed_mid_way_resumes_after_a_restart_and_is_charged_what_it_processed() {
    const PROSPECTS: i64 = 60;
    let model = FakeModel::start(Duration::from_millis(40)).await;
    let mut served = RealServer::start(model.env()).await;
    let agent = served.writer(PROSPECTS as usize).await;
    let run = id(&served
        .post(&format!("/agents/{agent}/run"), json!({}))
        .await);
    let mut kills = 0;
    let mut seed: u64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "the run never finished"
        );
        let state = served.get(&format!("/runs/{run}")).await;
        let processed = state["processed"].as_i64().expect("processed");
        if state["status"] != json!("queued") && state["status"] != json!("running") {
            break;
        }
        if kills < 3 && processed >= 10 * (kills + 1) {
            // Somewhere inside the next batch (ten drafts of 40 ms each).
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            tokio::time::sleep(Duration::from_millis((seed >> 33) % 400)).await;
            served.kill().await;
            kills += 1;
            served.restart().await;
            continue;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        kills, 3,
        "the run finished before it could be killed three times"
    );
    let state = served.get(&format!("/runs/{run}")).await;
    assert_eq!(state["status"], json!("awaiting_approval"), "{state}");
    assert_eq!(state["processed"], json!(PROSPECTS), "{state}");
    assert_eq!(state["total"], json!(PROSPECTS), "{state}");
    assert_eq!(
        state["credits_charged"],
        json!(PROSPECTS),
        "charges equal the prospects processed"
    );
    let workspace = served.workspace.clone();
    let balance = served
        .scalar(
            "select credits_balance from workspaces where id = $1",
            &workspace,
        )
        .await;
    assert_eq!(balance, 1000 - PROSPECTS, "the books: {state}");
    let ledger = served
        .scalar(
            "select cast(coalesce(sum(amount), 0) as bigint) from credit_ledger where workspace_id = $1",
            &workspace,
        )
        .await;
    assert_eq!(ledger, balance, "the ledger explains the balance");
    let open = served
        .scalar(
            "select count(*) from credit_ledger where workspace_id = $1 and held_until is not null",
            &workspace,
        )
        .await;
    assert_eq!(open, 0, "the run's hold is settled");
    let proposals = served
        .scalar("select count(*) from approvals where run_id = $1", &run)
        .await;
    let distinct = served
        .scalar(
            "select count(distinct prospect_id) from approvals where run_id = $1",
            &run,
        )
        .await;
    assert_eq!(
        (proposals, distinct),
        (PROSPECTS, PROSPECTS),
        "each prospect proposed once"
    );
    let enrollments = served
        .scalar(
            "select count(*) from enrollments where workspace_id = $1",
            &workspace,
        )
        .await;
    assert_eq!(enrollments, PROSPECTS);
    let llm = served
        .scalar(
            "select count(*) from approvals where run_id = $1 and drafted_by = 'llm'",
            &run,
        )
        .await;
    assert_eq!(llm, PROSPECTS, "every draft came from the model");
    assert!(model.calls.load(Ordering::SeqCst) >= PROSPECTS as usize);
}

#[tokio::test]
async fn a_running_run_canceled_mid_way_stops_at_its_next_batch_and_keeps_what_it_processed() {
    let model = FakeModel::start(Duration::from_millis(40)).await;
    let settings = model.settings();
    let app = spawn_app_with(|config| {
        config.extensions.insert(settings);
    })
    .await;
    app.grant_credits(500).await;
    let list = id(app
        .post_json("/lists", &app.key, json!({"name": "L"}))
        .await
        .expect(201));
    let mut ids = Vec::new();
    for n in 0..40 {
        let prospect = app
            .create_prospect(json!({"first_name": format!("Lead{n}"),
                                    "profile_url": format!("https://linkedin.com/in/cancel-lead-{n}")}))
            .await;
        ids.push(id(&prospect));
    }
    app.post_json(
        &format!("/lists/{list}/prospects"),
        &app.key,
        json!({"prospect_ids": ids}),
    )
    .await
    .expect(200);
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": "S", "steps": [{"type": "connection_request", "note": "Hi {{first_name}}."}]}),
        )
        .await;
    let sequence = id(sequence.expect(201));
    let agent = app
        .post_json(
            "/agents",
            &app.key,
            json!({"name": "Writer", "kind": "writer", "list_id": list, "sequence_id": sequence}),
        )
        .await;
    let agent = id(agent.expect(201));
    let run = app
        .post_json(&format!("/agents/{agent}/run"), &app.key, json!({}))
        .await;
    let run = id(run.expect(200));
    let started = Instant::now();
    loop {
        let state = app.get(&format!("/runs/{run}"), &app.key).await;
        if state.expect(200)["processed"].as_i64().unwrap_or(0) >= 10 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let canceled = app
        .post_json(&format!("/runs/{run}/cancel"), &app.key, json!({}))
        .await;
    let canceled = canceled.expect(200).clone();
    assert_eq!(canceled["status"], json!("canceled"));
    // Settled in the cancel itself: a batch in flight finished first, and none comes after.
    assert!(canceled["finished_at"].is_string(), "{canceled}");
    let charged = canceled["credits_charged"].clone();
    assert_eq!(charged, canceled["processed"], "{canceled}");
    let balance: i64 = sqlx::query("select credits_balance from workspaces where id = $1")
        .bind(&app.workspace_id)
        .fetch_one(app.db.pool())
        .await
        .expect("balance")
        .get(0);
    assert_eq!(
        balance,
        500 - charged.as_i64().expect("charged"),
        "the rest of the hold is released with the cancel"
    );
    let state = loop {
        let state = app
            .get(&format!("/runs/{run}"), &app.key)
            .await
            .expect(200)
            .clone();
        if state["finished_at"].is_string() {
            break state;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never settled: {state}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let processed = state["processed"].as_i64().expect("processed");
    assert!((10..40).contains(&processed), "{state}");
    assert_eq!(
        state["processed"], canceled["processed"],
        "nothing ran after the cancel"
    );
    assert_eq!(state["credits_charged"], json!(processed), "{state}");
    assert_eq!(state["status"], json!("canceled"), "{state}");
    assert!(
        state["log"].to_string().contains("Stopped after"),
        "{state}"
    );
    let row = sqlx::query("select credits_balance from workspaces where id = $1")
        .bind(&app.workspace_id)
        .fetch_one(app.db.pool())
        .await
        .expect("balance");
    assert_eq!(row.get::<i64, _>(0), 500 - processed);
    let proposals = app
        .get(&format!("/approvals?run_id={run}&limit=200"), &app.key)
        .await;
    assert_eq!(
        proposals.expect(200)["total"],
        json!(processed),
        "its proposals so far stay"
    );
}

#[tokio::test]
async fn a_writer_drafts_with_the_model_and_falls_back_to_the_template_saying_why() {
    let model = FakeModel::start(Duration::from_millis(1)).await;
    let settings = model.settings();
    let app = spawn_app_with(|config| {
        config.extensions.insert(settings);
    })
    .await;
    app.grant_credits(100).await;
    let list = id(app
        .post_json("/lists", &app.key, json!({"name": "L"}))
        .await
        .expect(201));
    let mut ids = Vec::new();
    for name in ["Ada", "Garbage"] {
        let prospect = app
            .create_prospect(json!({"first_name": name,
                                    "profile_url": format!("https://linkedin.com/in/writer-{name}")}))
            .await;
        ids.push(id(&prospect));
    }
    app.post_json(
        &format!("/lists/{list}/prospects"),
        &app.key,
        json!({"prospect_ids": ids}),
    )
    .await
    .expect(200);
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": "S", "steps": [
                {"type": "connection_request", "note": "Hi {{first_name}}."},
                {"type": "message", "delay_hours": 24, "text": "Thanks, {{first_name}}!"}]}),
        )
        .await;
    let sequence = id(sequence.expect(201));
    let agent = app
        .post_json(
            "/agents",
            &app.key,
            json!({"name": "Writer", "kind": "writer", "list_id": list, "sequence_id": sequence}),
        )
        .await;
    let agent = id(agent.expect(201));
    let run = app
        .post_json(
            &format!("/agents/{agent}/run"),
            &app.key,
            json!({"prospect_ids": ids}),
        )
        .await;
    let run = id(run.expect(200));
    let started = Instant::now();
    while app.get(&format!("/runs/{run}"), &app.key).await.expect(200)["status"]
        != json!("awaiting_approval")
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run did not finish"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let items = app
        .get(&format!("/approvals?run_id={run}"), &app.key)
        .await
        .expect(200)["items"]
        .as_array()
        .expect("items")
        .clone();
    assert_eq!(items.len(), 2);
    for item in &items {
        let name = item["prospect"]["full_name"].as_str().expect("a name");
        if name == "Ada" {
            assert_eq!(item["drafted_by"], json!("llm"), "{item}");
            assert_eq!(
                item["texts"][0]["text"],
                json!("Hello Ada, a note the model wrote for you."),
                "the quotes the model added are removed: {item}"
            );
            assert_eq!(item["texts"][1]["drafted_by"], json!("llm"), "{item}");
        } else {
            assert_eq!(item["drafted_by"], json!("template"), "{item}");
            assert_eq!(item["texts"][0]["text"], json!("Hi Garbage."), "{item}");
            assert_eq!(item["texts"][0]["drafted_by"], json!("template"), "{item}");
            let reason = item["texts"][0]["fallback_reason"]
                .as_str()
                .unwrap_or_else(|| panic!("no reason: {item}"));
            assert!(reason.contains("template was used"), "{reason}");
        }
    }
    let log = app.get(&format!("/runs/{run}"), &app.key).await.expect(200)["log"].to_string();
    assert!(log.contains("2 by the drafting model"), "{log}");
}
