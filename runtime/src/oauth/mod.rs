//! The OAuth 2.1 authorization server that lets MCP clients connect without an API key.
//!
//! Follows the MCP authorization specification: protected-resource metadata (RFC 9728),
//! authorization-server metadata (RFC 8414), dynamic client registration (RFC 7591), client ID
//! metadata documents, the authorization code grant with PKCE S256, refresh-token rotation, and
//! revocation (RFC 7009). Grants, codes and tokens live in the database, so every instance honours
//! a disconnection on the next request; only fetched client metadata documents are cached, in
//! memory, per instance, because they are public and re-fetching them is always correct.
//!
//! One file per endpoint, and one per rule shared between endpoints: [`redirect`] (which redirect
//! URIs may be registered and which requests match them), [`pkce`], [`netguard`] (which addresses
//! a metadata fetch may reach), [`client`] (what a client is, wherever its metadata came from),
//! [`grant`] (the rows a consent and a token exchange write). Every browser-facing error is a
//! page; every client-facing error is the `{error, error_description}` body the RFCs name.

use std::sync::Arc;

use axum::routing::{get, post};
use axum::{Extension, Router};

use crate::state::AppState;

mod authorize;
mod cimd;
mod client;
mod error;
mod grant;
mod metadata;
mod netguard;
mod pages;
mod params;
mod pkce;
mod redirect;
mod register;
mod revoke;
mod token;

/// Ends a grant and every token it issued: what Disconnect on the settings page does, and what
/// a replayed code or a reused refresh token triggers here.
pub use client::name_before_sign_in as client_name_before_sign_in;
pub use grant::revoke as revoke_grant;
pub use pages::code_spans;

/// An authorization code is exchanged within seconds; ten minutes covers a slow client.
pub const CODE_LIFETIME_MS: i64 = 10 * 60 * 1000;
/// Access tokens are short-lived: a leaked one is useful for an hour at most.
pub const ACCESS_TOKEN_LIFETIME_MS: i64 = 60 * 60 * 1000;
/// Refresh tokens rotate on every use; an unused one lapses after 30 days.
pub const REFRESH_TOKEN_LIFETIME_MS: i64 = 30 * 24 * 60 * 60 * 1000;

/// The routes of the authorization server (`/.well-known/...`, `/oauth/...`).
///
/// Each call makes a fresh metadata-document cache, so each server instance has its own.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            get(metadata::protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource/api/mcp",
            get(metadata::protected_resource),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(metadata::authorization_server),
        )
        .route("/oauth/register", post(register::register))
        .route(
            "/oauth/authorize",
            get(authorize::show).post(authorize::decide),
        )
        .route("/oauth/token", post(token::token))
        .route("/oauth/revoke", post(revoke::revoke))
        .layer(Extension(Arc::new(cimd::Fetcher::default())))
        // The same CORS policy as `/api/mcp`: a browser-based client calls both from its origin.
        // No cookies cross origins, and the consent form is a top-level navigation, which CORS
        // does not govern.
        .layer(crate::mcp::cors())
}
