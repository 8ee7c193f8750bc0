//! The error body of the JSON endpoints (token, revocation, registration).
//!
//! These errors are not the API's `{error, code}` table: OAuth clients parse the RFC 6749 section
//! 5.2 shape, `{"error": "<code>", "error_description": "<sentence>"}`, and the codes are the ones
//! the RFCs name (`invalid_grant`, `invalid_target`, `invalid_client_metadata`, ...). Every such
//! answer is `no-store`: some carry tokens, and none should be replayed from a cache.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::ApiError;

/// An OAuth error for a client (not a browser).
#[derive(Debug)]
pub struct OAuthError {
    pub status: StatusCode,
    pub error: &'static str,
    pub description: String,
}

impl OAuthError {
    pub fn new(error: &'static str, description: impl Into<String>) -> Self {
        let status = match error {
            "invalid_client" => StatusCode::UNAUTHORIZED,
            "server_error" => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        };
        Self {
            status,
            error,
            description: description.into(),
        }
    }

    pub fn invalid_request(description: impl Into<String>) -> Self {
        Self::new("invalid_request", description)
    }

    pub fn invalid_grant(description: impl Into<String>) -> Self {
        Self::new("invalid_grant", description)
    }
}

impl From<ApiError> for OAuthError {
    fn from(error: ApiError) -> Self {
        let error = error.log("oauth");
        Self::new("server_error", error.message)
    }
}

impl From<sqlx::Error> for OAuthError {
    fn from(error: sqlx::Error) -> Self {
        ApiError::from(error).into()
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let body = json!({"error": self.error, "error_description": self.description});
        no_store((self.status, Json(body)).into_response())
    }
}

/// Adds `Cache-Control: no-store` and `Pragma: no-cache` (RFC 6749 section 5.1).
pub fn no_store(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}
