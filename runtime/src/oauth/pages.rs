//! The authorization endpoint's pages: an error page, the workspace chooser and the consent page.
//!
//! Every page is `no-store` (it carries a CSRF token and the request's parameters) and refuses to
//! be framed (`frame-ancestors 'none'`, `X-Frame-Options: DENY`): a consent page inside another
//! site's invisible frame is the clickjacking attack of RFC 9700 section 4.4.1.9.

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use crate::error::ApiError;
use crate::scope::Scope;

#[derive(Template)]
#[template(path = "oauth/error.html")]
struct ErrorPage<'a> {
    heading: &'a str,
    message: &'a str,
}

impl ErrorPage<'_> {
    fn message_html(&self) -> String {
        code_spans(self.message)
    }
}

fn escape_html(text: &str) -> String {
    // askama's HTML escaper, the one the page templates use.
    match askama::filters::escape(text, askama::filters::Html) {
        Ok(escaped) => escaped.to_string(),
        Err(never) => match never {},
    }
}

/// A sentence as HTML: escaped first, then each pair of backticks (the API's way of marking
/// code in its sentences) turned into `<code>`. An unpaired backtick is dropped rather than shown.
pub fn code_spans(text: &str) -> String {
    let parts: Vec<&str> = text.split('`').collect();
    let paired = parts.len() % 2 == 1;
    let mut out = String::with_capacity(text.len() + 16);
    for (index, part) in parts.iter().enumerate() {
        let escaped = escape_html(part);
        if index % 2 == 1 && (paired || index + 1 < parts.len()) {
            out.push_str("<code>");
            out.push_str(&escaped);
            out.push_str("</code>");
        } else {
            out.push_str(&escaped);
        }
    }
    out
}

/// A workspace in the chooser.
pub struct WorkspaceChoice {
    pub id: String,
    pub name: String,
    pub role: String,
}

#[derive(Template)]
#[template(path = "oauth/choose_workspace.html")]
pub struct ChooseWorkspace<'a> {
    pub client_name: &'a str,
    pub email: &'a str,
    pub hidden: &'a [(String, String)],
    pub workspaces: &'a [WorkspaceChoice],
}

/// A scope line on the consent page: what it allows, or why it is refused.
pub struct ScopeLine {
    pub name: &'static str,
    pub text: String,
}

impl ScopeLine {
    /// The text as HTML, with its `code` spans.
    pub fn html(&self) -> String {
        code_spans(&self.text)
    }

    pub fn granted(scope: Scope) -> Self {
        let text = match scope {
            Scope::Read => "see the workspace, its prospects, lists, targeting and scores",
            Scope::Write => {
                "create and change prospects, lists and imports, and run work that spends the workspace's credits"
            }
            Scope::Send => "send outreach on the workspace's behalf",
        };
        Self {
            name: scope.as_str(),
            text: text.to_owned(),
        }
    }
}

#[derive(Template)]
#[template(path = "oauth/consent.html")]
pub struct Consent<'a> {
    pub client_name: &'a str,
    pub source: &'a str,
    pub redirect_host: &'a str,
    pub loopback: bool,
    pub email: &'a str,
    pub workspace_id: &'a str,
    pub workspace_name: &'a str,
    pub granted: &'a [ScopeLine],
    pub refused: &'a [ScopeLine],
    pub hidden: &'a [(String, String)],
    pub csrf_token: &'a str,
    /// What the app's MCP address may ask to be shown (`?toolsets=`, `/api/mcp/readonly`).
    pub toolsets: &'a [&'static crate::toolsets::Toolset],
}

/// Renders a page with the security headers.
pub fn render(status: StatusCode, template: &impl Template) -> Response {
    match template.render() {
        Ok(body) => {
            let mut response = (status, Html(body)).into_response();
            let headers = response.headers_mut();
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static("frame-ancestors 'none'"),
            );
            headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
            headers.insert(
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            );
            response
        }
        Err(error) => ApiError::internal(format!("template: {error}"))
            .log("oauth")
            .into_response(),
    }
}

/// An error shown to the person in the browser, never sent to the client's redirect URI.
pub fn error(status: StatusCode, heading: &str, message: &str) -> Response {
    render(status, &ErrorPage { heading, message })
}

/// A fault on our side, as a page.
pub fn internal(error: ApiError) -> Response {
    let error = error.log("oauth");
    self::error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Something went wrong",
        &error.message,
    )
}

#[cfg(test)]
mod tests {
    use super::code_spans;

    #[test]
    fn backticks_become_code_after_escaping() {
        assert_eq!(
            code_spans("a `<b>` and `c`"),
            "a <code>&#60;b&#62;</code> and <code>c</code>"
        );
        assert_eq!(code_spans("odd ` one"), "odd  one");
        assert_eq!(code_spans("none"), "none");
    }
}
