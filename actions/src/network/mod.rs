//! The professional network, behind one trait: what outreach asks of it, and the errors it gives.
//!
//! [`NetworkProvider`] is what an implementation offers: view a profile, invite (with an optional
//! note), withdraw an invitation, read a person's connection state, send a message (opening the
//! chat if there is none), list messages since a point, read the account's status, answer "did
//! this outbound action happen?" for reconciliation, and poll for what arrived. Callers hold a
//! [`Network`], an enum over the implementations, made by [`network_for`] from the configuration.
//! An enum rather than `dyn`: async trait methods are not object-safe without boxing every
//! future, the set of providers is ours and small (the sandbox, and [`unipile`], one more variant
//! holding an HTTP client), and a `match` costs nothing.
//!
//! Every implementation speaks [`NetworkError`], and every error maps to one API code, so a
//! refusal from the network reaches a caller with the same code whichever provider is behind it.
//!
//! Inbound events (an invitation accepted, a message received) are [`InboundEvent`]s that a
//! provider hands over ([`NetworkProvider::poll`]); `delivery::inbound::ingest` records each
//! once (deduplicated by the provider's event id) and applies it, whichever way it came: the
//! sandbox's polling, its test helpers, or later a real provider's webhook or poll.

pub mod sandbox;
pub mod unipile;

use std::future::Future;

use outreach_runtime::prelude::{
    ApiError, Clock, Config, Db, ErrorCode, Timestamp, error_codes, rfc3339, text_enum,
};
use schemars::JsonSchema;
use serde::Serialize;

pub use crate::provider::{
    DEFAULT_SANDBOX_SEED, NETWORK_NOT_CONFIGURED, NetworkSettings, Provider, SANDBOX, UNIPILE,
    UnipileSettings, check_network_setting,
};
pub use sandbox::Sandbox;
pub use unipile::Unipile;

// The codes the network's refusals reach callers with: declared here, beside the errors that
// answer them, and registered in the API's one table of codes (docs/errors.md, OpenAPI).
error_codes! {
    pub NOT_CONNECTED = ("not_connected", 409, "the network: a message to someone who is not a first-degree connection");
    pub ALREADY_INVITED = ("already_invited", 409, "the network: an invitation to this person is already pending");
    pub ALREADY_CONNECTED = ("already_connected", 409, "the network: the person is already a connection");
    pub NOT_INVITED = ("not_invited", 409, "the network: no pending invitation to withdraw");
    pub CANNOT_RESEND_YET = ("cannot_resend_yet", 409, "the network: a withdrawn person cannot be invited again before `retry_at` (about 3 weeks)");
    pub NETWORK_LIMIT_EXCEEDED = ("network_limit_exceeded", 429, "the network refused: the account's own limit is reached (with `retry_at` when known)");
    pub RECIPIENT_UNREACHABLE = ("recipient_unreachable", 422, "the network: the recipient cannot be reached (blocked, deleted or restricted profile)");
    pub TEXT_TOO_LONG = ("text_too_long", 422, "the network: the note or message is over its limit");
    pub ACCOUNT_DISCONNECTED = ("account_disconnected", 409, "the network: the sender's account is disconnected or needs reauthentication");
    pub ACCOUNT_RESTRICTED = ("account_restricted", 409, "the network: the sender's account is restricted by the network");
    pub NETWORK_UNAVAILABLE = ("network_unavailable", 503, "the network failed for a moment; retry later");
    pub NETWORK_REJECTED = ("network_rejected", 422, "the network rejected the request as invalid (its words are in the message)");
    pub NOT_ALLOWED_INMAIL = ("not_allowed_inmail", 422, "the network: the account cannot send InMail (no premium plan), or the person does not take InMail");
    pub INSUFFICIENT_INMAIL_CREDITS = ("insufficient_inmail_credits", 422, "the network: the account has no InMail credits left");
}

/// The longest invitation note the network takes (200 on free accounts; we hold every account to
/// the paid limit and let the provider refuse the rest).
pub const MAX_NOTE_CHARS: usize = 300;
/// The longest message the network takes.
pub const MAX_MESSAGE_CHARS: usize = 8_000;
/// The longest InMail body and subject the network takes.
pub const MAX_INMAIL_CHARS: usize = 1_900;
pub const MAX_SUBJECT_CHARS: usize = 200;

/// A sender's account on the network: the workspace it belongs to and the sender's id.
#[derive(Debug, Clone, Copy)]
pub struct Account<'a> {
    pub workspace_id: &'a str,
    pub sender_id: &'a str,
}

/// One outbound action: who sends, to whom, and the caller's intent token. The token is what
/// reconciliation asks about later ([`NetworkProvider::find_outbound`]); a real provider passes
/// it as its idempotency key where it has one.
#[derive(Debug, Clone, Copy)]
pub struct Outbound<'a> {
    pub account: Account<'a>,
    /// The normalised profile URL (`linkedin.com/in/jane`).
    pub profile_url: &'a str,
    /// Our prospect, when the person is one (the sandbox logs it; providers ignore it).
    pub prospect_id: Option<&'a str>,
    /// The intent row's id (or any idempotency token of the caller's).
    pub intent: &'a str,
}

text_enum! {
    /// A person's relation to a sender on the network.
    pub enum ConnectionState {
        /// Not connected, no invitation pending.
        NotConnected => "not_connected",
        /// An invitation was sent and is neither accepted nor withdrawn.
        Pending => "pending",
        /// A first-degree connection: messages may be sent.
        Connected => "connected",
    }
}

text_enum! {
    /// The state of a sender's account on the network.
    pub enum AccountStatus {
        /// Working.
        Connected => "connected",
        /// The provider lost the session; a person must sign in again.
        NeedsReauth => "needs_reauth",
        /// The network restricted the account; nothing can be sent.
        Restricted => "restricted",
        /// Disconnected from the provider.
        Disconnected => "disconnected",
    }
}

text_enum! {
    /// What kind of outbound action the network received.
    pub enum OutboundKind {
        /// A profile was viewed.
        ProfileView => "profile_view",
        /// A connection request was sent.
        Invitation => "invitation",
        /// A pending connection request was withdrawn.
        Withdrawal => "withdrawal",
        /// A message was sent.
        Message => "message",
        /// An InMail was sent.
        Inmail => "inmail",
    }
}

text_enum! {
    /// Which way a message went.
    pub enum ChatDirection {
        /// From the sender to the person.
        Outbound => "outbound",
        /// From the person to the sender.
        Inbound => "inbound",
    }
}

/// What the network answered to an outbound action that it performed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The provider's id of what was done (a message id for a message).
    pub provider_id: String,
    /// When the network performed it.
    pub at_ms: i64,
}

/// What the network showed of a profile it was asked to view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Viewed {
    /// The person's connection state with the account.
    pub state: ConnectionState,
    /// When the network counted the view.
    pub at_ms: i64,
}

/// A message of a chat, either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    pub provider_message_id: String,
    pub sender_id: String,
    pub profile_url: String,
    pub direction: ChatDirection,
    pub text: String,
    pub at_ms: i64,
}

/// The network's record of an outbound action, found by its intent token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundRecord {
    pub kind: OutboundKind,
    /// `ok`, or the error code the network refused it with.
    pub outcome: String,
    pub provider_id: Option<String>,
    pub at_ms: i64,
}

impl OutboundRecord {
    /// Whether the action reached the person (a refusal did not).
    pub fn happened(&self) -> bool {
        self.outcome == OUTCOME_OK
    }
}

/// The outcome recorded for an action the network performed.
pub const OUTCOME_OK: &str = "ok";

/// Every way the network refuses; one enum for every implementation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkError {
    /// A message to someone who is not a first-degree connection.
    NotConnected,
    /// An invitation to this person is already pending.
    AlreadyInvited,
    /// The person is already a connection.
    AlreadyConnected,
    /// A withdrawal with no pending invitation.
    NotInvited,
    /// A withdrawn person cannot be invited again before `retry_at_ms`.
    CannotResendYet { retry_at_ms: i64 },
    /// The account's own limit on the network is reached; it may lift at `retry_at_ms`.
    LimitExceeded { retry_at_ms: Option<i64> },
    /// The recipient cannot be reached (blocked, deleted, restricted).
    Unreachable,
    /// The note or message is longer than `limit` characters.
    TooLong { limit: usize },
    /// The account is disconnected.
    AccountDisconnected,
    /// The provider lost the account's session: its owner must sign in again.
    NeedsReauth,
    /// The network restricted the account.
    AccountRestricted,
    /// The account cannot send InMail (no premium plan), or the person does not take InMail.
    NotAllowedInmail,
    /// The account has no InMail credits left.
    InsufficientCredits,
    /// The network refused the request as invalid, with its words; sending it again would fail
    /// the same way.
    Rejected(String),
    /// A failure that may pass: a timeout, a 5xx, a dropped connection (the cause is logged).
    Transient(String),
}

impl NetworkError {
    /// The API code this error reaches callers with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::NotConnected => NOT_CONNECTED,
            Self::AlreadyInvited => ALREADY_INVITED,
            Self::AlreadyConnected => ALREADY_CONNECTED,
            Self::NotInvited => NOT_INVITED,
            Self::CannotResendYet { .. } => CANNOT_RESEND_YET,
            Self::LimitExceeded { .. } => NETWORK_LIMIT_EXCEEDED,
            Self::Unreachable => RECIPIENT_UNREACHABLE,
            Self::TooLong { .. } => TEXT_TOO_LONG,
            Self::AccountDisconnected | Self::NeedsReauth => ACCOUNT_DISCONNECTED,
            Self::Rejected(_) => NETWORK_REJECTED,
            Self::NotAllowedInmail => NOT_ALLOWED_INMAIL,
            Self::InsufficientCredits => INSUFFICIENT_INMAIL_CREDITS,
            Self::AccountRestricted => ACCOUNT_RESTRICTED,
            Self::Transient(_) => NETWORK_UNAVAILABLE,
        }
    }

    /// When the refusal lifts, if the network said.
    pub fn retry_at_ms(&self) -> Option<i64> {
        match self {
            Self::CannotResendYet { retry_at_ms } => Some(*retry_at_ms),
            Self::LimitExceeded { retry_at_ms } => *retry_at_ms,
            _ => None,
        }
    }
}

impl From<sqlx::Error> for NetworkError {
    fn from(error: sqlx::Error) -> Self {
        Self::Transient(format!("database: {error}"))
    }
}

impl From<ApiError> for NetworkError {
    fn from(error: ApiError) -> Self {
        Self::Transient(error.internal.unwrap_or(error.message))
    }
}

impl From<NetworkError> for ApiError {
    fn from(error: NetworkError) -> Self {
        let code = error.code();
        let message = match &error {
            NetworkError::NotConnected => {
                "The network refused: the person is not a first-degree connection of this sender, and messages go to connections only. Send a connection request first.".to_owned()
            }
            NetworkError::AlreadyInvited => {
                "The network refused: an invitation from this sender to the person is already pending.".to_owned()
            }
            NetworkError::AlreadyConnected => {
                "The network refused: the person is already a connection of this sender.".to_owned()
            }
            NetworkError::NotInvited => {
                "The network refused: there is no pending invitation from this sender to the person to withdraw.".to_owned()
            }
            NetworkError::CannotResendYet { retry_at_ms } => format!(
                "The network refused: an invitation to this person was withdrawn less than 3 weeks ago; it can be sent again from {}.",
                rfc3339(*retry_at_ms)
            ),
            NetworkError::LimitExceeded { retry_at_ms: Some(at) } => format!(
                "The network refused: this sender's account reached the network's own limit; it lifts at {}.",
                rfc3339(*at)
            ),
            NetworkError::LimitExceeded { retry_at_ms: None } => {
                "The network refused: this sender's account reached the network's own limit; try again later.".to_owned()
            }
            NetworkError::Unreachable => {
                "The network refused: the person cannot be reached (the profile is blocked, deleted or restricted).".to_owned()
            }
            NetworkError::NotAllowedInmail => {
                "The network refused: this sender's account cannot send InMail (it needs a premium plan), or the person does not take InMail.".to_owned()
            }
            NetworkError::InsufficientCredits => {
                "The network refused: this sender's account has no InMail credits left.".to_owned()
            }
            NetworkError::TooLong { limit } => {
                format!("The network refused: the text is longer than {limit} characters.")
            }
            NetworkError::AccountDisconnected => {
                "The network refused: this sender's account is disconnected or needs a new sign-in; reconnect it first.".to_owned()
            }
            NetworkError::NeedsReauth => {
                "The network refused: this sender's account needs its owner to sign in again; connect it again (`connect_sender`).".to_owned()
            }
            NetworkError::Rejected(words) => {
                format!("The network rejected the request: {words}")
            }
            NetworkError::AccountRestricted => {
                "The network refused: the network restricted this sender's account; nothing can be sent from it.".to_owned()
            }
            NetworkError::Transient(_) => {
                "The network failed for a moment; nothing was confirmed. Try again later.".to_owned()
            }
        };
        let mut api = ApiError::new(code, message);
        if let Some(at) = error.retry_at_ms() {
            api = api.with_extra("retry_at", rfc3339(at));
        }
        if let NetworkError::Transient(cause) = error {
            api.internal = Some(cause);
        }
        api
    }
}

/// What a network implementation offers. Every method reads time from the implementation's
/// [`Clock`] (never the system's), so a test can move a month in seconds.
pub trait NetworkProvider: Send + Sync {
    /// Views the person's profile (a step of its own; the network counts views). Answers the
    /// connection state it showed, and when.
    fn view_profile(
        &self,
        to: Outbound<'_>,
    ) -> impl Future<Output = Result<Viewed, NetworkError>> + Send;

    /// Sends a connection request, with an optional note of at most [`MAX_NOTE_CHARS`].
    fn invite(
        &self,
        to: Outbound<'_>,
        note: Option<&str>,
    ) -> impl Future<Output = Result<Sent, NetworkError>> + Send;

    /// Withdraws a pending connection request.
    fn withdraw(&self, to: Outbound<'_>)
    -> impl Future<Output = Result<Sent, NetworkError>> + Send;

    /// The person's connection state with the account.
    fn connection_state(
        &self,
        account: Account<'_>,
        profile_url: &str,
    ) -> impl Future<Output = Result<ConnectionState, NetworkError>> + Send;

    /// Sends a message (at most [`MAX_MESSAGE_CHARS`]), opening the chat if there is none.
    fn send_message(
        &self,
        to: Outbound<'_>,
        text: &str,
    ) -> impl Future<Output = Result<Sent, NetworkError>> + Send;

    /// Sends an InMail (a `subject` of at most [`MAX_SUBJECT_CHARS`], a body of at most
    /// [`MAX_INMAIL_CHARS`]) to someone who need not be a connection; it spends one of the
    /// account's InMail credits.
    fn send_inmail(
        &self,
        to: Outbound<'_>,
        subject: &str,
        text: &str,
    ) -> impl Future<Output = Result<Sent, NetworkError>> + Send;

    /// The account's messages, both ways, after `since_ms`, oldest first.
    fn list_messages(
        &self,
        account: Account<'_>,
        since_ms: i64,
    ) -> impl Future<Output = Result<Vec<ChatMessage>, NetworkError>> + Send;

    /// The account's status.
    fn account_status(
        &self,
        account: Account<'_>,
    ) -> impl Future<Output = Result<AccountStatus, NetworkError>> + Send;

    /// Reconciliation: what became of the outbound action made with this intent token (the
    /// latest attempt), or `None` if the network never received it. The executor asks this for
    /// an intent with no known outcome before it sends again.
    fn find_outbound(
        &self,
        account: Account<'_>,
        intent: &str,
    ) -> impl Future<Output = Result<Option<OutboundRecord>, NetworkError>> + Send;

    /// Hands over what arrived for the workspace's accounts (acceptances, messages) in the
    /// caller's transaction (`conn`): whatever the provider marks as handed over commits with
    /// what the caller makes of the events (`delivery::inbound::deliver_due` applies them), so
    /// none is lost or applied twice. Acceptances can be signalled late by real providers, so
    /// polling is the model; a webhook hands its events to delivery the same way. The caller
    /// holds a write transaction meanwhile (on SQLite, the database's one writer): a provider
    /// that must ask over HTTP fetches first and hands over here only what it fetched.
    fn poll(
        &self,
        conn: &mut sqlx::AnyConnection,
        workspace_id: &str,
    ) -> impl Future<Output = Result<Vec<InboundEvent>, NetworkError>> + Send;
}

/// The network a server uses: one variant per implementation.
#[derive(Debug, Clone)]
pub enum Network {
    /// The simulated network in our own database.
    Sandbox(Sandbox),
    /// Unipile's API, for real accounts.
    Unipile(Unipile),
}

/// The network of this configuration ([`crate::provider::configured`]): the sandbox outside
/// production by default, Unipile when configured, and in production 503
/// `network_not_configured` until a provider is. Production never falls back to the sandbox.
pub fn network_for(config: &Config, db: &Db, clock: &Clock) -> Result<Network, ApiError> {
    let settings = crate::provider::settings(config);
    match crate::provider::configured_in(&settings, &config.environment)? {
        Provider::Sandbox => Ok(Network::Sandbox(Sandbox::new(
            db.clone(),
            clock.clone(),
            settings.sandbox_seed,
        ))),
        Provider::Unipile => {
            let unipile = settings
                .unipile
                .as_ref()
                .ok_or_else(|| ApiError::internal("unipile settings vanished"))?;
            Ok(Network::Unipile(Unipile::new(
                unipile,
                db.clone(),
                clock.clone(),
            )?))
        }
    }
}

impl NetworkProvider for Network {
    async fn view_profile(&self, to: Outbound<'_>) -> Result<Viewed, NetworkError> {
        match self {
            Self::Sandbox(sandbox) => sandbox.view_profile(to).await,
            Self::Unipile(unipile) => unipile.view_profile(to).await,
        }
    }

    async fn invite(&self, to: Outbound<'_>, note: Option<&str>) -> Result<Sent, NetworkError> {
        match self {
            Self::Sandbox(sandbox) => sandbox.invite(to, note).await,
            Self::Unipile(unipile) => unipile.invite(to, note).await,
        }
    }

    async fn withdraw(&self, to: Outbound<'_>) -> Result<Sent, NetworkError> {
        match self {
            Self::Sandbox(sandbox) => sandbox.withdraw(to).await,
            Self::Unipile(unipile) => unipile.withdraw(to).await,
        }
    }

    async fn connection_state(
        &self,
        account: Account<'_>,
        profile_url: &str,
    ) -> Result<ConnectionState, NetworkError> {
        match self {
            Self::Sandbox(sandbox) => sandbox.connection_state(account, profile_url).await,
            Self::Unipile(unipile) => unipile.connection_state(account, profile_url).await,
        }
    }

    async fn send_message(&self, to: Outbound<'_>, text: &str) -> Result<Sent, NetworkError> {
        match self {
            Self::Sandbox(sandbox) => sandbox.send_message(to, text).await,
            Self::Unipile(unipile) => unipile.send_message(to, text).await,
        }
    }

    async fn send_inmail(
        &self,
        to: Outbound<'_>,
        subject: &str,
        text: &str,
    ) -> Result<Sent, NetworkError> {
        match self {
            Self::Sandbox(sandbox) => sandbox.send_inmail(to, subject, text).await,
            Self::Unipile(unipile) => unipile.send_inmail(to, subject, text).await,
        }
    }

    async fn list_messages(
        &self,
        account: Account<'_>,
        since_ms: i64,
    ) -> Result<Vec<ChatMessage>, NetworkError> {
        match self {
            Self::Sandbox(sandbox) => sandbox.list_messages(account, since_ms).await,
            Self::Unipile(unipile) => unipile.list_messages(account, since_ms).await,
        }
    }

    async fn account_status(&self, account: Account<'_>) -> Result<AccountStatus, NetworkError> {
        match self {
            Self::Sandbox(sandbox) => sandbox.account_status(account).await,
            Self::Unipile(unipile) => unipile.account_status(account).await,
        }
    }

    async fn find_outbound(
        &self,
        account: Account<'_>,
        intent: &str,
    ) -> Result<Option<OutboundRecord>, NetworkError> {
        match self {
            Self::Sandbox(sandbox) => sandbox.find_outbound(account, intent).await,
            Self::Unipile(unipile) => unipile.find_outbound(account, intent).await,
        }
    }

    async fn poll(
        &self,
        conn: &mut sqlx::AnyConnection,
        workspace_id: &str,
    ) -> Result<Vec<InboundEvent>, NetworkError> {
        match self {
            Self::Sandbox(sandbox) => sandbox.poll(conn, workspace_id).await,
            Self::Unipile(unipile) => unipile.poll(conn, workspace_id).await,
        }
    }
}

/// Something that happened on the network's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InboundEvent {
    /// The person accepted the sender's invitation.
    InvitationAccepted {
        sender_id: String,
        profile_url: String,
        at_ms: i64,
    },
    /// The sender's pending invitation to the person was withdrawn on the network's side (by the
    /// account's owner, in the network's own app).
    InvitationWithdrawn {
        sender_id: String,
        profile_url: String,
        at_ms: i64,
    },
    /// The person sent the sender a message.
    MessageReceived {
        sender_id: String,
        profile_url: String,
        text: String,
        at_ms: i64,
        provider_message_id: String,
    },
}

impl InboundEvent {
    /// The provider's identity of the event, which makes a redelivery a no-op. An acceptance has
    /// no id of its own: the sender, the person and the time name it.
    pub fn provider_event_id(&self) -> String {
        match self {
            Self::InvitationAccepted {
                sender_id,
                profile_url,
                at_ms,
            } => format!("accepted:{sender_id}:{profile_url}:{at_ms}"),
            Self::InvitationWithdrawn {
                sender_id,
                profile_url,
                at_ms,
            } => format!("withdrawn:{sender_id}:{profile_url}:{at_ms}"),
            Self::MessageReceived {
                provider_message_id,
                ..
            } => format!("message:{provider_message_id}"),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvitationAccepted { .. } => "invitation_accepted",
            Self::InvitationWithdrawn { .. } => "invitation_withdrawn",
            Self::MessageReceived { .. } => "message_received",
        }
    }
}

/// An inbound event as recorded.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RecordedEvent {
    pub id: String,
    /// `invitation_accepted`, `invitation_withdrawn` or `message_received`.
    pub kind: String,
    pub sender_id: String,
    pub profile_url: String,
    pub text: Option<String>,
    pub at: Timestamp,
}
