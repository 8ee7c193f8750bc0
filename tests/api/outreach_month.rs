//! A simulated month of outreach through the real API and the sandbox network, with the shared
//! test clock moved from 2027-03-01 (the month spans the US and the EU spring DST changes):
//! three senders in three zones with office hours and the default limits (so the warm-up ramp
//! applies), 600 imported prospects, two sequences, one approved whole and one in part. Every
//! assertion reads the sandbox's own log, so it checks what reached the network, not what the
//! engine believes it did.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::tz::TimeZone;
use outreach_actions::network::DEFAULT_SANDBOX_SEED;
use outreach_actions::network::sandbox::fate;
use outreach_actions::senders::limits::{DEFAULT_LIMITS, Limits};
use serde_json::{Value, json};
use sqlx::Row;

use crate::helpers::TestApp;
use crate::outreach::{advance, no_worker_app, settle};
use crate::sequences::send_key;
use crate::webhooks::{Receiver, make_endpoint, verify};

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;
const DAY_MS: i64 = 24 * HOUR_MS;
/// 2027-03-01T00:00:00Z, a Monday.
pub(crate) const START_MS: i64 = 1_803_859_200_000;
const DAYS: i64 = 31;
/// Prospects of sequence A (two senders, all approved) and of sequence B (one sender).
const A_PROSPECTS: usize = 400;
const B_PROSPECTS: usize = 200;
/// How many of B's enrollments are approved; the rest wait and must never be contacted.
const B_APPROVED: usize = 120;
/// Sequence A lets an invitation wait this long for its acceptance.
const EXIT_DAYS: i64 = 7;
/// The clock's step inside anyone's working hours, and outside them.
const WORK_STEP_MS: i64 = 20 * MINUTE_MS;
const IDLE_STEP_MS: i64 = HOUR_MS;

pub(crate) fn office_hours() -> Value {
    let day = json!([{"start": "09:00", "end": "17:00"}]);
    json!({"monday": day, "tuesday": day, "wednesday": day, "thursday": day, "friday": day, "saturday": [], "sunday": []})
}

pub(crate) fn zoned(at_ms: i64, zone: &TimeZone) -> jiff::Zoned {
    jiff::Timestamp::from_millisecond(at_ms)
        .expect("a valid instant")
        .to_zoned(zone.clone())
}

/// Mon-Fri 09:00 to 17:00 in `zone`.
pub(crate) fn in_office_hours(at_ms: i64, zone: &TimeZone) -> bool {
    let local = zoned(at_ms, zone);
    let weekday = local.weekday().to_monday_one_offset();
    weekday <= 5 && (9..17).contains(&local.hour())
}

pub(crate) fn local_midnight(at_ms: i64, zone: &TimeZone) -> i64 {
    zoned(at_ms, zone)
        .start_of_day()
        .expect("a local midnight")
        .timestamp()
        .as_millisecond()
}

fn id_of(response: &Value) -> String {
    response["id"].as_str().expect("an id").to_owned()
}

async fn post(app: &TestApp, key: &str, path: &str, body: Value) -> Value {
    let response = app.post_json(path, key, body).await;
    assert!(
        response.status.is_success(),
        "POST {path}: {} {}",
        response.status,
        response.body
    );
    response.body.clone()
}

/// Imports `count` people with distinct profile URLs into a new list; returns the list's id.
async fn import(app: &TestApp, list: &str, count: usize) -> String {
    let rows: Vec<Value> = (0..count)
        .map(|n| {
            json!({
                "first_name": format!("P{n}"),
                "last_name": list,
                "company_name": "Sim",
                "profile_url": format!("https://www.linkedin.com/in/sim-{list}-{n}"),
            })
        })
        .collect();
    let imported = post(
        app,
        &app.key,
        "/imports",
        json!({"rows": rows, "list_name": list}),
    )
    .await;
    assert_eq!(imported["status"], "completed", "{imported}");
    imported["list_id"].as_str().expect("list id").to_owned()
}

/// One line of the sandbox's log, with the intent's enrollment and step when it had one.
#[derive(Debug, Clone)]
struct Line {
    sender_id: String,
    prospect_id: String,
    kind: String,
    outcome: String,
    at: i64,
    enrollment_id: Option<String>,
    step_index: Option<i64>,
}

async fn sandbox_log(app: &TestApp) -> Vec<Line> {
    let rows = sqlx::query(
        "select l.sender_id, l.prospect_id, l.kind, l.outcome, l.at, i.enrollment_id, i.step_index \
         from sandbox_log l left join outbound_intents i on i.id = l.intent_token \
         where l.workspace_id = $1 order by l.at, l.id",
    )
    .bind(&app.workspace_id)
    .fetch_all(app.db.pool())
    .await
    .expect("read the sandbox log");
    rows.iter()
        .map(|row| Line {
            sender_id: row.get("sender_id"),
            prospect_id: row
                .get::<Option<String>, _>("prospect_id")
                .unwrap_or_default(),
            kind: row.get("kind"),
            outcome: row.get("outcome"),
            at: row.get("at"),
            enrollment_id: row.get("enrollment_id"),
            step_index: row.get("step_index"),
        })
        .collect()
}

struct Sender {
    id: String,
    zone: TimeZone,
    created_ms: i64,
}

/// What the scenario did at which time, to check against the log.
#[derive(Default)]
struct Interventions {
    /// Sequence B paused at, resumed at, stopped at.
    b_paused: Option<i64>,
    b_resumed: Option<i64>,
    b_stopped: Option<i64>,
    /// A's enrollments paused, with the time.
    paused_enrollments: Vec<(String, i64)>,
    /// Prospects made to answer through `sandbox_reply`.
    injected_replies: Vec<String>,
}

#[tokio::test]
async fn a_month_of_outreach_keeps_every_limit_hour_and_approval() {
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    app.grant_credits(10_000).await;
    let to_start = (START_MS - app.clock.now_ms()) / 1000;
    assert!(to_start > 0, "the test clock is already past March 2027");
    advance(&app, to_start).await;
    // An endpoint that takes every event type: each event of the month must reach it, once.
    let receiver = Receiver::start().await;
    let (_, secret) = make_endpoint(&app, &receiver.url, &[]).await;

    let mut senders = Vec::new();
    for (name, zone) in [
        ("Berlin", "Europe/Berlin"),
        ("New York", "America/New_York"),
        ("Tokyo", "Asia/Tokyo"),
    ] {
        let created = post(
            &app,
            &app.key,
            "/senders",
            json!({"name": name, "timezone": zone, "working_hours": office_hours()}),
        )
        .await;
        let id = id_of(&created);
        let created_ms: i64 = sqlx::query("select created_at from senders where id = $1")
            .bind(&id)
            .fetch_one(app.db.pool())
            .await
            .expect("sender")
            .get("created_at");
        senders.push(Sender {
            id,
            zone: TimeZone::get(zone).expect("a zone"),
            created_ms,
        });
    }

    let list_a = import(&app, "a", A_PROSPECTS).await;
    let list_b = import(&app, "b", B_PROSPECTS).await;
    let seq_a = id_of(
        &post(
            &app,
            &app.key,
            "/sequences",
            json!({
                "name": "A",
                "sender_ids": [senders[0].id, senders[1].id],
                "settings": {"exit_after_days_without_acceptance": EXIT_DAYS},
                "steps": [
                    {"type": "connection_request", "delay_hours": 0, "note": "Hi {{first_name}}, glad to connect."},
                    {"type": "message", "delay_hours": 24, "text": "Thanks {{first_name}}! How is {{company_name}}?"},
                    {"type": "message", "delay_hours": 72, "text": "Following up, {{first_name}}."},
                ],
            }),
        )
        .await,
    );
    let seq_b = id_of(
        &post(
            &app,
            &app.key,
            "/sequences",
            json!({
                "name": "B",
                "sender_ids": [senders[2].id],
                "schedule": {"respect_prospect_timezone": true},
                "steps": [
                    {"type": "view_profile", "delay_hours": 0},
                    {"type": "connection_request", "delay_hours": 24},
                    {"type": "message", "delay_hours": 48, "text": "Hello {{first_name}}, thanks for connecting."},
                ],
            }),
        )
        .await,
    );
    let added_a = post(
        &app,
        &app.key,
        &format!("/sequences/{seq_a}/enrollments"),
        json!({"list_id": list_a}),
    )
    .await;
    assert_eq!(added_a["added"], A_PROSPECTS, "{}", added_a["skipped"]);
    let added_b = post(
        &app,
        &app.key,
        &format!("/sequences/{seq_b}/enrollments"),
        json!({"list_id": list_b}),
    )
    .await;
    assert_eq!(added_b["added"], B_PROSPECTS, "{}", added_b["skipped"]);
    for sequence in [&seq_a, &seq_b] {
        post(
            &app,
            &send,
            &format!("/sequences/{sequence}/activate"),
            json!({}),
        )
        .await;
    }
    post(
        &app,
        &send,
        "/approvals/approve",
        json!({"sequence_id": seq_a}),
    )
    .await;
    let b_items = added_b["enrollments"].as_array().expect("enrollments");
    let approved_b: Vec<String> = b_items[..B_APPROVED]
        .iter()
        .map(|e| e["approval_id"].as_str().expect("approval id").to_owned())
        .collect();
    post(
        &app,
        &send,
        "/approvals/approve",
        json!({"ids": approved_b}),
    )
    .await;
    let unapproved: BTreeSet<String> = b_items[B_APPROVED..]
        .iter()
        .map(|e| e["prospect_id"].as_str().expect("prospect id").to_owned())
        .collect();
    let prospect_url: HashMap<String, String> =
        sqlx::query("select id, profile_url from prospects where workspace_id = $1")
            .bind(&app.workspace_id)
            .fetch_all(app.db.pool())
            .await
            .expect("prospects")
            .iter()
            .map(|row| (row.get("id"), row.get("profile_url")))
            .collect();
    settle(&app).await;

    // The month, in steps: short inside anyone's office hours, longer outside them.
    let mut done = Interventions::default();
    let end = START_MS + DAYS * DAY_MS;
    while app.clock.now_ms() < end {
        let now = app.clock.now_ms();
        let day = (now - START_MS) / DAY_MS;
        intervene(&app, &send, &seq_a, &seq_b, &senders, day, now, &mut done).await;
        let working = senders.iter().any(|s| in_office_hours(now, &s.zone));
        let step = if working { WORK_STEP_MS } else { IDLE_STEP_MS };
        advance(&app, step / 1000).await;
    }
    settle(&app).await;

    check(
        &app,
        &senders,
        &seq_a,
        &seq_b,
        &unapproved,
        &prospect_url,
        &done,
    )
    .await;
    check_webhooks(&app, &receiver, &secret).await;
}

/// Every event of the month reached the endpoint once, signed, as the events table holds it.
async fn check_webhooks(app: &TestApp, receiver: &Receiver, secret: &str) {
    let events: BTreeMap<String, String> =
        sqlx::query("select id, type from events where workspace_id = $1")
            .bind(&app.workspace_id)
            .fetch_all(app.db.pool())
            .await
            .expect("events")
            .iter()
            .map(|row| (row.get("id"), row.get("type")))
            .collect();
    let received = receiver.received();
    let mut arrived: BTreeMap<String, String> = BTreeMap::new();
    for got in &received {
        verify(secret, got);
        let body = got.json();
        let id = got.header("webhook-id").to_owned();
        assert_eq!(body["id"], json!(id));
        let kind = body["type"].as_str().expect("a type").to_owned();
        assert!(
            arrived.insert(id.clone(), kind).is_none(),
            "{id} arrived twice"
        );
    }
    assert_eq!(
        arrived, events,
        "the events delivered are the events written"
    );
    let by_type = |map: &BTreeMap<String, String>| {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for kind in map.values() {
            *counts.entry(kind.clone()).or_default() += 1;
        }
        counts
    };
    let counts = by_type(&arrived);
    for kind in [
        "connection.requested",
        "connection.accepted",
        "message.sent",
        "message.received",
        "enrollment.started",
        "enrollment.replied",
        "enrollment.finished",
        "approval.requested",
    ] {
        assert!(
            counts.get(kind).is_some_and(|n| *n > 0),
            "no {kind}: {counts:?}"
        );
    }
    let invitations: i64 = sqlx::query_scalar(
        "select count(*) from sandbox_log where workspace_id = $1 and kind = 'invitation' and outcome = 'ok'",
    )
    .bind(&app.workspace_id)
    .fetch_one(app.db.pool())
    .await
    .expect("invitations in the sandbox log");
    assert_eq!(
        counts.get("connection.requested").copied().unwrap_or(0) as i64,
        invitations,
        "one connection.requested per invitation the network took"
    );
    let pending: i64 =
        sqlx::query_scalar("select count(*) from webhook_deliveries where status <> 'succeeded'")
            .fetch_one(app.db.pool())
            .await
            .expect("deliveries");
    assert_eq!(pending, 0, "every delivery succeeded");
    println!(
        "webhooks: {} events delivered once each: {counts:?}",
        arrived.len()
    );
}

/// The scenario's interventions, each once, on the day it is due.
#[allow(clippy::too_many_arguments)]
async fn intervene(
    app: &TestApp,
    send: &str,
    seq_a: &str,
    seq_b: &str,
    senders: &[Sender],
    day: i64,
    now: i64,
    done: &mut Interventions,
) {
    // Day 4: three of A's invited enrollments are paused.
    if day >= 4 && done.paused_enrollments.is_empty() {
        let rows = sqlx::query(
            "select id from enrollments where sequence_id = $1 and status = 'active' order by id limit 3",
        )
        .bind(seq_a)
        .fetch_all(app.db.pool())
        .await
        .expect("active enrollments");
        for row in rows {
            let id: String = row.get("id");
            post(app, send, &format!("/enrollments/{id}/pause"), json!({})).await;
            done.paused_enrollments.push((id, now));
        }
        assert!(
            !done.paused_enrollments.is_empty(),
            "nothing active on day 4"
        );
    }
    // Day 6: five connected people of A who would never answer answer now.
    if day >= 6 && done.injected_replies.is_empty() {
        let rows = sqlx::query(
            "select e.prospect_id, e.sender_id, p.profile_url from enrollments e join prospects p on p.id = e.prospect_id \
             where e.sequence_id = $1 and e.status = 'active' and e.accepted_at is not null order by e.id",
        )
        .bind(seq_a)
        .fetch_all(app.db.pool())
        .await
        .expect("accepted enrollments");
        for row in rows {
            let url: String = row.get("profile_url");
            if fate(DEFAULT_SANDBOX_SEED, &url).replies_after_ms.is_some() {
                continue;
            }
            let prospect: String = row.get("prospect_id");
            let sender: String = row.get("sender_id");
            post(
                app,
                &app.key,
                "/sandbox/replies",
                json!({"prospect_id": prospect, "sender_id": sender, "text": "Not now, thanks."}),
            )
            .await;
            done.injected_replies.push(prospect);
            if done.injected_replies.len() == 5 {
                break;
            }
        }
        assert!(
            !done.injected_replies.is_empty(),
            "nobody connected by day 6"
        );
        settle(app).await;
    }
    // Day 9 (a Wednesday, inside Tokyo's hours or not): B pauses; day 12 it resumes; day 20 it stops.
    if day >= 9 && done.b_paused.is_none() {
        post(app, send, &format!("/sequences/{seq_b}/pause"), json!({})).await;
        done.b_paused = Some(now);
    }
    if day >= 12 && done.b_resumed.is_none() {
        post(app, send, &format!("/sequences/{seq_b}/resume"), json!({})).await;
        done.b_resumed = Some(now);
    }
    if day >= 20 && done.b_stopped.is_none() {
        post(app, send, &format!("/sequences/{seq_b}/stop"), json!({})).await;
        done.b_stopped = Some(now);
    }
    let _ = senders;
}

/// Every assertion of the month, from the sandbox's log.
async fn check(
    app: &TestApp,
    senders: &[Sender],
    seq_a: &str,
    seq_b: &str,
    unapproved: &BTreeSet<String>,
    prospect_url: &HashMap<String, String>,
    done: &Interventions,
) {
    let log = sandbox_log(app).await;
    let sent: Vec<&Line> = log.iter().filter(|l| l.outcome == "ok").collect();
    let count = |kind: &str| sent.iter().filter(|l| l.kind == kind).count();
    println!(
        "month: {} calls logged; {} invitations, {} messages, {} profile views",
        log.len(),
        count("invitation"),
        count("message"),
        count("profile_view")
    );
    assert!(
        count("invitation") > 200,
        "too few invitations to mean anything"
    );
    assert!(count("message") > 100, "too few messages to mean anything");
    assert!(count("profile_view") > 50, "too few profile views");

    // Limits, per sender: each counted action was within the limit in force at its instant
    // (warm-up included), for the local day and the rolling 7 days.
    for sender in senders {
        let mine: Vec<&&Line> = sent.iter().filter(|l| l.sender_id == sender.id).collect();
        for (index, line) in mine.iter().enumerate() {
            let limits: Limits = DEFAULT_LIMITS.effective(sender.created_ms, line.at);
            let midnight = local_midnight(line.at, &sender.zone);
            let today = mine[..=index]
                .iter()
                .filter(|l| l.kind == line.kind && l.at >= midnight)
                .count();
            let week = mine[..=index]
                .iter()
                .filter(|l| l.kind == line.kind && l.at > line.at - 7 * DAY_MS)
                .count();
            let (daily, weekly) = match line.kind.as_str() {
                "invitation" => (
                    limits.connection_requests_per_day,
                    Some(limits.connection_requests_per_week),
                ),
                "message" => (limits.messages_per_day, None),
                "profile_view" => (limits.profile_views_per_day, None),
                other => panic!("an unexpected kind `{other}` in the log"),
            };
            let local = zoned(line.at, &sender.zone);
            assert!(
                today <= daily as usize,
                "sender {} sent its {today}th {} of {} (local day) over the limit {daily}",
                sender.id,
                line.kind,
                local
            );
            if let Some(weekly) = weekly {
                assert!(
                    week <= weekly as usize,
                    "sender {} sent its {week}th {} in 7 days at {local}, over the limit {weekly}",
                    sender.id,
                    line.kind
                );
            }
        }
    }

    // Working hours: every call (refused or not) inside Mon-Fri 09-17 in the sender's zone.
    for line in &log {
        let sender = senders
            .iter()
            .find(|s| s.id == line.sender_id)
            .expect("a known sender");
        assert!(
            in_office_hours(line.at, &sender.zone),
            "{} by {} at {} (local), outside office hours",
            line.kind,
            line.sender_id,
            zoned(line.at, &sender.zone)
        );
    }
    // The US change (2027-03-14, 02:00 EST) happened while New York was sending: its sends on
    // both sides were checked above against the local hours of each side.
    let us_change = 1_805_007_600_000; // 2027-03-14T07:00Z
    let new_york = &senders[1].id;
    assert!(
        sent.iter()
            .any(|l| &l.sender_id == new_york && l.at < us_change)
            && sent
                .iter()
                .any(|l| &l.sender_id == new_york && l.at > us_change),
        "New York did not send on both sides of its DST change"
    );

    // Approval: nobody whose enrollment waits for approval was contacted.
    for line in &log {
        assert!(
            !unapproved.contains(&line.prospect_id),
            "{} sent to {} who was never approved",
            line.kind,
            line.prospect_id
        );
    }
    // (Stopping B ended them; none was ever approved.)
    let waiting: i64 = sqlx::query(
        "select count(*) as n from enrollments where sequence_id = $1 and approved_at is null \
         and (status = 'awaiting_approval' or exit_reason = 'stopped')",
    )
    .bind(seq_b)
    .fetch_one(app.db.pool())
    .await
    .expect("count")
    .get("n");
    assert_eq!(waiting as usize, B_PROSPECTS - B_APPROVED);

    // Exactly once: every (enrollment, step) at most once in the log, every line with its intent.
    let mut seen = BTreeMap::new();
    for line in &log {
        let enrollment = line
            .enrollment_id
            .clone()
            .unwrap_or_else(|| panic!("a log line without an enrollment's intent: {line:?}"));
        let step = line.step_index.expect("a step index");
        if let Some(earlier) = seen.insert((enrollment.clone(), step), line.at) {
            panic!(
                "step {step} of {enrollment} reached the network twice (at {earlier} and {})",
                line.at
            );
        }
    }

    // Replies stop their enrollment: nothing to a person after their first answer. An
    // out-of-office notice is no answer: it holds the person's enrollments for a week (the
    // sandbox's notice names no return day), and nothing goes to them in that week.
    let mut replies: HashMap<String, i64> = HashMap::new();
    let mut away: HashMap<String, i64> = HashMap::new();
    for row in sqlx::query(
        "select c.prospect_id, m.at, m.text from messages m join conversations c on c.id = m.conversation_id \
         where m.workspace_id = $1 and m.direction = 'inbound' order by m.at",
    )
    .bind(&app.workspace_id)
    .fetch_all(app.db.pool())
    .await
    .expect("replies")
    {
        let (prospect, at, text): (String, i64, String) =
            (row.get("prospect_id"), row.get("at"), row.get("text"));
        let out_of_office = outreach_actions::reply_reading::classify(&text).0
            == outreach_actions::conversations::Classification::OutOfOffice;
        let seen = if out_of_office { &mut away } else { &mut replies };
        seen.entry(prospect).or_insert(at);
    }
    for line in &log {
        if let Some(at) = away.get(&line.prospect_id) {
            assert!(
                line.at <= *at || line.at >= at + 7 * DAY_MS,
                "{} went to {} while they were held out of office",
                line.kind,
                line.prospect_id
            );
        }
    }
    assert!(replies.len() > 10, "too few replies: {}", replies.len());
    for prospect in &done.injected_replies {
        assert!(
            replies.contains_key(prospect),
            "the injected reply of {prospect} is missing"
        );
    }
    for line in &log {
        if let Some(at) = replies.get(&line.prospect_id) {
            assert!(
                line.at <= *at,
                "{} went to {} after their reply",
                line.kind,
                line.prospect_id
            );
        }
    }
    // Each person who answered: their enrollment ended `replied`, or had ended before the answer.
    for (prospect, at) in &replies {
        let row = sqlx::query(
            "select e.id, e.status, e.exit_reason, \
             (select max(v.at) from enrollment_events v where v.enrollment_id = e.id and v.kind = 'finished') as finished_at \
             from enrollments e where e.prospect_id = $1",
        )
        .bind(prospect)
        .fetch_one(app.db.pool())
        .await
        .expect("the enrollment of a person who answered");
        let id: String = row.get("id");
        let status: String = row.get("status");
        let reason: Option<String> = row.get("exit_reason");
        let finished_at: Option<i64> = row.get("finished_at");
        let ended_before = finished_at.is_some_and(|finished| finished <= *at);
        assert!(
            status == "finished" && (reason.as_deref() == Some("replied") || ended_before),
            "{id} is `{status}` ({reason:?}) after its person answered"
        );
    }

    // Not accepted: A's invitations without acceptance end exactly after the deadline, never
    // for someone the sandbox has accept in time, and all that are due have ended.
    let invited: Vec<(String, String, String, i64)> = log
        .iter()
        .filter(|l| l.kind == "invitation" && l.outcome == "ok")
        .map(|l| {
            (
                l.enrollment_id.clone().expect("enrollment"),
                l.prospect_id.clone(),
                l.sender_id.clone(),
                l.at,
            )
        })
        .collect();
    let mut exits = 0;
    for (enrollment, prospect, _sender, invited_at) in &invited {
        let row = sqlx::query(
            "select e.sequence_id, e.status, e.exit_reason, \
             (select max(at) from enrollment_events v where v.enrollment_id = e.id and v.kind = 'finished') as finished_at \
             from enrollments e where e.id = $1",
        )
        .bind(enrollment)
        .fetch_one(app.db.pool())
        .await
        .expect("enrollment");
        let sequence: String = row.get("sequence_id");
        let reason: Option<String> = row.get("exit_reason");
        let finished_at: Option<i64> = row.get("finished_at");
        let accepts = fate(DEFAULT_SANDBOX_SEED, &prospect_url[prospect]).accepts_after_ms;
        if sequence != seq_a
            || done
                .paused_enrollments
                .iter()
                .any(|(id, _)| id == enrollment)
        {
            continue;
        }
        let deadline = invited_at + EXIT_DAYS * DAY_MS;
        match accepts {
            Some(_) => assert_ne!(
                reason.as_deref(),
                Some("not_accepted"),
                "{enrollment} exited although its invitation was accepted"
            ),
            None if deadline + IDLE_STEP_MS < START_MS + DAYS * DAY_MS => {
                let at = finished_at.unwrap_or_else(|| {
                    panic!("{enrollment} was not accepted and never exited ({reason:?})")
                });
                assert_eq!(reason.as_deref(), Some("not_accepted"), "{enrollment}");
                assert!(
                    at >= deadline && at <= deadline + IDLE_STEP_MS,
                    "{enrollment} exited at {at}, not at its deadline {deadline}"
                );
                exits += 1;
            }
            None => {}
        }
    }
    assert!(exits > 20, "too few not_accepted exits: {exits}");

    // Pause, resume, stop: nothing of B between its pause and its resumption, nor after its stop;
    // nothing to a paused enrollment after its pause; B sent again after resuming.
    let b_lines: Vec<&Line> = {
        let b: BTreeSet<String> = sqlx::query("select id from enrollments where sequence_id = $1")
            .bind(seq_b)
            .fetch_all(app.db.pool())
            .await
            .expect("b")
            .iter()
            .map(|row| row.get("id"))
            .collect();
        log.iter()
            .filter(|l| l.enrollment_id.as_ref().is_some_and(|e| b.contains(e)))
            .collect()
    };
    let (paused, resumed, stopped) = (
        done.b_paused.expect("paused"),
        done.b_resumed.expect("resumed"),
        done.b_stopped.expect("stopped"),
    );
    for line in &b_lines {
        assert!(
            !(line.at > paused && line.at <= resumed),
            "B sent {} while paused",
            line.kind
        );
        assert!(line.at <= stopped, "B sent {} after it stopped", line.kind);
    }
    assert!(
        b_lines.iter().any(|l| l.at > resumed && l.at <= stopped),
        "B never sent again after resuming"
    );
    let live_b: i64 = sqlx::query(
        "select count(*) as n from enrollments where sequence_id = $1 and status in ('scheduled', 'active', 'paused')",
    )
    .bind(seq_b)
    .fetch_one(app.db.pool())
    .await
    .expect("count")
    .get("n");
    assert_eq!(live_b, 0, "a stopped sequence keeps live enrollments");
    for (enrollment, at) in &done.paused_enrollments {
        assert!(
            !log.iter()
                .any(|l| l.enrollment_id.as_ref() == Some(enrollment) && l.at > *at),
            "{enrollment} got a step after its pause"
        );
    }
}
