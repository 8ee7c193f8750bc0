//! Dynamic client registration (RFC 7591), for public clients only.
//!
//! Registration is open, as the MCP specification expects: an assistant meeting this server for
//! the first time registers itself. That is safe because a registration grants nothing: the
//! person still signs in and consents, the consent page shows the redirect host, and the code can
//! only go to a registered redirect URI. No client secret is issued (a public client could not
//! keep one); PKCE protects the code instead.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::client::validate_metadata;
use super::error::{OAuthError, no_store};
use super::params::has_content_type;
use crate::ids;
use crate::state::AppState;

/// A registration request larger than this is not a real one.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// `POST /oauth/register`.
pub async fn register(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match register_client(&state, &headers, &body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn register_client(
    state: &AppState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, OAuthError> {
    if !has_content_type(headers, "application/json") {
        return Err(OAuthError::new(
            "invalid_client_metadata",
            "send the client metadata as `Content-Type: application/json`",
        ));
    }
    if body.len() > MAX_REQUEST_BYTES {
        return Err(OAuthError::new(
            "invalid_client_metadata",
            format!("the client metadata is larger than {MAX_REQUEST_BYTES} bytes"),
        ));
    }
    let document: Value = serde_json::from_slice(body).map_err(|error| {
        OAuthError::new(
            "invalid_client_metadata",
            format!("the body is not valid JSON ({error})"),
        )
    })?;
    let validated = validate_metadata(&document)
        .map_err(|error| OAuthError::new(error.error, error.description))?;
    let client_id = ids::new_id("cli");
    let now = state.clock.now_ms();
    let issued_at = now / 1000;
    let client_name = validated
        .client_name
        .clone()
        .unwrap_or_else(|| "Unnamed client".to_owned());
    let mut metadata = validated.metadata;
    // A secret the client may have sent is not part of the echo: none is issued or kept.
    metadata.remove("client_secret");
    metadata.remove("client_secret_expires_at");
    sqlx::query(
        "insert into oauth_clients (client_id, client_name, redirect_uris, metadata, created_at) \
         values ($1, $2, $3, $4, $5)",
    )
    .bind(&client_id)
    .bind(&client_name)
    .bind(json!(validated.redirect_uris).to_string())
    .bind(Value::Object(metadata.clone()).to_string())
    .bind(now)
    .execute(state.db.writes())
    .await?;
    metadata.insert("client_id".into(), json!(client_id));
    metadata.insert("client_id_issued_at".into(), json!(issued_at));
    Ok(no_store(
        (StatusCode::CREATED, Json(Value::Object(metadata))).into_response(),
    ))
}
