//! The rows a consent and a token exchange write, and the revocation that ends them.
//!
//! A consent writes a grant and its code together; a code exchange or a refresh writes an access
//! token and a refresh token. Revoking a grant (Disconnect, a replayed code, a reused refresh
//! token) marks the grant and every token of it, in one transaction: authentication checks the
//! grant on every request, so the grant alone would suffice, but revoked token rows make the
//! state readable without joins.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sqlx::AnyConnection;

use super::client::Client;
use super::error::no_store;
use super::{ACCESS_TOKEN_LIFETIME_MS, CODE_LIFETIME_MS, REFRESH_TOKEN_LIFETIME_MS};
use crate::error::ApiError;
use crate::ids;
use crate::scope::Scope;
use crate::state::AppState;

/// What a consent grants.
pub struct NewGrant<'a> {
    pub workspace_id: &'a str,
    pub person_id: &'a str,
    pub client: &'a Client,
    pub scope: Scope,
    pub redirect_uri: &'a str,
    pub code_challenge: &'a str,
}

/// Writes the grant and its authorization code; returns the code.
pub async fn create_with_code(state: &AppState, grant: &NewGrant<'_>) -> Result<String, ApiError> {
    let now = state.clock.now_ms();
    let grant_id = ids::new_id("grt");
    let code = ids::new_secret("oac_");
    let mut tx = state.db.begin_write().await?;
    sqlx::query(
        "insert into oauth_grants \
            (id, workspace_id, person_id, client_id, client_name, client_source, scopes, resource, created_at) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&grant_id)
    .bind(grant.workspace_id)
    .bind(grant.person_id)
    .bind(&grant.client.client_id)
    .bind(&grant.client.name)
    .bind(grant.client.source.as_str())
    .bind(grant.scope.list_string())
    .bind(state.config.mcp_url())
    .bind(now)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "insert into oauth_codes \
            (code_hash, grant_id, client_id, redirect_uri, code_challenge, expires_at) \
         values ($1, $2, $3, $4, $5, $6)",
    )
    .bind(ids::hash_secret(&code))
    .bind(&grant_id)
    .bind(&grant.client.client_id)
    .bind(grant.redirect_uri)
    .bind(grant.code_challenge)
    .bind(now + CODE_LIFETIME_MS)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(code)
}

/// A fresh access and refresh token pair.
pub struct Issued {
    pub access_token: String,
    pub refresh_token: String,
    /// What the access token may do (the grant's scopes, or fewer after a narrowing refresh).
    pub scope: Scope,
}

/// Writes a new token pair for a grant. `narrowed` limits the access token only; the refresh
/// token keeps the grant's scopes (RFC 6749 section 6).
pub async fn issue_tokens(
    conn: &mut AnyConnection,
    grant_id: &str,
    grant_scope: Scope,
    narrowed: Option<Scope>,
    now: i64,
) -> Result<Issued, sqlx::Error> {
    let access_token = ids::new_secret("oat_");
    let refresh_token = ids::new_secret("ort_");
    let tokens = [
        (
            &access_token,
            "access",
            ACCESS_TOKEN_LIFETIME_MS,
            narrowed.map(Scope::list_string),
        ),
        (&refresh_token, "refresh", REFRESH_TOKEN_LIFETIME_MS, None),
    ];
    for (token, kind, lifetime, scopes) in tokens {
        sqlx::query(
            "insert into oauth_tokens (token_hash, grant_id, kind, expires_at, created_at, scopes) \
             values ($1, $2, $3, $4, $5, $6)",
        )
        .bind(ids::hash_secret(token))
        .bind(grant_id)
        .bind(kind)
        .bind(now + lifetime)
        .bind(now)
        .bind(scopes)
        .execute(&mut *conn)
        .await?;
    }
    Ok(Issued {
        access_token,
        refresh_token,
        scope: narrowed.unwrap_or(grant_scope),
    })
}

/// Revokes a grant and every token it issued.
pub async fn revoke(state: &AppState, grant_id: &str) -> Result<(), ApiError> {
    let now = state.clock.now_ms();
    let mut tx = state.db.begin_write().await?;
    sqlx::query("update oauth_grants set revoked_at = $1 where id = $2 and revoked_at is null")
        .bind(now)
        .bind(grant_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "update oauth_tokens set revoked_at = $1 where grant_id = $2 and revoked_at is null",
    )
    .bind(now)
    .bind(grant_id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The token endpoint's success body (RFC 6749 section 5.1), never cached.
pub fn token_response(issued: &Issued) -> Response {
    let scope = issued
        .scope
        .included()
        .iter()
        .map(|scope| scope.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    no_store(
        Json(json!({
            "access_token": issued.access_token,
            "token_type": "Bearer",
            "expires_in": ACCESS_TOKEN_LIFETIME_MS / 1000,
            "refresh_token": issued.refresh_token,
            "scope": scope,
        }))
        .into_response(),
    )
}
