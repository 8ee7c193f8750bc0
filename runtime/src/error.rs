//! The one error type every action, face and middleware returns.
//!
//! Codes are a public contract: [`ErrorCode`] is the whole table, each code with its HTTP status,
//! and a snapshot test (`error_table_snapshot`) makes a rename a reviewable diff. An [`ApiError`]
//! carries a sentence for the caller and, separately, an internal cause that is only logged with
//! the request id (dropshot's internal/external split). Both faces render the same body:
//! `{"error": "...", "code": "...", ...extra}`.

use std::fmt;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

macro_rules! error_codes {
    ($($variant:ident => ($code:literal, $status:literal, $when:literal),)*) => {
        /// Every error code of the API with its HTTP status.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode { $($variant,)* }

        impl ErrorCode {
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $code,)* }
            }

            pub fn status(self) -> StatusCode {
                match self {
                    $(ErrorCode::$variant => match StatusCode::from_u16($status) {
                        Ok(status) => status,
                        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
                    },)*
                }
            }

            /// When the code is used, as OpenAPI and `docs/errors.md` (generated from it) say.
            pub fn when(self) -> &'static str {
                match self { $(ErrorCode::$variant => $when,)* }
            }
        }
    };
}

error_codes! {
    InvalidRequest => ("invalid_request", 400, "malformed JSON, wrong type, missing or bad field (the sentence names it)"),
    Unauthenticated => ("unauthenticated", 401, "no bearer credential"),
    InvalidCredential => ("invalid_credential", 401, "unknown, malformed, or another environment's key; unknown token"),
    CredentialExpired => ("credential_expired", 401, "key past its expiry, access token past its lifetime"),
    CredentialRevoked => ("credential_revoked", 401, "key revoked, OAuth grant disconnected"),
    NotAMember => ("not_a_member", 401, "the credential's person is no longer in the workspace"),
    InsufficientScope => ("insufficient_scope", 403, "the credential lacks the scope the action needs (with `required_scope`)"),
    Forbidden => ("forbidden", 403, "the person's role does not allow it"),
    NotFound => ("not_found", 404, "no such object in this workspace (also another workspace's ids), or no such path"),
    MethodNotAllowed => ("method_not_allowed", 405, "the path exists but not with this method (see `Allow`)"),
    InvalidState => ("invalid_state", 409, "illegal state transition; the sentence says the state and what is allowed"),
    Conflict => ("conflict", 409, "unique constraint (duplicate name, duplicate prospect); or, with `retryable: true`, other requests kept changing the same records at the same moment, the server ran this one again a few times without success, and nothing of it was kept: send it again"),
    IdempotencyKeyInUse => ("idempotency_key_in_use", 409, "the same idempotency key is still being processed"),
    IdempotencyKeyReused => ("idempotency_key_reused", 422, "the same idempotency key was used for a different request"),
    InsufficientCredits => ("insufficient_credits", 402, "the balance is below the price (with `price` and `balance`)"),
    PayloadTooLarge => ("payload_too_large", 413, "the body is over the limit"),
    UnsupportedMediaType => ("unsupported_media_type", 415, "the body is not `application/json`"),
    RateLimited => ("rate_limited", 429, "too many requests (with `Retry-After`)"),
    InternalError => ("internal_error", 500, "a fault on our side, with a `request_id` to quote (the cause is only logged)"),
    NotConnected => ("not_connected", 409, "the network: a message to someone who is not a first-degree connection"),
    AlreadyInvited => ("already_invited", 409, "the network: an invitation to this person is already pending"),
    AlreadyConnected => ("already_connected", 409, "the network: the person is already a connection"),
    NotInvited => ("not_invited", 409, "the network: no pending invitation to withdraw"),
    CannotResendYet => ("cannot_resend_yet", 409, "the network: a withdrawn person cannot be invited again before `retry_at` (about 3 weeks)"),
    NetworkLimitExceeded => ("network_limit_exceeded", 429, "the network refused: the account's own limit is reached (with `retry_at` when known)"),
    RecipientUnreachable => ("recipient_unreachable", 422, "the network: the recipient cannot be reached (blocked, deleted or restricted profile)"),
    TextTooLong => ("text_too_long", 422, "the network: the note or message is over its limit"),
    AccountDisconnected => ("account_disconnected", 409, "the network: the sender's account is disconnected or needs reauthentication"),
    AccountRestricted => ("account_restricted", 409, "the network: the sender's account is restricted by the network"),
    NetworkUnavailable => ("network_unavailable", 503, "the network failed for a moment; retry later"),
    NetworkNotConfigured => ("network_not_configured", 503, "production with no network provider configured: nothing is sent"),
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
        Self::new(ErrorCode::InvalidRequest, message)
    }

    pub fn not_found(what: &str, id: &str) -> Self {
        Self::new(
            ErrorCode::NotFound,
            format!("No {what} with id `{id}` in this workspace."),
        )
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Conflict, message)
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
        self.code == ErrorCode::Conflict && self.extra.get("retryable") == Some(&Value::Bool(true))
    }

    /// Whether the same work tried again may succeed: a fault on our side, or a transaction the
    /// database ended for another one ([`ApiError::contention`]). A job retries these and fails
    /// on the others.
    pub fn is_transient(&self) -> bool {
        self.code == ErrorCode::InternalError
            || self.extra.get("retryable") == Some(&Value::Bool(true))
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    /// A fault on our side: the caller sees a generic sentence, the cause goes to the log.
    pub fn internal(cause: impl fmt::Display) -> Self {
        let mut error = Self::new(
            ErrorCode::InternalError,
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
        if self.code == ErrorCode::InternalError {
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
        assert_eq!(contention.code, ErrorCode::Conflict);
        assert_eq!(contention.body()["retryable"], json!(true));
        assert!(!ApiError::conflict("A list named `Leads` exists.").is_transient());
        assert!(!ApiError::invalid_request("`name` must not be empty.").is_transient());
        // Only contention is a conflict the same work run again may not meet.
        assert!(contention.is_contention());
        assert!(!ApiError::conflict("A list named `Leads` exists.").is_contention());
        assert!(!ApiError::internal("boom").is_contention());
    }

    /// A rename of a public code shows up here as a diff to review.
    #[test]
    fn error_table_snapshot() {
        let table: Vec<String> = ErrorCode::ALL
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
                "409 idempotency_key_in_use",
                "422 idempotency_key_reused",
                "402 insufficient_credits",
                "413 payload_too_large",
                "415 unsupported_media_type",
                "429 rate_limited",
                "500 internal_error",
                "409 not_connected",
                "409 already_invited",
                "409 already_connected",
                "409 not_invited",
                "409 cannot_resend_yet",
                "429 network_limit_exceeded",
                "422 recipient_unreachable",
                "422 text_too_long",
                "409 account_disconnected",
                "409 account_restricted",
                "503 network_unavailable",
                "503 network_not_configured",
            ]
        );
    }

    #[test]
    fn body_carries_extra_fields() {
        let error = ApiError::new(ErrorCode::InsufficientCredits, "short").with_extra("price", 5);
        assert_eq!(
            error.body(),
            json!({"error": "short", "code": "insufficient_credits", "price": 5})
        );
    }
}
