//! Scoring runs: priced per prospect and spent exactly once, atomically with the results and the
//! prospects' latest scores; estimates, scopes, 402s and idempotent replays; a table of
//! hand-checked prospects scored end to end.

use outreach_actions::prospects::scores::copy_scores_to_prospects;
use outreach_runtime::prelude::Backend;
use serde_json::{Value, json};
use sqlx::Row;

use crate::helpers::{ApiResponse, TestApp, spawn_app};

/// The hand-checked profile: 110 points available (titles 30 + seniorities 20 + departments 10 +
/// industries 20 + sizes 15 + locations 10 + keywords 5); tiers a 80, b 60, c 40.
fn saas_profile() -> Value {
    json!({
        "name": "SaaS engineering leaders",
        "criteria": {
            "titles": {
                "include": [{"value": "VP Engineering", "points": 25}, {"value": "CTO", "points": 30}, {"value": "head of engineering", "points": 20}],
                "exclude": ["assistant"],
            },
            "seniorities": [{"value": "vp", "points": 15}, {"value": "c-level", "points": 20}],
            "departments": [{"value": "engineering", "points": 10}],
            "industries": [{"value": "software", "points": 20}, {"value": "financial services", "points": 10}],
            "company_sizes": [{"min": 50, "max": 500, "points": 15}, {"min": 501, "max": 5000, "points": 10}],
            "locations": [{"value": "germany", "points": 10}, {"value": "berlin", "points": 5}],
            "keywords": [{"value": "saas", "points": 5}, {"value": "machine learning", "points": 5}],
        },
        "gates": {
            "excluded_industries": ["gambling"],
            "excluded_domains": ["competitor.com"],
            "excluded_title_keywords": ["student", "intern"],
        },
        "tiers": {"a": 80, "b": 60, "c": 40},
    })
}

async fn create_targeting(app: &TestApp) -> String {
    let targeting = app
        .post_json("/targetings", &app.key, saas_profile())
        .await
        .expect(201)
        .clone();
    targeting["id"].as_str().expect("id").to_owned()
}

/// Puts prospects in a new list with plain SQL, as the lists schema defines it.
async fn make_list(app: &TestApp, prospect_ids: &[String]) -> String {
    let list_id = outreach_runtime::ids::new_id("lst");
    let now = app.clock.now_ms();
    sqlx::query("insert into lists (id, workspace_id, name, created_at, updated_at) values ($1, $2, $3, $4, $4)")
        .bind(&list_id)
        .bind(&app.workspace_id)
        .bind(format!("List {list_id}"))
        .bind(now)
        .execute(app.db.pool())
        .await
        .expect("insert a list");
    for prospect_id in prospect_ids {
        sqlx::query("insert into list_members (list_id, prospect_id, workspace_id, added_at) values ($1, $2, $3, $4)")
            .bind(&list_id)
            .bind(prospect_id)
            .bind(&app.workspace_id)
            .bind(now)
            .execute(app.db.pool())
            .await
            .expect("insert a list member");
    }
    list_id
}

async fn make_prospects(app: &TestApp, count: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(count);
    for index in 0..count {
        let prospect = app
            .create_prospect(json!({"first_name": format!("P{index}"), "title": if index % 2 == 0 { "CTO" } else { "Engineer" }}))
            .await;
        ids.push(prospect["id"].as_str().expect("id").to_owned());
    }
    ids
}

async fn balance(app: &TestApp) -> i64 {
    app.get("/workspace", &app.key).await.expect(200)["workspace"]["credits_balance"]
        .as_i64()
        .expect("a balance")
}

async fn transactions(app: &TestApp) -> Vec<Value> {
    app.get("/credits/transactions?limit=200", &app.key)
        .await
        .expect(200)["items"]
        .as_array()
        .expect("items")
        .clone()
}

async fn run_count(app: &TestApp) -> i64 {
    app.get("/scoring-runs", &app.key).await.expect(200)["total"]
        .as_i64()
        .expect("a total")
}

/// `POST /api/v1{path}` with an `Idempotency-Key` header.
async fn post_with_key(
    app: &TestApp,
    path: &str,
    key: &str,
    idempotency_key: &str,
    body: &Value,
) -> ApiResponse {
    let response = app
        .client
        .post(app.url(&format!("/api/v1{path}")))
        .bearer_auth(key)
        .header("idempotency-key", idempotency_key)
        .json(body)
        .send()
        .await
        .expect("send the request");
    let answer = ApiResponse::read(response).await;
    crate::helpers::assert_canonical(&answer.body, &answer.raw);
    answer
}

#[tokio::test]
async fn a_run_over_a_list_spends_one_credit_per_prospect_and_records_every_score() {
    let app = spawn_app().await;
    app.grant_credits(100).await;
    let targeting_id = create_targeting(&app).await;
    let prospects = make_prospects(&app, 5).await;
    let list_id = make_list(&app, &prospects).await;
    let body = json!({"list_id": list_id, "targeting_id": targeting_id});

    let mut estimate_body = body.clone();
    estimate_body["estimate_only"] = json!(true);
    let estimate = app
        .post_json("/scoring-runs", &app.key, estimate_body)
        .await
        .expect(200)
        .clone();
    assert_eq!(estimate["estimate"], json!(true));
    assert_eq!(estimate["price"], json!(5));
    assert_eq!(
        estimate["breakdown"],
        json!([{"item": "scoring.prospect", "quantity": 5, "unit_price": 1, "amount": 5}])
    );
    assert_eq!(estimate["details"], json!({"prospects": 5}));
    assert_eq!(
        (estimate["balance"].clone(), estimate["sufficient"].clone()),
        (json!(100), json!(true))
    );
    assert_eq!(balance(&app).await, 100, "an estimate spends nothing");
    assert_eq!(run_count(&app).await, 0, "an estimate scores nothing");

    app.clock.advance_ms(10);
    let run = app
        .post_json("/scoring-runs", &app.key, body)
        .await
        .expect(200)
        .clone();
    let run_id = run["id"].as_str().expect("id").to_owned();
    assert!(run_id.starts_with("scr_"), "{run_id}");
    assert_eq!(run["status"], json!("completed"));
    assert_eq!(run["targeting_id"], json!(targeting_id));
    assert_eq!(run["targeting_version"], json!(1));
    assert_eq!(run["list_id"], json!(list_id));
    assert_eq!(run["total"], json!(5));
    // CTO alone: 30 of 110 = 27 (d); Engineer: nothing (d).
    assert_eq!(
        run["by_tier"],
        json!({"a": 0, "b": 0, "c": 0, "d": 5, "disqualified": 0})
    );
    assert_eq!(run["credits_spent"], json!(5));
    assert!(
        run["completed_at"]
            .as_str()
            .is_some_and(|time| time.ends_with('Z'))
    );

    // Exactly the price, once, recorded against the run.
    assert_eq!(balance(&app).await, 95);
    let ledger = transactions(&app).await;
    assert_eq!(ledger.len(), 2, "{ledger:?}");
    assert_eq!(ledger[0]["kind"], json!("spend"));
    assert_eq!(ledger[0]["amount"], json!(-5));
    assert_eq!(ledger[0]["action"], json!("start_scoring_run"));
    assert_eq!(ledger[0]["object_id"], json!(run_id));
    assert_eq!(ledger[1]["kind"], json!("grant"));

    assert_eq!(
        app.get(&format!("/scoring-runs/{run_id}"), &app.key)
            .await
            .expect(200),
        &run
    );
    let runs = app
        .get(&format!("/scoring-runs?list_id={list_id}"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(runs["items"], json!([run]));
    assert_eq!(
        app.get(
            &format!("/scoring-runs?targeting_id={targeting_id}"),
            &app.key
        )
        .await
        .expect(200)["total"],
        json!(1)
    );
    assert_eq!(
        app.get(
            "/scoring-runs?targeting_id=tgt_00000000000000000000",
            &app.key
        )
        .await
        .expect(200)["total"],
        json!(0)
    );

    // Results: best first, then by prospect id; the tier filter.
    let results = app
        .get(&format!("/scoring-runs/{run_id}/results"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(results["total"], json!(5));
    let items = results["items"].as_array().expect("items");
    let scores: Vec<i64> = items
        .iter()
        .map(|item| item["score"].as_i64().expect("score"))
        .collect();
    assert_eq!(scores, [27, 27, 27, 0, 0]);
    let mut ctos: Vec<&str> = [&prospects[0], &prospects[2], &prospects[4]]
        .iter()
        .map(|id| id.as_str())
        .collect();
    ctos.sort_unstable();
    let first_ids: Vec<&str> = items[..3]
        .iter()
        .map(|item| item["prospect_id"].as_str().expect("id"))
        .collect();
    assert_eq!(first_ids, ctos, "ties are ordered by prospect id");
    assert_eq!(
        items[0]["matched"],
        json!([{"criterion": "titles", "value": "CTO", "field": "title", "points": 30}])
    );
    assert!(
        items[0]["full_name"]
            .as_str()
            .is_some_and(|name| name.starts_with('P')),
        "{}",
        items[0]
    );
    assert_eq!(items[0]["title"], json!("CTO"));
    assert_eq!(
        app.get(&format!("/scoring-runs/{run_id}/results?tier=a"), &app.key)
            .await
            .expect(200)["total"],
        json!(0)
    );
    assert_eq!(
        app.get(
            &format!("/scoring-runs/{run_id}/results?tier=d&limit=2"),
            &app.key
        )
        .await
        .expect(200)["next_offset"],
        json!(2)
    );
    app.get(&format!("/scoring-runs/{run_id}/results?tier=e"), &app.key)
        .await
        .expect_error(400, "invalid_request");

    // Each prospect keeps its latest score and tier, and which targeting at which version gave them.
    let prospect = app
        .get(&format!("/prospects/{}", prospects[0]), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(
        (prospect["score"].clone(), prospect["tier"].clone()),
        (json!(27), json!("d"))
    );
    let row: (Option<String>, Option<i64>, Option<i64>) = sqlx::query_as(
        "select targeting_id, targeting_version, scored_at from prospects where id = $1",
    )
    .bind(&prospects[0])
    .fetch_one(app.db.pool())
    .await
    .expect("read the prospect");
    let completed_at = run["completed_at"]
        .as_str()
        .and_then(outreach_runtime::clock::parse_rfc3339);
    assert_eq!(row, (Some(targeting_id.clone()), Some(1), completed_at));
}

/// A prospect and what scoring it must give: score, tier, matched (criterion, value, field,
/// points), gates failed (gate, value) and missing fields.
type Expected = (
    Value,
    i64,
    &'static str,
    Vec<(&'static str, &'static str, &'static str, i64)>,
    Vec<(&'static str, &'static str)>,
    Vec<&'static str>,
);

#[tokio::test]
async fn hand_checked_prospects_get_their_expected_scores_and_tiers_end_to_end() {
    let app = spawn_app().await;
    app.grant_credits(100).await;
    let targeting_id = create_targeting(&app).await;
    let table: Vec<Expected> = vec![
        (
            json!({"first_name": "Ideal", "title": "CTO", "seniority": "C-Level", "department": "Engineering",
                   "company_industry": "Computer Software", "company_size": 120, "location": "Berlin, Germany",
                   "country": "Germany", "headline": "Building SaaS for finance", "company_domain": "acme.io"}),
            // 110 of 110
            100,
            "a",
            vec![
                ("titles", "CTO", "title", 30),
                ("seniorities", "c-level", "seniority", 20),
                ("departments", "engineering", "department", 10),
                ("industries", "software", "company_industry", 20),
                ("company_sizes", "50-500", "company_size", 15),
                ("locations", "germany", "location", 10),
                ("keywords", "saas", "headline", 5),
            ],
            vec![],
            vec![],
        ),
        (
            json!({"first_name": "Second", "title": "VP, Engineering", "seniority": "VP", "department": "Engineering",
                   "company_industry": "Financial Services", "company_size": 1000, "location": "Munich",
                   "country": "Germany", "company_name": "Acme", "company_domain": "acme.de"}),
            // 25 + 15 + 10 + 10 + 10 + 10 = 80 of 110 = 72.7
            73,
            "b",
            vec![
                ("titles", "VP Engineering", "title", 25),
                ("seniorities", "vp", "seniority", 15),
                ("departments", "engineering", "department", 10),
                ("industries", "financial services", "company_industry", 10),
                ("company_sizes", "501-5000", "company_size", 10),
                ("locations", "germany", "country", 10),
            ],
            vec![],
            vec![],
        ),
        (
            json!({"first_name": "Almost", "title": "Head of Engineering", "seniority": "VP", "company_industry": "Software",
                   "company_size": 200, "country": "Austria", "company_domain": "almost.at"}),
            // 20 + 15 + 20 + 15 = 70 of 110 = 63.6
            64,
            "b",
            vec![
                ("titles", "head of engineering", "title", 20),
                ("seniorities", "vp", "seniority", 15),
                ("industries", "software", "company_industry", 20),
                ("company_sizes", "50-500", "company_size", 15),
            ],
            vec![],
            vec!["department"],
        ),
        (
            json!({"first_name": "Mid", "seniority": "vp", "company_industry": "Software", "company_size": 10,
                   "country": "Germany", "department": "Sales", "company_domain": "mid.de"}),
            // 15 + 20 + 10 = 45 of 110 = 40.9
            41,
            "c",
            vec![
                ("seniorities", "vp", "seniority", 15),
                ("industries", "software", "company_industry", 20),
                ("locations", "germany", "country", 10),
            ],
            vec![],
            vec!["title"],
        ),
        (
            json!({"first_name": "Assistant", "title": "Assistant to the CTO", "department": "Operations",
                   "company_industry": "Software", "company_size": 30, "location": "Paris", "country": "France",
                   "company_domain": "acme.fr"}),
            // the exclusion cancels the title; industries 20 of 110 = 18.2
            18,
            "d",
            vec![
                ("titles.exclude", "assistant", "title", 0),
                ("industries", "software", "company_industry", 20),
            ],
            vec![],
            vec!["seniority"],
        ),
        (
            json!({"first_name": "Student", "title": "Student", "company_industry": "Software", "company_domain": "uni.edu"}),
            0,
            "disqualified",
            vec![],
            vec![("excluded_title_keywords", "student")],
            vec![
                "seniority",
                "department",
                "company_size",
                "location",
                "country",
            ],
        ),
        (
            json!({"first_name": "Rival", "title": "CTO and intern mentor", "company_domain": "https://EU.Competitor.com",
                   "company_industry": "Online Gambling", "seniority": "C-Level", "department": "Engineering",
                   "company_size": 100, "location": "Berlin"}),
            0,
            "disqualified",
            vec![],
            vec![
                ("excluded_industries", "gambling"),
                ("excluded_domains", "competitor.com"),
                ("excluded_title_keywords", "intern"),
            ],
            vec![],
        ),
        (
            json!({"first_name": "Nobody"}),
            0,
            "d",
            vec![],
            vec![],
            vec![
                "title",
                "headline",
                "seniority",
                "department",
                "company_name",
                "company_domain",
                "company_industry",
                "company_size",
                "location",
                "country",
            ],
        ),
    ];
    let mut ids = Vec::new();
    for (prospect, ..) in &table {
        ids.push(
            app.create_prospect(prospect.clone()).await["id"]
                .as_str()
                .expect("id")
                .to_owned(),
        );
    }
    let run = app
        .post_json(
            "/scoring-runs",
            &app.key,
            json!({"prospect_ids": ids, "targeting_id": targeting_id}),
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(run["list_id"], Value::Null);
    assert_eq!(
        run["by_tier"],
        json!({"a": 1, "b": 2, "c": 1, "d": 2, "disqualified": 2})
    );
    assert_eq!(run["credits_spent"], json!(8));
    let results = app
        .get(
            &format!(
                "/scoring-runs/{}/results?limit=200",
                run["id"].as_str().expect("id")
            ),
            &app.key,
        )
        .await
        .expect(200)
        .clone();
    let items = results["items"].as_array().expect("items");
    assert_eq!(items.len(), table.len());
    for ((prospect, score, tier, matched, gates_failed, missing), id) in table.iter().zip(&ids) {
        let name = prospect["first_name"].as_str().expect("name");
        let result = items
            .iter()
            .find(|item| item["prospect_id"] == json!(id))
            .unwrap_or_else(|| panic!("{name}: no result"));
        assert_eq!(result["score"], json!(score), "{name}: score");
        assert_eq!(result["tier"], json!(tier), "{name}: tier");
        let matched: Vec<Value> =
            matched.iter().map(|(criterion, value, field, points)| json!({"criterion": criterion, "value": value, "field": field, "points": points})).collect();
        assert_eq!(result["matched"], json!(matched), "{name}: matched");
        let gates: Vec<Value> = gates_failed
            .iter()
            .map(|(gate, value)| {
                let field = match *gate {
                    "excluded_industries" => "company_industry",
                    "excluded_domains" => "company_domain",
                    _ => "title",
                };
                json!({"gate": gate, "value": value, "field": field})
            })
            .collect();
        assert_eq!(result["gates_failed"], json!(gates), "{name}: gates failed");
        assert_eq!(result["missing"], json!(missing), "{name}: missing");
        assert_eq!(result["full_name"], json!(name));
        let stored = app
            .get(&format!("/prospects/{id}"), &app.key)
            .await
            .expect(200)
            .clone();
        assert_eq!(
            (stored["score"].clone(), stored["tier"].clone()),
            (json!(score), json!(tier)),
            "{name}: the prospect's latest score"
        );
    }
    let scores: Vec<i64> = items
        .iter()
        .map(|item| item["score"].as_i64().expect("score"))
        .collect();
    let mut sorted = scores.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(scores, sorted, "best first");
}

#[tokio::test]
async fn an_estimate_with_a_read_only_key_spends_nothing_and_the_real_call_is_refused() {
    let app = spawn_app().await;
    app.grant_credits(10).await;
    let read_key = app.read_key().await;
    let targeting_id = create_targeting(&app).await;
    let prospects = make_prospects(&app, 3).await;
    let body = json!({"prospect_ids": prospects, "targeting_id": targeting_id});

    let mut estimate_body = body.clone();
    estimate_body["estimate_only"] = json!(true);
    let estimate = app
        .post_json("/scoring-runs", &read_key, estimate_body.clone())
        .await
        .expect(200)
        .clone();
    assert_eq!(
        (
            estimate["price"].clone(),
            estimate["balance"].clone(),
            estimate["sufficient"].clone()
        ),
        (json!(3), json!(10), json!(true))
    );
    let (is_error, mcp_estimate) = app
        .mcp_call(&read_key, "service_start_scoring_run", estimate_body)
        .await;
    assert!(!is_error, "{mcp_estimate}");
    assert_eq!(mcp_estimate, estimate, "the MCP face prices alike");

    let refused = app.post_json("/scoring-runs", &read_key, body).await;
    refused.expect_error(403, "insufficient_scope");
    assert_eq!(balance(&app).await, 10);
    assert_eq!(run_count(&app).await, 0);
    assert_eq!(transactions(&app).await.len(), 1, "only the grant");
}

#[tokio::test]
async fn a_run_the_balance_cannot_cover_is_refused_with_nothing_written() {
    let app = spawn_app().await;
    app.grant_credits(2).await;
    let targeting_id = create_targeting(&app).await;
    let prospects = make_prospects(&app, 3).await;
    let list_id = make_list(&app, &prospects).await;
    let body = json!({"list_id": list_id, "targeting_id": targeting_id});

    let refused = app.post_json("/scoring-runs", &app.key, body.clone()).await;
    refused.expect_error(402, "insufficient_credits");
    assert_eq!(
        (
            refused.body["price"].clone(),
            refused.body["balance"].clone()
        ),
        (json!(3), json!(2))
    );
    assert_eq!(balance(&app).await, 2);
    assert_eq!(run_count(&app).await, 0);
    assert_eq!(transactions(&app).await.len(), 1, "only the grant");
    for id in &prospects {
        assert_eq!(
            app.get(&format!("/prospects/{id}"), &app.key)
                .await
                .expect(200)["score"],
            Value::Null
        );
    }
    let results: i64 = sqlx::query_scalar("select count(*) from scoring_results")
        .fetch_one(app.db.pool())
        .await
        .expect("count");
    assert_eq!(results, 0);

    // The same key works once the balance covers the price: a refusal is not remembered.
    let first = post_with_key(&app, "/scoring-runs", &app.key, "score-list-1", &body).await;
    first.expect_error(402, "insufficient_credits");
    app.grant_credits(1).await;
    let run = post_with_key(&app, "/scoring-runs", &app.key, "score-list-1", &body).await;
    assert_eq!(run.expect(200)["total"], json!(3));
    assert_eq!(balance(&app).await, 0);
}

#[tokio::test]
async fn a_retry_with_the_same_idempotency_key_replays_the_run_and_spends_nothing() {
    let app = spawn_app().await;
    app.grant_credits(20).await;
    let targeting_id = create_targeting(&app).await;
    let prospects = make_prospects(&app, 4).await;
    let body = json!({"prospect_ids": prospects, "targeting_id": targeting_id});

    let first = post_with_key(&app, "/scoring-runs", &app.key, "score-4", &body).await;
    let run = first.expect(200).clone();
    assert_eq!(first.header("idempotent-replayed"), None);
    assert_eq!(balance(&app).await, 16);

    let replay = post_with_key(&app, "/scoring-runs", &app.key, "score-4", &body).await;
    assert_eq!(replay.expect(200), &run, "the same body");
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    let mut mcp_arguments = body.clone();
    mcp_arguments["idempotency_key"] = json!("score-4");
    let (is_error, mcp_replay) = app
        .mcp_call(&app.key, "service_start_scoring_run", mcp_arguments)
        .await;
    assert!(!is_error, "{mcp_replay}");
    assert_eq!(mcp_replay, run, "the MCP face replays the same run");
    assert_eq!(balance(&app).await, 16, "spent once");
    assert_eq!(run_count(&app).await, 1, "scored once");

    let other_body = json!({"prospect_ids": &prospects[..2], "targeting_id": targeting_id});
    post_with_key(&app, "/scoring-runs", &app.key, "score-4", &other_body)
        .await
        .expect_error(422, "idempotency_key_reused");

    // Without a key, a second call is a second run.
    app.post_json("/scoring-runs", &app.key, body)
        .await
        .expect(200);
    assert_eq!(balance(&app).await, 12);
    assert_eq!(run_count(&app).await, 2);
}

#[tokio::test]
async fn bad_subjects_are_refused_before_anything_is_spent() {
    let app = spawn_app().await;
    app.grant_credits(50).await;
    let targeting_id = create_targeting(&app).await;
    let prospects = make_prospects(&app, 2).await;
    let list_id = make_list(&app, &prospects).await;
    let empty_list = make_list(&app, &[]).await;
    let (_, other_key) = app.other_workspace("Other Co", "owner@other.test").await;
    let foreign = app
        .post_json("/prospects", &other_key, json!({"first_name": "Theirs"}))
        .await
        .expect(201)["id"]
        .clone();
    let missing = "prs_00000000000000000000";

    let cases: Vec<(Value, u16, &str, &str)> = vec![
        (
            json!({"targeting_id": targeting_id}),
            400,
            "invalid_request",
            "`list_id` or `prospect_ids`",
        ),
        (
            json!({"list_id": list_id, "prospect_ids": prospects, "targeting_id": targeting_id}),
            400,
            "invalid_request",
            "not both",
        ),
        (
            json!({"prospect_ids": [], "targeting_id": targeting_id}),
            400,
            "invalid_request",
            "at least one",
        ),
        (
            json!({"list_id": "lst_00000000000000000000", "targeting_id": targeting_id}),
            404,
            "not_found",
            "lst_00000000000000000000",
        ),
        (
            json!({"list_id": "nope", "targeting_id": targeting_id}),
            404,
            "not_found",
            "nope",
        ),
        (
            json!({"list_id": empty_list, "targeting_id": targeting_id}),
            400,
            "invalid_request",
            "has no prospects",
        ),
        (
            json!({"prospect_ids": [prospects[0], missing, foreign], "targeting_id": targeting_id}),
            400,
            "invalid_request",
            missing,
        ),
        (
            json!({"list_id": list_id, "targeting_id": "tgt_00000000000000000000"}),
            404,
            "not_found",
            "tgt_00000000000000000000",
        ),
        (
            json!({"list_id": list_id}),
            400,
            "invalid_request",
            "targeting_id",
        ),
        (
            json!({"list_id": list_id, "targeting_id": targeting_id, "tier": "a"}),
            400,
            "invalid_request",
            "tier",
        ),
    ];
    for (body, status, code, expected) in cases {
        for estimate in [true, false] {
            let mut body = body.clone();
            body["estimate_only"] = json!(estimate);
            let response = app.post_json("/scoring-runs", &app.key, body.clone()).await;
            let message = response.expect_error(status, code);
            assert!(message.contains(expected), "{body}: {message}");
            if expected == missing {
                assert!(
                    message.contains(foreign.as_str().expect("id")),
                    "both unknown ids are named: {message}"
                );
                assert_eq!(
                    response.body["unknown_ids"].as_array().map(Vec::len),
                    Some(2),
                    "{}",
                    response.body
                );
            }
        }
    }
    assert_eq!(balance(&app).await, 50);
    assert_eq!(run_count(&app).await, 0);

    // Repeated ids are scored, and paid for, once.
    let run = app
        .post_json("/scoring-runs", &app.key, json!({"prospect_ids": [prospects[0], prospects[0], prospects[1]], "targeting_id": targeting_id}))
        .await
        .expect(200)
        .clone();
    assert_eq!(
        (run["total"].clone(), run["credits_spent"].clone()),
        (json!(2), json!(2))
    );
    assert_eq!(balance(&app).await, 48);
}

#[tokio::test]
async fn a_rescore_after_the_targeting_changes_records_the_new_version() {
    let app = spawn_app().await;
    app.grant_credits(10).await;
    let targeting_id = create_targeting(&app).await;
    let prospects = make_prospects(&app, 1).await;
    let body = json!({"prospect_ids": prospects, "targeting_id": targeting_id});
    let first = app
        .post_json("/scoring-runs", &app.key, body.clone())
        .await
        .expect(200)
        .clone();
    assert_eq!(
        app.get(&format!("/prospects/{}", prospects[0]), &app.key)
            .await
            .expect(200)["score"],
        json!(27)
    );

    // Titles alone now: the CTO earns everything.
    app.patch_json(
        &format!("/targetings/{targeting_id}"),
        &app.key,
        json!({"criteria": {"titles": {"include": [{"value": "cto", "points": 10}]}}}),
    )
    .await
    .expect(200);
    let second = app
        .post_json("/scoring-runs", &app.key, body)
        .await
        .expect(200)
        .clone();
    assert_eq!(second["targeting_version"], json!(2));
    let prospect = app
        .get(&format!("/prospects/{}", prospects[0]), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(
        (prospect["score"].clone(), prospect["tier"].clone()),
        (json!(100), json!("a"))
    );
    let version: Option<i64> =
        sqlx::query_scalar("select targeting_version from prospects where id = $1")
            .bind(&prospects[0])
            .fetch_one(app.db.pool())
            .await
            .expect("read the prospect");
    assert_eq!(version, Some(2));

    // The first run keeps what it recorded.
    let first_path = format!("/scoring-runs/{}", first["id"].as_str().expect("id"));
    assert_eq!(
        app.get(&first_path, &app.key).await.expect(200)["targeting_version"],
        json!(1)
    );
    assert_eq!(
        app.get(&format!("{first_path}/results"), &app.key)
            .await
            .expect(200)["items"][0]["score"],
        json!(27)
    );
    let runs = app.get("/scoring-runs", &app.key).await.expect(200).clone();
    assert_eq!(runs["items"][0]["id"], second["id"], "newest first");
}

#[tokio::test]
async fn runs_and_results_of_another_workspace_are_not_found() {
    let app = spawn_app().await;
    app.grant_credits(10).await;
    let targeting_id = create_targeting(&app).await;
    let prospects = make_prospects(&app, 1).await;
    let run = app
        .post_json(
            "/scoring-runs",
            &app.key,
            json!({"prospect_ids": prospects, "targeting_id": targeting_id}),
        )
        .await
        .expect(200)
        .clone();
    let run_id = run["id"].as_str().expect("id");

    let (_, other_key) = app.other_workspace("Other Co", "owner@other.test").await;
    for path in [
        format!("/scoring-runs/{run_id}"),
        format!("/scoring-runs/{run_id}/results"),
        "/scoring-runs/scr_nope".to_owned(),
    ] {
        app.get(&path, &other_key)
            .await
            .expect_error(404, "not_found");
    }
    assert_eq!(
        app.get("/scoring-runs", &other_key).await.expect(200)["total"],
        json!(0)
    );
    // Their targeting cannot be used here, nor ours there.
    app.post_json(
        "/scoring-runs",
        &other_key,
        json!({"prospect_ids": prospects, "targeting_id": targeting_id}),
    )
    .await
    .expect_error(404, "not_found");
}

#[tokio::test]
async fn a_large_list_is_scored_in_batches_with_every_result_written() {
    let app = spawn_app().await;
    let count = 1_203;
    app.grant_credits(count).await;
    let targeting_id = create_targeting(&app).await;
    // Inserted with plain SQL: the point is the run's batching, not prospect creation.
    let now = app.clock.now_ms();
    let mut ids = Vec::new();
    for chunk in 0..(count as usize).div_ceil(200) {
        let rows: Vec<(String, &str)> = (chunk * 200..((chunk + 1) * 200).min(count as usize))
            .map(|index| {
                (
                    outreach_runtime::ids::new_id("prs"),
                    if index % 3 == 0 { "CTO" } else { "Intern" },
                )
            })
            .collect();
        let values: Vec<String> = (0..rows.len())
            .map(|row| format!("(${}, $1, ${}, 'api', $2, $2)", 3 + row * 2, 4 + row * 2))
            .collect();
        let sql = format!(
            "insert into prospects (id, workspace_id, title, source, created_at, updated_at) values {}",
            values.join(", ")
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&app.workspace_id)
            .bind(now);
        for (id, title) in &rows {
            query = query.bind(id).bind(*title);
        }
        query
            .execute(app.db.pool())
            .await
            .expect("insert prospects");
        ids.extend(rows.into_iter().map(|(id, _)| id));
    }
    let list_id = make_list(&app, &ids).await;

    let run = app
        .post_json(
            "/scoring-runs",
            &app.key,
            json!({"list_id": list_id, "targeting_id": targeting_id}),
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(run["total"], json!(count));
    assert_eq!(
        run["by_tier"],
        json!({"a": 0, "b": 0, "c": 0, "d": 401, "disqualified": 802})
    );
    assert_eq!(balance(&app).await, 0);
    let stored: i64 = sqlx::query_scalar("select count(*) from scoring_results where run_id = $1")
        .bind(run["id"].as_str().expect("id"))
        .fetch_one(app.db.pool())
        .await
        .expect("count results");
    assert_eq!(stored, count);
    let scored: i64 = sqlx::query_scalar("select count(*) from prospects where workspace_id = $1 and scored_at is not null and tier is not null")
        .bind(&app.workspace_id)
        .fetch_one(app.db.pool())
        .await
        .expect("count scored prospects");
    assert_eq!(scored, count);
    if app.db.backend() == Backend::Sqlite {
        // The copy of the scores reads the run's results by their key, in prospect id order, not
        // best score first through the page index.
        let plan: Vec<String> = sqlx::query(sqlx::AssertSqlSafe(format!(
            "explain query plan {}",
            copy_scores_to_prospects(Backend::Sqlite)
        )))
        .bind(run["id"].as_str().expect("id"))
        .bind(&targeting_id)
        .bind(1_i64)
        .bind(now)
        .fetch_all(app.db.pool())
        .await
        .expect("plan")
        .iter()
        .map(|row| row.get::<String, _>(3))
        .collect();
        assert!(
            plan.iter()
                .any(|step| step
                    == "SEARCH scoring_results USING INDEX sqlite_autoindex_scoring_results_1 (run_id=?)"),
            "{plan:?}"
        );
    }
    let disqualified = app
        .get(
            &format!(
                "/scoring-runs/{}/results?tier=disqualified&limit=1",
                run["id"].as_str().expect("id")
            ),
            &app.key,
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(disqualified["total"], json!(802));
    assert_eq!(
        disqualified["items"][0]["gates_failed"],
        json!([{"gate": "excluded_title_keywords", "value": "intern", "field": "title"}])
    );
}

#[tokio::test]
async fn concurrent_runs_over_the_same_prospects_never_overspend() {
    let app = spawn_app().await;
    app.grant_credits(15).await;
    let targeting_id = create_targeting(&app).await;
    let prospects = make_prospects(&app, 3).await;
    let body = json!({"prospect_ids": prospects, "targeting_id": targeting_id});

    // Ten runs of 3 credits each against 15 credits: five run, five are refused, none waits for
    // ever on another (the runs update the same prospects).
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..10 {
        let request = app
            .client
            .post(app.url("/api/v1/scoring-runs"))
            .bearer_auth(&app.key)
            .json(&body);
        calls.spawn(async move {
            let response = request.send().await.expect("send the request");
            let status = response.status().as_u16();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        });
    }
    let mut statuses = Vec::new();
    while let Some(joined) = calls.join_next().await {
        let (status, body) = joined.expect("the call finishes");
        assert!(status == 200 || status == 402, "{status} {body}");
        statuses.push(status);
    }
    assert_eq!(
        statuses.iter().filter(|status| **status == 200).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(balance(&app).await, 0);
    assert_eq!(run_count(&app).await, 5);
    let spent: i64 = transactions(&app)
        .await
        .iter()
        .filter(|entry| entry["kind"] != json!("grant"))
        .map(|entry| entry["amount"].as_i64().expect("amount"))
        .sum();
    assert_eq!(spent, -15, "the ledger explains the balance");
    let results: i64 = sqlx::query_scalar("select count(*) from scoring_results")
        .fetch_one(app.db.pool())
        .await
        .expect("count");
    assert_eq!(results, 15);
}
