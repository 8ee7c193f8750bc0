//! Conversations: what a sender account and a prospect said to each other, both ways.
//!
//! There is one conversation per (sender account, prospect): the network has one chat per pair of
//! people, whichever sequence or person wrote in it. Outbound messages are written by the scheduler
//! as it sends (a sequence's message step, a person's reply); inbound ones arrive through the
//! network's ingestion function. Both go through [`record_outbound`] and [`record_inbound`], so the
//! counters on the conversation (unread, last message times) are kept in the same transaction as
//! the message, and an inbound message the network reports twice is stored once.

use outreach_runtime::prelude::{
    ApiError, Ctx, Page, PageParams, Timestamp, action, ids, paged, text_enum,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, AssertSqlSafe, Row};

use crate::common::IdKind;
use crate::events::{self, EventType};
use crate::person_lock::PersonTx;

outreach_runtime::prelude::resource_tag!(
    "conversations",
    toolset = "outreach",
    "Conversations with prospects, one per sender and prospect: messages both ways and unread counts."
);

text_enum! {
    /// What a prospect's reply was read as.
    pub enum Classification {
        /// Asks not to be contacted again.
        Unsubscribe => "unsubscribe",
        /// Declines.
        NotInterested => "not_interested",
        /// An automatic absence notice.
        OutOfOffice => "out_of_office",
        /// Interested, or agrees to talk.
        Positive => "positive",
        /// Asks something.
        Question => "question",
        /// None of the above: left for a person.
        Unclear => "unclear",
    }
}

text_enum! {
    /// Which way a message went.
    pub enum Direction {
        /// From the prospect to the sender account.
        Inbound => "inbound",
        /// From the sender account to the prospect.
        Outbound => "outbound",
    }
}

text_enum! {
    /// Where a message is.
    pub enum MessageStatus {
        /// Outbound, waiting for the scheduler (the sender's working hours and limits); `at` says
        /// when it is due.
        Queued => "queued",
        /// Outbound, delivered to the network at `at`.
        Sent => "sent",
        /// Outbound, refused by the network; `error` says why. Nothing was delivered.
        Failed => "failed",
        /// Inbound, received at `at`.
        Received => "received",
    }
}

/// A conversation as the API shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Conversation {
    pub id: String,
    /// The sender account (`snd_...`) on our side.
    pub sender_id: String,
    /// The person on the other side (`prs_...`).
    pub prospect_id: String,
    /// The sequence (`seq_...`) whose enrollment first wrote here, if one did.
    pub sequence_id: Option<String>,
    /// Inbound messages since the conversation was last marked read.
    pub unread_count: i64,
    /// Whether the prospect has written at least once.
    pub replied: bool,
    pub last_message_at: Option<Timestamp>,
    pub last_inbound_at: Option<Timestamp>,
    pub last_outbound_at: Option<Timestamp>,
    /// When `mark_conversation_read` was last called.
    pub read_at: Option<Timestamp>,
    pub created_at: Timestamp,
    /// Who the prospect is, so an inbox page needs no second call.
    pub prospect: ConversationProspect,
    /// The last message's text, cut to 200 characters.
    pub last_message_preview: Option<String>,
    /// What triage read the latest inbound message as; null until triaged (or without one).
    pub classification: Option<Classification>,
    /// Whether a reply drafted for this conversation waits in the approval queue.
    pub has_draft: bool,
}

/// The prospect of a conversation, as an inbox shows them.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ConversationProspect {
    /// First and last name.
    pub name: Option<String>,
    pub headline: Option<String>,
    /// The latest scoring tier (`a` to `d`, `disqualified`); null until scored.
    pub tier: Option<crate::prospects::Tier>,
}

/// How long a conversation's `last_message_preview` is, at most.
const PREVIEW_CHARS: usize = 200;

/// A conversation's columns (`c`), its prospect's (`p`), its latest inbound message's
/// classification and its last message's text, and whether a reply draft waits.
const CONVERSATION_SELECT: &str = "select c.id, c.sender_id, c.prospect_id, c.sequence_id, c.unread_count, \
    c.last_message_at, c.last_inbound_at, c.last_outbound_at, c.read_at, c.created_at, \
    p.first_name, p.last_name, p.headline, p.tier, \
    (select m.classification from messages m where m.conversation_id = c.id and m.direction = 'inbound' \
      order by m.at desc, m.id desc limit 1) as classification, \
    (select m.text from messages m where m.conversation_id = c.id order by m.at desc, m.id desc limit 1) as last_text, \
    cast(case when exists (select 1 from approvals a where a.workspace_id = c.workspace_id and a.kind = 'reply' \
      and a.subject_id = c.id and a.status = 'pending') then 1 else 0 end as bigint) as has_draft \
    from conversations c join prospects p on p.id = c.prospect_id";

impl Conversation {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        let last_inbound_at: Option<i64> = row.try_get("last_inbound_at")?;
        Ok(Self {
            id: row.try_get("id")?,
            sender_id: row.try_get("sender_id")?,
            prospect_id: row.try_get("prospect_id")?,
            sequence_id: row.try_get("sequence_id")?,
            unread_count: row.try_get("unread_count")?,
            replied: last_inbound_at.is_some(),
            last_message_at: row
                .try_get::<Option<i64>, _>("last_message_at")?
                .map(Timestamp),
            last_inbound_at: last_inbound_at.map(Timestamp),
            last_outbound_at: row
                .try_get::<Option<i64>, _>("last_outbound_at")?
                .map(Timestamp),
            read_at: row.try_get::<Option<i64>, _>("read_at")?.map(Timestamp),
            created_at: Timestamp(row.try_get("created_at")?),
            prospect: ConversationProspect {
                name: crate::prospects::normalize::full_name(
                    row.try_get::<Option<String>, _>("first_name")?.as_deref(),
                    row.try_get::<Option<String>, _>("last_name")?.as_deref(),
                ),
                headline: row.try_get("headline")?,
                tier: row
                    .try_get::<Option<String>, _>("tier")?
                    .as_deref()
                    .and_then(crate::prospects::Tier::parse),
            },
            last_message_preview: row
                .try_get::<Option<String>, _>("last_text")?
                .map(|text| preview(&text)),
            classification: row
                .try_get::<Option<String>, _>("classification")?
                .map(|text| Classification::from_db(&text))
                .transpose()?,
            has_draft: row.try_get::<i64, _>("has_draft")? != 0,
        })
    }
}

/// The first [`PREVIEW_CHARS`] characters of a message, with `…` when cut.
fn preview(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(PREVIEW_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// A message as the API shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Message {
    pub id: String,
    pub conversation_id: String,
    pub direction: Direction,
    pub text: String,
    pub status: MessageStatus,
    /// When it was sent or received; for a `queued` message, when it is due to go.
    pub at: Timestamp,
    /// Why the network refused a `failed` message.
    pub error: Option<String>,
    /// The enrollment (`enr_...`) whose step wrote it, for a sequence's message.
    pub enrollment_id: Option<String>,
    /// The person (`psn_...`) who wrote an outbound reply.
    pub created_by: Option<String>,
    /// An inbound message once an `inbox_triage` run read it: `unsubscribe`, `not_interested`,
    /// `out_of_office`, `positive`, `question` or `unclear`.
    pub classification: Option<Classification>,
    /// The run (`run_...`) that classified it.
    pub triaged_by: Option<String>,
    pub created_at: Timestamp,
}

const MESSAGE_COLUMNS: &str = "id, conversation_id, direction, text, status, at, error, enrollment_id, created_by, \
     classification, triaged_by, created_at";

impl Message {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        Ok(Self {
            id: row.try_get("id")?,
            conversation_id: row.try_get("conversation_id")?,
            direction: Direction::from_db(&row.try_get::<String, _>("direction")?)?,
            text: row.try_get("text")?,
            status: MessageStatus::from_db(&row.try_get::<String, _>("status")?)?,
            at: Timestamp(row.try_get("at")?),
            error: row.try_get("error")?,
            enrollment_id: row.try_get("enrollment_id")?,
            created_by: row.try_get("created_by")?,
            classification: row
                .try_get::<Option<String>, _>("classification")?
                .map(|text| Classification::from_db(&text))
                .transpose()?,
            triaged_by: row.try_get("triaged_by")?,
            created_at: Timestamp(row.try_get("created_at")?),
        })
    }
}

/// Reads one conversation of a workspace, or 404.
pub async fn fetch(
    conn: &mut AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<Conversation, ApiError> {
    IdKind::Conversation.check(id)?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "{CONVERSATION_SELECT} where c.workspace_id = $1 and c.id = $2"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| IdKind::Conversation.not_found(id))?;
    Conversation::from_row(&row)
}

/// Reads one message of a workspace, or 404.
pub async fn fetch_message(
    conn: &mut AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<Message, ApiError> {
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {MESSAGE_COLUMNS} from messages where workspace_id = $1 and id = $2"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| ApiError::not_found("message", id))?;
    Message::from_row(&row)
}

/// The person (`prs_...`) a conversation of the workspace is with, or 404: what a writer of the
/// conversation locks first (see `person_lock`).
pub async fn person_of(
    conn: &mut AnyConnection,
    workspace_id: &str,
    conversation_id: &str,
) -> Result<String, ApiError> {
    IdKind::Conversation.check(conversation_id)?;
    let prospect_id: Option<String> = sqlx::query_scalar(
        "select prospect_id from conversations where workspace_id = $1 and id = $2",
    )
    .bind(workspace_id)
    .bind(conversation_id)
    .fetch_optional(conn)
    .await?;
    prospect_id.ok_or_else(|| IdKind::Conversation.not_found(conversation_id))
}

/// The conversation of (sender, prospect), made if there is none yet; its id.
pub async fn conversation_for(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    sender_id: &str,
    prospect_id: &str,
    sequence_id: Option<&str>,
    now_ms: i64,
) -> Result<String, ApiError> {
    if !conn.holds(prospect_id) {
        return Err(ApiError::internal(format!(
            "a conversation of `{prospect_id}` was written without that person's lock"
        )));
    }
    let conn: &mut AnyConnection = conn;
    // The person is locked (see `person_lock`): a delete of the person waits for this
    // transaction, or, having won, leaves a 404 here rather than a foreign-key fault at the insert.
    let person = sqlx::query("select id from prospects where workspace_id = $1 and id = $2")
        .bind(workspace_id)
        .bind(prospect_id)
        .fetch_optional(&mut *conn)
        .await?;
    if person.is_none() {
        return Err(ApiError::not_found("prospect", prospect_id));
    }
    // Insert-or-nothing then read: portable, and a concurrent writer of the same pair (a reply
    // arriving while a step sends) ends with one row.
    sqlx::query(
        "insert into conversations (id, workspace_id, sender_id, prospect_id, sequence_id, created_at, updated_at) \
         values ($1, $2, $3, $4, $5, $6, $6) \
         on conflict (workspace_id, sender_id, prospect_id) do nothing",
    )
    .bind(ids::new_id("cnv"))
    .bind(workspace_id)
    .bind(sender_id)
    .bind(prospect_id)
    .bind(sequence_id)
    .bind(now_ms)
    .execute(&mut *conn)
    .await?;
    let row = sqlx::query(
        "select id from conversations where workspace_id = $1 and sender_id = $2 and prospect_id = $3",
    )
    .bind(workspace_id)
    .bind(sender_id)
    .bind(prospect_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.try_get("id")?)
}

/// What an outbound message is, as the scheduler writes it.
#[derive(Debug, Clone)]
pub struct Outbound<'a> {
    pub workspace_id: &'a str,
    pub sender_id: &'a str,
    pub prospect_id: &'a str,
    pub sequence_id: Option<&'a str>,
    pub enrollment_id: Option<&'a str>,
    pub step_index: Option<i64>,
    pub created_by: Option<&'a str>,
    pub text: &'a str,
    pub status: MessageStatus,
    /// When it was sent, or when a queued message is due.
    pub at_ms: i64,
}

/// Stores an outbound message in its conversation (made if needed); the message's id.
pub async fn record_outbound(
    conn: &mut PersonTx<'_>,
    message: &Outbound<'_>,
    now_ms: i64,
) -> Result<String, ApiError> {
    let conversation_id = conversation_for(
        conn,
        message.workspace_id,
        message.sender_id,
        message.prospect_id,
        message.sequence_id,
        now_ms,
    )
    .await?;
    let id = ids::new_id("msg");
    sqlx::query(
        "insert into messages (id, workspace_id, conversation_id, direction, text, status, at, \
         enrollment_id, step_index, created_by, created_at) \
         values ($1, $2, $3, 'outbound', $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&id)
    .bind(message.workspace_id)
    .bind(&conversation_id)
    .bind(message.text)
    .bind(message.status.as_str())
    .bind(message.at_ms)
    .bind(message.enrollment_id)
    .bind(message.step_index)
    .bind(message.created_by)
    .bind(now_ms)
    .execute(&mut **conn)
    .await?;
    if message.status == MessageStatus::Sent {
        touch_outbound(conn, &conversation_id, message.at_ms).await?;
        events::record(
            conn,
            message.workspace_id,
            now_ms,
            EventType::MessageSent,
            json!({
                "message_id": id,
                "conversation_id": conversation_id,
                "prospect_id": message.prospect_id,
                "sender_id": message.sender_id,
                "enrollment_id": message.enrollment_id,
            }),
        )
        .await?;
    }
    Ok(id)
}

/// Marks a queued outbound message sent (or failed) and moves its conversation's times; the
/// event (`message.sent` or `message.failed`) goes with it.
pub async fn settle_outbound(
    conn: &mut PersonTx<'_>,
    message_id: &str,
    outcome: Result<i64, &str>,
    now_ms: i64,
) -> Result<(), ApiError> {
    let conn: &mut AnyConnection = conn;
    let (status, at, error) = match outcome {
        Ok(at) => (MessageStatus::Sent, Some(at), None),
        Err(error) => (MessageStatus::Failed, None, Some(error)),
    };
    let row = sqlx::query(
        "update messages set status = $2, at = coalesce($3, at), error = $4 \
         where id = $1 and status = 'queued' \
         returning conversation_id, at, workspace_id, enrollment_id",
    )
    .bind(message_id)
    .bind(status.as_str())
    .bind(at)
    .bind(error)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(()) };
    let conversation_id: String = row.try_get("conversation_id")?;
    let workspace_id: String = row.try_get("workspace_id")?;
    let enrollment_id: Option<String> = row.try_get("enrollment_id")?;
    let pair = sqlx::query("select sender_id, prospect_id from conversations where id = $1")
        .bind(&conversation_id)
        .fetch_one(&mut *conn)
        .await?;
    let (sender_id, prospect_id): (String, String) =
        (pair.try_get("sender_id")?, pair.try_get("prospect_id")?);
    if status == MessageStatus::Sent {
        touch_outbound(conn, &conversation_id, row.try_get("at")?).await?;
        events::record(
            conn,
            &workspace_id,
            now_ms,
            EventType::MessageSent,
            json!({
                "message_id": message_id,
                "conversation_id": conversation_id,
                "prospect_id": prospect_id,
                "sender_id": sender_id,
                "enrollment_id": enrollment_id,
            }),
        )
        .await?;
    } else {
        let sequence_id: Option<String> =
            sqlx::query_scalar("select sequence_id from enrollments where id = $1")
                .bind(&enrollment_id)
                .fetch_optional(&mut *conn)
                .await?;
        events::record(
            conn,
            &workspace_id,
            now_ms,
            EventType::MessageFailed,
            json!({
                "enrollment_id": enrollment_id,
                "sequence_id": sequence_id,
                "prospect_id": prospect_id,
                "sender_id": sender_id,
                "error": error,
            }),
        )
        .await?;
    }
    Ok(())
}

async fn touch_outbound(
    conn: &mut AnyConnection,
    conversation_id: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "update conversations set \
         last_outbound_at = case when last_outbound_at is null or last_outbound_at < $2 then $2 else last_outbound_at end, \
         last_message_at = case when last_message_at is null or last_message_at < $2 then $2 else last_message_at end, \
         updated_at = $2 where id = $1",
    )
    .bind(conversation_id)
    .bind(at_ms)
    .execute(conn)
    .await?;
    Ok(())
}

/// What the network reported a prospect wrote.
#[derive(Debug, Clone)]
pub struct Inbound<'a> {
    pub workspace_id: &'a str,
    pub sender_id: &'a str,
    pub prospect_id: &'a str,
    pub text: &'a str,
    pub at_ms: i64,
    /// The network's id for the message: the same message reported twice is stored once.
    pub provider_message_id: &'a str,
}

/// Stores an inbound message; `None` when the network had reported it already.
pub async fn record_inbound(
    conn: &mut PersonTx<'_>,
    message: &Inbound<'_>,
    now_ms: i64,
) -> Result<Option<String>, ApiError> {
    let conversation_id = conversation_for(
        conn,
        message.workspace_id,
        message.sender_id,
        message.prospect_id,
        None,
        now_ms,
    )
    .await?;
    let id = ids::new_id("msg");
    let inserted = sqlx::query(
        "insert into messages (id, workspace_id, conversation_id, direction, text, status, at, \
         provider_message_id, created_at) \
         values ($1, $2, $3, 'inbound', $4, 'received', $5, $6, $7) \
         on conflict (workspace_id, provider_message_id) where provider_message_id is not null do nothing",
    )
    .bind(&id)
    .bind(message.workspace_id)
    .bind(&conversation_id)
    .bind(message.text)
    .bind(message.at_ms)
    .bind(message.provider_message_id)
    .bind(now_ms)
    .execute(&mut **conn)
    .await?;
    if inserted.rows_affected() == 0 {
        return Ok(None);
    }
    sqlx::query(
        "update conversations set unread_count = unread_count + 1, \
         last_inbound_at = case when last_inbound_at is null or last_inbound_at < $2 then $2 else last_inbound_at end, \
         last_message_at = case when last_message_at is null or last_message_at < $2 then $2 else last_message_at end, \
         updated_at = $3 where id = $1",
    )
    .bind(&conversation_id)
    .bind(message.at_ms)
    .bind(now_ms)
    .execute(&mut **conn)
    .await?;
    events::record(
        conn,
        message.workspace_id,
        now_ms,
        EventType::MessageReceived,
        json!({
            "message_id": id,
            "conversation_id": conversation_id,
            "prospect_id": message.prospect_id,
            "sender_id": message.sender_id,
        }),
    )
    .await?;
    Ok(Some(id))
}

/// The input of `list_conversations`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListConversationsInput {
    /// Has unread inbound messages.
    pub unread: Option<bool>,
    /// `snd_...`, or a list.
    ///
    /// Over REST, several ids are comma-separated.
    #[serde(default, deserialize_with = "crate::common::one_or_many")]
    #[schemars(schema_with = "crate::common::one_or_many_ids_schema")]
    pub sender_id: Option<Vec<String>>,
    /// Started by this sequence (`seq_...`).
    pub sequence_id: Option<String>,
    /// The prospect has written.
    pub replied: Option<bool>,
    /// Triage's reading of the latest inbound message.
    pub classification: Option<Classification>,
    /// A reply draft awaits approval.
    pub has_draft: Option<bool>,
    /// Text in the last message, any case.
    ///
    /// Not only spaces.
    #[schemars(length(min = 1, max = 200), regex(pattern = crate::common::NOT_BLANK))]
    pub q: Option<String>,
    /// Default `last_inbound`: the latest reply first.
    ///
    /// With `last_inbound`, conversations without a reply come after the others; `last_message`:
    /// the latest message, either way, first.
    pub sort: Option<ConversationSort>,
    #[serde(flatten)]
    pub page: PageParams,
}

text_enum! {
    /// How `list_conversations` orders its page.
    pub enum ConversationSort {
        /// The latest inbound message first; conversations nobody answered after them.
        LastInbound => "last_inbound",
        /// The latest message, either way, first.
        LastMessage => "last_message",
    }
}

/// The most senders one `list_conversations` names.
const MAX_SENDER_FILTER: usize = 20;

/// List conversations: one inbox across every sender account.
///
/// One per (sender, prospect), with unread count, last message preview, triage classification and
/// whether a reply draft waits.
///
/// The prospect shows with name, headline and tier. Filter by `sender_id` (one or several),
/// `unread`, `replied`, `classification`, `sequence_id`, `has_draft`, and `q` (text of the last
/// message); sorted by the latest reply first (`sort`). Paged with `limit` and `offset`.
#[action(scope = "read", http = "GET /conversations")]
pub async fn list_conversations(
    ctx: Ctx,
    input: ListConversationsInput,
) -> Result<Page<Conversation>, ApiError> {
    let senders = input.sender_id.unwrap_or_default();
    if senders.len() > MAX_SENDER_FILTER {
        return Err(ApiError::invalid_request(format!(
            "`sender_id` names {} senders; at most {MAX_SENDER_FILTER}.",
            senders.len()
        )));
    }
    if let Some(q) = &input.q
        && q.trim().is_empty()
    {
        return Err(ApiError::invalid_request("`q` must not be blank."));
    }
    // The fixed filters are `$n is null or ...`; the senders' list is the statement's tail.
    let mut filter = String::from(
        "c.workspace_id = $1 \
        and ($2 is null or ($2 = 1 and c.unread_count > 0) or ($2 = 0 and c.unread_count = 0)) \
        and ($3 is null or c.sequence_id = $3) \
        and ($4 is null or ($4 = 1 and c.last_inbound_at is not null) or ($4 = 0 and c.last_inbound_at is null)) \
        and ($5 is null or (select m.classification from messages m where m.conversation_id = c.id \
          and m.direction = 'inbound' order by m.at desc, m.id desc limit 1) = $5) \
        and ($6 is null or $6 = (case when exists (select 1 from approvals a where a.workspace_id = c.workspace_id \
          and a.kind = 'reply' and a.subject_id = c.id and a.status = 'pending') then 1 else 0 end)) \
        and ($7 is null or lower((select m.text from messages m where m.conversation_id = c.id \
          order by m.at desc, m.id desc limit 1)) like $7 escape '\\')",
    );
    if !senders.is_empty() {
        let list: Vec<String> = (0..senders.len()).map(|n| format!("${}", n + 8)).collect();
        filter.push_str(&format!(" and c.sender_id in ({})", list.join(", ")));
    }
    let limit_at = 8 + senders.len();
    let order = match input.sort.unwrap_or(ConversationSort::LastInbound) {
        ConversationSort::LastInbound => {
            "case when c.last_inbound_at is null then 1 else 0 end, c.last_inbound_at desc, \
             coalesce(c.last_message_at, c.created_at) desc, c.id desc"
        }
        ConversationSort::LastMessage => {
            "coalesce(c.last_message_at, c.created_at) desc, c.id desc"
        }
    };
    let unread = input.unread.map(i64::from);
    let replied = input.replied.map(i64::from);
    let has_draft = input.has_draft.map(i64::from);
    let classification = input.classification.map(|kind| kind.as_str().to_owned());
    let pattern = input
        .q
        .as_deref()
        .map(|q| crate::prospects::normalize::like_pattern(q.trim()));
    paged(
        ctx.db().pool(),
        input.page,
        format!(
            "select count(*) from conversations c join prospects p on p.id = c.prospect_id where {filter}"
        ),
        format!(
            "{CONVERSATION_SELECT} where {filter} order by {order} limit ${limit_at} offset ${}",
            limit_at + 1
        ),
        |query| {
            let mut query = query
                .bind(ctx.workspace_id())
                .bind(unread)
                .bind(input.sequence_id.clone())
                .bind(replied)
                .bind(classification.clone())
                .bind(has_draft)
                .bind(pattern.clone());
            for sender in &senders {
                query = query.bind(sender.clone());
            }
            query
        },
        Conversation::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_conversations,
    request: {"unread": true, "limit": 25},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "classification": "positive",
                "has_draft": false,
                "last_message_preview": "Happy to talk next week.",
                "prospect": {"headline": "Poet of numbers", "name": "Ada Lovelace", "tier": "a"},
                "created_at": "2026-11-24T09:12:05.311Z",
                "id": "cnv_Qm3VbT8rKx2LpN7sYw4D",
                "last_inbound_at": "2026-11-25T14:02:41.000Z",
                "last_message_at": "2026-11-25T14:02:41.000Z",
                "last_outbound_at": "2026-11-24T09:12:05.311Z",
                "prospect_id": "prs_8Jk2LmN4pQ6rS8tU0vW2",
                "read_at": null,
                "replied": true,
                "sender_id": "snd_T5uV7wX9yZ1aB3cD5eF7",
                "sequence_id": "seq_G9hJ1kL3mN5pQ7rS9tU1",
                "unread_count": 1
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_conversations, read,
    ok: {"limit": 5, "replied": true, "unread": true},
    fails: {"unread": "yes"} => INVALID_REQUEST
);

/// The input of `get_conversation` and `mark_conversation_read`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ConversationId {
    /// `cnv_...`
    pub id: String,
}

/// Get a conversation by id.
///
/// Its messages are read with `list_messages`.
///
/// Shows the pair (sender account, prospect), the unread count and the last message times.
#[action(scope = "read", http = "GET /conversations/{id}")]
pub async fn get_conversation(ctx: Ctx, input: ConversationId) -> Result<Conversation, ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    fetch(&mut conn, ctx.workspace_id(), &input.id).await
}

outreach_runtime::prelude::example!(get_conversation,
    request: {"id": "cnv_Qm3VbT8rKx2LpN7sYw4D"},
    response: {
        "classification": "positive",
        "has_draft": false,
        "last_message_preview": "Happy to talk next week.",
        "prospect": {"headline": "Poet of numbers", "name": "Ada Lovelace", "tier": "a"},
        "created_at": "2026-11-24T09:12:05.311Z",
        "id": "cnv_Qm3VbT8rKx2LpN7sYw4D",
        "last_inbound_at": "2026-11-25T14:02:41.000Z",
        "last_message_at": "2026-11-25T14:02:41.000Z",
        "last_outbound_at": "2026-11-24T09:12:05.311Z",
        "prospect_id": "prs_8Jk2LmN4pQ6rS8tU0vW2",
        "read_at": null,
        "replied": true,
        "sender_id": "snd_T5uV7wX9yZ1aB3cD5eF7",
        "sequence_id": "seq_G9hJ1kL3mN5pQ7rS9tU1",
        "unread_count": 1
    }
);

outreach_runtime::prelude::parity!(get_conversation, read,
    ok: {"id": "$conversation"},
    fails: {"id": "$missing:cnv"} => NOT_FOUND
);

/// The input of `list_messages`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListMessagesInput {
    /// `cnv_...`
    pub id: String,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List a conversation's messages, oldest first.
///
/// Both directions; queued replies come last, with their due time.
///
/// Paged with `limit` and `offset`.
#[action(scope = "read", http = "GET /conversations/{id}/messages")]
pub async fn list_messages(ctx: Ctx, input: ListMessagesInput) -> Result<Page<Message>, ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    fetch(&mut conn, ctx.workspace_id(), &input.id).await?;
    drop(conn);
    let filter = "workspace_id = $1 and conversation_id = $2";
    paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from messages where {filter}"),
        format!(
            "select {MESSAGE_COLUMNS} from messages where {filter} \
             order by at, created_at, id limit $3 offset $4"
        ),
        |query| query.bind(ctx.workspace_id()).bind(input.id.as_str()),
        Message::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_messages,
    request: {"id": "cnv_Qm3VbT8rKx2LpN7sYw4D", "limit": 25},
    response: {
        "count": 2,
        "has_more": false,
        "items": [
            {
                "at": "2026-11-24T09:12:05.311Z",
                "conversation_id": "cnv_Qm3VbT8rKx2LpN7sYw4D",
                "created_at": "2026-11-24T09:12:05.311Z",
                "created_by": null,
                "direction": "outbound",
                "enrollment_id": "enr_W3xY5zA7bC9dE1fG3hJ5",
                "error": null,
                "id": "msg_K7lM9nP1qR3sT5uV7wX9",
                "status": "sent",
                "text": "Thanks for connecting, Ada. Worth a short call about onboarding at Analytical Engines?"
            },
            {
                "at": "2026-11-25T14:02:41.000Z",
                "conversation_id": "cnv_Qm3VbT8rKx2LpN7sYw4D",
                "created_at": "2026-11-25T14:02:41.000Z",
                "created_by": null,
                "direction": "inbound",
                "enrollment_id": null,
                "error": null,
                "id": "msg_Y1zA3bC5dE7fG9hJ1kL3",
                "status": "received",
                "text": "Happy to talk next week."
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 2
    }
);

outreach_runtime::prelude::parity!(list_messages, read,
    ok: {"id": "$conversation", "limit": 10},
    fails: {"id": "$missing:cnv"} => NOT_FOUND
);

/// The input of `mark_conversation_read`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MarkReadInput {
    /// One conversation (`cnv_...`) or a list.
    ///
    /// Over REST, several ids are comma-separated in the path.
    #[serde(deserialize_with = "crate::common::one_or_many_required")]
    #[schemars(schema_with = "mark_read_ids_schema")]
    pub id: Vec<String>,
}

fn mark_read_ids_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["string", "array"],
        "minLength": 1,
        "items": {"type": "string", "minLength": 1},
        "minItems": 1,
        "maxItems": MAX_MARK_READ
    })
}

/// The most conversations one `mark_conversation_read` marks.
const MAX_MARK_READ: usize = 100;

/// The conversations `mark_conversation_read` marked, as they are now.
#[derive(Debug, Serialize, JsonSchema)]
pub struct MarkedRead {
    /// How many conversations were marked (each id once).
    pub marked: u64,
    /// Each, in the order given.
    pub conversations: Vec<Conversation>,
}

/// Mark conversations read.
///
/// All or nothing; the prospect is not told.
///
/// Sets each one's unread count to 0 and `read_at` to now. Takes one conversation id or up to 100.
/// An unknown id is a 404 naming it, and none is marked. Changes nothing on the network.
#[action(scope = "write", idempotent, http = "POST /conversations/{id}/read")]
pub async fn mark_conversation_read(
    ctx: Ctx,
    input: MarkReadInput,
) -> Result<MarkedRead, ApiError> {
    let mut seen = std::collections::HashSet::new();
    let ids: Vec<String> = input
        .id
        .into_iter()
        .map(|id| id.trim().to_owned())
        .filter(|id| seen.insert(id.clone()))
        .collect();
    if ids.is_empty() || ids.len() > MAX_MARK_READ {
        return Err(ApiError::invalid_request(format!(
            "`id` names {} conversations; give 1 to {MAX_MARK_READ}.",
            ids.len()
        )));
    }
    let mut tx = ctx.tx().await?;
    let mut people = Vec::with_capacity(ids.len());
    for id in &ids {
        people.push(person_of(&mut tx, ctx.workspace_id(), id).await?);
    }
    let mut tx = crate::person_lock::lock(
        &mut tx,
        ctx.workspace_id(),
        people.iter().map(String::as_str),
    )
    .await?;
    let mut conversations = Vec::with_capacity(ids.len());
    for id in &ids {
        let updated = sqlx::query(
            "update conversations set unread_count = 0, read_at = $3, updated_at = $3 \
             where workspace_id = $1 and id = $2",
        )
        .bind(ctx.workspace_id())
        .bind(id)
        .bind(ctx.now_ms())
        .execute(&mut *tx)
        .await?;
        if updated.rows_affected() == 0 {
            return Err(IdKind::Conversation.not_found(id));
        }
        conversations.push(fetch(&mut tx, ctx.workspace_id(), id).await?);
    }
    Ok(MarkedRead {
        marked: conversations.len() as u64,
        conversations,
    })
}

outreach_runtime::prelude::example!(mark_conversation_read,
    request: {"id": ["cnv_Qm3VbT8rKx2LpN7sYw4D"]},
    response: {
        "conversations": [{
            "classification": "positive",
            "created_at": "2026-11-24T09:12:05.311Z",
            "has_draft": false,
            "id": "cnv_Qm3VbT8rKx2LpN7sYw4D",
            "last_inbound_at": "2026-11-25T14:02:41.000Z",
            "last_message_at": "2026-11-25T14:02:41.000Z",
            "last_message_preview": "Happy to talk next week.",
            "last_outbound_at": "2026-11-24T09:12:05.311Z",
            "prospect": {"headline": "Poet of numbers", "name": "Ada Lovelace", "tier": "a"},
            "prospect_id": "prs_8Jk2LmN4pQ6rS8tU0vW2",
            "read_at": "2026-11-25T15:30:00.000Z",
            "replied": true,
            "sender_id": "snd_T5uV7wX9yZ1aB3cD5eF7",
            "sequence_id": "seq_G9hJ1kL3mN5pQ7rS9tU1",
            "unread_count": 0
        }],
        "marked": 1
    }
);

outreach_runtime::prelude::parity!(mark_conversation_read, write,
    ok: {"id": "$conversation"},
    fails: {"id": "$missing:cnv"} => NOT_FOUND
);

/// Claims an inbound message for triage with its classification: answers whether this call
/// claimed it (another run triaging the same conversation at once claims nothing).
pub(crate) async fn claim_for_triage(
    conn: &mut PersonTx<'_>,
    message_id: &str,
    classification: Classification,
    at: i64,
    run_id: &str,
) -> Result<bool, ApiError> {
    let conn: &mut AnyConnection = conn;
    let claimed = sqlx::query(
        "update messages set classification = $2, triaged_at = $3, triaged_by = $4 \
         where id = $1 and triaged_at is null",
    )
    .bind(message_id)
    .bind(classification.as_str())
    .bind(at)
    .bind(run_id)
    .execute(conn)
    .await?;
    Ok(claimed.rows_affected() == 1)
}

/// What the triage made of a conversation's new replies, as one `conversation.classified`
/// event: the reading that stands once its claimed messages are read together.
pub(crate) async fn classified(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    conversation_id: &str,
    prospect_id: &str,
    classification: Classification,
    at: i64,
) -> Result<(), ApiError> {
    let data = json!({
        "conversation_id": conversation_id,
        "prospect_id": prospect_id,
        "classification": classification,
    });
    events::record(
        conn,
        workspace_id,
        at,
        EventType::ConversationClassified,
        data,
    )
    .await?;
    Ok(())
}

/// Moves a queued outbound message to the time it will now be sent.
pub(crate) async fn postpone_queued(
    conn: &mut PersonTx<'_>,
    message_id: &str,
    at: i64,
) -> Result<(), ApiError> {
    let conn: &mut AnyConnection = conn;
    sqlx::query("update messages set at = $2 where id = $1 and status = 'queued'")
        .bind(message_id)
        .bind(at)
        .execute(conn)
        .await?;
    Ok(())
}
