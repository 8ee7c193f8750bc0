//! Several server instances on one database, all running workers, on the same sequences: every
//! (enrollment, step) reaches the network exactly once, read from the sandbox's own log. First
//! with three in-process instances, then with real `outreach serve --test-clock` processes, one
//! of them killed with SIGKILL in the middle of sending and started again: its pending intents
//! are reconciled, none is sent twice and none stays pending. Each run ends by checking what the
//! network saw against the senders' rules (working hours, the gap, the limits).

use std::collections::BTreeMap;
use std::time::Duration;

use outreach_actions::network::DEFAULT_SANDBOX_SEED;
use outreach_actions::network::sandbox::fate;
use serde_json::{Value, json};
use sqlx::Row;

use crate::helpers::{
    Served, TestApp, spawn_app_on_test_clock_with, spawn_app_with_test_clock, start_serve_with,
};
use crate::network_rules::assert_network_rules;
use crate::outreach::always;
use crate::sequences::send_key;

/// People per run; each gets three steps.
const PEOPLE: usize = 45;
const STEPS: usize = 3;
/// The clock's step: more than the 90 s a sender waits between two actions.
const STEP_S: i64 = 120;

/// Profile URLs the sandbox accepts within 3 hours, reachable, never answering.
fn quick_acceptors(tag: &str, count: usize) -> Vec<String> {
    (0..)
        .map(|n| format!("linkedin.com/in/{tag}-{n}"))
        .filter(|url| {
            let fate = fate(DEFAULT_SANDBOX_SEED, url);
            !fate.unreachable
                && fate.replies_after_ms.is_none()
                && fate.accepts_after_ms.is_some_and(|ms| ms <= 3 * 3_600_000)
        })
        .take(count)
        .collect()
}

async fn post(app: &TestApp, base_url: &str, key: &str, path: &str, body: Value) -> Value {
    let response = app
        .client
        .post(format!("{base_url}/api/v1{path}"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|error| panic!("POST {path} to {base_url}: {error}"));
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "POST {path}: {status} {body}");
    body
}

/// Three senders past their warm-up working `hours` (a `working_hours` object), the people, and
/// one approved, active sequence using all three senders. Returns the sequence's id.
async fn prepare(app: &TestApp, tag: &str, hours: Value) -> String {
    let send = send_key(app).await;
    app.grant_credits(1_000).await;
    let base = app.base_url.clone();
    let mut senders = Vec::new();
    for (n, zone) in ["Europe/Berlin", "America/New_York", "Asia/Tokyo"]
        .into_iter()
        .enumerate()
    {
        let created = post(
            app,
            &base,
            &app.key,
            "/senders",
            json!({
                "name": format!("Sender {n}"),
                "timezone": zone,
                "working_hours": hours,
                "limits": {"connection_requests_per_day": 40, "connection_requests_per_week": 200,
                           "messages_per_day": 150, "profile_views_per_day": 150},
            }),
        )
        .await;
        senders.push(created["id"].as_str().expect("id").to_owned());
    }
    // Past the warm-up, so the limits are whole.
    post(
        app,
        &base,
        &app.key,
        "/sandbox/clock/advance",
        json!({"seconds": 15 * 86_400}),
    )
    .await;
    let rows: Vec<Value> = quick_acceptors(tag, PEOPLE)
        .into_iter()
        .enumerate()
        .map(|(n, url)| json!({"first_name": format!("P{n}"), "profile_url": url}))
        .collect();
    let imported = post(
        app,
        &base,
        &app.key,
        "/imports",
        json!({"rows": rows, "list_name": tag}),
    )
    .await;
    let list = imported["list_id"].as_str().expect("list id").to_owned();
    let sequence = post(
        app,
        &base,
        &app.key,
        "/sequences",
        json!({
            "name": tag,
            "sender_ids": senders,
            "steps": [
                {"type": "view_profile", "delay_hours": 0},
                {"type": "connection_request", "delay_hours": 0, "note": "Hi {{first_name}}."},
                {"type": "message", "delay_hours": 1, "text": "Thanks {{first_name}}!"},
            ],
        }),
    )
    .await;
    let sequence = sequence["id"].as_str().expect("id").to_owned();
    let added = post(
        app,
        &base,
        &app.key,
        &format!("/sequences/{sequence}/enrollments"),
        json!({"list_id": list}),
    )
    .await;
    assert_eq!(added["added"], PEOPLE, "{}", added["skipped"]);
    post(
        app,
        &base,
        &send,
        &format!("/sequences/{sequence}/activate"),
        json!({}),
    )
    .await;
    post(
        app,
        &base,
        &send,
        "/approvals/approve",
        json!({"sequence_id": sequence}),
    )
    .await;
    sequence
}

async fn scalar(app: &TestApp, sql: &str, now: i64) -> i64 {
    let query = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()));
    let query = if sql.contains("$1") {
        query.bind(now)
    } else {
        query
    };
    query
        .fetch_one(app.db.pool())
        .await
        .expect("a count")
        .get::<i64, _>(0)
}

async fn scalar_text(app: &TestApp, sql: &str) -> String {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(app.db.pool())
        .await
        .expect("a value")
        .get::<String, _>(0)
}

/// The shared clock as the database holds it (what every instance shows).
async fn shared_now(app: &TestApp) -> i64 {
    app.clock
        .sync(&app.db)
        .await
        .expect("read the shared clock");
    app.clock.now_ms()
}

/// Waits (bounded) until no step job is due or running: the instances' workers have done what
/// the clock allows.
async fn wait_idle(app: &TestApp) {
    for _ in 0..400 {
        let now = shared_now(app).await;
        let busy = scalar(
            app,
            "select count(*) from jobs where kind = 'outreach_step' and \
             ((state = 'available' and run_at <= $1) or state = 'running')",
            now,
        )
        .await;
        if busy == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the workers did not get through the due steps within 10 s");
}

/// Every (enrollment, step) of the sequence in the log, each with how many times.
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
        (
            (row.get("enrollment_id"), row.get("step_index")),
            row.get("n"),
        )
    })
    .collect()
}

/// Every step exactly once, every enrollment finished, no intent pending, no line without one.
async fn assert_exactly_once(app: &TestApp, context: &str) {
    let steps = steps_in_log(app).await;
    for ((enrollment, step), n) in &steps {
        assert_eq!(
            *n, 1,
            "{context}: step {step} of {enrollment} reached the network {n} times"
        );
    }
    assert_eq!(steps.len(), PEOPLE * STEPS, "{context}: steps in the log");
    let strays = scalar(
        app,
        "select count(*) from sandbox_log where intent_token is null",
        0,
    )
    .await;
    assert_eq!(strays, 0, "{context}: log lines without an intent");
    let pending = scalar(
        app,
        "select count(*) from outbound_intents where status = 'pending'",
        0,
    )
    .await;
    assert_eq!(pending, 0, "{context}: intents left pending");
    let finished = scalar(
        app,
        "select count(*) from enrollments where status = 'finished' and exit_reason = 'completed_steps'",
        0,
    )
    .await;
    assert_eq!(
        finished as usize, PEOPLE,
        "{context}: enrollments completed"
    );
    // What the network saw: inside the hours, 30 s apart per sender, within the limits.
    assert_network_rules(app, context).await;
}

/// Moves the clock through `advance_urls` in turn until every step is in the log (bounded).
/// `between` runs after each step with the round number (to kill and restart a process).
async fn run_until_done<F, Fut>(app: &TestApp, mut advance_urls: F, context: &str)
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = String>,
{
    for round in 0..600 {
        let base = advance_urls(round).await;
        post(
            app,
            &base,
            &app.key,
            "/sandbox/clock/advance",
            json!({"seconds": STEP_S}),
        )
        .await;
        wait_idle(app).await;
        if steps_in_log(app).await.len() == PEOPLE * STEPS
            && scalar(
                app,
                "select count(*) from enrollments where status in ('scheduled', 'active')",
                0,
            )
            .await
                == 0
        {
            return;
        }
    }
    panic!(
        "{context}: after 600 clock steps only {} of {} steps reached the network; {}",
        steps_in_log(app).await.len(),
        PEOPLE * STEPS,
        diagnose(app).await
    );
}

/// Where the enrollments and their jobs stand, for a failure's message.
async fn diagnose(app: &TestApp) -> String {
    let now = shared_now(app).await;
    let enrollments: Vec<String> = sqlx::query(
        "select status, step_index, count(*) as n, sum(case when accepted_at is null then 0 else 1 end) as accepted, \
         min(next_step_at) as next from enrollments group by status, step_index",
    )
    .fetch_all(app.db.pool())
    .await
    .expect("enrollments")
    .iter()
    .map(|row| {
        format!(
            "{} at step {}: {} ({} accepted, next in {:?} s)",
            row.get::<String, _>("status"),
            row.get::<i64, _>("step_index"),
            row.get::<i64, _>("n"),
            row.get::<Option<i64>, _>("accepted").unwrap_or(0),
            row.get::<Option<i64>, _>("next").map(|at| (at - now) / 1000)
        )
    })
    .collect();
    let jobs: Vec<String> = sqlx::query(
        "select kind, state, count(*) as n, min(run_at) as run_at from jobs group by kind, state",
    )
    .fetch_all(app.db.pool())
    .await
    .expect("jobs")
    .iter()
    .map(|row| {
        format!(
            "{} {}: {} (first in {} s)",
            row.get::<String, _>("kind"),
            row.get::<String, _>("state"),
            row.get::<i64, _>("n"),
            (row.get::<i64, _>("run_at") - now) / 1000
        )
    })
    .collect();
    format!("enrollments: {enrollments:?}; jobs: {jobs:?}")
}

#[tokio::test]
async fn three_instances_send_every_step_exactly_once() {
    let app = spawn_app_with_test_clock().await;
    let second = app.second_instance().await;
    let third = app.second_instance().await;
    let sequence = prepare(&app, "three", always()).await;
    assert!(!sequence.is_empty());
    let urls = [
        app.base_url.clone(),
        second.base_url.clone(),
        third.base_url.clone(),
    ];
    run_until_done(
        &app,
        |round| {
            let url = urls[round % urls.len()].clone();
            async move { url }
        },
        "three in-process instances",
    )
    .await;
    assert_exactly_once(&app, "three in-process instances").await;
}

/// `outreach serve --test-clock` on the app's database, its workers polling often.
async fn serve_process(app: &TestApp) -> Served {
    start_serve_with(app.database(), &["--test-clock"]).await
}

/// How many times the victim is killed while an intent is pending.
const KILLS: usize = 3;

#[tokio::test]
async fn an_instance_killed_while_sending_is_reconciled_after_its_restart() {
    // The test's own server runs no worker: the two processes do all the sending.
    let app = spawn_app_on_test_clock_with(|config| config.jobs.workers = 0).await;
    let day = json!([{"start": "07:00", "end": "21:00"}]);
    let hours = json!({"monday": day, "tuesday": day, "wednesday": day, "thursday": day,
                       "friday": day, "saturday": day, "sunday": day});
    let sequence = prepare(&app, "killed", hours).await;
    assert!(!sequence.is_empty());
    // One sender's calls take a while to reach the network, so some kills land before they do
    // (and the step is sent again, through the gate) and some after (and it is only recorded).
    let slow = scalar_text(
        &app,
        "select sender_id from sequence_senders order by position limit 1",
    )
    .await;
    post(
        &app,
        &app.base_url,
        &app.key,
        &format!("/sandbox/senders/{slow}/latency"),
        json!({"latency_ms": 400}),
    )
    .await;
    let mut victim = Some(serve_process(&app).await);
    let survivor = serve_process(&app).await;
    let mut kills = 0;
    let mut done = false;
    for round in 0..600 {
        let base = if round % 2 == 0 {
            survivor.base_url.clone()
        } else {
            victim.as_ref().expect("the victim runs").base_url.clone()
        };
        // The advance plays its interval out before it answers (the steps run inside the call
        // on the instance that takes it, and on the others' workers): a round that kills sends
        // it without waiting, so the kill can land in the middle of it.
        let advance = {
            let (client, key) = (app.client.clone(), app.key.clone());
            async move {
                client
                    .post(format!("{base}/api/v1/sandbox/clock/advance"))
                    .bearer_auth(key)
                    .json(&json!({"seconds": STEP_S}))
                    .send()
                    .await
                    .map(|response| response.status())
            }
        };
        let kill_round = kills < KILLS && round % 7 == 3;
        let in_flight = if kill_round {
            Some(tokio::spawn(advance))
        } else {
            let status = advance.await.expect("advance the clock");
            assert!(status.is_success(), "advance_clock: {status}");
            None
        };
        if kill_round {
            // In the middle of sending: as soon as an intent is pending, the victim dies with
            // whatever it holds, and starts again.
            let mut pending = 0;
            for _ in 0..400 {
                pending = scalar(
                    &app,
                    "select count(*) from outbound_intents where status = 'pending'",
                    0,
                )
                .await;
                if pending > 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            if pending > 0 {
                victim.take().expect("the victim runs").kill().await;
                kills += 1;
                let unheard = scalar(
                    &app,
                    "select count(*) from outbound_intents i where i.status = 'pending' and not exists \
                     (select 1 from sandbox_log l where l.intent_token = i.id)",
                    0,
                )
                .await;
                println!(
                    "kill {kills} with {pending} intents pending, {unheard} of them not heard by the network"
                );
                victim = Some(serve_process(&app).await);
            }
        }
        if let Some(in_flight) = in_flight {
            // Answered, or cut off with the victim: either way the next rounds play on.
            let _ = in_flight.await;
        }
        wait_idle(&app).await;
        if steps_in_log(&app).await.len() == PEOPLE * STEPS
            && scalar(
                &app,
                "select count(*) from enrollments where status in ('scheduled', 'active')",
                0,
            )
            .await
                == 0
        {
            done = true;
            break;
        }
    }
    assert!(kills > 0, "no kill landed while an intent was pending");
    assert!(
        done,
        "the steps did not all go out: {}",
        diagnose(&app).await
    );
    // A lease held by a killed process ends with time; a worker picks its job up again.
    for _ in 0..10 {
        post(
            &app,
            &survivor.base_url.clone(),
            &app.key,
            "/sandbox/clock/advance",
            json!({"seconds": 600}),
        )
        .await;
        wait_idle(&app).await;
    }
    assert_exactly_once(&app, "a process killed with SIGKILL and restarted").await;
    survivor.terminate().await;
    if let Some(victim) = victim {
        victim.terminate().await;
    }
}
