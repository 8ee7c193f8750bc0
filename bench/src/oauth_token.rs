//! An OAuth access token for the `mcp-oauth` phase, written straight into the SQLite file as the
//! token endpoint stores one: a grant (client, person, workspace, scopes, resource) and the
//! token's SHA-256. Going through sign-in and consent would measure nothing the phase is about;
//! what it measures is a tool call made with a token rather than a key: the token lookup, and the
//! step-up check that reads the JSON-RPC body of every OAuth request below the `send` scope.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{Connection, SqliteConnection};

/// Inserts a `read,write` grant for the workspace's owner bound to `resource`, with an access
/// token valid for a day; returns the token.
pub async fn insert(db_path: &Path, workspace_id: &str, resource: &str) -> anyhow::Result<String> {
    let now = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis())?;
    // Opaque tokens are `oat_` and 43 base62 characters; a fixed one is as good as a random one
    // for a benchmark on a throw-away database.
    let token = format!("oat_{}", "b3nch".repeat(9).get(..43).unwrap_or_default());
    let hash: String = Sha256::digest(token.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let options = SqliteConnectOptions::new().filename(db_path);
    let mut conn = SqliteConnection::connect_with(&options).await?;
    sqlx::query(
        "insert into oauth_grants (id, workspace_id, person_id, client_id, client_name, \
            client_source, scopes, resource, created_at) \
         select 'grt_bench0000000000000000', workspace_id, person_id, 'cli_bench', 'Bench client', \
                'registration', 'read,write', $2, $3 \
         from memberships where workspace_id = $1 and role = 'owner' limit 1",
    )
    .bind(workspace_id)
    .bind(resource)
    .bind(now)
    .execute(&mut conn)
    .await?;
    sqlx::query(
        "insert into oauth_tokens (token_hash, grant_id, kind, expires_at, created_at) \
         values ($1, 'grt_bench0000000000000000', 'access', $2, $3)",
    )
    .bind(hash)
    .bind(now + 24 * 60 * 60 * 1000)
    .bind(now)
    .execute(&mut conn)
    .await?;
    conn.close().await?;
    Ok(token)
}
