//! The web pages: a landing page, sign-in and the settings area (API keys, connected apps,
//! members, credits, webhook endpoints, sending terms, the person's password).
//!
//! Server-rendered HTML from compile-time templates (askama, `runtime/templates/`), one small
//! hand-written stylesheet and one tiny script built into the binary, nothing from anywhere else,
//! so the Content-Security-Policy can be `default-src 'self'` with no inline script at all. Every
//! page reads its [`Session`] from the database (nothing is cached in a process, so a
//! removal or a sign-out holds on every instance), and every form carries a CSRF token.
//!
//! Handlers return `Result<Response, PageError>`: a refusal is a page with the right status code
//! (400 bad input with the form shown again, 403, 404, 409, 429) rather than JSON, and an internal
//! fault is logged and shown as a generic 500 page. The rules of who may do what live next to the
//! SQL in [`crate::admin`], which the CLI shares, or, for the webhooks page, in the actions it
//! calls through the one dispatch; the pages only add the checks a browser form needs (CSRF, the
//! role of the signed-in person, ids of another workspace answering 404).

use std::sync::Arc;

use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use sqlx::Row;

use crate::error::ApiError;
use crate::scope::Role;
use crate::session::{self, Session};
use crate::state::AppState;

mod acting;
mod approvals;
mod apps;
mod assets;
mod credits;
mod keys;
mod login;
mod members;
mod password;
mod terms;
mod webhooks;

/// The routes of the web pages (`/login`, `/logout`, `/settings/...`, `/assets/...`).
pub fn routes(state: Arc<AppState>) -> Router<Arc<AppState>> {
    login::warm_up();
    let pages = Router::new()
        .route("/", get(landing))
        .route("/login", get(login::show).post(login::submit))
        .route("/logout", post(login::logout))
        .route("/settings", get(settings_home))
        .route("/approvals", get(approvals::show))
        .route("/approvals/{item_id}/approve", post(approvals::approve))
        .route("/approvals/{item_id}/reject", post(approvals::reject))
        .route("/approvals/{item_id}/edit", post(approvals::edit))
        .route("/settings/workspace", post(login::switch_workspace))
        .route("/settings/api", get(keys::show))
        .route("/settings/api/keys", post(keys::create))
        .route(
            "/settings/api/keys/{key_id}/revoke",
            get(keys::confirm_revoke).post(keys::revoke),
        )
        .route(
            "/settings/apps/{grant_id}/disconnect",
            get(apps::confirm_disconnect).post(apps::disconnect),
        )
        .route(
            "/settings/sending-terms",
            get(terms::show).post(terms::accept),
        )
        .route("/settings/members", get(members::show).post(members::add))
        .route(
            "/settings/members/{person_id}/role",
            post(members::set_role),
        )
        .route(
            "/settings/members/{person_id}/remove",
            get(members::confirm_remove).post(members::remove),
        )
        .route(
            "/settings/password",
            get(password::show).post(password::change),
        )
        .route("/settings/credits", get(credits::show))
        .route(
            "/settings/webhooks",
            get(webhooks::show).post(webhooks::create),
        )
        .route(
            "/settings/webhooks/{endpoint_id}/test",
            post(webhooks::test),
        )
        .route(
            "/settings/webhooks/{endpoint_id}/rotate",
            post(webhooks::rotate),
        )
        .route(
            "/settings/webhooks/{endpoint_id}/enabled",
            post(webhooks::set_enabled),
        )
        .route(
            "/settings/webhooks/{endpoint_id}/delete",
            get(webhooks::confirm_delete).post(webhooks::delete),
        )
        .layer(middleware::from_fn_with_state(state, message_with_nav))
        .layer(middleware::map_response(page_headers));
    Router::new()
        .route("/assets/app.css", get(assets::stylesheet))
        .route("/assets/app.js", get(assets::script))
        .route("/assets/docs.css", get(assets::docs_stylesheet))
        .route("/assets/favicon.svg", get(assets::favicon))
        .route("/favicon.ico", get(assets::favicon))
        .merge(pages)
}

#[derive(Template)]
#[template(path = "web/landing.html")]
struct LandingPage {
    signed_in: bool,
}

/// `GET /`: a page with two ways on, the API docs and sign-in (or the settings when signed in).
/// A page rather than a redirect because `/` is where both kinds of visitor arrive: a developer
/// who wants the reference and a person who wants their keys; a redirect would pick for them.
async fn landing(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let signed_in = session::current(&state, &headers).await?.is_some();
    Ok(render(StatusCode::OK, &LandingPage { signed_in }))
}

/// The facts of a message page, left on its response so [`message_with_nav`] can render it
/// again with the signed-in header.
#[derive(Debug, Clone)]
struct MessageParts {
    title: String,
    message: String,
    back: String,
}

/// Gives every message page (refusals, not-found, faults) the navigation of the signed-in
/// person, when there is one: whichever handler refused, the person keeps their way around.
/// One place rather than every call site, so no refusal can forget it; the extra lookup is paid
/// by error pages only.
async fn message_with_nav(
    State(state): State<Arc<AppState>>,
    request: axum::extract::Request,
    next: middleware::Next,
) -> Response {
    let headers = request.headers().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let Some(parts) = response.extensions().get::<MessageParts>().cloned() else {
        return response;
    };
    let Ok(signed) = signed_in(&state, &headers, &path).await else {
        return response;
    };
    let nav = signed.nav("", "/settings/api");
    let (head, _) = response.into_parts();
    let page = render(
        head.status,
        &MessagePage {
            nav: Some(nav),
            title: &parts.title,
            message: &parts.message,
            back: &parts.back,
        },
    );
    let (mut page_head, body) = page.into_parts();
    // Keep what the handler set (a `Retry-After`, a cookie), with the new body's length.
    for (name, value) in &head.headers {
        if name != header::CONTENT_LENGTH {
            page_head.headers.insert(name.clone(), value.clone());
        }
    }
    Response::from_parts(page_head, body)
}

async fn settings_home() -> Response {
    see_other("/settings/api")
}

/// The headers of every page: never cached (a page may show a key's value once, and every page
/// carries the session's CSRF token), never framed (clickjacking a Revoke or Accept button), and
/// no script or style from anywhere but this origin.
pub async fn page_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let set = [
        (header::CACHE_CONTROL, "no-store"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
    ];
    for (name, value) in set {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Renders a template as an HTML response with a status.
pub fn render<T: Template>(status: StatusCode, template: &T) -> Response {
    match template.render() {
        Ok(html) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            html,
        )
            .into_response(),
        Err(error) => {
            tracing::error!(%error, "could not render a page");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "could not render the page",
            )
                .into_response()
        }
    }
}

/// A `303 See Other` to a path of this site. A path that is not a valid header value (it cannot
/// be: callers pass fixed paths or [`safe_next`] output) falls back to the settings page.
pub fn see_other(location: &str) -> Response {
    let value = HeaderValue::from_str(location)
        .unwrap_or_else(|_| HeaderValue::from_static("/settings/api"));
    (StatusCode::SEE_OTHER, [(header::LOCATION, value)]).into_response()
}

/// A `next` value that stays on this site: a path starting with one `/` (not `//` or `/\`, which
/// browsers read as another host) and no control characters. Characters a `Location` header
/// cannot carry verbatim are percent-encoded; existing escapes (a long `/oauth/authorize?...`)
/// are kept as they are.
pub fn safe_next(next: &str) -> Option<String> {
    let bytes = next.as_bytes();
    let same_origin = bytes.first() == Some(&b'/')
        && !matches!(bytes.get(1), Some(b'/' | b'\\'))
        && !next.chars().any(char::is_control);
    if !same_origin {
        return None;
    }
    let mut out = String::with_capacity(next.len());
    for byte in next.bytes() {
        if byte.is_ascii_graphic() && !matches!(byte, b'"' | b'<' | b'>' | b'\\' | b'`') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    Some(out)
}

/// `/login?next=<path>`, where a signed-out visitor is sent.
pub fn login_url(next: &str) -> String {
    format!("/login?next={}", encode_component(next))
}

/// Percent-encodes a query component.
fn encode_component(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// Formats epoch milliseconds for people: `2026-11-21 14:03 UTC`.
pub fn display_time(ms: i64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    let time = time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let format = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute] UTC");
    time.format(&format).unwrap_or_default()
}

/// A submitted `application/x-www-form-urlencoded` body. Parsed by hand rather than with
/// `axum::Form` so a missing field is a 400 page with the form shown again (not a bare 422),
/// and so repeated fields (the scope checkboxes) are all kept.
#[derive(Debug, Default)]
pub struct FormData(Vec<(String, String)>);

impl FormData {
    pub fn parse(body: &[u8]) -> Self {
        Self(url::form_urlencoded::parse(body).into_owned().collect())
    }

    /// The first value of a field, or `""`.
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map_or("", |(_, value)| value.as_str())
    }

    /// Every value of a repeated field.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .collect()
    }
}

/// A page that is not the one asked for: a redirect, a refusal, or a fault.
#[derive(Debug)]
pub enum PageError {
    /// `303` elsewhere (to `/login` when signed out).
    Redirect(String),
    /// A page with one message, e.g. 403 for a forged form or 404 for another workspace's id.
    Message {
        status: StatusCode,
        title: String,
        message: String,
        back: String,
    },
    /// Signed in but in no workspace any more.
    NoWorkspace(Box<Session>),
    /// A fault on our side, logged.
    Internal(Box<ApiError>),
}

impl PageError {
    pub fn message(status: StatusCode, title: &str, message: impl Into<String>) -> Self {
        Self::Message {
            status,
            title: title.to_owned(),
            message: message.into(),
            back: "/settings/api".to_owned(),
        }
    }

    pub fn back_to(mut self, href: &str) -> Self {
        if let Self::Message { back, .. } = &mut self {
            href.clone_into(back);
        }
        self
    }

    /// The 403 of a form whose CSRF token is not this session's: nothing was changed.
    pub fn forged() -> Self {
        Self::message(
            StatusCode::FORBIDDEN,
            "Form refused",
            "This form was not sent by a page of this site (its security token does not match), \
             so nothing was changed. Go back, reload the page and try again.",
        )
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::message(StatusCode::FORBIDDEN, "Not allowed", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::message(StatusCode::NOT_FOUND, "Not found", message)
    }

    /// An error of [`crate::admin`]: its sentence is for people unless the database failed.
    pub fn admin(status: StatusCode, error: &anyhow::Error) -> Self {
        if error.downcast_ref::<sqlx::Error>().is_some() {
            return Self::Internal(Box::new(ApiError::internal(format!("{error:#}"))));
        }
        Self::message(status, "Not done", sentence(&error.to_string()))
    }
}

/// An operator sentence of `admin` as a page sentence: capitalized, with a full stop.
pub fn sentence(text: &str) -> String {
    let mut chars = text.chars();
    let mut out: String = match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    };
    if !out.ends_with('.') {
        out.push('.');
    }
    out
}

impl From<ApiError> for PageError {
    fn from(error: ApiError) -> Self {
        Self::Internal(Box::new(error))
    }
}

impl From<sqlx::Error> for PageError {
    fn from(error: sqlx::Error) -> Self {
        Self::Internal(Box::new(error.into()))
    }
}

#[derive(Template)]
#[template(path = "web/message.html")]
struct MessagePage<'a> {
    nav: Option<Nav>,
    title: &'a str,
    message: &'a str,
    back: &'a str,
}

impl MessagePage<'_> {
    /// The sentence with its `code` spans as `<code>` (API and admin sentences mark code so).
    fn message_html(&self) -> String {
        crate::oauth::code_spans(self.message)
    }
}

/// A message page's response, carrying its facts for [`message_with_nav`].
fn message_page(status: StatusCode, parts: MessageParts) -> Response {
    let mut response = render(
        status,
        &MessagePage {
            nav: None,
            title: &parts.title,
            message: &parts.message,
            back: &parts.back,
        },
    );
    response.extensions_mut().insert(parts);
    response
}

#[derive(Template)]
#[template(path = "web/no_workspace.html")]
struct NoWorkspacePage<'a> {
    email: &'a str,
    csrf_token: &'a str,
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            Self::Redirect(location) => see_other(&location),
            Self::Message {
                status,
                title,
                message,
                back,
            } => message_page(
                status,
                MessageParts {
                    title,
                    message,
                    back,
                },
            ),
            Self::NoWorkspace(session) => render(
                StatusCode::OK,
                &NoWorkspacePage {
                    email: &session.email,
                    csrf_token: &session.csrf_token,
                },
            ),
            Self::Internal(error) => {
                tracing::error!(
                    cause = error.internal.as_deref().unwrap_or(&error.message),
                    "internal error on a page"
                );
                message_page(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    MessageParts {
                        title: "Something went wrong".to_owned(),
                        message: "Something went wrong on our side. Try again in a moment."
                            .to_owned(),
                        back: "/settings/api".to_owned(),
                    },
                )
            }
        }
    }
}

/// One of the signed-in person's workspaces, for the switcher.
#[derive(Debug, Clone)]
pub struct WorkspaceChoice {
    pub id: String,
    pub name: String,
    pub current: bool,
}

/// A signed-in person looking at one of their workspaces.
#[derive(Debug, Clone)]
pub struct SignedIn {
    pub session: Session,
    pub workspace_id: String,
    pub workspace_name: String,
    pub role: Role,
    pub terms_accepted: bool,
    pub workspaces: Vec<WorkspaceChoice>,
}

impl SignedIn {
    /// The page header's data; `section` marks the current nav link, `path` is where the
    /// workspace switcher comes back to.
    pub fn nav(&self, section: &'static str, path: &str) -> Nav {
        Nav {
            email: self.session.email.clone(),
            workspace_id: self.workspace_id.clone(),
            workspace_name: self.workspace_name.clone(),
            role: self.role.as_str(),
            workspaces: self.workspaces.clone(),
            csrf_token: self.session.csrf_token.clone(),
            section,
            path: path.to_owned(),
        }
    }

    pub fn can_manage(&self) -> bool {
        self.role.can_manage()
    }

    /// Refuses a POST whose CSRF token is not this session's.
    pub fn check_csrf(&self, form: &FormData) -> Result<(), PageError> {
        if self.session.csrf_matches(form.get("csrf_token")) {
            Ok(())
        } else {
            Err(PageError::forged())
        }
    }
}

/// The header of a signed-in page.
#[derive(Debug, Clone)]
pub struct Nav {
    pub email: String,
    /// The workspace the page shows, for forms that must act there and nowhere else.
    pub workspace_id: String,
    pub workspace_name: String,
    pub role: &'static str,
    pub workspaces: Vec<WorkspaceChoice>,
    pub csrf_token: String,
    pub section: &'static str,
    pub path: String,
}

/// A posted form of a signed-in page: the person (or a redirect to sign-in that comes back to
/// `next`) and the form, whose CSRF token has been checked. Every POST behind sign-in starts here,
/// so none can forget the check.
pub async fn signed_in_form(
    state: &AppState,
    headers: &HeaderMap,
    body: &[u8],
    next: &str,
) -> Result<(SignedIn, FormData), PageError> {
    let form = FormData::parse(body);
    let signed = signed_in(state, headers, next).await?;
    signed.check_csrf(&form)?;
    Ok((signed, form))
}

/// [`signed_in_form`] for a page whose forms act in the workspace they were shown for (their
/// `workspace_id` field): a POST after the person switched workspace in another tab is refused,
/// a `409` that leads back to `page`, rather than applied to the other one.
pub async fn signed_in_workspace_form(
    state: &AppState,
    headers: &HeaderMap,
    body: &[u8],
    page: &str,
) -> Result<(SignedIn, FormData), PageError> {
    let (signed, form) = signed_in_form(state, headers, body, page).await?;
    if form.get("workspace_id") != signed.workspace_id {
        return Err(PageError::message(
            StatusCode::CONFLICT,
            "Workspace changed",
            format!(
                "This form was shown for another workspace than the one you are in now \
                 ({}), so nothing was changed. Reload the page and try again.",
                signed.workspace_name
            ),
        )
        .back_to(page));
    }
    Ok((signed, form))
}

/// The signed-in person of this request and their current workspace, or a redirect to sign-in
/// that comes back to `next`. A session whose workspace is gone (the person was removed from it)
/// moves to the person's oldest remaining workspace.
pub async fn signed_in(
    state: &AppState,
    headers: &HeaderMap,
    next: &str,
) -> Result<SignedIn, PageError> {
    let Some(session) = session::current(state, headers).await? else {
        return Err(PageError::Redirect(login_url(next)));
    };
    let rows = sqlx::query(
        "select m.workspace_id, w.name, m.role, w.terms_accepted_at \
         from memberships m join workspaces w on w.id = m.workspace_id \
         where m.person_id = $1 order by m.created_at, m.workspace_id",
    )
    .bind(&session.person_id)
    .fetch_all(state.db.pool())
    .await?;
    let mut memberships = Vec::with_capacity(rows.len());
    for row in &rows {
        let role: String = row.try_get("role")?;
        memberships.push((
            row.try_get::<String, _>("workspace_id")?,
            row.try_get::<String, _>("name")?,
            Role::parse(&role).ok_or_else(|| ApiError::internal("unknown role in the database"))?,
            row.try_get::<Option<i64>, _>("terms_accepted_at")?
                .is_some(),
        ));
    }
    let current = session
        .workspace_id
        .as_deref()
        .and_then(|id| memberships.iter().position(|m| m.0 == id));
    let index = match current {
        Some(index) => index,
        None if memberships.is_empty() => return Err(PageError::NoWorkspace(Box::new(session))),
        None => {
            session::set_workspace(state, &session, &memberships[0].0).await?;
            0
        }
    };
    let (workspace_id, workspace_name, role, terms_accepted) = memberships[index].clone();
    let workspaces = memberships
        .iter()
        .map(|(id, name, _, _)| WorkspaceChoice {
            id: id.clone(),
            name: name.clone(),
            current: *id == workspace_id,
        })
        .collect();
    Ok(SignedIn {
        session,
        workspace_id,
        workspace_name,
        role,
        terms_accepted,
        workspaces,
    })
}

/// Adds a header to a response (used for `Retry-After`).
pub fn with_header(mut response: Response, name: HeaderName, value: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next("/settings/api").as_deref(), Some("/settings/api"));
        assert_eq!(
            safe_next("/oauth/authorize?client_id=https%3A%2F%2Fa.example%2Fc&state=x y")
                .as_deref(),
            Some("/oauth/authorize?client_id=https%3A%2F%2Fa.example%2Fc&state=x%20y")
        );
        assert_eq!(safe_next("//evil.example"), None);
        assert_eq!(safe_next("/\\evil.example"), None);
        assert_eq!(safe_next("https://evil.example"), None);
        assert_eq!(safe_next("evil"), None);
        assert_eq!(safe_next("/\n/evil.example"), None);
        assert_eq!(safe_next(""), None);
    }

    #[test]
    fn operator_sentences_read_as_sentences() {
        assert_eq!(
            sentence("this is the workspace's last owner"),
            "This is the workspace's last owner."
        );
    }
}
