//! Agents: saved configurations, checked against the workspace when saved.

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

fn id(value: &Value) -> String {
    value["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {value}"))
        .to_owned()
}

/// A targeting, a list and a draft sequence: what a prospector names.
pub async fn inputs(app: &TestApp) -> (String, String, String) {
    let targeting = app
        .post_json(
            "/targetings",
            &app.key,
            json!({"name": "ICP", "criteria": {"titles": {"include": [{"value": "engineer", "points": 60}]}}}),
        )
        .await
        .expect(201)
        .clone();
    let list = app
        .post_json("/lists", &app.key, json!({"name": "Agent list"}))
        .await
        .expect(201)
        .clone();
    let sequence = crate::sequences::sequence(app, &[]).await;
    (id(&targeting), id(&list), sequence)
}

#[tokio::test]
async fn an_agent_is_created_read_listed_updated_and_deleted() {
    let app = spawn_app().await;
    let (targeting, list, sequence) = inputs(&app).await;
    let created = app
        .post_json(
            "/agents",
            &app.key,
            json!({"name": " Finder ", "kind": "prospector", "targeting_id": targeting,
                   "list_id": list, "sequence_id": sequence, "max_credits_per_run": 30}),
        )
        .await
        .expect(201)
        .clone();
    let agent = id(&created);
    assert!(agent.starts_with("agt_"), "{agent}");
    assert_eq!(created["name"], json!("Finder"));
    assert_eq!(created["mode"], json!("review"), "review is the default");
    assert_eq!(created["enabled"], json!(true));
    assert_eq!(created["min_tier"], json!("c"));
    assert_eq!(created["max_prospects_per_run"], json!(50));
    assert_eq!(created["max_credits_per_run"], json!(30));
    let read = app.read_key().await;
    assert_eq!(
        app.get(&format!("/agents/{agent}"), &read)
            .await
            .expect(200),
        &created
    );
    let listed = app.get("/agents?kind=prospector", &read).await;
    assert_eq!(listed.expect(200)["items"], json!([created]));
    let none = app.get("/agents?kind=writer", &read).await;
    assert_eq!(none.expect(200)["total"], json!(0));

    let updated = app
        .patch_json(
            &format!("/agents/{agent}"),
            &app.key,
            json!({"mode": "autonomous", "min_tier": "b", "max_credits_per_run": null, "enabled": false}),
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(updated["mode"], json!("autonomous"));
    assert_eq!(updated["min_tier"], json!("b"));
    assert_eq!(updated["max_credits_per_run"], Value::Null);
    assert_eq!(updated["enabled"], json!(false));
    assert_eq!(updated["targeting_id"], json!(targeting), "kept");

    let refused = app.delete(&format!("/agents/{agent}"), &read).await;
    refused.expect_error(403, "insufficient_scope");
    app.delete(&format!("/agents/{agent}"), &app.key)
        .await
        .expect(200);
    app.get(&format!("/agents/{agent}"), &read)
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn an_agent_missing_what_its_kind_needs_is_refused_and_nothing_is_saved() {
    let app = spawn_app().await;
    let (targeting, list, sequence) = inputs(&app).await;
    let no_sequence = app
        .post_json(
            "/agents",
            &app.key,
            json!({"name": "Finder", "kind": "prospector", "targeting_id": targeting, "list_id": list}),
        )
        .await;
    let message = no_sequence.expect_error(400, "invalid_request");
    assert!(message.contains("sequence_id"), "{message}");

    let missing = "lst_00000000000NoSuchOne";
    let unknown = app
        .post_json(
            "/agents",
            &app.key,
            json!({"name": "Writer", "kind": "writer", "list_id": missing, "sequence_id": sequence}),
        )
        .await;
    let message = unknown.expect_error(404, "not_found");
    assert!(message.contains(missing), "{message}");

    let (_, other_key) = app.other_workspace("Other", "other@example.test").await;
    let elsewhere = app
        .post_json(
            "/agents",
            &other_key,
            json!({"name": "Thief", "kind": "writer", "list_id": list, "sequence_id": sequence}),
        )
        .await;
    elsewhere.expect_error(404, "not_found");

    for (body, field) in [
        (json!({"name": "", "kind": "inbox_triage"}), "name"),
        (
            json!({"name": "T", "kind": "inbox_triage", "min_tier": "disqualified"}),
            "min_tier",
        ),
        (
            json!({"name": "T", "kind": "inbox_triage", "max_prospects_per_run": 0}),
            "max_prospects_per_run",
        ),
        (
            json!({"name": "T", "kind": "inbox_triage", "max_credits_per_run": -1}),
            "max_credits_per_run",
        ),
        (json!({"name": "T", "kind": "scout"}), "kind"),
    ] {
        let response = app.post_json("/agents", &app.key, body).await;
        let message = response.expect_error(400, "invalid_request");
        assert!(message.contains(field), "{field}: {message}");
    }
    assert_eq!(
        app.get("/agents", &app.key).await.expect(200)["total"],
        json!(0)
    );

    let triage = app
        .post_json(
            "/agents",
            &app.key,
            json!({"name": "Inbox", "kind": "inbox_triage"}),
        )
        .await
        .expect(201)
        .clone();
    let cleared = app
        .patch_json(
            &format!("/agents/{}", id(&triage)),
            &app.key,
            json!({"sequence_id": "seq_00000000000NoSuchOne"}),
        )
        .await;
    cleared.expect_error(404, "not_found");
    assert_eq!(
        app.get(&format!("/agents/{}", id(&triage)), &app.key)
            .await
            .expect(200),
        &triage
    );
}

#[tokio::test]
async fn approval_items_name_their_run_and_agent_and_filter_by_them() {
    let app = spawn_app().await;
    let (sequence, approvals) = crate::approvals::queued(&app, 2).await;
    let all = app.get("/approvals", &app.key).await.expect(200).clone();
    assert_eq!(all["total"], json!(2));
    for item in all["items"].as_array().expect("items") {
        assert!(approvals.iter().any(|id| item["id"] == json!(id)), "{item}");
        assert_eq!(item["run_id"], Value::Null, "a person proposed it");
        assert_eq!(item["agent_id"], Value::Null, "a person proposed it");
    }
    let by_run = app
        .get("/approvals?run_id=run_00000000000NoSuchOne", &app.key)
        .await;
    assert_eq!(by_run.expect(200)["total"], json!(0));
    let by_agent = app
        .get(
            &format!("/approvals?agent_id=agt_00000000000NoSuchOne&sequence_id={sequence}"),
            &app.key,
        )
        .await;
    assert_eq!(by_agent.expect(200)["total"], json!(0));

    let two_days = 2 * 24 * 60 * 60 * 1000_i64;
    sqlx::query("update approvals set created_at = created_at - $1 where id = $2")
        .bind(two_days)
        .bind(&approvals[0])
        .execute(app.db.pool())
        .await
        .expect("age one item");
    let dashboard = app.get("/dashboard", &app.key).await.expect(200).clone();
    let figures = &dashboard["approvals"];
    assert_eq!(figures["waiting"], json!(2), "{figures}");
    assert_eq!(figures["proposed_by_agents"], json!(0), "{figures}");
    assert_eq!(
        figures["by_age"],
        json!({"under_1_day": 1, "from_1_to_3_days": 1, "over_3_days": 0})
    );
    assert_eq!(figures["oldest_age_hours"], json!(48), "{figures}");
}
