//! `/settings/sending-terms`: the terms a workspace accepts before any credential may `send`.
//!
//! Acceptance is a fact about the workspace (who and when), recorded once by an owner or admin
//! through `admin::accept_terms`, the same function the CLI uses. A member sees the terms and why
//! the button is not theirs; a member's POST is refused with 403 and nothing recorded.

use std::sync::Arc;

use askama::Template;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use sqlx::Row;

use super::{Nav, PageError, display_time, render, see_other};
use crate::admin;
use crate::state::AppState;

const PAGE: &str = "/settings/sending-terms";

#[derive(Template)]
#[template(path = "web/terms.html")]
struct TermsPage {
    nav: Nav,
    manage: bool,
    /// `Accepted by … on …`, or `None` when not yet accepted.
    accepted: Option<String>,
}

/// `GET /settings/sending-terms`.
pub async fn show(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let signed = super::signed_in(&state, &headers, PAGE).await?;
    let row = sqlx::query(
        "select w.terms_accepted_at, p.display_name, p.email \
         from workspaces w left join people p on p.id = w.terms_accepted_by where w.id = $1",
    )
    .bind(&signed.workspace_id)
    .fetch_one(state.db.pool())
    .await?;
    let accepted = match row.try_get::<Option<i64>, _>("terms_accepted_at")? {
        Some(at) => {
            let who = match (
                row.try_get::<Option<String>, _>("display_name")?,
                row.try_get::<Option<String>, _>("email")?,
            ) {
                (Some(name), Some(email)) => format!("{name} ({email})"),
                _ => "a former member".to_owned(),
            };
            Some(format!("Accepted by {who} on {}.", display_time(at)))
        }
        None => None,
    };
    Ok(render(
        StatusCode::OK,
        &TermsPage {
            nav: signed.nav("terms", PAGE),
            manage: signed.can_manage(),
            accepted,
        },
    ))
}

/// `POST /settings/sending-terms`: owners and admins accept.
pub async fn accept(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, _) = super::signed_in_form(&state, &headers, &body, PAGE).await?;
    if !signed.can_manage() {
        return Err(PageError::forbidden(
            "Only an owner or admin can accept the sending terms for the workspace; nothing was recorded.",
        )
        .back_to(PAGE));
    }
    admin::accept_terms(
        &state.db,
        &state.clock,
        &signed.workspace_id,
        &signed.session.email,
    )
    .await
    .map_err(|e| PageError::admin(StatusCode::FORBIDDEN, &e).back_to(PAGE))?;
    Ok(see_other(PAGE))
}
