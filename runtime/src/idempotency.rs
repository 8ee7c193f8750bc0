//! Idempotency keys: a retried request replays the first response and spends nothing again.
//!
//! A record is keyed by (workspace, the credential's person, action, key) and stored in the
//! database, so a retry that lands on another instance still finds it. Claiming is one
//! `insert ... on conflict do nothing`: exactly one of many concurrent requests with a key wins and
//! runs; the others see the record and get 409 (still running), 422 (same key, another request)
//! or the stored response. Records older than 24 hours are ignored (and replaced by a new claim)
//! and purged in the background. A claim is dropped when the request fails before the action
//! begins (402, or our own 500), so the caller can fix it and retry with the same key.

use serde_json::Value;
use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::clock::Clock;
use crate::db::Db;
use crate::error::{ApiError, ErrorCode};

/// How long a key is remembered.
pub const WINDOW_MS: i64 = 24 * 60 * 60 * 1000;

/// The longest key accepted.
pub const MAX_KEY_LEN: usize = 255;

/// Checks a key's shape: 1 to 255 printable ASCII characters.
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
pub struct Claim {
    pub workspace_id: String,
    pub person_id: String,
    pub action: &'static str,
    pub key: String,
}

/// What claiming a key found.
pub enum Claimed {
    /// This request runs; store its response with [`complete`].
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

/// Claims `claim.key` for this request, or reports why it cannot run.
pub async fn claim(
    db: &Db,
    clock: &Clock,
    claim: Claim,
    fingerprint: &str,
) -> Result<Claimed, ApiError> {
    // Two rounds at most: the second follows the removal of an expired record.
    for _ in 0..2 {
        let now = clock.now_ms();
        let inserted = sqlx::query(
            "insert into idempotency_records (workspace_id, person_id, action, key, fingerprint, state, created_at) \
             values ($1, $2, $3, $4, $5, 'running', $6) on conflict do nothing",
        )
        .bind(&claim.workspace_id)
        .bind(&claim.person_id)
        .bind(claim.action)
        .bind(&claim.key)
        .bind(fingerprint)
        .bind(now)
        .execute(db.pool())
        .await?;
        if inserted.rows_affected() == 1 {
            return Ok(Claimed::Run(claim));
        }
        let existing = sqlx::query(
            "select fingerprint, state, status_code, response_body, created_at from idempotency_records \
             where workspace_id = $1 and person_id = $2 and action = $3 and key = $4",
        )
        .bind(&claim.workspace_id)
        .bind(&claim.person_id)
        .bind(claim.action)
        .bind(&claim.key)
        .fetch_optional(db.pool())
        .await?;
        let Some(existing) = existing else { continue };
        let created_at: i64 = existing.try_get("created_at")?;
        if now - created_at >= WINDOW_MS {
            // Expired: forget it (only if nobody replaced it meanwhile) and claim afresh.
            sqlx::query(
                "delete from idempotency_records where workspace_id = $1 and person_id = $2 and action = $3 and key = $4 and created_at = $5",
            )
            .bind(&claim.workspace_id)
            .bind(&claim.person_id)
            .bind(claim.action)
            .bind(&claim.key)
            .bind(created_at)
            .execute(db.pool())
            .await?;
            continue;
        }
        if existing.try_get::<String, _>("fingerprint")? != fingerprint {
            return Err(ApiError::new(
                ErrorCode::IdempotencyKeyReused,
                format!(
                    "The idempotency key `{}` was used for a different `{}` request in the last 24 hours; use a new key for a new request.",
                    claim.key, claim.action
                ),
            ));
        }
        if existing.try_get::<String, _>("state")? != "done" {
            return Err(ApiError::new(
                ErrorCode::IdempotencyKeyInUse,
                format!("A request with the idempotency key `{}` is still being processed; retry in a moment.", claim.key),
            )
            .with_extra("retry_after", 1)
            .with_header(http::header::RETRY_AFTER, "1"));
        }
        let status: i64 = existing
            .try_get::<Option<i64>, _>("status_code")?
            .unwrap_or(200);
        let body: String = existing
            .try_get::<Option<String>, _>("response_body")?
            .unwrap_or_default();
        let body: Value = serde_json::from_str(&body).map_err(ApiError::internal)?;
        return Ok(Claimed::Replay {
            status: u16::try_from(status).unwrap_or(200),
            body,
        });
    }
    Err(ApiError::internal(
        "idempotency claim kept racing with expiry",
    ))
}

/// Stores the response of a claimed request, for replays.
pub async fn complete(db: &Db, claim: &Claim, status: u16, body: &Value) -> Result<(), ApiError> {
    sqlx::query(
        "update idempotency_records set state = 'done', status_code = $5, response_body = $6 \
         where workspace_id = $1 and person_id = $2 and action = $3 and key = $4",
    )
    .bind(&claim.workspace_id)
    .bind(&claim.person_id)
    .bind(claim.action)
    .bind(&claim.key)
    .bind(i64::from(status))
    .bind(body.to_string())
    .execute(db.pool())
    .await?;
    Ok(())
}

/// Drops a claim whose request failed before it began, so the key can be used again.
pub async fn abandon(db: &Db, claim: &Claim) -> Result<(), ApiError> {
    sqlx::query("delete from idempotency_records where workspace_id = $1 and person_id = $2 and action = $3 and key = $4")
        .bind(&claim.workspace_id)
        .bind(&claim.person_id)
        .bind(claim.action)
        .bind(&claim.key)
        .execute(db.pool())
        .await?;
    Ok(())
}

/// Deletes records past the window; returns how many.
pub async fn purge(db: &Db, clock: &Clock) -> Result<u64, ApiError> {
    let result = sqlx::query("delete from idempotency_records where created_at < $1")
        .bind(clock.now_ms() - WINDOW_MS)
        .execute(db.pool())
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
