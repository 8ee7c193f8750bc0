//! Lists: create, read, rename, delete; members added and removed with every id accounted for.

use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};

const MISSING_PROSPECT: &str = "prs_00000000000NoSuchOne";
const MISSING_LIST: &str = "lst_00000000000NoSuchOne";

fn id(value: &Value) -> String {
    value["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {value}"))
        .to_owned()
}

async fn prospect(app: &TestApp, name: &str) -> String {
    id(&app
        .create_prospect(
            json!({"first_name": name, "email": format!("{}@acme.test", name.to_lowercase())}),
        )
        .await)
}

#[tokio::test]
async fn a_list_is_created_read_renamed_and_deleted() {
    let app = spawn_app().await;
    let created = app
        .post_json(
            "/lists",
            &app.key,
            json!({"name": "  Expo leads ", "description": "Met at the expo"}),
        )
        .await
        .expect(201)
        .clone();
    let list_id = id(&created);
    assert!(
        list_id.starts_with("lst_") && list_id.len() == 24,
        "{list_id}"
    );
    assert_eq!(created["name"], json!("Expo leads"), "names are trimmed");
    assert_eq!(created["description"], json!("Met at the expo"));
    assert_eq!(created["size"], json!(0));
    assert_eq!(created["processing_status"], json!("idle"));
    assert_eq!(created["processed_at"], Value::Null);
    assert_eq!(created["default_targeting_id"], Value::Null);
    assert_eq!(created["created_at"], created["updated_at"]);
    assert_eq!(
        app.get(&format!("/lists/{list_id}"), &app.key)
            .await
            .expect(200),
        &created
    );

    let duplicate = app
        .post_json("/lists", &app.key, json!({"name": "Expo leads"}))
        .await;
    let message = duplicate.expect_error(409, "conflict");
    assert!(message.contains("Expo leads"), "{message}");
    assert_eq!(duplicate.body["existing_id"], json!(list_id));
    app.post_json("/lists", &app.key, json!({"name": "  "}))
        .await
        .expect_error(400, "invalid_request");
    app.post_json("/lists", &app.key, json!({"name": "x".repeat(201)}))
        .await
        .expect_error(400, "invalid_request");

    // A default targeting must exist; PATCH keeps what is absent and clears what is null.
    let targeting = app
        .post_json(
            "/targetings",
            &app.key,
            json!({"name": "ICP", "criteria": {"seniorities": [{"value": "vp", "points": 10}]}}),
        )
        .await
        .expect(201)
        .clone();
    let unknown = app
        .patch_json(
            &format!("/lists/{list_id}"),
            &app.key,
            json!({"default_targeting_id": "tgt_00000000000NoSuchOne"}),
        )
        .await;
    assert!(unknown.expect_error(404, "not_found").contains("targeting"));
    app.clock.advance_ms(5);
    let updated = app
        .patch_json(
            &format!("/lists/{list_id}"),
            &app.key,
            json!({"name": "Expo 2026", "description": null, "default_targeting_id": id(&targeting)}),
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(updated["name"], json!("Expo 2026"));
    assert_eq!(updated["description"], Value::Null, "null clears");
    assert_eq!(updated["default_targeting_id"], json!(id(&targeting)));
    assert_ne!(updated["updated_at"], created["updated_at"]);
    let kept = app
        .patch_json(&format!("/lists/{list_id}"), &app.key, json!({}))
        .await
        .expect(200)
        .clone();
    assert_eq!(kept["name"], json!("Expo 2026"), "absent keeps");
    assert_eq!(
        kept["default_targeting_id"],
        json!(id(&targeting)),
        "absent keeps"
    );
    let with_target = app
        .post_json(
            "/lists",
            &app.key,
            json!({"name": "Targeted", "default_targeting_id": id(&targeting)}),
        )
        .await
        .expect(201)
        .clone();
    assert_eq!(with_target["default_targeting_id"], json!(id(&targeting)));
    app.post_json(
        "/lists",
        &app.key,
        json!({"name": "Bad target", "default_targeting_id": "tgt_00000000000NoSuchOne"}),
    )
    .await
    .expect_error(404, "not_found");
    // Renaming onto another list's name is a conflict naming it.
    let clash = app
        .patch_json(
            &format!("/lists/{list_id}"),
            &app.key,
            json!({"name": "Targeted"}),
        )
        .await;
    clash.expect_error(409, "conflict");
    assert_eq!(clash.body["existing_id"], json!(id(&with_target)));

    // `q` filters by name, case-insensitively; newest first.
    let all = app.get("/lists", &app.key).await.expect(200).clone();
    assert_eq!(all["total"], json!(2));
    assert_eq!(all["items"][0]["id"], json!(id(&with_target)));
    let found = app.get("/lists?q=EXPO", &app.key).await.expect(200).clone();
    assert_eq!(found["total"], json!(1));
    assert_eq!(found["items"][0]["id"], json!(list_id));
    assert_eq!(
        app.get("/lists?q=100%25", &app.key).await.expect(200)["total"],
        json!(0),
        "wildcards are literal"
    );

    // Deleting a list keeps its prospects.
    let member = prospect(&app, "Ada").await;
    app.post_json(
        &format!("/lists/{list_id}/prospects"),
        &app.key,
        json!({"prospect_ids": [member]}),
    )
    .await
    .expect(200);
    let deleted = app
        .delete(&format!("/lists/{list_id}"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(deleted, json!({"id": list_id, "deleted": true}));
    app.get(&format!("/lists/{list_id}"), &app.key)
        .await
        .expect_error(404, "not_found");
    app.delete(&format!("/lists/{list_id}"), &app.key)
        .await
        .expect_error(404, "not_found");
    app.get(&format!("/prospects/{member}"), &app.key)
        .await
        .expect(200);
    app.get("/lists/not-an-id", &app.key)
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn members_are_added_and_removed_and_every_id_not_applied_is_reported() {
    let app = spawn_app().await;
    let list_id = id(app
        .post_json("/lists", &app.key, json!({"name": "Leads"}))
        .await
        .expect(201));
    let (ada, grace, alan) = (
        prospect(&app, "Ada").await,
        prospect(&app, "Grace").await,
        prospect(&app, "Alan").await,
    );
    let (_, other_key) = app.other_workspace("Other", "owner@other.test").await;
    let foreign = id(app
        .post_json("/prospects", &other_key, json!({"first_name": "Eve"}))
        .await
        .expect(201));
    let path = format!("/lists/{list_id}/prospects");

    let first = app
        .post_json(
            &path,
            &app.key,
            json!({"prospect_ids": [ada, grace, ada, foreign, MISSING_PROSPECT, "garbage"]}),
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(first["added"], json!(2));
    assert_eq!(first["already_in_list"], json!(0));
    assert_eq!(
        first["unknown_ids"],
        json!([foreign, MISSING_PROSPECT, "garbage"]),
        "other workspaces' ids are unknown"
    );
    assert_eq!(first["list"]["size"], json!(2));

    app.clock.advance_ms(5);
    let second = app
        .post_json(&path, &app.key, json!({"prospect_ids": [ada, alan]}))
        .await
        .expect(200)
        .clone();
    assert_eq!(
        (second["added"].clone(), second["already_in_list"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(second["unknown_ids"], json!([]));
    assert_eq!(second["list"]["size"], json!(3));

    // Newest added first; items are whole prospects.
    let page = app
        .get(&format!("{path}?limit=1"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(page["total"], json!(3));
    assert_eq!(page["has_more"], json!(true));
    assert_eq!(page["items"][0]["id"], json!(alan));
    assert_eq!(page["items"][0]["email"], json!("alan@acme.test"));
    let rest = app
        .get(&format!("{path}?limit=5&offset=1"), &app.key)
        .await
        .expect(200)
        .clone();
    let mut ids: Vec<Value> = rest["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|item| item["id"].clone())
        .collect();
    ids.sort_by_key(Value::to_string);
    let mut expected = vec![json!(ada), json!(grace)];
    expected.sort_by_key(Value::to_string);
    assert_eq!(ids, expected);

    let removed = app
        .post_json(
            &format!("{path}/remove"),
            &app.key,
            json!({"prospect_ids": [grace, MISSING_PROSPECT, grace]}),
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(removed["removed"], json!(1));
    assert_eq!(removed["not_in_list"], json!([MISSING_PROSPECT]));
    assert_eq!(removed["list"]["size"], json!(2));
    app.get(&format!("/prospects/{grace}"), &app.key)
        .await
        .expect(200);

    // A deleted prospect leaves every list.
    app.delete(&format!("/prospects/{ada}"), &app.key)
        .await
        .expect(200);
    assert_eq!(
        app.get(&format!("/lists/{list_id}"), &app.key)
            .await
            .expect(200)["size"],
        json!(1)
    );

    // Bounds and unknown lists.
    let empty = app
        .post_json(&path, &app.key, json!({"prospect_ids": []}))
        .await;
    assert!(
        empty
            .expect_error(400, "invalid_request")
            .contains("prospect_ids")
    );
    let too_many: Vec<String> = (0..1001).map(|n| format!("prs_{n:020}")).collect();
    let over = app
        .post_json(&path, &app.key, json!({"prospect_ids": too_many}))
        .await;
    assert!(over.expect_error(400, "invalid_request").contains("1000"));
    app.post_json(
        &format!("/lists/{MISSING_LIST}/prospects"),
        &app.key,
        json!({"prospect_ids": [alan]}),
    )
    .await
    .expect_error(404, "not_found");
    app.get(&format!("/lists/{MISSING_LIST}/prospects"), &app.key)
        .await
        .expect_error(404, "not_found");

    // Another workspace sees none of it.
    app.get(&format!("/lists/{list_id}"), &other_key)
        .await
        .expect_error(404, "not_found");
    app.post_json(&path, &other_key, json!({"prospect_ids": [foreign]}))
        .await
        .expect_error(404, "not_found");
    assert_eq!(
        app.get("/lists", &other_key).await.expect(200)["total"],
        json!(0)
    );
}
