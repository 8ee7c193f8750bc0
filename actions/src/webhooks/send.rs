//! One attempt of a webhook: the request as Standard Webhooks 1.0 says it, and what came back.
//!
//! Success is any 2xx. A redirect is a failure and is not followed (the address was checked;
//! where it points was not). The attempt gives up after 15 seconds. A `429`, `502`, `503` or
//! `504` may carry `Retry-After` (seconds or a date), which the schedule honours when it asks
//! for longer than the next planned attempt. A `410 Gone` is the receiver saying it will never
//! take another: the caller disables the endpoint.

use std::sync::LazyLock;
use std::time::{Duration, Instant, SystemTime};

use reqwest::StatusCode;
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER, USER_AGENT};

use super::address::{Reach, resolver};
use super::signing::signature_header;
use crate::deliveries::Attempt;

/// How long an attempt may take, from connecting to the end of the answer's head.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);

/// The most of an answer's body kept.
pub const KEPT_BODY_BYTES: usize = 1024;

/// The `user-agent` of every attempt.
pub const AGENT: &str = concat!("outreach-webhooks/", env!("CARGO_PKG_VERSION"));

/// How long connecting may take, within the attempt's 15 seconds.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The client of every attempt: redirects not followed, the checked resolver, and no proxy
/// (a proxy from the environment would resolve the host itself, past the resolver's check).
fn client(reach: Reach) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(ATTEMPT_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .no_proxy()
        .dns_resolver(resolver(reach))
        .build()
        // Building fails only when the TLS backend cannot start, which no attempt survives.
        .expect("the webhook HTTP client builds")
}

static STRICT: LazyLock<reqwest::Client> = LazyLock::new(|| {
    client(Reach {
        plain_http: false,
        loopback: false,
    })
});
static OPEN: LazyLock<reqwest::Client> = LazyLock::new(|| {
    client(Reach {
        plain_http: true,
        loopback: true,
    })
});

/// A message to send: the event's id (`webhook-id`), the attempt's time and the body.
pub struct Message<'a> {
    pub id: &'a str,
    /// Unix seconds ([`wall_clock_seconds`]).
    pub timestamp: i64,
    pub body: &'a str,
}

/// The time an attempt's `webhook-timestamp` says: the system's, not the service clock. A
/// receiver checks it against its own clock to refuse replayed messages (Standard Webhooks'
/// libraries allow 5 minutes), so a test clock moved a day ahead must not move it; the event's
/// own time, in the body's `timestamp`, is the service clock's.
pub fn wall_clock_seconds() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_secs()).unwrap_or(i64::MAX)
        })
}

/// Attempts a delivery of `message` to `url`, signed with each of `keys`; `now_ms` is the
/// service clock's time, which a `Retry-After` date is read against.
pub async fn attempt(
    reach: Reach,
    url: &str,
    keys: &[Vec<u8>],
    message: &Message<'_>,
    now_ms: i64,
) -> Attempt {
    let started = Instant::now();
    let failed = |error: String| Attempt {
        duration_ms: elapsed_ms(started),
        error: Some(error),
        ..Attempt::default()
    };
    // A literal address is not resolved, so the resolver never sees it: check it here.
    if let Some(refusal) = literal_refusal(reach, url) {
        return failed(refusal);
    }
    if !reach.plain_http && !url.starts_with("https://") {
        return failed(
            "the endpoint's URL is not `https`, which every environment but development and test requires"
                .to_owned(),
        );
    }
    let client = if reach.loopback { &*OPEN } else { &*STRICT };
    let request = client
        .post(url)
        .header(CONTENT_TYPE, "application/json")
        .header(USER_AGENT, AGENT)
        .header("webhook-id", message.id)
        .header("webhook-timestamp", message.timestamp.to_string())
        .header(
            "webhook-signature",
            signature_header(keys, message.id, message.timestamp, message.body),
        )
        .body(message.body.to_owned());
    let response = match request.send().await {
        Ok(response) => response,
        Err(error) => return failed(describe(&error)),
    };
    let status = response.status();
    let not_before_ms = retry_after_ms(status, response.headers(), now_ms + elapsed_ms(started));
    let body = kept_body(response).await;
    let succeeded = status.is_success();
    Attempt {
        response_status: Some(i64::from(status.as_u16())),
        duration_ms: elapsed_ms(started),
        response_body: Some(body),
        error: (!succeeded).then(|| status_error(status)),
        succeeded,
        not_before_ms,
    }
}

fn elapsed_ms(started: Instant) -> i64 {
    i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX)
}

fn literal_refusal(reach: Reach, url: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    let ip: std::net::IpAddr = match parsed.host()? {
        url::Host::Ipv4(ip) => ip.into(),
        url::Host::Ipv6(ip) => ip.into(),
        url::Host::Domain(_) => return None,
    };
    reach
        .refusal(ip)
        .map(|why| format!("the endpoint's address is {why} ({ip}), which webhooks may not reach"))
}

fn status_error(status: StatusCode) -> String {
    if status.is_redirection() {
        format!("the endpoint answered {status}: redirects are not followed")
    } else if status == StatusCode::GONE {
        "the endpoint answered 410 Gone: it takes no more deliveries".to_owned()
    } else {
        format!("the endpoint answered {status}")
    }
}

/// A failed request, as one sentence with its causes.
fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return format!("no answer within {} seconds", ATTEMPT_TIMEOUT.as_secs());
    }
    let mut text = if error.is_connect() {
        "could not connect".to_owned()
    } else {
        "the request failed".to_owned()
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// When a `429`, `502`, `503` or `504` says to come back (epoch ms, service clock).
fn retry_after_ms(status: StatusCode, headers: &HeaderMap, now_ms: i64) -> Option<i64> {
    if !matches!(status.as_u16(), 429 | 502 | 503 | 504) {
        return None;
    }
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<i64>() {
        return Some(now_ms + seconds.clamp(0, 7 * 24 * 3600) * 1000);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    let wait = date.duration_since(SystemTime::now()).unwrap_or_default();
    Some(
        now_ms
            + i64::try_from(wait.as_millis())
                .unwrap_or(i64::MAX)
                .min(7 * 24 * 3_600_000),
    )
}

/// The first [`KEPT_BODY_BYTES`] of the answer's body, as text (cut at a character).
async fn kept_body(mut response: reqwest::Response) -> String {
    let mut kept = Vec::with_capacity(KEPT_BODY_BYTES);
    while kept.len() < KEPT_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                let room = KEPT_BODY_BYTES - kept.len();
                kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    // PostgreSQL's text holds no NUL, and a binary answer (a GIF, a gzip) may carry some.
    let mut text = String::from_utf8_lossy(&kept).replace('\0', "\u{fffd}");
    while text.len() > KEPT_BODY_BYTES {
        text.pop();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn retry_after_counts_only_for_the_statuses_that_may_send_it() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, HeaderValue::from_static("120"));
        assert_eq!(
            retry_after_ms(StatusCode::TOO_MANY_REQUESTS, &headers, 1_000),
            Some(121_000)
        );
        assert_eq!(
            retry_after_ms(StatusCode::SERVICE_UNAVAILABLE, &headers, 0),
            Some(120_000)
        );
        assert_eq!(
            retry_after_ms(StatusCode::INTERNAL_SERVER_ERROR, &headers, 0),
            None
        );
        headers.insert(
            RETRY_AFTER,
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        // A date in the past: come back now.
        assert_eq!(
            retry_after_ms(StatusCode::BAD_GATEWAY, &headers, 5),
            Some(5)
        );
    }
}
