//! Sender accounts: managed through the API, refused when the input is bad, and their quota and
//! sending status followed with a moved clock.

use outreach_actions::senders::{self, QuotaKind, SenderStatus};
use outreach_runtime::clock::rfc3339;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

const MISSING_SENDER: &str = "snd_00000000000NoSuchOne";
const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

fn id(value: &Value) -> String {
    value["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {value}"))
        .to_owned()
}

/// Epoch milliseconds of an RFC 3339 time.
fn ms(text: &str) -> i64 {
    outreach_runtime::clock::parse_rfc3339(text).unwrap_or_else(|| panic!("not a time: {text}"))
}

/// Moves the app's clock to `at` (a few milliseconds drift as the test runs).
fn set_clock(app: &TestApp, at: i64) {
    app.clock.advance_ms(at - app.clock.now_ms());
}

async fn create(app: &TestApp, body: Value) -> Value {
    app.post_json("/senders", &app.key, body)
        .await
        .expect(201)
        .clone()
}

async fn get(app: &TestApp, sender: &str) -> Value {
    app.get(&format!("/senders/{sender}"), &app.key)
        .await
        .expect(200)
        .clone()
}

/// Takes one unit of quota as the step executor will: in its own transaction at `now_ms`.
async fn take(
    app: &TestApp,
    sender: &str,
    kind: QuotaKind,
    now_ms: i64,
) -> Result<String, senders::QuotaRefusal> {
    let mut tx = app.db.begin_write().await.expect("begin");
    let sender = senders::load_locked(&mut tx, sender)
        .await
        .expect("read the sender");
    let taken = senders::take_quota(&mut tx, &sender, kind, now_ms)
        .await
        .expect("take_quota");
    tx.commit().await.expect("commit");
    taken
}

#[tokio::test]
async fn a_sender_is_created_read_listed_updated_and_deleted() {
    let app = spawn_app().await;
    let created = create(
        &app,
        json!({"name": "  Ada's account ", "timezone": "Europe/Berlin"}),
    )
    .await;
    let sender = id(&created);
    assert!(sender.starts_with("snd_") && sender.len() == 24, "{sender}");
    assert_eq!(created["name"], json!("Ada's account"));
    assert_eq!(created["status"], json!("connected"));
    assert_eq!(created["timezone"], json!("Europe/Berlin"));
    let office = json!([{"start": "09:00", "end": "17:00"}]);
    for day in ["monday", "tuesday", "wednesday", "thursday", "friday"] {
        assert_eq!(created["working_hours"][day], office, "{day}");
    }
    assert_eq!(created["working_hours"]["saturday"], json!([]));
    assert_eq!(created["working_hours"]["sunday"], json!([]));
    assert_eq!(
        created["limits"],
        json!({"connection_requests_per_day": 20, "connection_requests_per_week": 100, "messages_per_day": 50,
               "profile_views_per_day": 80, "inmails_per_day": 10})
    );
    assert_eq!(
        created["effective_limits"],
        json!({"connection_requests_per_day": 5, "connection_requests_per_week": 25, "messages_per_day": 12,
               "profile_views_per_day": 20, "inmails_per_day": 2}),
        "a new account starts its warm-up at a quarter"
    );
    let created_at = ms(created["created_at"].as_str().unwrap_or_default());
    assert_eq!(
        created["warmup_ends_at"],
        json!(rfc3339(created_at + 14 * DAY_MS))
    );
    assert_eq!(
        created["usage"]["connection_requests_per_day"],
        json!({"used": 0, "limit": 5, "available_again_at": null})
    );
    assert_eq!(created["paused_until"], Value::Null);
    let fetched = get(&app, &sender).await;
    assert_eq!(fetched["limits"], created["limits"]);
    assert_eq!(fetched["created_at"], created["created_at"]);

    let listed = app
        .get("/senders?status=connected", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(listed["total"], json!(1));
    assert_eq!(listed["items"][0]["id"], json!(sender));
    let none = app.get("/senders?status=disconnected", &app.key).await;
    assert_eq!(none.expect(200)["total"], json!(0));
    app.get("/senders?status=asleep", &app.key)
        .await
        .expect_error(400, "invalid_request");

    let updated = app
        .patch_json(
            &format!("/senders/{sender}"),
            &app.key,
            json!({
                "name": "Ada (sales)",
                "timezone": "America/New_York",
                "working_hours": {"saturday": [{"start": "13:00", "end": "16:00"}, {"start": "08:00", "end": "12:00"}]},
                "limits": {"messages_per_day": 100},
            }),
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(updated["name"], json!("Ada (sales)"));
    assert_eq!(updated["timezone"], json!("America/New_York"));
    assert_eq!(
        updated["working_hours"]["saturday"],
        json!([{"start": "08:00", "end": "12:00"}, {"start": "13:00", "end": "16:00"}]),
        "windows are kept in time order"
    );
    assert_eq!(
        updated["working_hours"]["monday"],
        json!([]),
        "hours are replaced whole"
    );
    assert_eq!(updated["limits"]["messages_per_day"], json!(100));
    assert_eq!(
        updated["limits"]["connection_requests_per_day"],
        json!(20),
        "limits left out keep their value"
    );
    assert_eq!(updated["created_at"], created["created_at"]);

    let deleted = app.delete(&format!("/senders/{sender}"), &app.key).await;
    assert_eq!(deleted.expect(200), &json!({"id": sender, "deleted": true}));
    app.get(&format!("/senders/{sender}"), &app.key)
        .await
        .expect_error(404, "not_found");
    assert_eq!(
        app.get("/senders", &app.key).await.expect(200)["total"],
        json!(0)
    );
    app.delete(&format!("/senders/{sender}"), &app.key)
        .await
        .expect_error(404, "not_found");
    app.patch_json(
        &format!("/senders/{sender}"),
        &app.key,
        json!({"name": "ghost"}),
    )
    .await
    .expect_error(404, "not_found");
    // A deleted sender takes no quota.
    let refused = take(&app, &sender, QuotaKind::Message, app.clock.now_ms()).await;
    assert_eq!(refused.err().map(|r| r.limit), Some("deleted"));
}

#[tokio::test]
async fn bad_input_is_a_400_naming_it_and_changes_nothing() {
    let app = spawn_app().await;
    let sender = id(&create(&app, json!({"name": "Ada", "timezone": "Europe/Berlin"})).await);
    let before = get(&app, &sender).await;
    let cases = [
        (json!({"timezone": "Mars/Olympus"}), "Mars/Olympus"),
        (
            json!({"working_hours": {"monday": [{"start": "17:00", "end": "09:00"}]}}),
            "working_hours.monday[0]",
        ),
        (
            json!({"working_hours": {"friday": [{"start": "09:00", "end": "12:00"}, {"start": "11:30", "end": "14:00"}]}}),
            "overlap",
        ),
        (
            json!({"working_hours": {"monday": [{"start": "9am", "end": "17:00"}]}}),
            "working_hours.monday[0].start",
        ),
        (
            json!({"working_hours": {"mondy": [{"start": "09:00", "end": "17:00"}]}}),
            "mondy",
        ),
        (
            json!({"limits": {"connection_requests_per_day": 41}}),
            "limits.connection_requests_per_day",
        ),
        (
            json!({"limits": {"connection_requests_per_week": 500}}),
            "200",
        ),
        (json!({"limits": {"invites": 5}}), "invites"),
        (json!({"colour": "blue"}), "colour"),
        (json!({"name": " "}), "name"),
    ];
    for (change, named) in &cases {
        let mut body = json!({"name": "Grace", "timezone": "Europe/Berlin"});
        if let (Some(body), Some(change)) = (body.as_object_mut(), change.as_object()) {
            body.extend(change.clone());
        }
        let created = app.post_json("/senders", &app.key, body.clone()).await;
        let message = created.expect_error(400, "invalid_request");
        assert!(message.contains(named), "create with {body}: {message}");
        let patched = app
            .patch_json(&format!("/senders/{sender}"), &app.key, change.clone())
            .await;
        let message = patched.expect_error(400, "invalid_request");
        assert!(message.contains(named), "update with {change}: {message}");
    }
    let ceiling = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Fast", "timezone": "UTC", "limits": {"messages_per_day": 151}}),
        )
        .await;
    assert_eq!(ceiling.body["ceiling"], json!(150));
    assert_eq!(
        app.get("/senders", &app.key).await.expect(200)["total"],
        json!(1),
        "no refused create made a sender"
    );
    let after = get(&app, &sender).await;
    assert_eq!(after["updated_at"], before["updated_at"]);
    assert_eq!(after["working_hours"], before["working_hours"]);
    assert_eq!(after["limits"], before["limits"]);
    assert_eq!(after["timezone"], before["timezone"]);
}

#[tokio::test]
async fn a_read_key_sees_senders_but_cannot_change_them() {
    let app = spawn_app().await;
    let sender = id(&create(&app, json!({"name": "Ada", "timezone": "UTC"})).await);
    let read = app.read_key().await;
    app.get(&format!("/senders/{sender}"), &read)
        .await
        .expect(200);
    app.get("/senders", &read).await.expect(200);
    app.post_json("/senders", &read, json!({"name": "Eve", "timezone": "UTC"}))
        .await
        .expect_error(403, "insufficient_scope");
    app.patch_json(&format!("/senders/{sender}"), &read, json!({"name": "Eve"}))
        .await
        .expect_error(403, "insufficient_scope");
    app.delete(&format!("/senders/{sender}"), &read)
        .await
        .expect_error(403, "insufficient_scope");
    assert_eq!(get(&app, &sender).await["name"], json!("Ada"));
    app.get(&format!("/senders/{MISSING_SENDER}"), &read)
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn usage_limits_and_sending_status_follow_the_clock() {
    let app = spawn_app().await;
    // Monday 2026-11-30, 10:00 in Berlin (CET, UTC+1).
    let monday = ms("2026-11-30T09:00:00Z");
    set_clock(&app, monday);
    let sender = id(&create(
        &app,
        json!({
            "name": "Ada",
            "timezone": "Europe/Berlin",
            "limits": {"connection_requests_per_day": 2, "connection_requests_per_week": 3, "messages_per_day": 8, "profile_views_per_day": 0,
                       "inmails_per_day": 0},
        }),
    )
    .await);
    let now = app.clock.now_ms();
    let status = get(&app, &sender).await;
    assert_eq!(
        status["effective_limits"],
        json!({"connection_requests_per_day": 1, "connection_requests_per_week": 1, "messages_per_day": 2, "profile_views_per_day": 0,
               "inmails_per_day": 0}),
        "warm-up: a quarter of each, but at least 1 where the limit is not 0"
    );
    assert_eq!(status["sending_status"]["state"], json!("sending"));
    assert_eq!(status["usage"]["local_day"], json!("2026-11-30"));

    // The one warm-up invitation is taken; the next waits for the week, the longer of two limits.
    take(&app, &sender, QuotaKind::ConnectionRequest, now)
        .await
        .expect("the first invitation");
    let refused = take(&app, &sender, QuotaKind::ConnectionRequest, now + 1)
        .await
        .expect_err("over the warm-up limit");
    assert_eq!(refused.limit, "connection_requests_per_week");
    assert_eq!(refused.until_ms, Some(now + 7 * DAY_MS));
    assert!(refused.reason.contains("warm-up"), "{}", refused.reason);
    let refused = take(&app, &sender, QuotaKind::ProfileView, now)
        .await
        .expect_err("profile views are 0");
    assert_eq!(
        (refused.limit, refused.until_ms),
        ("profile_views_per_day", None)
    );

    let status = get(&app, &sender).await;
    assert_eq!(
        status["usage"]["connection_requests_per_day"],
        json!({"used": 1, "limit": 1, "available_again_at": "2026-11-30T23:00:00.000Z"})
    );
    assert_eq!(
        status["usage"]["connection_requests_per_week"]["used"],
        json!(1)
    );
    assert_eq!(
        status["sending_status"]["state"],
        json!("sending"),
        "messages have room"
    );
    for offset in 0..2 {
        take(&app, &sender, QuotaKind::Message, now + offset)
            .await
            .expect("the warm-up messages");
    }
    let refused = take(&app, &sender, QuotaKind::Message, now + 2)
        .await
        .expect_err("the third message");
    assert_eq!(
        (refused.limit, refused.until_ms),
        ("messages_per_day", Some(ms("2026-11-30T23:00:00Z"))),
        "room again at Berlin's midnight"
    );
    let status = get(&app, &sender).await;
    assert_eq!(status["sending_status"]["state"], json!("limit_reached"));
    assert_eq!(
        status["sending_status"]["resumes_at"],
        json!("2026-12-01T08:00:00.000Z"),
        "messages free at midnight, and the next window opens at 09:00 Berlin"
    );

    // 18:00 in Berlin the next day: today's counts are back to 0, the week's invitation stays.
    set_clock(&app, ms("2026-12-01T17:00:00Z"));
    let status = get(&app, &sender).await;
    assert_eq!(status["usage"]["messages_per_day"]["used"], json!(0));
    assert_eq!(
        status["usage"]["connection_requests_per_week"]["used"],
        json!(1)
    );
    assert_eq!(status["sending_status"]["state"], json!("outside_hours"));
    assert_eq!(
        status["sending_status"]["resumes_at"],
        json!("2026-12-02T08:00:00.000Z")
    );

    // After the warm-up (Tuesday 15 December), the whole limits apply: 2 a day, 3 a rolling week.
    let warm = ms("2026-12-15T09:00:00Z");
    set_clock(&app, warm);
    for offset in 0..2 {
        take(&app, &sender, QuotaKind::ConnectionRequest, warm + offset)
            .await
            .expect("within the day's limit");
    }
    let refused = take(&app, &sender, QuotaKind::ConnectionRequest, warm + 2)
        .await
        .expect_err("the third of the day");
    assert_eq!(refused.limit, "connection_requests_per_day");
    let wednesday = ms("2026-12-16T09:00:00Z");
    let usage_id = take(&app, &sender, QuotaKind::ConnectionRequest, wednesday)
        .await
        .expect("a new day");
    let refused = take(&app, &sender, QuotaKind::ConnectionRequest, wednesday + 1)
        .await
        .expect_err("the week is full");
    assert_eq!(refused.limit, "connection_requests_per_week");
    assert_eq!(
        refused.until_ms,
        Some(warm + 7 * DAY_MS),
        "room again when Tuesday's first invitation leaves the 7 days"
    );

    // A unit whose send did not happen is given back.
    let mut tx = app.db.begin_write().await.expect("begin");
    assert!(
        senders::release_quota(&mut tx, &usage_id)
            .await
            .expect("release")
    );
    tx.commit().await.expect("commit");
    take(&app, &sender, QuotaKind::ConnectionRequest, wednesday + 2)
        .await
        .expect("the released unit is free again");

    // A provider limit signal pauses the sender.
    set_clock(&app, wednesday + HOUR_MS);
    let until = wednesday + 2 * DAY_MS;
    let mut tx = app.db.begin_write().await.expect("begin");
    senders::pause_sender(
        &mut tx,
        &sender,
        until,
        "the network said: too many invitations",
        wednesday,
    )
    .await
    .expect("pause");
    tx.commit().await.expect("commit");
    let status = get(&app, &sender).await;
    assert_eq!(status["sending_status"]["state"], json!("paused"));
    assert_eq!(status["paused_until"], json!(rfc3339(until)));
    assert_eq!(
        status["sending_status"]["resumes_at"],
        json!(rfc3339(until))
    );
    assert!(
        status["sending_status"]["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("too many invitations")),
        "{status}"
    );
    let refused = take(&app, &sender, QuotaKind::ProfileView, wednesday + HOUR_MS)
        .await
        .expect_err("paused");
    assert_eq!(
        (refused.limit, refused.until_ms),
        ("paused_until", Some(until))
    );

    let mut tx = app.db.begin_write().await.expect("begin");
    senders::set_sender_status(&mut tx, &sender, SenderStatus::Disconnected, wednesday)
        .await
        .expect("status");
    tx.commit().await.expect("commit");
    let status = get(&app, &sender).await;
    assert_eq!(status["status"], json!("disconnected"));
    assert_eq!(status["sending_status"]["state"], json!("disconnected"));
    assert_eq!(status["sending_status"]["resumes_at"], Value::Null);
    let listed = app.get("/senders?status=disconnected", &app.key).await;
    assert_eq!(listed.expect(200)["total"], json!(1));
}

#[tokio::test]
async fn concurrent_quota_takers_never_overshoot() {
    let app = spawn_app().await;
    let sender = id(&create(
        &app,
        json!({"name": "Busy", "timezone": "UTC", "limits": {"messages_per_day": 3}}),
    )
    .await);
    // Past the warm-up, at noon UTC on a day of its own.
    let now = (app.clock.now_ms() / DAY_MS + 20) * DAY_MS + 12 * HOUR_MS;
    let mut tasks = Vec::new();
    for offset in 0..12 {
        let db = app.db.clone();
        let sender = sender.clone();
        tasks.push(tokio::spawn(async move {
            let mut tx = db.begin_write().await.expect("begin");
            let sender = senders::load_locked(&mut tx, &sender)
                .await
                .expect("read the sender");
            let taken = senders::take_quota(&mut tx, &sender, QuotaKind::Message, now + offset)
                .await
                .expect("take_quota");
            tx.commit().await.expect("commit");
            taken.is_ok()
        }));
    }
    let mut taken = 0;
    for task in tasks {
        if task.await.expect("task") {
            taken += 1;
        }
    }
    assert_eq!(taken, 3, "exactly the limit, however the takers interleave");
}

#[tokio::test]
async fn another_workspace_cannot_see_or_change_a_sender() {
    let app = spawn_app().await;
    let sender = id(&create(&app, json!({"name": "Ada", "timezone": "UTC"})).await);
    let (_, other) = app.other_workspace("Rival", "rival@rival.test").await;
    app.get(&format!("/senders/{sender}"), &other)
        .await
        .expect_error(404, "not_found");
    app.patch_json(
        &format!("/senders/{sender}"),
        &other,
        json!({"name": "Mine"}),
    )
    .await
    .expect_error(404, "not_found");
    app.delete(&format!("/senders/{sender}"), &other)
        .await
        .expect_error(404, "not_found");
    assert_eq!(
        app.get("/senders", &other).await.expect(200)["total"],
        json!(0)
    );
    assert_eq!(get(&app, &sender).await["name"], json!("Ada"));
}
