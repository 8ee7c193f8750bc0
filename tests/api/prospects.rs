//! Prospects: create, read, update with PATCH semantics, delete; profile URLs normalised and
//! unique per workspace; the `q` and `tag` filters.

use serde_json::{Value, json};

use crate::helpers::spawn_app;

#[tokio::test]
async fn a_prospect_is_created_read_updated_and_deleted() {
    let app = spawn_app().await;
    let created = app
        .post_json(
            "/prospects",
            &app.key,
            json!({
                "first_name": "  Grace ",
                "last_name": "Hopper",
                "title": "Rear Admiral",
                "company_name": "US Navy",
                "company_domain": "https://www.Navy.mil/about",
                "company_size": 300000,
                "email": " Grace@Navy.MIL ",
                "profile_url": "https://www.LinkedIn.com/in/grace-hopper/?trk=x#top",
                "tags": ["pioneer", " cobol ", "pioneer"],
                "custom_fields": {"bugs_found": 1, "ship": "USS Hopper"},
            }),
        )
        .await;
    let prospect = created.expect(201).clone();
    let id = prospect["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("prs_") && id.len() == 24, "{id}");
    assert_eq!(prospect["first_name"], json!("Grace"), "text is trimmed");
    assert_eq!(prospect["full_name"], json!("Grace Hopper"));
    assert_eq!(prospect["company_domain"], json!("navy.mil"));
    assert_eq!(prospect["email"], json!("grace@navy.mil"));
    assert_eq!(
        prospect["profile_url"],
        json!("linkedin.com/in/grace-hopper")
    );
    assert_eq!(
        prospect["tags"],
        json!(["pioneer", "cobol"]),
        "tags trimmed and deduplicated"
    );
    assert_eq!(
        prospect["custom_fields"],
        json!({"bugs_found": 1, "ship": "USS Hopper"})
    );
    assert_eq!(prospect["company_size"], json!(300_000));
    assert_eq!(prospect["source"], json!("api"));
    assert_eq!(prospect["do_not_contact"], json!(false));
    assert_eq!(prospect["score"], Value::Null);
    assert_eq!(prospect["created_at"], prospect["updated_at"]);
    assert!(
        prospect["created_at"]
            .as_str()
            .is_some_and(|time| time.ends_with('Z'))
    );

    let path = format!("/prospects/{id}");
    assert_eq!(app.get(&path, &app.key).await.expect(200), &prospect);

    // PATCH: absent keeps, null clears, tags replace.
    app.clock.advance_ms(5);
    let updated = app
        .patch_json(&path, &app.key, json!({"title": "Admiral", "company_name": null, "tags": ["legend"], "do_not_contact": true}))
        .await
        .expect(200)
        .clone();
    assert_eq!(updated["title"], json!("Admiral"));
    assert_eq!(updated["company_name"], Value::Null, "null clears");
    assert_eq!(updated["first_name"], json!("Grace"), "absent keeps");
    assert_eq!(updated["email"], json!("grace@navy.mil"), "absent keeps");
    assert_eq!(
        updated["custom_fields"], prospect["custom_fields"],
        "absent keeps"
    );
    assert_eq!(updated["tags"], json!(["legend"]), "tags replace");
    assert_eq!(updated["do_not_contact"], json!(true));
    assert_eq!(updated["created_at"], prospect["created_at"]);
    assert!(
        updated["updated_at"].as_str() > prospect["updated_at"].as_str(),
        "updated_at moves"
    );
    assert_eq!(app.get(&path, &app.key).await.expect(200), &updated);

    // An empty patch changes nothing but the time.
    let same = app
        .patch_json(&path, &app.key, json!({}))
        .await
        .expect(200)
        .clone();
    assert_eq!(same["title"], json!("Admiral"));

    let deleted = app.delete(&path, &app.key).await.expect(200).clone();
    assert_eq!(deleted, json!({"id": id, "deleted": true}));
    app.get(&path, &app.key)
        .await
        .expect_error(404, "not_found");
    app.delete(&path, &app.key)
        .await
        .expect_error(404, "not_found");
    app.patch_json(&path, &app.key, json!({"title": "Ghost"}))
        .await
        .expect_error(404, "not_found");
    assert_eq!(app.prospect_count().await, 0);
}

#[tokio::test]
async fn a_profile_url_is_normalised_in_every_spelling() {
    let app = spawn_app().await;
    let cases = [
        ("https://www.linkedin.com/in/ada/", "linkedin.com/in/ada"),
        (
            "http://LinkedIn.com/in/bob?utm_source=x",
            "linkedin.com/in/bob",
        ),
        ("www.linkedin.com/in/cy", "linkedin.com/in/cy"),
        ("linkedin.com/in/dee#about", "linkedin.com/in/dee"),
    ];
    for (given, stored) in cases {
        let prospect = app.create_prospect(json!({"profile_url": given})).await;
        assert_eq!(prospect["profile_url"], json!(stored), "{given}");
    }
    for bad in [
        "not a url",
        "https://linkedin.com/",
        "ftp://linkedin.com/in/x",
        "localhost/in/x",
    ] {
        let message = app
            .post_json("/prospects", &app.key, json!({"profile_url": bad}))
            .await
            .expect_error(400, "invalid_request")
            .to_owned();
        assert!(message.contains("profile_url"), "{bad}: {message}");
    }
}

#[tokio::test]
async fn a_duplicate_profile_url_is_a_conflict_naming_the_existing_prospect() {
    let app = spawn_app().await;
    let first = app
        .create_prospect(
            json!({"first_name": "Jane", "profile_url": "https://www.linkedin.com/in/jane-doe/"}),
        )
        .await;
    let existing_id = first["id"].as_str().expect("id");
    let before = app.prospect_count().await;

    let duplicate = app
        .post_json(
            "/prospects",
            &app.key,
            json!({"first_name": "Janet", "profile_url": "http://LinkedIn.com/in/jane-doe?ref=x"}),
        )
        .await;
    let message = duplicate.expect_error(409, "conflict");
    assert!(message.contains(existing_id), "{message}");
    assert_eq!(duplicate.body["existing_id"], json!(existing_id));
    assert_eq!(
        app.prospect_count().await,
        before,
        "the duplicate was not written"
    );

    let (is_error, body) = app
        .mcp_call(
            &app.key,
            "service_create_prospect",
            json!({"profile_url": "linkedin.com/in/jane-doe"}),
        )
        .await;
    assert!(is_error);
    assert_eq!(body["code"], json!("conflict"));
    assert_eq!(body["existing_id"], json!(existing_id));

    // Moving another prospect onto the same URL is a conflict too, and leaves it as it was.
    let other = app
        .create_prospect(json!({"first_name": "John", "profile_url": "linkedin.com/in/john"}))
        .await;
    let path = format!("/prospects/{}", other["id"].as_str().expect("id"));
    let response = app
        .patch_json(
            &path,
            &app.key,
            json!({"profile_url": "https://linkedin.com/in/jane-doe/", "first_name": "Johnny"}),
        )
        .await;
    response.expect_error(409, "conflict");
    assert_eq!(response.body["existing_id"], json!(existing_id));
    assert_eq!(app.get(&path, &app.key).await.expect(200), &other);

    // Clearing the URL frees it.
    app.patch_json(
        &format!("/prospects/{existing_id}"),
        &app.key,
        json!({"profile_url": null}),
    )
    .await
    .expect(200);
    app.patch_json(
        &path,
        &app.key,
        json!({"profile_url": "linkedin.com/in/jane-doe"}),
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn create_needs_a_name_a_profile_url_or_an_email() {
    let app = spawn_app().await;
    for body in [
        json!({}),
        json!({"title": "CTO", "company_name": "Acme"}),
        json!({"first_name": "   "}),
    ] {
        let message = app
            .post_json("/prospects", &app.key, body.clone())
            .await
            .expect_error(400, "invalid_request")
            .to_owned();
        assert!(
            message.contains("name")
                && message.contains("profile_url")
                && message.contains("email"),
            "{body}: {message}"
        );
    }
    for body in [
        json!({"first_name": "A"}),
        json!({"last_name": "B"}),
        json!({"email": "c@d.test"}),
        json!({"profile_url": "linkedin.com/in/e"}),
    ] {
        app.post_json("/prospects", &app.key, body)
            .await
            .expect(201);
    }
    assert_eq!(app.prospect_count().await, 4);

    // An update may not leave a prospect unfindable.
    let lone = app.create_prospect(json!({"email": "lone@x.test"})).await;
    let path = format!("/prospects/{}", lone["id"].as_str().expect("id"));
    app.patch_json(&path, &app.key, json!({"email": null}))
        .await
        .expect_error(400, "invalid_request");
    assert_eq!(
        app.get(&path, &app.key).await.expect(200)["email"],
        json!("lone@x.test")
    );
}

#[tokio::test]
async fn q_and_tag_filter_the_list() {
    let app = spawn_app().await;
    app.create_prospect(json!({"first_name": "Alan", "last_name": "Turing", "company_name": "Bletchley", "tags": ["crypto", "uk"]})).await;
    app.create_prospect(json!({"first_name": "Joan", "last_name": "Clarke", "company_name": "Bletchley Park", "tags": ["crypto"]})).await;
    app.create_prospect(json!({"first_name": "Claude", "last_name": "Shannon", "title": "Cryptographer", "company_name": "Bell Labs", "tags": ["us"]})).await;
    app.create_prospect(json!({"first_name": "100%_real", "tags": []}))
        .await;

    let names = |page: &Value| -> Vec<String> {
        let mut names: Vec<String> = page["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|item| item["first_name"].as_str().expect("name").to_owned())
            .collect();
        names.sort();
        names
    };
    let page = app
        .get("/prospects?q=bletchley", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(names(&page), ["Alan", "Joan"]);
    let page = app
        .get("/prospects?q=TURING", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(names(&page), ["Alan"], "q is case-insensitive");
    let page = app
        .get("/prospects?q=crypto", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(
        names(&page),
        ["Claude"],
        "q searches the title, not the tags"
    );
    let page = app
        .get("/prospects?tag=crypto", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(names(&page), ["Alan", "Joan"]);
    assert_eq!(page["total"], json!(2));
    let page = app
        .get("/prospects?tag=crypto&q=clarke", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(names(&page), ["Joan"], "filters combine");
    let page = app
        .get("/prospects?tag=Crypto", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(page["total"], json!(0), "tags match exactly");
    let page = app
        .get("/prospects?q=%25", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(names(&page), ["100%_real"], "`%` is matched literally");
    let page = app
        .get("/prospects?q=_", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(names(&page), ["100%_real"], "`_` is matched literally");

    // Updating the tags moves the prospect between tag filters.
    let alan = app.get("/prospects?q=turing", &app.key).await.expect(200)["items"][0].clone();
    app.patch_json(
        &format!("/prospects/{}", alan["id"].as_str().expect("id")),
        &app.key,
        json!({"tags": ["retired"]}),
    )
    .await
    .expect(200);
    assert_eq!(
        names(app.get("/prospects?tag=crypto", &app.key).await.expect(200)),
        ["Joan"]
    );
    assert_eq!(
        names(
            app.get("/prospects?tag=retired", &app.key)
                .await
                .expect(200)
        ),
        ["Alan"]
    );

    // Deleting removes it from the tag filter too.
    app.delete(
        &format!("/prospects/{}", alan["id"].as_str().expect("id")),
        &app.key,
    )
    .await
    .expect(200);
    assert_eq!(
        app.get("/prospects?tag=retired", &app.key)
            .await
            .expect(200)["total"],
        json!(0)
    );
}

#[tokio::test]
async fn field_limits_are_enforced_with_a_sentence_naming_the_field() {
    let app = spawn_app().await;
    let cases = [
        (json!({"first_name": "x".repeat(501)}), "first_name"),
        (json!({"first_name": "A", "email": "not-an-email"}), "email"),
        (
            json!({"first_name": "A", "company_domain": "acme"}),
            "company_domain",
        ),
        (json!({"first_name": "A", "tags": [""]}), "tags"),
        (
            json!({"first_name": "A", "tags": ["t".repeat(65)]}),
            "longer than 64",
        ),
        (
            json!({"first_name": "A", "tags": (0..51).map(|i| format!("t{i}")).collect::<Vec<_>>()}),
            "50",
        ),
        (
            json!({"first_name": "A", "custom_fields": {"": 1}}),
            "custom_fields",
        ),
        (
            json!({"first_name": "A", "company_size": -4}),
            "company_size",
        ),
    ];
    for (body, needle) in cases {
        let message = app
            .post_json("/prospects", &app.key, body.clone())
            .await
            .expect_error(400, "invalid_request")
            .to_owned();
        assert!(message.contains(needle), "{body}: {message}");
    }
    assert_eq!(app.prospect_count().await, 0);
}

/// The unfiltered total is a counter kept beside the prospects; it must equal `count(*)` after
/// every writer (create, import, delete), and other workspaces' prospects never move it.
#[tokio::test]
async fn totals_follow_every_writer() {
    let app = spawn_app().await;
    let count = || async {
        let row = sqlx::query("select count(*) from prospects where workspace_id = $1")
            .bind(&app.workspace_id)
            .fetch_one(app.db.pool())
            .await
            .expect("count");
        sqlx::Row::get::<i64, _>(&row, 0)
    };
    let total = || async { app.get("/prospects?limit=1", &app.key).await.body["total"].clone() };

    assert_eq!(total().await, json!(0));
    let mut ids = Vec::new();
    for name in ["Ada", "Grace", "Edsger"] {
        let made = app
            .post_json("/prospects", &app.key, json!({"first_name": name}))
            .await;
        ids.push(made.expect(201)["id"].as_str().expect("id").to_owned());
    }
    assert_eq!(total().await, json!(3));

    app.grant_credits(100).await;
    let rows: Vec<Value> = (0..5)
        .map(|n| json!({"first_name": format!("Imported {n}"), "email": format!("i{n}@example.test")}))
        .collect();
    app.post_json("/imports", &app.key, json!({"rows": rows}))
        .await
        .expect(200);
    assert_eq!(total().await, json!(8));

    // A refused create (duplicate email) and a failed delete move nothing.
    let duplicate = app
        .post_json("/prospects", &app.key, json!({"email": "i0@example.test"}))
        .await;
    assert_eq!(duplicate.status.as_u16(), 409, "{}", duplicate.body);
    app.delete("/prospects/prs_00000000000NoSuchOne", &app.key)
        .await;
    app.delete(&format!("/prospects/{}", ids[0]), &app.key)
        .await
        .expect(200);
    assert_eq!(total().await, json!(7));
    assert_eq!(count().await, 7);

    let (_, other_key) = app.other_workspace("Other", "other@else.test").await;
    app.post_json("/prospects", &other_key, json!({"first_name": "Else"}))
        .await
        .expect(201);
    assert_eq!(total().await, json!(7));
    assert_eq!(
        app.get("/prospects?limit=1", &other_key).await.body["total"],
        json!(1)
    );
}

/// Pages past the middle are read from the other end and turned around: walking every page
/// forward gives exactly the one-page listing, for each sort, filtered or not.
#[tokio::test]
async fn every_page_of_every_order_matches_the_whole_listing() {
    let app = spawn_app().await;
    for n in 0..23 {
        let made = app
            .post_json(
                "/prospects",
                &app.key,
                json!({"first_name": format!("P{n:02}"), "tags": if n % 3 == 0 { vec!["three"] } else { vec![] }}),
            )
            .await;
        made.expect(201);
    }
    for query in [
        "sort=created_at&order=desc",
        "sort=created_at&order=asc",
        "sort=updated_at&order=desc",
        "sort=score&order=desc",
        "sort=score&order=asc&tag=three",
        "tag=three",
        "q=p1",
    ] {
        let whole = app
            .get(&format!("/prospects?{query}&limit=200"), &app.key)
            .await;
        let whole = whole.body["items"].as_array().expect("items").clone();
        for limit in [1, 4, 5, 7] {
            let mut walked = Vec::new();
            let mut offset = 0;
            loop {
                let page = app
                    .get(
                        &format!("/prospects?{query}&limit={limit}&offset={offset}"),
                        &app.key,
                    )
                    .await;
                let body = &page.body;
                assert_eq!(
                    body["total"].as_u64(),
                    Some(whole.len() as u64),
                    "{query}: {body}"
                );
                walked.extend(body["items"].as_array().expect("items").iter().cloned());
                match body["next_offset"].as_u64() {
                    Some(next) => offset = next,
                    None => break,
                }
            }
            let ids = |items: &[Value]| {
                items
                    .iter()
                    .map(|item| item["id"].clone())
                    .collect::<Vec<_>>()
            };
            assert_eq!(ids(&walked), ids(&whole), "{query} with limit {limit}");
        }
        // Past the end: an empty page with the total.
        let beyond = app
            .get(&format!("/prospects?{query}&offset=500"), &app.key)
            .await;
        assert_eq!(beyond.body["count"], json!(0), "{query}");
        assert_eq!(beyond.body["has_more"], json!(false), "{query}");
    }
}
