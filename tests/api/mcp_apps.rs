//! MCP Apps (`io.modelcontextprotocol/ui`): `service_list_approvals` and `service_get_dashboard`
//! point at their HTML views, which `resources/list` offers to whoever may call the tool and
//! `resources/read` answers as one self-contained `text/html;profile=mcp-app` document; an
//! unknown address is refused naming the known ones, with the code of the client's revision. The
//! tools answer as before. The views themselves run in a real browser in `.ci/browser_check.py`.

use outreach_runtime::apps;
use outreach_runtime::prelude::Scope;
use serde_json::{Value, json};

use crate::helpers::{OWNER_EMAIL, TestApp, spawn_app};
use crate::sequences::send_key;

const APPROVALS: &str = "ui://outreach/approvals.html";
const DASHBOARD: &str = "ui://outreach/dashboard.html";
const MIME_TYPE: &str = "text/html;profile=mcp-app";

async fn rpc(app: &TestApp, key: &str, body: &Value) -> Value {
    let (status, _, body) = app.mcp_at("/api/mcp", Some(key), body, &[]).await;
    assert_eq!(status.as_u16(), 200, "{body}");
    body
}

fn list() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": {}})
}

fn read(uri: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": uri}})
}

#[tokio::test]
async fn each_scope_is_offered_the_apps_of_the_tools_it_can_call() {
    let app = spawn_app().await;
    apps::validate_registered(&app.registry).expect("the apps are consistent");
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let body = rpc(&app, &app.key, &initialize).await;
    let capabilities = &body["result"]["capabilities"];
    assert!(capabilities["resources"].is_object(), "{body}");
    assert_eq!(
        capabilities["extensions"]["io.modelcontextprotocol/ui"],
        json!({}),
        "{body}"
    );

    let read_key = app.read_key().await;
    let write_key = app.create_key(OWNER_EMAIL, Scope::Write).await.key;
    let send = send_key(&app).await;
    for key in [&read_key, &write_key, &send] {
        let body = rpc(&app, key, &list()).await;
        let listed = body["result"]["resources"]
            .as_array()
            .unwrap_or_else(|| panic!("resources: {body}"));
        let uris: Vec<&str> = listed.iter().map(|r| r["uri"].as_str().unwrap()).collect();
        // Both tools need only `read`, so every credential is offered both, in the fixed order.
        assert_eq!(uris, [APPROVALS, DASHBOARD], "{body}");
        for resource in listed {
            assert_eq!(resource["mimeType"], MIME_TYPE, "{resource}");
            assert_eq!(resource["_meta"]["ui"]["prefersBorder"], true, "{resource}");
            assert!(resource["title"].is_string() && resource["description"].is_string());
        }
        assert_eq!(listed[0]["name"], "approvals");
        assert_eq!(listed[1]["name"], "dashboard");
    }
    // Each app is offered to exactly the scopes that may call its action.
    for scope in Scope::ALL {
        let offered: Vec<&str> = apps::offered(&app.registry, scope)
            .map(|app| app.uri)
            .collect();
        let allowed: Vec<&str> = apps::apps()
            .iter()
            .filter(|listed| app.registry.get(listed.action).unwrap().def.scope <= scope)
            .map(|listed| listed.uri)
            .collect();
        assert_eq!(offered, allowed, "{scope:?}");
    }
}

#[tokio::test]
async fn each_app_is_one_html_document_that_loads_nothing_from_the_network() {
    let app = spawn_app().await;
    let key = app.read_key().await;
    for (uri, calls) in [
        (
            APPROVALS,
            &[
                "service_list_approvals",
                "service_approve_outreach",
                "service_reject_outreach",
                "service_update_approval",
            ][..],
        ),
        (DASHBOARD, &["service_get_dashboard"][..]),
    ] {
        let body = rpc(&app, &key, &read(uri)).await;
        let contents = body["result"]["contents"]
            .as_array()
            .unwrap_or_else(|| panic!("contents: {body}"));
        assert_eq!(contents.len(), 1, "{body}");
        let item = &contents[0];
        assert_eq!(item["uri"], uri);
        assert_eq!(item["mimeType"], MIME_TYPE);
        assert_eq!(item["_meta"], json!({"ui": {"prefersBorder": true}}));
        let html = item["text"].as_str().expect("the HTML as text");
        assert!(html.starts_with("<!DOCTYPE html>"), "{uri}");
        assert!(html.trim_end().ends_with("</html>"), "{uri}");
        for scheme in ["http://", "https://", "//cdn", "<link", " src="] {
            assert!(!html.contains(scheme), "{uri} loads `{scheme}`");
        }
        // It speaks the extension's protocol, and renders data as text only.
        for needed in [
            "\"ui/initialize\"",
            "\"2026-01-26\"",
            "\"ui/notifications/initialized\"",
            "\"ui/notifications/tool-result\"",
            "\"ui/notifications/size-changed\"",
            "\"ui/resource-teardown\"",
            "event.source !== host",
        ] {
            assert!(html.contains(needed), "{uri} lacks {needed}");
        }
        assert!(!html.contains("innerHTML"), "{uri} parses data as HTML");
        for tool in calls {
            assert!(html.contains(&format!("\"{tool}\"")), "{uri} calls {tool}");
        }
    }
    let approvals = rpc(&app, &key, &read(APPROVALS)).await;
    let html = approvals["result"]["contents"][0]["text"].as_str().unwrap();
    assert!(
        html.contains("idempotency_key: freshKey()"),
        "every action has its own key"
    );
}

#[tokio::test]
async fn an_unknown_address_is_refused_naming_the_known_ones() {
    let app = spawn_app().await;
    // The code each revision names: -32002 before 2026-07-28, -32602 since (SEP-2164). A client
    // of 2026-07-28 says its version on every request, in `_meta`, and the method and the name
    // in headers (the other headers are harmless to the older revision).
    for (version, code) in [("2025-06-18", -32002), ("2026-07-28", -32602)] {
        let mut nope = read("ui://outreach/nope.html");
        if version == "2026-07-28" {
            nope["params"]["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": version,
                "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            });
        }
        let response = app
            .client
            .post(app.url("/api/mcp"))
            .bearer_auth(&app.key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", version)
            .header("mcp-method", "resources/read")
            .header("mcp-name", "ui://outreach/nope.html")
            .json(&nope)
            .send()
            .await
            .expect("send");
        let status = response.status().as_u16();
        let body: Value = response.json().await.expect("JSON");
        assert_eq!(status, 200, "{version}: {body}");
        assert_eq!(body["error"]["code"], code, "{version}: {body}");
        let message = body["error"]["message"].as_str().expect("a message");
        assert!(
            message.contains("`ui://outreach/nope.html`")
                && message.contains(APPROVALS)
                && message.contains(DASHBOARD),
            "{message}"
        );
        assert_eq!(body["error"]["data"]["uri"], "ui://outreach/nope.html");
    }
}

#[tokio::test]
async fn the_two_tools_point_at_their_apps_and_answer_as_before() {
    let app = spawn_app().await;
    let tools = app.mcp_every_tool().await;
    let mut pointing = Vec::new();
    for tool in &tools {
        let Some(meta) = tool.get("_meta") else {
            continue;
        };
        let uri = meta["ui"]["resourceUri"].as_str().expect("a resource URI");
        assert_eq!(meta["ui/resourceUri"], uri, "{tool}");
        assert_eq!(meta.as_object().map(|meta| meta.len()), Some(2), "{meta}");
        pointing.push((tool["name"].as_str().unwrap(), uri));
    }
    assert_eq!(
        pointing,
        [
            ("service_get_dashboard", DASHBOARD),
            ("service_list_approvals", APPROVALS)
        ]
    );
    // The result is the REST body, as for any tool.
    let (is_error, listed) = app
        .mcp_call(&app.key, "service_list_approvals", json!({}))
        .await;
    assert!(!is_error, "{listed}");
    assert_eq!(listed, *app.get("/approvals", &app.key).await.expect(200));
    let (is_error, dashboard) = app
        .mcp_call(&app.key, "service_get_dashboard", json!({}))
        .await;
    assert!(!is_error, "{dashboard}");
    assert!(dashboard["prospects"]["total"].is_number(), "{dashboard}");
}

/// `resources/list` follows the connection's toolsets as `tools/list` does: the apps of the tools
/// it lists. Reading one needs only the scope, as calling a tool left out of the selection does.
#[tokio::test]
async fn the_apps_listed_follow_the_toolsets_asked_for() {
    let app = spawn_app().await;
    let key = app.read_key().await;
    let listed = |body: &Value| -> Vec<String> {
        body["result"]["resources"]
            .as_array()
            .unwrap_or_else(|| panic!("resources: {body}"))
            .iter()
            .map(|resource| resource["uri"].as_str().expect("a uri").to_owned())
            .collect()
    };
    let (status, _, body) = app
        .mcp_at("/api/mcp?toolsets=prospecting", Some(&key), &list(), &[])
        .await;
    assert_eq!(status.as_u16(), 200, "{body}");
    assert_eq!(
        listed(&body),
        Vec::<String>::new(),
        "no app's tool is in `prospecting`"
    );
    let (_, _, body) = app
        .mcp_at("/api/mcp?toolsets=workspace", Some(&key), &list(), &[])
        .await;
    assert_eq!(listed(&body), vec![DASHBOARD.to_owned()]);
    let (_, _, body) = app
        .mcp_at(
            "/api/mcp?toolsets=prospecting",
            Some(&key),
            &read(APPROVALS),
            &[],
        )
        .await;
    assert_eq!(body["result"]["contents"][0]["uri"], APPROVALS, "{body}");
}
