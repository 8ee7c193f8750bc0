//! Bad input gets a 4xx with a sentence naming what is wrong, and nothing changes: each case
//! counts the prospects before and after, and none may answer 5xx.

use reqwest::Method;
use serde_json::json;

use outreach_runtime::config::DEFAULT_MAX_BODY_BYTES;

use crate::helpers::{ApiResponse, Auth, Body, TestApp, spawn_app};

/// Sends `body` to `POST /api/v1/prospects` and checks the refusal changed nothing.
async fn post_raw(
    app: &TestApp,
    bytes: impl Into<Vec<u8>>,
    content_type: Option<&'static str>,
) -> ApiResponse {
    app.send(
        Method::POST,
        "/api/v1/prospects",
        Auth::Key(&app.key),
        Body::Raw(bytes.into(), content_type),
    )
    .await
}

#[tokio::test]
async fn malformed_json_is_a_400_and_writes_nothing() {
    let app = spawn_app().await;
    app.create_prospect(json!({"first_name": "Existing"})).await;
    for body in [
        r#"{"first_name": "#,
        r#"{"first_name": "A",}"#,
        "{first_name: 'A'}",
        r#"{"first_name": "A"} trailing"#,
    ] {
        let message = post_raw(&app, body, Some("application/json"))
            .await
            .expect_error(400, "invalid_request")
            .to_owned();
        assert!(message.contains("JSON"), "{body}: {message}");
    }
    assert_eq!(app.prospect_count().await, 1);
}

#[tokio::test]
async fn wrong_types_are_a_400_naming_the_field() {
    let app = spawn_app().await;
    let cases = [
        (json!({"first_name": 5}), "first_name"),
        (json!({"first_name": "A", "tags": "vip"}), "tags"),
        (json!({"first_name": "A", "tags": [1, 2]}), "tags"),
        (
            json!({"first_name": "A", "company_size": "big"}),
            "company_size",
        ),
        (
            json!({"first_name": "A", "do_not_contact": "yes"}),
            "do_not_contact",
        ),
        (
            json!({"first_name": "A", "custom_fields": ["x"]}),
            "custom_fields",
        ),
    ];
    for (body, field) in cases {
        let message = app
            .post_json("/prospects", &app.key, body.clone())
            .await
            .expect_error(400, "invalid_request")
            .to_owned();
        assert!(
            message.contains(field),
            "{body}: the sentence names `{field}`: {message}"
        );
    }
    let prospect = app.create_prospect(json!({"first_name": "Kept"})).await;
    let path = format!("/prospects/{}", prospect["id"].as_str().expect("id"));
    let message = app
        .patch_json(&path, &app.key, json!({"first_name": ["x"]}))
        .await
        .expect_error(400, "invalid_request")
        .to_owned();
    assert!(message.contains("first_name"), "{message}");
    assert_eq!(
        app.get(&path, &app.key).await.expect(200),
        &prospect,
        "a refused patch changes nothing"
    );
    assert_eq!(app.prospect_count().await, 1);
}

#[tokio::test]
async fn unknown_fields_are_a_400_naming_the_field() {
    let app = spawn_app().await;
    let message = app
        .post_json(
            "/prospects",
            &app.key,
            json!({"first_name": "A", "frist_name": "B"}),
        )
        .await
        .expect_error(400, "invalid_request")
        .to_owned();
    assert!(message.contains("`frist_name`"), "{message}");
    assert!(
        message.contains("`first_name`"),
        "the sentence lists the expected fields: {message}"
    );
    let message = app
        .get("/prospects?colour=red", &app.key)
        .await
        .expect_error(400, "invalid_request")
        .to_owned();
    assert!(message.contains("`colour`"), "{message}");
    let message = app
        .get("/workspace?verbose=1", &app.key)
        .await
        .expect_error(400, "invalid_request")
        .to_owned();
    assert!(message.contains("`verbose`"), "{message}");
    let (is_error, body) = app
        .mcp_call(
            &app.key,
            "service_create_prospect",
            json!({"first_name": "A", "frist_name": "B"}),
        )
        .await;
    assert!(is_error);
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("`frist_name`"),
        "{body}"
    );
    assert_eq!(app.prospect_count().await, 0);
}

#[tokio::test]
async fn a_body_without_a_json_content_type_is_a_415() {
    let app = spawn_app().await;
    let body = r#"{"first_name": "A"}"#;
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let response = post_raw(&app, body, content_type).await;
        let message = response.expect_error(415, "unsupported_media_type");
        assert!(
            message.contains("application/json"),
            "{content_type:?}: {message}"
        );
    }
    assert_eq!(app.prospect_count().await, 0);
    // A JSON subtype and parameters are fine.
    post_raw(&app, body, Some("application/json; charset=utf-8"))
        .await
        .expect(201);
    post_raw(
        &app,
        r#"{"first_name": "B"}"#,
        Some("application/merge-patch+json"),
    )
    .await
    .expect(201);
}

#[tokio::test]
async fn a_body_over_the_limit_is_a_413() {
    let app = spawn_app().await;
    let limit = DEFAULT_MAX_BODY_BYTES;
    assert!(limit >= 1024 * 1024, "the limit is at least 1 MiB");
    let huge = json!({"first_name": "A", "headline": "x".repeat(limit + 10)}).to_string();
    let message = post_raw(&app, huge, Some("application/json"))
        .await
        .expect_error(413, "payload_too_large")
        .to_owned();
    assert!(
        message.contains(&limit.to_string()),
        "the sentence names the limit: {message}"
    );

    // The MCP endpoint has the same limit.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "service_create_prospect", "arguments": {"first_name": "A", "headline": "x".repeat(limit + 10)}}});
    let (status, _, _) = app.mcp_raw(Some(&app.key), &call).await;
    assert_eq!(status.as_u16(), 413);
    assert_eq!(app.prospect_count().await, 0);

    // Just over 1 MiB is within the limit: refused for the field, not the size.
    let big = json!({"first_name": "A", "headline": "x".repeat(1024 * 1024 + 10)}).to_string();
    let message = post_raw(&app, big, Some("application/json"))
        .await
        .expect_error(400, "invalid_request")
        .to_owned();
    assert!(message.contains("headline"), "{message}");
}

/// Sends `chunks` as one chunked request body (no `Content-Length`) over a raw connection and
/// returns the response's status line and body.
async fn post_chunked(app: &TestApp, chunks: &[&[u8]]) -> (String, String) {
    let mut frames: Vec<Vec<u8>> = chunks
        .iter()
        .map(|chunk| [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat())
        .collect();
    frames.push(b"0\r\n\r\n".to_vec());
    post_chunked_frames(app, "/api/v1/prospects", &frames).await
}

/// Sends a chunked JSON `POST` to `path` whose body is `frames`, each written as it is (so a test
/// can break the chunked framing), and returns the status line and the response's body.
async fn post_chunked_frames(app: &TestApp, path: &str, frames: &[Vec<u8>]) -> (String, String) {
    tokio::time::timeout(
        std::time::Duration::from_secs(60),
        exchange_chunked(app, path, frames),
    )
    .await
    .expect("the server answers a chunked body within a minute")
}

async fn exchange_chunked(app: &TestApp, path: &str, frames: &[Vec<u8>]) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = app.base_url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         transfer-encoding: chunked\r\nconnection: close\r\n\r\n",
        app.key
    );
    stream.write_all(head.as_bytes()).await.expect("head");
    for frame in frames {
        // The server may answer and close before the whole body is sent (over the limit).
        if stream.write_all(frame).await.is_err() {
            break;
        }
    }
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok();
    let response = String::from_utf8_lossy(&response).into_owned();
    let status = response.lines().next().unwrap_or_default().to_owned();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default();
    (status, body)
}

/// A body whose chunked framing breaks off is a 400 that says the body could not be read, not a
/// 413 (it was not too large), on both faces.
#[tokio::test]
async fn a_body_with_broken_chunked_framing_is_a_400_and_changes_nothing() {
    let app = spawn_app().await;
    let broken = |start: &[u8]| {
        [
            [format!("{:x}\r\n", start.len()).as_bytes(), start, b"\r\n"].concat(),
            b"zz\r\nnot a chunk size\r\n".to_vec(),
        ]
    };
    let rest = broken(br#"{"first_name": "Broken"#);
    let mcp = broken(
        br#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "service_create_prospect", "arguments": {"first_name": "Broken"#,
    );
    for (path, frames) in [("/api/v1/prospects", rest), ("/api/mcp", mcp)] {
        let (status, body) = post_chunked_frames(&app, path, &frames).await;
        assert!(status.contains(" 400 "), "{path}: {status}: {body}");
        assert!(body.contains("invalid_request"), "{path}: {body}");
        assert!(body.contains("could not be read"), "{path}: {body}");
    }
    assert_eq!(app.prospect_count().await, 0);
}

#[tokio::test]
async fn a_chunked_body_is_read_whole_and_held_to_the_limit_without_a_length() {
    let app = spawn_app().await;
    // A body in several chunks is put back together in order.
    let (status, body) = post_chunked(
        &app,
        &[
            br#"{"first_name": "Ch"#,
            br#"unked", "last_name": "#,
            br#""Body"}"#,
        ],
    )
    .await;
    assert!(status.contains(" 201 "), "{status}: {body}");
    assert!(body.contains(r#""first_name":"Chunked""#), "{body}");
    assert!(body.contains(r#""last_name":"Body""#), "{body}");

    // Without a declared length the limit is counted as the chunks arrive.
    let chunk = vec![b'x'; 1024 * 1024];
    let mut chunks: Vec<&[u8]> = vec![br#"{"first_name": "A", "headline": ""#];
    chunks.extend(std::iter::repeat_n(
        chunk.as_slice(),
        DEFAULT_MAX_BODY_BYTES / chunk.len() + 1,
    ));
    chunks.push(br#""}"#);
    let (status, body) = post_chunked(&app, &chunks).await;
    assert!(status.contains(" 413 "), "{status}: {body}");
    assert!(body.contains("payload_too_large"), "{body}");
    assert_eq!(app.prospect_count().await, 1, "only the first prospect");
}

#[tokio::test]
async fn bad_ids_are_404_with_a_sentence_naming_the_id() {
    let app = spawn_app().await;
    app.create_prospect(json!({"first_name": "Existing"})).await;
    for id in [
        "nope",
        "prs_short",
        "lst_00000000000000000000",
        "prs_0000000000000000000!",
        "prs_00000000000000000000",
    ] {
        let path = format!("/prospects/{}", crate::helpers::encode(id));
        let message = app
            .get(&path, &app.key)
            .await
            .expect_error(404, "not_found")
            .to_owned();
        assert!(message.contains(id), "{id}: {message}");
        app.patch_json(&path, &app.key, json!({"first_name": "X"}))
            .await
            .expect_error(404, "not_found");
        app.delete(&path, &app.key)
            .await
            .expect_error(404, "not_found");
    }
    // An id in the body of a PATCH is refused: the path names the object.
    let prospect = app.create_prospect(json!({"first_name": "Target"})).await;
    let path = format!("/prospects/{}", prospect["id"].as_str().expect("id"));
    let message = app
        .patch_json(
            &path,
            &app.key,
            json!({"id": "prs_00000000000000000000", "first_name": "X"}),
        )
        .await
        .expect_error(400, "invalid_request")
        .to_owned();
    assert!(message.contains("`id`"), "{message}");
    assert_eq!(app.get(&path, &app.key).await.expect(200), &prospect);
    assert_eq!(app.prospect_count().await, 2);
}

#[tokio::test]
async fn a_body_that_is_not_an_object_is_a_400() {
    let app = spawn_app().await;
    for body in ["[1, 2]", r#""Ada""#, "42", "null", "true"] {
        let message = post_raw(&app, body, Some("application/json"))
            .await
            .expect_error(400, "invalid_request")
            .to_owned();
        assert!(message.contains("object"), "{body}: {message}");
    }
    let (is_error, body) = app
        .mcp_call(&app.key, "service_get_workspace", json!({}))
        .await;
    assert!(!is_error, "{body}");
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "service_create_prospect", "arguments": [1, 2]}});
    let (status, _, body) = app.mcp_raw(Some(&app.key), &call).await;
    assert!(
        status.is_client_error()
            || body.get("error").is_some()
            || body["result"]["isError"] == json!(true),
        "{status} {body}"
    );
    assert_eq!(app.prospect_count().await, 0);
}

#[tokio::test]
async fn an_empty_body_is_an_empty_input() {
    let app = spawn_app().await;
    let message = post_raw(&app, "", None)
        .await
        .expect_error(400, "invalid_request")
        .to_owned();
    assert!(
        message.contains("name"),
        "the create rule is what fails: {message}"
    );
    assert_eq!(app.prospect_count().await, 0);
}

#[tokio::test]
async fn a_query_string_on_a_post_is_a_400() {
    let app = spawn_app().await;
    let response = app
        .send(
            Method::POST,
            "/api/v1/prospects?first_name=A",
            Auth::Key(&app.key),
            Body::Json(json!({"first_name": "B"})),
        )
        .await;
    let message = response.expect_error(400, "invalid_request");
    assert!(message.contains("query string"), "{message}");
    assert_eq!(app.prospect_count().await, 0);
}

#[tokio::test]
async fn a_repeated_query_parameter_is_a_400() {
    let app = spawn_app().await;
    let message = app
        .get("/prospects?limit=5&limit=6", &app.key)
        .await
        .expect_error(400, "invalid_request")
        .to_owned();
    assert!(message.contains("`limit`"), "{message}");
}

#[tokio::test]
async fn an_unknown_path_is_a_json_404() {
    let app = spawn_app().await;
    for path in [
        "/api/v1/nope",
        "/api/v1/prospects/prs_00000000000000000000/extra",
        "/nothing",
        "/api/v2/prospects",
    ] {
        for auth in [Auth::None, Auth::Key(&app.key)] {
            let response = app.send(Method::GET, path, auth, Body::Empty).await;
            let message = response.expect_error(404, "not_found");
            assert!(message.contains(path), "{path}: {message}");
            assert!(
                response
                    .header("content-type")
                    .is_some_and(|value| value.starts_with("application/json"))
            );
        }
    }
}

#[tokio::test]
async fn a_wrong_method_is_a_405_with_allow() {
    let app = spawn_app().await;
    let cases = [
        (Method::PUT, "/api/v1/prospects", &["GET", "POST"][..]),
        (Method::DELETE, "/api/v1/prospects", &["GET", "POST"][..]),
        (
            Method::POST,
            "/api/v1/prospects/prs_00000000000000000000",
            &["GET", "PATCH", "DELETE"][..],
        ),
        (Method::PUT, "/api/v1/workspace", &["GET"][..]),
    ];
    for (method, path, allowed) in cases {
        let response = app
            .send(
                method.clone(),
                path,
                Auth::Key(&app.key),
                Body::Json(json!({})),
            )
            .await;
        let message = response.expect_error(405, "method_not_allowed").to_owned();
        assert!(
            message.contains(&format!("{method} is not allowed on {path}")),
            "{method} {path}: the sentence names the method and the full path: {message}"
        );
        let allow = response
            .header("allow")
            .unwrap_or_else(|| panic!("{method} {path}: 405 without Allow"))
            .to_owned();
        let listed: Vec<&str> = allow.split(',').map(str::trim).collect();
        for method in allowed {
            assert!(
                listed.contains(method),
                "{path}: Allow `{allow}` lacks {method}"
            );
        }
        assert!(
            !listed.contains(&method.as_str()),
            "{path}: Allow `{allow}` lists the refused {method}"
        );
    }
    assert_eq!(app.prospect_count().await, 0);
}

#[tokio::test]
async fn a_volley_of_bad_requests_never_gets_a_500() {
    let app = spawn_app().await;
    let prospect = app.create_prospect(json!({"first_name": "Steady"})).await;
    let id = prospect["id"].as_str().expect("id").to_owned();
    let bodies: Vec<(Method, String, Body)> = vec![
        (
            Method::POST,
            "/api/v1/prospects".into(),
            Body::Raw(vec![0xff, 0xfe, 0x00], Some("application/json")),
        ),
        (
            Method::POST,
            "/api/v1/prospects".into(),
            Body::Json(
                json!({"custom_fields": {"a": {"deep": [1, {"x": "\u{0}"}]}}, "first_name": "Deep"}),
            ),
        ),
        (
            Method::POST,
            "/api/v1/prospects".into(),
            Body::Json(json!({"company_size": 1e40, "first_name": "A"})),
        ),
        (
            Method::POST,
            "/api/v1/prospects".into(),
            Body::Json(json!({"company_size": 4_294_967_296_u64, "first_name": "A"})),
        ),
        (
            Method::PATCH,
            format!("/api/v1/prospects/{id}"),
            Body::Json(json!({"tags": null})),
        ),
        (
            Method::PATCH,
            format!("/api/v1/prospects/{id}"),
            Body::Json(json!({"do_not_contact": null})),
        ),
        (
            Method::GET,
            "/api/v1/prospects?offset=18446744073709551615".into(),
            Body::Empty,
        ),
        (
            Method::GET,
            "/api/v1/prospects?q=%27%3B%20drop%20table%20prospects%3B%20--".into(),
            Body::Empty,
        ),
        (Method::GET, "/api/v1/prospects?limit=".into(), Body::Empty),
        (Method::GET, "/api/v1/prospects/%00".into(), Body::Empty),
        (
            Method::GET,
            format!("/api/v1/prospects/{}", "a".repeat(5000)),
            Body::Empty,
        ),
    ];
    for (method, path, body) in bodies {
        let response = app
            .send(method.clone(), &path, Auth::Key(&app.key), body)
            .await;
        assert!(
            response.status.as_u16() < 500,
            "{method} {path}: {} {}",
            response.status,
            response.body
        );
        if !response.status.is_success() {
            assert!(
                response.body["error"].is_string() && response.body["code"].is_string(),
                "{method} {path}: {}",
                response.body
            );
        }
    }
    assert_eq!(
        app.get(&format!("/prospects/{id}"), &app.key)
            .await
            .expect(200)["first_name"],
        json!("Steady")
    );
}

#[tokio::test]
async fn a_nul_character_is_never_a_500() {
    let app = spawn_app().await;
    let prospect = app.create_prospect(json!({"first_name": "Steady"})).await;
    let path = format!("/api/v1/prospects/{}", prospect["id"].as_str().expect("id"));
    let cases: Vec<(Method, String, Body)> = vec![
        (
            Method::POST,
            "/api/v1/prospects".into(),
            Body::Json(json!({"first_name": "Nul\u{0}Name"})),
        ),
        (
            Method::POST,
            "/api/v1/prospects".into(),
            Body::Json(json!({"first_name": "A", "tags": ["t\u{0}"]})),
        ),
        (
            Method::PATCH,
            path.clone(),
            Body::Json(json!({"title": "\u{0}"})),
        ),
        (Method::GET, "/api/v1/prospects?q=%00".into(), Body::Empty),
        (Method::GET, "/api/v1/prospects?tag=%00".into(), Body::Empty),
    ];
    let mut failures = Vec::new();
    for (method, path, body) in cases {
        let response = app
            .send(method.clone(), &path, Auth::Key(&app.key), body)
            .await;
        if response.status.is_server_error() {
            failures.push(format!("{method} {path}: {}", response.status));
        }
    }
    assert!(failures.is_empty(), "5xx answers: {failures:#?}");
}

#[tokio::test]
async fn a_whitespace_only_body_is_not_an_empty_object() {
    let app = spawn_app().await;
    let prospect = app.create_prospect(json!({"first_name": "Kept"})).await;
    let id = prospect["id"].as_str().expect("id");
    let response = app
        .send(
            Method::PATCH,
            &format!("/api/v1/prospects/{id}"),
            Auth::Key(&app.key),
            Body::Raw(b"  \n".to_vec(), Some("application/json")),
        )
        .await;
    let message = response.expect_error(400, "invalid_request").to_owned();
    assert!(message.contains("not valid JSON"), "{message}");
}

/// Type errors read as JSON, not Rust, and name the field, over REST and MCP alike.
#[tokio::test]
async fn type_errors_speak_json_and_name_the_field_on_both_faces() {
    let app = spawn_app().await;
    let rust_words = [
        "expected u",
        "expected i",
        "a sequence",
        "a map",
        "struct ",
        "invalid type",
    ];
    let cases = [
        (
            "/prospects?limit=abc",
            "service_list_prospects",
            json!({"limit": "abc"}),
            "`limit`",
            "a whole number between 1 and 200",
        ),
        (
            "",
            "service_create_prospect",
            json!({"first_name": "A", "tags": {"a": 1}}),
            "`tags`",
            "a list of strings",
        ),
        (
            "",
            "service_create_prospect",
            json!({"first_name": 5}),
            "`first_name`",
            "a string",
        ),
        (
            "",
            "service_create_prospect",
            json!({"first_name": "A", "do_not_contact": "yes"}),
            "`do_not_contact`",
            "true or false",
        ),
        (
            "",
            "service_create_prospect",
            json!({"first_name": "A", "company_size": "big"}),
            "`company_size`",
            "a whole number",
        ),
        (
            "",
            "service_get_prospect",
            json!({"id": 42}),
            "`id`",
            "a string",
        ),
    ];
    for (rest_path, tool, input, field, words) in cases {
        let (is_error, mcp) = app.mcp_call(&app.key, tool, input.clone()).await;
        assert!(is_error, "{tool} {input}: {mcp}");
        assert_eq!(mcp["code"], json!("invalid_request"), "{mcp}");
        let sentence = mcp["error"].as_str().unwrap_or_default();
        assert!(
            sentence.contains(field),
            "{tool} {input}: names {field}: {sentence}"
        );
        assert!(
            sentence.contains(words),
            "{tool} {input}: says {words:?}: {sentence}"
        );
        for rust in rust_words {
            assert!(
                !sentence.contains(rust),
                "{tool} {input}: {rust:?} in {sentence}"
            );
        }
        if tool == "service_get_prospect" {
            // On REST the id is path text, so `/prospects/42` is simply not found.
            continue;
        }
        let action = app.registry.by_tool_name(tool).expect("the tool's action");
        let rest = if rest_path.is_empty() {
            app.rest_call(action, Auth::Key(&app.key), &input).await
        } else {
            app.get(rest_path, &app.key).await
        };
        let rest_sentence = rest.expect_error(400, "invalid_request").to_owned();
        assert_eq!(rest_sentence, sentence, "{tool} {input}: the faces agree");
    }
    let message = app
        .post_json(
            "/targetings",
            &app.key,
            json!({"name": "T", "criteria": {"industries": {"value": "saas", "points": 10}}}),
        )
        .await
        .expect_error(400, "invalid_request")
        .to_owned();
    assert!(message.contains("`criteria.industries`"), "{message}");
    assert!(
        message.contains(r#"a list of strings or objects like {"value": ..., "points": ...}"#),
        "{message}"
    );
    assert!(message.contains("got an object"), "{message}");
}
