//! Finding prospects: exact lookups by email and profile URL, filters by tier, score, list and
//! tag, sorting; one person per email and per case-insensitive profile URL; and the size limits of
//! `custom_fields`. Every refusal is a 4xx naming the field and changes nothing.

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn find(app: &TestApp, query: &str) -> Vec<String> {
    ids(app
        .get(&format!("/prospects?{query}"), &app.key)
        .await
        .expect(200))
}

async fn set_score(app: &TestApp, id: &str, score: i64, tier: &str) {
    sqlx::query("update prospects set score = $1, tier = $2 where id = $3")
        .bind(score)
        .bind(tier)
        .bind(id)
        .execute(app.db.pool())
        .await
        .expect("set a score");
}

#[tokio::test]
async fn prospects_are_found_by_email_profile_url_tier_score_list_and_tag_and_sorted() {
    let app = spawn_app().await;
    let mut made = Vec::new();
    for (name, email, url, tags) in [
        (
            "Ada",
            "ada@engines.test",
            "linkedin.com/in/ada",
            json!(["vip"]),
        ),
        (
            "Grace",
            "grace@navy.test",
            "linkedin.com/in/grace",
            json!([]),
        ),
        (
            "Alan",
            "alan@bletchley.test",
            "linkedin.com/in/alan",
            json!(["vip"]),
        ),
        (
            "Unscored",
            "nobody@x.test",
            "linkedin.com/in/nobody",
            json!([]),
        ),
    ] {
        let prospect = app
            .create_prospect(
                json!({"first_name": name, "email": email, "profile_url": url, "tags": tags}),
            )
            .await;
        made.push(prospect["id"].as_str().expect("an id").to_owned());
        app.clock.advance_ms(1000);
    }
    let [ada, grace, alan, unscored] = [0, 1, 2, 3].map(|i| made[i].clone());
    set_score(&app, &ada, 90, "a").await;
    set_score(&app, &grace, 60, "b").await;
    set_score(&app, &alan, 75, "b").await;

    assert_eq!(
        find(&app, "email=ADA%40Engines.test").await,
        vec![ada.clone()]
    );
    assert_eq!(
        find(
            &app,
            "profile_url=https%3A%2F%2Fwww.LinkedIn.com%2Fin%2FGrace%2F%3Futm%3Dx"
        )
        .await,
        vec![grace.clone()]
    );
    assert_eq!(
        find(&app, "q=bletchley").await,
        vec![alan.clone()],
        "q searches emails"
    );
    assert_eq!(
        find(&app, "q=in%2Fnobody").await,
        vec![unscored.clone()],
        "and profile URLs"
    );
    assert_eq!(
        find(&app, "tier=b").await,
        vec![alan.clone(), grace.clone()]
    );
    assert_eq!(
        find(&app, "min_score=70").await,
        vec![alan.clone(), ada.clone()]
    );
    assert_eq!(
        find(&app, "min_score=60&max_score=75").await,
        vec![alan.clone(), grace.clone()]
    );
    assert_eq!(find(&app, "tag=vip&tier=a").await, vec![ada.clone()]);
    assert_eq!(
        find(&app, "sort=score").await,
        vec![ada.clone(), alan.clone(), grace.clone(), unscored.clone()]
    );
    assert_eq!(
        find(&app, "sort=score&order=asc").await,
        vec![grace.clone(), alan.clone(), ada.clone(), unscored.clone()],
        "unscored last either way"
    );
    assert_eq!(
        find(&app, "order=asc").await,
        vec![ada.clone(), grace.clone(), alan.clone(), unscored.clone()]
    );
    app.clock.advance_ms(1000);
    app.patch_json(
        &format!("/prospects/{grace}"),
        &app.key,
        json!({"title": "Admiral"}),
    )
    .await
    .expect(200);
    assert_eq!(
        find(&app, "sort=updated_at&limit=1").await,
        vec![grace.clone()]
    );

    let list = app
        .post_json("/lists", &app.key, json!({"name": "Pioneers"}))
        .await
        .expect(201)["id"]
        .as_str()
        .expect("a list id")
        .to_owned();
    app.post_json(
        &format!("/lists/{list}/prospects"),
        &app.key,
        json!({"prospect_ids": [ada, unscored]}),
    )
    .await
    .expect(200);
    assert_eq!(
        find(&app, &format!("list_id={list}&sort=score")).await,
        vec![ada.clone(), unscored.clone()]
    );
    assert_eq!(
        find(&app, &format!("list_id={list}&tier=a")).await,
        vec![ada]
    );
}

#[tokio::test]
async fn bad_filters_are_400_or_404_naming_the_field() {
    let app = spawn_app().await;
    for (query, status, code, words) in [
        ("min_score=101", 400, "invalid_request", "`min_score`"),
        ("max_score=-1", 400, "invalid_request", "`max_score`"),
        (
            "min_score=80&max_score=20",
            400,
            "invalid_request",
            "`min_score` (80) is above `max_score` (20)",
        ),
        ("tier=z", 400, "invalid_request", "tier"),
        ("sort=name", 400, "invalid_request", "sort"),
        ("order=up", 400, "invalid_request", "order"),
        ("email=not-an-email", 400, "invalid_request", "`email`"),
        ("profile_url=nope", 400, "invalid_request", "`profile_url`"),
        ("list_id=lst_missing", 404, "not_found", "lst_missing"),
    ] {
        let response = app.get(&format!("/prospects?{query}"), &app.key).await;
        let message = response.expect_error(status, code);
        assert!(message.contains(words), "{query}: {message}");
    }
}

#[tokio::test]
async fn one_email_and_one_case_insensitive_profile_url_make_one_prospect() {
    let app = spawn_app().await;
    let first = app
        .create_prospect(json!({"first_name": "Case", "email": "case@test.test", "profile_url": "https://www.linkedin.com/in/CaseTest-XY/"}))
        .await;
    let id = first["id"].as_str().expect("an id").to_owned();
    assert_eq!(first["profile_url"], "linkedin.com/in/casetest-xy");
    for body in [
        json!({"first_name": "Again", "email": "CASE@test.test"}),
        json!({"first_name": "Again", "profile_url": "linkedin.com/in/casetest-xy"}),
    ] {
        let response = app.post_json("/prospects", &app.key, body.clone()).await;
        response.expect_error(409, "conflict");
        assert_eq!(response.body["existing_id"], json!(id), "{body}");
    }
    let other = app
        .create_prospect(json!({"first_name": "Other", "email": "other@test.test"}))
        .await;
    let other_id = other["id"].as_str().expect("an id");
    let response = app
        .patch_json(
            &format!("/prospects/{other_id}"),
            &app.key,
            json!({"email": "case@test.test"}),
        )
        .await;
    response.expect_error(409, "conflict");
    assert_eq!(response.body["existing_id"], json!(id));
    assert_eq!(app.prospect_count().await, 2);
    let unchanged = app.get(&format!("/prospects/{other_id}"), &app.key).await;
    assert_eq!(unchanged.expect(200)["email"], "other@test.test");
}

#[tokio::test]
async fn custom_fields_over_their_limits_are_400_naming_the_field_and_change_nothing() {
    let app = spawn_app().await;
    let big = "x".repeat(10_001);
    let long_key = "k".repeat(101);
    let many: serde_json::Map<String, Value> = (0..8)
        .map(|i| (format!("f{i}"), json!("y".repeat(9_000))))
        .collect();
    let cases = [
        (json!({"note": big}), "`custom_fields.note`"),
        (json!({ long_key: 1 }), "a key is at most 100"),
        (Value::Object(many), "at most 65536"),
    ];
    for (fields, words) in &cases {
        let response = app
            .post_json(
                "/prospects",
                &app.key,
                json!({"first_name": "Big", "custom_fields": fields}),
            )
            .await;
        let message = response.expect_error(400, "invalid_request");
        assert!(message.contains(words), "{message}");
    }
    assert_eq!(app.prospect_count().await, 0);
    let prospect = app
        .create_prospect(json!({"first_name": "Small", "custom_fields": {"note": "ok"}}))
        .await;
    let id = prospect["id"].as_str().expect("an id");
    for (fields, words) in &cases {
        let response = app
            .patch_json(
                &format!("/prospects/{id}"),
                &app.key,
                json!({"custom_fields": fields}),
            )
            .await;
        let message = response.expect_error(400, "invalid_request");
        assert!(message.contains(words), "{message}");
    }
    let unchanged = app.get(&format!("/prospects/{id}"), &app.key).await;
    assert_eq!(
        unchanged.expect(200)["custom_fields"],
        json!({"note": "ok"})
    );
}
