//! Idempotency keys: a retried request replays the first response and spends nothing again.
//!
//! A record is keyed by (workspace, the credential's person, action, key) and stored in the
//! database, so a retry that lands on another instance still finds it. Claiming is one
//! `insert ... on conflict do nothing`: exactly one of many concurrent requests with a key wins
//! and runs; the others see the record and get 409 (still running), 422 (same key, another
//! request) or the stored response.
//!
//! A claim is a lease: the winner holds it for [`LEASE_MS`] under a random token and renews it
//! while the work runs ([`Claim::renew`]). The response is stored by [`Claim::complete`] inside
//! the transaction that did the work, fenced by the token, so the work and its answer commit
//! together; a failed request had no effect (its transaction rolled back) and drops its claim, so
//! the key is free again by construction. If the process dies, nobody renews the lease; once it
//! lapses the next request with the key takes the claim over and runs, within seconds rather than
//! after the 24-hour window, and `Retry-After` tells a waiting caller how long is left. Records
//! older than 24 hours are ignored (and replaced by a new claim) and purged in the background.

use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::clock::Clock;
use crate::db::Db;
use crate::error::{ApiError, ErrorCode};
use crate::lease::LEASE_MS;

/// How long a key is remembered.
pub const WINDOW_MS: i64 = 24 * 60 * 60 * 1000;

/// The longest key accepted.
pub const MAX_KEY_LEN: usize = 255;

/// Checks a key's shape: 1 to 255 printable ASCII characters.
/// The schema pattern of a key: printable ASCII, as [`validate_key`] takes it.
pub const KEY_PATTERN: &str = "^[\\x20-\\x7E]+$";

pub fn validate_key(key: &str) -> Result<(), ApiError> {
    if key.is_empty() {
        return Err(ApiError::invalid_request(
            "The idempotency key is empty; send 1 to 255 printable characters.",
        ));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(ApiError::invalid_request(format!(
            "The idempotency key is {} characters long; the limit is {MAX_KEY_LEN}.",
            key.len()
        )));
    }
    if !key.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Err(ApiError::invalid_request(
            "The idempotency key must be printable ASCII characters.",
        ));
    }
    Ok(())
}

/// Identifies one idempotent request.
#[derive(Debug, Clone)]
pub struct Key {
    pub workspace_id: String,
    pub person_id: String,
    pub action: &'static str,
    pub key: String,
}

/// A key this request holds: it runs, and stores its answer with [`Claim::complete`].
#[derive(Debug, Clone)]
pub struct Claim {
    pub key: Key,
    token: String,
}

impl Key {
    /// An id of the call this key names, the same on every retry with the key (a digest, so the
    /// key itself is not written elsewhere). Only one request holds a key's claim at a time, so
    /// a mark an action left under this id was left by a request that has since died (its claim
    /// lapsed and this one took it over): the action may take the mark over at once.
    pub fn call_id(&self) -> String {
        let mut digest = Sha256::new();
        for part in [
            self.workspace_id.as_str(),
            self.person_id.as_str(),
            self.action,
            self.key.as_str(),
        ] {
            digest.update(part.as_bytes());
            digest.update([0]);
        }
        let hex: String = digest
            .finalize()
            .iter()
            .take(16)
            .map(|byte| format!("{byte:02x}"))
            .collect();
        format!("call_{hex}")
    }
}

/// What claiming a key found.
pub enum Claimed {
    /// This request runs.
    Run(Claim),
    /// The first response, to send again.
    Replay { status: u16, body: Value },
}

/// The fingerprint of a request: SHA-256 of the action name and its canonical JSON input.
pub fn fingerprint(action: &str, input: &Value) -> String {
    // serde_json's map is ordered by key, so equal inputs serialise to equal text.
    let mut hasher = Sha256::new();
    hasher.update(action.as_bytes());
    hasher.update([0]);
    hasher.update(input.to_string().as_bytes());
    crate::ids::hex(&hasher.finalize())
}

const WHERE_KEY: &str = "workspace_id = $1 and person_id = $2 and action = $3 and key = $4";

fn bind_key<'q>(
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    key: &'q Key,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    query
        .bind(&key.workspace_id)
        .bind(&key.person_id)
        .bind(key.action)
        .bind(&key.key)
}

/// Looks up `key` before the request is decoded or priced, reading only: the first response
/// when the same request already ran (replayed whatever the world is now), 422
/// `idempotency_key_reused` when the key names another request (whatever this body's own faults),
/// and `None` when the request is to run (claimed later by [`claim`], which checks again).
pub async fn recall(
    db: &Db,
    clock: &Clock,
    key: &Key,
    fingerprint: &str,
) -> Result<Option<Claimed>, ApiError> {
    let existing = bind_key(
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "select fingerprint, state, status_code, response_body, created_at \
             from idempotency_records where {WHERE_KEY}"
        ))),
        key,
    )
    .fetch_optional(db.pool())
    .await?;
    let Some(existing) = existing else {
        return Ok(None);
    };
    let created_at: i64 = existing.try_get("created_at")?;
    if clock.now_ms() - created_at >= WINDOW_MS {
        return Ok(None);
    }
    judge(&existing, key, fingerprint)
}

/// What a live record of `key` says of a request with `fingerprint`: 422 when it was made by
/// another request, its answer when it is done, `None` while it runs.
fn judge(
    existing: &sqlx::any::AnyRow,
    key: &Key,
    fingerprint: &str,
) -> Result<Option<Claimed>, ApiError> {
    if existing.try_get::<String, _>("fingerprint")? != fingerprint {
        return Err(ApiError::new(
            ErrorCode::IDEMPOTENCY_KEY_REUSED,
            format!(
                "The idempotency key `{}` was used for a different `{}` request in the last 24 hours; use a new key for a new request.",
                key.key, key.action
            ),
        ));
    }
    if existing.try_get::<String, _>("state")? != "done" {
        return Ok(None);
    }
    let status: i64 = existing
        .try_get::<Option<i64>, _>("status_code")?
        .unwrap_or(200);
    let body: String = existing
        .try_get::<Option<String>, _>("response_body")?
        .unwrap_or_default();
    let body: Value = serde_json::from_str(&body).map_err(ApiError::internal)?;
    Ok(Some(Claimed::Replay {
        status: u16::try_from(status).unwrap_or(200),
        body,
    }))
}

/// Claims `key` for this request, or reports why it cannot run.
pub async fn claim(
    db: &Db,
    clock: &Clock,
    key: Key,
    fingerprint: &str,
) -> Result<Claimed, ApiError> {
    let token = crate::ids::new_id("lease");
    // A few rounds at most: a round ends early when another request changed the record between
    // our read and our write (it expired and was removed, or its lease was taken over).
    for _ in 0..4 {
        let now = clock.now_ms();
        let inserted = sqlx::query(
            "insert into idempotency_records (workspace_id, person_id, action, key, fingerprint, state, created_at, \
             lease_token, lease_expires_at) values ($1, $2, $3, $4, $5, 'running', $6, $7, $8) on conflict do nothing",
        )
        .bind(&key.workspace_id)
        .bind(&key.person_id)
        .bind(key.action)
        .bind(&key.key)
        .bind(fingerprint)
        .bind(now)
        .bind(&token)
        .bind(now + LEASE_MS)
        .execute(db.writes())
        .await?;
        if inserted.rows_affected() == 1 {
            return Ok(Claimed::Run(Claim { key, token }));
        }
        let existing = bind_key(
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "select fingerprint, state, status_code, response_body, created_at, lease_token, lease_expires_at \
                 from idempotency_records where {WHERE_KEY}"
            ))),
            &key,
        )
        .fetch_optional(db.pool())
        .await?;
        let Some(existing) = existing else { continue };
        let created_at: i64 = existing.try_get("created_at")?;
        if now - created_at >= WINDOW_MS {
            // Expired: forget it (only if nobody replaced it meanwhile) and claim afresh.
            bind_key(
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "delete from idempotency_records where {WHERE_KEY} and created_at = $5"
                ))),
                &key,
            )
            .bind(created_at)
            .execute(db.writes())
            .await?;
            continue;
        }
        if let Some(replay) = judge(&existing, &key, fingerprint)? {
            return Ok(replay);
        }
        let holder: Option<String> = existing.try_get("lease_token")?;
        let expires_at: Option<i64> = existing.try_get("lease_expires_at")?;
        if let Some(expires_at) = expires_at.filter(|&at| at > now) {
            return Err(in_use(&key.key, expires_at - now));
        }
        // The holder stopped renewing (its process died): take the claim over, unless another
        // request just did.
        let taken = bind_key(
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "update idempotency_records set lease_token = $5, lease_expires_at = $6 \
                 where {WHERE_KEY} and state = 'running' and coalesce(lease_token, '') = $7 \
                 and coalesce(lease_expires_at, 0) <= $8"
            ))),
            &key,
        )
        .bind(&token)
        .bind(now + LEASE_MS)
        .bind(holder.unwrap_or_default())
        .bind(now)
        .execute(db.writes())
        .await?;
        if taken.rows_affected() == 1 {
            tracing::info!(
                key = key.key,
                action = key.action,
                "took over the lapsed claim of an idempotency key"
            );
            return Ok(Claimed::Run(Claim { key, token }));
        }
    }
    Err(in_use(&key.key, 1_000))
}

/// 409 `idempotency_key_in_use`, with how long the holder's lease has left.
fn in_use(key: &str, left_ms: i64) -> ApiError {
    let seconds = (left_ms.max(1) + 999) / 1000;
    ApiError::new(
        ErrorCode::IDEMPOTENCY_KEY_IN_USE,
        format!(
            "A request with the idempotency key `{key}` is still being processed; retry in {seconds} second{}.",
            if seconds == 1 { "" } else { "s" }
        ),
    )
    .with_retry_after(left_ms)
}

impl Claim {
    /// Extends the lease; called while the work runs.
    pub async fn renew(&self, db: &Db, clock: &Clock) -> Result<(), ApiError> {
        bind_key(
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "update idempotency_records set lease_expires_at = $6 \
                 where {WHERE_KEY} and lease_token = $5 and state = 'running'"
            ))),
            &self.key,
        )
        .bind(&self.token)
        .bind(clock.now_ms() + LEASE_MS)
        .execute(db.writes())
        .await?;
        Ok(())
    }

    /// Stores the response inside the transaction that did the work, so both commit together.
    /// Fails with 409 when the claim was taken over meanwhile (this request stopped renewing for
    /// longer than the lease): the caller must roll back, and the other request's answer stands.
    pub async fn complete(
        &self,
        conn: &mut sqlx::AnyConnection,
        status: u16,
        body: &str,
    ) -> Result<(), ApiError> {
        let stored = bind_key(
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "update idempotency_records set state = 'done', status_code = $6, response_body = $7, \
                 lease_token = null, lease_expires_at = null where {WHERE_KEY} and lease_token = $5"
            ))),
            &self.key,
        )
        .bind(&self.token)
        .bind(i64::from(status))
        .bind(body)
        .execute(conn)
        .await?;
        if stored.rows_affected() == 1 {
            Ok(())
        } else {
            Err(in_use(&self.key.key, 1_000))
        }
    }

    /// Drops the claim of a request that failed (and so did nothing), freeing the key.
    pub async fn release(&self, db: &Db) -> Result<(), ApiError> {
        bind_key(
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "delete from idempotency_records where {WHERE_KEY} and lease_token = $5 and state = 'running'"
            ))),
            &self.key,
        )
        .bind(&self.token)
        .execute(db.writes())
        .await?;
        Ok(())
    }
}

/// Deletes records past the window; returns how many.
pub async fn purge(db: &Db, clock: &Clock) -> Result<u64, ApiError> {
    let result = sqlx::query("delete from idempotency_records where created_at < $1")
        .bind(clock.now_ms() - WINDOW_MS)
        .execute(db.writes())
        .await?;
    Ok(result.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_bounded_and_printable() {
        assert!(validate_key("order-42").is_ok());
        assert!(validate_key("").is_err());
        assert!(validate_key(&"k".repeat(256)).is_err());
        assert!(validate_key(&"k".repeat(255)).is_ok());
        assert!(validate_key("tab\there").is_err());
    }

    #[test]
    fn fingerprints_ignore_key_order_but_not_values() {
        let a = fingerprint("import_prospects", &json!({"a": 1, "b": [1, 2]}));
        let b = fingerprint("import_prospects", &json!({"b": [1, 2], "a": 1}));
        assert_eq!(a, b);
        assert_ne!(
            a,
            fingerprint("import_prospects", &json!({"a": 2, "b": [1, 2]}))
        );
        assert_ne!(
            a,
            fingerprint("process_list", &json!({"a": 1, "b": [1, 2]}))
        );
    }
}
