//! `/settings/password`: the signed-in person changes their own password.
//!
//! The current password is asked for (a session left open on a shared computer is not enough to
//! take the account over) and checked under the sign-in throttle; the new one is typed twice and
//! must follow the rule every password follows ([`admin::check_password`]). The change goes
//! through [`admin::set_password`], the function behind `outreach admin person set-password`:
//! the same argon2id hashing, and every other browser session of the person ends, so whoever
//! signed in with the old password is out. This session stays. Keys and OAuth grants never used
//! the password and keep working.

use std::sync::Arc;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde::Deserialize;

use super::login::{Unchecked, check_current_password};
use super::{Nav, PageError, SignedIn, render, see_other, with_header};
use crate::admin;
use crate::state::AppState;

const PAGE: &str = "/settings/password";

#[derive(Template)]
#[template(path = "web/password.html")]
struct PasswordPage {
    nav: Nav,
    min_chars: usize,
    error: Option<String>,
    changed: bool,
}

#[derive(Debug, Deserialize)]
pub struct PasswordQuery {
    #[serde(default)]
    changed: Option<String>,
}

fn page(signed: &SignedIn, status: StatusCode, error: Option<String>, changed: bool) -> Response {
    render(
        status,
        &PasswordPage {
            nav: signed.nav("password", PAGE),
            min_chars: admin::MIN_PASSWORD_CHARS,
            error,
            changed,
        },
    )
}

/// `GET /settings/password`.
pub async fn show(
    State(state): State<Arc<AppState>>,
    Query(query): Query<PasswordQuery>,
    headers: HeaderMap,
) -> Result<Response, PageError> {
    let signed = super::signed_in(&state, &headers, PAGE).await?;
    Ok(page(&signed, StatusCode::OK, None, query.changed.is_some()))
}

/// `POST /settings/password`: a refusal shows the form again with its status and changes nothing.
pub async fn change(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, form) = super::signed_in_form(&state, &headers, &body, PAGE).await?;
    let current = form.get("current_password");
    let new = form.get("new_password");
    let again = form.get("new_password_again");
    let refuse = |status: StatusCode, message: &str| {
        Ok(page(&signed, status, Some(message.to_owned()), false))
    };
    if current.is_empty() || new.is_empty() {
        return refuse(
            StatusCode::BAD_REQUEST,
            "Give your current password and the new one twice; nothing was changed.",
        );
    }
    if new != again {
        return refuse(
            StatusCode::BAD_REQUEST,
            "The two new passwords differ; nothing was changed. Type the same one twice.",
        );
    }
    if let Err(error) = admin::check_password(new) {
        return refuse(
            StatusCode::BAD_REQUEST,
            &format!(
                "{}; nothing was changed.",
                super::sentence(&error.to_string()).trim_end_matches('.')
            ),
        );
    }
    match check_current_password(&state, &signed.session.email, current).await? {
        Ok(true) => {}
        Ok(false) => {
            return refuse(
                StatusCode::FORBIDDEN,
                "The current password is wrong; nothing was changed.",
            );
        }
        Err(Unchecked::Throttled(wait)) => {
            let minutes = (wait + 59) / 60;
            let response = page(
                &signed,
                StatusCode::TOO_MANY_REQUESTS,
                Some(format!(
                    "Too many wrong passwords. Try again in {minutes} minute{}; nothing was changed.",
                    if minutes == 1 { "" } else { "s" }
                )),
                false,
            );
            return Ok(with_header(
                response,
                header::RETRY_AFTER,
                &wait.to_string(),
            ));
        }
        Err(Unchecked::Busy) => {
            let response = page(
                &signed,
                StatusCode::SERVICE_UNAVAILABLE,
                Some(
                    "Too many passwords are being checked right now. Try again in a moment."
                        .to_owned(),
                ),
                false,
            );
            return Ok(with_header(response, header::RETRY_AFTER, "1"));
        }
    }
    admin::set_password(
        &state.db,
        &signed.session.email,
        Some(new),
        Some(&signed.session.id),
    )
    .await
    .map_err(|error| PageError::admin(StatusCode::BAD_REQUEST, &error).back_to(PAGE))?;
    Ok(see_other("/settings/password?changed=1"))
}
