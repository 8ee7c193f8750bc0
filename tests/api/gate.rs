//! The sending gate on every path: working hours, the gap between a sender's calls and its limits
//! hold for a step sent again after a crash, the gap counts refused calls, and what a read
//! forecasts (a sequence's next send, an approval's first send) is what the gate then allows.

use std::time::Duration;

use serde_json::{Value, json};
use sqlx::Row;

use crate::helpers::{Served, TestApp, spawn_app_on_test_clock_with, start_serve_with};
use crate::network_rules::{GAP_MS, assert_network_rules, calls};
use crate::outreach::{advance, no_worker_app, quiet_profile, settle};
use crate::sequences::send_key;

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// The shared clock as the database holds it (what every instance shows).
async fn shared_now(app: &TestApp) -> i64 {
    app.clock
        .sync(&app.db)
        .await
        .expect("read the shared clock");
    app.clock.now_ms()
}

/// Moves the shared clock to the next instant that is `hour`:00 UTC plus `extra_ms`, at least
/// `min_days` days ahead (past the warm-up when asked); returns that instant.
async fn move_clock_to_hour(app: &TestApp, min_days: i64, hour: i64, extra_ms: i64) -> i64 {
    let now = shared_now(app).await;
    let earliest = now + min_days * DAY_MS;
    let mut target = earliest - earliest.rem_euclid(DAY_MS) + hour * HOUR_MS + extra_ms;
    if target <= earliest {
        target += DAY_MS;
    }
    move_clock_by(app, target - now).await;
    target
}

/// Moves the shared clock forward by `ms`, rounded up to a whole second (never short of it: a
/// clock moved to 16:00 must not land at 15:59:59.4). Moved directly, not played out as
/// `advance_clock` does: these tests leave the sending to `serve` processes they start and kill,
/// and a jump is time during which none of them ran.
async fn move_clock_by(app: &TestApp, ms: i64) {
    let seconds = (ms + 999).div_euclid(1000);
    if seconds > 0 {
        outreach_runtime::test_clock::advance(&app.db, &app.clock, seconds * 1000)
            .await
            .expect("move the shared clock");
    }
}

fn id(value: &Value) -> String {
    value["id"].as_str().expect("an id").to_owned()
}

/// A sender in UTC working `hours` (a JSON `working_hours` object).
async fn sender(app: &TestApp, name: &str, hours: Value) -> String {
    id(app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": name, "timezone": "UTC", "working_hours": hours}),
        )
        .await
        .expect(201))
}

fn every_day(start: &str, end: &str) -> Value {
    let day = json!([{"start": start, "end": end}]);
    json!({"monday": day, "tuesday": day, "wednesday": day, "thursday": day, "friday": day,
           "saturday": day, "sunday": day})
}

/// A prospect at `url`.
async fn person(app: &TestApp, name: &str, url: &str) -> String {
    id(&app
        .create_prospect(json!({"first_name": name, "profile_url": url}))
        .await)
}

/// An active sequence from `sender_id` with `steps`, the people enrolled (not approved yet).
async fn sequence(
    app: &TestApp,
    send: &str,
    sender_id: &str,
    steps: Value,
    people: &[&str],
) -> String {
    let sequence = id(app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": format!("Gate {}", people.len()), "sender_ids": [sender_id], "steps": steps}),
        )
        .await
        .expect(201));
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
    sequence
}

async fn intent_status(app: &TestApp) -> Option<String> {
    sqlx::query("select status from outbound_intents where workspace_id = $1")
        .bind(&app.workspace_id)
        .fetch_optional(app.db.pool())
        .await
        .expect("read the intent")
        .map(|row| row.get("status"))
}

/// Polls (bounded) until `condition` holds of the one intent's status.
async fn wait_for_intent(app: &TestApp, what: &str, condition: impl Fn(Option<&str>) -> bool) {
    for _ in 0..600 {
        if condition(intent_status(app).await.as_deref()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "the intent never became {what}; it is {:?}",
        intent_status(app).await
    );
}

async fn worker_process(app: &TestApp) -> Served {
    start_serve_with(app.database(), &["--test-clock", "--job-poll-ms", "50"]).await
}

#[tokio::test]
async fn a_step_left_pending_by_a_crash_waits_for_working_hours_before_it_is_sent_again() {
    // The test's own server runs no worker: a `serve` process does the sending, and dies.
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    let send = send_key(&app).await;
    let sender_id = sender(&app, "Nine to five", every_day("09:00", "17:00")).await;
    let prospect = person(&app, "Pending", &quiet_profile("pending-crash")).await;
    let sequence = sequence(
        &app,
        &send,
        &sender_id,
        json!([{"type": "view_profile", "delay_hours": 0}]),
        &[&prospect],
    )
    .await;
    // 16:00 UTC, inside the sender's hours.
    let four_pm = move_clock_to_hour(&app, 0, 16, 0).await;
    // Each call of the account takes 20 s to reach the network: a crash lands before it does.
    app.post_json(
        &format!("/sandbox/senders/{sender_id}/latency"),
        &app.key,
        json!({"latency_ms": 20_000}),
    )
    .await
    .expect(200);
    app.post_json(
        "/approvals/approve",
        &send,
        json!({"sequence_id": sequence}),
    )
    .await
    .expect(200);

    let worker = worker_process(&app).await;
    wait_for_intent(&app, "pending", |status| status == Some("pending")).await;
    worker.kill().await;
    assert!(
        calls(&app).await.is_empty(),
        "the call never reached the network"
    );

    // The network is fast again; the clock moves to 21:59:59, after the sender's hours.
    app.post_json(
        &format!("/sandbox/senders/{sender_id}/latency"),
        &app.key,
        json!({"latency_ms": 0}),
    )
    .await
    .expect(200);
    move_clock_by(&app, 6 * HOUR_MS - 1_000).await;
    let late = shared_now(&app).await - (four_pm + 6 * HOUR_MS - 1_000);
    assert!((0..60_000).contains(&late), "the clock is about 21:59:59");

    // The restarted worker settles the dead run's intent by asking the network, which has no
    // record of it: the step goes back through the gate and waits for 09:00.
    let worker = worker_process(&app).await;
    wait_for_intent(&app, "unsent", |status| status == Some("unsent")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        calls(&app).await.is_empty(),
        "a step sent again outside working hours: {:?}",
        calls(&app).await
    );
    let usage: i64 = sqlx::query("select count(*) as n from sender_usage where sender_id = $1")
        .bind(&sender_id)
        .fetch_one(app.db.pool())
        .await
        .expect("count usage")
        .get("n");
    assert_eq!(usage, 0, "the unsent call's quota unit was given back");

    // The next morning it goes, once, inside the hours, with its unit taken at that moment.
    let next_morning = move_clock_to_hour(&app, 0, 9, 5 * 60_000).await;
    wait_for_intent(&app, "sent", |status| status == Some("sent")).await;
    let sent = assert_network_rules(&app, "a step sent again after a crash").await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].at >= next_morning - 5 * 60_000, "{sent:?}");
    let unit_at: i64 = sqlx::query("select at from sender_usage where sender_id = $1")
        .bind(&sender_id)
        .fetch_one(app.db.pool())
        .await
        .expect("one unit")
        .get("at");
    assert_eq!(
        unit_at, sent[0].at,
        "the unit counts where the network counted the view"
    );
    worker.terminate().await;
}

#[tokio::test]
async fn a_refused_call_still_starts_the_sender_s_gap() {
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let sender_id = sender(&app, "Refused", every_day("00:00", "24:00")).await;
    // One person the network cannot reach (every call to them is refused), one it can.
    let unreachable_url = (0..)
        .map(|n| format!("linkedin.com/in/unreachable-gate-{n}"))
        .find(|url| {
            outreach_actions::network::sandbox::fate(
                outreach_actions::network::DEFAULT_SANDBOX_SEED,
                url,
            )
            .unreachable
        })
        .expect("an unreachable profile");
    let unreachable = person(&app, "Gone", &unreachable_url).await;
    let reachable = person(&app, "Here", &quiet_profile("refused-gap")).await;
    let sequence = sequence(
        &app,
        &send,
        &sender_id,
        json!([{"type": "view_profile", "delay_hours": 0}]),
        &[&unreachable, &reachable],
    )
    .await;
    let items = app
        .get(&format!("/approvals?sequence_id={sequence}"), &app.key)
        .await;
    let item_of = |prospect: &str| {
        items.expect(200)["items"]
            .as_array()
            .expect("items")
            .iter()
            .find(|item| item["prospect_id"] == prospect)
            .map(id)
            .expect("an item")
    };
    let (first, second) = (item_of(&unreachable), item_of(&reachable));
    // The unreachable person first: the call is refused.
    app.post_json("/approvals/approve", &send, json!({"ids": [first]}))
        .await
        .expect(200);
    settle(&app).await;
    let refused = calls(&app).await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].outcome, "recipient_unreachable", "{refused:?}");
    // A refused call gives its unit back (it counts for pacing only).
    let sender_view = app.get(&format!("/senders/{sender_id}"), &app.key).await;
    assert_eq!(
        sender_view.expect(200)["usage"]["profile_views_per_day"]["used"],
        0,
        "{}",
        sender_view.expect(200)
    );
    // The next person's step is due at once, yet waits for the gap after the refused call.
    app.post_json("/approvals/approve", &send, json!({"ids": [second]}))
        .await
        .expect(200);
    settle(&app).await;
    assert_eq!(
        calls(&app).await.len(),
        1,
        "the next call waits for the gap"
    );
    advance(&app, 120).await;
    let both = assert_network_rules(&app, "a refused call then the next step").await;
    assert_eq!(both.len(), 2, "{both:?}");
    assert!(both[1].at - both[0].at >= GAP_MS, "{both:?}");
}

#[tokio::test]
async fn the_next_send_a_sequence_shows_is_when_the_gate_lets_it_go() {
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let weekdays = {
        let day = json!([{"start": "09:00", "end": "17:00"}]);
        json!({"monday": day, "tuesday": day, "wednesday": day, "thursday": day, "friday": day})
    };
    let sender_id = sender(&app, "Weekdays", weekdays).await;
    let prospect = person(&app, "Weekend", &quiet_profile("forecast")).await;
    // The next Friday 15:00 UTC (1970-01-01 was a Thursday); the step's delay brings it due on
    // Sunday at noon.
    let now = shared_now(&app).await;
    let weekday = |at: i64| (at.div_euclid(DAY_MS) + 3).rem_euclid(7);
    let mut friday =
        now - now.rem_euclid(DAY_MS) + (4 - weekday(now)).rem_euclid(7) * DAY_MS + 15 * HOUR_MS;
    if friday <= now {
        friday += 7 * DAY_MS;
    }
    move_clock_by(&app, friday - now).await;
    assert_eq!(weekday(friday), 4, "a Friday");
    let sequence = sequence(
        &app,
        &send,
        &sender_id,
        json!([{"type": "view_profile", "delay_hours": 45}]),
        &[&prospect],
    )
    .await;
    let dry_run = app
        .post_json(
            "/approvals/approve",
            &send,
            json!({"sequence_id": sequence, "dry_run": true}),
        )
        .await;
    let first_send = millis(&dry_run.expect(200)["senders"][0]["first_send_at"]);
    app.post_json(
        "/approvals/approve",
        &send,
        json!({"sequence_id": sequence}),
    )
    .await
    .expect(200);
    let shown = app.get(&format!("/sequences/{sequence}"), &app.key).await;
    let next_send = millis(&shown.expect(200)["sending"]["next_send_at"]);
    // Monday 09:00 UTC, not Sunday noon when the step falls due.
    let monday = friday + 3 * DAY_MS - 6 * HOUR_MS;
    assert_eq!(next_send, monday, "{}", shown.expect(200)["sending"]);
    assert_eq!(first_send, monday, "{}", dry_run.expect(200));
    // Nothing goes over the weekend; on Monday it goes, no earlier than forecast.
    move_clock_by(&app, 2 * DAY_MS + 12 * HOUR_MS).await;
    settle(&app).await;
    assert!(calls(&app).await.is_empty(), "sent on a Sunday");
    move_clock_by(&app, 12 * HOUR_MS).await;
    settle(&app).await;
    let sent = assert_network_rules(&app, "a forecast sequence").await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        sent[0].at >= monday,
        "sent at {} before {monday}",
        sent[0].at
    );
}

/// An RFC 3339 time of an answer, in epoch milliseconds.
fn millis(value: &Value) -> i64 {
    value
        .as_str()
        .unwrap_or_else(|| panic!("a time, got {value}"))
        .parse::<jiff::Timestamp>()
        .expect("an RFC 3339 time")
        .as_millisecond()
}
