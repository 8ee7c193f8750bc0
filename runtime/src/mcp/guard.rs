//! The HTTP side of `/api/mcp`, in front of rmcp: what a client gets when its request is wrong.
//!
//! rmcp's transport answers a wrong `Host`, a missing `Accept` type, a body that is not JSON or
//! a batch with plain-text 403, 406 and 415 responses, which a JSON-RPC client cannot read and
//! a person cannot act on; a `tools/call` whose `arguments` is an array becomes "method not
//! found". This layer answers those cases first, each in the form the client reads:
//!
//! - Transport refusals (`Host`, `Accept`, `Content-Type`, body size, a method other than POST)
//!   are a JSON body `{error, code}` with the 4xx status, saying what to send instead.
//! - A body that is JSON-RPC in name only gets a JSON-RPC error: parse error (-32700) for bad
//!   JSON, invalid request (-32600) for a batch, a null or odd `id`, a missing `method`, a wrong
//!   `jsonrpc`; invalid params (-32602) for `params` or `arguments` that are not objects.
//!   Unknown methods and tools are left to rmcp and the handler (-32601 and -32602).
//! - Whatever plain-text refusal rmcp still makes is rewritten into the same JSON body.
//!
//! `Host` is held to the base URL's authority against DNS rebinding; when the base URL's host is
//! a loopback address, every spelling of loopback (`localhost`, `127.0.0.1`, `[::1]`) with the
//! same port is the same server (a rebinding attack needs a name the attacker controls, never
//! one of these), so the address printed at start-up and the one a person types both work.
//! The toolsets a request asks for are read here too ([`Selection`]), so a bad name is a 400 with
//! the JSON body before any JSON-RPC.
//! `Accept` needs `application/json` (or a wildcard): answers are JSON, except a long call held
//! open for its progress (`tasks.rs`), which is an event stream, and only for a client whose
//! `Accept` allows one ([`EventStreamAccepted`]); a client that omits `text/event-stream` gets
//! its answer at once instead, so it loses only the progress.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::selection::Selection;
use crate::config::Config;
use crate::error::{ApiError, ErrorCode};
use crate::rpc::ToolCall;
use crate::state::AppState;

/// The `Accept` value rmcp insists on; a request that accepts JSON is given it.
const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// Set on a request whose own `Accept` allowed `text/event-stream`, before the guard gave every
/// request [`ACCEPT_BOTH`] for rmcp: only such a request may be answered with a stream.
#[derive(Debug, Clone, Copy)]
pub struct EventStreamAccepted;

/// JSON-RPC error codes (JSON-RPC 2.0, section 5.1).
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const INVALID_PARAMS: i64 = -32602;

/// What the guard keeps between requests: the state, and the base URL's authority worked out
/// once (parsing the URL on every request was a tenth of the guard's cost).
#[derive(Clone)]
pub struct Guard {
    state: Arc<AppState>,
    authority: Option<Arc<str>>,
}

impl Guard {
    pub fn new(state: Arc<AppState>) -> Self {
        let authority = state.config.authority().map(Arc::from);
        Self { state, authority }
    }
}

/// The middleware: refuses what rmcp would refuse unreadably, and rewrites what it still does.
pub async fn guard(State(guard): State<Guard>, request: Request, next: Next) -> Response {
    let config = &guard.state.config;
    if let Some(refusal) = host_refusal(config, guard.authority.as_deref(), &request) {
        return refusal;
    }
    if request.method() != Method::POST {
        return json_refusals(next.run(request).await, config).await;
    }
    let (mut parts, body) = request.into_parts();
    match Selection::of_request(&parts) {
        Ok(selection) => {
            parts.extensions.insert(selection);
        }
        Err(error) => return error.into_response(),
    }
    let accept: Vec<&HeaderValue> = parts.headers.get_all(header::ACCEPT).iter().collect();
    let accepted = accept.is_empty() || accept.iter().any(|value| accepts_json(Some(value)));
    if accept.is_empty() || accept.iter().any(|value| accepts_event_stream(value)) {
        parts.extensions.insert(EventStreamAccepted);
    }
    match accepted {
        true => {
            parts
                .headers
                .insert(header::ACCEPT, HeaderValue::from_static(ACCEPT_BOTH));
        }
        false => {
            return refusal(
                StatusCode::NOT_ACCEPTABLE,
                ErrorCode::INVALID_REQUEST,
                format!(
                    "This endpoint answers in JSON: send `Accept: {ACCEPT_BOTH}` (or at least `application/json`)."
                ),
            );
        }
    }
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        let got = if content_type.is_empty() {
            "none".to_owned()
        } else {
            format!("`{content_type}`")
        };
        return ApiError::new(
            ErrorCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Send one JSON-RPC message with `Content-Type: application/json` (got {got})."),
        )
        .into_response();
    }
    let bytes = match crate::body::read(config.max_body_bytes, &parts.headers, body).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    // A call read plainly (see `crate::rpc`) is a message this would accept.
    if ToolCall::of(&parts.extensions, &bytes).is_none()
        && let Err(error) = check_message(&bytes)
    {
        return error.into_response();
    }
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    json_refusals(response, config).await
}

/// Whether an `Accept` header lets the answer be `application/json`. No header accepts anything.
fn accepts_json(accept: Option<&HeaderValue>) -> bool {
    let Some(accept) = accept else {
        return true;
    };
    accepts(accept, &["application/json", "application/*", "*/*"])
}

/// Whether one of `ranges` is in the header and not refused with `q=0`.
fn accepts(accept: &HeaderValue, ranges: &[&str]) -> bool {
    let Ok(accept) = accept.to_str() else {
        return false;
    };
    accept.split(',').any(|range| {
        let mut fields = range.split(';');
        let essence = fields.next().unwrap_or("").trim();
        let refused = fields.any(|param| {
            param
                .trim()
                .strip_prefix("q=")
                .and_then(|q| q.trim().parse::<f32>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        !refused
            && ranges
                .iter()
                .any(|accepted| essence.eq_ignore_ascii_case(accepted))
    })
}

/// Whether an `Accept` header lets the answer be `text/event-stream`.
fn accepts_event_stream(accept: &HeaderValue) -> bool {
    accepts(accept, &["text/event-stream", "text/*", "*/*"])
}

/// Holds `Host` to the base URL's authority, `expected` (any loopback spelling when that is
/// loopback).
fn host_refusal(config: &Config, expected: Option<&str>, request: &Request) -> Option<Response> {
    let expected = expected?;
    let host = match request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
    {
        Some(host) => std::borrow::Cow::Borrowed(host),
        None => std::borrow::Cow::Owned(request.uri().authority()?.to_string()),
    };
    if host_matches(expected, &host) {
        return None;
    }
    Some(refusal(
        StatusCode::FORBIDDEN,
        ErrorCode::FORBIDDEN,
        format!(
            "The Host `{}` is not this server's: connect to {} (the configured base URL; set \
             OUTREACH_BASE_URL if the server is reached by another name).",
            truncate(&host, 100),
            config.mcp_url()
        ),
    ))
}

/// Compares two `host[:port]` authorities, loopback spellings as one when `expected` is one.
pub fn host_matches(expected: &str, host: &str) -> bool {
    let (expected_host, expected_port) = split_authority(expected);
    let (host, port) = split_authority(host);
    if expected_port != port {
        return false;
    }
    expected_host.eq_ignore_ascii_case(host) || is_loopback(expected_host) && is_loopback(host)
}

fn split_authority(authority: &str) -> (&str, Option<&str>) {
    if let Some(rest) = authority.strip_prefix('[') {
        // `[::1]:8080`
        let (host, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (host, after.strip_prefix(':'));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1" || host == "::1"
}

/// Checks that a body is one JSON-RPC message the server can route; the error otherwise.
fn check_message(bytes: &[u8]) -> Result<(), RpcError> {
    let message: Value = serde_json::from_slice(bytes).map_err(|error| {
        RpcError::new(
            Value::Null,
            PARSE_ERROR,
            format!("Parse error: the body is not valid JSON ({error})."),
        )
    })?;
    let message = match message {
        Value::Object(message) => message,
        Value::Array(_) => {
            return Err(RpcError::new(
                Value::Null,
                INVALID_REQUEST,
                "Invalid request: batches are not supported; send one JSON-RPC message per request.",
            ));
        }
        other => {
            return Err(RpcError::new(
                Value::Null,
                INVALID_REQUEST,
                format!(
                    "Invalid request: the body must be one JSON-RPC message (an object), got {}.",
                    crate::dispatch::json_kind(&other)
                ),
            ));
        }
    };
    let id = match message.get("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_))) if !is_fraction(id) => Some(id.clone()),
        Some(other) => {
            return Err(RpcError::new(
                Value::Null,
                INVALID_REQUEST,
                format!(
                    "Invalid request: `id` must be a string or a whole number, got {}; leave `id` out only for a notification.",
                    crate::dispatch::json_kind(other)
                ),
            ));
        }
    };
    let reply_id = id.clone().unwrap_or(Value::Null);
    if message.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(RpcError::new(
            reply_id,
            INVALID_REQUEST,
            "Invalid request: the message must carry `\"jsonrpc\": \"2.0\"`.",
        ));
    }
    let method = match message.get("method") {
        Some(Value::String(method)) => method.as_str(),
        Some(_) => {
            return Err(RpcError::new(
                reply_id,
                INVALID_REQUEST,
                "Invalid request: `method` must be a string such as \"tools/list\".",
            ));
        }
        // A response to a server request (none are made today) or a malformed message.
        None if id.is_some()
            && (message.contains_key("result") || message.contains_key("error")) =>
        {
            return Ok(());
        }
        None => {
            return Err(RpcError::new(
                reply_id,
                INVALID_REQUEST,
                "Invalid request: the message has no `method`; send e.g. {\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"tools/list\"}.",
            ));
        }
    };
    let params = match message.get("params") {
        None | Some(Value::Null) => None,
        Some(Value::Object(params)) => Some(params),
        Some(other) => {
            return Err(RpcError::new(
                reply_id,
                INVALID_PARAMS,
                format!(
                    "Invalid params: `params` must be an object, got {}.",
                    crate::dispatch::json_kind(other)
                ),
            ));
        }
    };
    if method == "tools/call" {
        check_tool_call(reply_id, params)?;
    }
    Ok(())
}

fn check_tool_call(id: Value, params: Option<&Map<String, Value>>) -> Result<(), RpcError> {
    let Some(params) = params else {
        return Err(RpcError::new(
            id,
            INVALID_PARAMS,
            "Invalid params: `tools/call` needs `params` with the tool's `name` and its `arguments` object.",
        ));
    };
    if !matches!(params.get("name"), Some(Value::String(_))) {
        return Err(RpcError::new(
            id,
            INVALID_PARAMS,
            "Invalid params: `params.name` must be the tool's name as a string (tools/list names them all).",
        ));
    }
    match params.get("arguments") {
        None | Some(Value::Null | Value::Object(_)) => Ok(()),
        Some(other) => Err(RpcError::new(
            id,
            INVALID_PARAMS,
            format!(
                "Invalid params: `params.arguments` must be an object of named arguments such as {{\"id\": \"...\"}}, got {}.",
                crate::dispatch::json_kind(other)
            ),
        )),
    }
}

fn is_fraction(id: &Value) -> bool {
    id.as_number()
        .is_some_and(|number| !number.is_i64() && !number.is_u64())
}

/// A JSON-RPC error response to a message that could not be routed.
#[derive(Debug)]
pub struct RpcError {
    pub id: Value,
    pub code: i64,
    pub message: String,
}

impl RpcError {
    fn new(id: Value, code: i64, message: impl Into<String>) -> Self {
        Self {
            id,
            code,
            message: message.into(),
        }
    }
}

impl IntoResponse for RpcError {
    fn into_response(self) -> Response {
        // A parse error or an invalid request is the client's fault at the HTTP level too.
        let status = StatusCode::BAD_REQUEST;
        let body = json!({
            "jsonrpc": "2.0",
            "id": self.id,
            "error": {"code": self.code, "message": self.message},
        });
        (status, axum::Json(body)).into_response()
    }
}

/// A JSON refusal with a status the error table does not pair with its code (406).
fn refusal(status: StatusCode, code: ErrorCode, message: String) -> Response {
    let mut response = ApiError::new(code, message).into_response();
    *response.status_mut() = status;
    response
}

/// Rewrites a plain-text refusal from rmcp into `{error, code}` JSON with the same status.
async fn json_refusals(response: Response, config: &Config) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.contains("json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let text = text.trim().trim_end_matches('.');
    let code = ErrorCode::all()
        .iter()
        .copied()
        .find(|code| code.status() == status)
        .unwrap_or(if status.is_server_error() {
            ErrorCode::INTERNAL_ERROR
        } else {
            ErrorCode::INVALID_REQUEST
        });
    let hint = if status == StatusCode::METHOD_NOT_ALLOWED {
        format!(
            "{} takes POST with one JSON-RPC message; this server keeps no sessions or streams",
            config.mcp_url()
        )
    } else {
        format!(
            "send one JSON-RPC message by POST to {} with `Content-Type: application/json`",
            config.mcp_url()
        )
    };
    let message = if text.is_empty() {
        format!(
            "{}: {hint}.",
            status.canonical_reason().unwrap_or("Refused")
        )
    } else {
        format!("{text}: {hint}.")
    };
    let mut rewritten = refusal(status, code, message);
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            rewritten.headers_mut().append(name, value.clone());
        }
    }
    if status == StatusCode::METHOD_NOT_ALLOWED && !rewritten.headers().contains_key(header::ALLOW)
    {
        rewritten
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST"));
    }
    rewritten
}

pub(super) fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_spellings_are_one_host_on_the_same_port() {
        assert!(host_matches("127.0.0.1:8080", "localhost:8080"));
        assert!(host_matches("127.0.0.1:8080", "[::1]:8080"));
        assert!(host_matches("localhost:8080", "127.0.0.1:8080"));
        assert!(!host_matches("127.0.0.1:8080", "localhost:8081"));
        assert!(!host_matches("127.0.0.1:8080", "evil.example:8080"));
        assert!(!host_matches("api.example.com", "localhost"));
        assert!(host_matches("api.example.com", "API.example.com"));
    }

    #[test]
    fn accept_needs_json_or_a_wildcard() {
        let accepts = |value: &str| accepts_json(Some(&HeaderValue::from_str(value).unwrap()));
        assert!(accepts_json(None));
        assert!(accepts("application/json, text/event-stream"));
        assert!(accepts("application/json"));
        assert!(accepts("*/*"));
        assert!(!accepts("text/event-stream"));
        assert!(!accepts("application/json;q=0, text/event-stream"));
        let stream = |value: &str| accepts_event_stream(&HeaderValue::from_str(value).unwrap());
        assert!(stream("application/json, text/event-stream"));
        assert!(stream("*/*"));
        assert!(!stream("application/json"));
        assert!(!stream("application/json, text/event-stream;q=0"));
    }

    #[test]
    fn malformed_messages_get_the_json_rpc_code_for_them() {
        let code = |body: &str| check_message(body.as_bytes()).err().map(|error| error.code);
        assert_eq!(code("{"), Some(PARSE_ERROR));
        assert_eq!(code("[]"), Some(INVALID_REQUEST));
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#),
            Some(INVALID_REQUEST)
        );
        assert_eq!(
            code(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[]}}"#
            ),
            Some(INVALID_PARAMS)
        );
        assert_eq!(
            code(
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}"#
            ),
            None
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            None
        );
    }
}
