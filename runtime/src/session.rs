//! Browser sessions: a random cookie value whose SHA-256 names a row in `web_sessions`.
//!
//! Sessions live in the database, not in a process, so any instance serves any browser and
//! signing out (or removing the person) ends the session everywhere at once. Each session carries
//! its own CSRF token (the synchronizer-token pattern): every form a signed-in page renders holds
//! it, and every POST must return it. Forms shown before sign-in (the login form itself) use a
//! double-submit cookie instead, since there is no session yet to hold the token.
//!
//! The cookie is `HttpOnly` and `SameSite=Lax`, and `Secure` when the base URL is https.
//!
//! Its own module below both [`crate::web`] and [`crate::oauth`], because both sign a browser in
//! or read who is signed in (the settings pages, the OAuth consent page); owned by either, it would
//! make the other import it back.

use axum::http::HeaderMap;
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use sqlx::Row;
use subtle::ConstantTimeEq;

use crate::error::ApiError;
use crate::ids;
use crate::state::AppState;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "outreach_session";

/// The pre-sign-in double-submit CSRF cookie's name.
pub const LOGIN_CSRF_COOKIE: &str = "outreach_login_csrf";

/// How long a session lasts after sign-in.
pub const SESSION_LIFETIME_MS: i64 = 12 * 60 * 60 * 1000;

/// How long a flash waits to be shown. It holds a new key's value in plain text, so it should not
/// outlive the redirect that shows it by much.
pub const FLASH_LIFETIME_MS: i64 = 5 * 60 * 1000;

/// A signed-in browser, as read from the database on this request.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    pub person_id: String,
    pub email: String,
    pub display_name: String,
    /// The workspace the person is looking at, if it is still one of theirs.
    pub workspace_id: Option<String>,
    pub csrf_token: String,
    pub expires_at: i64,
}

impl Session {
    /// Whether a form's `csrf_token` is this session's, compared in constant time.
    pub fn csrf_matches(&self, submitted: &str) -> bool {
        constant_time_eq(&self.csrf_token, submitted)
    }
}

/// Equality of two secrets without an early exit that would time the first difference.
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Whether cookies get the `Secure` attribute: only when the service is served over https.
pub fn secure_cookies(state: &AppState) -> bool {
    state.config.base_url.starts_with("https://")
}

fn cookie<'c>(state: &AppState, name: &'c str, value: String, max_age_ms: i64) -> Cookie<'c> {
    Cookie::build((name, value))
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(secure_cookies(state))
        .max_age(time::Duration::milliseconds(max_age_ms))
        .build()
}

/// The session of this request, if its cookie names a live one. The workspace is dropped when
/// the person is no longer a member of it.
pub async fn current(state: &AppState, headers: &HeaderMap) -> Result<Option<Session>, ApiError> {
    let jar = CookieJar::from_headers(headers);
    let Some(value) = jar.get(SESSION_COOKIE).map(|c| c.value().to_owned()) else {
        return Ok(None);
    };
    let row = sqlx::query(
        "select s.id, s.person_id, p.email, p.display_name, s.csrf_token, s.expires_at, \
                m.workspace_id \
         from web_sessions s \
         join people p on p.id = s.person_id \
         left join memberships m on m.workspace_id = s.workspace_id and m.person_id = s.person_id \
         where s.token_hash = $1 and s.expires_at > $2",
    )
    .bind(ids::hash_secret(&value))
    .bind(state.clock.now_ms())
    .fetch_optional(state.db.pool())
    .await?;
    let Some(row) = row else { return Ok(None) };
    Ok(Some(Session {
        id: row.try_get("id")?,
        person_id: row.try_get("person_id")?,
        email: row.try_get("email")?,
        display_name: row.try_get("display_name")?,
        workspace_id: row.try_get("workspace_id")?,
        csrf_token: row.try_get("csrf_token")?,
        expires_at: row.try_get("expires_at")?,
    }))
}

/// Starts a session for a person who just signed in; returns the jar with its cookie set.
/// The workspace starts as the person's oldest membership.
pub async fn start(
    state: &AppState,
    person_id: &str,
    jar: CookieJar,
) -> Result<CookieJar, ApiError> {
    let now = state.clock.now_ms();
    let value = ids::new_secret("ses_");
    let workspace_id: Option<String> = sqlx::query_scalar(
        "select workspace_id from memberships where person_id = $1 \
         order by created_at, workspace_id limit 1",
    )
    .bind(person_id)
    .fetch_optional(state.db.pool())
    .await?;
    sqlx::query(
        "insert into web_sessions \
            (id, token_hash, person_id, workspace_id, csrf_token, created_at, expires_at) \
         values ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(ids::new_id("ses"))
    .bind(ids::hash_secret(&value))
    .bind(person_id)
    .bind(workspace_id)
    .bind(ids::new_secret(""))
    .bind(now)
    .bind(now + SESSION_LIFETIME_MS)
    .execute(state.db.writes())
    .await?;
    Ok(jar.add(cookie(state, SESSION_COOKIE, value, SESSION_LIFETIME_MS)))
}

/// Ends the session of this request (if any) and clears its cookie.
pub async fn end(state: &AppState, jar: CookieJar) -> Result<CookieJar, ApiError> {
    if let Some(value) = jar.get(SESSION_COOKIE).map(|c| c.value().to_owned()) {
        sqlx::query("delete from web_sessions where token_hash = $1")
            .bind(ids::hash_secret(&value))
            .execute(state.db.writes())
            .await?;
    }
    Ok(jar.add(cookie(state, SESSION_COOKIE, String::new(), 0)))
}

/// Switches the workspace a session looks at; the caller checks the membership first.
pub async fn set_workspace(
    state: &AppState,
    session: &Session,
    workspace_id: &str,
) -> Result<(), ApiError> {
    sqlx::query("update web_sessions set workspace_id = $1 where id = $2")
        .bind(workspace_id)
        .bind(&session.id)
        .execute(state.db.writes())
        .await?;
    Ok(())
}

/// Keeps a value to show once on the session's next page (a new key's secret), for at most
/// [`FLASH_LIFETIME_MS`].
pub async fn set_flash(state: &AppState, session: &Session, value: &str) -> Result<(), ApiError> {
    let now = state.clock.now_ms();
    clear_expired_flashes(state, now).await?;
    sqlx::query("update web_sessions set flash = $1, flash_expires_at = $2 where id = $3")
        .bind(value)
        .bind(now + FLASH_LIFETIME_MS)
        .bind(&session.id)
        .execute(state.db.writes())
        .await?;
    Ok(())
}

/// Takes the session's flash value if it starts with `prefix` (the page it is for), clearing it
/// so a reload no longer shows it, and answers the rest; another page's flash is left for that
/// page. An expired flash (or one without an expiry, set before flashes had one) is cleared and
/// not returned; expired flashes of other sessions are cleared on the way.
///
/// Read, then cleared only if it is still the value read: `returning` would give the row after
/// the update (the null), and the compare-and-clear means two pages loading at once cannot both
/// show it.
pub async fn take_flash(
    state: &AppState,
    session: &Session,
    prefix: &str,
) -> Result<Option<String>, ApiError> {
    let now = state.clock.now_ms();
    let row = sqlx::query("select flash, flash_expires_at from web_sessions where id = $1")
        .bind(&session.id)
        .fetch_optional(state.db.pool())
        .await?;
    let Some(row) = row else { return Ok(None) };
    let Some(flash) = row
        .try_get::<Option<String>, _>("flash")?
        .filter(|flash| flash.starts_with(prefix))
    else {
        return Ok(None);
    };
    let expires_at: Option<i64> = row.try_get("flash_expires_at")?;
    let cleared = sqlx::query(
        "update web_sessions set flash = null, flash_expires_at = null \
         where id = $1 and flash = $2",
    )
    .bind(&session.id)
    .bind(&flash)
    .execute(state.db.writes())
    .await?;
    clear_expired_flashes(state, now).await?;
    let live = expires_at.is_some_and(|at| at > now);
    Ok((cleared.rows_affected() == 1 && live).then(|| flash[prefix.len()..].to_owned()))
}

/// Clears every session's flash that has expired (or never had an expiry). Runs only where a flash
/// is being written or taken anyway, so an ordinary page load stays a read.
async fn clear_expired_flashes(state: &AppState, now: i64) -> Result<(), ApiError> {
    sqlx::query(
        "update web_sessions set flash = null, flash_expires_at = null \
         where flash is not null and (flash_expires_at is null or flash_expires_at <= $1)",
    )
    .bind(now)
    .execute(state.db.writes())
    .await?;
    Ok(())
}

/// The login form's double-submit CSRF value: the one already in the cookie, or a new one with
/// the cookie to set.
pub fn login_csrf(state: &AppState, jar: CookieJar) -> (CookieJar, String) {
    if let Some(existing) = jar.get(LOGIN_CSRF_COOKIE).map(|c| c.value().to_owned())
        && ids::is_secret_body(&existing)
    {
        return (jar, existing);
    }
    let value = ids::new_secret("");
    let jar = jar.add(cookie(
        state,
        LOGIN_CSRF_COOKIE,
        value.clone(),
        SESSION_LIFETIME_MS,
    ));
    (jar, value)
}

/// Whether a pre-sign-in form's `csrf_token` matches its cookie.
pub fn login_csrf_matches(jar: &CookieJar, submitted: &str) -> bool {
    jar.get(LOGIN_CSRF_COOKIE)
        .is_some_and(|c| !c.value().is_empty() && constant_time_eq(c.value(), submitted))
}
