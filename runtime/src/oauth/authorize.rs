//! The authorization endpoint: sign-in, workspace choice, consent, and the code.
//!
//! The order of the checks is the security of this endpoint (RFC 6749 section 4.1.2.1, RFC 9700
//! section 4.11.2, OAuth 2.1 section 7.12.2). The person signs in first: for a browser without a
//! session nothing is validated, fetched or redirected; it is sent to `/login` with the request
//! untouched. Registration is open to any https redirect URI, so an error redirected before
//! sign-in would make this server an open redirector, and a metadata document fetched for anyone
//! would let anyone make it fetch URLs of their choosing. Then the client and its redirect URI are
//! checked, and until both pass, every error is a page for the person: redirecting an error to an
//! unverified URI would be an open redirect too. Once the redirect URI is trusted, the remaining
//! errors go back to the client there, with `state` and `iss` (RFC 9207), as OAuth clients expect.
//!
//! `GET` shows the pages; `POST` is the person's decision, checked against the session's CSRF
//! token and then validated again from scratch, because the form's hidden fields come back from
//! the browser and could have been changed. The scopes offered are capped by the person's role and
//! the workspace's sending terms at the moment of the decision; what is refused is shown, with
//! the reason, and not granted.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use sqlx::Row;

use super::cimd::Fetcher;
use super::client::{self, Client, Source};
use super::pages::{self, ChooseWorkspace, Consent, ScopeLine, WorkspaceChoice};
use super::params::{self, Params};
use super::{grant, pkce, redirect, token};
use crate::error::ApiError;
use crate::scope::{Role, Scope, scope_refusal};
use crate::session::{self, Session};
use crate::state::AppState;

/// Fields our own forms add to the client's parameters.
const OWN_FIELDS: [&str; 3] = ["workspace_id", "csrf_token", "decision"];

const CANNOT_CONNECT: &str = "This app cannot connect";

/// An authorization request that passed every check.
struct Valid {
    client: Client,
    redirect_uri: String,
    state: Option<String>,
    code_challenge: String,
    requested: Option<Scope>,
}

/// Why a request stops, and how the person or the client hears of it.
enum Refusal {
    /// Before the redirect URI is trusted: a page, never a redirect.
    Page(StatusCode, String),
    /// After: back to the client.
    Redirect {
        redirect_uri: String,
        state: Option<String>,
        error: &'static str,
        description: String,
    },
    Internal(ApiError),
}

impl From<ApiError> for Refusal {
    fn from(error: ApiError) -> Self {
        Refusal::Internal(error)
    }
}

impl Refusal {
    fn page(message: impl Into<String>) -> Self {
        Refusal::Page(StatusCode::BAD_REQUEST, message.into())
    }

    fn respond(self, state: &AppState) -> Response {
        match self {
            Refusal::Page(status, message) => pages::error(status, CANNOT_CONNECT, &message),
            Refusal::Redirect {
                redirect_uri,
                state: client_state,
                error,
                description,
            } => {
                let mut answer = vec![
                    ("error", error),
                    ("error_description", description.as_str()),
                ];
                if let Some(client_state) = &client_state {
                    answer.push(("state", client_state));
                }
                answer.push(("iss", &state.config.base_url));
                see_other(&redirect::with_params(&redirect_uri, &answer))
            }
            Refusal::Internal(error) => pages::internal(error),
        }
    }
}

/// A 303 to `location`, never cached (it may carry a code).
fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// To the sign-in page, which comes back to this authorization request (`query`) afterwards.
fn sign_in(query: &str) -> Response {
    let next = format!("/oauth/authorize?{query}");
    let query = params::encode(&[("next".to_owned(), next)]);
    see_other(&format!("/login?{query}"))
}

async fn validate(state: &AppState, fetcher: &Fetcher, params: &Params) -> Result<Valid, Refusal> {
    for name in ["client_id", "redirect_uri"] {
        if params.is_duplicated(name) {
            return Err(Refusal::page(format!(
                "The request names `{name}` more than once."
            )));
        }
    }
    let Some(client_id) = params.get("client_id") else {
        return Err(Refusal::page(
            "The request does not say which app is asking (`client_id` is missing).",
        ));
    };
    let client = match client::resolve(state, fetcher, client_id).await? {
        Ok(client) => client,
        Err(reason) => return Err(Refusal::page(format!("{}.", capitalize(&reason)))),
    };
    let Some(redirect_uri) = params.get("redirect_uri") else {
        return Err(Refusal::page(
            "The request does not say where to send the answer (`redirect_uri` is missing).",
        ));
    };
    if !redirect::matches(&client.redirect_uris, redirect_uri) {
        return Err(Refusal::page(format!(
            "The redirect URI `{redirect_uri}` is not one registered for {}, so the authorization cannot be sent there.",
            client.name
        )));
    }

    let refuse = |error: &'static str, description: String| Refusal::Redirect {
        redirect_uri: redirect_uri.to_owned(),
        state: params.get("state").map(str::to_owned),
        error,
        description,
    };
    if params.is_duplicated("resource") {
        return Err(refuse(
            "invalid_target",
            format!("only one resource is served: `{}`", state.config.mcp_url()),
        ));
    }
    if let Some(name) = params.duplicates.first() {
        return Err(refuse(
            "invalid_request",
            format!("the parameter `{name}` appears more than once"),
        ));
    }
    if params.get("request").is_some() {
        return Err(refuse(
            "request_not_supported",
            "request objects are not supported".to_owned(),
        ));
    }
    if params.get("request_uri").is_some() {
        return Err(refuse(
            "request_uri_not_supported",
            "`request_uri` is not supported".to_owned(),
        ));
    }
    match params.get("response_type") {
        Some("code") => {}
        None => {
            return Err(refuse(
                "invalid_request",
                "`response_type` is required and must be `code`".to_owned(),
            ));
        }
        Some(other) => {
            return Err(refuse(
                "unsupported_response_type",
                format!("response type `{other}` is not supported: use `code`"),
            ));
        }
    }
    match params.get("code_challenge_method") {
        Some("S256") => {}
        None => {
            return Err(refuse(
                "invalid_request",
                "PKCE is required: send `code_challenge` with `code_challenge_method=S256`"
                    .to_owned(),
            ));
        }
        Some("plain") => {
            return Err(refuse(
                "invalid_request",
                "the `plain` PKCE method is not allowed: use `S256`".to_owned(),
            ));
        }
        Some(other) => {
            return Err(refuse(
                "invalid_request",
                format!("PKCE method `{other}` is not supported: use `S256`"),
            ));
        }
    }
    let code_challenge = match params.get("code_challenge") {
        Some(challenge) if pkce::valid_challenge(challenge) => challenge.to_owned(),
        Some(_) => {
            return Err(refuse(
                "invalid_request",
                "`code_challenge` must be the 43-character base64url SHA-256 of the verifier"
                    .to_owned(),
            ));
        }
        None => {
            return Err(refuse(
                "invalid_request",
                "PKCE is required: `code_challenge` is missing".to_owned(),
            ));
        }
    };
    if let Some(resource) = params.get("resource")
        && resource != state.config.mcp_url()
    {
        return Err(refuse(
            "invalid_target",
            format!(
                "this server issues tokens only for `{}`, not `{resource}`",
                state.config.mcp_url()
            ),
        ));
    }
    let requested = match params.get("scope") {
        None => None,
        Some(scope) => Some(
            token::requested_scope(scope)
                .map_err(|error| refuse("invalid_scope", error.description))?,
        ),
    };
    Ok(Valid {
        client,
        redirect_uri: redirect_uri.to_owned(),
        state: params.get("state").map(str::to_owned),
        code_challenge,
        requested,
    })
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// One of the person's workspaces, with what decides their scopes there.
struct Membership {
    workspace_id: String,
    name: String,
    role: Role,
    terms_accepted: bool,
}

async fn memberships(state: &AppState, person_id: &str) -> Result<Vec<Membership>, ApiError> {
    let rows = sqlx::query(
        "select m.workspace_id, m.role, w.name, w.terms_accepted_at \
         from memberships m join workspaces w on w.id = m.workspace_id \
         where m.person_id = $1 order by m.created_at, m.workspace_id",
    )
    .bind(person_id)
    .fetch_all(state.db.pool())
    .await?;
    let mut memberships = Vec::with_capacity(rows.len());
    for row in rows {
        let role: String = row.try_get("role")?;
        memberships.push(Membership {
            workspace_id: row.try_get("workspace_id")?,
            name: row.try_get("name")?,
            role: Role::parse(&role).ok_or_else(|| ApiError::internal(format!("role `{role}`")))?,
            terms_accepted: row
                .try_get::<Option<i64>, _>("terms_accepted_at")?
                .is_some(),
        });
    }
    Ok(memberships)
}

/// Which workspace the grant is for: the one named, the only one, or `None` to ask.
fn chosen<'m>(
    memberships: &'m [Membership],
    workspace_id: Option<&str>,
) -> Result<Option<&'m Membership>, Refusal> {
    if memberships.is_empty() {
        return Err(Refusal::Page(
            StatusCode::FORBIDDEN,
            "You are not a member of any workspace, so there is nothing to connect this app to."
                .to_owned(),
        ));
    }
    match workspace_id {
        Some(id) => memberships
            .iter()
            .find(|membership| membership.workspace_id == id)
            .map(Some)
            .ok_or_else(|| Refusal::page("The chosen workspace is not one of yours.")),
        None if memberships.len() == 1 => Ok(memberships.first()),
        None => Ok(None),
    }
}

/// The scope granted and the lines for the scopes asked for but refused. Without a `scope`
/// parameter the client asks for everything the person may grant, so nothing is refused.
fn scopes_for(requested: Option<Scope>, membership: &Membership) -> (Scope, Vec<ScopeLine>) {
    let cap = membership.role.scope_cap(membership.terms_accepted);
    let wanted = requested.unwrap_or(cap);
    let granted = wanted.min(cap);
    let refused = wanted
        .included()
        .into_iter()
        .filter(|scope| *scope > granted)
        .map(|scope| ScopeLine {
            name: scope.as_str(),
            text: scope_refusal(membership.role, membership.terms_accepted, scope)
                .unwrap_or_default(),
        })
        .collect();
    (granted, refused)
}

/// `GET /oauth/authorize`.
pub async fn show(
    State(state): State<Arc<AppState>>,
    Extension(fetcher): Extension<Arc<Fetcher>>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let query = uri.query().unwrap_or("");
    let params = Params::parse(query.as_bytes());
    match show_page(&state, &fetcher, &headers, query, &params).await {
        Ok(response) => response,
        Err(refusal) => refusal.respond(&state),
    }
}

async fn show_page(
    state: &AppState,
    fetcher: &Fetcher,
    headers: &HeaderMap,
    query: &str,
    params: &Params,
) -> Result<Response, Refusal> {
    // Sign-in before anything else: no metadata document is fetched and no error is redirected
    // for a browser without a session (RFC 9700 section 4.11.2).
    let Some(session) = session::current(state, headers).await? else {
        // The request exactly as it came, so the client's parameters survive sign-in untouched.
        return Ok(sign_in(query));
    };
    let valid = validate(state, fetcher, params).await?;
    let memberships = memberships(state, &session.person_id).await?;
    let hidden = params.without(&OWN_FIELDS);
    let Some(membership) = chosen(&memberships, params.get("workspace_id"))? else {
        let workspaces: Vec<WorkspaceChoice> = memberships
            .iter()
            .map(|membership| WorkspaceChoice {
                id: membership.workspace_id.clone(),
                name: membership.name.clone(),
                role: membership.role.to_string(),
            })
            .collect();
        return Ok(pages::render(
            StatusCode::OK,
            &ChooseWorkspace {
                client_name: &valid.client.name,
                email: &session.email,
                hidden: &hidden,
                workspaces: &workspaces,
            },
        ));
    };
    Ok(consent_page(&valid, &session, membership, &hidden))
}

fn consent_page(
    valid: &Valid,
    session: &Session,
    membership: &Membership,
    hidden: &[(String, String)],
) -> Response {
    let (granted, refused) = scopes_for(valid.requested, membership);
    let granted: Vec<ScopeLine> = granted
        .included()
        .into_iter()
        .map(ScopeLine::granted)
        .collect();
    let source = match valid.client.source {
        Source::Registration => {
            "registration with this server; the name is the app's own claim".to_owned()
        }
        Source::MetadataDocument => format!("its metadata document at {}", valid.client.client_id),
    };
    pages::render(
        StatusCode::OK,
        &Consent {
            client_name: &valid.client.name,
            source: &source,
            redirect_host: &redirect::display_host(&valid.redirect_uri),
            loopback: redirect::is_loopback_uri(&valid.redirect_uri),
            email: &session.email,
            workspace_id: &membership.workspace_id,
            workspace_name: &membership.name,
            granted: &granted,
            refused: &refused,
            hidden,
            csrf_token: &session.csrf_token,
            toolsets: crate::toolsets::toolsets(),
        },
    )
}

/// `POST /oauth/authorize`: the person's decision on the consent page.
pub async fn decide(
    State(state): State<Arc<AppState>>,
    Extension(fetcher): Extension<Arc<Fetcher>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params = Params::parse(&body);
    match record_decision(&state, &fetcher, &headers, &params).await {
        Ok(response) => response,
        Err(refusal) => refusal.respond(&state),
    }
}

async fn record_decision(
    state: &AppState,
    fetcher: &Fetcher,
    headers: &HeaderMap,
    params: &Params,
) -> Result<Response, Refusal> {
    let Some(session) = session::current(state, headers).await? else {
        // A decision posted without a session (expired, or a cross-site post that carried no
        // cookie) starts over at sign-in with the client's parameters, never our own fields.
        return Ok(sign_in(&params::encode(&params.without(&OWN_FIELDS))));
    };
    let csrf_ok = !params.is_duplicated("csrf_token")
        && params
            .get("csrf_token")
            .is_some_and(|token| session.csrf_matches(token));
    if !csrf_ok {
        return Err(Refusal::Page(
            StatusCode::FORBIDDEN,
            "This form could not be verified: its security token is missing or does not belong to your session, so it may not have come from this site. Nothing was authorized; start connecting again from the app.".to_owned(),
        ));
    }
    let valid = validate(state, fetcher, params).await?;
    let memberships = memberships(state, &session.person_id).await?;
    let Some(workspace_id) = params.get("workspace_id") else {
        return Err(Refusal::page("The consent form names no workspace."));
    };
    let Some(membership) = chosen(&memberships, Some(workspace_id))? else {
        return Err(Refusal::page("The consent form names no workspace."));
    };
    let answer = |pairs: &[(&str, &str)]| {
        let mut pairs = pairs.to_vec();
        if let Some(client_state) = &valid.state {
            pairs.push(("state", client_state));
        }
        pairs.push(("iss", &state.config.base_url));
        see_other(&redirect::with_params(&valid.redirect_uri, &pairs))
    };
    match params.get("decision") {
        Some("deny") => Ok(answer(&[
            ("error", "access_denied"),
            (
                "error_description",
                "the person declined to connect this app",
            ),
        ])),
        Some("allow") => {
            let (granted, _) = scopes_for(valid.requested, membership);
            let code = grant::create_with_code(
                state,
                &grant::NewGrant {
                    workspace_id: &membership.workspace_id,
                    person_id: &session.person_id,
                    client: &valid.client,
                    scope: granted,
                    redirect_uri: &valid.redirect_uri,
                    code_challenge: &valid.code_challenge,
                },
            )
            .await?;
            Ok(answer(&[("code", &code)]))
        }
        _ => Err(Refusal::page(
            "The consent form did not say whether to allow or deny.",
        )),
    }
}
