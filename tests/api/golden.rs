//! Golden files: the action list, the OpenAPI document and the MCP tool list, checked in.
//!
//! A change to any of them is a change to the public contract, so it shows up as a diff to review
//! rather than slipping through. The action list also catches an action the linker dropped. Run
//! with `UPDATE_GOLDEN=1` to rewrite the files after an intended change. `parity_fixtures.json` is
//! the actions' parity fixtures (`outreach_runtime::fixtures`), which the TypeScript check replays.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::helpers::spawn_app;

/// Compares `actual` with `tests/golden/{name}`, or rewrites it when `UPDATE_GOLDEN=1`.
#[track_caller]
fn assert_golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var("UPDATE_GOLDEN").is_ok_and(|value| value == "1") {
        std::fs::create_dir_all(path.parent().expect("golden folder"))
            .expect("create tests/golden");
        std::fs::write(&path, actual).expect("write the golden file");
        return;
    }
    let how = format!(
        "if the change is intended, run `UPDATE_GOLDEN=1 cargo test --test api golden` and review the diff of tests/golden/{name}"
    );
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing golden file {}; {how}", path.display()));
    if expected == actual {
        return;
    }
    let first_difference = expected
        .lines()
        .zip(actual.lines())
        .enumerate()
        .find(|(_, (want, got))| want != got)
        .map_or_else(
            || {
                format!(
                    "the files differ in length ({} lines expected, {} lines now)",
                    expected.lines().count(),
                    actual.lines().count()
                )
            },
            |(index, (want, got))| {
                format!("line {}:\n  expected: {want}\n  now:      {got}", index + 1)
            },
        );
    panic!("tests/golden/{name} has drifted; {first_difference}\n{how}");
}

fn pretty(value: &Value) -> String {
    format!(
        "{}\n",
        serde_json::to_string_pretty(value).expect("serialize")
    )
}

/// Neither golden document may depend on the port, the base URL or the database.
#[track_caller]
fn assert_portable(text: &str, base_url: &str) {
    assert!(
        !text.contains(base_url),
        "the document names the server's address {base_url}"
    );
    assert!(!text.contains("127.0.0.1"), "the document names a host");
}

#[tokio::test]
async fn action_list_matches_the_golden_file() {
    let app = spawn_app().await;
    let lines: Vec<String> = app
        .registry
        .actions()
        .iter()
        .map(|action| {
            let route = action.route.as_ref().map_or_else(
                || "-".to_owned(),
                |route| format!("{} {}", route.method, route.path),
            );
            let mut flags = Vec::new();
            if action.def.idempotent {
                flags.push("idempotent");
            }
            if action.def.price.is_some() {
                flags.push("credits");
            }
            let flags = if flags.is_empty() {
                "-".to_owned()
            } else {
                flags.join(",")
            };
            format!("{} {} {route} {flags}", action.name(), action.def.scope)
        })
        .collect();
    assert!(
        !lines.is_empty(),
        "no action registered: the linker dropped `outreach_actions`"
    );
    assert_golden("actions.txt", &format!("{}\n", lines.join("\n")));
}

/// Every action that changes something takes an idempotency key, so a call sent again after a
/// broken connection answers the first result instead of acting twice.
#[tokio::test]
async fn every_write_action_takes_an_idempotency_key() {
    // These answer a secret shown once: a replayed answer would keep it, unsealed, in the
    // idempotency records for a day. A retry of either makes a second one, which does no harm.
    const ANSWER_A_SECRET: [&str; 2] = ["create_webhook_endpoint", "rotate_webhook_secret"];
    let app = spawn_app().await;
    let not: Vec<&str> = app
        .registry
        .actions()
        .iter()
        .filter(|action| !action.is_read_only() && !action.def.idempotent)
        .map(|action| action.name())
        .filter(|name| !ANSWER_A_SECRET.contains(name))
        .collect();
    assert!(
        not.is_empty(),
        "write actions without `idempotent`: {not:?}"
    );
}

#[tokio::test]
async fn every_action_has_a_summary_and_a_known_scope() {
    let app = spawn_app().await;
    for action in app.registry.actions() {
        let summary = action.def.summary.trim();
        assert!(!summary.is_empty(), "`{}` has no summary", action.name());
        assert!(
            summary.ends_with('.'),
            "the summary of `{}` is not a sentence: {summary}",
            action.name()
        );
        assert!(
            ["read", "write", "send"].contains(&action.def.scope.as_str()),
            "`{}` has scope {}",
            action.name(),
            action.def.scope
        );
    }
}

#[tokio::test]
async fn openapi_document_matches_the_golden_file() {
    let app = spawn_app().await;
    let response = app
        .send(
            reqwest::Method::GET,
            "/api/v1/openapi.json",
            crate::helpers::Auth::None,
            crate::helpers::Body::Empty,
        )
        .await;
    let document = response.expect(200).clone();
    assert_eq!(response.header("content-type"), Some("application/json"));
    assert_eq!(document["openapi"], json!("3.1.0"));
    let text = pretty(&document);
    assert_portable(&text, &app.base_url);
    assert_golden("openapi.json", &text);
}

#[tokio::test]
async fn mcp_tool_list_matches_the_golden_file() {
    let app = spawn_app().await;
    let tools = app.mcp_every_tool().await;
    let text = pretty(&Value::Array(tools));
    assert_portable(&text, &app.base_url);
    assert_golden("mcp_tools.json", &text);
}

/// The parity fixtures declared beside the actions, written out for the TypeScript SDK check in
/// CI (`.ci/mcp_ts_check.mjs`), which replays every one of them.
#[test]
fn parity_fixtures_match_the_golden_file() {
    let document = outreach_runtime::fixtures::document().expect("one fixture per action");
    assert_golden("parity_fixtures.json", &pretty(&document));
}
