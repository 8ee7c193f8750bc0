//! Token revocation (RFC 7009).
//!
//! The answer is 200 whether or not the token existed, so the endpoint tells a caller nothing
//! about tokens it does not hold. Revoking a refresh token ends the whole grant (the client is
//! saying goodbye, and every access token came from the same consent); revoking an access token
//! ends only that token. The `token_type_hint` only saves a lookup, so both kinds are searched
//! whatever it says (RFC 7009 section 2.1).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sqlx::Row;

use super::error::{OAuthError, no_store};
use super::grant;
use super::params;
use super::token::check_client;
use crate::ids;
use crate::state::AppState;

/// `POST /oauth/revoke`.
pub async fn revoke(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match revoke_token(&state, &headers, &body).await {
        Ok(()) => no_store(StatusCode::OK.into_response()),
        Err(error) => error.into_response(),
    }
}

async fn revoke_token(
    state: &AppState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), OAuthError> {
    let params = params::form(headers, body, "revocation")?;
    let client_id = check_client(state, &params).await?;
    let Some(token) = params.get("token") else {
        return Err(OAuthError::invalid_request("`token` is required"));
    };
    let row = sqlx::query(
        "select t.grant_id, t.kind, g.client_id \
         from oauth_tokens t join oauth_grants g on g.id = t.grant_id \
         where t.token_hash = $1",
    )
    .bind(ids::hash_secret(token))
    .fetch_optional(state.db.pool())
    .await?;
    let Some(row) = row else {
        return Ok(());
    };
    if row.try_get::<String, _>("client_id")? != client_id {
        return Err(OAuthError::new(
            "invalid_client",
            "this token was not issued to this client",
        ));
    }
    let grant_id: String = row.try_get("grant_id")?;
    if row.try_get::<String, _>("kind")? == "refresh" {
        grant::revoke(state, &grant_id).await?;
    } else {
        sqlx::query(
            "update oauth_tokens set revoked_at = $1 where token_hash = $2 and revoked_at is null",
        )
        .bind(state.clock.now_ms())
        .bind(ids::hash_secret(token))
        .execute(state.db.writes())
        .await?;
    }
    Ok(())
}
