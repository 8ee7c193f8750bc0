//! MCP Apps (the `io.modelcontextprotocol/ui` extension): an HTML view a host draws in the
//! conversation for a tool's result, so a person reads and acts on it in place.
//!
//! The runtime names no domain here either: the crate of actions declares each app with
//! [`mcp_app!`](crate::mcp_app), giving its `ui://` address, the one action whose result it shows
//! and its HTML. That declaration is the whole link: the MCP face (`mcp/apps.rs`) points the
//! action's tool at the address and serves the HTML as a resource, so a tool and its app cannot
//! disagree. A host without the extension ignores the pointer and the tool answers as it always
//! did; the app gets its data only from the host (the tool's result, and the tools it calls
//! through the host), with the caller's own credential, so it can do nothing the caller cannot.
//!
//! [`validate_registered`] checks at start what would otherwise fail only in a person's host: an
//! address that is not `ui://`, two apps at one address or for one action, an action that does
//! not exist, HTML that is not a whole document or names an `http(s)://` address (a host's
//! default content security policy allows no network, so everything an app uses is inline), and
//! a `service_<action>` tool the HTML calls that no action registers (a renamed action).

use std::sync::OnceLock;

use crate::prompts::tools_named;
use crate::registry::Registry;
use crate::scope::Scope;

/// The extension's identifier, as a server declares it in its capabilities.
pub const EXTENSION_ID: &str = "io.modelcontextprotocol/ui";

/// The MIME type of an app's HTML: hosts render only this one.
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";

/// One app: an HTML view of an action's result.
#[derive(Debug)]
pub struct McpApp {
    /// Its address, `ui://<server>/<name>.html`: the resource's URI.
    pub uri: &'static str,
    /// The action whose tool points at it; the app is offered to whoever may call that action.
    pub action: &'static str,
    /// A short title for `resources/list`.
    pub title: &'static str,
    /// One sentence for `resources/list`.
    pub description: &'static str,
    /// The whole document, `<!DOCTYPE html>` first, with its scripts and styles inline.
    pub html: &'static str,
}

inventory::collect!(McpApp);

/// Declares an app:
///
/// ```ignore
/// outreach_runtime::prelude::mcp_app!(McpApp {
///     uri: "ui://outreach/approvals.html",
///     action: "list_approvals",
///     title: "Approval queue",
///     description: "The pending items, with Approve, Reject and Edit.",
///     html: include_str!("approvals.html"),
/// });
/// ```
#[macro_export]
macro_rules! mcp_app {
    ($app:expr) => {
        $crate::__private::inventory::submit! { $app }
    };
}

/// Every declared app, by address: the fixed order of `resources/list`.
pub fn apps() -> &'static [&'static McpApp] {
    static SORTED: OnceLock<Vec<&'static McpApp>> = OnceLock::new();
    SORTED.get_or_init(|| {
        let mut all: Vec<&'static McpApp> = inventory::iter::<McpApp>.into_iter().collect();
        all.sort_by_key(|app| app.uri);
        all
    })
}

/// The app that shows `action`'s result, if any.
pub fn of_action(action: &str) -> Option<&'static McpApp> {
    apps().iter().copied().find(|app| app.action == action)
}

/// The apps a caller with `scope` is offered: those whose action the scope may call, in the
/// fixed order. An app's action unknown to `registry` is offered to nobody.
pub fn offered(registry: &Registry, scope: Scope) -> impl Iterator<Item = &'static McpApp> {
    apps().iter().copied().filter(move |app| {
        registry
            .get(app.action)
            .is_some_and(|action| action.def.scope <= scope)
    })
}

/// Checks the declarations (see the module header).
pub fn validate_registered(registry: &Registry) -> Result<(), String> {
    let apps = apps();
    for pair in apps.windows(2) {
        if pair[0].uri == pair[1].uri {
            return Err(format!("two apps are declared at `{}`", pair[0].uri));
        }
    }
    for app in apps {
        check_document(app)?;
        let uri = app.uri;
        if registry.get(app.action).is_none() {
            return Err(format!(
                "the app `{uri}` shows `{}`, which is no action",
                app.action
            ));
        }
        if let Some(other) = apps
            .iter()
            .find(|other| other.action == app.action && other.uri != uri)
        {
            return Err(format!(
                "`{}` has two apps, `{uri}` and `{}`; a tool points at one",
                app.action, other.uri
            ));
        }
        for tool in tools_named(app.html) {
            if registry.by_tool_name(tool).is_none() {
                return Err(format!(
                    "the app `{uri}` calls the tool `{tool}`, which no action registers"
                ));
            }
        }
    }
    Ok(())
}

/// What a host needs of one app whatever the actions: a `ui://` address, and a whole document
/// that loads nothing from the network.
fn check_document(app: &McpApp) -> Result<(), String> {
    let uri = app.uri;
    if !uri.starts_with("ui://") {
        return Err(format!(
            "the app `{uri}` must have a `ui://` address, such as `ui://outreach/name.html`"
        ));
    }
    if !app.html.starts_with("<!DOCTYPE html>") {
        return Err(format!(
            "the HTML of the app `{uri}` must start with `<!DOCTYPE html>`"
        ));
    }
    if let Some(at) = ["http://", "https://"]
        .iter()
        .filter_map(|scheme| app.html.find(scheme))
        .min()
    {
        let line = app.html[..at].matches('\n').count() + 1;
        return Err(format!(
            "the HTML of the app `{uri}` names an address at line {line}; a host's default \
             content security policy allows no network, so inline what it needs"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(uri: &'static str, html: &'static str) -> McpApp {
        McpApp {
            uri,
            action: "list_things",
            title: "Things",
            description: "The things.",
            html,
        }
    }

    #[test]
    fn a_document_with_a_ui_address_that_loads_nothing_passes() {
        let page = "<!DOCTYPE html>\n<html><body><script>1</script></body></html>";
        assert_eq!(
            check_document(&app("ui://outreach/things.html", page)),
            Ok(())
        );
    }

    #[test]
    fn a_foreign_address_a_fragment_or_a_network_load_is_refused() {
        let page = "<!DOCTYPE html>\n<html>";
        assert_eq!(
            check_document(&app("https://example.org/things.html", page)),
            Err(
                "the app `https://example.org/things.html` must have a `ui://` address, such as \
                 `ui://outreach/name.html`"
                    .to_owned()
            )
        );
        assert_eq!(
            check_document(&app("ui://outreach/things.html", "<html></html>")),
            Err(
                "the HTML of the app `ui://outreach/things.html` must start with \
                 `<!DOCTYPE html>`"
                    .to_owned()
            )
        );
        let loads =
            "<!DOCTYPE html>\n<html>\n<script src=\"https://cdn.example/x.js\"></script> http://x";
        let refused = check_document(&app("ui://outreach/things.html", loads)).unwrap_err();
        assert!(refused.contains("names an address at line 3"), "{refused}");
    }
}
