//! The one CORS policy of the bearer surfaces: REST (`/api/v1`), MCP (`/api/mcp`) and the OAuth
//! endpoints MCP clients call from a browser.
//!
//! Any origin may call, because every call needs a bearer credential and no cookie is honoured
//! there (credentials mode stays off), so a foreign page cannot ride on a signed-in person's
//! session. The web pages, which do use cookies, are not under this policy. Preflights are
//! answered here, before authentication, since a browser never sends a credential with one. The
//! exposed headers are the ones a client must read: the request id to quote, the replay flag,
//! the rate limit and the challenge.
//!
//! No `Vary` header: every answer allows any origin (`*`) and names fixed lists, so none depends
//! on the request's `Origin` or its preflight headers, and a cache may share it. (tower-http's
//! default adds `Vary: origin, access-control-request-method, access-control-request-headers`
//! to every response, the value joined anew each time: work on every request, for nothing
//! here.)

use std::time::Duration;

use axum::http::{HeaderName, Method, header};
use tower_http::cors::{Any, CorsLayer};

/// The policy, as a layer.
pub fn policy() -> CorsLayer {
    CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PATCH,
            Method::PUT,
            Method::DELETE,
            Method::OPTIONS,
        ])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::ACCEPT,
            HeaderName::from_static("idempotency-key"),
            HeaderName::from_static("mcp-protocol-version"),
            HeaderName::from_static("mcp-session-id"),
            HeaderName::from_static("last-event-id"),
        ])
        .expose_headers([
            header::WWW_AUTHENTICATE,
            header::RETRY_AFTER,
            HeaderName::from_static("mcp-session-id"),
            HeaderName::from_static("x-request-id"),
            HeaderName::from_static("idempotent-replayed"),
            HeaderName::from_static("ratelimit"),
            HeaderName::from_static("ratelimit-policy"),
        ])
        .max_age(Duration::from_secs(24 * 60 * 60))
        .vary([] as [HeaderName; 0])
}
