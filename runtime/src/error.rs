//! The one error type every action, face and middleware returns.
//!
//! Codes are a public contract: [`ErrorCode::all`] is the whole table, each code with its HTTP
//! status. The runtime declares the codes of its own refusals; a crate of actions declares its
//! domain's codes with [`error_codes!`](crate::error_codes), so the runtime names no domain. A
//! snapshot test (`error_table_snapshot`) and the golden files make a rename a reviewable diff.
//!
//! An [`ApiError`] carries a sentence for the caller and, separately, an internal cause that is
//! only logged with the request id (dropshot's internal/external split). Both faces render the same body:
//! `{"error": "...", "code": "...", ...extra}`.

use std::fmt;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

/// One public error code: its name in bodies, its HTTP status, and when it is used.
///
/// The runtime's own codes are the associated constants; a crate of actions declares the codes of
/// its domain beside the code that answers them with [`error_codes!`](crate::error_codes), which
/// also registers them, so the table ([`ErrorCode::all`]) has every code without the runtime naming
/// a domain. Compared by value, so `error.code == ErrorCode::NOT_FOUND` reads as before.
///
/// One pointer wide, so an [`ApiError`] stays small enough to return by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode {
    entry: &'static CodeEntry,
}

/// What an [`ErrorCode`] points to.
#[doc(hidden)]
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct CodeEntry {
    pub code: &'static str,
    pub status: u16,
    pub when: &'static str,
}

/// The codes one [`error_codes!`](crate::error_codes) declares, in its order.
#[doc(hidden)]
pub struct RegisteredCodes(pub &'static [ErrorCode]);

inventory::collect!(RegisteredCodes);

/// Declares error codes beside the code that answers them, and registers them in the table.
///
/// ```ignore
/// error_codes! {
///     /// The network: a message to someone who is not a first-degree connection.
///     pub NOT_CONNECTED = ("not_connected", 409, "the network: a message to ...");
/// }
/// ```
///
/// The status must be an error status (400 to 599); another one does not compile.
#[macro_export]
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $vis:vis $ident:ident = ($code:literal, $status:literal, $when:literal);)+) => {
        $(
            $(#[doc = $doc])*
            $vis const $ident: $crate::error::ErrorCode =
                $crate::error::ErrorCode::__new(&$crate::error::CodeEntry {
                    code: $code,
                    status: $status,
                    when: $when,
                });
        )+
        $crate::__private::inventory::submit! {
            $crate::error::RegisteredCodes(&[$($ident),+])
        }
    };
}

macro_rules! runtime_codes {
    ($($ident:ident => ($code:literal, $status:literal, $when:literal),)*) => {
        impl ErrorCode {
            $(pub const $ident: ErrorCode = ErrorCode::__new(&CodeEntry {
                code: $code,
                status: $status,
                when: $when,
            });)*

            /// The runtime's own codes, in the table's order.
            const RUNTIME: &'static [ErrorCode] = &[$(ErrorCode::$ident,)*];
        }
    };
}

runtime_codes! {
    INVALID_REQUEST => ("invalid_request", 400, "malformed JSON, wrong type, missing or bad field (the sentence names it)"),
    UNAUTHENTICATED => ("unauthenticated", 401, "no bearer credential"),
    INVALID_CREDENTIAL => ("invalid_credential", 401, "unknown, malformed, or another environment's key; unknown token"),
    CREDENTIAL_EXPIRED => ("credential_expired", 401, "key past its expiry, access token past its lifetime"),
    CREDENTIAL_REVOKED => ("credential_revoked", 401, "key revoked, OAuth grant disconnected"),
    NOT_A_MEMBER => ("not_a_member", 401, "the credential's person is no longer in the workspace"),
    INSUFFICIENT_SCOPE => ("insufficient_scope", 403, "the credential lacks the scope the action needs (with `required_scope`)"),
    FORBIDDEN => ("forbidden", 403, "the person's role does not allow it"),
    NOT_FOUND => ("not_found", 404, "no such object in this workspace (also another workspace's ids), or no such path"),
    METHOD_NOT_ALLOWED => ("method_not_allowed", 405, "the path exists but not with this method (see `Allow`)"),
    INVALID_STATE => ("invalid_state", 409, "illegal state transition; the sentence says the state and what is allowed"),
    CONFLICT => ("conflict", 409, "unique constraint (duplicate name, duplicate prospect); or, with `retryable: true`, other requests kept changing the same records at the same moment, the server ran this one again a few times without success, and nothing of it was kept: send it again"),
    DECLINED => ("declined", 409, "MCP only: the client's person did not confirm the call it asked about (elicitation), so it did nothing"),
    IDEMPOTENCY_KEY_IN_USE => ("idempotency_key_in_use", 409, "the same idempotency key is still being processed"),
    IDEMPOTENCY_KEY_REUSED => ("idempotency_key_reused", 422, "the same idempotency key was used for a different request"),
    INSUFFICIENT_CREDITS => ("insufficient_credits", 402, "the balance is below the price (with `price` and `balance`)"),
    PAYLOAD_TOO_LARGE => ("payload_too_large", 413, "the body is over the limit"),
    UNSUPPORTED_MEDIA_TYPE => ("unsupported_media_type", 415, "the body is not `application/json`"),
    RATE_LIMITED => ("rate_limited", 429, "too many requests (with `Retry-After`)"),
    INTERNAL_ERROR => ("internal_error", 500, "a fault on our side, with a `request_id` to quote (the cause is only logged)"),
}

impl ErrorCode {
    #[doc(hidden)]
    pub const fn __new(entry: &'static CodeEntry) -> Self {
        assert!(
            entry.status >= 400 && entry.status < 600,
            "an error code's status is 400 to 599"
        );
        Self { entry }
    }

    /// Every code: the runtime's, then each registered group in the order of its first code.
    pub fn all() -> Vec<ErrorCode> {
        let mut groups: Vec<&'static [ErrorCode]> = inventory::iter::<RegisteredCodes>
            .into_iter()
            .map(|group| group.0)
            .collect();
        groups.sort_by_key(|group| group.first().map(|code| code.as_str()));
        let mut all = Self::RUNTIME.to_vec();
        all.extend(groups.into_iter().flatten());
        all
    }

    /// The code named `name` in the table, if any.
    pub fn named(name: &str) -> Option<ErrorCode> {
        Self::all().into_iter().find(|code| code.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        self.entry.code
    }

    pub fn status(self) -> StatusCode {
        StatusCode::from_u16(self.entry.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// When the code is used, as OpenAPI and `docs/errors.md` (generated from it) say.
    pub fn when(self) -> &'static str {
        self.entry.when
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error for the caller, with an optional internal cause for the logs.
#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// Documented extra body fields (`required_scope`, `price`, `balance`, `retry_after`, ...).
    pub extra: Map<String, Value>,
    /// Extra response headers (`WWW-Authenticate`, `Allow`, `Retry-After`).
    pub headers: Vec<(header::HeaderName, HeaderValue)>,
    /// What went wrong inside; logged, never sent.
    pub internal: Option<String>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            extra: Map::new(),
            headers: Vec::new(),
            internal: None,
        }
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::INVALID_REQUEST, message)
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        Self::new(
            ErrorCode::NOT_FOUND,
            format!("No {what} with id `{id}` in this workspace."),
        )
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::CONFLICT, message)
    }

    /// A 409 `conflict` with `retryable: true`: the database ended this call's transaction
    /// because another one held what it needed. Dispatch runs a call in one transaction, so
    /// nothing of it was kept and the same request sent again may succeed. The cause is logged as
    /// a refusal (see [`ApiError::log`]): each one is a lock order to look at.
    pub fn contention(cause: impl fmt::Display) -> Self {
        let mut error = Self::conflict(
            "Other requests kept changing the same records at the same moment; this one was run again a few times without success, and nothing of it was kept: send it again.",
        )
        .with_extra("retryable", true);
        error.internal = Some(cause.to_string());
        error
    }

    /// Whether this is [`ApiError::contention`]: the database ended the call's transaction for
    /// another one, so nothing of it was kept.
    pub fn is_contention(&self) -> bool {
        self.code == ErrorCode::CONFLICT && self.extra.get("retryable") == Some(&Value::Bool(true))
    }

    /// Whether the same work tried again may succeed: a fault on our side, or a transaction the
    /// database ended for another one ([`ApiError::contention`]). A job retries these and fails
    /// on the others.
    pub fn is_transient(&self) -> bool {
        self.code == ErrorCode::INTERNAL_ERROR
            || self.extra.get("retryable") == Some(&Value::Bool(true))
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::FORBIDDEN, message)
    }

    /// A fault on our side: the caller sees a generic sentence, the cause goes to the log.
    pub fn internal(cause: impl fmt::Display) -> Self {
        let mut error = Self::new(
            ErrorCode::INTERNAL_ERROR,
            "Something went wrong on our side.",
        );
        error.internal = Some(cause.to_string());
        error
    }

    pub fn with_extra(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_owned(), value.into());
        self
    }

    /// Tells the caller when to try again: `retry_after` (whole seconds, at least 1) in the body
    /// and a `Retry-After` header.
    pub fn with_retry_after(self, left_ms: i64) -> Self {
        let seconds = (left_ms.max(1) + 999) / 1000;
        self.with_extra("retry_after", seconds)
            .with_header(header::RETRY_AFTER, &seconds.to_string())
    }

    pub fn with_header(mut self, name: header::HeaderName, value: &str) -> Self {
        if let Ok(value) = HeaderValue::from_str(value) {
            self.headers.push((name, value));
        }
        self
    }

    pub fn status(&self) -> StatusCode {
        self.code.status()
    }

    /// The body both faces send: `{error, code, ...extra}`.
    pub fn body(&self) -> Value {
        let mut body = Map::with_capacity(2 + self.extra.len());
        body.insert("error".into(), Value::String(self.message.clone()));
        body.insert("code".into(), Value::String(self.code.as_str().to_owned()));
        for (key, value) in &self.extra {
            body.insert(key.clone(), value.clone());
        }
        Value::Object(body)
    }

    /// Logs the internal cause (if any) and adds the request id to the sentence of a 500.
    pub fn log(mut self, request_id: &str) -> Self {
        if self.code == ErrorCode::INTERNAL_ERROR {
            tracing::error!(
                request_id,
                cause = self.internal.as_deref().unwrap_or(""),
                "internal error"
            );
            self.message = format!(
                "Something went wrong on our side; quote request id {request_id} if you contact support."
            );
            self.extra.insert("request_id".into(), json!(request_id));
        } else if let Some(cause) = &self.internal {
            tracing::info!(request_id, code = %self.code, cause, "request refused");
        }
        self
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// PostgreSQL's SQLSTATEs for a transaction it ended because another one held what it needed:
/// `deadlock_detected` and `serialization_failure`. The transaction was rolled back whole; the
/// same request sent again runs alone and succeeds.
const CONTENTION_STATES: [&str; 2] = ["40P01", "40001"];

/// Whether the database ended the transaction of `error` for another one.
pub fn is_contention_error(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|database| database.code())
        .is_some_and(|state| CONTENTION_STATES.contains(&state.as_ref()))
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        if is_contention_error(&error) {
            return Self::contention(format!("database: {error}"));
        }
        Self::internal(format!("database: {error}"))
    }
}

/// The in-place SQLite reads of [`crate::db`] fail like the pool's.
impl From<rusqlite::Error> for ApiError {
    fn from(error: rusqlite::Error) -> Self {
        Self::internal(format!("database: {error}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut response = (status, axum::Json(self.body())).into_response();
        let headers = response.headers_mut();
        for (name, value) in self.headers {
            headers.append(name, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_faults_and_contention_are_transient() {
        assert!(ApiError::internal("boom").is_transient());
        let contention = ApiError::contention("database: deadlock detected");
        assert!(contention.is_transient());
        assert_eq!(contention.code, ErrorCode::CONFLICT);
        assert_eq!(contention.body()["retryable"], json!(true));
        assert!(!ApiError::conflict("A list named `Leads` exists.").is_transient());
        assert!(!ApiError::invalid_request("`name` must not be empty.").is_transient());
        // Only contention is a conflict the same work run again may not meet.
        assert!(contention.is_contention());
        assert!(!ApiError::conflict("A list named `Leads` exists.").is_contention());
        assert!(!ApiError::internal("boom").is_contention());
    }

    /// A rename of a public code shows up here as a diff to review. Only the runtime's own codes
    /// are here: this test links no crate of actions (theirs are in the api suite's golden files).
    #[test]
    fn error_table_snapshot() {
        let table: Vec<String> = ErrorCode::all()
            .iter()
            .map(|code| format!("{} {}", code.status().as_u16(), code.as_str()))
            .collect();
        assert_eq!(
            table,
            [
                "400 invalid_request",
                "401 unauthenticated",
                "401 invalid_credential",
                "401 credential_expired",
                "401 credential_revoked",
                "401 not_a_member",
                "403 insufficient_scope",
                "403 forbidden",
                "404 not_found",
                "405 method_not_allowed",
                "409 invalid_state",
                "409 conflict",
                "409 declined",
                "409 idempotency_key_in_use",
                "422 idempotency_key_reused",
                "402 insufficient_credits",
                "413 payload_too_large",
                "415 unsupported_media_type",
                "429 rate_limited",
                "500 internal_error",
            ]
        );
    }

    #[test]
    fn body_carries_extra_fields() {
        let error = ApiError::new(ErrorCode::INSUFFICIENT_CREDITS, "short").with_extra("price", 5);
        assert_eq!(
            error.body(),
            json!({"error": "short", "code": "insufficient_credits", "price": 5})
        );
    }
}
