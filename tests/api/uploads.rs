//! Imports from files: a `text/csv` body and a `multipart/form-data` upload reach the same
//! dispatch as a JSON `{csv: ...}` body (same price, estimate, outcome and idempotency
//! fingerprint); the exports of the usual tools are recognised, unmapped columns are warnings in
//! the outcome; and a malformed upload is a 4xx that names what to fix and changes nothing.

use reqwest::Method;
use serde_json::{Value, json};

use crate::helpers::{ApiResponse, Auth, Body, TestApp, spawn_app};

const APOLLO: &str = "\
First Name,Last Name,Title,Company,Email,Email Status,# Employees,Industry,Person Linkedin Url,Company Website,City,State,Country
Jane,Doe,CTO,Acme,jane@acme.test,Verified,250,Software,http://www.linkedin.com/in/Jane-Doe,https://acme.test,Austin,Texas,United States
John,Roe,VP Sales,Acme,john@acme.test,Guessed,250,Software,http://www.linkedin.com/in/john-roe,https://acme.test,Austin,Texas,United States
";

const BOUNDARY: &str = "XyZ-outreach-boundary";
const MULTIPART: &str = "multipart/form-data; boundary=XyZ-outreach-boundary";

/// A `multipart/form-data` body as `curl -F` makes it: text fields, then files.
fn multipart(fields: &[(&str, &str)], files: &[(&str, &str)]) -> Vec<u8> {
    let mut body = String::new();
    for (name, value) in fields {
        body.push_str(&format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
        ));
    }
    for (name, content) in files {
        body.push_str(&format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"people.csv\"\r\n\
             Content-Type: text/csv\r\n\r\n{content}\r\n"
        ));
    }
    body.push_str(&format!("--{BOUNDARY}--\r\n"));
    body.into_bytes()
}

async fn upload(
    app: &TestApp,
    query: &str,
    idempotency_key: Option<&str>,
    content_type: &'static str,
    body: Vec<u8>,
) -> ApiResponse {
    let mut request = app
        .client
        .post(app.url(&format!("/api/v1/imports{query}")))
        .bearer_auth(&app.key)
        .header("content-type", content_type)
        .body(body);
    if let Some(key) = idempotency_key {
        request = request.header("idempotency-key", key);
    }
    let response = request.send().await.expect("send the upload");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.bytes().await.expect("read the body");
    ApiResponse {
        status,
        headers,
        body: serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned())),
        raw: bytes.to_vec(),
    }
}

async fn counts(app: &TestApp) -> (u64, u64, i64) {
    let imports = app.get("/imports?limit=1", &app.key).await.expect(200)["total"]
        .as_u64()
        .expect("a total");
    let balance = app.get("/workspace", &app.key).await.expect(200)["workspace"]["credits_balance"]
        .as_i64()
        .expect("a balance");
    (imports, app.prospect_count().await, balance)
}

#[tokio::test]
async fn a_text_csv_body_with_query_options_imports_like_json_and_replays_across_shapes() {
    let app = spawn_app().await;
    app.grant_credits(10).await;
    let estimate = upload(
        &app,
        "?estimate_only=true&list_name=Apollo",
        None,
        "text/csv; charset=utf-8",
        APOLLO.into(),
    )
    .await;
    let estimate = estimate.expect(200);
    assert_eq!(estimate["price"], 2, "{estimate}");
    assert_eq!(estimate["details"]["new"], 2, "{estimate}");
    assert!(
        estimate["details"]["warnings"]
            .as_array()
            .is_some_and(|warnings| warnings.len() == 1),
        "{estimate}"
    );

    let first = upload(
        &app,
        "?list_name=Apollo&on_duplicate=update",
        Some("apollo-1"),
        "text/csv",
        APOLLO.into(),
    )
    .await;
    let outcome = first.expect(200).clone();
    assert_eq!(outcome["created"], 2, "{outcome}");
    assert_eq!(outcome["credits_spent"], 2);
    assert_eq!(outcome["list_created"], true);
    assert_eq!(outcome["on_duplicate"], "update");
    assert_eq!(
        outcome["warnings"],
        json!([
            "Column `Email Status` is not a prospect field; it was kept in `custom_fields.Email Status`."
        ])
    );
    let stored = app
        .get(
            &format!("/imports/{}", outcome["id"].as_str().unwrap_or_default()),
            &app.key,
        )
        .await;
    assert_eq!(stored.expect(200)["warnings"], outcome["warnings"]);
    let jane = app.get("/prospects?q=jane", &app.key).await.expect(200)["items"][0].clone();
    assert_eq!(jane["profile_url"], "linkedin.com/in/jane-doe");
    assert_eq!(jane["location"], "Austin, Texas");
    assert_eq!(jane["company_size"], 250);
    assert_eq!(jane["custom_fields"], json!({"Email Status": "Verified"}));

    // The same import as JSON with the same key is the same request: a replay, nothing spent.
    let replay = app
        .post_idempotent(
            "/imports",
            &app.key,
            "apollo-1",
            &json!({"csv": APOLLO, "list_name": "Apollo", "on_duplicate": "update"}),
        )
        .await;
    assert_eq!(replay.expect(200)["id"], outcome["id"]);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(counts(&app).await, (1, 2, 8));
}

#[tokio::test]
async fn a_multipart_upload_takes_the_file_and_its_options_as_form_fields() {
    let app = spawn_app().await;
    app.grant_credits(10).await;
    let existing = app
        .create_prospect(
            json!({"first_name": "Jane", "profile_url": "https://linkedin.com/in/jane-doe"}),
        )
        .await;
    let body = multipart(
        &[
            ("on_duplicate", "skip"),
            ("mapping", r#"{"Email Status": null}"#),
        ],
        &[("file", APOLLO)],
    );
    let response = upload(
        &app,
        "?list_name=Uploads",
        Some("upload-1"),
        MULTIPART,
        body,
    )
    .await;
    let outcome = response.expect(200).clone();
    assert_eq!(outcome["rows"], 2, "{outcome}");
    assert_eq!(
        outcome["created"], 1,
        "the Person Linkedin Url matched: {outcome}"
    );
    assert_eq!(outcome["duplicates"], 1);
    assert_eq!(
        outcome["warnings"],
        json!([]),
        "a column mapped to null is no surprise"
    );
    assert_eq!(outcome["credits_spent"], 1);
    let list = app
        .get(
            &format!(
                "/lists/{}/prospects",
                outcome["list_id"].as_str().unwrap_or_default()
            ),
            &app.key,
        )
        .await;
    let members: Vec<&str> = list.expect(200)["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item["id"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        members.contains(&existing["id"].as_str().unwrap_or_default()),
        "{members:?}"
    );
    assert_eq!(counts(&app).await, (1, 2, 9));
}

/// An upload that must be refused: query, content type, body, status, code, words of the sentence.
type Refusal = (
    &'static str,
    &'static str,
    Vec<u8>,
    u16,
    &'static str,
    &'static str,
);

#[tokio::test]
async fn malformed_uploads_are_4xx_that_name_the_fix_and_change_nothing() {
    let app = spawn_app().await;
    app.grant_credits(10).await;
    let cases: Vec<Refusal> = vec![
        (
            "",
            MULTIPART,
            multipart(&[("on_duplicate", "skip")], &[("attachment", APOLLO)]),
            400,
            "invalid_request",
            "no part named `file`",
        ),
        (
            "",
            MULTIPART,
            multipart(&[], &[("file", APOLLO), ("file", APOLLO)]),
            400,
            "invalid_request",
            "more than one `file`",
        ),
        (
            "",
            MULTIPART,
            multipart(&[("mapping", "Full Name=full_name")], &[("file", APOLLO)]),
            400,
            "invalid_request",
            "`mapping` must be a JSON object",
        ),
        (
            "?on_duplicate=sometimes",
            "text/csv",
            APOLLO.into(),
            400,
            "invalid_request",
            "on_duplicate",
        ),
        (
            "?csv=a",
            "text/csv",
            APOLLO.into(),
            400,
            "invalid_request",
            "`csv` is the uploaded file",
        ),
        (
            "?on_duplicate=skip",
            "text/csv",
            MULTIPART.into(),
            400,
            "invalid_request",
            "No column of the CSV",
        ),
        (
            "",
            "text/csv",
            vec![0xff, 0xfe, 0x00],
            400,
            "invalid_request",
            "UTF-8",
        ),
        (
            "",
            "multipart/form-data",
            APOLLO.into(),
            400,
            "invalid_request",
            "multipart",
        ),
        (
            "",
            "application/xml",
            b"<csv/>".to_vec(),
            415,
            "unsupported_media_type",
            "text/csv",
        ),
    ];
    for (query, content_type, body, status, code, words) in cases {
        let response = upload(&app, query, Some("same-key"), content_type, body).await;
        let message = response.expect_error(status, code).to_owned();
        assert!(message.contains(words), "{content_type} {query}: {message}");
    }
    assert_eq!(counts(&app).await, (0, 0, 10));
    // The key was not held by any refusal: it still imports.
    let ok = upload(&app, "", Some("same-key"), "text/csv", APOLLO.into()).await;
    assert_eq!(ok.expect(200)["created"], 2);
    // A route without a file field still wants JSON.
    let other = app
        .send(
            Method::POST,
            "/api/v1/prospects",
            Auth::Key(&app.key),
            Body::Raw(b"First Name\nJane\n".to_vec(), Some("text/csv")),
        )
        .await;
    other.expect_error(415, "unsupported_media_type");
}
