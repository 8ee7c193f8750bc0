//! The approval queue: approve (with a dry run first) and reject, all or nothing, never across
//! sequences or workspaces; enrollments paused, resumed and stopped with `send`.

use serde_json::{Value, json};

use crate::helpers::{HeldBack, TestApp, spawn_app};
use crate::sequences::{insert_sender, prospect, send_key, sequence};

/// A sequence with two senders and `n` prospects added; returns (sequence, approval ids).
pub async fn queued(app: &TestApp, n: usize) -> (String, Vec<String>) {
    let a = insert_sender(app, &app.workspace_id, "A", "connected").await;
    let b = insert_sender(app, &app.workspace_id, "B", "connected").await;
    let id = sequence(app, &[&a, &b]).await;
    let mut prospects = Vec::new();
    for i in 0..n {
        prospects.push(prospect(app, &format!("Person{i}"), "Engines").await);
    }
    let added = app
        .post_json(
            &format!("/sequences/{id}/enrollments"),
            &app.key,
            json!({"prospect_ids": prospects}),
        )
        .await;
    let approvals = added.expect(200)["enrollments"]
        .as_array()
        .expect("enrollments")
        .iter()
        .map(|e| e["approval_id"].as_str().expect("approval id").to_owned())
        .collect();
    (id, approvals)
}

/// Everything a decision could change: the queue by status and the enrollments by status.
async fn state(app: &TestApp) -> Vec<Value> {
    let mut out = Vec::new();
    for status in ["pending", "approved", "rejected", "expired"] {
        out.push(
            app.get(&format!("/approvals?status={status}&limit=200"), &app.key)
                .await
                .expect(200)
                .clone(),
        );
    }
    out.push(
        app.get("/enrollments?limit=200", &app.key)
            .await
            .expect(200)
            .clone(),
    );
    out
}

/// What reaches people happens once when a client sends the call again with its key (as an MCP
/// client may after a broken stream): approving and activating answer their first result, marked
/// replayed, where a second call without the key is refused for the state it finds.
#[tokio::test]
async fn approving_and_activating_again_with_the_same_key_answer_the_first_result() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let (id, approvals) = queued(&app, 2).await;
    let approve = json!({"ids": [approvals[0]], "idempotency_key": "approve-once"});
    let (_, first) = app
        .mcp_call(&send, "service_approve_outreach", approve.clone())
        .await;
    assert_eq!(first["approved"], json!(1), "{first}");
    let again = app
        .mcp_call_result(&send, "service_approve_outreach", approve)
        .await;
    assert_eq!(
        again["_meta"]["idempotent_replayed"],
        json!(true),
        "{again}"
    );
    let (_, replayed) = app
        .mcp_call(
            &send,
            "service_approve_outreach",
            json!({"ids": [approvals[0]], "idempotency_key": "approve-once"}),
        )
        .await;
    assert_eq!(replayed, first, "the replay answers the first result");
    // Without the key, the same approval finds the item decided.
    let (is_error, refused) = app
        .mcp_call(
            &send,
            "service_approve_outreach",
            json!({"ids": [approvals[0]]}),
        )
        .await;
    assert!(is_error);
    assert_eq!(refused["code"], json!("invalid_state"), "{refused}");

    let path = format!("/sequences/{id}/activate");
    let first = app
        .post_idempotent(&path, &send, "activate-once", &json!({}))
        .await;
    let first = first.expect(200).clone();
    let again = app
        .post_idempotent(&path, &send, "activate-once", &json!({}))
        .await;
    assert_eq!(again.expect(200), &first);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    app.post_json(&path, &send, json!({}))
        .await
        .expect_error(409, "invalid_state");
}

/// A preview needs only `read`, like a priced action's estimate: a person may look at what
/// approving would send, or what rejecting would drop, before holding `send`; without `dry_run`
/// (or with it false) the call is refused for its scope, and nothing changes either way.
#[tokio::test]
async fn a_dry_run_needs_only_read_and_changes_nothing() {
    let app = spawn_app().await;
    let (id, _) = queued(&app, 2).await;
    let read = app.read_key().await;
    let before = state(&app).await;
    for path in ["/approvals/approve", "/approvals/reject"] {
        let preview = app
            .post_json(path, &read, json!({"sequence_id": id, "dry_run": true}))
            .await;
        assert_eq!(preview.expect(200)["dry_run"], json!(true), "{path}");
        for body in [
            json!({"sequence_id": id}),
            json!({"sequence_id": id, "dry_run": false}),
        ] {
            app.post_json(path, &read, body)
                .await
                .expect_error(403, "insufficient_scope");
        }
    }
    let (is_error, preview) = app
        .mcp_call(
            &read,
            "service_approve_outreach",
            json!({"sequence_id": id, "dry_run": true}),
        )
        .await;
    assert!(!is_error, "{preview}");
    assert_eq!(preview["approved"], json!(2));
    let (is_error, refused) = app
        .mcp_call(
            &read,
            "service_approve_outreach",
            json!({"sequence_id": id}),
        )
        .await;
    assert!(is_error);
    assert_eq!(refused["code"], json!("insufficient_scope"));
    assert_eq!(state(&app).await, before, "a preview changed something");
}

#[tokio::test]
async fn a_dry_run_changes_nothing_and_approval_schedules_the_enrollments() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let (id, approvals) = queued(&app, 3).await;
    let before = state(&app).await;

    let preview = app
        .post_json(
            "/approvals/approve",
            &send,
            json!({"sequence_id": id, "dry_run": true}),
        )
        .await;
    let preview = preview.expect(200).clone();
    assert_eq!(preview["dry_run"], json!(true));
    assert_eq!(preview["approved"], json!(3));
    let senders = preview["senders"].as_array().expect("senders");
    assert_eq!(senders.len(), 2, "{preview}");
    assert_eq!(
        senders
            .iter()
            .map(|s| s["enrollments"].as_u64().unwrap_or(0))
            .sum::<u64>(),
        3
    );
    assert!(
        senders.iter().all(|s| s["first_send_at"].is_string()),
        "{preview}"
    );
    assert_eq!(state(&app).await, before, "a dry run changed something");

    let now = app.clock.now_ms();
    let approved = app
        .post_json(
            "/approvals/approve",
            &send,
            json!({"ids": [approvals[0], approvals[1]]}),
        )
        .await;
    let approved = approved.expect(200).clone();
    assert_eq!(approved["approved"], json!(2));
    let enrollment = approved["items"][0]["enrollment_id"]
        .as_str()
        .expect("enrollment");
    let detail = app
        .get(&format!("/enrollments/{enrollment}"), &app.key)
        .await;
    let detail = detail.expect(200);
    assert_eq!(detail["status"], json!("scheduled"));
    assert!(
        detail["approved_by"]
            .as_str()
            .unwrap_or_default()
            .starts_with("psn_")
    );
    // The first step (view_profile) has no delay: due now.
    let due = outreach_runtime::clock::parse_rfc3339(detail["next_step_at"].as_str().expect("due"))
        .expect("time");
    assert!((due - now).abs() < 60_000, "due {due}, now {now}");
    let kinds: Vec<&str> = detail["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["added", "approved"]);

    let pending = app
        .get(&format!("/approvals?sequence_id={id}"), &app.key)
        .await;
    assert_eq!(pending.expect(200)["total"], json!(1));
    let decided = app.get("/approvals?status=approved", &app.key).await;
    let decided = decided.expect(200);
    assert_eq!(decided["total"], json!(2));
    assert!(decided["items"][0]["decided_at"].is_string());

    let sequence = app.get(&format!("/sequences/{id}"), &app.key).await;
    let sequence = sequence.expect(200);
    assert_eq!(sequence["enrollment_counts"]["scheduled"], json!(2));
    assert_eq!(sequence["enrollment_counts"]["awaiting_approval"], json!(1));
}

#[tokio::test]
async fn approving_is_all_or_nothing_and_never_crosses_sequences_or_workspaces() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let (id, approvals) = queued(&app, 2).await;
    let (other_id, other_approvals) = queued(&app, 1).await;
    let (_, foreign_key) = app.other_workspace("Other", "other@acme.test").await;
    let before = state(&app).await;

    let unknown = "apr_00000000000NoSuchOne";
    let cases: Vec<(Value, u16, &str, Vec<&str>)> = vec![
        (
            json!({"ids": [approvals[0], unknown]}),
            404,
            "not_found",
            vec![unknown],
        ),
        (
            json!({"ids": [approvals[0], other_approvals[0]], "sequence_id": id}),
            400,
            "invalid_request",
            vec![other_approvals[0].as_str(), id.as_str()],
        ),
        (
            json!({}),
            400,
            "invalid_request",
            vec!["`ids`", "`sequence_id`"],
        ),
        (json!({"ids": []}), 400, "invalid_request", vec!["`ids`"]),
        (
            json!({"sequence_id": "seq_00000000000NoSuchOne"}),
            404,
            "not_found",
            vec!["seq_00000000000NoSuchOne"],
        ),
    ];
    for (body, status, code, words) in &cases {
        for path in ["/approvals/approve", "/approvals/reject"] {
            let refused = app.post_json(path, &send, body.clone()).await;
            let message = refused.expect_error(*status, code);
            for word in words {
                assert!(
                    message.contains(word),
                    "{path} {body}: `{word}` not in {message}"
                );
            }
        }
    }
    assert_eq!(
        state(&app).await,
        before,
        "a refused decision changed something"
    );

    // Another workspace cannot see, approve or reject these items.
    for path in ["/approvals/approve", "/approvals/reject"] {
        let refused = app
            .post_json(path, &foreign_key, json!({"ids": [approvals[0]]}))
            .await;
        // The other owner holds `write` only: reject reaches the lookup, approve the scope check.
        assert!(refused.status.is_client_error(), "{path}: {}", refused.body);
        assert_ne!(refused.status.as_u16(), 200);
    }
    let rejected_foreign = app
        .post_json(
            "/approvals/reject",
            &foreign_key,
            json!({"ids": [approvals[0]]}),
        )
        .await;
    rejected_foreign.expect_error(404, "not_found");
    let foreign_queue = app.get("/approvals", &foreign_key).await;
    assert_eq!(foreign_queue.expect(200)["total"], json!(0));
    assert_eq!(state(&app).await, before);

    // Decided items cannot be decided again.
    app.post_json("/approvals/approve", &send, json!({"ids": [approvals[0]]}))
        .await
        .expect(200);
    for path in ["/approvals/approve", "/approvals/reject"] {
        let again = app
            .post_json(path, &send, json!({"ids": [approvals[0], approvals[1]]}))
            .await;
        let message = again.expect_error(409, "invalid_state");
        assert!(
            message.contains(&approvals[0]) && message.contains("`approved`"),
            "{message}"
        );
    }
    // Only the other sequence's item and this one's second remain pending.
    let pending = app.get("/approvals", &app.key).await;
    assert_eq!(pending.expect(200)["total"], json!(2));
    let _ = other_id;
}

#[tokio::test]
async fn rejecting_finishes_the_enrollment_and_approving_needs_send_on_both_faces() {
    let app = spawn_app().await;
    let (id, approvals) = queued(&app, 2).await;

    let refused = app
        .post_json("/approvals/approve", &app.key, json!({"sequence_id": id}))
        .await;
    refused.expect_error(403, "insufficient_scope");
    let (is_error, mcp) = app
        .mcp_call(
            &app.key,
            "service_approve_outreach",
            json!({"sequence_id": id}),
        )
        .await;
    assert!(is_error);
    assert_eq!(mcp["code"], json!("insufficient_scope"));

    let preview = app
        .post_json(
            "/approvals/reject",
            &app.key,
            json!({"ids": [approvals[0]], "dry_run": true}),
        )
        .await;
    assert_eq!(preview.expect(200)["rejected"], json!(1));
    assert_eq!(
        app.get("/approvals?status=rejected", &app.key)
            .await
            .expect(200)["total"],
        json!(0)
    );

    let rejected = app
        .post_json(
            "/approvals/reject",
            &app.key,
            json!({"ids": [approvals[0]]}),
        )
        .await;
    let rejected = rejected.expect(200).clone();
    let enrollment = rejected["enrollment_ids"][0].as_str().expect("enrollment");
    let detail = app
        .get(&format!("/enrollments/{enrollment}"), &app.key)
        .await;
    let detail = detail.expect(200);
    assert_eq!(detail["status"], json!("finished"));
    assert_eq!(detail["exit_reason"], json!("rejected"));
    assert_eq!(detail["history"][1]["kind"], json!("rejected"));
}

#[tokio::test]
async fn enrollments_pause_resume_and_stop_with_send_and_refuse_wrong_states() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let (id, approvals) = queued(&app, 2).await;
    let enrollments = app
        .get(&format!("/enrollments?sequence_id={id}"), &app.key)
        .await;
    let enrollments: Vec<String> = enrollments.expect(200)["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|e| e["id"].as_str().expect("id").to_owned())
        .collect();
    let first = &enrollments[0];

    let early = app
        .post_json(&format!("/enrollments/{first}/pause"), &send, json!({}))
        .await;
    let message = early.expect_error(409, "invalid_state");
    assert!(
        message.contains("`awaiting_approval`") && message.contains("approve_outreach"),
        "{message}"
    );
    let write_only = app
        .post_json(&format!("/enrollments/{first}/stop"), &app.key, json!({}))
        .await;
    write_only.expect_error(403, "insufficient_scope");

    app.post_json("/approvals/approve", &send, json!({"sequence_id": id}))
        .await
        .expect(200);
    let paused = app
        .post_json(&format!("/enrollments/{first}/pause"), &send, json!({}))
        .await;
    assert_eq!(paused.expect(200)["status"], json!("paused"));
    let twice = app
        .post_json(&format!("/enrollments/{first}/pause"), &send, json!({}))
        .await;
    assert!(
        twice
            .expect_error(409, "invalid_state")
            .contains("`paused`")
    );
    let resumed = app
        .post_json(&format!("/enrollments/{first}/resume"), &send, json!({}))
        .await;
    assert_eq!(resumed.expect(200)["status"], json!("scheduled"));
    let stopped = app
        .post_json(&format!("/enrollments/{first}/stop"), &send, json!({}))
        .await;
    let stopped = stopped.expect(200).clone();
    assert_eq!(stopped["status"], json!("finished"));
    assert_eq!(stopped["exit_reason"], json!("stopped"));
    let kinds: Vec<&str> = stopped["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["added", "approved", "paused", "resumed", "stopped"]);
    for change in ["pause", "resume", "stop"] {
        let refused = app
            .post_json(&format!("/enrollments/{first}/{change}"), &send, json!({}))
            .await;
        let message = refused.expect_error(409, "invalid_state");
        assert!(
            message.contains("`finished`") && message.contains("ended"),
            "{message}"
        );
    }
    let missing = app
        .post_json(
            "/enrollments/enr_00000000000NoSuchOne/stop",
            &send,
            json!({}),
        )
        .await;
    missing.expect_error(404, "not_found");
    let _ = approvals;
}

/// An active sequence whose one person is approved (their first step's job waits): the
/// sequence's id and the enrollment as listed.
async fn one_approved(app: &TestApp, send: &str) -> (String, Value) {
    let (id, _) = queued(app, 1).await;
    app.post_json(&format!("/sequences/{id}/activate"), send, json!({}))
        .await
        .expect(200);
    app.post_json("/approvals/approve", send, json!({"sequence_id": id}))
        .await
        .expect(200);
    let enrollments = app
        .get(&format!("/enrollments?sequence_id={id}"), &app.key)
        .await;
    let enrollment = enrollments.expect(200)["items"][0].clone();
    (id, enrollment)
}

/// Claims a step's waiting job (`key`, `enrollment:...`) as a worker would.
async fn claim_step_job(app: &TestApp, key: &str) {
    let claimed = sqlx::query(
        "update jobs set state = 'running' where kind = 'outreach_step' and unique_key = $1 and state = 'available'",
    )
    .bind(key)
    .execute(app.db.pool())
    .await
    .expect("claim the job");
    assert_eq!(claimed.rows_affected(), 1);
}

/// Resuming an enrollment while a run of its step job is in flight (the run holds its person's
/// lock and is about to end the job, having found the enrollment paused) waits for the run, then
/// enqueues the step again, so the step is not lost as a duplicate of the job that ends. On
/// PostgreSQL the test holds the run's locks itself.
#[tokio::test]
async fn resuming_while_the_step_runs_waits_for_the_run_and_enqueues_the_step_again() {
    let app = crate::outreach::no_worker_app().await;
    let send = send_key(&app).await;
    let (_, enrollment) = one_approved(&app, &send).await;
    let enrollment = enrollment["id"].as_str().expect("id").to_owned();
    let key = format!("enrollment:{enrollment}");
    app.post_json(
        &format!("/enrollments/{enrollment}/pause"),
        &send,
        json!({}),
    )
    .await
    .expect(200);
    // A worker claims the step's job.
    claim_step_job(&app, &key).await;

    // The run: its person locked first (`person_lock`), then the enrollment, found paused, so
    // the job ends, fenced at commit.
    let on_postgres = app.db.backend() == outreach_runtime::prelude::Backend::Postgres;
    let (mut held_back, run_is_fenced) = HeldBack::new();
    let run = async {
        let mut tx = app.db.pool().begin().await.expect("begin");
        if on_postgres {
            sqlx::query(
                "select p.id from prospects p join enrollments e on e.prospect_id = p.id \
                 where e.id = $1 for no key update of p",
            )
            .bind(&enrollment)
            .fetch_one(&mut *tx)
            .await
            .expect("the run locks its person");
        }
        held_back
            .until_it_waits(
                &app,
                &mut tx,
                "the resume never waited for the run's person",
            )
            .await;
        let status: String = sqlx::Row::get(
            &sqlx::query("select status from enrollments where id = $1")
                .bind(&enrollment)
                .fetch_one(&mut *tx)
                .await
                .expect("the run reads the enrollment without a deadlock"),
            0,
        );
        assert_eq!(status, "paused");
        sqlx::query("update jobs set state = 'completed', finished_at = 0 where unique_key = $1 and state = 'running'")
            .bind(&key)
            .execute(&mut *tx)
            .await
            .expect("the run ends its job");
        tx.commit().await.expect("commit the run");
        held_back.release();
    };
    let resume = async {
        run_is_fenced.await.expect("the run is fenced");
        app.post_json(
            &format!("/enrollments/{enrollment}/resume"),
            &send,
            json!({}),
        )
        .await
    };
    let ((), resumed) = tokio::join!(run, resume);
    assert_eq!(resumed.expect(200)["status"], json!("scheduled"));
    let waiting: i64 = sqlx::Row::get(
        &sqlx::query("select count(*) from jobs where unique_key = $1 and state = 'available'")
            .bind(&key)
            .fetch_one(app.db.pool())
            .await
            .expect("count the step's jobs"),
        0,
    );
    assert_eq!(waiting, 1, "the resumed step is enqueued again");
}

/// Stopping a sequence while a run ends its last live enrollment (the run holds the step's job,
/// has finished the enrollment and is about to complete the sequence) waits for the run and then
/// finds the sequence completed. On PostgreSQL the test plays the run's transaction itself:
/// stopping used to lock the sequence and then wait for the enrollment, the run waited for the
/// sequence, and PostgreSQL ended one of them.
#[tokio::test]
async fn stopping_while_a_run_ends_the_last_enrollment_waits_for_the_run() {
    let app = crate::outreach::no_worker_app().await;
    let send = send_key(&app).await;
    let (id, enrollment) = one_approved(&app, &send).await;
    let enrollment = enrollment["id"].as_str().expect("id").to_owned();
    let key = format!("enrollment:{enrollment}");
    claim_step_job(&app, &key).await;

    let (mut held_back, run_holds) = HeldBack::new();
    let run = async {
        let mut tx = app.hold_step_run(&enrollment).await;
        // The run's last step ends the enrollment, which then completes the sequence.
        sqlx::query(
            "update enrollments set status = 'finished', exit_reason = 'completed_steps', next_step_at = null where id = $1",
        )
        .bind(&enrollment)
        .execute(&mut *tx)
        .await
        .expect("the run ends the enrollment");
        held_back
            .until_it_waits(&app, &mut tx, "the stop never waited for the run")
            .await;
        let completed = sqlx::query(
            "update sequences set status = 'completed', finished_at = 1 where id = $1 and status = 'active' \
             and not exists (select 1 from enrollments e where e.sequence_id = $1 \
             and e.status in ('awaiting_approval', 'scheduled', 'active', 'paused'))",
        )
        .bind(&id)
        .execute(&mut *tx)
        .await
        .expect("the run completes the sequence without a deadlock");
        assert_eq!(completed.rows_affected(), 1);
        sqlx::query("update jobs set state = 'completed', finished_at = 0 where unique_key = $1 and state = 'running'")
            .bind(&key)
            .execute(&mut *tx)
            .await
            .expect("the run ends its job");
        tx.commit().await.expect("commit the run");
        held_back.release();
    };
    let stop = async {
        run_holds.await.expect("the run holds its locks");
        app.post_json(&format!("/sequences/{id}/stop"), &send, json!({}))
            .await
    };
    let ((), stopped) = tokio::join!(run, stop);
    let message = stopped.expect_error(409, "invalid_state");
    assert!(message.contains("is `completed`"), "{message}");
    assert_eq!(stopped.body["status"], json!("completed"));
    let sequence = app.get(&format!("/sequences/{id}"), &app.key).await;
    assert_eq!(sequence.expect(200)["status"], json!("completed"));
    let enrollment = app
        .get(&format!("/enrollments/{enrollment}"), &app.key)
        .await;
    assert_eq!(
        enrollment.expect(200)["exit_reason"],
        json!("completed_steps")
    );
}

/// Stopping a sequence while someone is being enrolled in it (the enrolling transaction holds the
/// sequence's row and has written the newcomer's enrollment) waits for the enrollment and stops
/// the newcomer too, under their lock. On PostgreSQL the stop locked the people it read before it
/// held the sequence's row; under the row it finds one it did not lock and may only take them
/// without waiting (`PersonTx::confirm_of_sequence`: waiting there, under the row, could close a
/// circle). Here someone else holds the newcomer (as a reply being recorded would), so the stop
/// must give up, run again in place, and wait for the newcomer with the others: a stop that went
/// past the newcomer unlocked would finish without ever waiting for the holder. SQLite, one writer
/// at a time, runs the stop after the enrollment.
#[tokio::test]
async fn stopping_a_sequence_while_someone_is_enrolled_stops_them_too_under_their_lock() {
    let app = crate::outreach::no_worker_app().await;
    let send = send_key(&app).await;
    let (id, _) = one_approved(&app, &send).await;
    let newcomer = prospect(&app, "Newcomer", "Late Ltd").await;
    let late = "enr_LateNewcomer00000001";
    let on_postgres = app.db.backend() == outreach_runtime::prelude::Backend::Postgres;
    let retries = async || {
        crate::helpers::metric(
            &app.client,
            &app.base_url,
            r#"outreach_transient_retries_total{face="request",outcome="retried"}"#,
        )
        .await
    };
    let retried_before = retries().await;
    let mut holding = None;
    if on_postgres {
        let mut tx = app.db.pool().begin().await.expect("begin");
        drop(
            outreach_actions::person_lock::lock(&mut tx, &app.workspace_id, [newcomer.as_str()])
                .await
                .expect("hold the newcomer"),
        );
        holding = Some(tx);
    }
    let (mut held_back, enrolling) = HeldBack::new();
    let enroll = async {
        let mut tx = app.db.pool().begin().await.expect("begin");
        // What an enrollment does under the newcomer's lock: the sequence's row, then the row.
        sqlx::query("update sequences set updated_at = updated_at + 1 where id = $1")
            .bind(&id)
            .execute(&mut *tx)
            .await
            .expect("the enrollment holds the sequence's row");
        sqlx::query(
            "insert into enrollments (id, workspace_id, sequence_id, prospect_id, status, step_index, \
             created_at, updated_at) values ($1, $2, $3, $4, 'awaiting_approval', 0, 0, 0)",
        )
        .bind(late)
        .bind(&app.workspace_id)
        .bind(&id)
        .bind(&newcomer)
        .execute(&mut *tx)
        .await
        .expect("the newcomer's enrollment");
        held_back
            .until_it_waits(&app, &mut tx, "the stop never waited for the enrollment")
            .await;
        tx.commit().await.expect("commit the enrollment");
        held_back.release();
        // The stop meets the newcomer held, runs again, and waits for them: only then are they
        // let go.
        if let Some(mut holding) = holding {
            assert!(
                app.a_session_waits_on(&mut holding).await,
                "the stop went past a newcomer someone else held"
            );
            assert_eq!(
                retries().await,
                retried_before + 1,
                "the stop ran once more, in place, for the newcomer"
            );
            holding.rollback().await.expect("let the newcomer go");
        }
    };
    let stop = async {
        enrolling.await.expect("the enrollment holds the sequence");
        app.post_json(&format!("/sequences/{id}/stop"), &send, json!({}))
            .await
    };
    let ((), stopped) = tokio::join!(enroll, stop);
    assert_eq!(stopped.expect(200)["status"], json!("stopped"));
    let enrollment = app.get(&format!("/enrollments/{late}"), &app.key).await;
    let enrollment = enrollment.expect(200);
    assert_eq!(enrollment["status"], json!("finished"), "{enrollment}");
    assert_eq!(enrollment["exit_reason"], json!("stopped"), "{enrollment}");
}

/// Deleting a prospect while a run of their step is in its outcome transaction (its job held, its
/// history entry referencing the enrollment, about to write the prospect) waits for the run. On
/// PostgreSQL the test plays the run's transaction: the delete used to lock the prospect and then
/// wait for the enrollment (its cascade, against the entry's key-share lock), the run waited for
/// the prospect, and PostgreSQL ended one of them.
#[tokio::test]
async fn deleting_a_prospect_while_their_step_runs_waits_for_the_run() {
    let app = crate::outreach::no_worker_app().await;
    let send = send_key(&app).await;
    let (_, enrollment) = one_approved(&app, &send).await;
    let prospect = enrollment["prospect_id"].as_str().expect("prospect");
    let enrollment = enrollment["id"].as_str().expect("id");

    let (mut held_back, run_holds) = HeldBack::new();
    let run = async {
        let mut tx = app.hold_step_run(enrollment).await;
        held_back
            .until_it_waits(&app, &mut tx, "the delete never waited for the run")
            .await;
        // What the run writes after a step went out.
        sqlx::query("update prospects set last_contacted_at = 1 where id = $1")
            .bind(prospect)
            .execute(&mut *tx)
            .await
            .expect("the run writes the prospect without a deadlock");
        tx.commit().await.expect("commit the run");
        held_back.release();
    };
    let delete = async {
        run_holds.await.expect("the run holds its locks");
        app.delete(&format!("/prospects/{prospect}"), &app.key)
            .await
    };
    let ((), deleted) = tokio::join!(run, delete);
    deleted.expect(200);
    app.get(&format!("/prospects/{prospect}"), &app.key)
        .await
        .expect_error(404, "not_found");
    app.get(&format!("/enrollments/{enrollment}"), &app.key)
        .await
        .expect_error(404, "not_found");
}

/// A transaction PostgreSQL ends to break a deadlock (whatever lock order caused it) reaches the
/// caller as a 409 `conflict` that says nothing was kept and to send the request again, not as a
/// 500: dispatch rolls the whole call back. SQLite runs one writer at a time and has no deadlocks.
#[tokio::test]
async fn a_deadlock_is_a_409_conflict_that_says_to_send_it_again() {
    let app = spawn_app().await;
    if app.db.backend() != outreach_runtime::prelude::Backend::Postgres {
        return;
    }
    let first = app.create_prospect(json!({"first_name": "One"})).await;
    let second = app.create_prospect(json!({"first_name": "Two"})).await;
    let (one, two) = (first["id"].as_str(), second["id"].as_str());
    let touch = "update prospects set first_name = first_name where id = $1";
    let mut a = app.db.pool().begin().await.expect("begin");
    let mut b = app.db.pool().begin().await.expect("begin");
    sqlx::query(touch)
        .bind(one)
        .execute(&mut *a)
        .await
        .expect("a");
    sqlx::query(touch)
        .bind(two)
        .execute(&mut *b)
        .await
        .expect("b");
    let a_waits = sqlx::query(touch).bind(two).execute(&mut *a);
    let b_waits = async {
        assert!(app.a_session_waits_on(&mut b).await);
        sqlx::query(touch).bind(one).execute(&mut *b).await
    };
    let (a_done, b_done) = tokio::join!(a_waits, b_waits);
    let error = match (a_done, b_done) {
        (Err(error), Ok(_)) | (Ok(_), Err(error)) => error,
        other => panic!("one of the two must be ended: {other:?}"),
    };
    let refused = outreach_runtime::prelude::ApiError::from(error);
    assert_eq!(
        refused.code,
        outreach_runtime::prelude::ErrorCode::CONFLICT,
        "{refused:?}"
    );
    assert!(refused.is_transient(), "a job retries it");
    assert_eq!(refused.body()["retryable"], json!(true));
    assert!(
        refused.message.contains("send it again"),
        "{}",
        refused.message
    );
    assert!(
        refused.message.contains("nothing of it was kept"),
        "{}",
        refused.message
    );
    assert!(
        refused
            .internal
            .as_deref()
            .is_some_and(|cause| cause.contains("deadlock")),
        "the cause is kept for the log: {refused:?}"
    );
}

/// Stopping a sequence while an approval of one of its people is under way (it holds the item
/// and is about to schedule the enrollment) waits for the approval, then stops the person it
/// approved. On PostgreSQL the test holds the approval's locks itself: stopping used to lock the
/// enrollments and then wait for the item, the approval waited for the enrollment, and
/// PostgreSQL ended the stop.
#[tokio::test]
async fn stopping_while_an_approval_is_under_way_waits_and_stops_the_approved_person() {
    stop_while_an_approval_is_under_way(Stopping::Sequence).await;
}

/// The same with the one enrollment stopped (`stop_enrollment`), which expires its item.
#[tokio::test]
async fn stopping_an_enrollment_while_its_approval_is_under_way_waits_and_stops_it() {
    stop_while_an_approval_is_under_way(Stopping::Enrollment).await;
}

/// What a test stops.
enum Stopping {
    Sequence,
    Enrollment,
}

async fn stop_while_an_approval_is_under_way(stopping: Stopping) {
    let app = crate::outreach::no_worker_app().await;
    let send = send_key(&app).await;
    let (id, approvals) = queued(&app, 1).await;
    app.post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await
        .expect(200);
    let enrollments = app
        .get(&format!("/enrollments?sequence_id={id}"), &app.key)
        .await;
    let enrollment = enrollments.expect(200)["items"][0]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let item = approvals[0].clone();

    let (mut held_back, approval_holds) = HeldBack::new();
    let approval = async {
        let mut tx = app.db.pool().begin().await.expect("begin");
        // `approve_outreach`: the item, then the enrollment.
        let marked = sqlx::query(
            "update approvals set status = 'approved', decided_at = 1 where id = $1 and status = 'pending'",
        )
        .bind(&item)
        .execute(&mut *tx)
        .await
        .expect("the approval marks its item");
        assert_eq!(marked.rows_affected(), 1);
        held_back
            .until_it_waits(&app, &mut tx, "the stop never waited for the approval")
            .await;
        sqlx::query(
            "update enrollments set status = 'scheduled', next_step_at = 1, approved_at = 1 \
             where id = $1 and status = 'awaiting_approval'",
        )
        .bind(&enrollment)
        .execute(&mut *tx)
        .await
        .expect("the approval schedules the enrollment without a deadlock");
        tx.commit().await.expect("commit the approval");
        held_back.release();
    };
    let path = match stopping {
        Stopping::Sequence => format!("/sequences/{id}/stop"),
        Stopping::Enrollment => format!("/enrollments/{enrollment}/stop"),
    };
    let stop = async {
        approval_holds.await.expect("the approval holds its item");
        app.post_json(&path, &send, json!({})).await
    };
    let ((), stopped) = tokio::join!(approval, stop);
    let stopped = stopped.expect(200);
    match stopping {
        Stopping::Sequence => assert_eq!(stopped["status"], json!("stopped")),
        Stopping::Enrollment => assert_eq!(stopped["exit_reason"], json!("stopped")),
    }
    let enrollment = app
        .get(&format!("/enrollments/{enrollment}"), &app.key)
        .await;
    let enrollment = enrollment.expect(200);
    assert_eq!(
        (&enrollment["status"], &enrollment["exit_reason"]),
        (&json!("finished"), &json!("stopped"))
    );
    let item = app.get(&format!("/approvals/{item}"), &app.key).await;
    assert_eq!(item.expect(200)["status"], json!("approved"));
}

#[tokio::test]
async fn stopping_a_sequence_finishes_its_enrollments_and_expires_its_queue() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let (id, approvals) = queued(&app, 3).await;
    app.post_json("/approvals/approve", &send, json!({"ids": [approvals[0]]}))
        .await
        .expect(200);
    app.post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await
        .expect(200);
    let stopped = app
        .post_json(&format!("/sequences/{id}/stop"), &send, json!({}))
        .await;
    let stopped = stopped.expect(200);
    assert_eq!(stopped["enrollment_counts"]["finished"], json!(3));
    assert_eq!(
        app.get("/approvals", &app.key).await.expect(200)["total"],
        json!(0)
    );
    assert_eq!(
        app.get("/approvals?status=expired", &app.key)
            .await
            .expect(200)["total"],
        json!(2)
    );
    let finished = app
        .get(
            &format!("/enrollments?sequence_id={id}&status=finished"),
            &app.key,
        )
        .await;
    assert!(
        finished.expect(200)["items"]
            .as_array()
            .expect("items")
            .iter()
            .all(|e| e["exit_reason"] == json!("stopped"))
    );
    // Its items can no longer be approved.
    let late = app
        .post_json("/approvals/approve", &send, json!({"ids": [approvals[1]]}))
        .await;
    assert!(
        late.expect_error(409, "invalid_state")
            .contains("`expired`")
    );
}

#[tokio::test]
async fn a_prospect_marked_do_not_contact_after_proposal_is_not_approved_and_says_why() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let (id, approvals) = queued(&app, 2).await;
    let queue = app
        .get(&format!("/approvals?sequence_id={id}"), &app.key)
        .await;
    let item = queue.expect(200)["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|item| item["id"] == json!(approvals[0]))
        .expect("item")
        .clone();
    let prospect = item["prospect_id"].as_str().expect("prospect");
    app.patch_json(
        &format!("/prospects/{prospect}"),
        &app.key,
        json!({"do_not_contact": true}),
    )
    .await
    .expect(200);
    let approved = app
        .post_json("/approvals/approve", &send, json!({"sequence_id": id}))
        .await;
    let approved = approved.expect(200).clone();
    assert_eq!(approved["approved"], json!(1));
    assert_eq!(approved["not_approved"][0]["id"], json!(approvals[0]));
    assert_eq!(
        approved["not_approved"][0]["reason"],
        json!("do_not_contact")
    );
    let enrollment = item["subject_id"].as_str().expect("enrollment");
    let detail = app
        .get(&format!("/enrollments/{enrollment}"), &app.key)
        .await;
    assert_eq!(detail.expect(200)["exit_reason"], json!("do_not_contact"));
}
