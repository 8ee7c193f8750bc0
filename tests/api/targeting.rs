//! Targeting: create, read, list, update (every change bumps the version), delete; names unique
//! per workspace; every bad criterion refused with a sentence naming the field, nothing written.

use serde_json::{Value, json};

use crate::helpers::spawn_app;

/// A profile using every kind of criterion and gate.
fn profile(name: &str) -> Value {
    json!({
        "name": name,
        "description": "  Engineering leaders at mid-size software companies  ",
        "criteria": {
            "titles": {"include": [{"value": " CTO ", "points": 30}, {"value": "VP Engineering", "points": 25}], "exclude": ["assistant"]},
            "seniorities": [{"value": "c-level", "points": 20}, {"value": "vp", "points": 15}],
            "departments": [{"value": "engineering", "points": 10}],
            "industries": [{"value": "software", "points": 20}],
            "company_sizes": [{"min": 50, "max": 500, "points": 15}, {"min": 501, "points": 10}],
            "locations": [{"value": "germany", "points": 10}],
            "keywords": [{"value": "saas", "points": 5}],
        },
        "gates": {
            "excluded_industries": ["gambling"],
            "excluded_domains": ["https://www.Competitor.com/about"],
            "excluded_title_keywords": ["student"],
        },
    })
}

#[tokio::test]
async fn a_targeting_is_created_read_listed_updated_and_deleted() {
    let app = spawn_app().await;
    let created = app
        .post_json("/targetings", &app.key, profile("Mid-size SaaS"))
        .await
        .expect(201)
        .clone();
    let id = created["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("tgt_") && id.len() == 24, "{id}");
    assert_eq!(created["name"], json!("Mid-size SaaS"));
    assert_eq!(
        created["description"],
        json!("Engineering leaders at mid-size software companies"),
        "trimmed"
    );
    assert_eq!(created["version"], json!(1));
    assert_eq!(
        created["tiers"],
        json!({"a": 80, "b": 60, "c": 40}),
        "default thresholds"
    );
    assert_eq!(
        created["criteria"]["titles"]["include"][0],
        json!({"value": "CTO", "points": 30}),
        "keywords trimmed"
    );
    assert_eq!(
        created["criteria"]["company_sizes"][1],
        json!({"min": 501, "max": null, "points": 10})
    );
    assert_eq!(
        created["gates"]["excluded_domains"],
        json!(["competitor.com"]),
        "domains normalised"
    );
    assert_eq!(created["created_at"], created["updated_at"]);

    let path = format!("/targetings/{id}");
    assert_eq!(app.get(&path, &app.key).await.expect(200), &created);
    let page = app.get("/targetings", &app.key).await.expect(200).clone();
    assert_eq!(page["total"], json!(1));
    assert_eq!(page["items"][0], created);

    // A change bumps the version; the fields not given keep their values.
    app.clock.advance_ms(5);
    let renamed = app
        .patch_json(&path, &app.key, json!({"name": "SaaS leaders"}))
        .await
        .expect(200)
        .clone();
    assert_eq!(renamed["name"], json!("SaaS leaders"));
    assert_eq!(renamed["version"], json!(2));
    assert_eq!(renamed["criteria"], created["criteria"]);
    assert_eq!(renamed["created_at"], created["created_at"]);
    assert!(
        renamed["updated_at"].as_str() > created["updated_at"].as_str(),
        "updated_at moves"
    );

    // An update that changes nothing keeps the version.
    let same = app
        .patch_json(
            &path,
            &app.key,
            json!({"name": "SaaS leaders", "tiers": {"a": 80}}),
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(same, renamed);
    let empty = app
        .patch_json(&path, &app.key, json!({}))
        .await
        .expect(200)
        .clone();
    assert_eq!(empty["version"], json!(2));

    // Tiers change by threshold; criteria and gates replace their whole group; null clears.
    let retiered = app
        .patch_json(&path, &app.key, json!({"tiers": {"a": 90}}))
        .await
        .expect(200)
        .clone();
    assert_eq!(retiered["tiers"], json!({"a": 90, "b": 60, "c": 40}));
    assert_eq!(retiered["version"], json!(3));
    let replaced = app
        .patch_json(
            &path,
            &app.key,
            json!({"criteria": {"industries": [{"value": "fintech", "points": 10}]}, "gates": {}, "description": null}),
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(
        replaced["version"],
        json!(4),
        "one change of several fields is one version"
    );
    assert_eq!(
        replaced["criteria"]["industries"],
        json!([{"value": "fintech", "points": 10}])
    );
    assert_eq!(
        replaced["criteria"]["titles"],
        json!({"include": [], "exclude": []})
    );
    assert_eq!(
        replaced["gates"],
        json!({"excluded_industries": [], "excluded_domains": [], "excluded_title_keywords": []})
    );
    assert_eq!(replaced["description"], Value::Null);
    assert_eq!(app.get(&path, &app.key).await.expect(200), &replaced);

    let deleted = app.delete(&path, &app.key).await.expect(200).clone();
    assert_eq!(deleted, json!({"id": id, "deleted": true}));
    app.get(&path, &app.key)
        .await
        .expect_error(404, "not_found");
    app.delete(&path, &app.key)
        .await
        .expect_error(404, "not_found");
    app.patch_json(&path, &app.key, json!({"name": "Ghost"}))
        .await
        .expect_error(404, "not_found");
    assert_eq!(
        app.get("/targetings", &app.key).await.expect(200)["total"],
        json!(0)
    );
}

#[tokio::test]
async fn a_duplicate_name_is_a_conflict_naming_the_existing_targeting() {
    let app = spawn_app().await;
    let first = app
        .post_json("/targetings", &app.key, profile("Enterprise"))
        .await
        .expect(201)
        .clone();
    let existing_id = first["id"].as_str().expect("id");

    let duplicate = app
        .post_json("/targetings", &app.key, profile(" Enterprise "))
        .await;
    let message = duplicate.expect_error(409, "conflict");
    assert!(message.contains(existing_id), "{message}");
    assert_eq!(duplicate.body["existing_id"], json!(existing_id));

    let other = app
        .post_json("/targetings", &app.key, profile("Startups"))
        .await
        .expect(201)
        .clone();
    let path = format!("/targetings/{}", other["id"].as_str().expect("id"));
    let rename = app
        .patch_json(
            &path,
            &app.key,
            json!({"name": "Enterprise", "tiers": {"a": 95}}),
        )
        .await;
    rename.expect_error(409, "conflict");
    assert_eq!(rename.body["existing_id"], json!(existing_id));
    assert_eq!(
        app.get(&path, &app.key).await.expect(200),
        &other,
        "a refused update changes nothing"
    );

    // Names are per workspace.
    let (_, other_key) = app.other_workspace("Other Co", "owner@other.test").await;
    app.post_json("/targetings", &other_key, profile("Enterprise"))
        .await
        .expect(201);
}

#[tokio::test]
async fn bad_criteria_are_refused_with_a_sentence_naming_the_field() {
    let app = spawn_app().await;
    let with = |patch: Value| {
        let mut body = profile("Bad");
        merge(&mut body, patch);
        body
    };
    let cases = [
        (json!({"name": "Bad"}), "criteria"),
        (json!({"name": "Bad", "criteria": {}}), "at least one entry"),
        (
            json!({"name": "  ", "criteria": {"keywords": [{"value": "x", "points": 1}]}}),
            "`name`",
        ),
        (
            with(json!({"name": "n".repeat(101)})),
            "`name` is longer than 100",
        ),
        (
            with(json!({"criteria": {"titles": {"include": [{"value": "cto", "points": 0}]}}})),
            "`criteria.titles.include[0].points`",
        ),
        (
            with(json!({"criteria": {"seniorities": [{"value": "vp", "points": 101}]}})),
            "`criteria.seniorities[0].points` must be between 1 and 100",
        ),
        (
            with(
                json!({"criteria": {"keywords": [{"value": "ok", "points": 1}, {"value": " ?! ", "points": 1}]}}),
            ),
            "`criteria.keywords[1].value` must contain a letter or a digit",
        ),
        (
            with(
                json!({"criteria": {"titles": {"include": [{"value": "CTO", "points": 5}, {"value": "cto", "points": 9}]}}}),
            ),
            "`criteria.titles.include` lists `cto` more than once",
        ),
        (
            with(
                json!({"criteria": {"titles": {"include": [{"value": "x".repeat(101), "points": 5}]}}}),
            ),
            "`criteria.titles.include[0].value` is longer than 100",
        ),
        (
            with(json!({"criteria": {"company_sizes": [{"min": 500, "max": 50, "points": 5}]}})),
            "`criteria.company_sizes[0]`: `min` (500) must not be greater than `max` (50)",
        ),
        (
            with(json!({"criteria": {"company_sizes": [{"points": 5}]}})),
            "`criteria.company_sizes[0]` needs `min`, `max` or both",
        ),
        (
            with(json!({"criteria": {"company_sizes": [{"min": -1, "points": 5}]}})),
            "`criteria.company_sizes[0].min` must not be negative",
        ),
        (
            with(json!({"criteria": {"locations": [{"value": "berlin"}]}})),
            "points",
        ),
        (
            with(json!({"criteria": {"titles": [["cto", 5], []]}})),
            "Invalid field `criteria.titles[0]`: expected a string or an object like {\"value\": ..., \"points\": ...}, got a list",
        ),
        (
            with(json!({"criteria": [[], []]})),
            "Invalid field `criteria`: expected an object like",
        ),
        (
            with(json!({"criteria": {"company_sizes": [[1, 10, 5]]}})),
            "Invalid field `criteria.company_sizes[0]`: expected an object like {\"points\": ...}, got a list",
        ),
        (
            with(json!({"gates": [[], [], []]})),
            "Invalid field `gates`: expected an object like",
        ),
        (
            with(json!({"tiers": [90, 70, 50]})),
            "Invalid field `tiers`: expected an object like",
        ),
        (
            with(json!({"criteria": {"industries": [{"keyword": "software", "points": 5}]}})),
            "unknown field `keyword`",
        ),
        (
            with(json!({"criteria": {"industries": "software"}})),
            "Invalid field `criteria.industries`: expected a list of strings or objects like {\"value\": ..., \"points\": ...}, got the string",
        ),
        (
            with(json!({"criteria": {"titles": "CTO"}})),
            "Invalid field `criteria.titles`: expected an object like {\"exclude\": ..., \"include\": ...} or a list of strings or objects like {\"value\": ..., \"points\": ...}, got the string \"CTO\"",
        ),
        (
            with(json!({"criteria": {"title": {"include": []}}})),
            "unknown field `title`",
        ),
        (
            with(json!({"gates": {"excluded_domains": ["not a domain"]}})),
            "`gates.excluded_domains[0]` must be a domain",
        ),
        (
            with(json!({"gates": {"excluded_domains": ["acme.com", "www.ACME.com"]}})),
            "`gates.excluded_domains` lists `acme.com` more than once",
        ),
        (
            with(json!({"gates": {"excluded_industries": [""]}})),
            "`gates.excluded_industries[0]`",
        ),
        (
            with(json!({"tiers": {"a": 50, "b": 60}})),
            "`tiers` must descend: `a` > `b` > `c`; got a = 50, b = 60, c = 40",
        ),
        (with(json!({"tiers": {"b": 40}})), "`tiers` must descend"),
        (
            with(json!({"tiers": {"a": 101}})),
            "`tiers.a` must be between 0 and 100; got 101",
        ),
        (
            with(json!({"tiers": {"c": -1}})),
            "`tiers.c` must be between 0 and 100",
        ),
        (with(json!({"tiers": {"d": 10}})), "unknown field `d`"),
    ];
    for (body, expected) in cases {
        let response = app.post_json("/targetings", &app.key, body.clone()).await;
        let message = response.expect_error(400, "invalid_request");
        assert!(
            message.contains(expected),
            "{body}\n  expected a sentence with: {expected}\n  got: {message}"
        );
    }
    assert_eq!(
        app.get("/targetings", &app.key).await.expect(200)["total"],
        json!(0),
        "nothing was written"
    );

    // The same checks guard updates, which then change nothing.
    let created = app
        .post_json("/targetings", &app.key, profile("Good"))
        .await
        .expect(201)
        .clone();
    let path = format!("/targetings/{}", created["id"].as_str().expect("id"));
    for (patch, expected) in [
        (json!({"tiers": {"c": 70}}), "`tiers` must descend"),
        (
            json!({"criteria": {"departments": []}}),
            "at least one entry",
        ),
        (json!({"name": ""}), "`name` must not be empty"),
        (
            json!({"description": "d".repeat(2001)}),
            "`description` is longer than 2000",
        ),
    ] {
        let message = app
            .patch_json(&path, &app.key, patch.clone())
            .await
            .expect_error(400, "invalid_request")
            .to_owned();
        assert!(message.contains(expected), "{patch}: {message}");
    }
    assert_eq!(app.get(&path, &app.key).await.expect(200), &created);
}

/// Sets the keys of `patch` in `body`, recursively for objects.
fn merge(body: &mut Value, patch: Value) {
    match (body, patch) {
        (Value::Object(body), Value::Object(patch)) => {
            for (key, value) in patch {
                match body.get_mut(&key) {
                    Some(existing)
                        if existing.is_object() && value.is_object() && key != "criteria" =>
                    {
                        merge(existing, value);
                    }
                    _ => {
                        body.insert(key, value);
                    }
                }
            }
        }
        (body, patch) => *body = patch,
    }
}

#[tokio::test]
async fn unknown_malformed_and_foreign_ids_are_not_found() {
    let app = spawn_app().await;
    let (_, other_key) = app.other_workspace("Other Co", "owner@other.test").await;
    let foreign = app
        .post_json("/targetings", &other_key, profile("Theirs"))
        .await
        .expect(201)
        .clone();
    let foreign_path = format!("/targetings/{}", foreign["id"].as_str().expect("id"));
    for path in [
        "/targetings/tgt_00000000000000000000",
        "/targetings/prs_00000000000000000000",
        "/targetings/nope",
        &foreign_path,
    ] {
        app.get(path, &app.key).await.expect_error(404, "not_found");
        app.patch_json(path, &app.key, json!({"name": "Mine"}))
            .await
            .expect_error(404, "not_found");
        app.delete(path, &app.key)
            .await
            .expect_error(404, "not_found");
    }
    assert_eq!(
        app.get(&foreign_path, &other_key).await.expect(200)["name"],
        json!("Theirs"),
        "untouched"
    );
    assert_eq!(
        app.get("/targetings", &app.key).await.expect(200)["total"],
        json!(0)
    );
}

#[tokio::test]
async fn targetings_are_listed_newest_first_in_pages() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for index in 0..3 {
        app.clock.advance_ms(1);
        let created = app
            .post_json("/targetings", &app.key, profile(&format!("T{index}")))
            .await
            .expect(201)
            .clone();
        ids.push(created["id"].clone());
    }
    let first = app
        .get("/targetings?limit=2", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(
        (
            first["total"].clone(),
            first["count"].clone(),
            first["has_more"].clone()
        ),
        (json!(3), json!(2), json!(true))
    );
    assert_eq!(first["next_offset"], json!(2));
    assert_eq!(
        [
            first["items"][0]["id"].clone(),
            first["items"][1]["id"].clone()
        ],
        [ids[2].clone(), ids[1].clone()]
    );
    let second = app
        .get("/targetings?limit=2&offset=2", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(second["items"][0]["id"], ids[0]);
    assert_eq!(
        (second["has_more"].clone(), second["next_offset"].clone()),
        (json!(false), Value::Null)
    );
    app.get("/targetings?limit=201", &app.key)
        .await
        .expect_error(400, "invalid_request");
}

#[tokio::test]
async fn deleting_a_targeting_clears_it_as_a_lists_default() {
    let app = spawn_app().await;
    let created = app
        .post_json("/targetings", &app.key, profile("Default"))
        .await
        .expect(201)
        .clone();
    let targeting_id = created["id"].as_str().expect("id");
    let list_id = outreach_runtime::ids::new_id("lst");
    sqlx::query(
        "insert into lists (id, workspace_id, name, default_targeting_id, created_at, updated_at) values ($1, $2, 'L', $3, 0, 0)",
    )
    .bind(&list_id)
    .bind(&app.workspace_id)
    .bind(targeting_id)
    .execute(app.db.pool())
    .await
    .expect("insert a list");
    app.delete(&format!("/targetings/{targeting_id}"), &app.key)
        .await
        .expect(200);
    let default: Option<String> =
        sqlx::query_scalar("select default_targeting_id from lists where id = $1")
            .bind(&list_id)
            .fetch_one(app.db.pool())
            .await
            .expect("read the list");
    assert_eq!(default, None);
}

#[tokio::test]
async fn a_read_only_key_reads_targetings_but_cannot_change_them() {
    let app = spawn_app().await;
    let read_key = app.read_key().await;
    let created = app
        .post_json("/targetings", &app.key, profile("Readable"))
        .await
        .expect(201)
        .clone();
    let path = format!("/targetings/{}", created["id"].as_str().expect("id"));
    assert_eq!(app.get(&path, &read_key).await.expect(200), &created);
    app.post_json("/targetings", &read_key, profile("Nope"))
        .await
        .expect_error(403, "insufficient_scope");
    app.patch_json(&path, &read_key, json!({"name": "Nope"}))
        .await
        .expect_error(403, "insufficient_scope");
    app.delete(&path, &read_key)
        .await
        .expect_error(403, "insufficient_scope");
    assert_eq!(app.get(&path, &app.key).await.expect(200), &created);
}

#[tokio::test]
async fn every_group_takes_value_points_or_bare_strings_worth_ten_points() {
    let app = spawn_app().await;
    let created = app
        .post_json(
            "/targetings",
            &app.key,
            json!({
                "name": "Bare",
                "criteria": {
                    "titles": ["CTO", {"value": "VP Engineering", "points": 25}],
                    "seniorities": ["vp"],
                    "departments": [{"value": "engineering", "points": 10}],
                    "industries": ["software"],
                    "locations": ["germany"],
                    "keywords": [{"value": "saas", "points": 5}, "ml"],
                },
            }),
        )
        .await
        .expect(201)
        .clone();
    let criteria = &created["criteria"];
    assert_eq!(
        criteria["titles"],
        json!({"include": [{"value": "CTO", "points": 10}, {"value": "VP Engineering", "points": 25}], "exclude": []}),
        "a bare list is `include`; a bare string earns 10 points"
    );
    for group in ["seniorities", "industries", "locations"] {
        assert_eq!(criteria[group][0]["points"], json!(10), "{group}");
    }
    assert_eq!(
        criteria["keywords"],
        json!([{"value": "saas", "points": 5}, {"value": "ml", "points": 10}])
    );

    // The object form of titles takes bare strings too.
    let id = created["id"].as_str().expect("id");
    let updated = app
        .patch_json(
            &format!("/targetings/{id}"),
            &app.key,
            json!({"criteria": {"titles": {"include": ["cto"], "exclude": ["assistant"]}}}),
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(
        updated["criteria"]["titles"],
        json!({"include": [{"value": "cto", "points": 10}], "exclude": ["assistant"]})
    );

    // A refused update names the field and changes nothing.
    let message = app
        .patch_json(
            &format!("/targetings/{id}"),
            &app.key,
            json!({"criteria": {"titles": [["cto"], []]}}),
        )
        .await
        .expect_error(400, "invalid_request")
        .to_owned();
    assert!(message.contains("`criteria.titles[0]`"), "{message}");
    assert_eq!(
        app.get(&format!("/targetings/{id}"), &app.key)
            .await
            .expect(200),
        &updated
    );
}

#[tokio::test]
async fn targetings_stored_with_keyword_entries_still_load_and_score() {
    let app = spawn_app().await;
    app.grant_credits(10).await;
    let created = app
        .post_json("/targetings", &app.key, profile("Stored"))
        .await
        .expect(201)
        .clone();
    let id = created["id"].as_str().expect("id").to_owned();
    // As targetings were stored before every group took `{value, points}`.
    let old = json!({
        "titles": {"include": [{"keyword": "CTO", "points": 30}], "exclude": ["assistant"]},
        "seniorities": [], "departments": [], "industries": [], "company_sizes": [],
        "locations": [{"keyword": "germany", "points": 10}],
        "keywords": [{"keyword": "saas", "points": 5}],
    });
    sqlx::query("update targetings set criteria = $1 where id = $2")
        .bind(old.to_string())
        .bind(&id)
        .execute(app.db.pool())
        .await
        .expect("store old criteria");
    let read = app
        .get(&format!("/targetings/{id}"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(
        read["criteria"]["titles"]["include"],
        json!([{"value": "CTO", "points": 30}])
    );
    assert_eq!(
        read["criteria"]["keywords"],
        json!([{"value": "saas", "points": 5}])
    );

    let prospect = app
        .create_prospect(
            json!({"first_name": "Ada", "title": "CTO", "location": "Berlin, Germany"}),
        )
        .await;
    let prospect_id = prospect["id"].as_str().expect("id").to_owned();
    let list_id = outreach_runtime::ids::new_id("lst");
    sqlx::query("insert into lists (id, workspace_id, name, created_at, updated_at) values ($1, $2, 'L', 0, 0)")
        .bind(&list_id)
        .bind(&app.workspace_id)
        .execute(app.db.pool())
        .await
        .expect("insert a list");
    sqlx::query("insert into list_members (list_id, prospect_id, workspace_id, added_at) values ($1, $2, $3, 0)")
        .bind(&list_id)
        .bind(&prospect_id)
        .bind(&app.workspace_id)
        .execute(app.db.pool())
        .await
        .expect("insert a member");
    let run = app
        .post_json(
            "/scoring-runs",
            &app.key,
            json!({"list_id": list_id, "targeting_id": id}),
        )
        .await
        .expect(200)
        .clone();
    // CTO 30 + germany 10 of 45 available = 89: tier a.
    assert_eq!(
        run["by_tier"],
        json!({"a": 1, "b": 0, "c": 0, "d": 0, "disqualified": 0})
    );
}
