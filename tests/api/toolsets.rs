//! Which tools an MCP connection is offered: the credential's scopes, the toolsets it asks for
//! (`?toolsets=` or `X-MCP-Toolsets`, the default ones otherwise), and the read-only connection.
//! The expected lists are worked out from the registry and the declared toolsets, not copied, so
//! a new action is covered the day it is registered.

use outreach_runtime::Scope;
use outreach_runtime::registry::Action;
use outreach_runtime::toolsets::{self, toolset_of};
use serde_json::{Value, json};

use crate::helpers::{TestApp, spawn_app, spawn_app_with};
use crate::sequences::send_key;

fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|tool| tool["name"].as_str().expect("a name").to_owned())
        .collect()
}

/// The tools, in registry order, of the actions `keep` keeps.
fn expected(app: &TestApp, keep: impl Fn(&Action) -> bool) -> Vec<String> {
    app.registry
        .actions()
        .iter()
        .filter(|action| keep(action))
        .map(|action| action.tool_name())
        .collect()
}

/// What a caller with `scope` may call: within its scope, or with a switch that makes the call a
/// preview needing only `read` (a priced action's `estimate_only`, a declared `dry_run`).
fn callable(action: &Action, scope: Scope) -> bool {
    action.def.scope <= scope || action.preview_switch().is_some()
}

fn in_toolsets(action: &Action, wanted: &[&str]) -> bool {
    toolset_of(action).is_some_and(|name| wanted.contains(&name))
}

fn default_toolsets() -> Vec<&'static str> {
    toolsets::toolsets()
        .iter()
        .filter(|toolset| toolset.default)
        .map(|toolset| toolset.name)
        .collect()
}

fn list() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
}

fn call(tool: &str, arguments: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
}

#[tokio::test]
async fn every_resource_is_placed_in_a_declared_toolset() {
    let app = spawn_app().await;
    toolsets::validate_registered(&app.registry).expect("every tag placed in a toolset");
    for action in app.registry.actions() {
        assert!(
            toolset_of(action).is_some(),
            "`{}` is in no toolset",
            action.name()
        );
    }
}

#[tokio::test]
async fn each_scope_is_offered_exactly_the_tools_it_may_call() {
    let app = spawn_app().await;
    let read = app.read_key().await;
    let write = app.key.clone();
    let send = send_key(&app).await;
    for (scope, key) in [
        (Scope::Read, &read),
        (Scope::Write, &write),
        (Scope::Send, &send),
    ] {
        let tools = app.mcp_tools(key).await;
        let bytes: usize = tools.iter().map(|tool| tool.to_string().len()).sum();
        println!(
            "{scope}, every toolset: {} tools, {bytes} bytes",
            tools.len()
        );
        assert_eq!(
            names(&tools),
            expected(&app, |action| callable(action, scope)),
            "the tools a {scope} key is offered"
        );
        for tool in &tools {
            let action = app
                .registry
                .by_tool_name(tool["name"].as_str().expect("a name"))
                .expect("a tool of an action");
            let description = tool["description"].as_str().expect("a description");
            let note = action
                .preview_switch()
                .map(|switch| format!("allow only `{switch}: true` here"));
            assert_eq!(
                action.def.scope > scope,
                note.is_some_and(|note| description.contains(&note)),
                "{} for a {scope} key: {description}",
                action.name()
            );
        }
    }
}

#[tokio::test]
async fn a_connection_that_names_no_toolset_gets_the_default_ones_within_forty_tools() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let defaults = default_toolsets();
    let (status, _, body) = app.mcp_at("/api/mcp", Some(&send), &list(), &[]).await;
    assert_eq!(status.as_u16(), 200, "{body}");
    let tools = body["result"]["tools"].as_array().expect("tools").clone();
    let bytes = body["result"].to_string().len();
    println!(
        "default set ({}): {} tools, {bytes} bytes of tools/list",
        defaults.join(", "),
        tools.len()
    );
    assert_eq!(
        names(&tools),
        expected(&app, |action| in_toolsets(action, &defaults))
    );
    assert!(
        tools.len() <= 40,
        "{} tools in the default set",
        tools.len()
    );
    // Issue 28's budget for the default set: at most 40 KB, counted as 40,000 bytes.
    assert!(
        bytes <= 40_000,
        "the default set's tools/list is {bytes} bytes; the budget is 40,000"
    );
    // The same list, in the same order, every time.
    assert_eq!(
        names(&app.mcp_tools_at("/api/mcp", &send, &[]).await),
        names(&tools)
    );

    // The instructions say how to be offered more.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let (_, _, body) = app.mcp_at("/api/mcp", Some(&send), &initialize, &[]).await;
    let instructions = body["result"]["instructions"]
        .as_str()
        .expect("instructions");
    for needed in [
        "`idempotency_key` makes a retry safe",
        "`next_offset`",
        "`fields` keeps only",
        "?toolsets=",
        "X-MCP-Toolsets",
        "/api/mcp/readonly",
        "`prospecting`",
    ] {
        assert!(instructions.contains(needed), "{needed}: {instructions}");
    }
}

#[tokio::test]
async fn toolsets_are_picked_on_the_url_or_in_a_header_and_both_count() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let only =
        |wanted: &'static [&'static str]| expected(&app, move |action| in_toolsets(action, wanted));
    assert_eq!(
        names(
            &app.mcp_tools_at("/api/mcp?toolsets=prospecting", &send, &[])
                .await
        ),
        only(&["prospecting"])
    );
    assert_eq!(
        names(
            &app.mcp_tools_at("/api/mcp", &send, &[("x-mcp-toolsets", "agents")])
                .await
        ),
        only(&["agents"])
    );
    assert_eq!(
        names(
            &app.mcp_tools_at(
                "/api/mcp?toolsets=Prospecting,%20outreach",
                &send,
                &[("x-mcp-toolsets", "agents")]
            )
            .await
        ),
        only(&["prospecting", "outreach", "agents"])
    );
    assert_eq!(
        names(&app.mcp_tools_at("/api/mcp?toolsets=all", &send, &[]).await),
        expected(&app, |_| true)
    );
    // A tool left out of the selection is still the credential's to call by name.
    let (status, _, body) = app
        .mcp_at(
            "/api/mcp?toolsets=agents",
            Some(&send),
            &call("service_list_prospects", &json!({})),
            &[],
        )
        .await;
    assert_eq!(status.as_u16(), 200, "{body}");
    assert_eq!(body["result"]["isError"], json!(false), "{body}");

    // rmcp's own path offers the same lists as the fast path in front of it.
    let slow = spawn_app_with(|config| config.mcp_fast_path = false).await;
    let slow_send = send_key(&slow).await;
    for path in [
        "/api/mcp",
        "/api/mcp?toolsets=prospecting,agents",
        "/api/mcp/readonly",
    ] {
        assert_eq!(
            names(&slow.mcp_tools_at(path, &slow_send, &[]).await),
            names(&app.mcp_tools_at(path, &send, &[]).await),
            "{path}"
        );
    }
}

#[tokio::test]
async fn the_read_only_connection_offers_and_calls_only_what_changes_nothing() {
    let app = spawn_app().await;
    let send = send_key(&app).await;
    let defaults = default_toolsets();
    let read_only = expected(&app, |action| {
        action.is_read_only() && in_toolsets(action, &defaults)
    });
    assert!(!read_only.is_empty());
    assert_eq!(
        names(&app.mcp_tools_at("/api/mcp/readonly", &send, &[]).await),
        read_only
    );
    assert_eq!(
        names(&app.mcp_tools_at("/api/mcp?readonly=true", &send, &[]).await),
        read_only
    );
    assert_eq!(
        names(
            &app.mcp_tools_at("/api/mcp/readonly?toolsets=all", &send, &[])
                .await
        ),
        expected(&app, |action| action.is_read_only())
    );

    let before = app.prospect_count().await;
    for path in ["/api/mcp/readonly", "/api/mcp?readonly=true"] {
        let (status, _, body) = app
            .mcp_at(
                path,
                Some(&send),
                &call(
                    "service_create_prospect",
                    &json!({"first_name": "Ada", "last_name": "Lovelace"}),
                ),
                &[],
            )
            .await;
        assert_eq!(status.as_u16(), 200, "{body}");
        assert_eq!(body["error"]["code"], json!(-32602), "{body}");
        let message = body["error"]["message"].as_str().expect("a message");
        assert!(message.contains("read-only"), "{message}");
    }
    assert_eq!(app.prospect_count().await, before, "nothing was created");
    let (_, _, body) = app
        .mcp_at(
            "/api/mcp/readonly",
            Some(&send),
            &call("service_list_prospects", &json!({})),
            &[],
        )
        .await;
    assert_eq!(body["result"]["isError"], json!(false), "{body}");
}

#[tokio::test]
async fn an_unknown_toolset_is_a_400_that_names_the_valid_ones_and_does_nothing() {
    let app = spawn_app().await;
    let before = app.prospect_count().await;
    let create = call(
        "service_create_prospect",
        &json!({"first_name": "Ada", "last_name": "Lovelace"}),
    );
    for (path, headers, named) in [
        ("/api/mcp?toolsets=prospects", vec![], "`prospects`"),
        ("/api/mcp?toolsets=outreach,nope", vec![], "`nope`"),
        ("/api/mcp", vec![("x-mcp-toolsets", "leads")], "`leads`"),
        ("/api/mcp?toolsets=", vec![], "names no toolset"),
        ("/api/mcp?readonly=maybe", vec![], "`readonly`"),
    ] {
        for body in [list(), create.clone()] {
            let (status, _, answer) = app.mcp_at(path, Some(&app.key), &body, &headers).await;
            assert_eq!(status.as_u16(), 400, "{path} {headers:?}: {answer}");
            assert_eq!(answer["code"], json!("invalid_request"), "{answer}");
            let message = answer["error"].as_str().expect("a sentence");
            assert!(message.contains(named), "{message}");
            if named != "`readonly`" {
                for valid in [
                    "`agents`",
                    "`outreach`",
                    "`prospecting`",
                    "`sandbox`",
                    "`workspace`",
                    "`all`",
                ] {
                    assert!(message.contains(valid), "{valid}: {message}");
                }
            }
        }
    }
    assert_eq!(app.prospect_count().await, before, "nothing was created");
}
