//! Workspace isolation: a credential sees only its own workspace. Another workspace's objects
//! answer 404 exactly as objects that do not exist, so ids cannot be probed.

use serde_json::json;

use crate::helpers::spawn_app;

#[tokio::test]
async fn a_key_of_one_workspace_gets_404_for_every_prospect_of_another() {
    let app = spawn_app().await;
    let own = app
        .create_prospect(json!({"first_name": "Own", "profile_url": "linkedin.com/in/shared"}))
        .await;
    let (_, other_key) = app.other_workspace("Globex", "owner@globex.test").await;

    let mut theirs = Vec::new();
    for index in 0..3 {
        let body = json!({"first_name": format!("Theirs{index}"), "tags": ["secret"], "profile_url": format!("linkedin.com/in/theirs-{index}")});
        let created = app
            .post_json("/prospects", &other_key, body)
            .await
            .expect(201)
            .clone();
        theirs.push(created);
    }
    // The same profile URL may exist once per workspace.
    app.post_json(
        "/prospects",
        &other_key,
        json!({"first_name": "Twin", "profile_url": "https://linkedin.com/in/shared"}),
    )
    .await
    .expect(201);

    for prospect in &theirs {
        let id = prospect["id"].as_str().expect("id");
        let path = format!("/prospects/{id}");
        let message = app
            .get(&path, &app.key)
            .await
            .expect_error(404, "not_found")
            .to_owned();
        assert!(message.contains(id), "{message}");
        app.patch_json(&path, &app.key, json!({"first_name": "Hijacked"}))
            .await
            .expect_error(404, "not_found");
        app.delete(&path, &app.key)
            .await
            .expect_error(404, "not_found");
        for tool in ["service_get_prospect", "service_delete_prospect"] {
            let (is_error, body) = app.mcp_call(&app.key, tool, json!({"id": id})).await;
            assert!(is_error, "{tool}: {body}");
            assert_eq!(body["code"], json!("not_found"));
        }
        let (is_error, body) = app
            .mcp_call(
                &app.key,
                "service_update_prospect",
                json!({"id": id, "title": "x"}),
            )
            .await;
        assert!(is_error && body["code"] == json!("not_found"), "{body}");

        // Untouched in its own workspace.
        let still = app.get(&path, &other_key).await.expect(200).clone();
        assert_eq!(&still, prospect);
    }

    // A foreign id answers exactly like an id that never existed.
    let foreign = app
        .get(
            &format!("/prospects/{}", theirs[0]["id"].as_str().expect("id")),
            &app.key,
        )
        .await;
    let missing = app
        .get("/prospects/prs_0000000000NoSuchOne", &app.key)
        .await;
    assert_eq!(foreign.status, missing.status);
    assert_eq!(foreign.code(), missing.code());

    let list = app
        .get("/prospects?limit=200", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(list["total"], json!(1));
    assert_eq!(list["items"][0]["id"], own["id"]);
    for filter in ["tag=secret", "q=theirs"] {
        let filtered = app
            .get(&format!("/prospects?{filter}"), &app.key)
            .await
            .expect(200)
            .clone();
        assert_eq!(filtered["total"], json!(0), "{filter}: {filtered}");
    }
    let list = app
        .get("/prospects?limit=200", &other_key)
        .await
        .expect(200)
        .clone();
    assert_eq!(list["total"], json!(4));
    assert!(
        list["items"]
            .as_array()
            .expect("items")
            .iter()
            .all(|item| item["id"] != own["id"])
    );
}

#[tokio::test]
async fn each_key_sees_its_own_workspace() {
    let app = spawn_app().await;
    let (other_id, other_key) = app.other_workspace("Globex", "owner@globex.test").await;
    let mine = app.get("/workspace", &app.key).await.expect(200).clone();
    let theirs = app.get("/workspace", &other_key).await.expect(200).clone();
    assert_eq!(mine["workspace"]["id"], json!(app.workspace_id));
    assert_eq!(theirs["workspace"]["id"], json!(other_id));
    assert_eq!(theirs["workspace"]["name"], json!("Globex"));
    assert_ne!(mine["caller"]["person_id"], theirs["caller"]["person_id"]);
}
