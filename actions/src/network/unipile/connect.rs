//! Signing a sender in to Unipile: `connect_sender` makes a hosted link, and Unipile's call to
//! its `notify_url` binds the account to the sender ([`bind_account`]).
//!
//! Unipile's hosted sign-in runs on its own pages: we ask for a link (`POST /hosted/accounts/link`,
//! type `create`, or `reconnect` for an account that lost its session), the person opens it, and
//! when they are done Unipile calls the link's `notify_url` with the new `account_id` and the
//! `name` we gave (the sender's id). That call carries no credential of ours, so the URL holds a
//! token made for this one link and kept only as its SHA-256: it names the sender, works until
//! the link's expiry plus an hour (the person may finish just before it), and once.
//! Links die at Unipile's daily restart anyway, so they are made on demand, short-lived.

use base64::Engine as _;
use outreach_runtime::prelude::{ApiError, Ctx, Timestamp, action, error_codes, rfc3339};
use rand::RngCore as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::{AnyConnection, Row};

use super::client::{Op, classify};
use crate::network::{Network, network_for};
use crate::senders::{self, SenderStatus};

error_codes! {
    pub SENDER_ALREADY_CONNECTED = ("sender_already_connected", 409, "`connect_sender` on a sender that is signed in and working");
}

/// How long a hosted link works.
pub const LINK_LIFETIME_MS: i64 = 60 * 60 * 1000;
/// How long after its expiry a link's notification is still taken.
const NOTIFY_GRACE_MS: i64 = 60 * 60 * 1000;

/// The path Unipile calls when a hosted sign-in ends.
pub const NOTIFY_PATH: &str = "/api/v1/network/unipile/notify";

/// The input of `connect_sender`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ConnectSenderInput {
    /// `snd_...`
    pub id: String,
}

/// Where the sender's owner signs in.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ConnectLink {
    /// The page to open (Unipile's hosted sign-in); null on the sandbox network, which connects
    /// the sender at once.
    pub url: Option<String>,
    /// When the link stops working; null on the sandbox network.
    pub expires_at: Option<Timestamp>,
    /// `create` for a first sign-in, `reconnect` for an account that lost its session; `sandbox`
    /// when the sandbox network connected it at once.
    pub kind: String,
    /// The sender's status now (`connected` on the sandbox; unchanged on Unipile until the sign-in
    /// ends).
    pub status: SenderStatus,
}

/// Connect a sender's network account.
///
/// Answers a sign-in `url` for the owner, valid an hour; the sandbox connects at once.
///
/// The sender becomes `connected` when its owner finishes signing in; on the sandbox `url` is
/// null. The page is Unipile's hosted sign-in, of `kind` `create` for a `pending` sender and
/// `reconnect` for one that lost its session. 409 `sender_already_connected` on Unipile for a
/// sender that works; 503 `network_not_configured` in production without a network.
#[action(scope = "write", idempotent, http = "POST /senders/{id}/connect")]
pub async fn connect_sender(ctx: Ctx, input: ConnectSenderInput) -> Result<ConnectLink, ApiError> {
    let network = network_for(ctx.config(), ctx.db(), ctx.clock())?;
    let now = ctx.now_ms();
    let sender = {
        let mut conn = ctx.db().pool().acquire().await?;
        senders::load(&mut conn, ctx.workspace_id(), &input.id).await?
    };
    let Network::Unipile(unipile) = network else {
        // The sandbox has no sign-in: connecting is making sure it is connected.
        let mut tx = ctx.tx().await?;
        senders::set_sender_status(&mut tx, &sender.id, SenderStatus::Connected, now).await?;
        return Ok(ConnectLink {
            url: None,
            expires_at: None,
            kind: "sandbox".to_owned(),
            status: SenderStatus::Connected,
        });
    };
    if sender.status == SenderStatus::Connected && sender.provider_account_id.is_some() {
        return Err(already_connected(&sender.id));
    }
    let kind = if sender.provider_account_id.is_some() {
        "reconnect"
    } else {
        "create"
    };
    let mut token = [0u8; 32];
    rand::rng().fill_bytes(&mut token);
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token);
    let expires_at = now + LINK_LIFETIME_MS;
    let base = ctx.config().base_url.trim_end_matches('/');
    let mut body = json!({
        "type": kind,
        "providers": ["LINKEDIN"],
        "api_url": unipile.client().dsn(),
        "expiresOn": rfc3339(expires_at),
        "name": sender.id,
        "notify_url": format!("{base}{NOTIFY_PATH}?token={token}"),
        "success_redirect_url": format!("{base}/settings?sender_connected={}", sender.id),
        "failure_redirect_url": format!("{base}/settings?sender_not_connected={}", sender.id),
    });
    if let Some(account_id) = &sender.provider_account_id {
        body["reconnect_account"] = Value::from(account_id.as_str());
    }
    let answer = unipile
        .client()
        .post_json("/hosted/accounts/link", &body)
        .await
        .map_err(|failure| ApiError::from(classify(&failure, Op::Read, now)))?;
    let Some(url) = answer.get("url").and_then(Value::as_str) else {
        return Err(ApiError::from(crate::network::NetworkError::Transient(
            "a hosted link answer without `url`".to_owned(),
        )));
    };
    let mut tx = ctx.tx().await?;
    sqlx::query(
        "insert into unipile_links (token_hash, workspace_id, sender_id, kind, expires_at, created_at) \
         values ($1, $2, $3, $4, $5, $6)",
    )
    .bind(token_hash(&token))
    .bind(ctx.workspace_id())
    .bind(&sender.id)
    .bind(kind)
    .bind(expires_at)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    Ok(ConnectLink {
        url: Some(url.to_owned()),
        expires_at: Some(Timestamp(expires_at)),
        kind: kind.to_owned(),
        status: sender.status,
    })
}

outreach_runtime::prelude::parity!(connect_sender, write,
    ok: {"id": "$status_sender"},
    fails: {"id": "$missing:snd"} => NOT_FOUND
);

fn already_connected(id: &str) -> ApiError {
    ApiError::new(
        SENDER_ALREADY_CONNECTED,
        format!("The sender `{id}` is connected and working; there is nothing to sign in to."),
    )
}

outreach_runtime::prelude::example!(connect_sender,
    request: {"id": "snd_01HZX3K8V4T7M2Q9R6N5B1C0DE"},
    response: {"url": "https://account.unipile.com/hosted/8f0c2b", "expires_at": "2026-11-24T18:22:30.065Z", "kind": "create", "status": "pending"}
);

fn token_hash(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest)
}

/// Why a notification was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No such link, or its token was wrong: 401.
    UnknownLink,
    /// The link expired, or was used: 410.
    Spent,
    /// The body is not what Unipile sends (no `account_id`, a `name` for another sender): 400.
    Invalid(String),
}

/// Binds the account a hosted sign-in made to the link's sender, in `conn`: the sender becomes
/// `connected` with `provider_account_id` set and any halt cleared. Answers the sender's id.
pub async fn bind_account(
    conn: &mut AnyConnection,
    token: &str,
    body: &Value,
    now_ms: i64,
) -> Result<Result<String, Refusal>, ApiError> {
    let link = sqlx::query(
        "select sender_id, expires_at, used_at from unipile_links where token_hash = $1",
    )
    .bind(token_hash(token))
    .fetch_optional(&mut *conn)
    .await?;
    let Some(link) = link else {
        return Ok(Err(Refusal::UnknownLink));
    };
    let sender_id: String = link.try_get("sender_id")?;
    let expires_at: i64 = link.try_get("expires_at")?;
    let used_at: Option<i64> = link.try_get("used_at")?;
    if used_at.is_some() || now_ms > expires_at + NOTIFY_GRACE_MS {
        return Ok(Err(Refusal::Spent));
    }
    let Some(account_id) = body.get("account_id").and_then(Value::as_str) else {
        return Ok(Err(Refusal::Invalid("no `account_id`".to_owned())));
    };
    if let Some(name) = body.get("name").and_then(Value::as_str)
        && name != sender_id
    {
        return Ok(Err(Refusal::Invalid(format!(
            "`name` is `{name}`, not this link's sender"
        ))));
    }
    let status = body.get("status").and_then(Value::as_str).unwrap_or("");
    if !matches!(status, "CREATION_SUCCESS" | "RECONNECTED" | "") {
        return Ok(Err(Refusal::Invalid(format!(
            "`status` `{status}` is not a finished sign-in"
        ))));
    }
    // Spent in this statement, so two notifications at once (two instances) bind once.
    let spent = sqlx::query(
        "update unipile_links set used_at = $2 where token_hash = $1 and used_at is null",
    )
    .bind(token_hash(token))
    .bind(now_ms)
    .execute(&mut *conn)
    .await?;
    if spent.rows_affected() == 0 {
        return Ok(Err(Refusal::Spent));
    }
    let taken: Option<String> = sqlx::query_scalar(
        "select id from senders where provider_account_id = $1 and id <> $2 and deleted_at is null",
    )
    .bind(account_id)
    .bind(&sender_id)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(other) = taken {
        return Ok(Err(Refusal::Invalid(format!(
            "the Unipile account `{account_id}` is already the sender `{other}`'s; one account sends for one sender"
        ))));
    }
    let previous: Option<Option<String>> = sqlx::query_scalar(
        "select provider_account_id from senders where id = $1 and deleted_at is null",
    )
    .bind(&sender_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(previous) = previous else {
        return Ok(Err(Refusal::Spent));
    };
    if previous.as_deref() != Some(account_id) {
        // Another account (a first sign-in, or one after the old account was deleted): what the
        // adapter knew of people and the poller's place were the old account's.
        super::forget_account_state(conn, &sender_id).await?;
    }
    senders::bind_provider_account(conn, &sender_id, super::super::UNIPILE, account_id, now_ms)
        .await?;
    senders::set_sender_status(conn, &sender_id, SenderStatus::Connected, now_ms).await?;
    Ok(Ok(sender_id))
}

/// The webhook sources this server takes, each registered once by
/// `outreach admin unipile register-webhooks`.
pub const WEBHOOK_SOURCES: [&str; 3] = ["users", "messaging", "account_status"];

/// Registers our webhook route with Unipile for every source in [`WEBHOOK_SOURCES`] that has no
/// webhook to `request_url` yet, with the secret header and `Content-Type: application/json`
/// (without it Unipile's body is not JSON). Idempotent: answers, per source, the webhook's id
/// and whether this call made it.
pub async fn register_webhooks(
    settings: &crate::provider::UnipileSettings,
    request_url: &str,
) -> Result<Vec<Value>, String> {
    let client = super::client::Client::new(&settings.dsn, &settings.api_key, settings.timeout)?;
    let existing = client
        .list_all("/webhooks", &[], 20)
        .await
        .map_err(|failure| failure.to_string())?;
    let mut registered = Vec::new();
    for source in WEBHOOK_SOURCES {
        let found = existing.iter().find(|hook| {
            hook.get("request_url").and_then(Value::as_str) == Some(request_url)
                && hook.get("source").and_then(Value::as_str) == Some(source)
        });
        if let Some(hook) = found {
            registered
                .push(json!({"source": source, "webhook_id": hook.get("id"), "created": false}));
            continue;
        }
        let body = json!({
            "request_url": request_url,
            "source": source,
            "name": format!("outreach {source}"),
            "format": "json",
            "headers": [
                {"key": "Content-Type", "value": "application/json"},
                {"key": super::WEBHOOK_SECRET_HEADER, "value": settings.webhook_secret},
            ],
        });
        let answer = client
            .post_json("/webhooks", &body)
            .await
            .map_err(|failure| failure.to_string())?;
        registered.push(
            json!({"source": source, "webhook_id": answer.get("webhook_id"), "created": true}),
        );
    }
    Ok(registered)
}
