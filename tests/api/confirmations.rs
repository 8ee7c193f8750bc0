//! Confirmations over MCP elicitation (2026-07-28's multi round-trip requests): a call that
//! reaches people, or a priced one of 100 credits or more, first answers `input_required` with the
//! exact effect; sent again with the person's answer it runs on an accept and does nothing on a
//! decline. Clients that cannot ask, older revisions, unattended keys and previews are not asked.
//! Raw JSON-RPC against the real server, as `mcp_tasks.rs` speaks it.

use outreach_runtime::admin;
use serde_json::{Value, json};

use crate::approvals::queued;
use crate::helpers::{TestApp, spawn_app};
use crate::mcp_tasks::{Lifecycle, rpc};
use crate::sequences::send_key;

fn asks() -> Option<Value> {
    Some(json!({"elicitation": {"form": {}}}))
}

async fn call(
    app: &TestApp,
    key: &str,
    lifecycle: Lifecycle,
    params: Value,
    capabilities: Option<Value>,
) -> Value {
    let answer = rpc(app, key, lifecycle, "tools/call", params, capabilities).await;
    answer.json()
}

async fn pending(app: &TestApp) -> u64 {
    app.get("/approvals?status=pending", &app.key)
        .await
        .expect(200)["total"]
        .as_u64()
        .expect("a total")
}

/// Sends `params` and answers the question's `requestState`, checking it is one.
async fn asked(app: &TestApp, key: &str, params: &Value) -> (String, Value) {
    let answer = call(app, key, Lifecycle::PerRequest, params.clone(), asks()).await;
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let state = result["requestState"]
        .as_str()
        .expect("a request state")
        .to_owned();
    (state, result["inputRequests"]["confirm"].clone())
}

/// `params` sent again with an answer to the question `state` named.
fn answered(params: &Value, state: &str, answer: &Value) -> Value {
    let mut again = params.clone();
    again["inputResponses"] = json!({"confirm": answer});
    again["requestState"] = json!(state);
    again
}

fn accept() -> Value {
    json!({"action": "accept", "content": {"confirm": true}})
}

#[tokio::test]
async fn approving_asks_first_and_a_decline_does_nothing() {
    let app = spawn_app().await;
    outreach_runtime::confirmations::validate_registered(&app.registry)
        .expect("every confirmation names actions that exist");
    let send = send_key(&app).await;
    let (sequence, _) = queued(&app, 2).await;
    let arguments = json!({"sequence_id": sequence, "idempotency_key": "approve-1"});
    let params = json!({"name": "service_approve_outreach", "arguments": arguments});

    let (_, question) = asked(&app, &send, &params).await;
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["mode"], "form");
    let message = question["params"]["message"].as_str().expect("a message");
    assert!(
        message.starts_with(
            "This approves 2 people for outreach from 2 sender accounts; the first can go out at "
        ),
        "{message}"
    );
    assert!(message.ends_with(" Go ahead?"), "{message}");
    assert_eq!(
        question["params"]["requestedSchema"]["properties"]["confirm"]["type"],
        "boolean"
    );
    assert_eq!(
        question["params"]["requestedSchema"]["required"],
        json!(["confirm"])
    );
    assert_eq!(pending(&app).await, 2, "asking changed nothing");

    for answer in [
        json!({"action": "decline"}),
        json!({"action": "cancel"}),
        json!({"action": "accept", "content": {"confirm": false}}),
    ] {
        let (state, _) = asked(&app, &send, &params).await;
        let declined = call(
            &app,
            &send,
            Lifecycle::PerRequest,
            answered(&params, &state, &answer),
            asks(),
        )
        .await;
        assert_eq!(declined["result"]["isError"], true, "{answer}: {declined}");
        let text = declined["result"]["content"][0]["text"]
            .as_str()
            .expect("text");
        let body: Value = serde_json::from_str(text).expect("an error body");
        assert_eq!(body["code"], "declined", "{body}");
        assert_eq!(
            body["error"],
            "The call was not confirmed, so `service_approve_outreach` did nothing."
        );
        assert_eq!(pending(&app).await, 2, "{answer} changed something");
        // An answer serves once: sent again, the question comes again.
        let (_, again) = asked(&app, &send, &answered(&params, &state, &accept())).await;
        assert_eq!(again["method"], "elicitation/create");
    }

    // An accept given for other arguments is no answer: the question comes again, and the
    // question it answered still waits for its own call.
    let (state, _) = asked(&app, &send, &params).await;
    let other = json!({"name": "service_approve_outreach",
        "arguments": {"sequence_id": sequence, "dry_run": false, "idempotency_key": "approve-1"}});
    asked(&app, &send, &answered(&other, &state, &accept())).await;
    // Nor is a made-up state.
    asked(&app, &send, &answered(&params, "cnf_madeup", &accept())).await;
    assert_eq!(pending(&app).await, 2);

    let done = call(
        &app,
        &send,
        Lifecycle::PerRequest,
        answered(&params, &state, &accept()),
        asks(),
    )
    .await;
    assert_eq!(
        done["result"]["structuredContent"]["approved"],
        json!(2),
        "{done}"
    );
    assert_eq!(pending(&app).await, 0);
    // The same call sent again with its key replays the first answer, without asking; the key
    // sent with other arguments is refused, without asking either.
    let replayed = call(&app, &send, Lifecycle::PerRequest, params, asks()).await;
    assert_eq!(
        replayed["result"]["structuredContent"]["replayed"], true,
        "{replayed}"
    );
    let reused = call(&app, &send, Lifecycle::PerRequest, other, asks()).await;
    let text = reused["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a tool error: {reused}"));
    assert!(text.contains("idempotency_key_reused"), "{text}");
}

/// What would not run anyway is not asked about: beyond the credential's scope the call answers
/// `insufficient_scope` at once.
#[tokio::test]
async fn a_call_beyond_the_credentials_scope_is_not_asked_about() {
    let app = spawn_app().await;
    let read = app.read_key().await;
    let (sequence, _) = queued(&app, 1).await;
    let params =
        json!({"name": "service_approve_outreach", "arguments": {"sequence_id": sequence}});
    let refused = call(&app, &read, Lifecycle::PerRequest, params, asks()).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"]
        .as_str()
        .expect("text");
    assert!(text.contains("insufficient_scope"), "{text}");
    assert_eq!(pending(&app).await, 1);
}

#[tokio::test]
async fn clients_that_cannot_ask_older_revisions_unattended_keys_and_previews_are_not_asked() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let (sequence, _) = queued(&app, 4).await;
    let approve =
        |ids: Value| json!({"name": "service_approve_outreach", "arguments": {"ids": ids}});
    let approvals: Vec<String> = app
        .get("/approvals?status=pending", &app.key)
        .await
        .expect(200)["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| item["id"].as_str().expect("an id").to_owned())
        .collect();

    // A preview is never asked about.
    let preview = call(
        &app,
        &send,
        Lifecycle::PerRequest,
        json!({"name": "service_approve_outreach", "arguments": {"sequence_id": sequence, "dry_run": true}}),
        asks(),
    )
    .await;
    assert_eq!(
        preview["result"]["structuredContent"]["approved"],
        json!(4),
        "{preview}"
    );

    // No elicitation declared: the call runs.
    let plain = call(
        &app,
        &send,
        Lifecycle::PerRequest,
        approve(json!([approvals[0]])),
        None,
    )
    .await;
    assert_eq!(
        plain["result"]["structuredContent"]["approved"],
        json!(1),
        "{plain}"
    );
    // The `initialize` lifecycle has no round trip a stateless server can hold: the call runs.
    let older = call(
        &app,
        &send,
        Lifecycle::Initialize,
        approve(json!([approvals[1]])),
        asks(),
    )
    .await;
    assert_eq!(
        older["result"]["structuredContent"]["approved"],
        json!(1),
        "{older}"
    );
    // A key made for an unattended agent is never asked.
    let unattended = send_key(&app).await;
    let id: String =
        sqlx::query_scalar("select id from api_keys order by created_at desc, id desc limit 1")
            .fetch_one(app.db.pool())
            .await
            .expect("the newest key");
    admin::set_unattended(&app.db, &id, true)
        .await
        .expect("mark the key");
    let agent = call(
        &app,
        &unattended,
        Lifecycle::PerRequest,
        approve(json!([approvals[2]])),
        asks(),
    )
    .await;
    assert_eq!(
        agent["result"]["structuredContent"]["approved"],
        json!(1),
        "{agent}"
    );
    assert_eq!(pending(&app).await, 1);
    // Turned back into a person's key, it is asked again from its next call.
    admin::set_unattended(&app.db, &id, false)
        .await
        .expect("unmark the key");
    let (_, question) = asked(&app, &unattended, &approve(json!([approvals[3]]))).await;
    assert!(question["params"]["message"].is_string(), "{question}");
    assert_eq!(pending(&app).await, 1);
    // Nothing to approve reaches nobody: nothing to ask, and the call answers for itself.
    let nothing = call(
        &app,
        &send,
        Lifecycle::PerRequest,
        approve(json!([approvals[0]])),
        asks(),
    )
    .await;
    assert_eq!(nothing["result"]["isError"], true, "{nothing}");
}

#[tokio::test]
async fn a_priced_call_of_100_credits_or_more_asks_with_its_price() {
    let app = spawn_app().await;
    app.grant_credits(1_000).await;
    let rows = |count: usize| -> Value {
        (0..count)
            .map(|index| json!({"first_name": format!("Row{index}"), "email": format!("row{index}@example.com")}))
            .collect()
    };
    let import = |count: usize| json!({"name": "service_import_prospects", "arguments": {"rows": rows(count)}});
    let balance = app.get("/workspace", &app.key).await.expect(200)["workspace"]["credits_balance"]
        .as_i64()
        .expect("a balance");

    let small = call(&app, &app.key, Lifecycle::PerRequest, import(5), asks()).await;
    assert_eq!(
        small["result"]["structuredContent"]["created"],
        json!(5),
        "{small}"
    );

    // The first five rows are the prospects just made: free duplicates, not in the price.
    let large = call(&app, &app.key, Lifecycle::PerRequest, import(120), asks()).await;
    assert_eq!(large["result"]["resultType"], "input_required", "{large}");
    let message = large["result"]["inputRequests"]["confirm"]["params"]["message"]
        .as_str()
        .expect("a message");
    let expected = format!(
        "This costs 115 credits of your {}. Go ahead?",
        outreach_runtime::confirmations::thousands(balance - 5)
    );
    assert_eq!(message, expected);
    let prospects = app.get("/prospects", &app.key).await.expect(200)["total"].clone();
    assert_eq!(prospects, json!(5), "asking imported nothing");
    // More than the balance pays is refused at once, with the call's own error: nothing to ask.
    let unpayable = call(&app, &app.key, Lifecycle::PerRequest, import(1_200), asks()).await;
    let text = unpayable["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a tool error: {unpayable}"));
    assert!(text.contains("insufficient_credits"), "{text}");
}

#[tokio::test]
async fn activating_names_the_sequence_and_who_it_reaches_before_it_starts() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let (sequence, _) = queued(&app, 3).await;
    app.post_json(
        "/approvals/approve",
        &send,
        json!({"sequence_id": sequence}),
    )
    .await
    .expect(200);
    let params = json!({"name": "service_activate_sequence", "arguments": {"id": sequence}});
    let first = call(&app, &send, Lifecycle::PerRequest, params.clone(), asks()).await;
    let message = first["result"]["inputRequests"]["confirm"]["params"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no question: {first}"));
    assert!(
        message.starts_with("This starts `")
            && message.ends_with(
                "from 2 sender accounts: 3 people approved begin to receive real invitations \
                 and messages. Go ahead?"
            ),
        "{message}"
    );
    let status = |body: Value| body["status"].clone();
    let draft = app
        .get(&format!("/sequences/{sequence}"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(status(draft), "draft");
    let mut accepted = params;
    accepted["inputResponses"] =
        json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    accepted["requestState"] = first["result"]["requestState"].clone();
    let done = call(&app, &send, Lifecycle::PerRequest, accepted, asks()).await;
    assert_eq!(
        done["result"]["structuredContent"]["status"], "active",
        "{done}"
    );
}

/// An autonomous agent's run asks its `send` caller, whose run approves what it proposes; a
/// `write` caller's run only proposes, so it is not asked.
#[tokio::test]
async fn an_autonomous_run_asks_only_a_caller_whose_run_reaches_people() {
    let setup = crate::agent_runs::Setup::new(2).await;
    let agent = setup.prospector(json!({"mode": "autonomous"})).await;
    let params = json!({"name": "service_run_agent", "arguments": {"id": agent}});

    let (_, question) = asked(&setup.app, &setup.send, &params).await;
    let message = question["params"]["message"].as_str().expect("a message");
    assert!(
        message.contains("an autonomous agent") && message.contains("reaches people"),
        "{message}"
    );

    let unasked = call(
        &setup.app,
        &setup.app.key,
        Lifecycle::PerRequest,
        params,
        asks(),
    )
    .await;
    assert_ne!(
        unasked["result"]["resultType"], "input_required",
        "{unasked}"
    );
    assert_eq!(unasked["result"]["isError"], false, "{unasked}");
    assert_eq!(
        unasked["result"]["structuredContent"]["mode"], "review",
        "a write caller's autonomous run only proposes: {unasked}"
    );
    assert!(
        unasked["result"]["structuredContent"]["id"]
            .as_str()
            .is_some_and(|run| run.starts_with("run_")),
        "the write caller's run started: {unasked}"
    );
}
