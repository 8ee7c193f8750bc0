//! Imports: estimates, dedupe, row-level errors, exact spending, idempotent retries and replays,
//! concurrency against the balance, and bad input that changes nothing.

use outreach_runtime::credits::Source;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::helpers::{ApiResponse, Auth, Body, TestApp, spawn_app};

/// Seven rows: three new, one matching the workspace's prospect, one repeating row 1, and two
/// invalid ones (row 5 has no name, URL or email; row 6 has a malformed email).
const CSV: &str = "\
First Name,Last Name,Company,Job Title,LinkedIn URL,E-mail,Tags,Favourite Colour
Ada,Lovelace,Engines,CTO,https://www.linkedin.com/in/ada/,ada@engines.test,vip; math,green
Grace,Hopper,Navy,Admiral,linkedin.com/in/grace,,,blue
Alan,Turing,Bletchley,Researcher,https://linkedin.com/in/existing/,,,
Ada,L,Engines,,http://linkedin.com/in/ada?utm=x,,,
,,Nameless,Ghost,,,,
Bob,,Acme,,,bob@,,
Katherine,Johnson,NASA,,,katherine@nasa.test,,
";

async fn grant(app: &TestApp, amount: i64) {
    outreach_runtime::credits::grant(
        &app.db,
        &app.clock,
        &app.workspace_id,
        amount,
        &Source::default(),
    )
    .await
    .expect("grant credits");
}

async fn balance(app: &TestApp) -> i64 {
    app.get("/workspace", &app.key).await.expect(200)["workspace"]["credits_balance"]
        .as_i64()
        .expect("a balance")
}

/// The whole ledger, newest first.
async fn ledger(app: &TestApp) -> Vec<Value> {
    let mut entries = Vec::new();
    let mut offset = 0;
    loop {
        let page = app
            .get(
                &format!("/credits/transactions?limit=200&offset={offset}"),
                &app.key,
            )
            .await
            .expect(200)
            .clone();
        entries.extend(page["items"].as_array().cloned().unwrap_or_default());
        match page["next_offset"].as_u64() {
            Some(next) => offset = next,
            None => return entries,
        }
    }
}

fn sum(entries: &[Value], kind: &str) -> i64 {
    entries
        .iter()
        .filter(|entry| entry["kind"] == json!(kind))
        .map(|entry| entry["amount"].as_i64().unwrap_or(0))
        .sum()
}

/// The workspace's prospect that row 3 of [`CSV`] matches.
async fn existing_prospect(app: &TestApp) -> String {
    let created = app
        .create_prospect(json!({"first_name": "Alan", "title": "Mathematician", "profile_url": "linkedin.com/in/existing"}))
        .await;
    created["id"].as_str().expect("an id").to_owned()
}

/// `POST /api/v1/imports`, with an `Idempotency-Key` when given.
async fn post_import(
    client: &reqwest::Client,
    base_url: &str,
    key: &str,
    idempotency_key: Option<&str>,
    body: &Value,
) -> ApiResponse {
    let mut request = client
        .post(format!("{base_url}/api/v1/imports"))
        .bearer_auth(key)
        .json(body);
    if let Some(idempotency_key) = idempotency_key {
        request = request.header("idempotency-key", idempotency_key);
    }
    let response = request.send().await.expect("send the import");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("read the body");
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    crate::helpers::assert_canonical(&body, &bytes);
    ApiResponse {
        status,
        headers,
        body,
        raw: bytes.to_vec(),
    }
}

async fn import(
    app: &TestApp,
    key: &str,
    idempotency_key: Option<&str>,
    body: Value,
) -> ApiResponse {
    post_import(&app.client, &app.base_url, key, idempotency_key, &body).await
}

async fn import_count(app: &TestApp) -> u64 {
    app.get("/imports?limit=1", &app.key).await.expect(200)["total"]
        .as_u64()
        .expect("a total")
}

#[tokio::test]
async fn an_estimate_with_a_read_key_prices_the_import_and_spends_nothing() {
    let app = spawn_app().await;
    grant(&app, 10).await;
    existing_prospect(&app).await;
    // The same profile URL in another workspace is no duplicate here.
    let (_, other_key) = app.other_workspace("Other", "owner@other.test").await;
    app.post_json(
        "/prospects",
        &other_key,
        json!({"profile_url": "linkedin.com/in/grace"}),
    )
    .await
    .expect(201);
    let read_key = app.read_key().await;

    let estimate = import(
        &app,
        &read_key,
        None,
        json!({"csv": CSV, "estimate_only": true}),
    )
    .await
    .expect(200)
    .clone();
    assert_eq!(
        estimate,
        json!({
            "estimate": true,
            "price": 3,
            "breakdown": [{"item": "import.prospect", "quantity": 3, "unit_price": 1, "amount": 3}],
            "details": {"rows": 7, "new": 3, "duplicates": 2, "invalid": 2, "warnings": [
                "Column `Favourite Colour` is not a prospect field; it was kept in `custom_fields.Favourite Colour`."
            ]},
            "balance": 10,
            "sufficient": true,
        })
    );
    let real = import(&app, &read_key, Some("read-only"), json!({"csv": CSV})).await;
    real.expect_error(403, "insufficient_scope");

    assert_eq!(app.prospect_count().await, 1);
    assert_eq!(balance(&app).await, 10);
    assert_eq!(ledger(&app).await.len(), 1, "only the grant");
    assert_eq!(import_count(&app).await, 0);
    // The refused call stored nothing under its key: a write key may use it now.
    import(&app, &app.key, Some("read-only"), json!({"csv": CSV}))
        .await
        .expect(200);
}

#[tokio::test]
async fn an_import_creates_dedupes_reports_invalid_rows_and_spends_exactly_what_it_created() {
    let app = spawn_app().await;
    grant(&app, 10).await;
    let existing = existing_prospect(&app).await;

    let outcome = import(&app, &app.key, Some("first-import"), json!({"csv": CSV}))
        .await
        .expect(200)
        .clone();
    let import_id = outcome["id"].as_str().expect("an id").to_owned();
    assert!(import_id.starts_with("imp_"), "{import_id}");
    assert_eq!(outcome["status"], json!("completed"));
    assert_eq!(outcome["source_format"], json!("csv"));
    assert_eq!(outcome["on_duplicate"], json!("skip"));
    assert_eq!(
        (
            &outcome["rows"],
            &outcome["created"],
            &outcome["updated"],
            &outcome["duplicates"],
            &outcome["invalid"]
        ),
        (&json!(7), &json!(3), &json!(0), &json!(2), &json!(2))
    );
    let errors = outcome["errors"].as_array().cloned().unwrap_or_default();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(
        (&errors[0]["row"], &errors[0]["field"]),
        (&json!(5), &Value::Null)
    );
    assert_eq!(
        (&errors[1]["row"], &errors[1]["field"]),
        (&json!(6), &json!("email"))
    );
    assert!(
        errors[1]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("bob@"),
        "{errors:?}"
    );
    assert_eq!(outcome["credits_spent"], json!(3));

    // Spent exactly created x unit: one spend of 3, nothing to release, and the ledger explains
    // the balance.
    assert_eq!(balance(&app).await, 7);
    let entries = ledger(&app).await;
    let spends: Vec<&Value> = entries
        .iter()
        .filter(|entry| entry["kind"] == json!("spend"))
        .collect();
    assert_eq!(spends.len(), 1);
    assert_eq!(spends[0]["amount"], json!(-3));
    assert_eq!(spends[0]["action"], json!("import_prospects"));
    assert_eq!(spends[0]["object_id"], json!(import_id));
    assert_eq!(spends[0]["idempotency_key"], json!("first-import"));
    assert_eq!(sum(&entries, "release"), 0);
    assert_eq!(
        sum(&entries, "grant") + sum(&entries, "spend") + sum(&entries, "release"),
        7
    );

    // The prospects: normalised, tagged, with unknown columns as custom fields.
    assert_eq!(app.prospect_count().await, 4);
    let ada = app.get("/prospects?q=lovelace", &app.key).await.expect(200)["items"][0].clone();
    assert_eq!(ada["profile_url"], json!("linkedin.com/in/ada"));
    assert_eq!(ada["title"], json!("CTO"));
    assert_eq!(ada["tags"], json!(["vip", "math"]));
    assert_eq!(ada["custom_fields"], json!({"Favourite Colour": "green"}));
    assert_eq!(ada["source"], json!("import"));
    let tagged = app
        .get("/prospects?tag=math", &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(
        tagged["total"],
        json!(1),
        "the tag filter sees imported tags"
    );
    let alan = app
        .get(&format!("/prospects/{existing}"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(
        alan["title"],
        json!("Mathematician"),
        "`skip` leaves duplicates alone"
    );

    // The outcome is kept.
    assert_eq!(
        app.get(&format!("/imports/{import_id}"), &app.key)
            .await
            .expect(200),
        &outcome
    );
    let listed = app.get("/imports", &app.key).await.expect(200).clone();
    assert_eq!(listed["total"], json!(1));
    assert_eq!(listed["items"][0], outcome);
    app.get("/imports/imp_00000000000NoSuchOne", &app.key)
        .await
        .expect_error(404, "not_found");

    // The same file again: everything is a duplicate and free.
    let again = import(&app, &app.key, None, json!({"csv": CSV}))
        .await
        .expect(200)
        .clone();
    assert_eq!(
        (
            &again["created"],
            &again["duplicates"],
            &again["credits_spent"]
        ),
        (&json!(0), &json!(5), &json!(0))
    );
    assert_eq!(balance(&app).await, 7);
}

#[tokio::test]
async fn json_rows_with_update_fill_and_overwrite_existing_prospects() {
    let app = spawn_app().await;
    grant(&app, 10).await;
    let existing = existing_prospect(&app).await;
    let body = json!({
        "on_duplicate": "update",
        "rows": [
            {"full_name": "Alan Mathison Turing", "title": "Codebreaker", "profile_url": "https://linkedin.com/in/existing",
             "email": "alan@bletchley.test", "tags": ["enigma"], "custom_fields": {"era": "ww2"}},
            {"email": "alan@bletchley.test", "company_size": 9000},
            {"first_name": "Joan", "last_name": "Clarke", "email": "joan@bletchley.test"},
            {"email": "JOAN@bletchley.test", "title": "Cryptanalyst"},
            {"first_name": "Nobody", "email": "nobody"},
        ],
    });
    let outcome = import(&app, &app.key, None, body).await.expect(200).clone();
    assert_eq!(
        (
            &outcome["rows"],
            &outcome["created"],
            &outcome["updated"],
            &outcome["duplicates"],
            &outcome["invalid"]
        ),
        (&json!(5), &json!(1), &json!(1), &json!(3), &json!(1))
    );
    assert_eq!(
        outcome["errors"],
        json!([{"row": 5, "field": "email", "message": "`email` must be an email address; got `nobody`."}])
    );
    assert_eq!(outcome["source_format"], json!("rows"));
    assert_eq!(outcome["credits_spent"], json!(1));
    assert_eq!(balance(&app).await, 9);

    let alan = app
        .get(&format!("/prospects/{existing}"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(alan["first_name"], json!("Alan"));
    assert_eq!(alan["last_name"], json!("Mathison Turing"));
    assert_eq!(
        alan["title"],
        json!("Codebreaker"),
        "given values overwrite"
    );
    assert_eq!(
        alan["email"],
        json!("alan@bletchley.test"),
        "an empty email is filled"
    );
    assert_eq!(
        alan["company_size"],
        json!(9000),
        "a row matched by the filled email updates the same prospect"
    );
    assert_eq!(alan["tags"], json!(["enigma"]));
    assert_eq!(alan["custom_fields"], json!({"era": "ww2"}));
    let joan = app.get("/prospects?q=clarke", &app.key).await.expect(200)["items"][0].clone();
    assert_eq!(
        joan["title"],
        json!("Cryptanalyst"),
        "a later row of the file merges into the one it repeats"
    );
    assert_eq!(app.prospect_count().await, 2);
}

/// The import writes its new prospects a batch at a time (1,000 per insert) on its second read
/// of the file; a row near the end that repeats the first one must still reach it, and an
/// invalid row in between must not shift which row is which.
#[tokio::test]
async fn a_file_of_several_batches_merges_its_last_row_into_its_first() {
    let app = spawn_app().await;
    grant(&app, 6000).await;
    let mut csv = String::from("First Name,Last Name,Title,Email,Tags,Company\n");
    csv.push_str("Ada,Lovelace,Analyst,ada@engine.test,first,\n");
    for i in 2..=2400 {
        if i == 1200 {
            csv.push_str(",,,,,Nameless Ltd\n");
        } else {
            csv.push_str(&format!("Person,{i},,p{i}@engine.test,batch,\n"));
        }
    }
    csv.push_str(",,Countess,ADA@engine.test,engine,\n");
    let outcome = import(
        &app,
        &app.key,
        None,
        json!({"csv": csv, "on_duplicate": "update", "list_name": "Engine"}),
    )
    .await
    .expect(200)
    .clone();
    assert_eq!(
        (
            &outcome["rows"],
            &outcome["created"],
            &outcome["updated"],
            &outcome["duplicates"],
            &outcome["invalid"],
            &outcome["credits_spent"]
        ),
        (
            &json!(2401),
            &json!(2399),
            &json!(0),
            &json!(1),
            &json!(1),
            &json!(2399)
        )
    );
    assert_eq!(outcome["errors"][0]["row"], json!(1200));
    assert_eq!(app.prospect_count().await, 2399);
    let ada = app
        .get("/prospects?email=ada@engine.test", &app.key)
        .await
        .expect(200)["items"][0]
        .clone();
    assert_eq!(ada["last_name"], json!("Lovelace"));
    assert_eq!(
        ada["title"],
        json!("Countess"),
        "the last row merged into the first"
    );
    assert_eq!(ada["tags"], json!(["first", "engine"]));
    let tagged = |tag: &'static str| {
        let app = &app;
        async move {
            app.get(&format!("/prospects?tag={tag}&limit=1"), &app.key)
                .await
                .expect(200)["total"]
                .clone()
        }
    };
    assert_eq!(tagged("engine").await, json!(1), "a merged tag is written");
    assert_eq!(tagged("batch").await, json!(2398));
    let person = app
        .get("/prospects?email=p2400@engine.test", &app.key)
        .await
        .expect(200)["items"][0]
        .clone();
    assert_eq!(
        person["last_name"],
        json!("2400"),
        "the last batch is written"
    );
    let list = app
        .get(
            &format!("/lists/{}", outcome["list_id"].as_str().unwrap()),
            &app.key,
        )
        .await
        .expect(200)
        .clone();
    assert_eq!(list["size"], json!(2399));
    assert_eq!(balance(&app).await, 6000 - 2399);

    // Again with the merge into a prospect made after the first 1,000 were written: the batch
    // goes mid-file, and the prospect waits for its later row.
    let mut csv = String::from("First Name,Last Name,Title,Email,Tags\n");
    for i in 1..=2500 {
        if i == 1500 {
            csv.push_str("Bea,Byron,,bea@engine.test,b\n");
        } else if i == 2200 {
            csv.push_str(",,Engineer,BEA@engine.test,late\n");
        } else {
            csv.push_str(&format!("Quinn,{i},,q{i}@engine.test,\n"));
        }
    }
    let outcome = import(
        &app,
        &app.key,
        None,
        json!({"csv": csv, "on_duplicate": "update"}),
    )
    .await
    .expect(200)
    .clone();
    assert_eq!(
        (
            &outcome["created"],
            &outcome["duplicates"],
            &outcome["updated"]
        ),
        (&json!(2499), &json!(1), &json!(0))
    );
    let bea = app
        .get("/prospects?email=bea@engine.test", &app.key)
        .await
        .expect(200)["items"][0]
        .clone();
    assert_eq!(
        (&bea["last_name"], &bea["title"]),
        (&json!("Byron"), &json!("Engineer"))
    );
    assert_eq!(bea["tags"], json!(["b", "late"]));
    for i in [1, 1000, 1001, 2500] {
        let quinn = app
            .get(&format!("/prospects?email=q{i}@engine.test"), &app.key)
            .await
            .expect(200)["items"][0]
            .clone();
        assert_eq!(quinn["last_name"], json!(i.to_string()), "row {i}");
    }
    assert_eq!(app.prospect_count().await, 2399 + 2499);
    assert_eq!(balance(&app).await, 6000 - 2399 - 2499);
}

/// The import binds and writes its new prospects 1,000 at a time, each batch beside the insert
/// of the one before. Exactly 2,000 new prospects: the last read of the file finds none left to
/// write. A do-not-contact mark and tags in the second batch are written with it, and the
/// workspace's count of prospects (`total`) holds every one.
#[tokio::test]
async fn an_import_of_exactly_two_batches_writes_every_prospect_mark_and_tag() {
    let app = spawn_app().await;
    grant(&app, 2000).await;
    let rows: Vec<Value> = (1..=2000)
        .map(|i| {
            if i == 1500 {
                json!({"first_name": "Dana", "last_name": i.to_string(), "email": format!("d{i}@batch.test"),
                       "tags": ["late"], "do_not_contact": true})
            } else {
                json!({"first_name": "Pat", "last_name": i.to_string(), "email": format!("p{i}@batch.test")})
            }
        })
        .collect();
    let outcome = import(&app, &app.key, None, json!({"rows": rows}))
        .await
        .expect(200)
        .clone();
    assert_eq!(
        (&outcome["created"], &outcome["credits_spent"]),
        (&json!(2000), &json!(2000)),
        "{outcome}"
    );
    assert_eq!(app.prospect_count().await, 2000);
    let listed = app.get("/prospects?limit=1", &app.key).await;
    assert_eq!(listed.expect(200)["total"], json!(2000));
    let dana = app
        .get("/prospects?email=d1500@batch.test", &app.key)
        .await
        .expect(200)["items"][0]
        .clone();
    assert_eq!(
        (&dana["do_not_contact"], &dana["tags"]),
        (&json!(true), &json!(["late"])),
        "{dana}"
    );
    let last = app
        .get("/prospects?email=p2000@batch.test", &app.key)
        .await
        .expect(200)["items"][0]
        .clone();
    assert_eq!(
        last["last_name"],
        json!("2000"),
        "the last batch is written"
    );
    assert_eq!(balance(&app).await, 0);
}

#[tokio::test]
async fn imports_fill_a_list_by_id_or_by_name() {
    let app = spawn_app().await;
    grant(&app, 100).await;
    existing_prospect(&app).await;

    let first = import(
        &app,
        &app.key,
        None,
        json!({"csv": CSV, "list_name": "Expo leads"}),
    )
    .await
    .expect(200)
    .clone();
    assert_eq!(first["list_created"], json!(true));
    let list_id = first["list_id"].as_str().expect("a list id").to_owned();
    let list = app
        .get(&format!("/lists/{list_id}"), &app.key)
        .await
        .expect(200)
        .clone();
    assert_eq!(list["name"], json!("Expo leads"));
    assert_eq!(
        list["size"],
        json!(4),
        "created and duplicate rows join the list, once each"
    );

    let second = import(
        &app,
        &app.key,
        None,
        json!({"rows": [{"email": "new@acme.test"}, {"profile_url": "linkedin.com/in/ada"}], "list_name": "Expo leads"}),
    )
    .await
    .expect(200)
    .clone();
    assert_eq!(
        (&second["list_id"], &second["list_created"]),
        (&json!(list_id), &json!(false)),
        "an existing name is reused"
    );
    assert_eq!(
        app.get(&format!("/lists/{list_id}"), &app.key)
            .await
            .expect(200)["size"],
        json!(5)
    );

    let other_list = app
        .post_json("/lists", &app.key, json!({"name": "Other"}))
        .await
        .expect(201)["id"]
        .clone();
    let by_id = import(
        &app,
        &app.key,
        None,
        json!({"rows": [{"email": "new@acme.test"}], "list_id": other_list}),
    )
    .await;
    assert_eq!(by_id.expect(200)["list_id"], other_list);
    let members = app
        .get(
            &format!(
                "/lists/{}/prospects",
                other_list.as_str().unwrap_or_default()
            ),
            &app.key,
        )
        .await;
    assert_eq!(
        members.expect(200)["items"][0]["email"],
        json!("new@acme.test")
    );
}

#[tokio::test]
async fn a_short_balance_is_402_and_the_same_key_runs_after_a_grant() {
    let app = spawn_app().await;
    grant(&app, 1).await;
    existing_prospect(&app).await;
    let body = json!({"csv": CSV});

    let refused = import(&app, &app.key, Some("retry-me"), body.clone()).await;
    refused.expect_error(402, "insufficient_credits");
    assert_eq!(
        (&refused.body["price"], &refused.body["balance"]),
        (&json!(3), &json!(1))
    );
    assert_eq!(app.prospect_count().await, 1, "nothing was created");
    assert_eq!(import_count(&app).await, 0);
    assert_eq!(balance(&app).await, 1);

    grant(&app, 5).await;
    let ran = import(&app, &app.key, Some("retry-me"), body).await;
    assert_eq!(ran.header("idempotent-replayed"), None);
    assert_eq!(ran.expect(200)["created"], json!(3));
    assert_eq!(balance(&app).await, 3);
    assert_eq!(app.prospect_count().await, 4);
}

#[tokio::test]
async fn a_replay_returns_the_same_body_and_spends_nothing_and_another_body_is_422() {
    let app = spawn_app().await;
    grant(&app, 10).await;
    let body = json!({"csv": CSV});
    let first = import(&app, &app.key, Some("replay-1"), body.clone()).await;
    assert_eq!(first.header("idempotent-replayed"), None);
    let first = first.expect(200).clone();
    let entries = ledger(&app).await.len();

    let replay = import(&app, &app.key, Some("replay-1"), body.clone()).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.expect(200), &first);
    assert_eq!(balance(&app).await, 6, "four new prospects");
    assert_eq!(ledger(&app).await.len(), entries, "nothing spent again");
    assert_eq!(import_count(&app).await, 1);

    // Over MCP, the same key is the same request.
    let (is_error, replayed) = app
        .mcp_call(
            &app.key,
            "service_import_prospects",
            json!({"csv": CSV, "idempotency_key": "replay-1"}),
        )
        .await;
    assert!(!is_error);
    assert_eq!(replayed, first);

    let other = import(
        &app,
        &app.key,
        Some("replay-1"),
        json!({"csv": CSV, "on_duplicate": "update"}),
    )
    .await;
    other.expect_error(422, "idempotency_key_reused");
    // Whatever is wrong with the other body itself: the key is judged first.
    for invalid in [
        json!({"csv": CSV, "rows": []}),
        json!({"csv": CSV, "on_duplicate": "sometimes"}),
        json!({}),
    ] {
        import(&app, &app.key, Some("replay-1"), invalid)
            .await
            .expect_error(422, "idempotency_key_reused");
    }
    assert_eq!(balance(&app).await, 6, "four new prospects");
    // An estimate never touches the key.
    import(
        &app,
        &app.key,
        Some("replay-1"),
        json!({"csv": CSV, "estimate_only": true}),
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn an_estimate_over_mcp_matches_rest() {
    let app = spawn_app().await;
    grant(&app, 2).await;
    let rest = import(
        &app,
        &app.key,
        None,
        json!({"csv": CSV, "estimate_only": true}),
    )
    .await
    .expect(200)
    .clone();
    let (is_error, mcp) = app
        .mcp_call(
            &app.key,
            "service_import_prospects",
            json!({"csv": CSV, "estimate_only": true}),
        )
        .await;
    assert!(!is_error);
    assert_eq!(mcp, rest);
    assert_eq!(
        rest["sufficient"],
        json!(false),
        "4 new prospects, 2 credits"
    );
    let (is_error, refused) = app
        .mcp_call(&app.key, "service_import_prospects", json!({"csv": CSV}))
        .await;
    assert!(is_error);
    assert_eq!(refused["code"], json!("insufficient_credits"));
}

#[tokio::test]
async fn fifty_concurrent_imports_with_one_key_make_one_import_and_one_spend() {
    let app = spawn_app().await;
    grant(&app, 100).await;
    let body = json!({"csv": CSV});
    let mut tasks = JoinSet::new();
    for _ in 0..50 {
        let (client, base_url, key, body) = (
            app.client.clone(),
            app.base_url.clone(),
            app.key.clone(),
            body.clone(),
        );
        tasks.spawn(
            async move { post_import(&client, &base_url, &key, Some("one-key"), &body).await },
        );
    }
    let mut bodies = Vec::new();
    while let Some(response) = tasks.join_next().await {
        let response = response.expect("the task ran");
        match response.status {
            StatusCode::OK => bodies.push(response.body),
            StatusCode::CONFLICT => assert_eq!(
                response.code(),
                "idempotency_key_in_use",
                "{}",
                response.body
            ),
            other => panic!("unexpected {other}: {}", response.body),
        }
    }
    assert!(!bodies.is_empty());
    assert!(
        bodies.iter().all(|body| *body == bodies[0]),
        "every success is the one import"
    );
    assert_eq!(import_count(&app).await, 1);
    let entries = ledger(&app).await;
    assert_eq!(
        entries
            .iter()
            .filter(|entry| entry["kind"] == json!("spend"))
            .count(),
        1
    );
    assert_eq!(balance(&app).await, 96);
    assert_eq!(app.prospect_count().await, 4);
}

#[tokio::test]
async fn fifty_concurrent_imports_beyond_the_balance_never_overdraw() {
    let app = spawn_app().await;
    grant(&app, 41).await;
    let mut tasks = JoinSet::new();
    for n in 0..50 {
        // Each import prices two new prospects; one of them is shared by all, so every import
        // after the first to commit creates one and releases the other credit.
        let body = json!({"rows": [
            {"profile_url": "linkedin.com/in/shared"},
            {"profile_url": format!("linkedin.com/in/person-{n}")},
        ]});
        let (client, base_url, key) = (app.client.clone(), app.base_url.clone(), app.key.clone());
        tasks.spawn(async move {
            post_import(&client, &base_url, &key, Some(&format!("key-{n}")), &body).await
        });
    }
    let (mut succeeded, mut created, mut spent) = (0u64, 0u64, 0i64);
    while let Some(response) = tasks.join_next().await {
        let response = response.expect("the task ran");
        match response.status {
            StatusCode::OK => {
                succeeded += 1;
                created += response.body["created"].as_u64().unwrap_or(0);
                spent += response.body["credits_spent"].as_i64().unwrap_or(0);
            }
            StatusCode::PAYMENT_REQUIRED => assert_eq!(response.code(), "insufficient_credits"),
            other => panic!("unexpected {other}: {}", response.body),
        }
    }
    let balance = balance(&app).await;
    assert!(balance >= 0, "{balance}");
    assert!(succeeded >= 20, "at least 41 / 2 imports fit: {succeeded}");
    let entries = ledger(&app).await;
    assert_eq!(
        sum(&entries, "grant") + sum(&entries, "spend") + sum(&entries, "release"),
        balance
    );
    assert_eq!(
        41 - balance,
        spent,
        "the balance went down by exactly what the imports report"
    );
    assert_eq!(spent, created as i64, "one credit per prospect created");
    assert_eq!(
        app.prospect_count().await,
        created,
        "refused imports created nothing"
    );
    assert_eq!(import_count(&app).await, succeeded);
    let shared = app.get("/imports?limit=200", &app.key).await.expect(200)["items"]
        .as_array()
        .map_or(0, |items| {
            items
                .iter()
                .filter(|item| item["created"] == json!(2))
                .count()
        });
    assert_eq!(shared, 1, "the shared prospect was created once");
}

#[tokio::test]
async fn bad_input_is_refused_with_a_sentence_and_changes_nothing() {
    let app = spawn_app().await;
    grant(&app, 1000).await;
    let many_rows: Vec<Value> = (0..100_001).map(|_| json!({})).collect();
    let many_lines = format!("email\n{}", "a@b.co\n".repeat(100_001));
    let cases: Vec<(&str, Value, u16, &str, &str)> = vec![
        (
            "ragged",
            json!({"csv": "name,email\nJane,jane@acme.test\nBob\n"}),
            400,
            "invalid_request",
            "Row 2",
        ),
        (
            "bad quoting",
            json!({"csv": "name,email\n\"Jane\"x,jane@acme.test\n"}),
            400,
            "invalid_request",
            "Row 1",
        ),
        (
            "unclosed quote",
            json!({"csv": "name,email\nJane,jane@acme.test\n\"Bob,bob@acme.test\n"}),
            400,
            "invalid_request",
            "never closed",
        ),
        ("empty", json!({"csv": ""}), 400, "invalid_request", "empty"),
        (
            "header only",
            json!({"csv": "name,email\n"}),
            400,
            "invalid_request",
            "no data rows",
        ),
        (
            "both",
            json!({"csv": "email\na@b.co\n", "rows": [{"email": "a@b.co"}]}),
            400,
            "invalid_request",
            "not both",
        ),
        ("neither", json!({}), 400, "invalid_request", "`csv`"),
        (
            "unknown column",
            json!({"csv": "name\nJane\n", "mapping": {"Nom": "first_name"}}),
            400,
            "invalid_request",
            "`Nom`",
        ),
        (
            "unknown field",
            json!({"csv": "name\nJane\n", "mapping": {"name": "nickname"}}),
            400,
            "invalid_request",
            "`nickname`",
        ),
        (
            "no identity",
            json!({"csv": "Title,Company\nCTO,Acme\n"}),
            400,
            "invalid_request",
            "No column",
        ),
        (
            "row not an object",
            json!({"rows": [{"email": "a@b.co"}, 7]}),
            400,
            "invalid_request",
            "`rows[1]` (row 2)",
        ),
        (
            "row of the wrong type",
            json!({"rows": [{"company_size": "big", "email": "a@b.co"}]}),
            400,
            "invalid_request",
            "`company_size`",
        ),
        (
            "row with an unknown field",
            json!({"rows": [{"nickname": "x"}]}),
            400,
            "invalid_request",
            "nickname",
        ),
        (
            "empty rows",
            json!({"rows": []}),
            400,
            "invalid_request",
            "empty",
        ),
        (
            "mapping with rows",
            json!({"rows": [{"email": "a@b.co"}], "mapping": {"a": "email"}}),
            400,
            "invalid_request",
            "`mapping`",
        ),
        (
            "unknown list",
            json!({"csv": "email\na@b.co\n", "list_id": "lst_00000000000NoSuchOne"}),
            404,
            "not_found",
            "list",
        ),
        (
            "list id and name",
            json!({"csv": "email\na@b.co\n", "list_id": "lst_00000000000NoSuchOne", "list_name": "x"}),
            400,
            "invalid_request",
            "not both",
        ),
        (
            "bad on_duplicate",
            json!({"csv": "email\na@b.co\n", "on_duplicate": "merge"}),
            400,
            "invalid_request",
            "on_duplicate",
        ),
        (
            "too many rows",
            json!({"rows": many_rows}),
            413,
            "payload_too_large",
            "100000",
        ),
        (
            "too many lines",
            json!({"csv": many_lines}),
            413,
            "payload_too_large",
            "100000",
        ),
    ];
    for (name, body, status, code, needle) in cases {
        for estimate in [true, false] {
            let mut body = body.clone();
            body["estimate_only"] = json!(estimate);
            let response = import(&app, &app.key, (!estimate).then_some(name), body).await;
            assert_eq!(
                response.status.as_u16(),
                status,
                "{name} (estimate: {estimate}): {}",
                response.body
            );
            assert_eq!(response.code(), code, "{name}: {}", response.body);
            let message = response.body["error"].as_str().unwrap_or_default();
            assert!(
                message.contains(needle),
                "{name}: `{message}` should contain `{needle}`"
            );
        }
    }
    // `estimate_only` is a boolean: a null is refused like any other wrong type, not taken as
    // false (which would import and charge).
    let response = import(
        &app,
        &app.key,
        None,
        json!({"csv": "email\na@b.co\n", "estimate_only": null}),
    )
    .await;
    assert_eq!(response.status.as_u16(), 400, "{}", response.body);
    assert_eq!(response.code(), "invalid_request");
    let message = response.body["error"].as_str().unwrap_or_default();
    assert!(
        message.contains("`estimate_only`: expected `true` or `false`, got null"),
        "{message}"
    );
    // Bytes that are not UTF-8 cannot be in a JSON string: the body is refused as a whole.
    let mut bytes = br#"{"csv": "name,email\nJ"#.to_vec();
    bytes.extend([0xff, 0xfe]);
    bytes.extend(br#"ne,jane@acme.test\n"}"#);
    let response = app
        .send(
            Method::POST,
            "/api/v1/imports",
            Auth::Key(&app.key),
            Body::Raw(bytes, Some("application/json")),
        )
        .await;
    response.expect_error(400, "invalid_request");
    // Over the body limit, before any parsing.
    let huge = "x".repeat(17 * 1024 * 1024);
    import(&app, &app.key, None, json!({"csv": huge}))
        .await
        .expect_error(413, "payload_too_large");

    assert_eq!(app.prospect_count().await, 0);
    assert_eq!(balance(&app).await, 1000);
    assert_eq!(ledger(&app).await.len(), 1, "only the grant");
    assert_eq!(import_count(&app).await, 0);
    assert_eq!(
        app.get("/lists", &app.key).await.expect(200)["total"],
        json!(0)
    );
    // A refused request stored nothing under its key: the fixed request runs with the same key.
    let fixed = import(
        &app,
        &app.key,
        Some("ragged"),
        json!({"csv": "name,email\nJane,jane@acme.test\nBob,\n"}),
    )
    .await;
    assert_eq!(fixed.expect(200)["created"], json!(2));
}
