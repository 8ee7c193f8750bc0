//! The sandbox's test helpers, like Stripe's: make a person accept or reply now, disconnect an
//! account, and read what the network received (the test clock's helpers are `sandbox_clock`).
//!
//! They are `#[action(test_helper)]`s: outside production they are ordinary actions with both
//! faces; in production the registry leaves them out, so they are neither routed, listed in
//! OpenAPI nor in `tools/list`, and cannot be called. `outreach admin sandbox ...` runs the same
//! functions from a script. An event a helper causes (an acceptance, a reply) enters through
//! [`ingest`], exactly as one the sandbox produces by itself. They sit at the top of the
//! layers: they drive the network and delivery both.
//!
//! Senders are named by id alone: the sandbox is the network's side and keys accounts by the id
//! we give it.

use outreach_runtime::prelude::{
    ApiError, Clock, Ctx, Db, ErrorCode, Page, PageParams, Timestamp, action, paged,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::common::IdKind;
use crate::delivery::inbound::ingest;
use crate::network::sandbox::{insert_message, relation};
use crate::network::{
    AccountStatus, ChatDirection, ConnectionState, InboundEvent, MAX_MESSAGE_CHARS, OutboundKind,
};

outreach_runtime::prelude::resource_tag!(
    "sandbox",
    toolset = "sandbox",
    "Test helpers of the simulated network, outside production only: the clock, acceptances, replies, a sender's status and latency, and the network's log."
);

/// The id of a sender of the workspace: 400 for an id of the wrong shape, 404 for one the
/// workspace has no (live) sender with. The sandbox plays the network of the workspace's own
/// accounts only.
async fn sender_of(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sender_id: &str,
) -> Result<String, ApiError> {
    Ok(crate::senders::load(conn, workspace_id, sender_id.trim())
        .await?
        .id)
}

/// The normalised profile URL of a prospect of the workspace: 404 if there is no such prospect,
/// 409 if it has no profile URL (the network knows people by it).
async fn profile_url_of(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    prospect_id: &str,
) -> Result<String, ApiError> {
    IdKind::Prospect.check(prospect_id)?;
    let row = sqlx::query("select profile_url from prospects where workspace_id = $1 and id = $2")
        .bind(workspace_id)
        .bind(prospect_id)
        .fetch_optional(conn)
        .await?
        .ok_or_else(|| IdKind::Prospect.not_found(prospect_id))?;
    row.try_get::<Option<String>, _>("profile_url")?.ok_or_else(|| {
        ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Prospect `{prospect_id}` has no profile URL, and the network knows people by their profile URL. \
                 Set its `profile_url` first."
            ),
        )
    })
}

/// A sender-person relation on the sandbox network.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SandboxConnection {
    pub prospect_id: String,
    pub sender_id: String,
    pub profile_url: String,
    pub connection_state: ConnectionState,
    pub connected_at: Option<Timestamp>,
}

/// The input of `sandbox_accept_invitation`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct AcceptInvitationInput {
    /// `prs_...`
    pub prospect_id: String,
    /// `snd_...`
    pub sender_id: String,
}

/// Locks the person (the one lock rule: the poll that accepts invitations takes people first
/// too), then finds the sender's invitation to them, which must be `pending`: else a 409
/// `invalid_state` saying it cannot be `done` (accepted, withdrawn). Answers the sender's id and
/// the person's profile URL.
async fn pending_invitation(
    conn: &mut sqlx::AnyConnection,
    now_ms: i64,
    workspace_id: &str,
    prospect_id: &str,
    sender_id: &str,
    done: &str,
) -> Result<(String, String), ApiError> {
    crate::person_lock::lock(conn, workspace_id, [prospect_id]).await?;
    let sender_id = sender_of(conn, workspace_id, sender_id).await?;
    let profile_url = profile_url_of(conn, workspace_id, prospect_id).await?;
    let found = relation(conn, workspace_id, &sender_id, &profile_url).await?;
    let state = found
        .as_ref()
        .map_or(ConnectionState::NotConnected, |found| {
            found.state_at(now_ms)
        });
    if state != ConnectionState::Pending {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "The invitation from sender `{sender_id}` to prospect `{prospect_id}` cannot be {done}: the connection is `{}`. \
                 Only a `pending` invitation can be {done}{}.",
                state.as_str(),
                if done == "accepted" { "; send a connection request first" } else { "" }
            ),
        )
        .with_extra("connection_state", state.as_str()));
    }
    Ok((sender_id, profile_url))
}

/// Makes the person accept the sender's pending invitation now, and delivers the acceptance
/// through the ingestion function in the same transaction (`conn`).
pub async fn accept_invitation(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    input: &AcceptInvitationInput,
) -> Result<SandboxConnection, ApiError> {
    let now_ms = clock.now_ms();
    let (sender_id, profile_url) = pending_invitation(
        conn,
        now_ms,
        workspace_id,
        &input.prospect_id,
        &input.sender_id,
        "accepted",
    )
    .await?;
    crate::network::sandbox::connect_now(conn, workspace_id, &sender_id, &profile_url, now_ms)
        .await?;
    let event = InboundEvent::InvitationAccepted {
        sender_id: sender_id.clone(),
        profile_url: profile_url.clone(),
        at_ms: now_ms,
    };
    ingest(conn, clock, workspace_id, &event).await?;
    Ok(SandboxConnection {
        prospect_id: input.prospect_id.clone(),
        sender_id,
        profile_url,
        connection_state: ConnectionState::Connected,
        connected_at: Some(Timestamp(now_ms)),
    })
}

/// Sandbox: accept an invitation now.
///
/// It arrives like a real acceptance. Without a pending invitation: a 409 `invalid_state`.
///
/// Test helper (outside production only). The prospect accepts the sender's pending connection
/// request at once, as if they had clicked "Accept". The refusal names the connection state.
#[action(
    scope = "write",
    idempotent,
    test_helper,
    http = "POST /sandbox/invitations/accept"
)]
pub async fn sandbox_accept_invitation(
    ctx: Ctx,
    input: AcceptInvitationInput,
) -> Result<SandboxConnection, ApiError> {
    let mut tx = ctx.tx().await?;
    accept_invitation(&mut tx, ctx.clock(), ctx.workspace_id(), &input).await
}

outreach_runtime::prelude::example!(sandbox_accept_invitation,
    request: {"prospect_id": "prs_FU1sf4YwPhIYhWi6JHan", "sender_id": "snd_4kP9c2LwQx7VnB3mZt1R"},
    response: {
        "connected_at": "2026-11-23T20:02:11.480Z",
        "connection_state": "connected",
        "profile_url": "linkedin.com/in/ada-lovelace",
        "prospect_id": "prs_FU1sf4YwPhIYhWi6JHan",
        "sender_id": "snd_4kP9c2LwQx7VnB3mZt1R"
    }
);

outreach_runtime::prelude::parity!(sandbox_accept_invitation, write,
    ok: {"prospect_id": "$contact", "sender_id": "$pending_sender"},
    fails: {
        "prospect_id": "$missing:prs",
        "sender_id": "$pending_sender"
    } => NOT_FOUND
);

/// The input of `sandbox_withdraw_invitation`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WithdrawInvitationInput {
    /// `prs_...`
    pub prospect_id: String,
    /// `snd_...`
    pub sender_id: String,
}

/// Withdraws the sender's pending invitation now, as its owner would in the network's own app,
/// and delivers the withdrawal through the ingestion function in the same transaction (`conn`).
pub async fn withdraw_invitation(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    input: &WithdrawInvitationInput,
) -> Result<SandboxConnection, ApiError> {
    let now_ms = clock.now_ms();
    let (sender_id, profile_url) = pending_invitation(
        conn,
        now_ms,
        workspace_id,
        &input.prospect_id,
        &input.sender_id,
        "withdrawn",
    )
    .await?;
    crate::network::sandbox::withdraw_now(conn, workspace_id, &sender_id, &profile_url, now_ms)
        .await?;
    let event = InboundEvent::InvitationWithdrawn {
        sender_id: sender_id.clone(),
        profile_url: profile_url.clone(),
        at_ms: now_ms,
    };
    ingest(conn, clock, workspace_id, &event).await?;
    Ok(SandboxConnection {
        prospect_id: input.prospect_id.clone(),
        sender_id,
        profile_url,
        connection_state: ConnectionState::NotConnected,
        connected_at: None,
    })
}

/// Sandbox: withdraw an invitation now, as its sender's owner would.
///
/// Waiting enrollments finish as `invitation_withdrawn`; the person cannot be invited again for
/// three weeks. Without a pending invitation: a 409 `invalid_state`.
///
/// Test helper (outside production only). The sender's pending connection request to the
/// prospect is withdrawn at once, as if the account's owner had withdrawn it in the network's own
/// app: the withdrawal arrives like a real network's report (`invitation.withdrawn`). The refusal
/// names the connection state.
#[action(
    scope = "write",
    idempotent,
    test_helper,
    http = "POST /sandbox/invitations/withdraw"
)]
pub async fn sandbox_withdraw_invitation(
    ctx: Ctx,
    input: WithdrawInvitationInput,
) -> Result<SandboxConnection, ApiError> {
    let mut tx = ctx.tx().await?;
    withdraw_invitation(&mut tx, ctx.clock(), ctx.workspace_id(), &input).await
}

outreach_runtime::prelude::example!(sandbox_withdraw_invitation,
    request: {"prospect_id": "prs_FU1sf4YwPhIYhWi6JHan", "sender_id": "snd_4kP9c2LwQx7VnB3mZt1R"},
    response: {
        "connected_at": null,
        "connection_state": "not_connected",
        "profile_url": "linkedin.com/in/ada-lovelace",
        "prospect_id": "prs_FU1sf4YwPhIYhWi6JHan",
        "sender_id": "snd_4kP9c2LwQx7VnB3mZt1R"
    }
);

outreach_runtime::prelude::parity!(sandbox_withdraw_invitation, write,
    ok: {"prospect_id": "$contact", "sender_id": "$withdrawing_sender"},
    fails: {
        "prospect_id": "$contact",
        "sender_id": "$connected_sender"
    } => INVALID_STATE
);

/// The input of `sandbox_reply`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SandboxReplyInput {
    /// `prs_...`
    pub prospect_id: String,
    /// `snd_...`
    pub sender_id: String,
    #[schemars(length(min = 1, max = 8000), regex(pattern = crate::common::NOT_BLANK))]
    pub text: String,
}

/// A message on the sandbox network.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SandboxMessage {
    /// The network's message id.
    pub id: String,
    pub prospect_id: String,
    pub sender_id: String,
    pub profile_url: String,
    pub direction: ChatDirection,
    pub text: String,
    pub at: Timestamp,
}

/// Makes the person send the sender a message now (they must be connected), delivered through
/// the ingestion function in the same transaction (`conn`).
pub async fn reply(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    input: &SandboxReplyInput,
) -> Result<SandboxMessage, ApiError> {
    let now_ms = clock.now_ms();
    let sender_id = &sender_of(conn, workspace_id, &input.sender_id).await?;
    let text = input.text.trim();
    if text.is_empty() || text.chars().count() > MAX_MESSAGE_CHARS {
        return Err(ApiError::invalid_request(format!(
            "`text` must be 1 to {MAX_MESSAGE_CHARS} characters."
        )));
    }
    let profile_url = profile_url_of(conn, workspace_id, &input.prospect_id).await?;
    let state = relation(conn, workspace_id, sender_id, &profile_url)
        .await?
        .map_or(ConnectionState::NotConnected, |found| {
            found.state_at(now_ms)
        });
    if state != ConnectionState::Connected {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Prospect `{}` cannot message sender `{sender_id}`: the connection is `{}`. Only a `connected` \
                 person can reply; accept the invitation first (sandbox_accept_invitation).",
                input.prospect_id,
                state.as_str()
            ),
        )
        .with_extra("connection_state", state.as_str()));
    }
    let message = insert_message(
        conn,
        workspace_id,
        sender_id,
        &profile_url,
        ChatDirection::Inbound,
        text,
        now_ms,
        None,
    )
    .await?;
    let event = InboundEvent::MessageReceived {
        sender_id: sender_id.to_owned(),
        profile_url: profile_url.clone(),
        text: text.to_owned(),
        at_ms: now_ms,
        provider_message_id: message.provider_message_id.clone(),
    };
    ingest(conn, clock, workspace_id, &event).await?;
    Ok(SandboxMessage {
        id: message.provider_message_id,
        prospect_id: input.prospect_id.clone(),
        sender_id: sender_id.to_owned(),
        profile_url,
        direction: ChatDirection::Inbound,
        text: text.to_owned(),
        at: Timestamp(now_ms),
    })
}

/// Sandbox: make a prospect reply now.
///
/// It arrives like a real reply. They must be connected, else a 409 `invalid_state`.
///
/// Test helper (outside production only). The refusal names the connection state.
#[action(
    scope = "write",
    idempotent,
    test_helper,
    http = "POST /sandbox/replies"
)]
pub async fn sandbox_reply(ctx: Ctx, input: SandboxReplyInput) -> Result<SandboxMessage, ApiError> {
    let mut tx = ctx.tx().await?;
    reply(&mut tx, ctx.clock(), ctx.workspace_id(), &input).await
}

outreach_runtime::prelude::example!(sandbox_reply,
    request: {
        "prospect_id": "prs_FU1sf4YwPhIYhWi6JHan",
        "sender_id": "snd_4kP9c2LwQx7VnB3mZt1R",
        "text": "Interested, tell me more."
    },
    response: {
        "at": "2026-11-23T21:14:52.903Z",
        "direction": "inbound",
        "id": "sbm_Vb6nQ1xR8zLc3MwT0pYk",
        "profile_url": "linkedin.com/in/ada-lovelace",
        "prospect_id": "prs_FU1sf4YwPhIYhWi6JHan",
        "sender_id": "snd_4kP9c2LwQx7VnB3mZt1R",
        "text": "Interested, tell me more."
    }
);

outreach_runtime::prelude::parity!(sandbox_reply, write,
    ok: {
        "prospect_id": "$contact",
        "sender_id": "$connected_sender",
        "text": "Interested, tell me more."
    },
    fails: {
        "prospect_id": "$contact",
        "sender_id": "$connected_sender",
        "text": ""
    } => INVALID_REQUEST
);

/// The input of `sandbox_set_sender_status`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetSenderStatusInput {
    /// `snd_...`
    pub sender_id: String,
    /// Its new status on the network.
    pub status: AccountStatus,
}

/// A sender's account on the sandbox network.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SandboxAccount {
    pub sender_id: String,
    pub status: AccountStatus,
    /// How long each of its calls takes to reach the simulated network, in milliseconds
    /// (`sandbox_set_latency`; 0 by default).
    pub latency_ms: i64,
    /// Its InMail credits (`sandbox_set_inmail_credits`); null, the default, is an account that
    /// cannot send InMail at all (`not_allowed_inmail`).
    pub inmail_credits: Option<i64>,
    pub updated_at: Timestamp,
}

impl SandboxAccount {
    fn from_row(sender_id: &str, row: &AnyRow) -> Result<Self, ApiError> {
        Ok(Self {
            sender_id: sender_id.to_owned(),
            status: AccountStatus::from_db(&row.try_get::<String, _>("status")?)?,
            latency_ms: row.try_get("latency_ms")?,
            inmail_credits: row.try_get("inmail_credits")?,
            updated_at: Timestamp(row.try_get("updated_at")?),
        })
    }
}

/// Sets the status of a sender's account on the sandbox network (`conn`: the caller's
/// transaction).
pub async fn set_sender_status(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    input: &SetSenderStatusInput,
    now_ms: i64,
) -> Result<SandboxAccount, ApiError> {
    let sender_id = &sender_of(conn, workspace_id, &input.sender_id).await?;
    let account = crate::network::sandbox::set_account_status(
        conn,
        workspace_id,
        sender_id,
        input.status,
        now_ms,
    )
    .await?;
    // The account's status as the network reports it is the sender's status on our side (a real
    // provider's account event does the same).
    let status = crate::senders::SenderStatus::from_db(input.status.as_str())?;
    crate::senders::set_sender_status(conn, sender_id, status, now_ms).await?;
    SandboxAccount::from_row(sender_id, &account)
}

/// Sandbox: set a sender account's status.
///
/// `disconnected` or `needs_reauth` fails every call of the account with `account_disconnected`,
/// `restricted` with `account_restricted`.
///
/// Test helper (outside production only). `connected` restores it.
#[action(
    scope = "write",
    idempotent,
    test_helper,
    http = "POST /sandbox/senders/{sender_id}/status"
)]
pub async fn sandbox_set_sender_status(
    ctx: Ctx,
    input: SetSenderStatusInput,
) -> Result<SandboxAccount, ApiError> {
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    set_sender_status(&mut tx, ctx.workspace_id(), &input, now).await
}

outreach_runtime::prelude::example!(sandbox_set_sender_status,
    request: {"sender_id": "snd_4kP9c2LwQx7VnB3mZt1R", "status": "disconnected"},
    response: {
        "sender_id": "snd_4kP9c2LwQx7VnB3mZt1R",
        "status": "disconnected",
        "latency_ms": 0,
        "inmail_credits": null,
        "updated_at": "2026-11-23T18:22:30.065Z"
    }
);

outreach_runtime::prelude::parity!(sandbox_set_sender_status, write,
    ok: {"sender_id": "$status_sender", "status": "restricted"},
    fails: {
        "sender_id": "snd_x",
        "status": "banned"
    } => INVALID_REQUEST
);

/// The longest latency `sandbox_set_latency` accepts, in milliseconds.
pub const MAX_LATENCY_MS: i64 = 60_000;

/// The input of `sandbox_set_latency`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetLatencyInput {
    /// `snd_...`
    pub sender_id: String,
    #[schemars(range(min = 0, max = 60_000))]
    pub latency_ms: i64,
}

/// Sandbox: make a sender account's calls slow.
///
/// Each call of the account waits `latency_ms` before it reaches the network; 0 makes it fast.
///
/// Test helper (outside production only). Every call of the account (view, invitation,
/// withdrawal, message) waits, as with a slow provider: to see what a timeout, a retry, or a
/// process that dies mid-call does to your outreach.
#[action(
    scope = "write",
    idempotent,
    test_helper,
    http = "POST /sandbox/senders/{sender_id}/latency"
)]
pub async fn sandbox_set_latency(
    ctx: Ctx,
    input: SetLatencyInput,
) -> Result<SandboxAccount, ApiError> {
    if !(0..=MAX_LATENCY_MS).contains(&input.latency_ms) {
        return Err(ApiError::invalid_request(format!(
            "`latency_ms` must be 0 to {MAX_LATENCY_MS}; got {}.",
            input.latency_ms
        )));
    }
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let sender_id = &sender_of(&mut tx, ctx.workspace_id(), &input.sender_id).await?;
    let account = crate::network::sandbox::set_account_latency(
        &mut tx,
        ctx.workspace_id(),
        sender_id,
        input.latency_ms,
        now,
    )
    .await?;
    SandboxAccount::from_row(sender_id, &account)
}

outreach_runtime::prelude::example!(sandbox_set_latency,
    request: {"sender_id": "snd_4kP9c2LwQx7VnB3mZt1R", "latency_ms": 2000},
    response: {
        "sender_id": "snd_4kP9c2LwQx7VnB3mZt1R",
        "status": "connected",
        "latency_ms": 2000,
        "inmail_credits": null,
        "updated_at": "2026-11-23T18:22:30.064Z"
    }
);

outreach_runtime::prelude::parity!(sandbox_set_latency, write,
    ok: {"latency_ms": 0, "sender_id": "$status_sender"},
    fails: {
        "latency_ms": 60001,
        "sender_id": "snd_x"
    } => INVALID_REQUEST
);

/// The input of `sandbox_set_inmail_credits`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetInmailCreditsInput {
    /// `snd_...`
    pub sender_id: String,
    /// InMails it can still send; null: no InMail at all.
    #[schemars(range(min = 0, max = 10_000))]
    pub credits: Option<i64>,
}

/// Sandbox: set a sender account's InMail credits.
///
/// Each InMail spends one; at 0 the network refuses with `insufficient_credits`, and with null
/// (the default) with `not_allowed_inmail`.
///
/// Test helper (outside production only). An `inmail` step refused so finishes its enrollment
/// with that reason.
#[action(
    scope = "write",
    idempotent,
    test_helper,
    http = "POST /sandbox/senders/{sender_id}/inmail-credits"
)]
pub async fn sandbox_set_inmail_credits(
    ctx: Ctx,
    input: SetInmailCreditsInput,
) -> Result<SandboxAccount, ApiError> {
    if let Some(credits) = input.credits
        && !(0..=10_000).contains(&credits)
    {
        return Err(ApiError::invalid_request(format!(
            "`credits` must be 0 to 10,000 (or null); got {credits}."
        )));
    }
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let sender_id = &sender_of(&mut tx, ctx.workspace_id(), &input.sender_id).await?;
    let account = crate::network::sandbox::set_inmail_credits(
        &mut tx,
        ctx.workspace_id(),
        sender_id,
        input.credits,
        now,
    )
    .await?;
    SandboxAccount::from_row(sender_id, &account)
}

outreach_runtime::prelude::example!(sandbox_set_inmail_credits,
    request: {"sender_id": "snd_4kP9c2LwQx7VnB3mZt1R", "credits": 25},
    response: {
        "sender_id": "snd_4kP9c2LwQx7VnB3mZt1R",
        "status": "connected",
        "latency_ms": 0,
        "inmail_credits": 25,
        "updated_at": "2026-11-23T18:22:30.064Z"
    }
);

outreach_runtime::prelude::parity!(sandbox_set_inmail_credits, write,
    ok: {"credits": 5, "sender_id": "$status_sender"},
    fails: {
        "credits": -1,
        "sender_id": "snd_x"
    } => INVALID_REQUEST
);

/// One call the sandbox network received.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SandboxLogEntry {
    pub id: String,
    pub at: Timestamp,
    pub sender_id: String,
    pub prospect_id: Option<String>,
    pub profile_url: String,
    pub kind: OutboundKind,
    /// The note or the message; null for views and withdrawals.
    pub text: Option<String>,
    /// `ok`, or the error code the network refused with (`not_connected`, `cannot_resend_yet`, ...).
    pub outcome: String,
    /// The caller's intent token.
    pub intent: Option<String>,
}

impl SandboxLogEntry {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        Ok(Self {
            id: row.try_get("id")?,
            at: Timestamp(row.try_get("at")?),
            sender_id: row.try_get("sender_id")?,
            prospect_id: row.try_get("prospect_id")?,
            profile_url: row.try_get("profile_url")?,
            kind: OutboundKind::from_db(&row.try_get::<String, _>("kind")?)?,
            text: row.try_get("text")?,
            outcome: row.try_get("outcome")?,
            intent: row.try_get("intent_token")?,
        })
    }
}

/// The input of `list_sandbox_log`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ListSandboxLogInput {
    /// `snd_...`
    pub sender_id: Option<String>,
    /// `prs_...`
    pub prospect_id: Option<String>,
    /// Only calls of this kind.
    pub kind: Option<OutboundKind>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// One page of the sandbox's log for the workspace, oldest first.
pub async fn log_page(
    db: &Db,
    workspace_id: &str,
    input: &ListSandboxLogInput,
) -> Result<Page<SandboxLogEntry>, ApiError> {
    let mut filter = String::from("workspace_id = $1");
    if input.sender_id.is_some() {
        filter.push_str(" and sender_id = $2");
    }
    if input.prospect_id.is_some() {
        filter.push_str(" and prospect_id = $3");
    }
    if input.kind.is_some() {
        filter.push_str(" and kind = $4");
    }
    let kind = input.kind.map(OutboundKind::as_str);
    paged(
        db.pool(),
        input.page,
        format!("select count(*) from sandbox_log where {filter}"),
        format!(
            "select id, at, sender_id, prospect_id, profile_url, kind, text, outcome, intent_token from sandbox_log \
             where {filter} order by at, id limit $5 offset $6"
        ),
        |query| {
            query
                .bind(workspace_id)
                .bind(&input.sender_id)
                .bind(&input.prospect_id)
                .bind(kind)
        },
        SandboxLogEntry::from_row,
    )
    .await
}

/// Sandbox: list what the network received.
///
/// Every call from this workspace's senders, oldest first, with its outcome.
///
/// The outcome is `ok` or the refusal's code.
///
/// Test helper (outside production only). Each call says when, which sender, which prospect and
/// profile, the kind (`profile_view`, `invitation`, `withdrawal`, `message`) and the text.
#[action(scope = "read", test_helper, http = "GET /sandbox/log")]
pub async fn list_sandbox_log(
    ctx: Ctx,
    input: ListSandboxLogInput,
) -> Result<Page<SandboxLogEntry>, ApiError> {
    log_page(ctx.db(), ctx.workspace_id(), &input).await
}

outreach_runtime::prelude::example!(list_sandbox_log,
    request: {"kind": "invitation", "limit": 25, "sender_id": "snd_4kP9c2LwQx7VnB3mZt1R"},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "at": "2026-11-23T18:22:30.065Z",
                "id": "sbx_Jm2q8VbX0cLr5TnW9sYe",
                "intent": "int_Q0c3Zr8mWn5LxV2bTy7P",
                "kind": "invitation",
                "outcome": "ok",
                "profile_url": "linkedin.com/in/ada-lovelace",
                "prospect_id": "prs_FU1sf4YwPhIYhWi6JHan",
                "sender_id": "snd_4kP9c2LwQx7VnB3mZt1R",
                "text": "Hello Ada, I enjoyed your note on the engine; glad to connect."
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_sandbox_log, read,
    ok: {"kind": "invitation", "limit": 5, "sender_id": "$pending_sender"},
    fails: {"kind": "poke"} => INVALID_REQUEST
);
