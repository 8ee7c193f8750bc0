//! The workspace and the caller: what a client calls first to check its credential.

use outreach_runtime::prelude::{ApiError, CredentialKind, Ctx, Role, Scope, Timestamp, action};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

outreach_runtime::prelude::resource_tag!(
    "workspace",
    toolset = "workspace",
    "The workspace the credential acts in: its name, members and credit balance."
);

/// `get_workspace` takes no input.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetWorkspaceInput {}

// The fields of this answer's structs are declared in key order: the JSON writer then sends
// them as they come instead of sorting them (see `outreach_runtime::json`), on the API's most
// frequent call.

/// The workspace and who is calling.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WorkspaceView {
    pub caller: Caller,
    pub workspace: Workspace,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Workspace {
    pub created_at: Timestamp,
    /// Credits available to actions that spend them.
    pub credits_balance: i64,
    /// `production` (keys start `pk_live_`) or another name such as `development` (`pk_test_`).
    pub environment: String,
    pub id: String,
    pub name: String,
    /// Whether an owner or admin has accepted the sending terms; `send` needs them.
    pub sending_terms_accepted: bool,
    pub sending_terms_accepted_at: Option<Timestamp>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Caller {
    pub credential_id: String,
    pub credential_kind: CredentialKind,
    pub credential_name: String,
    pub email: String,
    pub person_id: String,
    pub role: Role,
    /// What this credential may do now: its own scopes capped by the role and the sending terms.
    pub scopes: Vec<Scope>,
}

/// Show the workspace and the caller.
///
/// Call it first: the workspace (environment, credit balance, sending terms) and the caller's role
/// and effective scopes.
///
/// Returns the workspace (id, name, environment, creation time, whether the sending terms are
/// accepted, credits balance) and the caller: the person, their role, the credential used and
/// its effective scopes.
#[action(scope = "read", http = "GET /workspace")]
pub async fn get_workspace(ctx: Ctx, _input: GetWorkspaceInput) -> Result<WorkspaceView, ApiError> {
    // Authentication read the workspace with the credential on this very request.
    let principal = ctx.principal();
    Ok(WorkspaceView {
        workspace: Workspace {
            id: principal.workspace_id.clone(),
            name: principal.workspace.name.clone(),
            environment: ctx.config().environment.name().to_owned(),
            created_at: Timestamp(principal.workspace.created_at),
            sending_terms_accepted: principal.workspace.terms_accepted_at.is_some(),
            sending_terms_accepted_at: principal.workspace.terms_accepted_at.map(Timestamp),
            credits_balance: principal.workspace.credits_balance,
        },
        caller: Caller {
            person_id: principal.person_id.clone(),
            email: principal.email.clone(),
            role: principal.role,
            credential_kind: principal.credential_kind,
            credential_id: principal.credential_id.clone(),
            credential_name: principal.credential_name.clone(),
            scopes: principal.effective.included(),
        },
    })
}

outreach_runtime::prelude::example!(get_workspace,
    request: {},
    response: {
        "caller": {
            "credential_id": "key_PFgMFIjfBdW4VGelfWSr",
            "credential_kind": "api_key",
            "credential_name": "CRM sync",
            "email": "owner@example.com",
            "person_id": "psn_v2q1QvxfTGRL4ccko2BH",
            "role": "owner",
            "scopes": ["read", "write"]
        },
        "workspace": {
            "created_at": "2026-11-23T18:22:29.555Z",
            "credits_balance": 1000,
            "environment": "development",
            "id": "wsp_nwdrpWKmwxjS7cWJ6rDu",
            "name": "Acme Outreach",
            "sending_terms_accepted": false,
            "sending_terms_accepted_at": null
        }
    }
);

outreach_runtime::prelude::parity!(get_workspace, read,
    ok: {},
    fails: {"verbose": true} => INVALID_REQUEST
);
