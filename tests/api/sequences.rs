//! Sequences: create and edit with `write`, start, pause, resume and stop with `send`; steps and
//! templates checked when written; `add_to_sequence` reporting every prospect it skips.
//!
//! Senders are rows made here with SQL, so a test can give one any status (and any workspace)
//! directly; their hours and limits are the senders module's defaults, stored as it stores them.

use outreach_runtime::Scope;
use outreach_runtime::admin;
use serde_json::{Value, json};

use crate::helpers::{OWNER_EMAIL, TestApp, spawn_app};

/// Inserts a sender of this app's workspace with the given status; returns its id.
pub async fn insert_sender(app: &TestApp, workspace_id: &str, name: &str, status: &str) -> String {
    use outreach_actions::senders::{WorkingHours, limits::DEFAULT_LIMITS};
    let id = outreach_runtime::ids::new_id("snd");
    let now = app.clock.now_ms();
    sqlx::query(
        "insert into senders (id, workspace_id, name, status, timezone, working_hours, limits, created_at, updated_at) \
         values ($1, $2, $3, $4, 'Europe/Berlin', $5, $6, $7, $7)",
    )
    .bind(&id)
    .bind(workspace_id)
    .bind(name)
    .bind(status)
    .bind(serde_json::to_string(&WorkingHours::office()).expect("hours"))
    .bind(serde_json::to_string(&DEFAULT_LIMITS).expect("limits"))
    .bind(now)
    .execute(app.db.pool())
    .await
    .expect("insert a sender");
    id
}

/// Accepts the sending terms and returns an owner key with `send`.
pub async fn send_key(app: &TestApp) -> String {
    admin::accept_terms(&app.db, &app.clock, &app.workspace_id, OWNER_EMAIL)
        .await
        .expect("accept the terms");
    app.create_key(OWNER_EMAIL, Scope::Send).await.key
}

/// A prospect reachable on the network.
pub async fn prospect(app: &TestApp, first_name: &str, company: &str) -> String {
    let slug = format!(
        "{}-{}",
        first_name.to_lowercase(),
        outreach_runtime::ids::new_id("x").to_lowercase()
    );
    app.create_prospect(json!({
        "first_name": first_name,
        "last_name": "Example",
        "company_name": company,
        "profile_url": format!("https://www.linkedin.com/in/{slug}"),
    }))
    .await["id"]
        .as_str()
        .expect("an id")
        .to_owned()
}

pub fn steps() -> Value {
    json!([
        {"type": "view_profile"},
        {"type": "connection_request", "delay_hours": 24, "note": "Hi {{first_name|there}}, I work with teams like {{company_name}}."},
        {"type": "message", "delay_hours": 48, "text": "Thanks for connecting, {{first_name}}!"},
    ])
}

/// A draft sequence with the standard steps and these senders; returns its id.
pub async fn sequence(app: &TestApp, senders: &[&str]) -> String {
    let created = app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": "Q3 founders", "steps": steps(), "sender_ids": senders}),
        )
        .await;
    created.expect(201)["id"]
        .as_str()
        .expect("an id")
        .to_owned()
}

async fn sequence_count(app: &TestApp) -> u64 {
    app.get("/sequences?limit=1", &app.key).await.expect(200)["total"]
        .as_u64()
        .expect("a total")
}

#[tokio::test]
async fn a_sequence_goes_draft_active_paused_active_stopped_with_send_and_says_its_state_otherwise()
{
    let app = spawn_app().await;
    let sender = insert_sender(&app, &app.workspace_id, "Ada's account", "connected").await;
    let id = sequence(&app, &[&sender]).await;
    let created = app.get(&format!("/sequences/{id}"), &app.key).await;
    let body = created.expect(200);
    assert_eq!(body["status"], json!("draft"));
    assert_eq!(body["sender_ids"], json!([sender]));
    assert_eq!(body["settings"]["stop_on_reply"], json!(true));
    assert_eq!(
        body["settings"]["exit_after_days_without_acceptance"],
        json!(21)
    );
    assert_eq!(body["enrollment_counts"]["awaiting_approval"], json!(0));
    assert_eq!(body["sending"]["sending"], json!(false));
    assert!(
        body["sending"]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("draft")
    );

    // `write` cannot start it, on either face.
    let refused = app
        .post_json(&format!("/sequences/{id}/activate"), &app.key, json!({}))
        .await;
    refused.expect_error(403, "insufficient_scope");
    let (is_error, mcp) = app
        .mcp_call(&app.key, "service_activate_sequence", json!({"id": id}))
        .await;
    assert!(is_error);
    assert_eq!(mcp["code"], json!("insufficient_scope"));

    let send = send_key(&app).await;
    let active = app
        .post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await;
    assert_eq!(active.expect(200)["status"], json!("active"));
    assert!(active.body["activated_at"].is_string());

    let again = app
        .post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await;
    let message = again.expect_error(409, "invalid_state");
    assert!(message.contains("is `active`"), "{message}");
    assert!(
        message.contains("`pause_sequence` and `stop_sequence`"),
        "{message}"
    );
    assert_eq!(
        again.body["allowed"],
        json!(["pause_sequence", "stop_sequence"])
    );

    // Steps change only in draft or paused; the name changes any time.
    let edit = app
        .patch_json(&format!("/sequences/{id}"), &app.key, json!({"steps": []}))
        .await;
    let message = edit.expect_error(409, "invalid_state");
    assert!(
        message.contains("is `active`") && message.contains("pause"),
        "{message}"
    );
    let renamed = app
        .patch_json(
            &format!("/sequences/{id}"),
            &app.key,
            json!({"name": "Q3 founders (EU)"}),
        )
        .await;
    assert_eq!(renamed.expect(200)["name"], json!("Q3 founders (EU)"));

    let paused = app
        .post_json(&format!("/sequences/{id}/pause"), &send, json!({}))
        .await;
    assert_eq!(paused.expect(200)["status"], json!("paused"));
    let edited = app
        .patch_json(
            &format!("/sequences/{id}"),
            &app.key,
            json!({"steps": [{"type": "connection_request"}], "settings": {"stop_on_reply": false}}),
        )
        .await;
    let body = edited.expect(200);
    assert_eq!(
        body["steps"],
        json!([{"key": "s1", "type": "connection_request", "delay_hours": 0, "note": null, "text": null}])
    );
    assert_eq!(body["settings"]["stop_on_reply"], json!(false));
    assert_eq!(body["settings"]["skip_if_contacted_within_days"], json!(30));
    let activate_paused = app
        .post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await;
    assert!(
        activate_paused
            .expect_error(409, "invalid_state")
            .contains("resume_sequence")
    );

    let resumed = app
        .post_json(&format!("/sequences/{id}/resume"), &send, json!({}))
        .await;
    assert_eq!(resumed.expect(200)["status"], json!("active"));
    let deleted = app.delete(&format!("/sequences/{id}"), &app.key).await;
    assert!(
        deleted
            .expect_error(409, "invalid_state")
            .contains("only a `draft`")
    );

    let stopped = app
        .post_json(&format!("/sequences/{id}/stop"), &send, json!({}))
        .await;
    assert_eq!(stopped.expect(200)["status"], json!("stopped"));
    assert!(stopped.body["finished_at"].is_string());
    for transition in ["activate", "pause", "resume", "stop"] {
        let refused = app
            .post_json(&format!("/sequences/{id}/{transition}"), &send, json!({}))
            .await;
        let message = refused.expect_error(409, "invalid_state");
        assert!(
            message.contains("is `stopped`") && message.contains("nothing is allowed"),
            "{message}"
        );
    }
    let draft = sequence(&app, &[]).await;
    let stop_draft = app
        .post_json(&format!("/sequences/{draft}/stop"), &send, json!({}))
        .await;
    assert!(
        stop_draft
            .expect_error(409, "invalid_state")
            .contains("delete_sequence")
    );
}

#[tokio::test]
async fn activation_preflight_names_every_reason_at_once() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let empty = app
        .post_json("/sequences", &app.key, json!({"name": "Empty"}))
        .await
        .expect(201)["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let refused = app
        .post_json(&format!("/sequences/{empty}/activate"), &send, json!({}))
        .await;
    let message = refused.expect_error(409, "invalid_state");
    assert!(
        message.contains("no steps") && message.contains("no senders"),
        "{message}"
    );
    assert_eq!(refused.body["reasons"].as_array().map(Vec::len), Some(2));

    let fine = insert_sender(&app, &app.workspace_id, "Fine", "connected").await;
    let gone = insert_sender(&app, &app.workspace_id, "Gone", "disconnected").await;
    let id = sequence(&app, &[&fine, &gone]).await;
    let refused = app
        .post_json(&format!("/sequences/{id}/activate"), &send, json!({}))
        .await;
    let message = refused.expect_error(409, "invalid_state");
    assert!(
        message.contains(&gone) && message.contains("`disconnected`"),
        "{message}"
    );
    assert!(!message.contains(&fine), "{message}");
    let still = app.get(&format!("/sequences/{id}"), &app.key).await;
    assert_eq!(still.expect(200)["status"], json!("draft"));
}

#[tokio::test]
async fn bad_steps_senders_and_settings_are_400s_that_name_the_problem_and_change_nothing() {
    let app = spawn_app().await;
    let (other_workspace, _) = app.other_workspace("Other", "other@acme.test").await;
    let foreign = insert_sender(&app, &other_workspace, "Not ours", "connected").await;
    let long_note = "x".repeat(301);
    let long_text = "y".repeat(8001);
    let cases: Vec<(Value, &[&str])> = vec![
        (
            json!({"name": "N", "steps": [{"type": "connection_request", "note": long_note}]}),
            &["`steps[0].note`", "301 characters", "300"],
        ),
        (
            json!({"name": "M", "steps": [{"type": "view_profile"}, {"type": "message", "text": "Hi"}]}),
            &["`steps[1]`", "connection_request", "first-degree"],
        ),
        (
            json!({"name": "V", "steps": [{"type": "connection_request"}, {"type": "message", "text": "Hi {{nick_name}}"}]}),
            &["`steps[1].text`", "`{{nick_name}}`"],
        ),
        (
            json!({"name": "U", "steps": [{"type": "connection_request", "note": "Hi {{first_name"}]}),
            &["`steps[0].note`", "without closing"],
        ),
        (
            json!({"name": "E", "steps": [{"type": "connection_request"}, {"type": "message", "text": "  "}]}),
            &["`steps[1].text`", "must not be empty"],
        ),
        (
            json!({"name": "L", "steps": [{"type": "connection_request"}, {"type": "message", "text": long_text}]}),
            &["`steps[1].text`", "8001 characters", "8000"],
        ),
        (
            // Nine messages of 8,000 characters each are fine one by one, too much together.
            json!({"name": "B", "steps": std::iter::once(json!({"type": "connection_request"}))
                .chain((0..9).map(|_| json!({"type": "message", "text": "z".repeat(8000)})))
                .collect::<Vec<_>>()}),
            &["`steps`", "bytes of JSON", "65536"],
        ),
        (
            json!({"name": "D", "steps": [{"type": "view_profile", "delay_hours": 5000}]}),
            &["`steps[0].delay_hours`"],
        ),
        (
            json!({"name": "T", "steps": [{"type": "email"}]}),
            &["email"],
        ),
        (
            json!({"name": "F", "steps": [{"type": "view_profile", "wait": 3}]}),
            &["wait"],
        ),
        (
            json!({"name": "S", "sender_ids": [foreign, "snd_00000000000NoSuchOne"]}),
            &["`sender_ids`", "snd_00000000000NoSuchOne"],
        ),
        (
            json!({"name": "X", "settings": {"exit_after_days_without_acceptance": 0}}),
            &["`settings.exit_after_days_without_acceptance`"],
        ),
        (json!({"name": " "}), &["`name`"]),
    ];
    for (body, words) in &cases {
        let refused = app.post_json("/sequences", &app.key, body.clone()).await;
        let message = refused.expect_error(400, "invalid_request");
        for word in *words {
            assert!(message.contains(word), "{body}: `{word}` not in: {message}");
        }
        let (is_error, mcp) = app
            .mcp_call(&app.key, "service_create_sequence", body.clone())
            .await;
        assert!(is_error, "{body}");
        assert_eq!(mcp, refused.body, "{body}: the faces differ");
    }
    assert!(
        app.post_json(
            "/sequences",
            &app.key,
            json!({"name": "S", "sender_ids": [foreign]})
        )
        .await
        .expect_error(400, "invalid_request")
        .contains(&foreign),
        "another workspace's sender is unknown here"
    );
    assert_eq!(
        sequence_count(&app).await,
        0,
        "a refused create made a sequence"
    );

    // A refused update leaves the sequence as it was.
    let id = sequence(&app, &[]).await;
    let before = app
        .get(&format!("/sequences/{id}"), &app.key)
        .await
        .expect(200)
        .clone();
    let refused = app
        .patch_json(
            &format!("/sequences/{id}"),
            &app.key,
            json!({"name": "Renamed", "steps": [{"type": "message", "text": "Hello"}]}),
        )
        .await;
    refused.expect_error(400, "invalid_request");
    let after = app
        .get(&format!("/sequences/{id}"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(before, after);
}

/// Sets a prospect column directly (the outreach engine sets these; there is no action for them).
async fn set_column(app: &TestApp, prospect: &str, sql_set: &str, value: Value) {
    let sql = format!("update prospects set {sql_set} = $1 where id = $2");
    let query = sqlx::query(sqlx::AssertSqlSafe(sql));
    let query = match value {
        Value::Bool(flag) => query.bind(i64::from(flag)),
        Value::Number(n) => query.bind(n.as_i64().expect("an integer")),
        other => query.bind(other.as_str().map(str::to_owned)),
    };
    query
        .bind(prospect)
        .execute(app.db.pool())
        .await
        .expect("set a prospect column");
}

#[tokio::test]
async fn add_to_sequence_enrolls_awaiting_approval_and_reports_each_prospect_skipped() {
    let app = spawn_app().await;
    let a = insert_sender(&app, &app.workspace_id, "A", "connected").await;
    let b = insert_sender(&app, &app.workspace_id, "B", "connected").await;
    let id = sequence(&app, &[&a, &b]).await;
    let other = sequence(&app, &[&a]).await;

    let ada = prospect(&app, "Ada", "Engines").await;
    let grace = prospect(&app, "Grace", "Navy").await;
    let blocked = prospect(&app, "Blocked", "Nope").await;
    set_column(&app, &blocked, "do_not_contact", json!(true)).await;
    let unreachable = app
        .create_prospect(json!({"first_name": "Mail", "email": "only@mail.test"}))
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let busy = prospect(&app, "Busy", "Elsewhere").await;
    app.post_json(
        &format!("/sequences/{other}/enrollments"),
        &app.key,
        json!({"prospect_ids": [busy]}),
    )
    .await
    .expect(200);
    let recent = prospect(&app, "Recent", "Touched").await;
    set_column(
        &app,
        &recent,
        "last_contacted_at",
        json!(app.clock.now_ms() - 86_400_000),
    )
    .await;
    let long = prospect(&app, "Long", &"Z".repeat(290)).await;
    let nameless = app
        .create_prospect(json!({"last_name": "Nameless", "company_name": "Nameless Co", "profile_url": "https://linkedin.com/in/nameless-1"}))
        .await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let unknown = "prs_00000000000NoSuchOne".to_owned();

    let added = app
        .post_json(
            &format!("/sequences/{id}/enrollments"),
            &app.key,
            json!({"prospect_ids": [ada, grace, blocked, unreachable, busy, recent, long, nameless, unknown, ada]}),
        )
        .await;
    let body = added.expect(200).clone();
    assert_eq!(body["added"], json!(2), "{body}");
    let reasons: Vec<(String, String)> = body["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|s| {
            (
                s["prospect_id"].as_str().unwrap_or_default().to_owned(),
                s["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let expected = [
        (&blocked, "do_not_contact"),
        (&unreachable, "no_profile_url"),
        (&busy, "in_other_live_sequence"),
        (&recent, "contacted_recently"),
        (&long, "text_too_long"),
        (&nameless, "missing_value"),
        (&unknown, "unknown_prospect"),
    ];
    assert_eq!(
        reasons,
        expected
            .iter()
            .map(|(id, r)| ((*id).clone(), (*r).to_owned()))
            .collect::<Vec<_>>()
    );
    let long_detail = body["skipped"][4]["detail"].as_str().unwrap_or_default();
    assert!(
        long_detail.contains("Step 1") && long_detail.contains("300"),
        "{long_detail}"
    );
    let missing_detail = body["skipped"][5]["detail"].as_str().unwrap_or_default();
    assert!(
        missing_detail.contains("{{first_name}}") && missing_detail.contains("Step 2"),
        "{missing_detail}"
    );
    // Spread over both senders.
    let senders: Vec<&str> = body["enrollments"]
        .as_array()
        .expect("enrollments")
        .iter()
        .filter_map(|e| e["sender_id"].as_str())
        .collect();
    assert_eq!(senders.len(), 2);
    assert_ne!(senders[0], senders[1], "{body}");
    assert_eq!(
        body["sequence"]["enrollment_counts"]["awaiting_approval"],
        json!(2)
    );

    // Adding again reports them as enrolled already.
    let again = app
        .post_json(
            &format!("/sequences/{id}/enrollments"),
            &app.key,
            json!({"prospect_ids": [ada]}),
        )
        .await;
    assert_eq!(
        again.expect(200)["skipped"][0]["reason"],
        json!("already_enrolled")
    );

    // The queue shows each item's rendered texts and who proposed it.
    let queue = app
        .get(&format!("/approvals?sequence_id={id}"), &app.key)
        .await;
    let queue = queue.expect(200);
    assert_eq!(queue["total"], json!(2));
    let item = queue["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|item| item["prospect_id"] == json!(ada))
        .expect("Ada's item");
    assert_eq!(item["kind"], json!("enrollment"));
    assert_eq!(item["status"], json!("pending"));
    assert_eq!(item["sequence_name"], json!("Q3 founders"));
    assert_eq!(item["prospect"]["full_name"], json!("Ada Example"));
    assert_eq!(
        item["texts"],
        json!([
            {"step_index": 1, "type": "connection_request", "text": "Hi Ada, I work with teams like Engines."},
            {"step_index": 2, "type": "message", "text": "Thanks for connecting, Ada!"},
        ])
    );
    assert_eq!(item["proposed_by"]["type"], json!("api_key"));
    assert!(
        item["proposed_by"]["person_id"]
            .as_str()
            .unwrap_or_default()
            .starts_with("psn_")
    );

    // The enrollment shows its history.
    let enrollment = item["subject_id"].as_str().expect("subject");
    let detail = app
        .get(&format!("/enrollments/{enrollment}"), &app.key)
        .await;
    let detail = detail.expect(200);
    assert_eq!(detail["status"], json!("awaiting_approval"));
    assert_eq!(detail["approval_id"], item["id"]);
    assert_eq!(detail["history"][0]["kind"], json!("added"));
    let listed = app
        .get(
            &format!("/enrollments?sequence_id={id}&status=awaiting_approval"),
            &app.key,
        )
        .await;
    assert_eq!(listed.expect(200)["total"], json!(2));
}

#[tokio::test]
async fn add_to_sequence_takes_a_list_and_refuses_bad_input_changing_nothing() {
    let app = spawn_app().await;
    let sender = insert_sender(&app, &app.workspace_id, "A", "connected").await;
    let id = sequence(&app, &[&sender]).await;
    let ada = prospect(&app, "Ada", "Engines").await;
    let grace = prospect(&app, "Grace", "Navy").await;
    let list = app
        .post_json("/lists", &app.key, json!({"name": "Founders"}))
        .await
        .expect(201)["id"]
        .as_str()
        .expect("id")
        .to_owned();
    app.post_json(
        &format!("/lists/{list}/prospects"),
        &app.key,
        json!({"prospect_ids": [ada, grace]}),
    )
    .await
    .expect(200);

    let empty = app
        .post_json("/sequences", &app.key, json!({"name": "No steps"}))
        .await
        .expect(201)["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let bad: Vec<(String, Value, u16, &str)> = vec![
        (id.clone(), json!({}), 400, "invalid_request"),
        (
            id.clone(),
            json!({"prospect_ids": [ada], "list_id": list}),
            400,
            "invalid_request",
        ),
        (
            id.clone(),
            json!({"prospect_ids": []}),
            400,
            "invalid_request",
        ),
        (
            id.clone(),
            json!({"list_id": "lst_00000000000NoSuchOne"}),
            404,
            "not_found",
        ),
        (
            "seq_00000000000NoSuchOne".to_owned(),
            json!({"prospect_ids": [ada]}),
            404,
            "not_found",
        ),
        (
            empty.clone(),
            json!({"prospect_ids": [ada]}),
            409,
            "invalid_state",
        ),
    ];
    for (sequence, body, status, code) in bad {
        let refused = app
            .post_json(
                &format!("/sequences/{sequence}/enrollments"),
                &app.key,
                body.clone(),
            )
            .await;
        refused.expect_error(status, code);
    }
    let queue = app.get("/approvals", &app.key).await;
    assert_eq!(
        queue.expect(200)["total"],
        json!(0),
        "a refused call enrolled someone"
    );

    let added = app
        .post_json(
            &format!("/sequences/{id}/enrollments"),
            &app.key,
            json!({"list_id": list}),
        )
        .await;
    assert_eq!(added.expect(200)["added"], json!(2));

    // Deleting the draft removes its enrollments and their items.
    let deleted = app.delete(&format!("/sequences/{id}"), &app.key).await;
    assert_eq!(deleted.expect(200)["deleted"], json!(true));
    assert_eq!(
        app.get("/approvals", &app.key).await.expect(200)["total"],
        json!(0)
    );
    assert_eq!(
        app.get("/enrollments", &app.key).await.expect(200)["total"],
        json!(0)
    );
}

#[tokio::test]
async fn every_send_action_refuses_a_write_key_and_a_workspace_without_terms_on_both_faces() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    // Withdraw the terms: the `send` key is capped at `write` from the next call on.
    sqlx::query("update workspaces set terms_accepted_at = null where id = $1")
        .bind(&app.workspace_id)
        .execute(app.db.pool())
        .await
        .expect("withdraw the terms");
    let mut checked = 0;
    for action in app.registry.actions() {
        if action.def.scope != Scope::Send {
            continue;
        }
        checked += 1;
        let name = action.name();
        let input = json!({"id": "seq_00000000000NoSuchOne", "ids": ["apr_00000000000NoSuchOne"]});
        let input = match name {
            "approve_outreach" => json!({"ids": ["apr_00000000000NoSuchOne"]}),
            "reply_to_conversation" => json!({"id": "cnv_00000000000NoSuchOne", "text": "Hi"}),
            n if n.ends_with("_enrollment") => json!({"id": "enr_00000000000NoSuchOne"}),
            n if n.ends_with("_sequence") => json!({"id": "seq_00000000000NoSuchOne"}),
            _ => input,
        };
        for (key, why) in [(&app.key, "`send`"), (&send, "terms")] {
            let rest = app
                .rest_call(action, crate::helpers::Auth::Key(key), &input)
                .await;
            let message = rest.expect_error(403, "insufficient_scope");
            assert!(message.contains(why), "{name}: {message}");
            let (is_error, mcp) = app
                .mcp_call(key, &format!("service_{name}"), input.clone())
                .await;
            assert!(is_error, "{name}");
            assert_eq!(mcp["code"], json!("insufficient_scope"), "{name}: {mcp}");
        }
    }
    assert_eq!(
        checked, 9,
        "the send-scoped actions of sequences, enrollments, approvals and conversations"
    );
}

#[tokio::test]
async fn new_steps_rerender_the_queue_or_are_refused_naming_the_prospects_they_do_not_fit() {
    let app = spawn_app().await;
    let sender = insert_sender(&app, &app.workspace_id, "A", "connected").await;
    let id = sequence(&app, &[&sender]).await;
    let ada = prospect(&app, "Ada", "Engines").await;
    app.post_json(
        &format!("/sequences/{id}/enrollments"),
        &app.key,
        json!({"prospect_ids": [ada]}),
    )
    .await
    .expect(200);

    let refused = app
        .patch_json(
            &format!("/sequences/{id}"),
            &app.key,
            json!({"steps": [{"type": "connection_request", "note": "Hi {{title}}"}]}),
        )
        .await;
    let message = refused.expect_error(400, "invalid_request");
    assert!(
        message.contains(&ada) && message.contains("{{title}}"),
        "{message}"
    );
    let queue = app
        .get(&format!("/approvals?sequence_id={id}"), &app.key)
        .await;
    assert_eq!(
        queue.expect(200)["items"][0]["texts"][0]["text"],
        json!("Hi Ada, I work with teams like Engines.")
    );

    app.patch_json(
        &format!("/sequences/{id}"),
        &app.key,
        json!({"steps": [{"type": "connection_request", "note": "Hello {{first_name}} at {{company_name}}"}]}),
    )
    .await
    .expect(200);
    let queue = app
        .get(&format!("/approvals?sequence_id={id}"), &app.key)
        .await;
    assert_eq!(
        queue.expect(200)["items"][0]["texts"],
        json!([{"step_index": 0, "type": "connection_request", "text": "Hello Ada at Engines"}])
    );
}

#[tokio::test]
async fn clone_sequence_copies_the_design_into_a_draft_without_its_people() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let sender = insert_sender(&app, &app.workspace_id, "Ann", "connected").await;
    let original = sequence(&app, &[&sender]).await;
    app.patch_json(
        &format!("/sequences/{original}"),
        &app.key,
        json!({"settings": {"exit_after_days_without_acceptance": 9}, "schedule": {"respect_prospect_timezone": true}}),
    )
    .await
    .expect(200);
    let ada = prospect(&app, "Ada", "Engines").await;
    app.post_json(
        &format!("/sequences/{original}/enrollments"),
        &app.key,
        json!({"prospect_ids": [ada]}),
    )
    .await
    .expect(200);
    app.post_json(&format!("/sequences/{original}/activate"), &send, json!({}))
        .await
        .expect(200);
    let before = sequence_count(&app).await;

    let copy = app
        .post_json(&format!("/sequences/{original}/clone"), &app.key, json!({}))
        .await;
    let copy = copy.expect(200).clone();
    let source = app.get(&format!("/sequences/{original}"), &app.key).await;
    let source = source.expect(200).clone();
    assert_ne!(copy["id"], source["id"]);
    assert_eq!(copy["name"], "Q3 founders (copy)");
    assert_eq!(copy["status"], "draft");
    for field in ["steps", "settings", "schedule", "sender_ids"] {
        assert_eq!(copy[field], source[field], "{field}");
    }
    assert_eq!(copy["enrollment_counts"]["awaiting_approval"], 0, "{copy}");
    assert_eq!(source["enrollment_counts"]["awaiting_approval"], 1);
    let named = app
        .post_json(
            &format!("/sequences/{original}/clone"),
            &app.key,
            json!({"name": "Q4 founders"}),
        )
        .await;
    assert_eq!(named.expect(200)["name"], "Q4 founders");
    assert_eq!(sequence_count(&app).await, before + 2);

    // Bad input changes nothing.
    let missing = app
        .post_json(
            "/sequences/seq_00000000000NoSuchOne/clone",
            &app.key,
            json!({}),
        )
        .await;
    missing.expect_error(404, "not_found");
    let blank = app
        .post_json(
            &format!("/sequences/{original}/clone"),
            &app.key,
            json!({"name": "  "}),
        )
        .await;
    blank.expect_error(400, "invalid_request");
    assert_eq!(sequence_count(&app).await, before + 2);
}

#[tokio::test]
async fn sequence_stats_list_every_step_and_refuse_bad_input() {
    let app = spawn_app().await;
    let sender = insert_sender(&app, &app.workspace_id, "Ann", "connected").await;
    let sequence = sequence(&app, &[&sender]).await;
    let stats = app
        .get(&format!("/sequences/{sequence}/stats?period=7d"), &app.key)
        .await;
    let stats = stats.expect(200).clone();
    let types: Vec<&str> = stats["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|step| step["type"].as_str().expect("a type"))
        .collect();
    assert_eq!(types, ["view_profile", "connection_request", "message"]);
    assert_eq!(stats["steps"][1]["sent"], 0);
    assert_eq!(stats["steps"][1]["accepted"], 0);
    assert!(stats["steps"][1]["acceptance_rate"].is_null());
    assert!(stats["starts_at"].is_string());
    let missing = app
        .get("/sequences/seq_00000000000NoSuchOne/stats", &app.key)
        .await;
    missing.expect_error(404, "not_found");
    let bad = app
        .get(
            &format!("/sequences/{sequence}/stats?period=week"),
            &app.key,
        )
        .await;
    bad.expect_error(400, "invalid_request");
}

/// `get_sequence_stats` over 100,000 enrollments (and 160,000 steps sent), for the closing
/// note's figure: `cargo test --release --test api -- --ignored figures_of_100000 --nocapture`
/// (with `TEST_DATABASE_URL` for PostgreSQL). Prints the median of 5 calls; asserts only the
/// counts, never a time.
#[tokio::test]
#[ignore = "a measurement: run it by name"]
async fn figures_of_100000_enrollments() {
    const PEOPLE: i64 = 100_000;
    let app = spawn_app().await;
    let sender = insert_sender(&app, &app.workspace_id, "Ann", "connected").await;
    let sequence = sequence(&app, &[&sender]).await;
    let numbers = format!(
        "with recursive n(i) as (select 1 union all select i + 1 from n where i < {PEOPLE})"
    );
    for sql in [
        format!(
            "{numbers} insert into prospects (id, workspace_id, first_name, source, created_at, updated_at) \
             select 'prs_bench' || i, $1, 'P', 'api', 0, 0 from n"
        ),
        format!(
            "{numbers} insert into enrollments (id, workspace_id, sequence_id, prospect_id, sender_id, status, \
             exit_reason, step_index, invited_at, accepted_at, replied_at, created_at, updated_at) \
             select 'enr_bench' || i, $1, $2, 'prs_bench' || i, '{sender}', 'finished', 'completed_steps', 2, \
             1000 + i, case when i % 5 < 2 then 2000000 + i end, case when i % 10 = 0 then 3000000 + i end, 0, 0 from n"
        ),
        format!(
            "{numbers} insert into enrollment_events (id, workspace_id, enrollment_id, at, kind, step_index, outcome) \
             select 'eev_bench_a' || i, $1, 'enr_bench' || i, 1000 + i, 'connection_request', 1, 'sent' from n"
        ),
        format!(
            "{numbers} insert into enrollment_events (id, workspace_id, enrollment_id, at, kind, step_index, outcome) \
             select 'eev_bench_b' || i, $1, 'enr_bench' || i, 2500000 + i, 'message', 2, 'sent' from n where i % 5 < 3"
        ),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&app.workspace_id)
            .bind(&sequence)
            .execute(app.db.pool())
            .await
            .expect("bulk rows");
    }
    let mut times = Vec::new();
    let mut stats = Value::Null;
    for _ in 0..5 {
        let started = std::time::Instant::now();
        let answer = app
            .get(&format!("/sequences/{sequence}/stats"), &app.key)
            .await;
        times.push(started.elapsed());
        stats = answer.expect(200).clone();
    }
    times.sort();
    println!(
        "get_sequence_stats over {PEOPLE} enrollments: median {:?} (min {:?}, max {:?})",
        times[2], times[0], times[4]
    );
    assert_eq!(stats["steps"][1]["sent"], PEOPLE, "{stats}");
    assert_eq!(stats["steps"][1]["accepted"], PEOPLE * 2 / 5, "{stats}");
    assert_eq!(stats["steps"][2]["sent"], PEOPLE * 3 / 5, "{stats}");
}
