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
    housekeeping::purge(&state).await.expect("purge");
    assert_eq!(event_count(&app).await, 0, "events past 30 days go");
}
