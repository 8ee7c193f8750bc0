//! Who is calling: the [`Principal`] that authentication makes of a credential.
//!
//! The types live apart from [`crate::auth`], which reads the credential and builds them: the
//! action's context ([`crate::ctx::Ctx`]) carries a principal, and authentication needs the
//! application state, which holds the registry of actions, which names the context. Keeping the
//! plain types down here lets both sides use them without a cycle. `auth` re-exports them, so
//! `auth::Principal` still names the same type.

use serde::Serialize;

use crate::scope::{Role, Scope};

/// What kind of credential made the call: an API key, an OAuth token, or a signed-in browser
/// (`web_session`, the settings pages).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    ApiKey,
    OauthToken,
    // A signed-in browser on the settings pages, acting with its person's role in the workspace
    // the session is looking at (the webhooks page calls actions this way). A plain comment: a
    // doc comment would make the schema a `oneOf` instead of one string enum.
    WebSession,
}

impl CredentialKind {
    /// The kind as stored and answered: `api_key`, `oauth_token` or `web_session`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApiKey => "api_key",
            Self::OauthToken => "oauth_token",
            Self::WebSession => "web_session",
        }
    }

    /// The kind [`Self::as_str`] wrote, or `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        [Self::ApiKey, Self::OauthToken, Self::WebSession]
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }
}

/// The caller of one request: a person in a workspace, through one credential.
#[derive(Debug, Clone)]
pub struct Principal {
    pub workspace_id: String,
    pub person_id: String,
    pub email: String,
    pub role: Role,
    pub credential_kind: CredentialKind,
    pub credential_id: String,
    pub credential_name: String,
    /// The credential's own highest scope, before the role and terms cap it.
    pub granted: Scope,
    /// What the credential may do now; `None` only if the cap leaves nothing (never below read).
    pub effective: Scope,
    pub terms_accepted: bool,
    /// An API key made for an unattended agent (`outreach admin key create --unattended`): the
    /// MCP face never asks its person to confirm (see `crate::confirmations`).
    pub unattended: bool,
    /// The workspace as this request's authentication read it, so that an action showing it
    /// needs no second query.
    pub workspace: WorkspaceSnapshot,
}

/// The caller's workspace, read with the credential on every request.
#[derive(Debug, Clone)]
pub struct WorkspaceSnapshot {
    pub name: String,
    pub created_at: i64,
    pub terms_accepted_at: Option<i64>,
    /// The balance when the request began.
    pub credits_balance: i64,
}

impl Principal {
    pub fn allows(&self, needed: Scope) -> bool {
        needed <= self.effective
    }
}

/// The scope a credential may use now, read afresh by its id: for work a durable job does on a
/// person's behalf after the request that asked for it (an agent run that sends on its own), which
/// must stop the moment the key is revoked, the app disconnected, the person removed or demoted,
/// exactly as that person's next request would. `None` when the credential no longer acts at all.
/// An OAuth credential is its grant (`Principal::credential_id` names the grant): a lapsed access
/// token is refreshed by its client, so only a revoked grant ends it. A web session acts while it
/// lasts (signing out or its 12 hours end it). The role is always read in `workspace_id`, the
/// workspace the work belongs to: a session can look at another workspace since, and a key's or
/// grant's workspace is the work's anyway.
pub async fn scope_now(
    db: &crate::db::Db,
    now_ms: i64,
    kind: CredentialKind,
    credential_id: &str,
    workspace_id: &str,
) -> Result<Option<Scope>, crate::error::ApiError> {
    use sqlx::Row;
    let sql = match kind {
        CredentialKind::ApiKey => {
            "select k.scopes, k.expires_at, k.revoked_at, m.role, w.terms_accepted_at from api_keys k \
             join workspaces w on w.id = k.workspace_id \
             left join memberships m on m.workspace_id = k.workspace_id and m.person_id = k.person_id \
             where k.id = $1 and k.workspace_id = $2"
        }
        CredentialKind::OauthToken => {
            "select g.scopes, cast(null as bigint) as expires_at, g.revoked_at, m.role, w.terms_accepted_at from oauth_grants g \
             join workspaces w on w.id = g.workspace_id \
             left join memberships m on m.workspace_id = g.workspace_id and m.person_id = g.person_id \
             where g.id = $1 and g.workspace_id = $2"
        }
        CredentialKind::WebSession => {
            "select cast('send' as text) as scopes, s.expires_at, cast(null as bigint) as revoked_at, m.role, w.terms_accepted_at from web_sessions s \
             join workspaces w on w.id = $2 \
             left join memberships m on m.workspace_id = w.id and m.person_id = s.person_id \
             where s.id = $1"
        }
    };
    let Some(row) = sqlx::query(sql)
        .bind(credential_id)
        .bind(workspace_id)
        .fetch_optional(db.pool())
        .await?
    else {
        return Ok(None);
    };
    let expires_at: Option<i64> = row.try_get("expires_at")?;
    let revoked_at: Option<i64> = row.try_get("revoked_at")?;
    let role: Option<String> = row.try_get("role")?;
    let Some(role) = role.as_deref().and_then(Role::parse) else {
        return Ok(None);
    };
    if revoked_at.is_some() || expires_at.is_some_and(|at| at <= now_ms) {
        return Ok(None);
    }
    let terms_accepted = row
        .try_get::<Option<i64>, _>("terms_accepted_at")?
        .is_some();
    let granted = Scope::parse_list(&row.try_get::<String, _>("scopes")?)
        .map_err(crate::error::ApiError::internal)?;
    Ok(Some(granted.min(role.scope_cap(terms_accepted))))
}
