//! Identity administration: workspaces, members, API keys and the sending terms.
//!
//! These are the operations behind `outreach admin` (and, later, the settings pages). They apply
//! the same rules the API does (who may hold which scope, at least one owner per workspace) so a
//! script cannot create a credential the API would refuse to honour. Each returns a plain result
//! or an error whose message is a sentence for the operator.

use anyhow::{Context, anyhow, bail};
use argon2::password_hash::{PasswordHasher, SaltString, rand_core::OsRng};
use serde::Serialize;
use sqlx::Row;

use crate::clock::{Clock, rfc3339};
use crate::config::Environment;
use crate::credits;
use crate::db::{Backend, Db};
use crate::ids;
use crate::scope::{Role, Scope, scope_refusal};

/// Hashes a password with argon2id and a random salt.
pub fn hash_password(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|error| anyhow!("could not hash the password: {error}"))
}

/// Whether `password` is the one a PHC hash string was made from (what sign-in checks).
pub fn password_matches(hash: &str, password: &str) -> bool {
    use argon2::password_hash::{PasswordHash, PasswordVerifier};
    PasswordHash::new(hash).is_ok_and(|parsed| {
        argon2::Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok()
    })
}

fn normalize_email(email: &str) -> anyhow::Result<String> {
    let email = email.trim().to_lowercase();
    let valid = email.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty()
            && domain.contains('.')
            && !domain.starts_with('.')
            && !domain.ends_with('.')
    });
    if !valid || email.chars().any(char::is_whitespace) {
        bail!("`{email}` is not an email address");
    }
    Ok(email)
}

/// A new workspace and its first owner.
#[derive(Debug, Serialize)]
pub struct CreatedWorkspace {
    pub workspace_id: String,
    pub person_id: String,
    /// The generated password when none was given (shown once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// The credits granted as `starter` to a new workspace (0 in production or when turned off);
    /// absent when a member joins an existing one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starter_credits: Option<i64>,
}

/// Creates a workspace and its owner; `starter_credits` above 0 are granted in the ledger with
/// the reason `starter`, in the same transaction (see [`crate::config::starter_credits`]).
pub async fn create_workspace(
    db: &Db,
    clock: &Clock,
    name: &str,
    owner_email: &str,
    owner_password: Option<&str>,
    starter_credits: i64,
) -> anyhow::Result<CreatedWorkspace> {
    let name = name.trim();
    if name.is_empty() {
        bail!("the workspace name must not be empty");
    }
    let email = normalize_email(owner_email)?;
    let now = clock.now_ms();
    let workspace_id = ids::new_id("wsp");
    let mut tx = db.begin_write().await?;
    sqlx::query("insert into workspaces (id, name, created_at) values ($1, $2, $3)")
        .bind(&workspace_id)
        .bind(name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let (person_id, password) =
        find_or_create_person(&mut tx, &email, None, owner_password, now).await?;
    insert_membership(&mut tx, &workspace_id, &person_id, Role::Owner, now).await?;
    if starter_credits > 0 {
        let source = credits::Source {
            reason: Some("starter"),
            person_id: Some(&person_id),
            ..Default::default()
        };
        credits::grant_in(&mut tx, now, &workspace_id, starter_credits, &source)
            .await
            .map_err(|error| anyhow!(error.message))?;
    }
    tx.commit().await?;
    Ok(CreatedWorkspace {
        workspace_id,
        person_id,
        password,
        starter_credits: Some(starter_credits.max(0)),
    })
}

/// Finds a person by email or creates one; returns the generated password of a new person
/// created without one. A new person without a display name is named after their address.
async fn find_or_create_person(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    email: &str,
    display_name: Option<&str>,
    password: Option<&str>,
    now: i64,
) -> anyhow::Result<(String, Option<String>)> {
    let existing = sqlx::query("select id from people where email = $1")
        .bind(email)
        .fetch_optional(&mut **tx)
        .await?;
    if let Some(row) = existing {
        return Ok((row.try_get("id")?, None));
    }
    let generated = password.is_none().then(ids::new_password);
    let password = password.or(generated.as_deref()).unwrap_or_default();
    check_password(password)?;
    let person_id = ids::new_id("psn");
    let display_name = display_name
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| email.split('@').next().unwrap_or(email))
        .to_owned();
    sqlx::query("insert into people (id, email, display_name, password_hash, created_at) values ($1, $2, $3, $4, $5)")
        .bind(&person_id)
        .bind(email)
        .bind(display_name)
        .bind(hash_password(password)?)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    Ok((person_id, generated))
}

async fn insert_membership(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    workspace_id: &str,
    person_id: &str,
    role: Role,
    now: i64,
) -> anyhow::Result<()> {
    sqlx::query("insert into memberships (workspace_id, person_id, role, created_at) values ($1, $2, $3, $4)")
        .bind(workspace_id)
        .bind(person_id)
        .bind(role.as_str())
        .bind(now)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn require_workspace(db: &Db, workspace_id: &str) -> anyhow::Result<()> {
    let found = sqlx::query("select id from workspaces where id = $1")
        .bind(workspace_id)
        .fetch_optional(db.pool())
        .await?;
    if found.is_none() {
        bail!("no workspace with id `{workspace_id}`");
    }
    Ok(())
}

/// The person id and role of a member, found by email.
async fn member(db: &Db, workspace_id: &str, email: &str) -> anyhow::Result<(String, Role)> {
    require_workspace(db, workspace_id).await?;
    let email = normalize_email(email)?;
    let row = sqlx::query(
        "select p.id, m.role from people p join memberships m on m.person_id = p.id \
         where m.workspace_id = $1 and p.email = $2",
    )
    .bind(workspace_id)
    .bind(&email)
    .fetch_optional(db.pool())
    .await?
    .ok_or_else(|| anyhow!("`{email}` is not a member of workspace `{workspace_id}`"))?;
    let role: String = row.try_get("role")?;
    Ok((
        row.try_get("id")?,
        Role::parse(&role).context("unknown role in the database")?,
    ))
}

/// Adds a person (created if new) to a workspace with a role.
pub async fn add_member(
    db: &Db,
    clock: &Clock,
    workspace_id: &str,
    email: &str,
    role: Role,
    password: Option<&str>,
) -> anyhow::Result<CreatedWorkspace> {
    add_named_member(db, clock, workspace_id, email, None, role, password).await
}

/// [`add_member`] with the display name a new person gets (the settings page asks for one).
pub async fn add_named_member(
    db: &Db,
    clock: &Clock,
    workspace_id: &str,
    email: &str,
    display_name: Option<&str>,
    role: Role,
    password: Option<&str>,
) -> anyhow::Result<CreatedWorkspace> {
    require_workspace(db, workspace_id).await?;
    let email = normalize_email(email)?;
    let now = clock.now_ms();
    let mut tx = db.begin_write().await?;
    let (person_id, generated) =
        find_or_create_person(&mut tx, &email, display_name, password, now).await?;
    let already =
        sqlx::query("select role from memberships where workspace_id = $1 and person_id = $2")
            .bind(workspace_id)
            .bind(&person_id)
            .fetch_optional(&mut *tx)
            .await?;
    if already.is_some() {
        bail!(
            "`{email}` is already a member of `{workspace_id}`; use `member set-role` to change the role"
        );
    }
    insert_membership(&mut tx, workspace_id, &person_id, role, now).await?;
    tx.commit().await?;
    Ok(CreatedWorkspace {
        workspace_id: workspace_id.to_owned(),
        person_id,
        password: generated,
        starter_credits: None,
    })
}

/// The condition under which a membership may stop being an owner's: it is not one, or another
/// owner remains. Written into the very statement that removes or demotes, so the check and the
/// change cannot be split by another request.
const ANOTHER_OWNER_REMAINS: &str = "(role <> 'owner' or exists (select 1 from memberships o \
     where o.workspace_id = $1 and o.role = 'owner' and o.person_id <> $2))";

/// Removes or demotes a member with `change` (a statement on `memberships` whose `$1` is the
/// workspace and `$2` the person, guarded by [`ANOTHER_OWNER_REMAINS`]), refusing to leave the
/// workspace without an owner even when two owners remove each other at the same moment. On
/// PostgreSQL the workspace's owner rows are locked first, so the second request waits for the
/// first and then sees its effect (each statement takes a fresh snapshot under read committed).
/// SQLite serializes writers: a statement whose snapshot went stale fails rather than writing.
async fn change_membership_keeping_an_owner(
    db: &Db,
    workspace_id: &str,
    person_id: &str,
    role: Role,
    change: &str,
    new_role: Option<Role>,
) -> anyhow::Result<()> {
    let mut tx = db.begin_write().await?;
    if db.backend() == Backend::Postgres {
        sqlx::query(
            "select person_id from memberships where workspace_id = $1 and role = 'owner' for update",
        )
        .bind(workspace_id)
        .fetch_all(&mut *tx)
        .await?;
    }
    let mut statement = sqlx::query(sqlx::AssertSqlSafe(change))
        .bind(workspace_id)
        .bind(person_id);
    if let Some(new_role) = new_role {
        statement = statement.bind(new_role.as_str());
    }
    let changed = statement.execute(&mut *tx).await?.rows_affected();
    if changed == 0 {
        tx.rollback().await?;
        if role == Role::Owner {
            bail!("this is the workspace's last owner; make someone else an owner first");
        }
        bail!("this person is no longer a member of `{workspace_id}`");
    }
    tx.commit().await?;
    Ok(())
}

/// Removes a person from a workspace; their keys stop working on the next request.
pub async fn remove_member(db: &Db, workspace_id: &str, email: &str) -> anyhow::Result<()> {
    let (person_id, role) = member(db, workspace_id, email).await?;
    let change = format!(
        "delete from memberships where workspace_id = $1 and person_id = $2 \
         and {ANOTHER_OWNER_REMAINS}"
    );
    change_membership_keeping_an_owner(db, workspace_id, &person_id, role, &change, None).await
}

/// Changes a member's role; the new cap applies to their credentials on the next request.
pub async fn set_role(db: &Db, workspace_id: &str, email: &str, role: Role) -> anyhow::Result<()> {
    let (person_id, current) = member(db, workspace_id, email).await?;
    let change = format!(
        "update memberships set role = $3 where workspace_id = $1 and person_id = $2 \
         and ($3 = 'owner' or {ANOTHER_OWNER_REMAINS})"
    );
    change_membership_keeping_an_owner(db, workspace_id, &person_id, current, &change, Some(role))
        .await
}

/// A new API key; `key` is the only time its value is shown.
#[derive(Debug, Serialize)]
pub struct CreatedKey {
    pub id: String,
    pub key: String,
    pub prefix: String,
    pub scopes: Vec<Scope>,
    pub expires_at: Option<String>,
}

/// How many characters of a key are kept for display: the environment prefix and four more.
const DISPLAY_PREFIX_EXTRA: usize = 4;

/// Creates an API key for a member, refused when the role or the terms do not allow `scope`.
#[allow(clippy::too_many_arguments)]
pub async fn create_key(
    db: &Db,
    clock: &Clock,
    environment: &Environment,
    workspace_id: &str,
    email: &str,
    name: &str,
    scope: Scope,
    expires_at: Option<i64>,
) -> anyhow::Result<CreatedKey> {
    let (person_id, role) = member(db, workspace_id, email).await?;
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        bail!("the key name must be 1 to 100 characters");
    }
    let terms_accepted = terms_accepted(db, workspace_id).await?;
    if let Some(why) = scope_refusal(role, terms_accepted, scope) {
        bail!("cannot create a key with `{scope}`: {why}");
    }
    let now = clock.now_ms();
    if let Some(expires_at) = expires_at
        && expires_at <= now
    {
        bail!("the expiry {} is in the past", rfc3339(expires_at));
    }
    let prefix_text = environment.key_prefix();
    let key = ids::new_secret(prefix_text);
    let prefix: String = key
        .chars()
        .take(prefix_text.len() + DISPLAY_PREFIX_EXTRA)
        .collect();
    let id = ids::new_id("key");
    sqlx::query(
        "insert into api_keys (id, workspace_id, person_id, name, scopes, prefix, key_hash, environment, expires_at, created_by, created_at) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(&id)
    .bind(workspace_id)
    .bind(&person_id)
    .bind(name)
    .bind(scope.list_string())
    .bind(&prefix)
    .bind(ids::hash_secret(&key))
    .bind(environment.key_tag())
    .bind(expires_at)
    .bind(&person_id)
    .bind(now)
    .execute(db.writes())
    .await?;
    Ok(CreatedKey {
        id,
        key,
        prefix,
        scopes: scope.included(),
        expires_at: expires_at.map(rfc3339),
    })
}

/// Revokes a key; it is refused from its next request on.
pub async fn revoke_key(db: &Db, clock: &Clock, key_id: &str) -> anyhow::Result<()> {
    let row = sqlx::query("select revoked_at from api_keys where id = $1")
        .bind(key_id)
        .fetch_optional(db.pool())
        .await?;
    let Some(row) = row else {
        bail!("no API key with id `{key_id}`")
    };
    if let Some(revoked_at) = row.try_get::<Option<i64>, _>("revoked_at")? {
        bail!(
            "key `{key_id}` was already revoked at {}",
            rfc3339(revoked_at)
        );
    }
    sqlx::query("update api_keys set revoked_at = $1 where id = $2 and revoked_at is null")
        .bind(clock.now_ms())
        .bind(key_id)
        .execute(db.writes())
        .await?;
    Ok(())
}

/// Marks an API key as made for an unattended agent (or not): the MCP face never asks its person
/// to confirm a call (see `crate::confirmations`). Refused for an unknown or revoked key.
pub async fn set_unattended(db: &Db, key_id: &str, unattended: bool) -> anyhow::Result<()> {
    let done =
        sqlx::query("update api_keys set unattended = $1 where id = $2 and revoked_at is null")
            .bind(i64::from(unattended))
            .bind(key_id)
            .execute(db.writes())
            .await?;
    if done.rows_affected() == 0 {
        bail!("no live key `{key_id}`");
    }
    Ok(())
}

async fn terms_accepted(db: &Db, workspace_id: &str) -> anyhow::Result<bool> {
    let row = sqlx::query("select terms_accepted_at from workspaces where id = $1")
        .bind(workspace_id)
        .fetch_one(db.pool())
        .await?;
    Ok(row
        .try_get::<Option<i64>, _>("terms_accepted_at")?
        .is_some())
}

/// Records that an owner or admin accepted the sending terms for the workspace.
pub async fn accept_terms(
    db: &Db,
    clock: &Clock,
    workspace_id: &str,
    email: &str,
) -> anyhow::Result<()> {
    let (person_id, role) = member(db, workspace_id, email).await?;
    if !role.can_manage() {
        bail!("only an owner or admin may accept the sending terms; `{email}` is a `{role}`");
    }
    sqlx::query("update workspaces set terms_accepted_at = $1, terms_accepted_by = $2 where id = $3 and terms_accepted_at is null")
        .bind(clock.now_ms())
        .bind(&person_id)
        .bind(workspace_id)
        .execute(db.writes())
        .await?;
    Ok(())
}

/// Shortest password a person may have; the web forms and the CLI apply the same rule.
pub const MIN_PASSWORD_CHARS: usize = 8;

/// Refuses a password shorter than [`MIN_PASSWORD_CHARS`].
pub fn check_password(password: &str) -> anyhow::Result<()> {
    if password.chars().count() < MIN_PASSWORD_CHARS {
        bail!("the password must be at least {MIN_PASSWORD_CHARS} characters");
    }
    Ok(())
}

/// A person's new password; `password` is set only when it was generated (shown once).
#[derive(Debug, Serialize)]
pub struct PasswordSet {
    pub person_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// Browser sessions ended by the change.
    pub sessions_ended: u64,
}

/// Sets a person's password (generated when `None`) and ends their browser sessions, all but
/// `keep_session` (the session that made the change from the settings page). Ending the others
/// is the point of a change after a suspected leak: whoever signed in with the old password is
/// signed out everywhere. API keys and OAuth grants are not touched: they never used the password.
pub async fn set_password(
    db: &Db,
    email: &str,
    password: Option<&str>,
    keep_session: Option<&str>,
) -> anyhow::Result<PasswordSet> {
    let email = normalize_email(email)?;
    let generated = password.is_none().then(ids::new_password);
    let password = password.or(generated.as_deref()).unwrap_or_default();
    check_password(password)?;
    let hash = hash_password(password)?;
    let mut tx = db.begin_write().await?;
    let person_id: String = sqlx::query_scalar("select id from people where email = $1")
        .bind(&email)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| anyhow!("no person with the email `{email}`"))?;
    sqlx::query("update people set password_hash = $1 where id = $2")
        .bind(&hash)
        .bind(&person_id)
        .execute(&mut *tx)
        .await?;
    let sessions_ended = sqlx::query("delete from web_sessions where person_id = $1 and id <> $2")
        .bind(&person_id)
        .bind(keep_session.unwrap_or(""))
        .execute(&mut *tx)
        .await?
        .rows_affected();
    tx.commit().await?;
    Ok(PasswordSet {
        person_id,
        password: generated,
        sessions_ended,
    })
}

/// Whether an email address (normalized as sign-in does) names an existing person.
pub async fn person_exists(db: &Db, email: &str) -> anyhow::Result<bool> {
    let email = normalize_email(email)?;
    let found = sqlx::query("select id from people where email = $1")
        .bind(&email)
        .fetch_optional(db.pool())
        .await?;
    Ok(found.is_some())
}

/// One member of a workspace, as the members page lists them.
#[derive(Debug, Clone, Serialize)]
pub struct MemberSummary {
    pub person_id: String,
    pub email: String,
    pub display_name: String,
    pub role: Role,
    pub joined_at: i64,
}

fn member_summary(row: &sqlx::any::AnyRow) -> anyhow::Result<MemberSummary> {
    let role: String = row.try_get("role")?;
    Ok(MemberSummary {
        person_id: row.try_get("person_id")?,
        email: row.try_get("email")?,
        display_name: row.try_get("display_name")?,
        role: Role::parse(&role).context("unknown role in the database")?,
        joined_at: row.try_get("created_at")?,
    })
}

const MEMBER_COLUMNS: &str = "select m.person_id, p.email, p.display_name, m.role, m.created_at \
     from memberships m join people p on p.id = m.person_id";

/// The members of a workspace, oldest first.
pub async fn list_members(db: &Db, workspace_id: &str) -> anyhow::Result<Vec<MemberSummary>> {
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "{MEMBER_COLUMNS} where m.workspace_id = $1 order by m.created_at, p.email"
    )))
    .bind(workspace_id)
    .fetch_all(db.pool())
    .await?;
    rows.iter().map(member_summary).collect()
}

/// One member of a workspace by person id; `None` when the person is not in it.
pub async fn find_member(
    db: &Db,
    workspace_id: &str,
    person_id: &str,
) -> anyhow::Result<Option<MemberSummary>> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "{MEMBER_COLUMNS} where m.workspace_id = $1 and m.person_id = $2"
    )))
    .bind(workspace_id)
    .bind(person_id)
    .fetch_optional(db.pool())
    .await?;
    row.as_ref().map(member_summary).transpose()
}

/// An API key as listed (never its value, which is not stored).
#[derive(Debug, Clone, Serialize)]
pub struct KeySummary {
    pub id: String,
    pub person_id: String,
    pub person_email: String,
    pub name: String,
    pub prefix: String,
    pub scopes: Scope,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

fn key_summary(row: &sqlx::any::AnyRow) -> anyhow::Result<KeySummary> {
    let scopes: String = row.try_get("scopes")?;
    Ok(KeySummary {
        id: row.try_get("id")?,
        person_id: row.try_get("person_id")?,
        person_email: row.try_get("email")?,
        name: row.try_get("name")?,
        prefix: row.try_get("prefix")?,
        scopes: Scope::parse_list(&scopes).map_err(anyhow::Error::msg)?,
        created_at: row.try_get("created_at")?,
        last_used_at: row.try_get("last_used_at")?,
        expires_at: row.try_get("expires_at")?,
        revoked_at: row.try_get("revoked_at")?,
    })
}

const KEY_COLUMNS: &str = "select k.id, k.person_id, p.email, k.name, k.prefix, k.scopes, \
        k.created_at, k.last_used_at, k.expires_at, k.revoked_at \
     from api_keys k join people p on p.id = k.person_id";

/// The keys of a workspace, newest first; only one person's when `person_id` is given.
pub async fn list_keys(
    db: &Db,
    workspace_id: &str,
    person_id: Option<&str>,
) -> anyhow::Result<Vec<KeySummary>> {
    let order = "order by k.created_at desc, k.id";
    let rows = match person_id {
        Some(person_id) => {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "{KEY_COLUMNS} where k.workspace_id = $1 and k.person_id = $2 {order}"
            )))
            .bind(workspace_id)
            .bind(person_id)
            .fetch_all(db.pool())
            .await?
        }
        None => {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "{KEY_COLUMNS} where k.workspace_id = $1 {order}"
            )))
            .bind(workspace_id)
            .fetch_all(db.pool())
            .await?
        }
    };
    rows.iter().map(key_summary).collect()
}

/// One key of a workspace by id; `None` when it is not in that workspace.
pub async fn find_key(
    db: &Db,
    workspace_id: &str,
    key_id: &str,
) -> anyhow::Result<Option<KeySummary>> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "{KEY_COLUMNS} where k.workspace_id = $1 and k.id = $2"
    )))
    .bind(workspace_id)
    .bind(key_id)
    .fetch_optional(db.pool())
    .await?;
    row.as_ref().map(key_summary).transpose()
}

/// What `serve` prints the first time it starts on an empty database.
#[derive(Debug, Serialize)]
pub struct Bootstrap {
    pub workspace_id: String,
    pub email: String,
    pub password: String,
    pub key: CreatedKey,
}

/// On a database with no workspace, creates one with an owner and a read+write key.
pub async fn bootstrap_if_empty(
    db: &Db,
    clock: &Clock,
    environment: &Environment,
    starter_credits: i64,
) -> anyhow::Result<Option<Bootstrap>> {
    let row = sqlx::query("select count(*) as workspaces from workspaces")
        .fetch_one(db.pool())
        .await?;
    if row.try_get::<i64, _>("workspaces")? > 0 {
        return Ok(None);
    }
    let email = "owner@example.com";
    let password = ids::new_password();
    let created = create_workspace(
        db,
        clock,
        "My workspace",
        email,
        Some(&password),
        starter_credits,
    )
    .await?;
    let key = create_key(
        db,
        clock,
        environment,
        &created.workspace_id,
        email,
        "First key",
        Scope::Write,
        None,
    )
    .await?;
    Ok(Some(Bootstrap {
        workspace_id: created.workspace_id,
        email: email.to_owned(),
        password,
        key,
    }))
}
