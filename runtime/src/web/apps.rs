//! Connected apps: the OAuth grants of the workspace, listed under the keys, with Disconnect.
//!
//! Visibility mirrors the keys: owners and admins see (and may disconnect) every grant of the
//! workspace, a member only their own. Disconnecting sets the grant's `revoked_at`; the
//! authentication of every request and the token endpoint both read it, so the app's access token
//! is refused on its next call and its refresh token can no longer be exchanged. The grant's
//! tokens are marked revoked too, so the tokens table tells the same story on its own.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use sqlx::Row;

use super::keys::ConfirmPage;
use super::{PageError, SignedIn, display_time, render, see_other};
use crate::scope::Scope;
use crate::state::AppState;

const PAGE: &str = "/settings/api";

/// One row of the connected apps table.
pub struct AppRow {
    pub id: String,
    pub client_name: String,
    pub source: String,
    pub scopes: String,
    pub person: String,
    pub connected: String,
    pub last_used: String,
}

/// Where a client's name and redirect addresses came from, for people.
fn source_text(source: &str, client_id: &str) -> String {
    match source {
        "registration" => "Registered by the app (dynamic registration)".to_owned(),
        "metadata_document" => format!("Metadata document at {client_id}"),
        other => other.to_owned(),
    }
}

struct Grant {
    id: String,
    person_id: String,
    client_name: String,
    revoked: bool,
}

const GRANT_COLUMNS: &str = "select g.id, g.person_id, g.client_id, g.client_name, g.client_source, \
        g.scopes, g.created_at, g.last_used_at, g.revoked_at, p.email \
     from oauth_grants g join people p on p.id = g.person_id";

/// A consent whose code was never exchanged is no connection yet: its grant holds no token, and
/// listing it would show an app that never connected.
const HAS_TOKENS: &str = "exists (select 1 from oauth_tokens t where t.grant_id = g.id)";

/// The live grants the signed-in person may see, newest first.
pub async fn rows(state: &AppState, signed: &SignedIn) -> Result<Vec<AppRow>, PageError> {
    let rows = if signed.can_manage() {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "{GRANT_COLUMNS} where g.workspace_id = $1 and g.revoked_at is null \
             and {HAS_TOKENS} order by g.created_at desc, g.id"
        )))
        .bind(&signed.workspace_id)
        .fetch_all(state.db.pool())
        .await?
    } else {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "{GRANT_COLUMNS} where g.workspace_id = $1 and g.person_id = $2 \
             and g.revoked_at is null and {HAS_TOKENS} order by g.created_at desc, g.id"
        )))
        .bind(&signed.workspace_id)
        .bind(&signed.session.person_id)
        .fetch_all(state.db.pool())
        .await?
    };
    rows.iter()
        .map(|row| {
            let client_id: String = row.try_get("client_id")?;
            let source: String = row.try_get("client_source")?;
            let scopes: String = row.try_get("scopes")?;
            let scopes = Scope::parse_list(&scopes)
                .map(|scope| scope.list_string().replace(',', ", "))
                .unwrap_or(scopes);
            Ok(AppRow {
                id: row.try_get("id")?,
                client_name: row.try_get("client_name")?,
                source: source_text(&source, &client_id),
                scopes,
                person: row.try_get("email")?,
                connected: display_time(row.try_get("created_at")?),
                last_used: row
                    .try_get::<Option<i64>, _>("last_used_at")?
                    .map_or_else(|| "never".into(), display_time),
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(PageError::from)
}

/// The grant `grant_id` of the current workspace if the signed-in person may disconnect it.
async fn disconnectable(
    state: &AppState,
    signed: &SignedIn,
    grant_id: &str,
) -> Result<Grant, PageError> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "{GRANT_COLUMNS} where g.workspace_id = $1 and g.id = $2"
    )))
    .bind(&signed.workspace_id)
    .bind(grant_id)
    .fetch_optional(state.db.pool())
    .await?
    .ok_or_else(|| PageError::not_found("There is no such connected app in this workspace."))?;
    let grant = Grant {
        id: row.try_get("id")?,
        person_id: row.try_get("person_id")?,
        client_name: row.try_get("client_name")?,
        revoked: row.try_get::<Option<i64>, _>("revoked_at")?.is_some(),
    };
    if !signed.can_manage() && grant.person_id != signed.session.person_id {
        return Err(PageError::forbidden(
            "You can disconnect only the apps you connected; an owner or admin can disconnect anyone's.",
        ));
    }
    if grant.revoked {
        return Err(PageError::message(
            StatusCode::CONFLICT,
            "Already disconnected",
            format!("“{}” is already disconnected.", grant.client_name),
        ));
    }
    Ok(grant)
}

/// `GET /settings/apps/{grant_id}/disconnect`: asks first.
pub async fn confirm_disconnect(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(grant_id): Path<String>,
    uri: Uri,
) -> Result<Response, PageError> {
    let signed = super::signed_in(&state, &headers, uri.path()).await?;
    let grant = disconnectable(&state, &signed, &grant_id).await?;
    Ok(render(
        StatusCode::OK,
        &ConfirmPage {
            nav: signed.nav("api", PAGE),
            title: "Disconnect app".into(),
            question: format!("Disconnect “{}”?", grant.client_name),
            detail: "Its access is refused from its next request on, and it cannot renew it. \
                     To use it again, connect it again."
                .into(),
            form_id: "confirm-disconnect",
            action: uri.path().to_owned(),
            submit: "Disconnect",
            cancel: PAGE,
        },
    ))
}

/// `POST /settings/apps/{grant_id}/disconnect`.
pub async fn disconnect(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    Path(grant_id): Path<String>,
    body: Bytes,
) -> Result<Response, PageError> {
    let (signed, _) = super::signed_in_form(&state, &headers, &body, PAGE).await?;
    let grant = disconnectable(&state, &signed, &grant_id).await?;
    crate::oauth::revoke_grant(&state, &grant.id).await?;
    Ok(see_other(PAGE))
}
