//! Who is calling: the [`Principal`] that authentication makes of a credential.
//!
//! The types live apart from [`crate::auth`], which reads the credential and builds them: the
//! action's context ([`crate::ctx::Ctx`]) carries a principal, and authentication needs the
//! application state, which holds the registry of actions, which names the context. Keeping the
//! plain types down here lets both sides use them without a cycle. `auth` re-exports them, so
//! `auth::Principal` still names the same type.

use serde::Serialize;

use crate::scope::{Role, Scope};

/// What kind of credential made the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    ApiKey,
    OauthToken,
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
