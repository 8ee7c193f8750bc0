//! The engine's month, run against the fake Unipile instead of the sandbox: two senders in two
//! zones with office hours and the default limits (the warm-up applies), 60 approved prospects and
//! 20 whose enrollments wait for an approval that never comes, from 2027-03-01 for 31 days. People
//! act as on the real network: a third never answer, the others accept some hours after the
//! invitation (half of them heard only by the poller), and some reply to the first message. Every
//! assertion reads the fake's record of the work it did, so it checks what reached Unipile: the
//! limits, the working hours, nothing unapproved, each step at most once, nothing after a reply.

use std::collections::{BTreeMap, BTreeSet};

use jiff::tz::TimeZone;
use outreach_actions::senders::limits::{DEFAULT_LIMITS, Limits};
use serde_json::json;

use crate::fake_unipile::Done;
use crate::outreach_month::{START_MS, in_office_hours, local_midnight, office_hours, zoned};
use crate::unipile::World;

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 60 * MINUTE_MS;
const DAY_MS: i64 = 24 * HOUR_MS;
const DAYS: i64 = 31;
const APPROVED: usize = 60;
const UNAPPROVED: usize = 20;
/// How long after its invitation a person who accepts does.
const ACCEPTS_AFTER_MS: i64 = 5 * HOUR_MS;
/// How long after the first message a person who replies does.
const REPLIES_AFTER_MS: i64 = 3 * HOUR_MS;
const WORK_STEP_MS: i64 = 30 * MINUTE_MS;
const IDLE_STEP_MS: i64 = 2 * HOUR_MS;

struct Sender {
    id: String,
    account: String,
    zone: TimeZone,
    created_ms: i64,
}

/// What person `index` does: accept (and whether only the poller hears of it), reply.
fn behaviour(index: usize) -> (bool, bool, bool) {
    let accepts = index % 3 != 2;
    let silent = index.is_multiple_of(2);
    let replies = index.is_multiple_of(4);
    (accepts, silent, replies)
}

#[tokio::test]
async fn a_month_through_unipile_keeps_every_limit_hour_and_approval() {
    let world = World::bare().await;
    let to_start = (START_MS - world.app.clock.now_ms()) / 1000;
    assert!(to_start > 0, "the test clock is already past March 2027");
    world.advance(to_start).await;

    let mut senders = Vec::new();
    for (name, zone) in [
        ("Berlin", "Europe/Berlin"),
        ("New York", "America/New_York"),
    ] {
        let (id, account) = world.connected_sender_in(name, zone, office_hours()).await;
        let created_ms: i64 = sqlx::query_scalar("select created_at from senders where id = $1")
            .bind(&id)
            .fetch_one(world.app.db.pool())
            .await
            .expect("sender");
        senders.push(Sender {
            id,
            account,
            zone: TimeZone::get(zone).expect("a zone"),
            created_ms,
        });
    }
    let mut approved = Vec::new();
    for index in 0..APPROVED {
        approved.push(world.person(&format!("Ann{index}")).await);
    }
    let mut unapproved = Vec::new();
    for index in 0..UNAPPROVED {
        unapproved.push(world.person(&format!("Bob{index}")).await);
    }
    let steps = json!([
        {"type": "view_profile"},
        {"type": "connection_request", "delay_hours": 1, "note": "Hi {{first_name}}, glad to connect."},
        {"type": "message", "delay_hours": 24, "text": "Thanks {{first_name}}!"},
        {"type": "message", "delay_hours": 72, "text": "Following up, {{first_name}}."},
    ]);
    let sender_ids: Vec<&str> = senders.iter().map(|s| s.id.as_str()).collect();
    let create = async |name: &str, people: &[(String, String)]| {
        let sequence = world
            .app
            .post_json(
                "/sequences",
                &world.app.key,
                json!({"name": name, "sender_ids": sender_ids, "steps": steps,
                       "settings": {"exit_after_days_without_acceptance": 7}}),
            )
            .await;
        let sequence = sequence.expect(201)["id"].as_str().expect("id").to_owned();
        let ids: Vec<&str> = people.iter().map(|(id, _)| id.as_str()).collect();
        world
            .app
            .post_json(
                &format!("/sequences/{sequence}/enrollments"),
                &world.app.key,
                json!({"prospect_ids": ids}),
            )
            .await
            .expect(200);
        world
            .app
            .post_json(
                &format!("/sequences/{sequence}/activate"),
                &world.send,
                json!({}),
            )
            .await
            .expect(200);
        sequence
    };
    let seq_a = create("approved", &approved).await;
    let seq_b = create("never approved", &unapproved).await;
    world
        .app
        .post_json(
            "/approvals/approve",
            &world.send,
            json!({"sequence_id": seq_a}),
        )
        .await
        .expect(200);
    world.settle().await;

    // The month, in steps: short inside anyone's office hours, longer outside them. After each,
    // people do what they do.
    let index_of: BTreeMap<String, usize> = approved
        .iter()
        .enumerate()
        .map(|(index, (_, public))| (public.clone(), index))
        .collect();
    let mut accepted = BTreeSet::new();
    let mut replied: BTreeMap<String, i64> = BTreeMap::new();
    let end = START_MS + DAYS * DAY_MS;
    while world.app.clock.now_ms() < end {
        let now = world.app.clock.now_ms();
        for done in world.fake.done() {
            let Some(&index) = index_of.get(&done.public_id) else {
                continue;
            };
            let (accepts, silent, replies) = behaviour(index);
            let key = (done.account_id.clone(), done.public_id.clone());
            if done.kind == "invite"
                && accepts
                && now - done.at_ms >= ACCEPTS_AFTER_MS
                && world
                    .fake
                    .pending_invitation(&done.account_id, &done.public_id)
                && accepted.insert(key)
            {
                world
                    .fake
                    .accept(&done.account_id, &done.public_id, silent)
                    .await;
            }
            if done.kind == "message"
                && replies
                && now - done.at_ms >= REPLIES_AFTER_MS
                && !replied.contains_key(&done.public_id)
            {
                world
                    .fake
                    .reply(
                        &done.account_id,
                        &done.public_id,
                        "Sounds good, tell me more",
                    )
                    .await;
                replied.insert(done.public_id.clone(), world.app.clock.now_ms());
            }
        }
        world.applied().await;
        let working = senders.iter().any(|s| in_office_hours(now, &s.zone));
        let step = if working { WORK_STEP_MS } else { IDLE_STEP_MS };
        world.advance(step / 1000).await;
    }
    world.settle().await;

    let done = world.fake.done();
    let count = |kind: &str| done.iter().filter(|d| d.kind == kind).count();
    println!(
        "unipile month: {} views, {} invitations, {} messages; {} accepted, {} replied",
        count("view"),
        count("invite"),
        count("message"),
        accepted.len(),
        replied.len()
    );
    assert!(count("invite") >= APPROVED * 9 / 10, "too few invitations");
    assert!(count("message") > 20, "too few messages to mean anything");
    assert!(!replied.is_empty(), "nobody replied");

    // Limits, per sender, as the sandbox month checks them.
    for sender in &senders {
        let mine: Vec<&Done> = done
            .iter()
            .filter(|d| d.account_id == sender.account)
            .collect();
        for (index, line) in mine.iter().enumerate() {
            let limits: Limits = DEFAULT_LIMITS.effective(sender.created_ms, line.at_ms);
            let midnight = local_midnight(line.at_ms, &sender.zone);
            let today = mine[..=index]
                .iter()
                .filter(|l| l.kind == line.kind && l.at_ms >= midnight)
                .count();
            let week = mine[..=index]
                .iter()
                .filter(|l| l.kind == line.kind && l.at_ms > line.at_ms - 7 * DAY_MS)
                .count();
            let (daily, weekly) = match line.kind {
                "invite" => (
                    limits.connection_requests_per_day,
                    Some(limits.connection_requests_per_week),
                ),
                "message" => (limits.messages_per_day, None),
                _ => (limits.profile_views_per_day, None),
            };
            let local = zoned(line.at_ms, &sender.zone);
            assert!(
                today <= daily as usize,
                "{}: {today} {} on the local day of {local}, over {daily}",
                sender.id,
                line.kind
            );
            if let Some(weekly) = weekly {
                assert!(
                    week <= weekly as usize,
                    "{}: {week} in 7 days at {local}",
                    sender.id
                );
            }
            // Working hours: Mon-Fri 09-17 in the sender's own zone.
            assert!(
                in_office_hours(line.at_ms, &sender.zone),
                "{} by {} at {local}, outside office hours",
                line.kind,
                sender.id
            );
        }
    }

    // Nothing reached anyone whose enrollment was never approved.
    let never: BTreeSet<&str> = unapproved.iter().map(|(_, p)| p.as_str()).collect();
    for line in &done {
        assert!(
            !never.contains(line.public_id.as_str()),
            "{line:?} was never approved"
        );
    }
    let b = world
        .app
        .get(
            &format!("/enrollments?sequence_id={seq_b}&limit=100"),
            &world.app.key,
        )
        .await;
    assert!(
        b.expect(200)["items"]
            .as_array()
            .expect("items")
            .iter()
            .all(|e| e["status"] == "awaiting_approval")
    );

    // Each step at most once per person; nothing after a reply; a message only to a relation.
    let mut per_person: BTreeMap<(&str, &str), Vec<&Done>> = BTreeMap::new();
    for line in &done {
        per_person
            .entry((line.kind, line.public_id.as_str()))
            .or_default()
            .push(line);
    }
    for ((kind, public), lines) in &per_person {
        match *kind {
            "view" | "invite" => assert_eq!(lines.len(), 1, "{kind} to {public} {lines:?}"),
            _ => {
                let texts: BTreeSet<_> = lines.iter().map(|l| &l.text).collect();
                assert_eq!(
                    texts.len(),
                    lines.len(),
                    "a message twice to {public}: {lines:?}"
                );
                assert!(lines.len() <= 2, "{public}: {lines:?}");
            }
        }
        if *kind == "message"
            && let Some(at) = replied.get(*public)
        {
            assert!(
                lines.iter().all(|l| l.at_ms < *at),
                "a message to {public} after their reply: {lines:?}"
            );
        }
    }
    let silent_accepted = accepted
        .iter()
        .filter(|(_, public)| behaviour(index_of[public]).1)
        .count();
    assert!(silent_accepted > 0, "the poller had nothing to find");
}
