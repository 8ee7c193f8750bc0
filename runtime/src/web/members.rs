//! `/settings/members`: who is in the workspace, and (for owners and admins) adding people,
//! changing roles and removing people.
//!
//! The rules live in `admin` (the CLI's functions): at least one owner always remains, and a
//! removed or demoted person's credentials are capped or refused on their next request because
//! authentication re-reads the membership every time. The page adds the rule between roles: an
//! admin manages members and admins but may not make, demote or remove an owner; only an owner
//! may. Adding an address that already has an account reuses that person (their password is
//! unchanged); a new person needs a display name and a password of at least 8 characters.

use std::sync::Arc;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;

use super::keys::ConfirmPage;
use super::{FormData, Nav, PageError, SignedIn, display_time, render, see_other};
use crate::admin::{self, MemberSummary};
use crate::scope::Role;
use crate::state::AppState;

const PAGE: &str = "/settings/members";

/// Shortest password a new person may be given.
const MIN_PASSWORD_CHARS: usize = 8;

pub struct MemberRow {
    person_id: String,
    email: String,
    display_name: String,
    role: &'static str,
    joined: String,
    is_me: bool,
    can_change: bool,
    /// Why the role and removal controls are not offered, when they are not.
    why_not: &'static str,
}

#[derive(Default)]
pub struct AddForm {
    email: String,
    display_name: String,
    role: String,
}

#[derive(Template)]
#[template(path = "web/members.html")]
struct MembersPage {
    nav: Nav,
    members: Vec<MemberRow>,
    manage: bool,
    /// The roles the signed-in person may give.
    roles: Vec<&'static str>,
    error: Option<String>,
    form: AddForm,
}

/// The roles `actor` may hand out: an owner any, an admin all but owner.
fn grantable(actor: Role) -> Vec<&'static str> {
    match actor {
        Role::Owner => vec!["member", "admin", "owner"],
        Role::Admin => vec!["member", "admin"],
        Role::Member => Vec::new(),
    }
}

/// Whether `actor` may change or remove a member whose role is `target`.
fn may_change(actor: Role, target: Role) -> bool {
    actor == Role::Owner || (actor == Role::Admin && target != Role::Owner)
}

async fn page(
    state: &AppState,
    signed: &SignedIn,
    status: StatusCode,
    form: AddForm,
    error: Option<String>,
) -> Result<Response, PageError> {
    let members = admin::list_members(&state.db, &signed.workspace_id)
        .await
        .map_err(|e| PageError::admin(StatusCode::INTERNAL_SERVER_ERROR, &e))?;
    let owners = members.iter().filter(|m| m.role == Role::Owner).count();
    let members = members
        .into_iter()
        .map(|member| {
            // The last owner can be neither demoted nor removed (admin refuses it), so the page
            // does not offer what would be refused.
            let last_owner = member.role == Role::Owner && owners == 1;
            let allowed = may_change(signed.role, member.role);
            MemberRow {
                is_me: member.person_id == signed.session.person_id,
                can_change: allowed && !last_owner,
                why_not: if !allowed {
                    "Only an owner can change an owner"
                } else {
                    "The only owner: make someone else an owner first"
                },
                role: member.role.as_str(),
                joined: display_time(member.joined_at),
                person_id: member.person_id,
                email: member.email,
                display_name: member.display_name,
            }
        })
        .collect();
    let template = MembersPage {
        nav: signed.nav("members", PAGE),
        members,
        manage: signed.can_manage(),
        roles: grantable(signed.role),
        error,
        form,
    };
    Ok(render(status, &template))
}

/// `GET /settings/members`.
pub async fn show(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let signed = super::signed_in(&state, &headers, PAGE).await?;
    let form = AddForm {
        role: "member".into(),
        ..AddForm::default()
    };
    page(&state, &signed, StatusCode::OK, form, None).await
}

/// The signed-in person, refused unless they manage members.
async fn manager(
    state: &AppState,
    headers: &HeaderMap,
    body: &[u8],
    next: &str,
) -> Result<(SignedIn, FormData), PageError> {
    let (signed, form) = super::signed_in_form(state, headers, body, next).await?;
    if !signed.can_manage() {
        return Err(PageError::forbidden(
            "Only an owner or admin can change the members of the workspace; nothing was changed.",
        )
        .back_to(PAGE));
    }
    Ok((signed, form))
}

fn parse_role(text: &str) -> Result<Role, PageError> {
    Role::parse(text).ok_or_else(|| {
        PageError::message(
            StatusCode::BAD_REQUEST,
            "Unknown role",
            format!("`{text}` is not a role: choose member, admin or owner."),
        )
        .back_to(PAGE)
    })
}

/// `POST /settings/members`: adds a person, created when new.
pub async fn add(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, form) = manager(&state, &headers, &body, PAGE).await?;
    let entered = AddForm {
        email: form.get("email").trim().to_owned(),
        display_name: form.get("display_name").trim().to_owned(),
        role: form.get("role").to_owned(),
    };
    let (state_ref, signed_ref) = (&*state, &signed);
    let refuse = move |status, message: String, entered| {
        page(state_ref, signed_ref, status, entered, Some(message))
    };
    let Some(role) = Role::parse(&entered.role) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "Choose a role: member, admin or owner.".into(),
            entered,
        )
        .await;
    };
    if !may_change(signed.role, role) {
        return refuse(
            StatusCode::FORBIDDEN,
            "Only an owner can make someone an owner.".into(),
            entered,
        )
        .await;
    }
    let exists = match admin::person_exists(&state.db, &entered.email).await {
        Ok(exists) => exists,
        Err(error) => {
            return match PageError::admin(StatusCode::BAD_REQUEST, &error) {
                PageError::Message {
                    status, message, ..
                } => refuse(status, message, entered).await,
                other => Err(other),
            };
        }
    };
    let password = form.get("password");
    if !exists {
        if entered.display_name.is_empty() || entered.display_name.chars().count() > 100 {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "{} has no account yet: give their name (1 to 100 characters) and a password.",
                    entered.email
                ),
                entered,
            )
            .await;
        }
        if password.chars().count() < MIN_PASSWORD_CHARS {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "{} has no account yet: give them a password of at least {MIN_PASSWORD_CHARS} characters.",
                    entered.email
                ),
                entered,
            )
            .await;
        }
    }
    let members = admin::list_members(&state.db, &signed.workspace_id)
        .await
        .map_err(|e| PageError::admin(StatusCode::INTERNAL_SERVER_ERROR, &e))?;
    if members
        .iter()
        .any(|m| m.email.eq_ignore_ascii_case(&entered.email))
    {
        return refuse(
            StatusCode::CONFLICT,
            format!(
                "{} is already a member; change their role in the table instead.",
                entered.email
            ),
            entered,
        )
        .await;
    }
    let added = admin::add_named_member(
        &state.db,
        &state.clock,
        &signed.workspace_id,
        &entered.email,
        (!exists).then_some(entered.display_name.as_str()),
        role,
        (!exists).then_some(password),
    )
    .await;
    if let Err(error) = added {
        return match PageError::admin(StatusCode::BAD_REQUEST, &error) {
            PageError::Message {
                status, message, ..
            } => refuse(status, message, entered).await,
            other => Err(other),
        };
    }
    Ok(see_other(PAGE))
}

/// The member `person_id` of the current workspace, if `signed` may change them.
async fn changeable(
    state: &AppState,
    signed: &SignedIn,
    person_id: &str,
) -> Result<MemberSummary, PageError> {
    let member = admin::find_member(&state.db, &signed.workspace_id, person_id)
        .await
        .map_err(|e| PageError::admin(StatusCode::INTERNAL_SERVER_ERROR, &e))?
        .ok_or_else(|| {
            PageError::not_found("There is no such member in this workspace.").back_to(PAGE)
        })?;
    if !may_change(signed.role, member.role) {
        return Err(PageError::forbidden(
            "Only an owner can change or remove an owner; nothing was changed.",
        )
        .back_to(PAGE));
    }
    Ok(member)
}

/// `POST /settings/members/{person_id}/role`.
pub async fn set_role(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(person_id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, form) = manager(&state, &headers, &body, PAGE).await?;
    let role = parse_role(form.get("role"))?;
    let member = changeable(&state, &signed, &person_id).await?;
    if !may_change(signed.role, role) {
        return Err(PageError::forbidden(
            "Only an owner can make someone an owner; nothing was changed.",
        )
        .back_to(PAGE));
    }
    if let Err(error) = admin::set_role(&state.db, &signed.workspace_id, &member.email, role).await
    {
        return match PageError::admin(StatusCode::CONFLICT, &error) {
            PageError::Message {
                status, message, ..
            } => page(&state, &signed, status, AddForm::default(), Some(message)).await,
            other => Err(other),
        };
    }
    Ok(see_other(PAGE))
}

/// `GET /settings/members/{person_id}/remove`: asks first.
pub async fn confirm_remove(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(person_id): Path<String>,
    uri: Uri,
) -> Result<Response, PageError> {
    let signed = super::signed_in(&state, &headers, uri.path()).await?;
    if !signed.can_manage() {
        return Err(PageError::forbidden(
            "Only an owner or admin can remove people from the workspace.",
        )
        .back_to(PAGE));
    }
    let member = changeable(&state, &signed, &person_id).await?;
    let yourself = if member.person_id == signed.session.person_id {
        " This is you: you will lose access to this workspace."
    } else {
        ""
    };
    Ok(render(
        StatusCode::OK,
        &ConfirmPage {
            nav: signed.nav("members", PAGE),
            title: "Remove member".into(),
            question: format!(
                "Remove {} ({}) from {}?",
                member.display_name, member.email, signed.workspace_name
            ),
            detail: format!(
                "Their API keys and connected apps are refused from their next request on.{yourself}"
            ),
            form_id: "confirm-remove",
            action: uri.path().to_owned(),
            submit: "Remove member",
            cancel: PAGE,
        },
    ))
}

/// `POST /settings/members/{person_id}/remove`.
pub async fn remove(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(person_id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, _) = manager(&state, &headers, &body, PAGE).await?;
    let member = changeable(&state, &signed, &person_id).await?;
    admin::remove_member(&state.db, &signed.workspace_id, &member.email)
        .await
        .map_err(|e| PageError::admin(StatusCode::CONFLICT, &e).back_to(PAGE))?;
    Ok(see_other(PAGE))
}
