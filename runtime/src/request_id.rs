//! Request ids and the access log: every request gets an id, echoed in `x-request-id` and on its
//! log lines, and one `info` line when it ends.
//!
//! A leaf of its own so that the auth middleware, both faces and the error logging can name a
//! request's id without reaching up to the server that installs the middleware. The access line
//! needs facts that only inner layers learn (the matched route, the tool, the credential), so
//! this middleware puts a [`RequestLog`] in the extensions that they fill in and it reads after
//! the response. Everything a client chose (the path, a tool name) goes through [`clip`] first,
//! so a 100 KB path is a few hundred characters in the log.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::ids;

/// The request id, put in the extensions by [`with_request_id`].
#[derive(Debug, Clone)]
pub struct RequestId(pub Arc<str>);

/// The id of a request (or `unknown` outside the middleware).
pub fn request_id(request: &Request) -> String {
    request
        .extensions()
        .get::<RequestId>()
        .map_or_else(|| "unknown".to_owned(), |id| id.0.to_string())
}

/// The longest client-supplied string written to a log field, in bytes.
pub const MAX_LOGGED_CHARS: usize = 200;

/// A client-supplied string fit for a log line: at most [`MAX_LOGGED_CHARS`] bytes, cut at a
/// character boundary, with a marker saying how long it was.
pub fn clip(text: &str) -> Cow<'_, str> {
    if text.len() <= MAX_LOGGED_CHARS {
        return Cow::Borrowed(text);
    }
    let mut end = MAX_LOGGED_CHARS;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!(
        "{}…[truncated, {} bytes]",
        &text[..end],
        text.len()
    ))
}

/// What the inner layers learn about a request for its access line and its metrics.
#[derive(Debug, Clone, Default)]
pub struct LogFields {
    /// The matched route template, e.g. `/api/v1/prospects/{id}`.
    pub route: Option<String>,
    /// The action's name when the request called one (REST route or MCP tool).
    pub action: Option<String>,
    /// The credential's id once authenticated.
    pub credential_id: Option<String>,
    /// Set when the body did not arrive within the body timeout.
    pub body_timed_out: bool,
}

/// Shared between [`with_request_id`] and the inner layers that fill it in.
#[derive(Debug, Default)]
pub struct RequestLog(Mutex<LogFields>);

impl RequestLog {
    /// Changes the fields; the lock is held only for `change`.
    pub fn update(&self, change: impl FnOnce(&mut LogFields)) {
        change(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }

    pub fn fields(&self) -> LogFields {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Fills in the request's [`RequestLog`], if the request went through [`with_request_id`].
pub fn note(request: &Request, change: impl FnOnce(&mut LogFields)) {
    if let Some(log) = request.extensions().get::<Arc<RequestLog>>() {
        log.update(change);
    }
}

/// Gives the request an id, logs one `info` line when it ends, and returns the id in
/// `x-request-id`.
pub async fn with_request_id(mut request: Request, next: Next) -> Response {
    let id: Arc<str> = ids::new_id("req").into();
    let log = Arc::new(RequestLog::default());
    request.extensions_mut().insert(RequestId(id.clone()));
    request.extensions_mut().insert(log.clone());
    let method = request.method().clone();
    let path = clip(request.uri().path()).into_owned();
    let span = tracing::info_span!("request", request_id = %id, %method, path = %path);
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    let fields = log.fields();
    span.in_scope(|| {
        tracing::info!(
            request_id = %id,
            %method,
            route = fields.route.as_deref().unwrap_or("unmatched"),
            path = %path,
            action = fields.action.as_deref(),
            status = response.status().as_u16(),
            duration_ms = started.elapsed().as_secs_f64() * 1000.0,
            credential_id = fields.credential_id.as_deref(),
            "request"
        );
    });
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_strings_are_clipped_with_their_length() {
        assert_eq!(clip("short"), "short");
        let long = "é".repeat(5_000);
        let clipped = clip(&long);
        assert!(clipped.len() < MAX_LOGGED_CHARS + 40, "{clipped}");
        assert!(clipped.ends_with("…[truncated, 10000 bytes]"), "{clipped}");
    }
}
