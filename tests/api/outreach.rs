//! The outreach engine end to end, through the API and the sandbox network with a moved clock:
//! nothing reaches a person before approval, an invitation waits for its acceptance, messages
//! follow their delays, a reply stops the sequence, a person's reply is sent once, and every step
//! reaches the network exactly once (read from the sandbox's own log).

use std::sync::Arc;

use outreach_actions::network::DEFAULT_SANDBOX_SEED;
use outreach_actions::network::sandbox::fate;
use outreach_runtime::{Config, worker};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app_on_test_clock_with};
use crate::sequences::send_key;

const HOUR_S: i64 = 3600;

/// An app on a shared test clock whose jobs run only when a test calls [`settle`]: one runner,
/// so what a step leaves behind is known when `settle` returns.
pub async fn no_worker_app() -> TestApp {
    spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await
}

/// Runs every job that is due, until none is.
pub async fn settle(app: &TestApp) {
    let config = Arc::new(Config::new(&app.base_url, app.environment.clone()));
    for _ in 0..50 {
        let ran = worker::drain(&app.db, &app.clock, config.clone()).await;
        // A job the server's own worker is claiming is still `available` to this read until the
        // claim commits (on PostgreSQL the drain above skips the locked row), so due ones count.
        let unsettled: i64 = sqlx::Row::get(
            &sqlx::query(
                "select count(*) from jobs \
                 where state = 'running' or (state = 'available' and run_at <= $1)",
            )
            .bind(app.clock.now_ms())
            .fetch_one(app.db.pool())
            .await
            .expect("count unsettled jobs"),
            0,
        );
        if ran.is_empty() && unsettled == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the jobs did not settle");
}

/// Moves the shared clock forward, then lets due work run.
pub async fn advance(app: &TestApp, seconds: i64) {
    app.post_json(
        "/sandbox/clock/advance",
        &app.key,
        json!({"seconds": seconds}),
    )
    .await
    .expect(200);
    settle(app).await;
}

/// A profile URL the sandbox leaves alone (reachable, never accepts or replies by itself), so
/// the test helpers decide what the person does.
pub fn quiet_profile(name: &str) -> String {
    (0..)
        .map(|n| format!("linkedin.com/in/{name}-{n}"))
        .find(|url| {
            let fate = fate(DEFAULT_SANDBOX_SEED, url);
            !fate.unreachable && fate.accepts_after_ms.is_none() && fate.replies_after_ms.is_none()
        })
        .expect("a quiet profile")
}

/// Every day, all day: the tests decide time, not office hours.
pub fn always() -> Value {
    let day = json!([{"start": "00:00", "end": "24:00"}]);
    json!({"monday": day, "tuesday": day, "wednesday": day, "thursday": day, "friday": day, "saturday": day, "sunday": day})
}

async fn log(app: &TestApp) -> Vec<Value> {
    let page = app.get("/sandbox/log?limit=200", &app.key).await;
    page.expect(200)["items"].as_array().expect("items").clone()
}

fn kinds(log: &[Value]) -> Vec<(String, String)> {
    log.iter()
        .map(|entry| {
            (
                entry["kind"].as_str().unwrap_or_default().to_owned(),
                entry["text"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn approved_outreach_is_invited_accepted_messaged_and_stopped_by_a_reply() {
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
        .post_json(
            "/prospects",
            &app.key,
            json!({"first_name": "Grace", "company_name": "Navy", "profile_url": format!("https://www.{url}")}),
        )
        .await;
    let prospect = prospect.expect(201)["id"].as_str().expect("id").to_owned();
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({
                "name": "Navy outreach",
                "sender_ids": [sender],
                "steps": [
                    {"type": "connection_request", "delay_hours": 0, "note": "Hi {{first_name}}, glad to connect."},
                    {"type": "message", "delay_hours": 24, "text": "Thanks {{first_name|there}}! How is {{company_name}}?"},
                    {"type": "message", "delay_hours": 72, "text": "Following up, {{first_name}}."},
                ],
            }),
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

    // Active, but not approved: a day passes and nothing reaches the person.
    advance(&app, 24 * HOUR_S).await;
    assert!(log(&app).await.is_empty(), "sent before approval");

    let preview = app
        .post_json(
            "/approvals/approve",
            &send,
            json!({"sequence_id": sequence, "dry_run": true}),
        )
        .await;
    let preview = preview.expect(200).clone();
    assert!(preview.to_string().contains("first_send_at"), "{preview}");
    settle(&app).await;
    assert!(log(&app).await.is_empty(), "a dry run sent something");

    app.post_json(
        "/approvals/approve",
        &send,
        json!({"sequence_id": sequence}),
    )
    .await
    .expect(200);
    settle(&app).await;
    assert_eq!(
        kinds(&log(&app).await),
        [(
            "invitation".to_owned(),
            "Hi Grace, glad to connect.".to_owned()
        )]
    );

    // Nobody accepts for a day: nothing more goes out.
    advance(&app, 24 * HOUR_S).await;
    assert_eq!(log(&app).await.len(), 1);

    app.post_json(
        "/sandbox/invitations/accept",
        &app.key,
        json!({"prospect_id": prospect, "sender_id": sender}),
    )
    .await
    .expect(200);
    settle(&app).await;
    assert_eq!(
        log(&app).await.len(),
        1,
        "the message went before its delay"
    );
    advance(&app, 25 * HOUR_S).await;
    let sent = kinds(&log(&app).await);
    assert_eq!(
        sent[1],
        (
            "message".to_owned(),
            "Thanks Grace! How is Navy?".to_owned()
        )
    );

    // The person answers: the sequence stops for them, the conversation shows it.
    app.post_json(
        "/sandbox/replies",
        &app.key,
        json!({"prospect_id": prospect, "sender_id": sender, "text": "Interested, tell me more"}),
    )
    .await
    .expect(200);
    settle(&app).await;
    advance(&app, 100 * HOUR_S).await;
    assert_eq!(log(&app).await.len(), 2, "a follow-up went after the reply");
    let enrollments = app
        .get(&format!("/enrollments?sequence_id={sequence}"), &app.key)
        .await;
    let enrollment = enrollments.expect(200)["items"][0].clone();
    assert_eq!(enrollment["status"], "finished", "{enrollment}");
    assert_eq!(enrollment["exit_reason"], "replied", "{enrollment}");

    let conversations = app.get("/conversations?unread=true", &app.key).await;
    let conversation = conversations.expect(200)["items"][0].clone();
    assert_eq!(conversation["prospect_id"], prospect);
    assert_eq!(conversation["sender_id"], sender);
    let id = conversation["id"].as_str().expect("id").to_owned();

    // A person's reply: queued, then sent once, even when the call is repeated with its key.
    let reply = json!({"text": "Great! Does Tuesday work?"});
    let first = app
        .post_idempotent(
            &format!("/conversations/{id}/messages"),
            &send,
            "reply-1",
            &reply,
        )
        .await;
    let first = first.expect(200).clone();
    assert_eq!(first["status"], "queued", "{first}");
    let again = app
        .post_idempotent(
            &format!("/conversations/{id}/messages"),
            &send,
            "reply-1",
            &reply,
        )
        .await;
    assert_eq!(again.expect(200)["id"], first["id"]);
    settle(&app).await;
    let sent = kinds(&log(&app).await);
    assert_eq!(sent.len(), 3, "{sent:?}");
    assert_eq!(sent[2].1, "Great! Does Tuesday work?");
    let messages = app
        .get(&format!("/conversations/{id}/messages"), &app.key)
        .await;
    let statuses: Vec<(String, String)> = messages.expect(200)["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|m| {
            (
                m["direction"].as_str().unwrap_or_default().to_owned(),
                m["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("outbound".to_owned(), "sent".to_owned()),
            ("inbound".to_owned(), "received".to_owned()),
            ("outbound".to_owned(), "sent".to_owned()),
        ]
    );
}

#[tokio::test]
async fn a_reply_from_a_disconnected_sender_is_refused_and_nothing_is_queued() {
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Account", "timezone": "UTC", "working_hours": always()}),
        )
        .await;
    let sender = sender.expect(201)["id"].as_str().expect("id").to_owned();
    let url = quiet_profile("linus");
    let prospect = app
        .post_json(
            "/prospects",
            &app.key,
            json!({"first_name": "Linus", "profile_url": url}),
        )
        .await;
    let prospect = prospect.expect(201)["id"].as_str().expect("id").to_owned();
    // A conversation the person started.
    let mut conn = app.db.pool().acquire().await.expect("connection");
    let mut conn =
        outreach_actions::person_lock::lock(&mut conn, &app.workspace_id, [prospect.as_str()])
            .await
            .expect("the person's lock");
    outreach_actions::conversations::record_inbound(
        &mut conn,
        &outreach_actions::conversations::Inbound {
            workspace_id: &app.workspace_id,
            sender_id: &sender,
            prospect_id: &prospect,
            text: "Hello?",
            at_ms: app.clock.now_ms(),
            provider_message_id: "m-1",
        },
        app.clock.now_ms(),
    )
    .await
    .expect("inbound");
    drop(conn);
    let conversations = app.get("/conversations", &app.key).await;
    let id = conversations.expect(200)["items"][0]["id"]
        .as_str()
        .expect("id")
        .to_owned();

    app.post_json(
        &format!("/sandbox/senders/{sender}/status"),
        &app.key,
        json!({"status": "disconnected"}),
    )
    .await
    .expect(200);
    let refused = app
        .post_json(
            &format!("/conversations/{id}/messages"),
            &send,
            json!({"text": "Anyone there?"}),
        )
        .await;
    let sentence = refused.expect_error(409, "invalid_state").to_owned();
    assert!(sentence.contains("disconnected"), "{sentence}");
    // A write key cannot reply at all.
    let refused = app
        .post_json(
            &format!("/conversations/{id}/messages"),
            &app.key,
            json!({"text": "Anyone there?"}),
        )
        .await;
    assert_eq!(refused.status.as_u16(), 403, "{}", refused.body);
    let messages = app
        .get(&format!("/conversations/{id}/messages"), &app.key)
        .await;
    assert_eq!(messages.expect(200)["total"], 1);
    settle(&app).await;
    assert!(log(&app).await.is_empty());
}

/// A crash between the network call and the commit of its outcome leaves a `pending` intent. The
/// next run asks the network (the sandbox answers from its log) and records what happened: an
/// invitation that went out is not sent again, one that never reached the network is sent once.
#[tokio::test]
async fn a_pending_intent_is_reconciled_with_the_network_never_sent_twice() {
    use outreach_actions::network::{Account, NetworkProvider, Outbound, Sandbox};

    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Account", "timezone": "UTC", "working_hours": always()}),
        )
        .await;
    let sender = sender.expect(201)["id"].as_str().expect("id").to_owned();
    let mut people = Vec::new();
    for name in ["went", "lost"] {
        let url = quiet_profile(name);
        let made = app
            .post_json(
                "/prospects",
                &app.key,
                json!({"first_name": name, "profile_url": url}),
            )
            .await;
        people.push((made.expect(201)["id"].as_str().expect("id").to_owned(), url));
    }
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": "Crash", "sender_ids": [sender], "steps": [
                {"type": "connection_request", "delay_hours": 0, "note": "Hello {{first_name}}"},
            ]}),
        )
        .await;
    let sequence = sequence.expect(201)["id"].as_str().expect("id").to_owned();
    let ids: Vec<&str> = people.iter().map(|(id, _)| id.as_str()).collect();
    app.post_json(
        &format!("/sequences/{sequence}/enrollments"),
        &app.key,
        json!({"prospect_ids": ids}),
    )
    .await
    .expect(200);
    app.post_json(&format!("/sequences/{sequence}/activate"), &send, json!({}))
        .await
        .expect(200);
    // The account is down while the steps fall due: they wait (snoozed), nothing is sent.
    app.post_json(
        &format!("/sandbox/senders/{sender}/status"),
        &app.key,
        json!({"status": "disconnected"}),
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
    settle(&app).await;
    assert!(log(&app).await.is_empty());
    let waiting = app.get(&format!("/sequences/{sequence}"), &app.key).await;
    let sending = &waiting.expect(200)["sending"];
    assert_eq!(sending["sending"], json!(false), "{sending}");
    let reason = sending["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("`{sender}` is `disconnected`")),
        "{sending}"
    );
    app.post_json(
        &format!("/sandbox/senders/{sender}/status"),
        &app.key,
        json!({"status": "connected"}),
    )
    .await
    .expect(200);
    let sending = app.get(&format!("/sequences/{sequence}"), &app.key).await;
    assert_eq!(sending.expect(200)["sending"]["sending"], json!(true));

    // What a run that died would leave: an intent per step, and for the first person the call it
    // made before dying.
    let now = app.clock.now_ms();
    for (index, (prospect, url)) in people.iter().enumerate() {
        let row = sqlx::query("select id from enrollments where prospect_id = $1")
            .bind(prospect)
            .fetch_one(app.db.pool())
            .await
            .expect("enrollment");
        let enrollment: String = sqlx::Row::get(&row, "id");
        let intent = format!("int_crashed{index}");
        sqlx::query(
            "insert into outbound_intents (id, workspace_id, sender_id, prospect_id, kind, enrollment_id, step_index, \
             text, status, created_at) values ($1, $2, $3, $4, 'invitation', $5, 0, $6, 'pending', $7)",
        )
        .bind(&intent)
        .bind(&app.workspace_id)
        .bind(&sender)
        .bind(prospect)
        .bind(&enrollment)
        .bind(format!("Hello {}", ["went", "lost"][index]))
        .bind(now)
        .execute(app.db.pool())
        .await
        .expect("a pending intent");
        if index == 0 {
            let sandbox = Sandbox::new(app.db.clone(), app.clock.clone(), DEFAULT_SANDBOX_SEED);
            let to = Outbound {
                account: Account {
                    workspace_id: &app.workspace_id,
                    sender_id: &sender,
                },
                profile_url: url,
                prospect_id: Some(prospect),
                intent: &intent,
            };
            sandbox
                .invite(to, Some("Hello went"))
                .await
                .expect("the call the dead run made");
        }
    }
    // The dead run's claim counted an attempt, and the rescue of its lease kept it.
    sqlx::query("update jobs set attempt = 1 where kind = 'outreach_step' and state = 'available'")
        .execute(app.db.pool())
        .await
        .expect("the dead run's attempt");
    assert_eq!(log(&app).await.len(), 1);

    let recovered_at = app.clock.now_ms();
    advance(&app, 2 * HOUR_S).await;
    // The lost one goes through the gate again: after the gap that the first person's settled
    // call (a call of the same sender) starts, played out inside the two hours.
    let sent = log(&app).await;
    let lost_at = outreach_runtime::clock::parse_rfc3339(sent[1]["at"].as_str().expect("at"))
        .expect("a time");
    assert!(
        lost_at - recovered_at >= 30_000,
        "the lost invitation did not wait for the gap: {sent:?}"
    );
    assert_eq!(
        kinds(&sent),
        [
            ("invitation".to_owned(), "Hello went".to_owned()),
            ("invitation".to_owned(), "Hello lost".to_owned()),
        ],
        "each person invited exactly once"
    );
    let pending: i64 = sqlx::Row::get(
        &sqlx::query("select count(*) from outbound_intents where status <> 'sent'")
            .fetch_one(app.db.pool())
            .await
            .expect("count"),
        0,
    );
    assert_eq!(pending, 0, "every intent settled as sent");
    let enrollments = app
        .get(&format!("/enrollments?sequence_id={sequence}"), &app.key)
        .await;
    for enrollment in enrollments.expect(200)["items"].as_array().expect("items") {
        assert_eq!(enrollment["status"], "finished", "{enrollment}");
        assert_eq!(enrollment["exit_reason"], "completed_steps", "{enrollment}");
    }
    // Nobody is left in it: the sequence is completed.
    let sequence = app.get(&format!("/sequences/{sequence}"), &app.key).await;
    let sequence = sequence.expect(200).clone();
    assert_eq!(sequence["status"], "completed", "{sequence}");
    assert!(sequence["finished_at"].is_string(), "{sequence}");
}

/// The next step times of a sequence's waiting enrollments, earliest first (epoch ms).
async fn waiting_slots(app: &TestApp, sequence: &str) -> Vec<i64> {
    sqlx::query_scalar(
        "select next_step_at from enrollments where sequence_id = $1 and status = 'scheduled' \
         order by next_step_at",
    )
    .bind(sequence)
    .fetch_all(app.db.pool())
    .await
    .expect("read the waiting enrollments")
}

#[tokio::test]
async fn steps_waiting_for_one_busy_sender_take_its_slots_one_after_another() {
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Busy", "timezone": "UTC", "working_hours": always()}),
        )
        .await;
    let sender = sender.expect(201)["id"].as_str().expect("id").to_owned();
    let mut prospects = Vec::new();
    for n in 0..5 {
        let url = quiet_profile(&format!("slot{n}"));
        let prospect = app
            .post_json(
                "/prospects",
                &app.key,
                json!({"first_name": format!("P{n}"), "profile_url": format!("https://www.{url}")}),
            )
            .await;
        prospects.push(prospect.expect(201)["id"].as_str().expect("id").to_owned());
    }
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": "Views", "sender_ids": [sender],
                   "steps": [{"type": "view_profile", "delay_hours": 0}]}),
        )
        .await;
    let sequence = sequence.expect(201)["id"].as_str().expect("id").to_owned();
    app.post_json(
        &format!("/sequences/{sequence}/enrollments"),
        &app.key,
        json!({"prospect_ids": prospects}),
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
    settle(&app).await;

    // One went; the four others queued behind it, each 30 to 90 s after the one before, not all
    // at the end of the same gap.
    assert_eq!(log(&app).await.len(), 1);
    let slots = waiting_slots(&app, &sequence).await;
    assert_eq!(slots.len(), 4, "{slots:?}");
    for pair in slots.windows(2) {
        let gap = pair[1] - pair[0];
        assert!((30_000..=90_000).contains(&gap), "slots {slots:?}");
    }

    // Each slot, when it comes, lets exactly its own step go; the later ones keep theirs.
    for sent in 2..=5 {
        let now = app.clock.now_ms();
        let wait_s = (slots[sent - 2] - now + 999) / 1000;
        advance(&app, wait_s.max(1)).await;
        // The step before may have gone up to a second after its own slot (the clock moves in
        // whole seconds): this one then waits out the rest of the gap.
        advance(&app, 2).await;
        assert_eq!(log(&app).await.len(), sent, "at slot {}", sent - 2);
        assert_eq!(
            waiting_slots(&app, &sequence).await,
            slots[sent - 1..],
            "a later step lost its slot"
        );
    }
    let finished: i64 = sqlx::query_scalar(
        "select count(*) from enrollments where sequence_id = $1 and status = 'finished'",
    )
    .bind(&sequence)
    .fetch_one(app.db.pool())
    .await
    .expect("count finished");
    assert_eq!(finished, 5);
}

#[tokio::test]
async fn an_out_of_office_reply_holds_the_enrollment_until_the_person_is_back() {
    let app = no_worker_app().await;
    let send = send_key(&app).await;
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Ann", "timezone": "UTC", "working_hours": always()}),
        )
        .await;
    let sender = sender.expect(201)["id"].as_str().expect("id").to_owned();
    let mut people = Vec::new();
    for name in ["dated", "undated"] {
        let url = quiet_profile(&format!("ooo-{name}"));
        let made = app
            .post_json(
                "/prospects",
                &app.key,
                json!({"first_name": name, "profile_url": format!("https://www.{url}")}),
            )
            .await;
        people.push(made.expect(201)["id"].as_str().expect("id").to_owned());
    }
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({
                "name": "Held", "sender_ids": [sender],
                "settings": {"out_of_office_hold_days": 5},
                "steps": [
                    {"type": "connection_request", "delay_hours": 0},
                    {"type": "message", "delay_hours": 1, "text": "Hello {{first_name}}"},
                    {"type": "message", "delay_hours": 24, "text": "Following up, {{first_name}}"},
                ],
            }),
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
    advance(&app, 600).await;
    for person in &people {
        app.post_json(
            "/sandbox/invitations/accept",
            &app.key,
            json!({"prospect_id": person, "sender_id": sender}),
        )
        .await
        .expect(200);
    }
    advance(&app, 2 * HOUR_S).await;
    let first_messages = log(&app)
        .await
        .iter()
        .filter(|entry| entry["kind"] == "message")
        .count();
    assert_eq!(first_messages, 2, "both got the first message");

    // Ten days ahead, named in the reply; the other names no day.
    let now = app.clock.now_ms();
    let back = outreach_runtime::clock::rfc3339(now + 10 * 24 * HOUR_S * 1000)[..10].to_owned();
    for (person, text) in [
        (
            &people[0],
            format!("Automatic reply: I am out of the office until {back}."),
        ),
        (
            &people[1],
            "I am on vacation with limited access to email.".to_owned(),
        ),
    ] {
        app.post_json(
            "/sandbox/replies",
            &app.key,
            json!({"prospect_id": person, "sender_id": sender, "text": text}),
        )
        .await
        .expect(200);
    }
    settle(&app).await;
    let enrollment_of = |person: &str| {
        let app = &app;
        let person = person.to_owned();
        async move {
            let listed = app
                .get(&format!("/enrollments?prospect_id={person}"), &app.key)
                .await;
            let id = listed.expect(200)["items"][0]["id"]
                .as_str()
                .expect("an enrollment")
                .to_owned();
            app.get(&format!("/enrollments/{id}"), &app.key)
                .await
                .expect(200)
                .clone()
        }
    };
    for (person, says) in [(&people[0], back.as_str()), (&people[1], "5 days")] {
        let enrollment = enrollment_of(person).await;
        assert_eq!(enrollment["status"], "active", "{enrollment}");
        let held = enrollment["history"]
            .as_array()
            .expect("history")
            .iter()
            .find(|entry| entry["kind"] == "held")
            .cloned()
            .unwrap_or_else(|| panic!("no `held` entry: {enrollment}"));
        assert_eq!(held["outcome"], "out_of_office");
        assert!(
            held["text"]
                .as_str()
                .is_some_and(|text| text.contains(says)),
            "{held}"
        );
    }

    // The follow-up waits: after 4 days neither went; after 6 the undated one did; after 11
    // the dated one too, on its return day or later.
    let follow_ups = |log: &[Value]| -> Vec<(String, i64)> {
        log.iter()
            .filter(|entry| {
                entry["text"]
                    .as_str()
                    .is_some_and(|text| text.starts_with("Following up"))
            })
            .map(|entry| {
                (
                    entry["prospect_id"]
                        .as_str()
                        .expect("a prospect")
                        .to_owned(),
                    outreach_runtime::clock::parse_rfc3339(entry["at"].as_str().expect("at"))
                        .expect("a time"),
                )
            })
            .collect()
    };
    advance(&app, 4 * 24 * HOUR_S).await;
    assert!(follow_ups(&log(&app).await).is_empty());
    advance(&app, 2 * 24 * HOUR_S).await;
    let sent = follow_ups(&log(&app).await);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].0, people[1]);
    advance(&app, 5 * 24 * HOUR_S).await;
    let sent = follow_ups(&log(&app).await);
    assert_eq!(sent.len(), 2, "{sent:?}");
    let back_ms =
        outreach_runtime::clock::parse_rfc3339(&format!("{back}T00:00:00.000Z")).expect("a day");
    assert!(sent[1].1 >= back_ms, "{sent:?}");
    assert_eq!(sent[1].0, people[0]);
}
