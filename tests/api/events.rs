//! Events: written with the change that causes them, listed newest first, filtered, one by one,
//! never for a change that did not happen, and kept 30 days.

use outreach_runtime::server::build_state;
use outreach_runtime::{Config, housekeeping};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_with_test_clock};
use crate::sequences::{insert_sender, send_key, sequence};

fn items(page: &Value) -> Vec<Value> {
    page["items"].as_array().expect("items").clone()
}

fn types(page: &Value) -> Vec<String> {
    items(page)
        .iter()
        .map(|event| event["type"].as_str().expect("a type").to_owned())
        .collect()
}

async fn event_count(app: &TestApp) -> i64 {
    sqlx::query_scalar("select count(*) from events")
        .fetch_one(app.db.pool())
        .await
        .expect("count events")
}

/// Activates, pauses and resumes a new sequence; returns its id.
async fn sequence_through_its_states(app: &TestApp, send: &str) -> String {
    let sender = insert_sender(app, &app.workspace_id, "Ada's account", "connected").await;
    let id = sequence(app, &[&sender]).await;
    for step in ["activate", "pause", "resume"] {
        app.post_json(&format!("/sequences/{id}/{step}"), send, json!({}))
            .await
            .expect(200);
    }
    id
}

#[tokio::test]
async fn a_sequence_s_changes_are_events_newest_first_with_their_ids() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let id = sequence_through_its_states(&app, &send).await;

    let page = app.get("/events", &app.key).await;
    let page = page.expect(200);
    assert_eq!(
        types(page),
        [
            "sequence.activated",
            "sequence.paused",
            "sequence.activated"
        ],
        "{page}"
    );
    assert_eq!(page["total"], json!(3));
    for event in items(page) {
        assert_eq!(event["data"], json!({"sequence_id": id}), "{event}");
        let one = app
            .get(
                &format!("/events/{}", event["id"].as_str().expect("an id")),
                &app.key,
            )
            .await;
        assert_eq!(one.expect(200), &event);
    }

    // The same over MCP, filtered by type.
    let (is_error, over_mcp) = app
        .mcp_call(
            &app.key,
            "service_list_events",
            json!({"type": ["sequence.paused"]}),
        )
        .await;
    assert!(!is_error, "{over_mcp}");
    assert_eq!(types(&over_mcp), ["sequence.paused"], "{over_mcp}");
}

#[tokio::test]
async fn filters_take_several_types_and_a_time_range() {
    let app = spawn_app_with_test_clock().await;
    let send = send_key(&app).await;
    let sender = insert_sender(&app, &app.workspace_id, "Ada's account", "connected").await;
    let id = sequence(&app, &[&sender]).await;
    app.post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await
        .expect(200);
    app.post_json("/sandbox/clock/advance", &app.key, json!({"seconds": 60}))
        .await
        .expect(200);
    app.post_json(&format!("/sequences/{id}/pause"), &send, json!({}))
        .await
        .expect(200);
    let all = app.get("/events", &app.key).await;
    let all = items(all.expect(200));
    let paused_at = all[0]["created_at"].as_str().expect("a time").to_owned();
    let activated_at = all[1]["created_at"].as_str().expect("a time").to_owned();
    assert!(activated_at < paused_at, "{activated_at} {paused_at}");

    let both = app
        .get("/events?type=sequence.paused,sequence.activated", &app.key)
        .await;
    assert_eq!(both.expect(200)["total"], json!(2));
    let after = app
        .get(&format!("/events?created_after={paused_at}"), &app.key)
        .await;
    assert_eq!(types(after.expect(200)), ["sequence.paused"]);
    let before = app
        .get(&format!("/events?created_before={paused_at}"), &app.key)
        .await;
    assert_eq!(types(before.expect(200)), ["sequence.activated"]);
    let none = app.get("/events?type=sequence.completed", &app.key).await;
    assert_eq!(none.expect(200)["total"], json!(0));
}

#[tokio::test]
async fn bad_filters_and_unknown_events_are_refused_and_change_nothing() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    sequence_through_its_states(&app, &send).await;
    let before = event_count(&app).await;

    let unknown = app.get("/events?type=sequence.deleted", &app.key).await;
    let sentence = unknown.expect_error(400, "invalid_request");
    assert!(
        sentence.contains("sequence.deleted") && sentence.contains("sequence.paused"),
        "the sentence names the value and the valid ones: {sentence}"
    );
    let backwards = app
        .get(
            "/events?created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z",
            &app.key,
        )
        .await;
    let sentence = backwards.expect_error(400, "invalid_request");
    assert!(sentence.contains("created_before"), "{sentence}");
    // An empty item is no type either (schemathesis sent `type=,`).
    for query in ["type=,", "type=sequence.paused,"] {
        let empty = app.get(&format!("/events?{query}"), &app.key).await;
        empty.expect_error(400, "invalid_request");
    }
    let none = app.get("/events?type=", &app.key).await;
    assert_eq!(
        none.expect(200)["total"],
        json!(3),
        "no type named: every event"
    );
    let not_a_time = app.get("/events?created_after=yesterday", &app.key).await;
    not_a_time.expect_error(400, "invalid_request");
    app.get("/events/evt_00000000000NoSuchOne", &app.key)
        .await
        .expect_error(404, "not_found");
    app.get("/events/not-an-id", &app.key)
        .await
        .expect_error(404, "not_found");
    assert_eq!(event_count(&app).await, before);
}

#[tokio::test]
async fn another_workspace_sees_none_of_the_events() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    sequence_through_its_states(&app, &send).await;
    let event = app.get("/events?limit=1", &app.key).await;
    let event = items(event.expect(200))[0]["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    let (_, other) = app
        .other_workspace("Elsewhere", "someone@elsewhere.example")
        .await;
    assert_eq!(
        app.get("/events", &other).await.expect(200)["total"],
        json!(0)
    );
    app.get(&format!("/events/{event}"), &other)
        .await
        .expect_error(404, "not_found");
}

/// A change that is refused, or that fails after it began, writes no event: the event is written
/// in the change's own transaction.
#[tokio::test]
async fn a_refused_change_writes_no_event() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    // No senders: the preflight refuses the activation.
    let created = app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": "Nobody sends", "steps": crate::sequences::steps()}),
        )
        .await;
    let id = created.expect(201)["id"]
        .as_str()
        .expect("an id")
        .to_owned();
    app.post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await
        .expect_error(409, "invalid_state");
    app.post_json(&format!("/sequences/{id}/pause"), &send, json!({}))
        .await
        .expect_error(409, "invalid_state");
    assert_eq!(event_count(&app).await, 0);
}

#[tokio::test]
async fn events_are_kept_thirty_days() {
    let app = spawn_app_with_test_clock().await;
    let send = send_key(&app).await;
    sequence_through_its_states(&app, &send).await;
    let state = build_state(
        app.db.clone(),
        app.clock.clone(),
        Config::new(&app.base_url, app.environment.clone()),
    )
    .expect("state");
    housekeeping::purge(&state).await.expect("purge");
    assert_eq!(event_count(&app).await, 3, "young events stay");
    app.post_json(
        "/sandbox/clock/advance",
        &app.key,
        json!({"seconds": 30 * 24 * 3600 + 1}),
    )
    .await
    .expect(200);
    let listed = app.get("/events", &app.key).await;
    assert_eq!(
        listed.expect(200)["total"],
        json!(0),
        "past 30 days an event is gone before housekeeping deletes it"
    );
    housekeeping::purge(&state).await.expect("purge");
    assert_eq!(event_count(&app).await, 0, "events past 30 days go");
}

/// The events of one person's outreach, in the order they happened, each naming its ids: an
/// approval requested, the invitation, the acceptance, the message, the reply and the end.
#[tokio::test]
async fn a_person_s_outreach_is_told_in_events_from_approval_to_reply() {
    use crate::outreach::{advance, always, no_worker_app, quiet_profile, settle};
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Ada's account", "timezone": "Europe/Berlin", "working_hours": always()}),
        )
        .await;
    let sender = sender.expect(201)["id"].as_str().expect("id").to_owned();
    let url = quiet_profile("grace");
    let prospect = app
        .create_prospect(
            json!({"first_name": "Grace", "profile_url": format!("https://www.{url}")}),
        )
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({
                "name": "Navy outreach",
                "sender_ids": [sender],
                "steps": [
                    {"type": "view_profile"},
                    {"type": "connection_request", "delay_hours": 1, "note": "Hi {{first_name}}."},
                    {"type": "message", "delay_hours": 24, "text": "Thanks {{first_name}}!"},
                    {"type": "message", "delay_hours": 72, "text": "Following up, {{first_name}}."},
                ],
            }),
        )
        .await;
    let sequence = sequence.expect(201)["id"].as_str().expect("id").to_owned();
    let added = app
        .post_json(
            &format!("/sequences/{sequence}/enrollments"),
            &app.key,
            json!({"prospect_ids": [prospect]}),
        )
        .await;
    let added = added.expect(200);
    let enrollment = added["enrollments"][0]["enrollment_id"]
        .as_str()
        .expect("an enrollment")
        .to_owned();
    let approval = added["enrollments"][0]["approval_id"]
        .as_str()
        .expect("an approval")
        .to_owned();
    app.post_json(&format!("/sequences/{sequence}/activate"), &send, json!({}))
        .await
        .expect(200);
    app.post_json("/approvals/approve", &send, json!({"ids": [approval]}))
        .await
        .expect(200);
    settle(&app).await;
    advance(&app, 2 * 3600).await;
    app.post_json(
        "/sandbox/invitations/accept",
        &app.key,
        json!({"prospect_id": prospect, "sender_id": sender}),
    )
    .await
    .expect(200);
    advance(&app, 25 * 3600).await;
    app.post_json(
        "/sandbox/replies",
        &app.key,
        json!({"prospect_id": prospect, "sender_id": sender, "text": "Sounds good."}),
    )
    .await
    .expect(200);
    settle(&app).await;

    let page = app.get("/events?limit=200", &app.key).await;
    let mut events = items(page.expect(200));
    events.reverse();
    let told: Vec<&str> = events
        .iter()
        .map(|event| event["type"].as_str().expect("a type"))
        .collect();
    assert_eq!(
        told,
        [
            "approval.requested",
            "sequence.activated",
            "enrollment.started",
            "profile.viewed",
            "connection.requested",
            "connection.accepted",
            "message.sent",
            "message.received",
            "enrollment.replied",
            "enrollment.finished",
            "sequence.completed",
        ],
        "{events:#?}"
    );
    let of = |kind: &str| {
        events
            .iter()
            .find(|event| event["type"] == json!(kind))
            .map(|event| event["data"].clone())
            .expect("the event")
    };
    assert_eq!(
        of("approval.requested"),
        json!({"approval_id": approval, "kind": "enrollment", "sequence_id": sequence,
               "prospect_id": prospect, "run_id": null})
    );
    let step = json!({"enrollment_id": enrollment, "sequence_id": sequence,
                      "prospect_id": prospect, "sender_id": sender});
    for kind in [
        "enrollment.started",
        "profile.viewed",
        "connection.requested",
    ] {
        assert_eq!(of(kind), step, "{kind}");
    }
    assert_eq!(
        of("connection.accepted"),
        json!({"prospect_id": prospect, "sender_id": sender})
    );
    let conversation = app
        .get(&format!("/conversations?sender_id={sender}"), &app.key)
        .await;
    let conversation = items(conversation.expect(200))[0]["id"].clone();
    let sent = of("message.sent");
    assert_eq!(sent["conversation_id"], conversation, "{sent}");
    assert_eq!(sent["enrollment_id"], json!(enrollment), "{sent}");
    assert_eq!(of("message.received")["conversation_id"], conversation);
    assert_eq!(
        of("enrollment.replied"),
        json!({"enrollment_id": enrollment, "sequence_id": sequence, "prospect_id": prospect,
               "conversation_id": conversation})
    );
    assert_eq!(
        of("enrollment.finished"),
        json!({"enrollment_id": enrollment, "sequence_id": sequence, "prospect_id": prospect,
               "exit_reason": "replied"})
    );
    // Each message's event names a message of the conversation.
    let messages = app
        .get(
            &format!(
                "/conversations/{}/messages",
                conversation.as_str().expect("id")
            ),
            &app.key,
        )
        .await;
    let ids: Vec<Value> = items(messages.expect(200))
        .iter()
        .map(|message| message["id"].clone())
        .collect();
    assert!(ids.contains(&sent["message_id"]), "{ids:?}");
    assert!(
        ids.contains(&of("message.received")["message_id"]),
        "{ids:?}"
    );
}

/// Stopping a sequence finishes its people: one `enrollment.finished` each, and the pending
/// approval items expire with theirs.
#[tokio::test]
async fn stopping_a_sequence_is_told_person_by_person() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let sender = insert_sender(&app, &app.workspace_id, "Ada's account", "connected").await;
    let id = sequence(&app, &[&sender]).await;
    let mut people = Vec::new();
    for name in ["Ada", "Grace"] {
        people.push(quiet_prospect(&app, name).await);
    }
    let added = app
        .post_json(
            &format!("/sequences/{id}/enrollments"),
            &app.key,
            json!({"prospect_ids": people}),
        )
        .await;
    let approval = added.expect(200)["enrollments"][0]["approval_id"].clone();
    app.post_json("/approvals/approve", &send, json!({"ids": [approval]}))
        .await
        .expect(200);
    app.post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await
        .expect(200);
    app.post_json(&format!("/sequences/{id}/stop"), &send, json!({}))
        .await
        .expect(200);
    let finished = app.get("/events?type=enrollment.finished", &app.key).await;
    let finished = items(finished.expect(200));
    assert_eq!(finished.len(), 2, "{finished:#?}");
    for event in &finished {
        assert_eq!(event["data"]["exit_reason"], json!("stopped"), "{event}");
        assert_eq!(event["data"]["sequence_id"], json!(id), "{event}");
    }
    let expired = app.get("/events?type=approval.expired", &app.key).await;
    let expired = items(expired.expect(200));
    assert_eq!(expired.len(), 1, "the second person's item: {expired:#?}");
    assert_eq!(expired[0]["data"]["prospect_id"], json!(people[1]));
}

/// The events of `app`'s workspace of `kind`, oldest first.
async fn of_type(app: &TestApp, kind: &str) -> Vec<Value> {
    let page = app
        .get(&format!("/events?type={kind}&limit=200"), &app.key)
        .await;
    let mut events = items(page.expect(200));
    events.reverse();
    events
}

/// A prospect, with a company, whose profile the sandbox reaches and leaves alone (it never
/// accepts, replies or fails by itself); its id.
async fn quiet_prospect(app: &TestApp, name: &str) -> Value {
    let url = crate::outreach::quiet_profile(&name.to_lowercase());
    app.create_prospect(json!({"first_name": name, "company_name": "Engines",
                               "profile_url": format!("https://www.{url}")}))
        .await["id"]
        .clone()
}

/// A sender working around the clock in UTC, with these `limits`; its id.
async fn sender_at_all_hours(app: &TestApp, limits: Value) -> String {
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Ada's account", "timezone": "UTC",
                   "working_hours": crate::outreach::always(), "limits": limits}),
        )
        .await;
    sender.expect(201)["id"].as_str().expect("id").to_owned()
}

/// A sequence of `steps` from `sender`, with `people` enrolled and approved, active, and the jobs
/// that makes run; its id.
async fn approved_sequence(
    app: &TestApp,
    send: &str,
    sender: &str,
    steps: Value,
    people: &[Value],
) -> String {
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": "Outreach", "sender_ids": [sender], "steps": steps}),
        )
        .await;
    let sequence = sequence.expect(201)["id"].as_str().expect("id").to_owned();
    app.post_json(
        &format!("/sequences/{sequence}/enrollments"),
        &app.key,
        json!({"prospect_ids": people}),
    )
    .await
    .expect(200);
    app.post_json(&format!("/sequences/{sequence}/activate"), send, json!({}))
        .await
        .expect(200);
    app.post_json("/approvals/approve", send, json!({"sequence_id": sequence}))
        .await
        .expect(200);
    crate::outreach::settle(app).await;
    sequence
}

/// A prospector's run waits for its proposals, then completes once they are decided; a reply
/// that asks to unsubscribe is classified, marks the person and ends their enrollment.
#[tokio::test]
async fn runs_replies_and_their_triage_are_told() {
    let setup = crate::agent_runs::Setup::new(1).await;
    let app = &setup.app;
    let lead = setup.connected_lead().await;
    let waiting = of_type(app, "run.awaiting_approval").await;
    assert_eq!(waiting.len(), 1, "{waiting:#?}");
    assert_eq!(waiting[0]["data"]["kind"], json!("prospector"));
    assert_eq!(waiting[0]["data"]["approvals_pending"], json!(1));
    let run = waiting[0]["data"]["run_id"].clone();
    crate::outreach::settle(app).await;
    let completed = of_type(app, "run.completed").await;
    assert_eq!(completed.len(), 1, "{completed:#?}");
    assert_eq!(completed[0]["data"]["run_id"], run);
    assert_eq!(of_type(app, "connection.accepted").await.len(), 1);

    setup.reply(&lead, "Please remove me from your list.").await;
    let triage = setup.triage(json!({})).await;
    setup.run(&triage, &app.key, json!({})).await;
    crate::outreach::settle(app).await;
    let classified = of_type(app, "conversation.classified").await;
    assert_eq!(classified.len(), 1, "{classified:#?}");
    assert_eq!(
        classified[0]["data"]["classification"],
        json!("unsubscribe")
    );
    assert_eq!(classified[0]["data"]["prospect_id"], json!(lead));
    let marked: Vec<Value> = of_type(app, "prospect.do_not_contact_added")
        .await
        .iter()
        .map(|event| event["data"]["prospect_id"].clone())
        .collect();
    // The setup's blocked prospect (marked by `update_prospect`), then the lead.
    assert_eq!(marked.len(), 2, "{marked:?}");
    assert_eq!(marked[1], json!(lead));
    let finished = of_type(app, "enrollment.finished").await;
    assert_eq!(finished.len(), 1, "{finished:#?}");
    assert_eq!(finished[0]["data"]["exit_reason"], json!("unsubscribed"));
    let runs = of_type(app, "run.completed").await;
    assert_eq!(runs.len(), 2, "the triage run too: {runs:#?}");
    assert_eq!(runs[1]["data"]["kind"], json!("inbox_triage"));
}

/// An import, a scoring run and a list's processing each say they are done; the spend that
/// takes the balance under the low mark says so once.
#[tokio::test]
async fn imports_scoring_processing_and_a_low_balance_are_told() {
    let app = spawn_app().await;
    app.grant_credits(outreach_actions::credits::LOW_MARK + 2)
        .await;
    let rows = json!({"rows": [
        {"first_name": "Ada", "title": "Engineer", "email": "ada@engines.test", "do_not_contact": true},
        {"first_name": "Grace", "title": "Engineer", "email": "grace@navy.test"},
        {"first_name": ""},
    ], "list_name": "Imported"});
    let imported = app.post_json("/imports", &app.key, rows).await;
    let imported = imported.expect(200).clone();
    let done = of_type(&app, "import.completed").await;
    assert_eq!(
        done[0]["data"],
        json!({"import_id": imported["id"], "created": 2, "updated": 0, "invalid": 1})
    );
    let marked = of_type(&app, "prospect.do_not_contact_added").await;
    assert_eq!(marked.len(), 1, "{marked:#?}");
    assert_eq!(of_type(&app, "credits.low").await.len(), 0, "still 100");

    let targeting = app
        .post_json(
            "/targetings",
            &app.key,
            json!({"name": "Engineers", "criteria": {"titles": {"include": [{"value": "engineer", "points": 60}]}}}),
        )
        .await;
    let targeting = targeting.expect(201)["id"].clone();
    let list = imported["list_id"].clone();
    let processed = app
        .post_json(
            &format!("/lists/{}/process", list.as_str().expect("a list")),
            &app.key,
            json!({"targeting_id": targeting}),
        )
        .await;
    let processed = processed.expect(200).clone();
    let scored = of_type(&app, "scoring_run.completed").await;
    assert_eq!(scored.len(), 1, "{scored:#?}");
    assert_eq!(scored[0]["data"]["targeting_id"], targeting);
    assert_eq!(scored[0]["data"]["scored"], json!(2));
    let listed = of_type(&app, "list.processed").await;
    assert_eq!(
        listed[0]["data"],
        json!({"list_id": list, "scoring_run_id": scored[0]["data"]["scoring_run_id"]}),
        "{processed}"
    );
    let low = of_type(&app, "credits.low").await;
    assert_eq!(low.len(), 1, "{low:#?}");
    assert_eq!(
        low[0]["data"]["threshold"],
        json!(outreach_actions::credits::LOW_MARK)
    );
    let balance = low[0]["data"]["balance"].as_i64().expect("a balance");
    assert!(balance < outreach_actions::credits::LOW_MARK, "{balance}");
    // Spending again under the mark is not a second crossing.
    app.post_json(
        "/scoring-runs",
        &app.key,
        json!({"targeting_id": targeting, "list_id": list}),
    )
    .await
    .expect(200);
    assert_eq!(of_type(&app, "scoring_run.completed").await.len(), 2);
    assert_eq!(of_type(&app, "credits.low").await.len(), 1);
}

/// A sender's status, as the network reports it, is told when it changes, and not again when
/// the same status is reported twice, nor when a cut-off account moves from `needs_reauth` to
/// `disconnected`.
#[tokio::test]
async fn a_sender_s_status_changes_are_told_once_each() {
    let app = spawn_app().await;
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Ada's account", "timezone": "UTC"}),
        )
        .await;
    let sender = sender.expect(201)["id"].as_str().expect("id").to_owned();
    for status in [
        "restricted",
        "restricted",
        "needs_reauth",
        // Still cut off: the status moves, and nothing new is told.
        "disconnected",
        "connected",
        "connected",
    ] {
        app.post_json(
            &format!("/sandbox/senders/{sender}/status"),
            &app.key,
            json!({"status": status}),
        )
        .await
        .expect(200);
        let now = app.get(&format!("/senders/{sender}"), &app.key).await;
        assert_eq!(now.expect(200)["status"], status);
    }
    let page = app.get("/events?limit=200", &app.key).await;
    let mut told: Vec<(String, Value)> = items(page.expect(200))
        .iter()
        .map(|event| {
            (
                event["type"].as_str().expect("type").to_owned(),
                event["data"].clone(),
            )
        })
        .collect();
    told.reverse();
    assert_eq!(
        told,
        [
            (
                "sender.restricted".to_owned(),
                json!({"sender_id": sender, "status": "restricted"})
            ),
            (
                "sender.disconnected".to_owned(),
                json!({"sender_id": sender, "status": "needs_reauth"})
            ),
            (
                "sender.reconnected".to_owned(),
                json!({"sender_id": sender, "status": "connected"})
            ),
        ]
    );
}

/// A daily limit's use is told at 80% and when it is used up, once each.
#[tokio::test]
async fn a_daily_limit_is_told_when_it_is_near_and_when_it_is_used_up() {
    use crate::outreach::{advance, no_worker_app, quiet_profile};
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let sender = sender_at_all_hours(&app, json!({"profile_views_per_day": 5})).await;
    // Past the new account's warm-up, the limit is whole.
    let warm_up = outreach_actions::senders::limits::WARMUP_DAYS;
    advance(&app, (warm_up + 1) * 24 * 3600).await;
    let mut people = Vec::new();
    for n in 0..6 {
        let url = quiet_profile(&format!("viewed{n}"));
        let made = app
            .create_prospect(json!({"first_name": format!("Viewed{n}"), "profile_url": format!("https://www.{url}")}))
            .await;
        people.push(made["id"].clone());
    }
    approved_sequence(
        &app,
        &send,
        &sender,
        json!([{"type": "view_profile"}]),
        &people,
    )
    .await;
    for _ in 0..12 {
        advance(&app, 120).await;
    }
    assert_eq!(
        of_type(&app, "profile.viewed").await.len(),
        5,
        "the limit held"
    );
    let near = of_type(&app, "sender.limit_approaching").await;
    assert_eq!(
        near.iter()
            .map(|event| event["data"].clone())
            .collect::<Vec<_>>(),
        [json!({"sender_id": sender, "limit": "profile_views_per_day", "used": 4, "max": 5})]
    );
    let reached = of_type(&app, "sender.limit_reached").await;
    assert_eq!(
        reached
            .iter()
            .map(|event| event["data"].clone())
            .collect::<Vec<_>>(),
        [json!({"sender_id": sender, "limit": "profile_views_per_day", "used": 5, "max": 5})]
    );
}

/// A person the network cannot reach: the refused invitation and the failed enrollment are
/// told, each with the network's sentence.
#[tokio::test]
async fn a_refused_invitation_and_the_failed_enrollment_are_told() {
    use crate::outreach::no_worker_app;
    use outreach_actions::network::DEFAULT_SANDBOX_SEED;
    use outreach_actions::network::sandbox::fate;
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let sender = sender_at_all_hours(&app, json!({})).await;
    let url = (0..)
        .map(|n| format!("linkedin.com/in/nowhere-{n}"))
        .find(|url| fate(DEFAULT_SANDBOX_SEED, url).unreachable)
        .expect("an unreachable profile");
    let prospect = app
        .create_prospect(
            json!({"first_name": "Nobody", "profile_url": format!("https://www.{url}")}),
        )
        .await["id"]
        .clone();
    let steps = json!([{"type": "connection_request", "note": "Hi {{first_name}}."}]);
    approved_sequence(&app, &send, &sender, steps, std::slice::from_ref(&prospect)).await;
    let refused = of_type(&app, "connection.request_failed").await;
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert_eq!(refused[0]["data"]["prospect_id"], prospect);
    assert_eq!(refused[0]["data"]["sender_id"], json!(sender));
    assert!(
        refused[0]["data"]["error"]
            .as_str()
            .is_some_and(|error| !error.is_empty()),
        "{refused:#?}"
    );
    let failed = of_type(&app, "enrollment.failed").await;
    assert_eq!(failed.len(), 1, "{failed:#?}");
    assert!(
        failed[0]["data"]["error"]
            .as_str()
            .is_some_and(|error| error.contains(':')),
        "`code: sentence`: {failed:#?}"
    );
    assert!(of_type(&app, "connection.requested").await.is_empty());
}

/// A sequence whose last approved person is stopped by hand completes, and says so: the stop
/// enqueues the sequence's follow-up, which completes it once nobody in it is live.
#[tokio::test]
async fn a_sequence_whose_last_person_is_stopped_completes() {
    use crate::outreach::{no_worker_app, settle};
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let sender = insert_sender(&app, &app.workspace_id, "Ada's account", "connected").await;
    let id = sequence(&app, &[&sender]).await;
    // People the sandbox leaves alone: none of them fails or replies by itself.
    let people = [
        quiet_prospect(&app, "ada-completes").await,
        quiet_prospect(&app, "grace-completes").await,
    ];
    let added = app
        .post_json(
            &format!("/sequences/{id}/enrollments"),
            &app.key,
            json!({"prospect_ids": people}),
        )
        .await;
    let added = added.expect(200).clone();
    let enrollment = |n: usize| {
        added["enrollments"][n]["enrollment_id"]
            .as_str()
            .expect("an enrollment")
            .to_owned()
    };
    app.post_json("/approvals/approve", &send, json!({"sequence_id": id}))
        .await
        .expect(200);
    app.post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await
        .expect(200);
    app.post_json(
        &format!("/enrollments/{}/stop", enrollment(0)),
        &send,
        json!({}),
    )
    .await
    .expect(200);
    settle(&app).await;
    let sequence_now = app.get(&format!("/sequences/{id}"), &app.key).await;
    assert_eq!(
        sequence_now.expect(200)["status"],
        json!("active"),
        "one is still live"
    );
    app.post_json(
        &format!("/enrollments/{}/stop", enrollment(1)),
        &send,
        json!({}),
    )
    .await
    .expect(200);
    settle(&app).await;
    let sequence_now = app.get(&format!("/sequences/{id}"), &app.key).await;
    assert_eq!(sequence_now.expect(200)["status"], json!("completed"));
    let completed = of_type(&app, "sequence.completed").await;
    assert_eq!(completed.len(), 1, "{completed:#?}");
    assert_eq!(completed[0]["data"], json!({"sequence_id": id}));
}

/// Proposals rejected before anyone started leave the sequence active: an agent may propose
/// again, and nobody in it ever ended.
#[tokio::test]
async fn rejecting_every_proposal_leaves_the_sequence_active() {
    use crate::outreach::{no_worker_app, settle};
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let sender = insert_sender(&app, &app.workspace_id, "Ada's account", "connected").await;
    let id = sequence(&app, &[&sender]).await;
    let ada = crate::sequences::prospect(&app, "Ada", "Engines").await;
    app.post_json(
        &format!("/sequences/{id}/enrollments"),
        &app.key,
        json!({"prospect_ids": [ada]}),
    )
    .await
    .expect(200);
    app.post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await
        .expect(200);
    app.post_json("/approvals/reject", &send, json!({"sequence_id": id}))
        .await
        .expect(200);
    settle(&app).await;
    let now = app.get(&format!("/sequences/{id}"), &app.key).await;
    assert_eq!(now.expect(200)["status"], json!("active"));
    assert_eq!(of_type(&app, "enrollment.finished").await.len(), 1);
    assert!(of_type(&app, "sequence.completed").await.is_empty());
}

/// Marking a prospect do-not-contact is told once, however many updates say so at the same
/// moment: on PostgreSQL each update reads "was it already?" under the person's lock.
#[tokio::test]
async fn do_not_contact_marked_by_updates_at_once_is_told_once() {
    let app = spawn_app().await;
    let mut people = Vec::new();
    for n in 0..4 {
        let prospect = app
            .create_prospect(
                json!({"first_name": format!("Ada {n}"), "email": format!("ada{n}@engines.test")}),
            )
            .await;
        people.push(prospect["id"].as_str().expect("an id").to_owned());
    }
    let mut updates = tokio::task::JoinSet::new();
    for id in &people {
        for _ in 0..6 {
            let request = app
                .client
                .patch(format!("{}/api/v1/prospects/{id}", app.base_url))
                .bearer_auth(&app.key)
                .json(&json!({"do_not_contact": true}));
            updates.spawn(async move { request.send().await.expect("PATCH").status() });
        }
    }
    for status in updates.join_all().await {
        assert_eq!(status, 200);
    }
    let mut told: Vec<String> = of_type(&app, "prospect.do_not_contact_added")
        .await
        .iter()
        .map(|event| {
            event["data"]["prospect_id"]
                .as_str()
                .expect("an id")
                .to_owned()
        })
        .collect();
    told.sort();
    people.sort();
    assert_eq!(told, people, "one event per prospect");
}

/// An invitation its sender's owner withdraws in the network's own app is told as the network
/// reports it; the enrollment that waited for the acceptance ends, sends nothing more, and the
/// person is no longer pending. A second withdrawal is refused and tells nothing.
#[tokio::test]
async fn an_invitation_withdrawn_on_the_network_is_told_and_ends_its_enrollment() {
    let app = spawn_app_with_test_clock().await;
    let send = send_key(&app).await;
    let sender = sender_at_all_hours(&app, json!({})).await;
    let prospect = quiet_prospect(&app, "Withdrawn").await;
    let steps = json!([
        {"type": "connection_request", "note": "Hi {{first_name}}."},
        {"type": "message", "delay_hours": 1, "text": "Thanks for connecting."}
    ]);
    let sequence =
        approved_sequence(&app, &send, &sender, steps, std::slice::from_ref(&prospect)).await;
    assert_eq!(of_type(&app, "connection.requested").await.len(), 1);

    let body = json!({"prospect_id": prospect, "sender_id": sender});
    let withdrawn = app
        .post_json("/sandbox/invitations/withdraw", &app.key, body.clone())
        .await;
    assert_eq!(withdrawn.expect(200)["connection_state"], "not_connected");
    let told = of_type(&app, "invitation.withdrawn").await;
    assert_eq!(told.len(), 1, "{told:#?}");
    let enrollment = told[0]["data"]["enrollment_id"]
        .as_str()
        .expect("an enrollment");
    assert_eq!(
        told[0]["data"],
        json!({"enrollment_id": enrollment, "sequence_id": sequence,
               "prospect_id": prospect, "sender_id": sender})
    );
    let ended = app
        .get(&format!("/enrollments/{enrollment}"), &app.key)
        .await;
    let ended = ended.expect(200);
    assert_eq!(ended["status"], "finished");
    assert_eq!(ended["exit_reason"], "invitation_withdrawn");
    let finished = of_type(&app, "enrollment.finished").await;
    assert_eq!(finished.len(), 1, "{finished:#?}");
    let person = app
        .get(
            &format!("/prospects/{}", prospect.as_str().expect("id")),
            &app.key,
        )
        .await;
    assert_eq!(person.expect(200)["connection_state"], "not_connected");

    let again = app
        .post_json("/sandbox/invitations/withdraw", &app.key, body)
        .await;
    let sentence = again.expect_error(409, "invalid_state");
    assert!(sentence.contains("not_connected"), "{sentence}");
    assert_eq!(of_type(&app, "invitation.withdrawn").await.len(), 1);

    // Its only person ended, so the sequence completes; and past the 21 days an acceptance was
    // waited for, nothing more goes to the person and the enrollment does not end again.
    crate::outreach::advance(&app, 22 * 24 * 3600).await;
    crate::outreach::settle(&app).await;
    let completed = of_type(&app, "sequence.completed").await;
    assert_eq!(completed.len(), 1, "{completed:#?}");
    assert_eq!(completed[0]["data"]["sequence_id"], json!(sequence));
    assert!(of_type(&app, "message.sent").await.is_empty());
    assert_eq!(of_type(&app, "connection.requested").await.len(), 1);
    assert_eq!(of_type(&app, "enrollment.finished").await.len(), 1);
    let ended = app
        .get(&format!("/enrollments/{enrollment}"), &app.key)
        .await;
    assert_eq!(ended.expect(200)["exit_reason"], "invitation_withdrawn");
}

/// A withdrawal reported twice (the network's report redelivered) is told once; one reported for
/// a sender while another sender's invitation to the person still waits leaves the person pending
/// and ends only that sender's enrollment.
#[tokio::test]
async fn a_withdrawal_is_told_once_and_only_for_its_sender() {
    use outreach_actions::delivery::inbound::ingest;
    use outreach_actions::network::InboundEvent;
    let app = spawn_app_with_test_clock().await;
    let send = send_key(&app).await;
    let first = sender_at_all_hours(&app, json!({})).await;
    let second = sender_at_all_hours(&app, json!({})).await;
    let prospect = quiet_prospect(&app, "Twice").await;
    let steps = json!([{"type": "connection_request", "note": "Hi {{first_name}}."},
                       {"type": "message", "delay_hours": 1, "text": "Thanks."}]);
    for sender in [&first, &second] {
        let sequence = app
            .post_json(
                "/sequences",
                &app.key,
                // The first sender's invitation may be out before the second adds the person:
                // neither that nor the other live sequence may skip them.
                json!({"name": format!("From {sender}"), "sender_ids": [sender], "steps": steps,
                       "settings": {"skip_if_in_other_live_sequence": false,
                                    "skip_if_contacted_within_days": 0}}),
            )
            .await;
        let sequence = sequence.expect(201)["id"].as_str().expect("id").to_owned();
        app.post_json(
            &format!("/sequences/{sequence}/enrollments"),
            &app.key,
            json!({"prospect_ids": [prospect]}),
        )
        .await
        .expect(200);
        app.post_json(&format!("/sequences/{sequence}/activate"), &send, json!({}))
            .await
            .expect(200);
        app.post_json(
            "/approvals/approve",
            &send,
            json!({"sequence_id": sequence}),
        )
        .await
        .expect(200);
    }
    crate::outreach::settle(&app).await;
    assert_eq!(of_type(&app, "connection.requested").await.len(), 2);

    let profile_url: String = sqlx::query_scalar("select profile_url from prospects where id = $1")
        .bind(prospect.as_str().expect("id"))
        .fetch_one(app.db.pool())
        .await
        .expect("the profile URL");
    let report = InboundEvent::InvitationWithdrawn {
        sender_id: first.clone(),
        profile_url,
        at_ms: app.clock.now_ms(),
    };
    for _ in 0..2 {
        let mut tx = app.db.begin_write().await.expect("begin");
        ingest(&mut tx, &app.clock, &app.workspace_id, &report)
            .await
            .expect("ingested");
        tx.commit().await.expect("commit");
    }
    let told = of_type(&app, "invitation.withdrawn").await;
    assert_eq!(told.len(), 1, "{told:#?}");
    assert_eq!(told[0]["data"]["sender_id"], json!(first));
    let person = app
        .get(
            &format!("/prospects/{}", prospect.as_str().expect("id")),
            &app.key,
        )
        .await;
    assert_eq!(
        person.expect(200)["connection_state"],
        "pending",
        "the second still waits"
    );
    let finished = of_type(&app, "enrollment.finished").await;
    assert_eq!(finished.len(), 1, "{finished:#?}");
    let enrollments: Vec<(Option<String>, String)> = sqlx::query_as(
        "select exit_reason, status from enrollments where prospect_id = $1 order by sender_id = $2 desc",
    )
    .bind(prospect.as_str().expect("id"))
    .bind(&first)
    .fetch_all(app.db.pool())
    .await
    .expect("the enrollments");
    assert_eq!(
        enrollments[0],
        (
            Some("invitation_withdrawn".to_owned()),
            "finished".to_owned()
        )
    );
    assert_ne!(enrollments[1].1, "finished", "{enrollments:?}");
}
