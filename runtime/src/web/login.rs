//! Sign-in, sign-out and the workspace switcher.
//!
//! Passwords are argon2id hashes (the parameters `admin::hash_password` used are read back from
//! the stored PHC string). Guessing is throttled in the database, so every instance counts the same
//! attempts: an account (`account:<email>`) gets 5 and a client address (`address:<ip>`) 20 within
//! 15 minutes; past that the answer is 429 with `Retry-After` and no password is checked at all.
//! Every attempt is recorded (committed) *before* the password is checked and the count includes
//! it, so parallel attempts cannot all read "no failures yet": whatever the interleaving, at most 5
//! attempts per account in the window get their password checked. A success clears the account's
//! rows and takes back its own address row (by the attempt's id), but not the address's other
//! rows, or one valid account would reset a guesser's budget: the address budget counts failures.
//! A refused attempt stays counted (retrying before `Retry-After` pushes the end back). An unknown email
//! costs the same argon2 work as a known one, against a dummy hash, so the time taken does not tell
//! which addresses have accounts.
//!
//! Argon2 costs memory on purpose, so only [`VERIFY_PERMITS`] checks run at once; an attempt that
//! gets no slot within [`VERIFY_WAIT`] is answered 503 with `Retry-After: 1`, unchecked.
//!
//! The address is the TCP peer, unless the peer is one of `Config::trusted_proxies`: then it is the
//! right-most `X-Forwarded-For` entry that is not itself a trusted proxy (see [`client_address`]).
//! `X-Forwarded-For` from any other peer is ignored, since anyone can send it.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use askama::Template;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum_extra::extract::cookie::CookieJar;
use serde::Deserialize;
use sqlx::Row;
use tokio::sync::{Semaphore, SemaphorePermit};

use super::{FormData, PageError, render, safe_next, see_other, signed_in_form, with_header};
use crate::admin;
use crate::ids;
use crate::session;
use crate::state::AppState;

/// The sliding window attempts are counted over.
const THROTTLE_WINDOW_MS: i64 = 15 * 60 * 1000;
/// Attempts one account may have in the window.
const ACCOUNT_LIMIT: i64 = 5;
/// Attempts one client address may have in the window (it may try several accounts).
const ADDRESS_LIMIT: i64 = 20;

/// Password verifications that may run at once (argon2's default costs 19 MiB each).
const VERIFY_PERMITS: usize = 4;
/// How long an attempt waits for a verification slot before it is answered 503.
const VERIFY_WAIT: Duration = Duration::from_secs(2);
/// The verification slots, shared by every request of this process.
static VERIFICATIONS: Semaphore = Semaphore::const_new(VERIFY_PERMITS);

/// Where a sign-in goes when it has no (acceptable) `next`.
const DEFAULT_NEXT: &str = "/settings/api";

#[derive(Template)]
#[template(path = "web/login.html")]
struct LoginPage<'a> {
    csrf_token: &'a str,
    next: &'a str,
    email: &'a str,
    error: Option<&'a str>,
    /// The app an OAuth request is connecting, when `next` is one.
    connecting: Option<String>,
}

/// The name of the app whose authorization request `next` continues, if it is one.
async fn connecting_app(state: &AppState, next: &str) -> Result<Option<String>, PageError> {
    let Some(query) = next.strip_prefix("/oauth/authorize?") else {
        return Ok(None);
    };
    let Some(client_id) = url::form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "client_id")
        .map(|(_, value)| value.into_owned())
    else {
        return Ok(None);
    };
    Ok(crate::oauth::client_name_before_sign_in(state, &client_id).await?)
}

#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    #[serde(default)]
    next: Option<String>,
}

async fn login_page(
    jar: CookieJar,
    state: &AppState,
    status: StatusCode,
    next: &str,
    email: &str,
    error: Option<&str>,
) -> Result<Response, PageError> {
    let connecting = connecting_app(state, next).await?;
    let (jar, csrf_token) = session::login_csrf(state, jar);
    let page = render(
        status,
        &LoginPage {
            csrf_token: &csrf_token,
            next,
            email,
            error,
            connecting,
        },
    );
    Ok((jar, page).into_response())
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
    login_page(
        jar,
        &state,
        StatusCode::OK,
        next.as_deref().unwrap_or(""),
        "",
        None,
    )
    .await
}

/// `POST /login`: checks the CSRF cookie, records the attempt, checks the throttle, then the
/// password.
pub async fn submit(
    State(state): State<Arc<AppState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
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
    let client = client_address(
        peer.ip(),
        &forwarded_for(&headers),
        &state.config.trusted_proxies,
    );
    let address = format!("address:{client}");
    let now = state.clock.now_ms();
    // Recorded and committed before anything is checked: a parallel attempt counts this one.
    let attempt = record_attempt(&state, &[&account, &address], now).await?;
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
        )
        .await?;
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
    let Some(permit) = verification_slot(&VERIFICATIONS, VERIFY_WAIT).await else {
        // The server is at capacity, not this client over its budget: 503, try again shortly.
        tracing::warn!("every password verification slot is busy; a sign-in was turned away");
        let page = login_page(
            jar,
            &state,
            StatusCode::SERVICE_UNAVAILABLE,
            next_field,
            &email,
            Some("Too many sign-ins are being checked right now. Try again in a moment."),
        )
        .await?;
        return Ok(with_header(page, header::RETRY_AFTER, "1"));
    };
    let verified = verify_password(password.to_owned(), hash, permit).await;
    let Some(person_id) = person_id.filter(|_| verified) else {
        return login_page(
            jar,
            &state,
            StatusCode::UNAUTHORIZED,
            next_field,
            &email,
            Some("Wrong email or password."),
        )
        .await;
    };
    // The account starts afresh; the address keeps its failures but not this success.
    sqlx::query("delete from sign_in_failures where subject = $1 or attempt = $2")
        .bind(&account)
        .bind(&attempt)
        .execute(state.db.writes())
        .await?;
    // A new session on every sign-in: a session value planted before sign-in is never promoted.
    let jar = session::end(&state, jar).await?;
    let jar = session::start(&state, &person_id, jar).await?;
    Ok((jar, see_other(next.as_deref().unwrap_or(DEFAULT_NEXT))).into_response())
}

/// Why a current password could not be checked: too many attempts (seconds to wait) or every
/// verification slot busy.
pub enum Unchecked {
    Throttled(i64),
    Busy,
}

/// Checks a signed-in person's current password (the password page) under the sign-in page's
/// account throttle and verification slots, so a borrowed session cannot guess faster than the
/// sign-in form allows. A right password clears the account's failures, as a sign-in does.
pub async fn check_current_password(
    state: &AppState,
    email: &str,
    password: &str,
) -> Result<Result<bool, Unchecked>, PageError> {
    let account = format!("account:{email}");
    let now = state.clock.now_ms();
    let attempt = record_attempt(state, &[&account], now).await?;
    if let Some(wait) = throttled(state, &account, ACCOUNT_LIMIT, now).await? {
        return Ok(Err(Unchecked::Throttled(wait)));
    }
    let hash: String = sqlx::query_scalar("select password_hash from people where email = $1")
        .bind(email)
        .fetch_one(state.db.pool())
        .await?;
    let Some(permit) = verification_slot(&VERIFICATIONS, VERIFY_WAIT).await else {
        return Ok(Err(Unchecked::Busy));
    };
    let verified = verify_password(password.to_owned(), hash, permit).await;
    if verified {
        sqlx::query("delete from sign_in_failures where subject = $1 or attempt = $2")
            .bind(&account)
            .bind(&attempt)
            .execute(state.db.writes())
            .await?;
    }
    Ok(Ok(verified))
}

/// Every `X-Forwarded-For` entry of a request, left to right across repeated headers.
fn forwarded_for(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|entry| entry.trim().to_owned())
        .collect()
}

/// The client address the throttle counts.
///
/// The TCP peer, unless it is a trusted proxy: then the right-most `X-Forwarded-For` entry that
/// is not itself a trusted proxy. Entries are read right to left because each proxy appends the
/// address it saw, so only the right-most ones were written by proxies we trust; everything to the
/// left of the first untrusted entry was written by the client and may be anything. For the same
/// reason an entry that is not an address where the client's should be (`unknown`, an obfuscated
/// name) is not skipped: the answer is then the peer, which throttles the proxy as a whole rather
/// than letting a client choose its own address. Entries may carry a port (`1.2.3.4:80`,
/// `[::1]:80`), and IPv4-mapped IPv6 addresses count as the IPv4 address.
pub fn client_address<S: AsRef<str>>(
    peer: IpAddr,
    forwarded_for: &[S],
    trusted_proxies: &[IpAddr],
) -> IpAddr {
    let peer = peer.to_canonical();
    let trusted = |ip: &IpAddr| trusted_proxies.iter().any(|t| t.to_canonical() == *ip);
    if !trusted(&peer) {
        return peer;
    }
    for entry in forwarded_for.iter().rev() {
        let entry = entry.as_ref().trim();
        let parsed = entry
            .parse::<IpAddr>()
            .or_else(|_| entry.parse::<SocketAddr>().map(|socket| socket.ip()));
        match parsed.map(|ip| ip.to_canonical()) {
            Ok(ip) if trusted(&ip) => {}
            Ok(ip) => return ip,
            Err(_) => return peer,
        }
    }
    peer
}

/// A password verification slot, or `None` when none frees up within `wait`.
async fn verification_slot(
    slots: &'static Semaphore,
    wait: Duration,
) -> Option<SemaphorePermit<'static>> {
    tokio::time::timeout(wait, slots.acquire()).await.ok()?.ok()
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
/// CPU and memory on purpose). The slot is held until the hash is done, even if the request is
/// dropped meanwhile (a client that hangs up does not free a slot its check still uses).
async fn verify_password(password: String, hash: String, slot: SemaphorePermit<'static>) -> bool {
    tokio::task::spawn_blocking(move || {
        let verified = admin::password_matches(&hash, &password);
        drop(slot);
        verified
    })
    .await
    .unwrap_or(false)
}

/// When `subject` has more than `limit` attempts in the window (the one being made included):
/// the seconds until the oldest of the most recent `limit` leaves it (then one more attempt is
/// allowed).
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
    .bind(limit + 1)
    .fetch_all(state.db.pool())
    .await?;
    Ok(retry_after(&times, limit, now))
}

/// The `Retry-After` seconds of a subject whose most recent attempt times (newest first, at most
/// `limit + 1` of them) are `times`, or `None` when they are within the limit.
fn retry_after(times: &[i64], limit: i64, now: i64) -> Option<i64> {
    if (times.len() as i64) <= limit {
        return None;
    }
    let oldest_counted = usize::try_from(limit - 1).ok().and_then(|i| times.get(i))?;
    let frees_at = oldest_counted + THROTTLE_WINDOW_MS;
    Some(((frees_at - now + 999) / 1000).max(1))
}

/// Records a sign-in attempt against each subject (committed before the password is checked),
/// and forgets attempts older than the window.
/// Returns the attempt's id, which a successful sign-in uses to take its rows back.
async fn record_attempt(
    state: &AppState,
    subjects: &[&str],
    now: i64,
) -> Result<String, PageError> {
    let attempt = ids::new_id("att");
    let mut tx = state.db.begin_write().await?;
    sqlx::query("delete from sign_in_failures where failed_at <= $1")
        .bind(now - THROTTLE_WINDOW_MS)
        .execute(&mut *tx)
        .await?;
    for subject in subjects {
        sqlx::query(
            "insert into sign_in_failures (subject, failed_at, attempt) values ($1, $2, $3)",
        )
        .bind(*subject)
        .bind(now)
        .bind(&attempt)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(attempt)
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
    let (signed, form) = signed_in_form(&state, &headers, &body, DEFAULT_NEXT).await?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let peer = ip("198.51.100.4");
        assert_eq!(client_address(peer, &["203.0.113.9"], &[]), peer);
        assert_eq!(
            client_address(peer, &["203.0.113.9"], &[ip("10.0.0.1")]),
            peer
        );
        assert_eq!(client_address::<&str>(peer, &[], &[]), peer);
    }

    #[test]
    fn behind_a_trusted_proxy_the_right_most_untrusted_entry_is_the_client() {
        let proxies = [ip("10.0.0.1"), ip("10.0.0.2")];
        let peer = ip("10.0.0.1");
        assert_eq!(
            client_address(peer, &["203.0.113.9"], &proxies),
            ip("203.0.113.9")
        );
        // The client wrote the left-most entries; only the right-most untrusted one counts.
        assert_eq!(
            client_address(peer, &["1.1.1.1", "203.0.113.9", "10.0.0.2"], &proxies),
            ip("203.0.113.9")
        );
        // Ports and spaces are tolerated; IPv4-mapped IPv6 is the IPv4 address.
        assert_eq!(
            client_address(peer, &[" 203.0.113.9:4711 "], &proxies),
            ip("203.0.113.9")
        );
        assert_eq!(
            client_address(peer, &["[2001:db8::7]:443"], &proxies),
            ip("2001:db8::7")
        );
        assert_eq!(
            client_address(ip("::ffff:10.0.0.1"), &["::ffff:203.0.113.9"], &proxies),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn without_a_usable_entry_the_trusted_peer_is_the_client() {
        let proxies = [ip("10.0.0.1"), ip("10.0.0.2")];
        let peer = ip("10.0.0.1");
        assert_eq!(client_address::<&str>(peer, &[], &proxies), peer);
        assert_eq!(client_address(peer, &["10.0.0.2"], &proxies), peer);
        assert_eq!(client_address(peer, &["", "garbage"], &proxies), peer);
        // Not a client-chosen entry further left either.
        assert_eq!(
            client_address(peer, &["203.0.113.9", "unknown"], &proxies),
            peer
        );
    }

    #[test]
    fn repeated_headers_are_read_left_to_right() {
        let mut headers = HeaderMap::new();
        headers.append(
            "x-forwarded-for",
            "1.1.1.1, 2.2.2.2".parse().expect("value"),
        );
        headers.append("x-forwarded-for", "3.3.3.3".parse().expect("value"));
        assert_eq!(
            forwarded_for(&headers),
            ["1.1.1.1", "2.2.2.2", "3.3.3.3"].map(String::from)
        );
    }

    #[test]
    fn retry_after_is_when_the_oldest_counted_attempt_leaves_the_window() {
        let now = 1_000_000_000;
        let times = [now, now - 1000, now - 2000, now - 3000, now - 60_000];
        assert_eq!(retry_after(&times, 5, now), None);
        let times = [now, now, now - 1000, now - 2000, now - 3000, now - 60_000];
        // The fifth most recent (now - 3000) frees a slot 15 minutes after it was made.
        assert_eq!(retry_after(&times, 5, now), Some(900 - 3));
        let times = [now, now, now, now, now - 899_999, now - 899_999];
        assert_eq!(retry_after(&times, 5, now), Some(1));
    }

    #[tokio::test]
    async fn no_verification_slot_is_answered_after_the_wait() {
        static SLOTS: Semaphore = Semaphore::const_new(1);
        let held = verification_slot(&SLOTS, Duration::from_millis(10)).await;
        assert!(held.is_some());
        assert!(
            verification_slot(&SLOTS, Duration::from_millis(20))
                .await
                .is_none()
        );
        drop(held);
        assert!(
            verification_slot(&SLOTS, Duration::from_millis(20))
                .await
                .is_some()
        );
    }
}
