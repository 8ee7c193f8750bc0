//! The MCP face of the apps (`crate::apps`): the pointer on a tool, and the app as a resource.
//!
//! A tool whose action has an app carries `_meta.ui.resourceUri`, and the flat
//! `_meta["ui/resourceUri"]` that hosts written against the extension's first drafts read; its
//! result is unchanged, so a host without the extension shows what it always did. `initialize`
//! declares resources and the extension. `resources/list` lists the apps of the tools the
//! connection lists (the caller's scope and the toolsets it asked for), in the fixed order, and `resources/read` answers one as a single
//! `text/html;profile=mcp-app` item asking for a border. An address the caller is not offered
//! (unknown, or the app of a tool beyond its scope) is refused alike, naming the ones it may read,
//! with rmcp's resource-not-found: -32602 for a client of 2026-07-28 or later (SEP-2164) and
//! -32002, the code the earlier revisions named, for the others.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ListResourcesResult, MetaObject, ReadResourceResult, Resource, ResourceContents,
    ServerCapabilities,
};
use serde_json::{Value, json};

use super::Selection;
use crate::apps::{self, EXTENSION_ID, MIME_TYPE, McpApp};
use crate::registry::Registry;
use crate::scope::Scope;

/// The `_meta` of the tool of `action`: the address of its app, if it has one.
pub fn tool_meta(action: &str) -> Option<MetaObject> {
    let app = apps::of_action(action)?;
    let mut meta = MetaObject::new();
    meta.insert("ui".to_owned(), json!({"resourceUri": app.uri}));
    meta.insert("ui/resourceUri".to_owned(), Value::from(app.uri));
    Some(meta)
}

/// Declares the extension when there is an app to offer.
pub(super) fn declare(capabilities: &mut ServerCapabilities) {
    if !apps::apps().is_empty() {
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(EXTENSION_ID.to_owned(), Default::default());
    }
}

/// `resources/list` for a caller with `scope` on a connection offered `selection`: the apps of
/// the tools it lists. (Reading one needs only the scope, as calling a tool left out of the
/// selection does.)
pub(super) fn listed(
    registry: &Registry,
    scope: Scope,
    selection: Selection,
) -> ListResourcesResult {
    ListResourcesResult::with_all_items(
        apps::offered(registry, scope)
            .filter(|app| {
                registry
                    .get(app.action)
                    .is_some_and(|action| selection.includes(action))
            })
            .map(|app| {
                Resource::new(app.uri, name(app))
                    .with_title(app.title)
                    .with_description(app.description)
                    .with_mime_type(MIME_TYPE)
                    .with_size(app.html.len() as u64)
                    .with_meta(ui_meta())
            })
            .collect(),
    )
}

/// `resources/read` of `uri` for a caller with `scope`.
pub(super) fn read(
    registry: &Registry,
    scope: Scope,
    uri: &str,
) -> Result<ReadResourceResult, McpError> {
    let Some(app) = apps::offered(registry, scope).find(|app| app.uri == uri) else {
        let known: Vec<String> = apps::offered(registry, scope)
            .map(|app| format!("`{}`", app.uri))
            .collect();
        let known = match known.is_empty() {
            true => "this credential may read none".to_owned(),
            false => format!("the ones this credential may read are {}", known.join(", ")),
        };
        return Err(McpError::resource_not_found(
            format!("There is no resource `{uri}`; {known}."),
            Some(json!({"uri": uri})),
        ));
    };
    Ok(ReadResourceResult::new(vec![
        ResourceContents::text(app.html, app.uri)
            .with_mime_type(MIME_TYPE)
            .with_meta(ui_meta()),
    ]))
}

/// The resource's programmatic name: its address's last segment, `approvals` for
/// `ui://outreach/approvals.html`.
fn name(app: &McpApp) -> &'static str {
    let file = app.uri.rsplit('/').next().unwrap_or(app.uri);
    file.strip_suffix(".html").unwrap_or(file)
}

/// What every app asks of its host: a visible border and background, since it is a panel of
/// its own in the conversation rather than part of the text.
fn ui_meta() -> MetaObject {
    let mut meta = MetaObject::new();
    meta.insert("ui".to_owned(), json!({"prefersBorder": true}));
    meta
}
