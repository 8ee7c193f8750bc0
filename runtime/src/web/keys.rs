//! `/settings/api`: the API keys of the workspace, the create form, revocation, and (from
//! [`super::apps`]) the connected apps.
//!
//! Who sees what: owners and admins see and revoke every key of the workspace (they answer for
//! it); a member sees and revokes only their own. Keys are always created for the signed-in person
//! in the current workspace, through `admin::create_key`, which applies the same role and terms
//! rules as the CLI; the form only greys out what those rules would refuse, and the server checks
//! again, so a forged form asking for more is refused with nothing created.
//!
//! A new key's value travels to the next page in the session's flash (never in a URL, never in a
//! cookie) and is taken from it when shown, so a reload no longer has it. The flash expires after
//! [`session::FLASH_LIFETIME_MS`] (5 minutes): a redirect that is never followed does not leave
//! the value in the database for the rest of the session.
//!
//! An expiry date `yyyy-mm-dd` means the key works through that whole day in UTC: it expires at
//! the following midnight UTC. Today is therefore a valid choice; an earlier day is not.

use std::sync::Arc;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;

use super::apps::{self, AppRow};
use super::{Nav, PageError, SignedIn, display_time, render, see_other};
use crate::admin::{self, KeySummary};
use crate::scope::{Role, Scope, scope_refusal};
use crate::session;
use crate::state::AppState;

const PAGE: &str = "/settings/api";

/// The flash of a new key: this prefix and the value.
const NEW_KEY_FLASH: &str = "new_key:";

/// One row of the keys table.
pub struct KeyRow {
    id: String,
    name: String,
    prefix: String,
    scopes: String,
    owner: String,
    created: String,
    last_used: String,
    expires: String,
    status: &'static str,
    can_revoke: bool,
}

/// What the create form holds (shown again with an error).
#[derive(Default)]
pub struct KeyForm {
    name: String,
    expires_on: String,
    scopes: Vec<String>,
}

impl KeyForm {
    fn has(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}

#[derive(Template)]
#[template(path = "web/api.html")]
struct ApiPage {
    nav: Nav,
    keys: Vec<KeyRow>,
    apps: Vec<AppRow>,
    manage: bool,
    new_key: Option<String>,
    error: Option<String>,
    form: KeyForm,
    write_reason: Option<String>,
    send_reason: Option<String>,
    today: String,
}

fn key_status(key: &KeySummary, now: i64) -> &'static str {
    if key.revoked_at.is_some() {
        "revoked"
    } else if key.expires_at.is_some_and(|at| at <= now) {
        "expired"
    } else {
        "active"
    }
}

/// Whether the signed-in person may revoke this key: their own, or any as owner or admin.
fn may_revoke(signed: &SignedIn, key: &KeySummary) -> bool {
    signed.can_manage() || key.person_id == signed.session.person_id
}

fn today(now: i64) -> String {
    let date = time::OffsetDateTime::from_unix_timestamp(now / 1000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
        .date();
    let format = time::macros::format_description!("[year]-[month]-[day]");
    date.format(&format).unwrap_or_default()
}

/// Why the role and terms refuse a scope, as a sentence for the form.
fn reason(role: Role, terms_accepted: bool, scope: Scope) -> Option<String> {
    scope_refusal(role, terms_accepted, scope)?;
    Some(match (role, scope) {
        (Role::Member, _) => format!(
            "Your role in this workspace is member, which may hold only the read scope; \
             ask an owner or admin if you need `{scope}`."
        ),
        _ => "The send scope is available once an owner or admin accepts the sending terms \
              (see Sending terms)."
            .to_owned(),
    })
}

async fn page(
    state: &AppState,
    signed: &SignedIn,
    status: StatusCode,
    form: KeyForm,
    error: Option<String>,
    new_key: Option<String>,
) -> Result<Response, PageError> {
    let now = state.clock.now_ms();
    let manage = signed.can_manage();
    let only_mine = (!manage).then_some(signed.session.person_id.as_str());
    let keys = admin::list_keys(&state.db, &signed.workspace_id, only_mine)
        .await
        .map_err(|e| PageError::admin(StatusCode::INTERNAL_SERVER_ERROR, &e))?;
    let keys = keys
        .iter()
        .map(|key| {
            let status = key_status(key, now);
            KeyRow {
                id: key.id.clone(),
                name: key.name.clone(),
                prefix: key.prefix.clone(),
                scopes: key.scopes.list_string().replace(',', ", "),
                owner: key.person_email.clone(),
                created: display_time(key.created_at),
                last_used: key
                    .last_used_at
                    .map_or_else(|| "never".into(), display_time),
                expires: key.expires_at.map_or_else(|| "never".into(), display_time),
                status,
                can_revoke: status == "active" && may_revoke(signed, key),
            }
        })
        .collect();
    let apps = apps::rows(state, signed).await?;
    let template = ApiPage {
        nav: signed.nav("api", PAGE),
        keys,
        apps,
        manage,
        new_key,
        error,
        form,
        write_reason: reason(signed.role, signed.terms_accepted, Scope::Write),
        send_reason: reason(signed.role, signed.terms_accepted, Scope::Send),
        today: today(now),
    };
    Ok(render(status, &template))
}

/// `GET /settings/api`.
pub async fn show(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Response, PageError> {
    let next = uri.path_and_query().map_or(PAGE, |p| p.as_str());
    let signed = super::signed_in(&state, &headers, next).await?;
    let new_key = session::take_flash(&state, &signed.session, NEW_KEY_FLASH).await?;
    let form = KeyForm {
        scopes: vec!["read".into()],
        ..KeyForm::default()
    };
    page(&state, &signed, StatusCode::OK, form, None, new_key).await
}

/// Parses `yyyy-mm-dd` into the key's expiry: the midnight UTC that ends that day.
fn parse_expiry(text: &str, now: i64) -> Result<Option<i64>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let format = time::macros::format_description!("[year]-[month]-[day]");
    let date = time::Date::parse(text, &format)
        .map_err(|_| format!("The expiry `{text}` is not a date like 2027-01-31."))?;
    let end = date
        .next_day()
        .ok_or_else(|| "The expiry date is too far away.".to_owned())?
        .midnight()
        .assume_utc()
        .unix_timestamp()
        * 1000;
    if end <= now {
        return Err(format!(
            "The expiry date {text} has passed; choose today or a later day."
        ));
    }
    Ok(Some(end))
}

/// `POST /settings/api/keys`: creates a key for the signed-in person.
pub async fn create(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, form) = super::signed_in_form(&state, &headers, &body, PAGE).await?;
    let entered = KeyForm {
        name: form.get("name").to_owned(),
        expires_on: form.get("expires_on").to_owned(),
        scopes: form.all("scopes").into_iter().map(str::to_owned).collect(),
    };
    let (state_ref, signed_ref) = (&*state, &signed);
    let refuse = move |status, message: String, entered| {
        page(state_ref, signed_ref, status, entered, Some(message), None)
    };
    let name = entered.name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return refuse(
            StatusCode::BAD_REQUEST,
            "Give the key a name of 1 to 100 characters, such as where it will be used.".into(),
            entered,
        )
        .await;
    }
    let mut highest = None;
    for text in &entered.scopes {
        match Scope::parse(text) {
            Some(scope) => highest = highest.max(Some(scope)),
            None => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!("Unknown scope `{text}`: choose read, write or send."),
                    entered,
                )
                .await;
            }
        }
    }
    let Some(scope) = highest else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "Choose at least one scope.".into(),
            entered,
        )
        .await;
    };
    if let Some(why) = reason(signed.role, signed.terms_accepted, scope) {
        return refuse(
            StatusCode::FORBIDDEN,
            format!("No key was created: a key with `{scope}` is not allowed here. {why}"),
            entered,
        )
        .await;
    }
    let expires_at = match parse_expiry(&entered.expires_on, state.clock.now_ms()) {
        Ok(expires_at) => expires_at,
        Err(message) => return refuse(StatusCode::BAD_REQUEST, message, entered).await,
    };
    let created = admin::create_key(
        &state.db,
        &state.clock,
        &state.config.environment,
        &signed.workspace_id,
        &signed.session.email,
        name,
        scope,
        expires_at,
    )
    .await;
    let created = match created {
        Ok(created) => created,
        Err(error) => {
            return match PageError::admin(StatusCode::BAD_REQUEST, &error) {
                PageError::Message {
                    status, message, ..
                } => refuse(status, message, entered).await,
                other => Err(other),
            };
        }
    };
    session::set_flash(
        &state,
        &signed.session,
        &format!("{NEW_KEY_FLASH}{}", created.key),
    )
    .await?;
    Ok(see_other(PAGE))
}

#[derive(Template)]
#[template(path = "web/confirm.html")]
pub struct ConfirmPage {
    pub nav: Nav,
    pub title: String,
    pub question: String,
    pub detail: String,
    pub form_id: &'static str,
    pub action: String,
    pub submit: &'static str,
    pub cancel: &'static str,
}

/// The key `key_id` of the current workspace if the signed-in person may revoke it.
async fn revocable(
    state: &AppState,
    signed: &SignedIn,
    key_id: &str,
) -> Result<KeySummary, PageError> {
    let key = admin::find_key(&state.db, &signed.workspace_id, key_id)
        .await
        .map_err(|e| PageError::admin(StatusCode::INTERNAL_SERVER_ERROR, &e))?
        .ok_or_else(|| PageError::not_found("There is no such API key in this workspace."))?;
    if !may_revoke(signed, &key) {
        return Err(PageError::forbidden(
            "You can revoke only your own keys; an owner or admin can revoke anyone's.",
        ));
    }
    if key.revoked_at.is_some() {
        return Err(PageError::message(
            StatusCode::CONFLICT,
            "Already revoked",
            format!("The key “{}” is already revoked.", key.name),
        ));
    }
    Ok(key)
}

/// `GET /settings/api/keys/{key_id}/revoke`: asks first.
pub async fn confirm_revoke(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(key_id): Path<String>,
    uri: Uri,
) -> Result<Response, PageError> {
    let signed = super::signed_in(&state, &headers, uri.path()).await?;
    let key = revocable(&state, &signed, &key_id).await?;
    let owner = if key.person_id == signed.session.person_id {
        String::new()
    } else {
        format!(" It belongs to {}.", key.person_email)
    };
    Ok(render(
        StatusCode::OK,
        &ConfirmPage {
            nav: signed.nav("api", PAGE),
            title: "Revoke API key".into(),
            question: format!("Revoke the key “{}” ({}…)?", key.name, key.prefix),
            detail: format!(
                "Anything using it is refused from its next request on. This cannot be undone.{owner}"
            ),
            form_id: "confirm-revoke",
            action: uri.path().to_owned(),
            submit: "Revoke key",
            cancel: PAGE,
        },
    ))
}

/// `POST /settings/api/keys/{key_id}/revoke`.
pub async fn revoke(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(key_id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, _) = super::signed_in_form(&state, &headers, &body, PAGE).await?;
    let key = revocable(&state, &signed, &key_id).await?;
    admin::revoke_key(&state.db, &state.clock, &key.id)
        .await
        .map_err(|e| PageError::admin(StatusCode::CONFLICT, &e))?;
    Ok(see_other(PAGE))
}
