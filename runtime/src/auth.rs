//! Bearer authentication, shared by the REST and MCP faces.
//!
//! Every request re-reads its credential, the person's membership and role, and the workspace's
//! sending terms from the database in one query: nothing is cached, so a revoked key, a removed
//! member or a demotion takes effect on the very next call, on every instance. The result is a
//! [`Principal`] whose effective scope is the credential's own scope capped by the role and the
//! terms. The middleware puts it in the request's extensions, where the REST handlers and the MCP
//! tool calls (through `http::request::Parts`) find it.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use sqlx::Row as _;
use sqlx::any::AnyRow;
use sqlx::postgres::PgRow;

use crate::batched_reads;
use crate::config::Config;
use crate::error::{ApiError, ErrorCode};
use crate::ids;
pub use crate::principal::{CredentialKind, Principal, WorkspaceSnapshot};
use crate::request_id::{note, request_id};
use crate::scope::{Role, Scope};
use crate::session::Session;
use crate::state::AppState;

/// What every OAuth access token starts with (the authorization server issues them).
pub const OAUTH_ACCESS_TOKEN_PREFIX: &str = "oat_";

/// Re-record `last_used_at` at most this often per key: a write per request would serialize
/// every call on SQLite's single writer for a figure nobody reads to the millisecond.
const LAST_USED_RESOLUTION_MS: i64 = 60_000;

/// Which door a request came through; it decides the `resource_metadata` the 401 points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    Rest,
    Mcp,
}

/// Authenticates the `Authorization` header of a request.
pub async fn authenticate(
    state: &AppState,
    authorization: Option<&str>,
    face: Face,
) -> Result<Principal, ApiError> {
    let challenge = |error: ApiError, sent: bool| challenge(state, face, error, sent);
    let Some(authorization) = authorization else {
        return Err(challenge(
            ApiError::new(
                ErrorCode::UNAUTHENTICATED,
                "No credential: send your API key as `Authorization: Bearer <key>`.",
            ),
            false,
        ));
    };
    let token = match authorization.split_once(' ') {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            token.trim()
        }
        _ => {
            return Err(challenge(
                ApiError::new(
                    ErrorCode::INVALID_CREDENTIAL,
                    "The Authorization header must be `Bearer <key>`.",
                ),
                true,
            ));
        }
    };
    if let Some(body) = token.strip_prefix(OAUTH_ACCESS_TOKEN_PREFIX) {
        if !ids::is_secret_body(body) {
            return Err(challenge(
                ApiError::new(
                    ErrorCode::INVALID_CREDENTIAL,
                    "The OAuth access token is malformed.",
                ),
                true,
            ));
        }
        let principal = lookup_oauth_token(state, token).await?;
        return principal.map_err(|error| challenge(error, true));
    }
    let environment = &state.config.environment;
    let own_prefix = environment.key_prefix();
    let Some(body) = token.strip_prefix(own_prefix) else {
        let message = if token.starts_with("pk_live_") || token.starts_with("pk_test_") {
            format!(
                "This key belongs to another environment: this server runs in `{}` and accepts only `{own_prefix}` keys.",
                environment.name()
            )
        } else {
            format!(
                "The bearer credential is neither an API key of this service (they start with `{own_prefix}`) nor one of its OAuth access tokens."
            )
        };
        return Err(challenge(
            ApiError::new(ErrorCode::INVALID_CREDENTIAL, message),
            true,
        ));
    };
    if !ids::is_secret_body(body) {
        return Err(challenge(
            ApiError::new(
                ErrorCode::INVALID_CREDENTIAL,
                "The API key is malformed; copy it again from where you saved it.",
            ),
            true,
        ));
    }
    let principal = lookup_api_key(state, token).await?;
    principal.map_err(|error| challenge(error, true))
}

/// Adds the `WWW-Authenticate` challenge of DESIGN.md section 6 to a 401.
fn challenge(state: &AppState, face: Face, error: ApiError, credential_sent: bool) -> ApiError {
    let metadata = match face {
        Face::Mcp => state.config.resource_metadata_url(),
        Face::Rest => format!(
            "{}/.well-known/oauth-protected-resource",
            state.config.base_url
        ),
    };
    let value = if credential_sent {
        format!(
            "Bearer resource_metadata=\"{metadata}\", error=\"invalid_token\", error_description=\"{}\"",
            error.code
        )
    } else {
        format!("Bearer resource_metadata=\"{metadata}\"")
    };
    error.with_header(header::WWW_AUTHENTICATE, &value)
}

/// The columns both credential queries start with, in this order; [`CredentialRow`] reads them
/// by position.
const PRINCIPAL_COLUMNS: &str = "p.email, m.role, w.terms_accepted_at, w.name, w.created_at, \
                                 w.credits_balance";

/// An API key with its person, membership and workspace, in one query. The columns after the
/// shared ones: `expires_at`, `revoked_at`, `unattended`. Public for the bench, whose PostgreSQL
/// ceiling runs this very statement under pgbench.
pub fn api_key_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| api_key_query("", "k.key_hash = $1"))
}

/// [`api_key_sql`] for many keys at once, for PostgreSQL's [`batched_reads`]: the hashes as `$1`,
/// each row's last.
fn api_key_batch_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        api_key_query(
            &format!(", k.key_hash as {}", batched_reads::KEY_COLUMN),
            "k.key_hash = any($1)",
        )
    })
}

/// The API-key query with `key_condition` choosing the keys and `key_column` added to the
/// columns (empty, or the batched form's [`batched_reads::KEY_COLUMN`]).
fn api_key_query(key_column: &str, key_condition: &str) -> String {
    format!(
        "select k.id, k.name, k.scopes, k.last_used_at, k.workspace_id, k.person_id, \
                {PRINCIPAL_COLUMNS}, k.expires_at, k.revoked_at, k.unattended{key_column} \
         from api_keys k \
         join people p on p.id = k.person_id \
         join workspaces w on w.id = k.workspace_id \
         left join memberships m on m.workspace_id = k.workspace_id and m.person_id = k.person_id \
         where {key_condition} and k.environment = $2"
    )
}

/// An OAuth access token with its grant, person, membership and workspace. The columns after
/// the shared ones: `expires_at`, the token's `revoked_at`, the grant's `revoked_at`, `resource`.
fn oauth_token_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| oauth_token_query("", "t.token_hash = $1"))
}

/// [`oauth_token_sql`] for many tokens at once (see [`api_key_batch_sql`]).
fn oauth_token_batch_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        oauth_token_query(
            &format!(", t.token_hash as {}", batched_reads::KEY_COLUMN),
            "t.token_hash = any($1)",
        )
    })
}

/// The OAuth-token query with `key_condition` choosing the tokens and `key_column` added to the
/// columns, as [`api_key_query`].
fn oauth_token_query(key_column: &str, key_condition: &str) -> String {
    format!(
        "select g.id, g.client_name, coalesce(t.scopes, g.scopes), g.last_used_at, \
                g.workspace_id, g.person_id, {PRINCIPAL_COLUMNS}, \
                t.expires_at, t.revoked_at, g.revoked_at, g.resource{key_column} \
         from oauth_tokens t \
         join oauth_grants g on g.id = t.grant_id \
         join people p on p.id = g.person_id \
         join workspaces w on w.id = g.workspace_id \
         left join memberships m on m.workspace_id = g.workspace_id and m.person_id = g.person_id \
         where {key_condition} and t.kind = 'access'"
    )
}

/// One credential's row, typed: what both queries return, however they were run.
struct CredentialRow {
    credential_id: String,
    credential_name: String,
    scopes: String,
    last_used_at: Option<i64>,
    workspace_id: String,
    person_id: String,
    email: String,
    role: Option<String>,
    terms_accepted_at: Option<i64>,
    workspace_name: String,
    workspace_created_at: i64,
    credits_balance: i64,
    /// `expires_at`, then the credential's own `revoked_at`; for a token also the grant's
    /// `revoked_at` and the resource it is bound to.
    expires_at: Option<i64>,
    revoked_at: Option<i64>,
    grant_revoked_at: Option<i64>,
    resource: Option<String>,
    /// An API key made for an unattended agent: never asked to confirm (`crate::confirmations`).
    unattended: bool,
}

/// Reads a credential row by position from either driver's row type.
macro_rules! credential_row {
    ($row:expr, $get:ident, $kind:expr) => {{
        let row = $row;
        let oauth = matches!($kind, CredentialKind::OauthToken);
        CredentialRow {
            credential_id: row.$get(0)?,
            credential_name: row.$get(1)?,
            scopes: row.$get(2)?,
            last_used_at: row.$get(3)?,
            workspace_id: row.$get(4)?,
            person_id: row.$get(5)?,
            email: row.$get(6)?,
            role: row.$get(7)?,
            terms_accepted_at: row.$get(8)?,
            workspace_name: row.$get(9)?,
            workspace_created_at: row.$get(10)?,
            credits_balance: row.$get(11)?,
            expires_at: row.$get(12)?,
            revoked_at: row.$get(13)?,
            grant_revoked_at: if oauth { row.$get(14)? } else { None },
            resource: if oauth { row.$get(15)? } else { None },
            unattended: if oauth {
                false
            } else {
                let unattended: i64 = row.$get(14)?;
                unattended != 0
            },
        }
    }};
}

/// Reads a credential by its hash: on the calling thread where the database allows it (SQLite
/// on a file, see [`crate::db`]), in a batch on PostgreSQL (see [`batched_reads`]), else
/// through the pool. Either way it is read afresh.
async fn read_credential(
    state: &AppState,
    kind: CredentialKind,
    hash: String,
) -> Result<Option<CredentialRow>, ApiError> {
    let (sql, environment) = match kind {
        CredentialKind::ApiKey => (api_key_sql(), Some(state.config.environment.key_tag())),
        CredentialKind::OauthToken => (oauth_token_sql(), None),
        CredentialKind::WebSession => {
            return Err(ApiError::internal(
                "a web session is not a bearer credential",
            ));
        }
    };
    let in_place = state.db.read_in_place(|connection| {
        use rusqlite::OptionalExtension;
        let mut statement = connection.prepare_cached(sql)?;
        let read = |row: &rusqlite::Row<'_>| Ok(credential_row!(row, get, kind));
        let row = match environment {
            Some(environment) => statement.query_row((&hash, environment), read),
            None => statement.query_row((&hash,), read),
        };
        row.optional()
    });
    if let Some(row) = in_place {
        return Ok(row?);
    }
    if let Some(reads) = state.db.batched_reads() {
        let row = match environment {
            Some(environment) => {
                let decode =
                    |row: &PgRow| Ok(credential_row!(row, try_get, CredentialKind::ApiKey));
                reads
                    .read(
                        api_key_batch_sql(),
                        vec![environment.to_owned()],
                        hash,
                        decode,
                    )
                    .await?
            }
            None => {
                let decode =
                    |row: &PgRow| Ok(credential_row!(row, try_get, CredentialKind::OauthToken));
                reads
                    .read(oauth_token_batch_sql(), Vec::new(), hash, decode)
                    .await?
            }
        };
        return Ok(row);
    }
    let mut query = sqlx::query(sql).bind(hash);
    if let Some(environment) = environment {
        query = query.bind(environment);
    }
    let Some(row) = query.fetch_optional(state.db.pool()).await? else {
        return Ok(None);
    };
    let row: &AnyRow = &row;
    Ok(Some(credential_row!(row, try_get, kind)))
}

/// The outer `Result` is a database failure; the inner one a refused credential.
async fn lookup_api_key(
    state: &AppState,
    token: &str,
) -> Result<Result<Principal, ApiError>, ApiError> {
    let kind = CredentialKind::ApiKey;
    let Some(row) = read_credential(state, kind, ids::hash_secret(token)).await? else {
        return Ok(Err(ApiError::new(
            ErrorCode::INVALID_CREDENTIAL,
            "Unknown API key.",
        )));
    };
    let now = state.clock.now_ms();
    if row.revoked_at.is_some() {
        return Ok(Err(ApiError::new(
            ErrorCode::CREDENTIAL_REVOKED,
            "This API key has been revoked.",
        )));
    }
    if let Some(expires_at) = row.expires_at
        && expires_at <= now
    {
        return Ok(Err(ApiError::new(
            ErrorCode::CREDENTIAL_EXPIRED,
            format!(
                "This API key expired at {}.",
                crate::clock::rfc3339(expires_at)
            ),
        )));
    }
    principal_from_row(state, row, kind, now)
}

/// An OAuth access token: the token row, its grant, and the grant's person, membership and
/// workspace, in one query. The grant is what Disconnect revokes, so it is checked on every call;
/// the token must also be bound to this server's MCP address (RFC 8707), so a token issued by
/// another deployment sharing the database is refused.
async fn lookup_oauth_token(
    state: &AppState,
    token: &str,
) -> Result<Result<Principal, ApiError>, ApiError> {
    let kind = CredentialKind::OauthToken;
    let Some(row) = read_credential(state, kind, ids::hash_secret(token)).await? else {
        return Ok(Err(ApiError::new(
            ErrorCode::INVALID_CREDENTIAL,
            "Unknown OAuth access token.",
        )));
    };
    let now = state.clock.now_ms();
    if row.grant_revoked_at.is_some() {
        return Ok(Err(ApiError::new(
            ErrorCode::CREDENTIAL_REVOKED,
            "This app has been disconnected from the workspace; connect it again to get a new token.",
        )));
    }
    if row.revoked_at.is_some() {
        return Ok(Err(ApiError::new(
            ErrorCode::CREDENTIAL_REVOKED,
            "This OAuth access token has been revoked.",
        )));
    }
    let expires_at = row.expires_at.unwrap_or(0);
    if expires_at <= now {
        return Ok(Err(ApiError::new(
            ErrorCode::CREDENTIAL_EXPIRED,
            format!(
                "This OAuth access token expired at {}; use the refresh token to get a new one.",
                crate::clock::rfc3339(expires_at)
            ),
        )));
    }
    let resource = row.resource.clone().unwrap_or_default();
    if resource != state.config.mcp_url() {
        return Ok(Err(ApiError::new(
            ErrorCode::INVALID_CREDENTIAL,
            format!(
                "This OAuth access token was issued for another resource ({resource}), not {}.",
                state.config.mcp_url()
            ),
        )));
    }
    principal_from_row(state, row, kind, now)
}

/// What both credentials share once their own checks passed: the person must still be a member,
/// the effective scope is the credential's capped by the role and the sending terms, and the use
/// is recorded.
fn principal_from_row(
    state: &AppState,
    row: CredentialRow,
    kind: CredentialKind,
    now: i64,
) -> Result<Result<Principal, ApiError>, ApiError> {
    let Some(role) = row.role.as_deref().and_then(Role::parse) else {
        let credential = match kind {
            CredentialKind::ApiKey => "key",
            CredentialKind::OauthToken => "token",
            CredentialKind::WebSession => "session",
        };
        return Ok(Err(ApiError::new(
            ErrorCode::NOT_A_MEMBER,
            format!("The person this {credential} acts as is no longer a member of its workspace."),
        )));
    };
    let granted = Scope::parse_list(&row.scopes).map_err(ApiError::internal)?;
    let terms_accepted = row.terms_accepted_at.is_some();
    if row
        .last_used_at
        .is_none_or(|at| now - at >= LAST_USED_RESOLUTION_MS)
    {
        record_last_use(state, kind, row.credential_id.clone(), now);
    }
    Ok(Ok(Principal {
        workspace_id: row.workspace_id,
        person_id: row.person_id,
        email: row.email,
        role,
        credential_kind: kind,
        credential_name: row.credential_name,
        credential_id: row.credential_id,
        granted,
        effective: granted.min(role.scope_cap(terms_accepted)),
        terms_accepted,
        unattended: row.unattended,
        workspace: WorkspaceSnapshot {
            name: row.workspace_name,
            created_at: row.workspace_created_at,
            terms_accepted_at: row.terms_accepted_at,
            credits_balance: row.credits_balance,
        },
    }))
}

/// Records a credential's use off the request path; losing one update costs nothing.
fn record_last_use(state: &AppState, kind: CredentialKind, id: String, now: i64) {
    let db = state.db.clone();
    // A token's use is its grant's: the grant is what Connected apps lists.
    let sql = match kind {
        CredentialKind::ApiKey => "update api_keys set last_used_at = $1 where id = $2",
        CredentialKind::OauthToken => "update oauth_grants set last_used_at = $1 where id = $2",
        CredentialKind::WebSession => return,
    };
    tokio::spawn(async move {
        let result = sqlx::query(sql)
            .bind(now)
            .bind(&id)
            .execute(db.writes())
            .await;
        if let Err(error) = result {
            tracing::warn!(id, %error, "could not record the last use of a credential");
        }
    });
}

/// The principal of a signed-in browser acting in `workspace_id` (the settings pages that call
/// actions): the person with their role's whole scope, since a session has no scopes of its own,
/// read afresh like every credential. `None` when the person is no longer a member there.
pub async fn session_principal(
    state: &AppState,
    session: &Session,
    workspace_id: &str,
) -> Result<Option<Principal>, ApiError> {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let sql = SQL.get_or_init(|| {
        format!(
            "select {PRINCIPAL_COLUMNS} from memberships m \
             join people p on p.id = m.person_id \
             join workspaces w on w.id = m.workspace_id \
             where m.workspace_id = $1 and m.person_id = $2"
        )
    });
    let row = sqlx::query(sql.as_str())
        .bind(workspace_id)
        .bind(&session.person_id)
        .fetch_optional(state.db.pool())
        .await?;
    let Some(row) = row else { return Ok(None) };
    let role: String = row.try_get("role")?;
    let role =
        Role::parse(&role).ok_or_else(|| ApiError::internal("unknown role in the database"))?;
    let terms_accepted_at: Option<i64> = row.try_get("terms_accepted_at")?;
    let terms_accepted = terms_accepted_at.is_some();
    Ok(Some(Principal {
        workspace_id: workspace_id.to_owned(),
        person_id: session.person_id.clone(),
        email: row.try_get("email")?,
        role,
        credential_kind: CredentialKind::WebSession,
        credential_id: session.id.clone(),
        credential_name: "web session".to_owned(),
        granted: Scope::Send,
        effective: role.scope_cap(terms_accepted),
        terms_accepted,
        unattended: false,
        workspace: WorkspaceSnapshot {
            name: row.try_get("name")?,
            created_at: row.try_get("created_at")?,
            terms_accepted_at,
            credits_balance: row.try_get("credits_balance")?,
        },
    }))
}

/// The error for a call whose credential lacks `needed`.
pub fn insufficient_scope(config: &Config, principal: &Principal, needed: Scope) -> ApiError {
    let settings = config.settings_api_url();
    let why = if principal.granted >= needed {
        if principal.role.scope_cap(principal.terms_accepted) < needed
            && needed == Scope::Send
            && principal.role.can_manage()
        {
            " because the workspace's sending terms are not accepted yet".to_owned()
        } else {
            format!(" because your role is `{}`", principal.role)
        }
    } else {
        String::new()
    };
    // What `send` needs besides the key: the workspace's acceptance of the sending terms.
    let terms = match (needed == Scope::Send, principal.terms_accepted) {
        (false, _) => String::new(),
        (true, true) => " The workspace's sending terms are accepted.".to_owned(),
        (true, false) => format!(
            " The workspace's sending terms are not accepted yet; an owner or admin accepts them at {}.",
            config.sending_terms_url()
        ),
    };
    ApiError::new(
        ErrorCode::INSUFFICIENT_SCOPE,
        format!(
            "This action needs the `{needed}` scope; this credential has `{}`{why}. Manage keys and scopes at {settings}.{terms}",
            principal.effective
        ),
    )
    .with_extra("required_scope", needed.as_str())
    .with_header(
        header::WWW_AUTHENTICATE,
        &format!("Bearer error=\"insufficient_scope\", scope=\"{}\"", needed.included().iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")),
    )
}

/// Authenticates a request (the face is told by its path) and puts the [`Principal`] in its
/// extensions, where the REST handlers and the MCP tool calls find it; the refusal to send
/// otherwise. The server's bearer middleware calls this first.
pub async fn admit(state: &AppState, request: &mut Request) -> Result<Arc<Principal>, Response> {
    let face = if request.uri().path().starts_with("/api/mcp") {
        Face::Mcp
    } else {
        Face::Rest
    };
    let mut values = request.headers().get_all(header::AUTHORIZATION).iter();
    let authorization = values.next().map(|value| value.to_str().unwrap_or("\u{0}"));
    if values.next().is_some() {
        // Proxies and servers disagree on which of two wins; answering either would let one
        // party see a different caller than another.
        return Err(ApiError::invalid_request(
            "The request has more than one Authorization header; send exactly one: `Authorization: Bearer <key>`.",
        )
        .log(&request_id(request))
        .into_response());
    }
    match authenticate(state, authorization, face).await {
        Ok(principal) => {
            let credential_id = principal.credential_id.clone();
            note(request, |log| log.credential_id = Some(credential_id));
            let principal = Arc::new(principal);
            request.extensions_mut().insert(principal.clone());
            Ok(principal)
        }
        Err(error) => Err(error.log(&request_id(request)).into_response()),
    }
}
