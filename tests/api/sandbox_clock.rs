//! The test clock plays an interval out: one `advance_clock` of a month takes 40 approved
//! people through a 3-step sequence as the month itself would, every action at its own time
//! inside the sender's working hours and limits, every acceptance and reply at the sandbox's
//! time; `get_clock` reads the clock without moving it; concurrent calls each move it by their
//! own amount. Read from the sandbox's own log, so it checks what reached the network.

use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use outreach_actions::network::DEFAULT_SANDBOX_SEED;
use outreach_actions::network::sandbox::{Fate, OUT_OF_OFFICE_TEXT, fate};
use outreach_runtime::clock::parse_rfc3339;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_on_test_clock_with};
use crate::outreach_month::{START_MS, in_office_hours, local_midnight, office_hours};
use crate::sequences::send_key;

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;
const PEOPLE: usize = 40;
const ZONE: &str = "Europe/Berlin";

fn id_of(body: &Value) -> String {
    body["id"].as_str().expect("an id").to_owned()
}

fn at(value: &Value) -> i64 {
    parse_rfc3339(value.as_str().expect("a time")).expect("an RFC 3339 time")
}

/// A sender in Berlin's office hours, 40 people with the sandbox's own fates, a sequence of an
/// invitation then two messages 4 hours apart, all approved; the clock at Monday 2027-03-01.
/// Answers the sender's and the sequence's ids and each person's profile URL and fate.
async fn month_ahead(app: &TestApp) -> (String, String, BTreeMap<String, Fate>) {
    let send = send_key(app).await;
    let to_start = (START_MS - app.clock.now_ms()) / 1000;
    let moved = app
        .post_json(
            "/sandbox/clock/advance",
            &app.key,
            json!({"seconds": to_start}),
        )
        .await;
    moved.expect(200);
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Berlin", "timezone": ZONE, "working_hours": office_hours()}),
        )
        .await;
    let sender = id_of(sender.expect(201));
    let mut people = BTreeMap::new();
    let mut prospect_ids = Vec::new();
    for n in 0..PEOPLE {
        let url = format!("linkedin.com/in/played-out-{n}");
        let prospect = app
            .post_json(
                "/prospects",
                &app.key,
                json!({"first_name": format!("P{n}"), "profile_url": format!("https://www.{url}")}),
            )
            .await;
        prospect_ids.push(id_of(prospect.expect(201)));
        people.insert(url.clone(), fate(DEFAULT_SANDBOX_SEED, &url));
    }
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({
                "name": "Played out",
                "sender_ids": [sender],
                "steps": [
                    {"type": "connection_request", "delay_hours": 0, "note": "Hi {{first_name}}."},
                    {"type": "message", "delay_hours": 4, "text": "Thanks {{first_name}}!"},
                    {"type": "message", "delay_hours": 4, "text": "Following up, {{first_name}}."},
                ],
            }),
        )
        .await;
    let sequence = id_of(sequence.expect(201));
    app.post_json(
        &format!("/sequences/{sequence}/enrollments"),
        &app.key,
        json!({"prospect_ids": prospect_ids}),
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
    (sender, sequence, people)
}

async fn whole_log(app: &TestApp) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut offset = 0;
    loop {
        let page = app
            .get(&format!("/sandbox/log?limit=200&offset={offset}"), &app.key)
            .await;
        let page = page.expect(200).clone();
        entries.extend(page["items"].as_array().expect("items").iter().cloned());
        match page["next_offset"].as_u64() {
            Some(next) => offset = next,
            None => return entries,
        }
    }
}

#[tokio::test]
async fn one_advance_plays_out_a_month_each_action_at_its_own_time() {
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    let (sender, sequence, people) = month_ahead(&app).await;
    let clock = app.get("/sandbox/clock", &app.key).await;
    let before = at(&clock.expect(200)["now"]);

    let moved = app
        .post_json(
            "/sandbox/clock/advance",
            &app.key,
            json!({"seconds": 30 * 86_400}),
        )
        .await;
    let moved = moved.expect(200).clone();
    let after = at(&moved["now"]);
    assert!(after - before >= 30 * DAY_MS, "{moved}");
    assert!(
        (at(&moved["started_at"]) - before).abs() < 60_000,
        "{moved}"
    );
    // Reading the clock does not move it.
    let read = app.get("/sandbox/clock", &app.key).await;
    let read = read.expect(200).clone();
    assert_eq!(read["test_clock"], true, "{read}");
    assert!(at(&read["now"]) - after < 60_000, "{read}");

    let log = whole_log(&app).await;
    let zone = TimeZone::get(ZONE).expect("a zone");
    let mut per_person: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    let mut invitations_per_day: BTreeMap<i64, u32> = BTreeMap::new();
    let mut last_at = None;
    for entry in &log {
        let time = at(&entry["at"]);
        let kind = entry["kind"].as_str().expect("kind").to_owned();
        assert_eq!(entry["sender_id"], sender.as_str());
        assert!(
            in_office_hours(time, &zone),
            "{kind} at {} outside the sender's hours",
            entry["at"]
        );
        if let Some(last) = last_at {
            assert!(
                time - last >= 30_000,
                "two calls closer than the gap: {entry}"
            );
        }
        last_at = Some(time);
        if kind == "invitation" {
            *invitations_per_day
                .entry(local_midnight(time, &zone))
                .or_default() += 1;
        }
        if entry["outcome"] == "ok" {
            let url = entry["profile_url"].as_str().expect("url").to_owned();
            per_person.entry(url).or_default().push((kind, time));
        }
    }
    assert!(
        invitations_per_day.values().all(|count| *count <= 20),
        "{invitations_per_day:?}"
    );
    // The month held everything: each person went as far as their fate lets them.
    let mut messaged = 0;
    for (url, fate) in &people {
        let calls = per_person.get(url).cloned().unwrap_or_default();
        if fate.unreachable {
            assert!(calls.is_empty(), "{url}: {calls:?}");
            continue;
        }
        let (first, invited_at) = calls
            .first()
            .cloned()
            .expect("every reachable person invited");
        assert_eq!(first, "invitation", "{url}: {calls:?}");
        let messages: Vec<i64> = calls
            .iter()
            .filter(|(kind, _)| kind == "message")
            .map(|(_, time)| *time)
            .collect();
        let Some(accepted_after) = fate.accepts_after_ms else {
            assert!(messages.is_empty(), "{url}: messaged, never accepted");
            continue;
        };
        // Each message at its own time: 4 hours after what came before it, at the earliest.
        let accepted_at = invited_at + accepted_after;
        assert!(!messages.is_empty(), "{url}: accepted, never messaged");
        assert!(messages[0] >= accepted_at + 4 * HOUR_MS, "{url}: {calls:?}");
        messaged += 1;
        match fate.replies_after_ms {
            None => {
                assert_eq!(messages.len(), 2, "{url}: {calls:?}");
                assert!(messages[1] >= messages[0] + 4 * HOUR_MS, "{url}: {calls:?}");
            }
            // A reply stops the sequence: a second message only went before the reply came. An
            // out-of-office notice holds it a week instead (it names no return day).
            Some(reply_after) => {
                assert!(messages.len() <= 2, "{url}: {calls:?}");
                let replied_at = messages[0] + reply_after;
                let held = fate.reply_text == Some(OUT_OF_OFFICE_TEXT);
                if let Some(second) = messages.get(1) {
                    assert!(
                        *second < replied_at || (held && *second >= replied_at + 7 * DAY_MS),
                        "{url}: {calls:?}"
                    );
                }
            }
        }
    }
    assert!(messaged >= 5, "too few accepted people to show anything");

    // The sequence's figures per step are the sandbox log's counts.
    let stats = app
        .get(&format!("/sequences/{sequence}/stats"), &app.key)
        .await;
    let stats = stats.expect(200).clone();
    let steps = stats["steps"].as_array().expect("steps");
    let sent_of = |kind: &str, nth: usize| {
        per_person
            .values()
            .filter(|calls| calls.iter().filter(|(k, _)| k == kind).count() > nth)
            .count() as i64
    };
    // Everyone is invited in the month's first fortnight, so every acceptance falls inside it.
    let accepted = people
        .iter()
        .filter(|(url, fate)| fate.accepts_after_ms.is_some() && per_person.contains_key(*url))
        .count() as i64;
    let unreachable = people.values().filter(|fate| fate.unreachable).count() as i64;
    assert_eq!(steps[0]["type"], "connection_request", "{stats}");
    assert_eq!(steps[0]["sent"], sent_of("invitation", 0), "{stats}");
    assert_eq!(steps[0]["accepted"], accepted, "{stats}");
    assert_eq!(steps[0]["failed"], unreachable, "{stats}");
    assert_eq!(steps[1]["sent"], sent_of("message", 0), "{stats}");
    assert_eq!(steps[2]["sent"], sent_of("message", 1), "{stats}");
    // A reply is counted once, against the step it followed; an out-of-office notice is none.
    let answered = people
        .iter()
        .filter(|(url, fate)| {
            fate.reply_text
                .is_some_and(|text| text != OUT_OF_OFFICE_TEXT)
                && per_person
                    .get(*url)
                    .is_some_and(|calls| calls.iter().any(|(kind, _)| kind == "message"))
        })
        .count() as i64;
    let replied: i64 = steps
        .iter()
        .map(|step| step["replied"].as_i64().expect("replied"))
        .sum();
    assert_eq!(replied, answered, "{stats}");
    // Every enrollment has ended, or waits for a time after the month: nothing due was left.
    let enrollments = app
        .get(
            &format!("/enrollments?sequence_id={sequence}&limit=100"),
            &app.key,
        )
        .await;
    for enrollment in enrollments.expect(200)["items"].as_array().expect("items") {
        if let Some(next) = enrollment["next_step_at"].as_str() {
            assert!(
                parse_rfc3339(next).expect("a time") >= after - 60_000,
                "{enrollment}"
            );
        }
    }
}

#[tokio::test]
async fn a_month_in_one_call_is_the_month_in_daily_calls() {
    let one = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    let daily = spawn_app_on_test_clock_with(|_| {}).await;
    let mut counts = Vec::new();
    for (app, calls, seconds) in [(&one, 1, 30 * 86_400), (&daily, 30, 86_400)] {
        month_ahead(app).await;
        for _ in 0..calls {
            app.post_json(
                "/sandbox/clock/advance",
                &app.key,
                json!({"seconds": seconds}),
            )
            .await
            .expect(200);
        }
        let mut per_kind: BTreeMap<(String, String), u32> = BTreeMap::new();
        for entry in whole_log(app).await {
            let key = (
                entry["kind"].as_str().expect("kind").to_owned(),
                entry["profile_url"].as_str().expect("url").to_owned(),
            );
            *per_kind.entry(key).or_default() += 1;
        }
        counts.push(per_kind);
    }
    // Messages to people who replied may differ by the second message's race with the reply;
    // everyone else gets the same calls, whether the month is played in one call or thirty (the
    // second app with its job workers running beside the play-out).
    let replies: Vec<String> = (0..PEOPLE)
        .map(|n| format!("linkedin.com/in/played-out-{n}"))
        .filter(|url| fate(DEFAULT_SANDBOX_SEED, url).replies_after_ms.is_some())
        .collect();
    let keep = |counts: &BTreeMap<(String, String), u32>| -> BTreeMap<(String, String), u32> {
        counts
            .iter()
            .filter(|((kind, url), _)| kind != "message" || !replies.contains(url))
            .map(|(key, count)| (key.clone(), *count))
            .collect()
    };
    assert_eq!(keep(&counts[0]), keep(&counts[1]));
}

#[tokio::test]
async fn concurrent_advances_each_move_the_clock_by_their_amount() {
    let app = spawn_app_on_test_clock_with(|_| {}).await;
    let before = at(&app.get("/sandbox/clock", &app.key).await.expect(200)["now"]);
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (client, base, key) = (app.client.clone(), app.base_url.clone(), app.key.clone());
        calls.spawn(async move {
            client
                .post(format!("{base}/api/v1/sandbox/clock/advance"))
                .bearer_auth(key)
                .json(&json!({"seconds": 7200}))
                .send()
                .await
                .expect("send")
                .status()
                .as_u16()
        });
    }
    let statuses = calls.join_all().await;
    assert!(statuses.iter().all(|&status| status == 200), "{statuses:?}");
    let now = at(&app.get("/sandbox/clock", &app.key).await.expect(200)["now"]);
    assert!(now - before >= 4 * 7_200_000, "{}", now - before);
    assert!(now - before < 4 * 7_200_000 + 60_000, "{}", now - before);
}

#[tokio::test]
async fn get_clock_without_a_test_clock_reads_the_systems_time() {
    let app = spawn_app().await;
    let read = app.get("/sandbox/clock", &app.key).await;
    let read = read.expect(200).clone();
    assert_eq!(read["test_clock"], false, "{read}");
    assert_eq!(read["ahead_seconds"], 0, "{read}");
    let refused = app
        .post_json("/sandbox/clock/advance", &app.key, json!({"seconds": 60}))
        .await;
    assert!(
        refused
            .expect_error(409, "invalid_state")
            .contains("--test-clock")
    );
}
