//! Sequences that branch and learn: a month in the sandbox with a branching sequence (invite
//! with two note variants; if connected within 7 days, a message in two weighted variants, else
//! an InMail; if no reply within 5 days, a follow-up), played out by one `advance_clock`. Every
//! enrollment's path is checked against the sandbox's fates, the variant split against the
//! weights, the figures against the sandbox's own log; and bad graphs, variants and InMails are
//! refused with the step named and nothing saved.

use std::collections::BTreeMap;

use outreach_actions::network::DEFAULT_SANDBOX_SEED;
use outreach_actions::network::sandbox::{Fate, OUT_OF_OFFICE_TEXT, fate};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_on_test_clock_with};
use crate::outreach_month::{START_MS, office_hours};
use crate::sequences::send_key;

const PEOPLE: usize = 60;
const ZONE: &str = "Europe/Berlin";
const NOTE_A: &str = "Hi {{first_name}}, note A.";
const NOTE_B: &str = "Hi {{first_name}}, note B.";
const HELLO_A: &str = "Thanks {{first_name}}, message A.";
const HELLO_B: &str = "Thanks {{first_name}}, message B.";
const FOLLOW_UP: &str = "Following up, {{first_name}}.";

fn id_of(body: &Value) -> String {
    body["id"].as_str().expect("an id").to_owned()
}

/// The branching sequence of the issue, with the sender's InMail on and stop-on-reply off (a
/// reply is what the second condition asks about).
fn branching_steps() -> Value {
    json!([
        {"type": "connection_request", "variants": [{"note": NOTE_A}, {"note": NOTE_B}]},
        {"type": "condition", "condition": {"kind": "connected", "within_days": 7},
         "then_step": "hello", "else_step": "inmail"},
        {"key": "hello", "type": "message", "delay_hours": 4, "next_step": "wait_reply",
         "variants": [{"key": "a", "text": HELLO_A, "weight": 1}, {"key": "b", "text": HELLO_B, "weight": 3}]},
        {"key": "inmail", "type": "inmail", "subject": "A question, {{first_name}}",
         "text": "Hi {{first_name}}, we have not met yet."},
        {"key": "wait_reply", "type": "condition", "condition": {"kind": "replied", "within_days": 5},
         "then_step": "finish", "else_step": "follow_up"},
        {"key": "follow_up", "type": "message", "text": FOLLOW_UP},
    ])
}

/// A Berlin sender with InMail credits, `PEOPLE` people with the sandbox's fates, the branching
/// sequence, all approved; the clock at Monday 2027-03-01.
async fn branching_month(app: &TestApp) -> (String, BTreeMap<String, (String, Fate)>) {
    let send = send_key(app).await;
    let to_start = (START_MS - app.clock.now_ms()) / 1000;
    app.post_json(
        "/sandbox/clock/advance",
        &app.key,
        json!({"seconds": to_start}),
    )
    .await
    .expect(200);
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Berlin", "timezone": ZONE, "working_hours": office_hours(),
                   "limits": {"connection_requests_per_day": 40, "connection_requests_per_week": 200,
                              "inmails_per_day": 25}}),
        )
        .await;
    let sender = id_of(sender.expect(201));
    app.post_json(
        &format!("/sandbox/senders/{sender}/inmail-credits"),
        &app.key,
        json!({"credits": 1000}),
    )
    .await
    .expect(200);
    let mut people = BTreeMap::new();
    let mut prospect_ids = Vec::new();
    for n in 0..PEOPLE {
        let url = format!("linkedin.com/in/branching-{n}");
        let prospect = app
            .post_json(
                "/prospects",
                &app.key,
                json!({"first_name": format!("P{n}"), "profile_url": format!("https://www.{url}")}),
            )
            .await;
        let id = id_of(prospect.expect(201));
        prospect_ids.push(id.clone());
        people.insert(url.clone(), (id, fate(DEFAULT_SANDBOX_SEED, &url)));
    }
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": "Branching", "sender_ids": [sender], "steps": branching_steps(),
                   "settings": {"stop_on_reply": false}}),
        )
        .await;
    let sequence = id_of(sequence.expect(201));
    enroll_and_start(app, &send, &sequence, json!(prospect_ids)).await;
    (sequence, people)
}

/// Enrolls `prospect_ids` in `sequence`, activates it and approves them all (`send`: a send key).
async fn enroll_and_start(app: &TestApp, send: &str, sequence: &str, prospect_ids: Value) {
    app.post_json(
        &format!("/sequences/{sequence}/enrollments"),
        &app.key,
        json!({"prospect_ids": prospect_ids}),
    )
    .await
    .expect(200);
    app.post_json(&format!("/sequences/{sequence}/activate"), send, json!({}))
        .await
        .expect(200);
    app.post_json("/approvals/approve", send, json!({"sequence_id": sequence}))
        .await
        .expect(200);
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

/// Each enrollment of the sequence by prospect, with its history.
async fn enrollments(app: &TestApp, sequence: &str) -> BTreeMap<String, Value> {
    let page = app
        .get(
            &format!("/enrollments?sequence_id={sequence}&limit=200"),
            &app.key,
        )
        .await;
    let mut by_prospect = BTreeMap::new();
    for item in page.expect(200)["items"].as_array().expect("items") {
        let id = item["id"].as_str().expect("an id");
        let detail = app.get(&format!("/enrollments/{id}"), &app.key).await;
        let detail = detail.expect(200).clone();
        by_prospect.insert(
            item["prospect_id"].as_str().expect("prospect").to_owned(),
            detail,
        );
    }
    by_prospect
}

/// The branches an enrollment's history took, as `(step_index, "then" | "else")`.
fn branches(detail: &Value) -> Vec<(i64, String)> {
    detail["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter(|entry| entry["kind"] == "branched")
        .map(|entry| {
            (
                entry["step_index"].as_i64().expect("a step"),
                entry["outcome"].as_str().expect("then or else").to_owned(),
            )
        })
        .collect()
}

/// The variant the history says a step was sent with.
fn variant_sent(detail: &Value, step_index: i64) -> Option<String> {
    detail["history"]
        .as_array()
        .expect("history")
        .iter()
        .find(|entry| entry["step_index"] == step_index && entry["outcome"] == "sent")
        .and_then(|entry| entry["variant"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn a_branching_month_follows_every_fate_and_its_figures_are_the_log() {
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    let (sequence, people) = branching_month(&app).await;
    app.post_json(
        "/sandbox/clock/advance",
        &app.key,
        json!({"seconds": 45 * 86_400}),
    )
    .await
    .expect(200);
    check_the_month(&app, &sequence, &people).await;
}

/// Every enrollment's path against its person's fate, nothing sent twice, the variant split
/// against the weights, and the figures against the sandbox log.
async fn check_the_month(app: &TestApp, sequence: &str, people: &BTreeMap<String, (String, Fate)>) {
    let log = whole_log(app).await;
    // Nothing reached anyone twice: one invitation, InMail, first message and follow-up each.
    let mut calls: BTreeMap<(String, String), u32> = BTreeMap::new();
    for entry in log.iter().filter(|entry| entry["outcome"] == "ok") {
        let url = entry["profile_url"].as_str().expect("url").to_owned();
        let text = entry["text"].as_str().unwrap_or("").to_owned();
        let what = format!("{} {}", entry["kind"].as_str().expect("kind"), text);
        *calls.entry((url, what)).or_default() += 1;
    }
    assert!(
        calls.values().all(|n| *n == 1),
        "sent twice: {:?}",
        calls.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    let sent_to = |url: &str, kind: &str, starts: &str| {
        calls
            .keys()
            .filter(|(u, what)| u == url && what.starts_with(&format!("{kind} {starts}")))
            .count()
    };

    let enrolled = enrollments(app, sequence).await;
    let (mut accepted, mut not_accepted, mut replied_after_hello) = (0, 0, 0);
    let mut variants: BTreeMap<(i64, String), i64> = BTreeMap::new();
    for (url, (prospect, fate)) in people {
        let detail = &enrolled[prospect];
        let enrollment = detail;
        let taken = branches(detail);
        let real_reply = fate
            .reply_text
            .is_some_and(|text| text != OUT_OF_OFFICE_TEXT);
        if fate.unreachable {
            assert_eq!(enrollment["status"], "failed", "{url}: {detail}");
            assert!(taken.is_empty(), "{url}: {detail}");
            continue;
        }
        let note =
            variant_sent(detail, 0).unwrap_or_else(|| panic!("{url}: no note variant: {detail}"));
        *variants.entry((0, note.clone())).or_default() += 1;
        let note_text = if note == "a" { "note A" } else { "note B" };
        assert!(
            calls.keys().any(|(u, what)| u == url
                && what.starts_with("invitation")
                && what.contains(note_text)),
            "{url}: the invitation sent is not variant {note}'s"
        );
        assert_eq!(enrollment["status"], "finished", "{url}: {detail}");
        if fate.accepts_after_ms.is_some() {
            accepted += 1;
            let hello = variant_sent(detail, 2)
                .unwrap_or_else(|| panic!("{url}: accepted, no message variant: {detail}"));
            *variants.entry((2, hello.clone())).or_default() += 1;
            assert_eq!(sent_to(url, "message", "Thanks P"), 1, "{url}");
            assert_eq!(
                sent_to(url, "inmail", ""),
                0,
                "{url}: an InMail to a connection"
            );
            if real_reply {
                replied_after_hello += 1;
                assert_eq!(
                    taken,
                    [(1, "then".into()), (4, "then".into())],
                    "{url}: {detail}"
                );
                assert_eq!(sent_to(url, "message", "Following"), 0, "{url}");
            } else {
                assert_eq!(
                    taken,
                    [(1, "then".into()), (4, "else".into())],
                    "{url}: {detail}"
                );
                assert_eq!(sent_to(url, "message", "Following"), 1, "{url}");
            }
            assert_eq!(
                enrollment["exit_reason"], "completed_steps",
                "{url}: {detail}"
            );
        } else {
            not_accepted += 1;
            assert_eq!(sent_to(url, "inmail", ""), 1, "{url}: no InMail: {detail}");
            assert_eq!(
                sent_to(url, "message", ""),
                0,
                "{url}: a message to a stranger"
            );
            if real_reply {
                assert_eq!(
                    taken,
                    [(1, "else".into()), (4, "then".into())],
                    "{url}: {detail}"
                );
                assert_eq!(
                    enrollment["exit_reason"], "completed_steps",
                    "{url}: {detail}"
                );
            } else {
                // The follow-up is a message, which only a connection can receive.
                assert_eq!(
                    taken,
                    [(1, "else".into()), (4, "else".into())],
                    "{url}: {detail}"
                );
                assert_eq!(enrollment["exit_reason"], "not_accepted", "{url}: {detail}");
            }
        }
    }
    assert!(
        accepted >= 10 && not_accepted >= 10,
        "{accepted} / {not_accepted}"
    );
    assert!(replied_after_hello >= 2, "{replied_after_hello}");

    // The split follows the weights: the note's 1:1 over every reachable person, the message's
    // 1:3 over those who accepted; each within 3.5 standard deviations of its expectation.
    let within = |step: i64, variant: &str, share: f64, of: i64| {
        let n = *variants.get(&(step, variant.to_owned())).unwrap_or(&0) as f64;
        let expected = share * of as f64;
        let sd = (of as f64 * share * (1.0 - share)).sqrt();
        assert!(
            (n - expected).abs() <= 3.5 * sd,
            "step {step} variant {variant}: {n} of {of}, expected {expected:.1} +- {:.1}",
            3.5 * sd
        );
    };
    within(0, "a", 0.5, accepted + not_accepted);
    within(2, "b", 0.75, accepted);

    // The figures are the log's counts, per step and per variant.
    let stats = app
        .get(&format!("/sequences/{sequence}/stats"), &app.key)
        .await;
    let stats = stats.expect(200).clone();
    let steps = stats["steps"].as_array().expect("steps");
    let log_count = |kind: &str, contains: &str| {
        calls
            .keys()
            .filter(|(_, what)| what.starts_with(kind) && what.contains(contains))
            .count() as i64
    };
    let variant = |step: &Value, key: &str| {
        step["variants"]
            .as_array()
            .expect("variants")
            .iter()
            .find(|v| v["variant"] == key)
            .cloned()
            .expect("the variant")
    };
    assert_eq!(steps[0]["key"], "s1", "{stats}");
    assert_eq!(steps[0]["sent"], log_count("invitation", ""), "{stats}");
    assert_eq!(
        variant(&steps[0], "a")["sent"],
        log_count("invitation", "note A"),
        "{stats}"
    );
    assert_eq!(
        variant(&steps[0], "b")["sent"],
        log_count("invitation", "note B"),
        "{stats}"
    );
    assert_eq!(steps[0]["accepted"], accepted, "{stats}");
    assert_eq!(
        steps[1]["branches"],
        json!({"then": accepted, "else": not_accepted}),
        "{stats}"
    );
    assert_eq!(steps[2]["sent"], log_count("message", "Thanks"), "{stats}");
    assert_eq!(
        variant(&steps[2], "a")["sent"],
        log_count("message", "message A"),
        "{stats}"
    );
    assert_eq!(
        variant(&steps[2], "b")["sent"],
        log_count("message", "message B"),
        "{stats}"
    );
    // A comparison needs sends of both variants. The note's 1:1 split over 50-odd people always
    // has them; the message's 1:3 split over those who accepted (20-odd) leaves `a` with none
    // about once in a thousand months, and then the step has no comparison.
    let compared = |step: &Value| {
        step["comparison"]["note"]
            .as_str()
            .is_some_and(|note| note.contains("two-proportion z-test"))
    };
    assert!(compared(&steps[0]), "{stats}");
    let both_sent = ["a", "b"]
        .iter()
        .all(|key| variant(&steps[2], key)["sent"].as_i64() > Some(0));
    assert_eq!(compared(&steps[2]), both_sent, "{stats}");
    assert_eq!(steps[3]["type"], "inmail", "{stats}");
    assert_eq!(steps[3]["sent"], log_count("inmail", ""), "{stats}");
    assert_eq!(
        steps[5]["sent"],
        log_count("message", "Following"),
        "{stats}"
    );
}

#[tokio::test]
async fn an_inmail_without_credits_finishes_the_enrollment_with_the_reason() {
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    let send = send_key(&app).await;
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "No premium", "timezone": "UTC"}),
        )
        .await;
    let sender = id_of(sender.expect(201));
    let mut prospects = Vec::new();
    for n in 0..2 {
        let prospect = app
            .post_json(
                "/prospects",
                &app.key,
                json!({"first_name": format!("Q{n}"), "profile_url": format!("https://linkedin.com/in/inmail-{n}")}),
            )
            .await;
        prospects.push(id_of(prospect.expect(201)));
    }
    let mut sequences = Vec::new();
    for name in ["Without credits", "Out of credits"] {
        let sequence = app
            .post_json(
                "/sequences",
                &app.key,
                json!({"name": name, "sender_ids": [sender], "settings": {"skip_if_in_other_live_sequence": false},
                       "steps": [{"type": "inmail", "subject": "Hello", "text": "Hi {{first_name}}"}]}),
            )
            .await;
        sequences.push(id_of(sequence.expect(201)));
    }
    // The first sequence runs on an account that cannot send InMail at all (the sandbox's
    // default); the second after the account is given 0 credits.
    for (sequence, prospect, credits) in [
        (&sequences[0], &prospects[0], None),
        (&sequences[1], &prospects[1], Some(0)),
    ] {
        app.post_json(
            &format!("/sandbox/senders/{sender}/inmail-credits"),
            &app.key,
            json!({"credits": credits}),
        )
        .await
        .expect(200);
        enroll_and_start(&app, &send, sequence, json!([prospect])).await;
        app.post_json(
            "/sandbox/clock/advance",
            &app.key,
            json!({"seconds": 3 * 86_400}),
        )
        .await
        .expect(200);
    }
    let enrolled = [
        enrollments(&app, &sequences[0]).await,
        enrollments(&app, &sequences[1]).await,
    ];
    for (detail, reason) in [
        (&enrolled[0][&prospects[0]], "not_allowed_inmail"),
        (&enrolled[1][&prospects[1]], "insufficient_credits"),
    ] {
        assert_eq!(detail["status"], "finished", "{detail}");
        assert_eq!(detail["exit_reason"], reason, "{detail}");
    }
    // Nothing reached anyone, and the daily limit counted nothing.
    let log = whole_log(&app).await;
    assert!(log.iter().all(|entry| entry["outcome"] != "ok"), "{log:?}");
    let sender = app.get(&format!("/senders/{sender}"), &app.key).await;
    assert_eq!(sender.expect(200)["usage"]["inmails_per_day"]["used"], 0);
}

#[tokio::test]
async fn a_turned_off_variant_is_given_to_nobody_after() {
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    let (sequence, people) = branching_month(&app).await;
    // Turn the message's `b` off before anyone reaches it, and `a`'s weight to 0 is refused
    // (nothing would be left to give).
    let off = app
        .patch_json(
            &format!("/sequences/{sequence}/variants"),
            &app.key,
            json!({"step": "hello", "variant": "b", "enabled": false}),
        )
        .await;
    let off = off.expect(200).clone();
    assert_eq!(off["steps"][2]["variants"][1]["enabled"], false, "{off}");
    let refused = app
        .patch_json(
            &format!("/sequences/{sequence}/variants"),
            &app.key,
            json!({"step": "hello", "variant": "a", "weight": 0}),
        )
        .await;
    let message = refused.expect(400)["error"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(message.contains("step `hello`"), "{message}");
    let unchanged = app.get(&format!("/sequences/{sequence}"), &app.key).await;
    assert_eq!(
        unchanged.expect(200)["steps"][2]["variants"][0]["weight"],
        1
    );

    app.post_json(
        "/sandbox/clock/advance",
        &app.key,
        json!({"seconds": 20 * 86_400}),
    )
    .await
    .expect(200);
    let enrolled = enrollments(&app, &sequence).await;
    let mut given = 0;
    for (prospect, _) in people.values() {
        if let Some(variant) = variant_sent(&enrolled[prospect], 2) {
            assert_eq!(variant, "a", "{}", enrolled[prospect]);
            given += 1;
        }
    }
    assert!(given >= 5, "{given}");
}

#[tokio::test]
async fn bad_graphs_variants_and_inmails_are_refused_naming_the_step() {
    let app = spawn_app().await;
    let invite = json!({"type": "connection_request"});
    let hello = json!({"type": "message", "text": "Hi"});
    let cases = [
        (
            json!([invite, {"type": "condition", "condition": {"kind": "connected"}, "then_step": "s3", "else_step": "nowhere"}, hello]),
            "`steps[1].else_step` names `nowhere`",
        ),
        (
            json!([invite, {"type": "condition", "condition": {"kind": "connected"}, "then_step": "s3", "else_step": "finish"},
                   {"type": "message", "text": "Hi", "next_step": "s2"}]),
            "a cycle never ends",
        ),
        (
            json!([invite, {"type": "condition", "condition": {"kind": "replied"}, "then_step": "s3", "else_step": "finish"},
                   {"type": "message", "text": "Hi", "next_step": "finish"}, hello]),
            "`steps[3]` (`s4`) is never reached",
        ),
        (
            json!([{"type": "view_profile", "variants": [{"text": "a"}, {"text": "b"}]}]),
            "`steps[0].variants` is only for",
        ),
        (
            json!([invite, {"type": "message", "variants": [{"text": "a", "weight": 0}, {"text": "b", "weight": 0}]}]),
            "weighs 0",
        ),
        (
            json!([invite, {"type": "message", "variants": [{"text": "1"}, {"text": "2"}, {"text": "3"}, {"text": "4"}, {"text": "5"}, {"text": "6"}]}]),
            "`steps[1].variants` holds 6 entries; it takes at most 5",
        ),
        (
            json!([{"type": "inmail", "text": "Hi"}]),
            "`steps[0].subject` is required",
        ),
        (
            json!([invite, {"type": "condition", "condition": {"kind": "profile_has", "field": "headline"}, "then_step": "finish", "else_step": "finish"}]),
            "`steps[1].condition.contains` is required",
        ),
        (
            json!([invite, {"type": "message", "text": "Hi", "then_step": "finish"}]),
            "`steps[1].then_step` is only for a `condition` step",
        ),
    ];
    for (steps, expected) in cases {
        let refused = app
            .post_json(
                "/sequences",
                &app.key,
                json!({"name": "Bad", "steps": steps}),
            )
            .await;
        let message = refused.expect(400)["error"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        assert!(message.contains(expected), "{steps}: {message}");
    }
    // Nothing was saved.
    let listed = app.get("/sequences?limit=200", &app.key).await;
    assert_eq!(listed.expect(200)["items"], json!([]));
}

/// Every (enrollment, step) the network performed or refused, each with how many times.
async fn steps_in_log(app: &TestApp) -> BTreeMap<(String, i64), i64> {
    sqlx::query(
        "select i.enrollment_id, i.step_index, count(*) as n from sandbox_log l \
         join outbound_intents i on i.id = l.intent_token where l.workspace_id = $1 \
         group by i.enrollment_id, i.step_index",
    )
    .bind(&app.workspace_id)
    .fetch_all(app.db.pool())
    .await
    .expect("read the log")
    .iter()
    .map(|row| {
        use sqlx::Row;
        (
            (row.get("enrollment_id"), row.get("step_index")),
            row.get("n"),
        )
    })
    .collect()
}

async fn count(app: &TestApp, sql: &str) -> i64 {
    use sqlx::Row;
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(app.db.pool())
        .await
        .expect("a count")
        .get::<i64, _>(0)
}

#[tokio::test]
async fn a_branching_month_killed_mid_way_keeps_its_variants_and_branches() {
    // The test's own server runs no worker: a `serve` process does the sending, and is killed
    // with SIGKILL in the middle of it, and started again, a few times during the month.
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    let (sequence, people) = branching_month(&app).await;
    let sender: String = {
        use sqlx::Row;
        sqlx::query("select sender_id from sequence_senders where sequence_id = $1")
            .bind(&sequence)
            .fetch_one(app.db.pool())
            .await
            .expect("the sender")
            .get(0)
    };
    // Its calls take a while to reach the network, so a kill can land during one.
    app.post_json(
        &format!("/sandbox/senders/{sender}/latency"),
        &app.key,
        json!({"latency_ms": 300}),
    )
    .await
    .expect(200);
    let mut victim =
        Some(crate::helpers::start_serve_with(app.database(), &["--test-clock"]).await);
    let mut kills = 0;
    for day in 0..45 {
        let base = victim.as_ref().expect("the process runs").base_url.clone();
        let (client, key) = (app.client.clone(), app.key.clone());
        let advance = tokio::spawn(async move {
            client
                .post(format!("{base}/api/v1/sandbox/clock/advance"))
                .bearer_auth(key)
                .json(&json!({"seconds": 86_400}))
                .send()
                .await
                .map(|response| response.status())
        });
        if kills < 3 && day % 4 == 1 {
            // As soon as an intent is pending, the process dies with whatever it holds.
            for _ in 0..2000 {
                if count(
                    &app,
                    "select count(*) from outbound_intents where status = 'pending'",
                )
                .await
                    > 0
                {
                    victim.take().expect("the process runs").kill().await;
                    kills += 1;
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
            let _ = advance.await;
            if victim.is_none() {
                victim =
                    Some(crate::helpers::start_serve_with(app.database(), &["--test-clock"]).await);
                // The dead process's leases lapse with time; the restarted one plays the day again.
                let base = victim.as_ref().expect("the process runs").base_url.clone();
                let again = app
                    .client
                    .post(format!("{base}/api/v1/sandbox/clock/advance"))
                    .bearer_auth(&app.key)
                    .json(&json!({"seconds": 600}))
                    .send()
                    .await
                    .expect("advance after the restart");
                assert!(again.status().is_success(), "{}", again.status());
            }
        } else {
            let status = advance
                .await
                .expect("the advance ran")
                .expect("advance the clock");
            assert!(status.is_success(), "advance_clock: {status}");
        }
    }
    assert!(kills > 0, "no kill landed while an intent was pending");
    let live = count(
        &app,
        "select count(*) from enrollments where status in ('scheduled', 'active')",
    )
    .await;
    assert_eq!(live, 0, "enrollments still live after the month");
    // Nothing reached the network twice, and nothing is left pending.
    for ((enrollment, step), n) in steps_in_log(&app).await {
        assert_eq!(
            n, 1,
            "step {step} of {enrollment} reached the network {n} times"
        );
    }
    let pending = count(
        &app,
        "select count(*) from outbound_intents where status in ('pending', 'unanswered')",
    )
    .await;
    assert_eq!(pending, 0, "intents left unsettled");
    // Each variant sent is the one the enrollment is given (the same before and after every
    // restart), and each condition decided once.
    let stored = app.get(&format!("/sequences/{sequence}"), &app.key).await;
    let steps: Vec<outreach_actions::sequences::Step> =
        serde_json::from_value(stored.expect(200)["steps"].clone()).expect("the steps");
    for detail in enrollments(&app, &sequence).await.values() {
        let id = detail["id"].as_str().expect("an id");
        for index in [0, 2] {
            if let Some(sent) = variant_sent(detail, index) {
                let given = outreach_actions::sequences::variants::assign(
                    id,
                    &steps[usize::try_from(index).expect("an index")],
                    |_| true,
                );
                assert_eq!(Some(sent.as_str()), given, "{detail}");
            }
        }
        let taken = branches(detail);
        let mut decided: Vec<i64> = taken.iter().map(|(step, _)| *step).collect();
        decided.dedup();
        assert_eq!(
            decided.len(),
            taken.len(),
            "a condition decided twice: {detail}"
        );
    }
    if let Some(victim) = victim {
        victim.terminate().await;
    }
    check_the_month(&app, &sequence, &people).await;
}

#[tokio::test]
async fn a_message_after_a_condition_still_waits_for_the_acceptance() {
    // invite; a condition that does not ask about the acceptance; a message 4 hours later. The
    // message waits for the invitation's acceptance (up to the sequence's deadline), as it would
    // right after the invitation: it goes 4 hours after the person accepts, days later.
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    let send = send_key(&app).await;
    let url = (0..)
        .map(|n| format!("linkedin.com/in/late-acceptor-{n}"))
        .find(|url| {
            let fate = fate(DEFAULT_SANDBOX_SEED, url);
            !fate.unreachable
                && fate.replies_after_ms.is_none()
                && fate.accepts_after_ms.is_some_and(|ms| ms >= 30 * 3_600_000)
        })
        .expect("a late acceptor");
    let all_day = json!([{"start": "00:00", "end": "24:00"}]);
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Always", "timezone": "UTC", "working_hours": {
                "monday": all_day, "tuesday": all_day, "wednesday": all_day, "thursday": all_day,
                "friday": all_day, "saturday": all_day, "sunday": all_day}}),
        )
        .await;
    let sender = id_of(sender.expect(201));
    let prospect = app
        .post_json(
            "/prospects",
            &app.key,
            json!({"first_name": "Late", "headline": "Founder", "profile_url": format!("https://{url}")}),
        )
        .await;
    let prospect = id_of(prospect.expect(201));
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": "Wait", "sender_ids": [sender], "steps": [
                {"type": "connection_request"},
                {"type": "condition", "condition": {"kind": "profile_has", "field": "headline", "contains": "founder"},
                 "then_step": "s3", "else_step": "finish"},
                {"type": "message", "delay_hours": 4, "text": "Thanks {{first_name}}"}]}),
        )
        .await;
    let sequence = id_of(sequence.expect(201));
    enroll_and_start(&app, &send, &sequence, json!([prospect])).await;
    app.post_json(
        "/sandbox/clock/advance",
        &app.key,
        json!({"seconds": 6 * 86_400}),
    )
    .await
    .expect(200);
    let detail = &enrollments(&app, &sequence).await[&prospect];
    assert_eq!(detail["status"], "finished", "{detail}");
    assert_eq!(detail["exit_reason"], "completed_steps", "{detail}");
    assert_eq!(branches(detail), [(1, "then".to_owned())], "{detail}");
    let history = detail["history"].as_array().expect("history");
    let at = |kind: &str| {
        history
            .iter()
            .find(|entry| entry["kind"] == kind)
            .and_then(|entry| entry["at"].as_str())
            .map(|at| outreach_runtime::clock::parse_rfc3339(at).expect("a time"))
            .unwrap_or_else(|| panic!("no {kind}: {detail}"))
    };
    assert!(
        at("message") >= at("accepted") + 4 * 3_600_000,
        "the message went before the acceptance and its delay: {detail}"
    );
}
