//! List processing: cleaning, deduplication and scoring in one priced, idempotent call; the
//! `processing` state refuses a second call; bad input changes nothing and costs nothing.

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

async fn targeting(app: &TestApp) -> String {
    let body = json!({
        "name": "Engineering leaders",
        "criteria": {
            "titles": {"include": [{"value": "CTO", "points": 30}]},
            "industries": [{"value": "software", "points": 20}],
        },
    });
    app.post_json("/targetings", &app.key, body)
        .await
        .expect(201)["id"]
        .as_str()
        .expect("id")
        .to_owned()
}

/// A list of three prospects, two of which share an email.
async fn list_with_duplicate(app: &TestApp, default_targeting: Option<&str>) -> String {
    let mut body = json!({"name": format!("Leads {}", outreach_runtime::ids::new_id("x"))});
    if let Some(targeting) = default_targeting {
        body["default_targeting_id"] = json!(targeting);
    }
    let list = app.post_json("/lists", &app.key, body).await.expect(201)["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut ids = Vec::new();
    for (first_name, email, title) in [
        ("Ada", "ada@acme.test", "CTO"),
        ("Ada", "other@acme.test", "Engineer"),
        ("Adaline", "other-2@acme.test", "CTO"),
    ] {
        let prospect = app
            .create_prospect(json!({"first_name": first_name, "email": email, "title": title, "company_industry": "Software"}))
            .await;
        ids.push(prospect["id"].as_str().expect("id").to_owned());
    }
    // Two prospects with one email, as rows written before `create_prospect` refused that could
    // be: the API no longer makes them, but processing must still count the person once.
    sqlx::query("update prospects set email = $1 where id = $2")
        .bind("other@acme.test")
        .bind(&ids[2])
        .execute(app.db.pool())
        .await
        .expect("give the third prospect the second one's email");
    app.post_json(
        &format!("/lists/{list}/prospects"),
        &app.key,
        json!({"prospect_ids": ids}),
    )
    .await
    .expect(200);
    list
}

async fn balance(app: &TestApp) -> i64 {
    app.get("/workspace", &app.key).await.expect(200)["workspace"]["credits_balance"]
        .as_i64()
        .expect("balance")
}

#[tokio::test]
async fn processing_a_list_dedupes_scores_and_spends_per_member_scored() {
    let app = spawn_app().await;
    app.grant_credits(10).await;
    let targeting = targeting(&app).await;
    let list = list_with_duplicate(&app, Some(&targeting)).await;

    let estimate = app
        .post_json(
            &format!("/lists/{list}/process"),
            &app.read_key().await,
            json!({"estimate_only": true}),
        )
        .await;
    let estimate = estimate.expect(200);
    assert_eq!(estimate["price"], 3, "{estimate}");
    assert_eq!(estimate["sufficient"], true);
    assert_eq!(balance(&app).await, 10, "an estimate spends nothing");

    let outcome = app
        .post_json(&format!("/lists/{list}/process"), &app.key, json!({}))
        .await
        .expect(200)
        .clone();
    assert_eq!(outcome["prospects"], 3, "{outcome}");
    assert_eq!(outcome["duplicates_removed"], 1);
    assert_eq!(outcome["scored"], 2);
    assert_eq!(outcome["credits_spent"], 2);
    assert_eq!(outcome["scoring_run"]["total"], 2);
    assert_eq!(outcome["scoring_run"]["targeting_id"], json!(targeting));
    assert_eq!(balance(&app).await, 8, "three reserved, one released");

    let list_view = app
        .get(&format!("/lists/{list}"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(list_view["processing_status"], "processed");
    assert_eq!(list_view["size"], 2);
    let members = app
        .get(&format!("/lists/{list}/prospects"), &app.key)
        .await
        .expect(200)
        .clone();
    let scored: Vec<&Value> = members["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|p| p["score"].is_i64())
        .collect();
    assert_eq!(
        scored.len(),
        2,
        "both remaining members carry their score: {members}"
    );
}

#[tokio::test]
async fn a_list_being_processed_refuses_a_second_call_but_replays_the_first_key() {
    let app = spawn_app().await;
    app.grant_credits(100).await;
    let targeting = targeting(&app).await;
    let list = list_with_duplicate(&app, Some(&targeting)).await;
    let path = format!("/lists/{list}/process");

    let first = app
        .post_idempotent(&path, &app.key, "process-1", &json!({}))
        .await;
    let first_body = first.expect(200).clone();

    // Mark the list as still processing, as it is while another call runs: its mark holds a
    // live lease under that call's token.
    sqlx::query(
        "update lists set processing_status = 'processing', processing_token = 'lease_other', \
         processing_lease_expires_at = $2 where id = $1",
    )
    .bind(&list)
    .bind(app.clock.now_ms() + 60_000)
    .execute(app.db.pool())
    .await
    .expect("mark processing");
    let before = balance(&app).await;
    let second = app.post_json(&path, &app.key, json!({})).await;
    second.expect_error(409, "invalid_state");
    assert_eq!(balance(&app).await, before, "a refused call spends nothing");

    let replay = app
        .post_idempotent(&path, &app.key, "process-1", &json!({}))
        .await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.expect(200), &first_body);
    assert_eq!(balance(&app).await, before, "a replay spends nothing");

    // A refusal that did nothing is not bound to its key: once the list is free, the same key runs.
    let refused = app
        .post_idempotent(&path, &app.key, "process-2", &json!({}))
        .await;
    refused.expect_error(409, "invalid_state");
    // The other call finishes (and rotates the token, as a finished processing does).
    sqlx::query(
        "update lists set processing_status = 'processed', processing_token = 'lease_done', \
         processing_lease_expires_at = null where id = $1",
    )
    .bind(&list)
    .execute(app.db.pool())
    .await
    .expect("free the list");
    let ran = app
        .post_idempotent(&path, &app.key, "process-2", &json!({}))
        .await;
    assert_eq!(ran.header("idempotent-replayed"), None);
    assert_eq!(ran.expect(200)["scored"], 2);
}

#[tokio::test]
async fn processing_without_a_targeting_or_members_is_a_400_and_costs_nothing() {
    let app = spawn_app().await;
    app.grant_credits(100).await;
    let no_default = list_with_duplicate(&app, None).await;
    let response = app
        .post_json(&format!("/lists/{no_default}/process"), &app.key, json!({}))
        .await;
    let message = response.expect_error(400, "invalid_request").to_owned();
    assert!(message.contains("targeting_id"), "{message}");

    let targeting = targeting(&app).await;
    let empty = app
        .post_json(
            "/lists",
            &app.key,
            json!({"name": "Empty", "default_targeting_id": targeting}),
        )
        .await
        .expect(201)["id"]
        .as_str()
        .expect("id")
        .to_owned();
    for body in [json!({"estimate_only": true}), json!({})] {
        let response = app
            .post_json(&format!("/lists/{empty}/process"), &app.key, body)
            .await;
        response.expect_error(400, "invalid_request");
    }
    let response = app
        .post_json(
            &format!("/lists/{}/process", outreach_runtime::ids::new_id("lst")),
            &app.key,
            json!({}),
        )
        .await;
    response.expect_error(404, "not_found");
    assert_eq!(balance(&app).await, 100);
    let list = app
        .get(&format!("/lists/{empty}"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(
        list["processing_status"], "idle",
        "a refused call leaves the list as it was"
    );
}

#[tokio::test]
async fn a_call_refused_for_credits_leaves_the_list_as_it_was() {
    let app = spawn_app().await;
    let targeting = targeting(&app).await;
    let list = list_with_duplicate(&app, Some(&targeting)).await;
    app.grant_credits(1).await;
    let before = app
        .get(&format!("/lists/{list}"), &app.key)
        .await
        .expect(200)
        .clone();
    app.clock.advance_ms(5_000);
    let refused = app
        .post_json(&format!("/lists/{list}/process"), &app.key, json!({}))
        .await;
    refused.expect_error(402, "insufficient_credits");
    let after = app
        .get(&format!("/lists/{list}"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(after, before, "a refused call changes nothing");
    assert_eq!(after["processing_status"], "idle");
    assert_eq!(balance(&app).await, 1);
    // And the list can be processed once the credits are there.
    app.grant_credits(10).await;
    app.post_json(&format!("/lists/{list}/process"), &app.key, json!({}))
        .await
        .expect(200);
}

#[tokio::test]
async fn a_second_call_while_the_first_runs_is_refused_on_every_backend() {
    let app = spawn_app().await;
    app.grant_credits(100_000).await;
    let targeting = targeting(&app).await;
    let list = app
        .post_json(
            "/lists",
            &app.key,
            json!({"name": "Big", "default_targeting_id": targeting}),
        )
        .await
        .expect(201)["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let rows: Vec<Value> = (0..4_000)
        .map(|n| json!({"first_name": format!("P{n}"), "title": "CTO", "email": format!("p{n}@big.test")}))
        .collect();
    app.post_json("/imports", &app.key, json!({"rows": rows, "list_id": list}))
        .await
        .expect(200);
    let before = balance(&app).await;
    let path = format!("/lists/{list}/process");
    let first = {
        let (client, url, key) = (
            app.client.clone(),
            app.url(&format!("/api/v1{path}")),
            app.key.clone(),
        );
        tokio::spawn(async move {
            let response = client
                .post(url)
                .bearer_auth(key)
                .json(&json!({}))
                .send()
                .await
                .expect("send");
            response.status().as_u16()
        })
    };
    // Once the list shows `processing`, a second call is sent while the first runs.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let status = app
            .get(&format!("/lists/{list}"), &app.key)
            .await
            .expect(200)["processing_status"]
            .clone();
        if status == json!("processing") {
            break;
        }
        assert_ne!(
            status,
            json!("processed"),
            "the first call ended before it was seen running"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "the first call never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let second = app.post_json(&path, &app.key, json!({})).await;
    let second_status = second.status.as_u16();
    assert_eq!(first.await.expect("the first call"), 200);
    assert_eq!(second_status, 409, "{}", second.body);
    assert_eq!(before - balance(&app).await, 4_000, "charged once");
}
