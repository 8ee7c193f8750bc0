//! Sign-in, sign-out and the workspace switcher.
//!
//! Passwords are argon2id hashes (the parameters `admin::hash_password` used are read back from
//! the stored PHC string). Guessing is throttled in the database, so every instance counts the same
//! failures: an account (`account:<email>`) gets 5 failures and a client address
//! (`address:<ip>`) 20 within 15 minutes; past that the answer is 429 with `Retry-After` and no
//! password is checked at all. A success clears the account's failures (not the address's, or one
//! valid account would reset a guesser's budget). An unknown email costs the same argon2 work as a
//! known one, against a dummy hash, so the time taken does not tell which addresses have accounts.
//!
//! The address is the TCP peer. Behind a reverse proxy every client shares the proxy's address,
//! so the per-address limit then throttles the proxy as a whole; the per-account limit still holds.

use std::net::SocketAddr;
use std::sync::{Arc, LazyLock};

use askama::Template;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum_extra::extract::cookie::CookieJar;
use serde::Deserialize;
use sqlx::Row;

use super::{FormData, PageError, render, safe_next, see_other, session, signed_in, with_header};
use crate::admin;
use crate::server::AppState;

/// The sliding window failures are counted over.
const THROTTLE_WINDOW_MS: i64 = 15 * 60 * 1000;
/// Failures one account may have in the window.
const ACCOUNT_LIMIT: i64 = 5;
/// Failures one client address may have in the window (it may try several accounts).
const ADDRESS_LIMIT: i64 = 20;

/// Where a sign-in goes when it has no (acceptable) `next`.
const DEFAULT_NEXT: &str = "/settings/api";

#[derive(Template)]
#[template(path = "web/login.html")]
struct LoginPage<'a> {
    csrf_token: &'a str,
    next: &'a str,
    email: &'a str,
    error: Option<&'a str>,
}

#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    #[serde(default)]
    next: Option<String>,
}

fn login_page(
    jar: CookieJar,
    state: &AppState,
    status: StatusCode,
    next: &str,
    email: &str,
    error: Option<&str>,
) -> Response {
    let (jar, csrf_token) = session::login_csrf(state, jar);
    let page = render(
        status,
        &LoginPage {
            csrf_token: &csrf_token,
            next,
            email,
            error,
        },
    );
    (jar, page).into_response()
}

/// `GET /login`: the form, or straight on to `next` when already signed in.
pub async fn show(
    State(state): State<Arc<AppState>>,
    Query(query): Query<LoginQuery>,
    headers: HeaderMap,
    jar: CookieJar,
) -> Result<Response, PageError> {
    let next = query.next.as_deref().and_then(safe_next);
    if session::current(&state, &headers).await?.is_some() {
        return Ok(see_other(next.as_deref().unwrap_or(DEFAULT_NEXT)));
    }
    Ok(login_page(
        jar,
        &state,
        StatusCode::OK,
        next.as_deref().unwrap_or(""),
        "",
        None,
    ))
}

/// `POST /login`: checks the CSRF cookie, the throttle, then the password.
pub async fn submit(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    jar: CookieJar,
    body: Bytes,
) -> Result<Response, PageError> {
    let form = FormData::parse(&body);
    let next = safe_next(form.get("next"));
    let next_field = next.as_deref().unwrap_or("");
    if !session::login_csrf_matches(&jar, form.get("csrf_token")) {
        return Err(PageError::forged().back_to(&super::login_url(next_field)));
    }
    let email = form.get("email").trim().to_lowercase();
    let password = form.get("password");
    let account = format!("account:{email}");
    let address = format!("address:{}", peer.ip());
    let now = state.clock.now_ms();
    let wait = match throttled(&state, &account, ACCOUNT_LIMIT, now).await? {
        Some(wait) => Some(wait),
        None => throttled(&state, &address, ADDRESS_LIMIT, now).await?,
    };
    if let Some(wait_seconds) = wait {
        let minutes = (wait_seconds + 59) / 60;
        let message = format!(
            "Too many failed sign-ins. Try again in {minutes} minute{}.",
            if minutes == 1 { "" } else { "s" }
        );
        let page = login_page(
            jar,
            &state,
            StatusCode::TOO_MANY_REQUESTS,
            next_field,
            &email,
            Some(&message),
        );
        return Ok(with_header(
            page,
            header::RETRY_AFTER,
            &wait_seconds.to_string(),
        ));
    }
    let person = sqlx::query("select id, password_hash from people where email = $1")
        .bind(&email)
        .fetch_optional(state.db.pool())
        .await?;
    let (person_id, hash) = match &person {
        Some(row) => (
            Some(row.try_get::<String, _>("id")?),
            row.try_get::<String, _>("password_hash")?,
        ),
        None => (None, DUMMY_HASH.clone()),
    };
    let verified = verify_password(password.to_owned(), hash).await;
    let Some(person_id) = person_id.filter(|_| verified) else {
        record_failure(&state, &[&account, &address], now).await?;
        return Ok(login_page(
            jar,
            &state,
            StatusCode::UNAUTHORIZED,
            next_field,
            &email,
            Some("Wrong email or password."),
        ));
    };
    sqlx::query("delete from sign_in_failures where subject = $1")
        .bind(&account)
        .execute(state.db.pool())
        .await?;
    // A new session on every sign-in: a session value planted before sign-in is never promoted.
    let jar = session::end(&state, jar).await?;
    let jar = session::start(&state, &person_id, jar).await?;
    Ok((jar, see_other(next.as_deref().unwrap_or(DEFAULT_NEXT))).into_response())
}

/// Computes the dummy hash now, so the first unknown email does not pay for hashing it.
pub fn warm_up() {
    LazyLock::force(&DUMMY_HASH);
}

/// A hash to verify against when the email is unknown, so that case costs the same work.
static DUMMY_HASH: LazyLock<String> = LazyLock::new(|| {
    admin::hash_password("not a password anyone has").unwrap_or_else(|_| {
        // Never expected; an unparsable hash makes verification fail fast, which only weakens
        // the timing cover, not the check itself.
        String::new()
    })
});

/// Verifies a password against a PHC string off the async workers (argon2 takes milliseconds of
/// CPU and memory on purpose).
async fn verify_password(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || {
        use argon2::password_hash::{PasswordHash, PasswordVerifier};
        PasswordHash::new(&hash).is_ok_and(|parsed| {
            argon2::Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
    })
    .await
    .unwrap_or(false)
}

/// When `subject` has `limit` failures in the window: the seconds until the oldest of the most
/// recent `limit` leaves it (then one more attempt is allowed).
async fn throttled(
    state: &AppState,
    subject: &str,
    limit: i64,
    now: i64,
) -> Result<Option<i64>, PageError> {
    let times: Vec<i64> = sqlx::query_scalar(
        "select failed_at from sign_in_failures where subject = $1 and failed_at > $2 \
         order by failed_at desc limit $3",
    )
    .bind(subject)
    .bind(now - THROTTLE_WINDOW_MS)
    .bind(limit)
    .fetch_all(state.db.pool())
    .await?;
    if (times.len() as i64) < limit {
        return Ok(None);
    }
    let frees_at = times.last().copied().unwrap_or(now) + THROTTLE_WINDOW_MS;
    Ok(Some(((frees_at - now + 999) / 1000).max(1)))
}

/// Records a failed sign-in against each subject, and forgets failures older than the window.
async fn record_failure(state: &AppState, subjects: &[&str], now: i64) -> Result<(), PageError> {
    let mut tx = state.db.pool().begin().await?;
    sqlx::query("delete from sign_in_failures where failed_at <= $1")
        .bind(now - THROTTLE_WINDOW_MS)
        .execute(&mut *tx)
        .await?;
    for subject in subjects {
        sqlx::query("insert into sign_in_failures (subject, failed_at) values ($1, $2)")
            .bind(*subject)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// `POST /logout`: ends the session everywhere (it lives in the database) and clears the cookie.
pub async fn logout(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    jar: CookieJar,
    body: Bytes,
) -> Result<Response, PageError> {
    let form = FormData::parse(&body);
    if let Some(current) = session::current(&state, &headers).await?
        && !current.csrf_matches(form.get("csrf_token"))
    {
        return Err(PageError::forged());
    }
    let jar = session::end(&state, jar).await?;
    Ok((jar, see_other("/login")).into_response())
}

/// `POST /settings/workspace`: looks at another of the person's workspaces.
pub async fn switch_workspace(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, PageError> {
    let form = FormData::parse(&body);
    let signed = signed_in(&state, &headers, DEFAULT_NEXT).await?;
    signed.check_csrf(&form)?;
    let wanted = form.get("workspace_id");
    if !signed.workspaces.iter().any(|w| w.id == wanted) {
        return Err(PageError::not_found(
            "You are not a member of that workspace.",
        ));
    }
    session::set_workspace(&state, &signed.session, wanted).await?;
    let next = safe_next(form.get("next"));
    Ok(see_other(next.as_deref().unwrap_or(DEFAULT_NEXT)))
}
