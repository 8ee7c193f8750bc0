//! The views an MCP host draws in the conversation for two tools' results (MCP Apps): the
//! approval queue, where a person approves, rejects or edits what waits, and the dashboard.
//!
//! Each is one HTML document, scripts and styles inline (a host's default policy allows no
//! network), joined here from four files: the head and the theme both views share (`head.html`,
//! which leaves its `<style>` open), the rest of the page and the start of its script
//! (`<view>.html`), the bridge both views share (`bridge.js`), and the view's own script
//! (`<view>.js`). Vanilla
//! JavaScript speaks the extension's protocol with its host over `postMessage`: it renders the
//! tool's `structuredContent` as the host hands it over, and calls tools through the host, with
//! the caller's credential, so it can do nothing the person's own tool calls could not. The
//! runtime points each action's tool at its app and serves the HTML
//! (`outreach_runtime::prelude::mcp_app!`); a host without the extension shows the tool's result
//! as before.

use outreach_runtime::prelude::{McpApp, mcp_app};

mcp_app!(McpApp {
    uri: "ui://outreach/approvals.html",
    action: "list_approvals",
    title: "Approval queue",
    description: "The pending items of the approval queue, each with the person, why they fit \
                  and the drafted texts, to approve, reject or edit in place.",
    html: concat!(
        include_str!("head.html"),
        include_str!("approvals.html"),
        include_str!("bridge.js"),
        include_str!("approvals.js")
    ),
});

mcp_app!(McpApp {
    uri: "ui://outreach/dashboard.html",
    action: "get_dashboard",
    title: "Dashboard",
    description: "The workspace's figures over a period, as cards and tables.",
    html: concat!(
        include_str!("head.html"),
        include_str!("dashboard.html"),
        include_str!("bridge.js"),
        include_str!("dashboard.js")
    ),
});
