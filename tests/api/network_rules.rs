//! What the network saw, checked against the rules a sender promises, from the sandbox's own log
//! (not from what the engine believes it did): every call inside the sender's working hours,
//! every two calls of a sender at least 30 s apart (refused calls included: the network saw
//! them), no limit exceeded by the network's count of what it performed, and every step of an
//! enrollment performed at most once. The working hours are read here independently of the
//! engine's own scheduling code: a local wall-clock time against the stored windows.

use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use outreach_actions::senders::limits::Limits;
use outreach_actions::senders::{Window, WorkingHours};
use sqlx::Row;

use crate::helpers::TestApp;

/// The least time between two calls of one sender.
pub const GAP_MS: i64 = 30_000;
const DAY_MS: i64 = 86_400_000;

/// One call in the sandbox's log, with the step its intent was for.
#[derive(Debug, Clone)]
pub struct Call {
    pub sender_id: String,
    pub kind: String,
    pub outcome: String,
    pub at: i64,
    pub step: Option<(String, i64)>,
}

/// Every call the sandbox logged for the app's workspace, in order.
pub async fn calls(app: &TestApp) -> Vec<Call> {
    sqlx::query(
        "select l.sender_id, l.kind, l.outcome, l.at, i.enrollment_id, i.step_index \
         from sandbox_log l left join outbound_intents i on i.id = l.intent_token \
         where l.workspace_id = $1 order by l.at, l.id",
    )
    .bind(&app.workspace_id)
    .fetch_all(app.db.pool())
    .await
    .expect("read the sandbox log")
    .iter()
    .map(|row| Call {
        sender_id: row.get("sender_id"),
        kind: row.get("kind"),
        outcome: row.get("outcome"),
        at: row.get("at"),
        step: row
            .get::<Option<String>, _>("enrollment_id")
            .zip(row.get::<Option<i64>, _>("step_index")),
    })
    .collect()
}

struct Sender {
    zone: TimeZone,
    hours: WorkingHours,
    limits: Limits,
    created_at: i64,
}

async fn senders(app: &TestApp) -> BTreeMap<String, Sender> {
    sqlx::query(
        "select id, timezone, working_hours, limits, created_at from senders where workspace_id = $1",
    )
    .bind(&app.workspace_id)
    .fetch_all(app.db.pool())
    .await
    .expect("read the senders")
    .iter()
    .map(|row| {
        let zone: String = row.get("timezone");
        let hours: String = row.get("working_hours");
        let limits: String = row.get("limits");
        (
            row.get("id"),
            Sender {
                zone: TimeZone::get(&zone).expect("a stored zone"),
                hours: serde_json::from_str(&hours).expect("stored working hours"),
                limits: serde_json::from_str(&limits).expect("stored limits"),
                created_at: row.get("created_at"),
            },
        )
    })
    .collect()
}

fn local(at: i64, zone: &TimeZone) -> jiff::Zoned {
    jiff::Timestamp::from_millisecond(at)
        .expect("a valid instant")
        .to_zoned(zone.clone())
}

fn minutes(hhmm: &str) -> i32 {
    let (h, m) = hhmm.split_once(':').expect("HH:MM");
    h.parse::<i32>().expect("hours") * 60 + m.parse::<i32>().expect("minutes")
}

/// Whether the wall clock in the sender's zone shows a time inside one of that weekday's windows.
fn inside_hours(at: i64, sender: &Sender) -> bool {
    let wall = local(at, &sender.zone);
    let hours = &sender.hours;
    let day: &[Window] = match wall.weekday().to_monday_one_offset() {
        1 => &hours.monday,
        2 => &hours.tuesday,
        3 => &hours.wednesday,
        4 => &hours.thursday,
        5 => &hours.friday,
        6 => &hours.saturday,
        _ => &hours.sunday,
    };
    let now = i32::from(wall.hour()) * 60 + i32::from(wall.minute());
    day.iter()
        .any(|window| minutes(&window.start) <= now && now < minutes(&window.end))
}

/// Asserts the four rules over everything the network saw; returns the calls for more checks.
pub async fn assert_network_rules(app: &TestApp, context: &str) -> Vec<Call> {
    let calls = calls(app).await;
    let senders = senders(app).await;
    let mut last: BTreeMap<&str, &Call> = BTreeMap::new();
    let mut performed: BTreeMap<(String, i64), i64> = BTreeMap::new();
    for (index, call) in calls.iter().enumerate() {
        let sender = senders
            .get(&call.sender_id)
            .unwrap_or_else(|| panic!("{context}: a call by an unknown sender {call:?}"));
        assert!(
            inside_hours(call.at, sender),
            "{context}: {} by {} at {} (its local time), outside its working hours",
            call.kind,
            call.sender_id,
            local(call.at, &sender.zone)
        );
        if let Some(previous) = last.insert(&call.sender_id, call) {
            assert!(
                call.at - previous.at >= GAP_MS,
                "{context}: sender {} called the network {} ms after its previous call \
                 ({} `{}` then {} `{}`); the gap is at least {GAP_MS} ms",
                call.sender_id,
                call.at - previous.at,
                previous.kind,
                previous.outcome,
                call.kind,
                call.outcome
            );
        }
        if call.outcome != "ok" {
            continue;
        }
        if let Some(step) = &call.step {
            let earlier = performed.insert(step.clone(), call.at);
            assert!(
                earlier.is_none(),
                "{context}: step {} of {} was performed twice (at {earlier:?} and {})",
                step.1,
                step.0,
                call.at
            );
        }
        // Limits, by the network's own count of what it performed, against the limits in force
        // at the instant (warm-up included).
        let limits = sender.limits.effective(sender.created_at, call.at);
        let (daily, weekly) = match call.kind.as_str() {
            "invitation" => (
                limits.connection_requests_per_day,
                Some(limits.connection_requests_per_week),
            ),
            "message" => (limits.messages_per_day, None),
            "profile_view" => (limits.profile_views_per_day, None),
            _ => continue,
        };
        let midnight = local(call.at, &sender.zone)
            .start_of_day()
            .expect("a local midnight")
            .timestamp()
            .as_millisecond();
        let mine = calls[..=index]
            .iter()
            .filter(|c| c.sender_id == call.sender_id && c.kind == call.kind && c.outcome == "ok");
        let today = mine.clone().filter(|c| c.at >= midnight).count();
        let week = mine.filter(|c| c.at > call.at - 7 * DAY_MS).count();
        assert!(
            today <= daily as usize,
            "{context}: sender {} performed its {today}th {} of the local day {}, over the limit {daily}",
            call.sender_id,
            call.kind,
            local(call.at, &sender.zone).date()
        );
        if let Some(weekly) = weekly {
            assert!(
                week <= weekly as usize,
                "{context}: sender {} performed its {week}th {} in 7 days at {}, over the limit {weekly}",
                call.sender_id,
                call.kind,
                local(call.at, &sender.zone)
            );
        }
    }
    calls
}
