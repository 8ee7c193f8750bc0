//! Discovery: where an MCP client with nothing but the MCP address finds everything else.
//!
//! A 401 from `/api/mcp` points at the protected-resource metadata (RFC 9728), which names the
//! resource (`{base_url}/api/mcp`, the audience every token is bound to) and this server as its
//! authorization server; the authorization-server metadata (RFC 8414) then lists the endpoints and
//! what they support. The issuer is `config.base_url` verbatim in every document and in every
//! `iss` response parameter, since clients compare it as a string (RFC 8414 section 3.3, RFC 9207).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::state::AppState;

const SCOPES: [&str; 3] = ["read", "write", "send"];

/// `GET /.well-known/oauth-protected-resource[/api/mcp]`.
pub async fn protected_resource(State(state): State<Arc<AppState>>) -> Json<Value> {
    let config = &state.config;
    Json(json!({
        "resource": config.mcp_url(),
        "authorization_servers": [config.base_url],
        "scopes_supported": SCOPES,
        "bearer_methods_supported": ["header"],
        "resource_name": "Outreach",
        "resource_documentation": format!("{}/api/v1/docs", config.base_url),
    }))
}

/// `GET /.well-known/oauth-authorization-server`.
pub async fn authorization_server(State(state): State<Arc<AppState>>) -> Json<Value> {
    let issuer = &state.config.base_url;
    Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/oauth/authorize"),
        "token_endpoint": format!("{issuer}/oauth/token"),
        "registration_endpoint": format!("{issuer}/oauth/register"),
        "revocation_endpoint": format!("{issuer}/oauth/revoke"),
        "scopes_supported": SCOPES,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "revocation_endpoint_auth_methods_supported": ["none"],
        "client_id_metadata_document_supported": true,
        "authorization_response_iss_parameter_supported": true,
        "service_documentation": format!("{issuer}/api/v1/docs"),
    }))
}
