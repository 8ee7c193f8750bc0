//! The token endpoint: the authorization code grant and the refresh token grant.
//!
//! Every check that can fail runs before anything is written, so a refused request changes
//! nothing, with two deliberate exceptions that revoke (RFC 9700 sections 2.2.2 and 4.14.2): a
//! code presented a second time, and a refresh token presented after it was rotated. Either means
//! two parties hold the same secret, and the server cannot tell which is the thief, so the whole
//! grant ends. A code or refresh token is consumed with a conditional update (`used_at is null`),
//! so two concurrent presentations cannot both win.
//!
//! The client is public (no secret), so `client_id` only has to name the client the code or the
//! token was issued to; PKCE is what proves the caller started the flow.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use sqlx::Row;

use super::client::{is_document_url, is_registered};
use super::error::OAuthError;
use super::grant::{self, token_response};
use super::params::{self, Params};
use super::pkce;
use crate::ids;
use crate::scope::{Role, Scope};
use crate::state::AppState;

/// `POST /oauth/token`.
pub async fn token(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match exchange(&state, &headers, &body).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn exchange(
    state: &AppState,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, OAuthError> {
    let params = params::form(headers, body, "token")?;
    let client_id = check_client(state, &params).await?;
    match params.get("grant_type") {
        None => Err(OAuthError::invalid_request("`grant_type` is required")),
        Some("authorization_code") => authorization_code(state, &params, &client_id).await,
        Some("refresh_token") => refresh(state, &params, &client_id).await,
        Some(other) => Err(OAuthError::new(
            "unsupported_grant_type",
            format!(
                "grant type `{other}` is not supported: use `authorization_code` or `refresh_token`"
            ),
        )),
    }
}

/// The caller's `client_id`: present, and a client this server knows the kind of.
pub async fn check_client(state: &AppState, params: &Params) -> Result<String, OAuthError> {
    let Some(client_id) = params.get("client_id") else {
        return Err(OAuthError::invalid_request(
            "`client_id` is required: public clients identify themselves with it",
        ));
    };
    if is_document_url(client_id) || is_registered(state, client_id).await? {
        return Ok(client_id.to_owned());
    }
    Err(OAuthError::new(
        "invalid_client",
        format!("`{client_id}` is not a client of this server"),
    ))
}

/// `resource` (RFC 8707): when sent, it must be the MCP address the tokens are bound to.
fn check_resource(state: &AppState, params: &Params) -> Result<(), OAuthError> {
    match params.get("resource") {
        Some(resource) if resource != state.config.mcp_url() => Err(OAuthError::new(
            "invalid_target",
            format!(
                "this server issues tokens only for `{}`, not `{resource}`",
                state.config.mcp_url()
            ),
        )),
        _ => Ok(()),
    }
}

async fn authorization_code(
    state: &AppState,
    params: &Params,
    client_id: &str,
) -> Result<Response, OAuthError> {
    let Some(code) = params.get("code") else {
        return Err(OAuthError::invalid_request("`code` is required"));
    };
    let code_hash = ids::hash_secret(code);
    let row = sqlx::query(
        "select c.grant_id, c.client_id, c.redirect_uri, c.code_challenge, c.expires_at, c.used_at, \
                g.scopes, g.revoked_at \
         from oauth_codes c join oauth_grants g on g.id = c.grant_id \
         where c.code_hash = $1",
    )
    .bind(&code_hash)
    .fetch_optional(state.db.pool())
    .await?;
    let Some(row) = row else {
        return Err(OAuthError::invalid_grant(
            "the authorization code is unknown",
        ));
    };
    let grant_id: String = row.try_get("grant_id")?;
    if row.try_get::<Option<i64>, _>("used_at")?.is_some() {
        grant::revoke(state, &grant_id).await?;
        return Err(OAuthError::invalid_grant(
            "the authorization code was already used; everything it issued has been revoked",
        ));
    }
    if row.try_get::<String, _>("client_id")? != client_id {
        return Err(OAuthError::invalid_grant(
            "the authorization code was issued to another client",
        ));
    }
    if row.try_get::<i64, _>("expires_at")? <= state.clock.now_ms() {
        // An expired code can never be exchanged, so its grant will never hold a token.
        grant::revoke(state, &grant_id).await?;
        return Err(OAuthError::invalid_grant(
            "the authorization code has expired (codes live 10 minutes); start the authorization again",
        ));
    }
    if row.try_get::<Option<i64>, _>("revoked_at")?.is_some() {
        return Err(OAuthError::invalid_grant(
            "the authorization behind this code has been revoked",
        ));
    }
    let Some(redirect_uri) = params.get("redirect_uri") else {
        return Err(OAuthError::invalid_request(
            "`redirect_uri` is required: the one sent in the authorization request",
        ));
    };
    if row.try_get::<String, _>("redirect_uri")? != redirect_uri {
        return Err(OAuthError::invalid_grant(
            "`redirect_uri` differs from the one in the authorization request",
        ));
    }
    let Some(verifier) = params.get("code_verifier") else {
        return Err(OAuthError::invalid_request(
            "`code_verifier` is required (PKCE)",
        ));
    };
    if !pkce::valid_verifier(verifier) {
        return Err(OAuthError::invalid_request(
            "`code_verifier` must be 43 to 128 characters from A-Z, a-z, 0-9 and `-._~`",
        ));
    }
    if !pkce::verify(verifier, &row.try_get::<String, _>("code_challenge")?) {
        return Err(OAuthError::invalid_grant(
            "`code_verifier` does not match the code challenge (PKCE S256)",
        ));
    }
    check_resource(state, params)?;
    let grant_scope = parse_scopes(&row.try_get::<String, _>("scopes")?)?;

    let now = state.clock.now_ms();
    let mut tx = state.db.begin_write().await?;
    let consumed =
        sqlx::query("update oauth_codes set used_at = $1 where code_hash = $2 and used_at is null")
            .bind(now)
            .bind(&code_hash)
            .execute(&mut *tx)
            .await?;
    if consumed.rows_affected() != 1 {
        tx.rollback().await?;
        grant::revoke(state, &grant_id).await?;
        return Err(OAuthError::invalid_grant(
            "the authorization code was already used; everything it issued has been revoked",
        ));
    }
    let issued = grant::issue_tokens(&mut tx, &grant_id, grant_scope, None, now).await?;
    tx.commit().await?;
    Ok(token_response(&issued))
}

async fn refresh(
    state: &AppState,
    params: &Params,
    client_id: &str,
) -> Result<Response, OAuthError> {
    let Some(refresh_token) = params.get("refresh_token") else {
        return Err(OAuthError::invalid_request("`refresh_token` is required"));
    };
    let token_hash = ids::hash_secret(refresh_token);
    let row = sqlx::query(
        "select t.grant_id, t.expires_at, t.used_at, t.revoked_at, g.client_id, g.scopes, \
                g.revoked_at as grant_revoked_at, m.role \
         from oauth_tokens t \
         join oauth_grants g on g.id = t.grant_id \
         left join memberships m on m.workspace_id = g.workspace_id and m.person_id = g.person_id \
         where t.token_hash = $1 and t.kind = 'refresh'",
    )
    .bind(&token_hash)
    .fetch_optional(state.db.pool())
    .await?;
    let Some(row) = row else {
        return Err(OAuthError::invalid_grant("the refresh token is unknown"));
    };
    let grant_id: String = row.try_get("grant_id")?;
    if row.try_get::<String, _>("client_id")? != client_id {
        return Err(OAuthError::invalid_grant(
            "the refresh token was issued to another client",
        ));
    }
    if row.try_get::<Option<i64>, _>("grant_revoked_at")?.is_some()
        || row.try_get::<Option<i64>, _>("revoked_at")?.is_some()
    {
        return Err(OAuthError::invalid_grant(
            "the refresh token has been revoked (the app was disconnected)",
        ));
    }
    if row.try_get::<Option<i64>, _>("used_at")?.is_some() {
        grant::revoke(state, &grant_id).await?;
        return Err(OAuthError::invalid_grant(
            "the refresh token was already used; as it may have been stolen, the whole authorization has been revoked",
        ));
    }
    if row.try_get::<i64, _>("expires_at")? <= state.clock.now_ms() {
        return Err(OAuthError::invalid_grant(
            "the refresh token has expired; start the authorization again",
        ));
    }
    if row
        .try_get::<Option<String>, _>("role")?
        .as_deref()
        .and_then(Role::parse)
        .is_none()
    {
        return Err(OAuthError::invalid_grant(
            "the person who authorized this app is no longer a member of the workspace",
        ));
    }
    check_resource(state, params)?;
    let grant_scope = parse_scopes(&row.try_get::<String, _>("scopes")?)?;
    let narrowed = match params.get("scope") {
        None => None,
        Some(scope) => {
            let wanted = requested_scope(scope)?;
            if wanted > grant_scope {
                return Err(OAuthError::new(
                    "invalid_scope",
                    format!(
                        "a refresh may only narrow the scopes: this authorization holds `{}`",
                        grant_scope.list_string()
                    ),
                ));
            }
            (wanted < grant_scope).then_some(wanted)
        }
    };

    let now = state.clock.now_ms();
    let mut tx = state.db.begin_write().await?;
    let rotated = sqlx::query(
        "update oauth_tokens set used_at = $1 \
         where token_hash = $2 and used_at is null and revoked_at is null",
    )
    .bind(now)
    .bind(&token_hash)
    .execute(&mut *tx)
    .await?;
    if rotated.rows_affected() != 1 {
        tx.rollback().await?;
        grant::revoke(state, &grant_id).await?;
        return Err(OAuthError::invalid_grant(
            "the refresh token was already used; as it may have been stolen, the whole authorization has been revoked",
        ));
    }
    let issued = grant::issue_tokens(&mut tx, &grant_id, grant_scope, narrowed, now).await?;
    tx.commit().await?;
    Ok(token_response(&issued))
}

fn parse_scopes(stored: &str) -> Result<Scope, OAuthError> {
    Scope::parse_list(stored)
        .map_err(|error| OAuthError::from(crate::error::ApiError::internal(error)))
}

/// A space-separated `scope` parameter as its highest scope; unknown names are `invalid_scope`.
pub fn requested_scope(scope: &str) -> Result<Scope, OAuthError> {
    let mut highest = None;
    for name in scope.split(' ').filter(|name| !name.is_empty()) {
        let Some(scope) = Scope::parse(name) else {
            return Err(OAuthError::new(
                "invalid_scope",
                format!("unknown scope `{name}`: expected some of `read`, `write`, `send`"),
            ));
        };
        highest = highest.max(Some(scope));
    }
    highest.ok_or_else(|| OAuthError::new("invalid_scope", "`scope` names no scope"))
}
