//! MCP prompts: `prompts/list` offers each credential the workflows its scopes can walk, in a
//! fixed order; `prompts/get` fills a prompt's arguments in (defaults for the optional ones), and
//! refuses an unknown prompt or a missing, unknown or non-text argument by name with -32602.

use outreach_runtime::prompts;
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app};
use crate::sequences::send_key;

fn list() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "prompts/list", "params": {}})
}

fn get(name: &str, arguments: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/get",
           "params": {"name": name, "arguments": arguments}})
}

async fn rpc(app: &TestApp, key: &str, body: &Value) -> Value {
    let (status, _, body) = app.mcp_at("/api/mcp", Some(key), body, &[]).await;
    assert_eq!(status.as_u16(), 200, "{body}");
    body
}

fn names(body: &Value) -> Vec<&str> {
    body["result"]["prompts"]
        .as_array()
        .unwrap_or_else(|| panic!("prompts: {body}"))
        .iter()
        .map(|prompt| prompt["name"].as_str().expect("a name"))
        .collect()
}

#[tokio::test]
async fn every_prompt_names_tools_that_exist_and_uses_its_arguments() {
    let app = spawn_app().await;
    prompts::validate_registered(&app.registry).expect("the prompts are consistent");
    let declared: Vec<&str> = prompts::prompts().iter().map(|p| p.name).collect();
    assert_eq!(
        declared,
        [
            "prospect_to_sequence",
            "review_approvals",
            "triage_inbox",
            "weekly_report"
        ]
    );
}

#[tokio::test]
async fn each_scope_is_offered_the_prompts_it_can_walk_and_initialize_says_so() {
    let app = spawn_app().await;
    let read = app.read_key().await;
    let send = send_key(&app).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let body = rpc(&app, &read, &initialize).await;
    assert!(
        body["result"]["capabilities"]["prompts"].is_object(),
        "{body}"
    );
    assert_eq!(names(&rpc(&app, &read, &list()).await), ["weekly_report"]);
    assert_eq!(
        names(&rpc(&app, &app.key, &list()).await),
        ["prospect_to_sequence", "triage_inbox", "weekly_report"]
    );
    let all = rpc(&app, &send, &list()).await;
    assert_eq!(
        names(&all),
        [
            "prospect_to_sequence",
            "review_approvals",
            "triage_inbox",
            "weekly_report"
        ]
    );
    let staged = &all["result"]["prompts"][0];
    assert_eq!(staged["title"], "From an audience to a running sequence");
    assert_eq!(
        staged["arguments"],
        json!([
            {"name": "audience", "description": "Who to reach, in words: e.g. founders of seed-stage fintechs in France.", "required": true},
            {"name": "list_name", "description": "The name of the list the chosen people go into.", "required": false},
            {"name": "sender", "description": "The sender account to send from (its name or id).", "required": false},
        ])
    );
}

#[tokio::test]
async fn a_prompt_is_rendered_with_its_arguments_and_defaults() {
    let app = spawn_app().await;
    let body = rpc(
        &app,
        &app.key,
        &get("prospect_to_sequence", &json!({"audience": "founders of seed-stage fintechs in France", "list_name": "FR fintech"}),
        ),
    )
    .await;
    let messages = body["result"]["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 1, "{body}");
    assert_eq!(messages[0]["role"], "user");
    let text = messages[0]["content"]["text"].as_str().expect("a text");
    assert!(
        text.starts_with(
            "Take this audience to a running outreach sequence: founders of seed-stage \
             fintechs in France."
        ),
        "{text}"
    );
    assert!(text.contains("a list, named FR fintech"), "{text}");
    assert!(text.contains("the workspace's connected sender"), "{text}");
    assert!(text.contains("`estimate_only: true`"), "{text}");
    assert!(text.contains("`dry_run: true`"), "{text}");
    assert!(!text.contains("{{"), "{text}");

    let report = rpc(
        &app,
        &app.read_key().await,
        &get("weekly_report", &json!({})),
    )
    .await;
    let text = report["result"]["messages"][0]["content"]["text"]
        .as_str()
        .expect("a text");
    assert!(text.contains("the period 7d"), "{text}");
    assert!(text.contains("`period: 7d`"), "{text}");
}

#[tokio::test]
async fn an_unknown_prompt_or_a_bad_argument_is_refused_by_name() {
    let app = spawn_app().await;
    let read = app.read_key().await;
    let cases = [
        (
            &app.key,
            get("weekly", &json!({})),
            vec![
                "`weekly`",
                "prospect_to_sequence, triage_inbox, weekly_report",
            ],
        ),
        // Beyond the credential's scope reads as unknown, as a tool does.
        (
            &read,
            get("review_approvals", &json!({})),
            vec!["`review_approvals`", "weekly_report"],
        ),
        (
            &app.key,
            get("prospect_to_sequence", &json!({})),
            vec!["`audience`", "Who to reach"],
        ),
        (
            &app.key,
            get("weekly_report", &json!({"period": "7d", "sender": "Ann"})),
            vec!["`sender`", "it takes: period"],
        ),
        (
            &app.key,
            get("weekly_report", &json!({"period": 7})),
            vec!["`period`", "text"],
        ),
    ];
    for (key, request, needles) in cases {
        let body = rpc(&app, key, &request).await;
        assert_eq!(body["error"]["code"], -32602, "{request}: {body}");
        let message = body["error"]["message"].as_str().expect("a message");
        for needle in needles {
            assert!(message.contains(needle), "{request}: {message}");
        }
    }
}
