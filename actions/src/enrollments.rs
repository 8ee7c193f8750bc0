//! Enrollments: one prospect in one sequence, from approval to its last step.
//!
//! An enrollment starts `awaiting_approval` (made by `add_to_sequence`, with an approval item);
//! `approve_outreach` makes it `scheduled`, its first performed step makes it `active`, and it ends
//! `finished` (with an exit reason) or `failed` (with the provider's error). Nothing is ever sent for
//! an enrollment that was not approved: the scheduler only picks `scheduled` and `active` ones.
//! Every change is written to its history ([`record_event`]), which `get_enrollment` shows, so a
//! person can see what was sent, when, and what came of it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use crate::approval_items;
use crate::common::IdKind;
use crate::events::{self, EventType};
use crate::person_lock::PersonTx;
use crate::step_jobs::LIVE_SQL;
use outreach_runtime::prelude::{ApiError, Ctx, ErrorCode, Page, PageParams, Timestamp, action};
use outreach_runtime::prelude::{ids, paged};

outreach_runtime::prelude::resource_tag!(
    "enrollments",
    toolset = "outreach",
    "A prospect's way through a sequence: its status, next step and history; pause, resume or stop it."
);

outreach_runtime::prelude::text_enum! {
    /// Where an enrollment is.
    pub enum EnrollmentStatus {
        /// Waits in the approval queue; nothing is sent.
        AwaitingApproval => "awaiting_approval",
        /// Approved; its first step is due at `next_step_at`.
        Scheduled => "scheduled",
        /// At least one step performed; the next is due at `next_step_at`.
        Active => "active",
        /// Paused by a person; nothing is sent until resumed.
        Paused => "paused",
        /// Ended; `exit_reason` says why.
        Finished => "finished",
        /// Ended by an error of the network; `last_error` says which.
        Failed => "failed",
    }
}

impl EnrollmentStatus {
    /// Statuses in which an enrollment still counts as "in the sequence".
    pub const LIVE: &'static [EnrollmentStatus] = &[
        EnrollmentStatus::AwaitingApproval,
        EnrollmentStatus::Scheduled,
        EnrollmentStatus::Active,
        EnrollmentStatus::Paused,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(self, EnrollmentStatus::Finished | EnrollmentStatus::Failed)
    }
}

outreach_runtime::prelude::text_enum! {
    /// Why an enrollment finished.
    pub enum ExitReason {
        /// The prospect replied (and the sequence stops on reply).
        Replied => "replied",
        /// Every step was performed.
        CompletedSteps => "completed_steps",
        /// The invitation was not accepted in time.
        NotAccepted => "not_accepted",
        /// The invitation was withdrawn on the network's side (by the sender's owner, in the
        /// network's own app) before the person accepted it.
        InvitationWithdrawn => "invitation_withdrawn",
        /// Stopped by a person (the enrollment or its sequence).
        Stopped => "stopped",
        /// The prospect was marked do-not-contact.
        DoNotContact => "do_not_contact",
        /// Its approval item was rejected: nothing was ever sent.
        Rejected => "rejected",
        /// The prospect asked to unsubscribe (read by an `inbox_triage` run): now do-not-contact.
        Unsubscribed => "unsubscribed",
        /// The prospect declined (read by an `inbox_triage` run).
        NotInterested => "not_interested",
        /// An agent's proposal waited 72 hours without a decision: nothing was ever sent.
        Expired => "expired",
        /// An `inmail` step: the sender's account cannot send InMail (no premium plan), or the
        /// person does not take InMail.
        NotAllowedInmail => "not_allowed_inmail",
        /// An `inmail` step: the sender's account has no InMail credits left.
        InsufficientCredits => "insufficient_credits",
        /// A step that sends a text had no approved text for this person (the sequence gained it
        /// after the approval, while paused): nothing was sent.
        NotApproved => "not_approved",
    }
}

/// An enrollment as the API shows it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Enrollment {
    pub id: String,
    pub sequence_id: String,
    pub prospect_id: String,
    /// The sender its steps go from; null until one is assigned.
    pub sender_id: Option<String>,
    pub status: EnrollmentStatus,
    /// Set once `finished`.
    pub exit_reason: Option<ExitReason>,
    /// The next step to perform (0-based).
    pub step_index: i64,
    /// When the next step is due (before the sender's hours and limits apply).
    pub next_step_at: Option<Timestamp>,
    pub approved_at: Option<Timestamp>,
    /// The person (`psn_...`) who approved it.
    pub approved_by: Option<String>,
    /// The network's error, once `failed` (or the last retried one).
    pub last_error: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

pub(crate) const ENROLLMENT_COLUMNS: &str = "id, sequence_id, prospect_id, sender_id, status, exit_reason, step_index, \
     next_step_at, approved_at, approved_by, last_error, created_at, updated_at";

impl Enrollment {
    pub(crate) fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        Ok(Self {
            id: row.try_get("id")?,
            sequence_id: row.try_get("sequence_id")?,
            prospect_id: row.try_get("prospect_id")?,
            sender_id: row.try_get("sender_id")?,
            status: EnrollmentStatus::from_db(&row.try_get::<String, _>("status")?)?,
            exit_reason: row
                .try_get::<Option<String>, _>("exit_reason")?
                .map(|reason| ExitReason::from_db(&reason))
                .transpose()?,
            step_index: row.try_get("step_index")?,
            next_step_at: row
                .try_get::<Option<i64>, _>("next_step_at")?
                .map(Timestamp),
            approved_at: row.try_get::<Option<i64>, _>("approved_at")?.map(Timestamp),
            approved_by: row.try_get("approved_by")?,
            last_error: row.try_get("last_error")?,
            created_at: Timestamp(row.try_get("created_at")?),
            updated_at: Timestamp(row.try_get("updated_at")?),
        })
    }
}

outreach_runtime::prelude::text_enum! {
    /// What an entry of an enrollment's history records.
    pub enum EnrollmentEventKind {
        /// Enrolled in the sequence.
        Added => "added",
        /// Approved for outreach.
        Approved => "approved",
        /// Rejected in the approval queue.
        Rejected => "rejected",
        /// Paused.
        Paused => "paused",
        /// Resumed after a pause.
        Resumed => "resumed",
        /// Stopped by a person, a triage or the sequence's stop (`outcome` says why).
        Stopped => "stopped",
        /// Came to its end (`outcome`: `completed`, `replied`, ...).
        Finished => "finished",
        /// Failed (`outcome` is the error code).
        Failed => "failed",
        /// The person accepted the invitation.
        Accepted => "accepted",
        /// Held after an out-of-office reply until the person is back (`text` says until when).
        Held => "held",
        /// A `view_profile` step ran (`outcome` says what came of it).
        ViewProfile => "view_profile",
        /// A `connection_request` step ran.
        ConnectionRequest => "connection_request",
        /// A `message` step ran.
        Message => "message",
        /// An `inmail` step ran.
        Inmail => "inmail",
        /// A `condition` step decided (`outcome`: `then` or `else`; `text` says what held or not,
        /// and the step it went to).
        Branched => "branched",
    }
}

/// One entry of an enrollment's history.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EnrollmentEvent {
    pub at: Timestamp,
    pub kind: EnrollmentEventKind,
    /// The step it belongs to, if any.
    pub step_index: Option<i64>,
    /// What was sent, if anything.
    pub text: Option<String>,
    /// What came of it (`sent`, `already_connected`, an error code, ...; `then` or `else` for a
    /// condition).
    pub outcome: Option<String>,
    /// The A/B variant sent, on a step with variants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// Writes one history entry of an enrollment (in the caller's transaction).
#[allow(clippy::too_many_arguments)]
pub async fn record_event(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    enrollment_id: &str,
    at: i64,
    kind: EnrollmentEventKind,
    step_index: Option<i64>,
    text: Option<&str>,
    outcome: Option<&str>,
) -> Result<(), ApiError> {
    record_step_event(
        conn,
        workspace_id,
        enrollment_id,
        at,
        (kind, step_index),
        (text, None),
        outcome,
    )
    .await
}

/// Writes the history entry of one step: `(kind, step)`, `(text, variant)` and its outcome.
pub(crate) async fn record_step_event(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    enrollment_id: &str,
    at: i64,
    (kind, step_index): (EnrollmentEventKind, Option<i64>),
    (text, variant): (Option<&str>, Option<&str>),
    outcome: Option<&str>,
) -> Result<(), ApiError> {
    let conn: &mut sqlx::AnyConnection = conn;
    sqlx::query(
        "insert into enrollment_events (id, workspace_id, enrollment_id, at, kind, step_index, text, outcome, variant) \
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(ids::new_id("eev"))
    .bind(workspace_id)
    .bind(enrollment_id)
    .bind(at)
    .bind(kind.as_str())
    .bind(step_index)
    .bind(text)
    .bind(outcome)
    .bind(variant)
    .execute(conn)
    .await?;
    Ok(())
}

/// Writes the same history entry for many enrollments at once (in chunks).
pub(crate) async fn record_events(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    enrollment_ids: &[String],
    at: i64,
    kind: EnrollmentEventKind,
    outcome: Option<&str>,
) -> Result<(), ApiError> {
    let conn: &mut sqlx::AnyConnection = conn;
    for chunk in enrollment_ids.chunks(200) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| format!("(${}, $1, ${}, $2, $3, $4)", 5 + 2 * i, 6 + 2 * i))
            .collect();
        let sql = format!(
            "insert into enrollment_events (id, workspace_id, enrollment_id, at, kind, outcome) values {}",
            values.join(", ")
        );
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .persistent(false)
            .bind(workspace_id)
            .bind(at)
            .bind(kind.as_str())
            .bind(outcome);
        for id in chunk {
            query = query.bind(ids::new_id("eev")).bind(id);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Reads one enrollment of the workspace, or 404.
pub(crate) async fn fetch(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<Enrollment, ApiError> {
    IdKind::Enrollment.check(id)?;
    let row = sqlx::query(AssertSqlSafe(format!(
        "select {ENROLLMENT_COLUMNS} from enrollments where workspace_id = $1 and id = $2"
    )))
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(conn)
    .await?
    .ok_or_else(|| IdKind::Enrollment.not_found(id))?;
    Enrollment::from_row(&row)
}

/// Finishes live enrollments with `exit_reason` and expires their approval items still pending,
/// in the caller's transaction (the caller records the events it means); returns how many were
/// still live.
pub(crate) async fn finish(
    conn: &mut PersonTx<'_>,
    clock: &outreach_runtime::prelude::Clock,
    workspace_id: &str,
    ids: &[String],
    exit_reason: &str,
    now: i64,
) -> Result<u64, ApiError> {
    let mut finished = 0;
    let mut sequences: Vec<String> = Vec::new();
    for id in ids {
        let ended = sqlx::query(AssertSqlSafe(format!(
            "update enrollments set status = 'finished', exit_reason = $3, next_step_at = null, updated_at = $4 \
             where workspace_id = $1 and id = $2 and status in {LIVE_SQL} {ENDED_RETURNING}"
        )))
        .bind(workspace_id)
        .bind(id)
        .bind(exit_reason)
        .bind(now)
        .fetch_optional(&mut **conn)
        .await?;
        if let Some(ended) = ended {
            finished += 1;
            ended_event(
                conn,
                &ended,
                now,
                EventType::EnrollmentFinished,
                exit_reason,
            )
            .await?;
            // Only the end of someone approved can leave a sequence done: proposals rejected or
            // expired before anyone started do not complete it (an agent may propose again).
            let approved = ended.try_get::<Option<i64>, _>("approved_at")?.is_some();
            let sequence_id: String = ended.try_get("sequence_id")?;
            if approved && !sequences.contains(&sequence_id) {
                sequences.push(sequence_id);
            }
        }
        let of = approval_items::PendingOf::Enrollment(id);
        approval_items::expire_pending(conn, workspace_id, of, now).await?;
    }
    // The sequence may have no live enrollment left: `sequences` completes it once this commits.
    for sequence_id in &sequences {
        crate::followups::sequence_ended(conn, clock, workspace_id, sequence_id, now).await?;
    }
    Ok(finished)
}

/// Finishes every live enrollment of a sequence as `stopped` and expires its pending approval
/// items (the sequence was stopped).
pub(crate) async fn stop_all_of_sequence(
    conn: &mut PersonTx<'_>,
    clock: &outreach_runtime::prelude::Clock,
    workspace_id: &str,
    sequence_id: &str,
    now: i64,
) -> Result<(), ApiError> {
    let live: Vec<String> = sqlx::query(AssertSqlSafe(format!(
        "select id from enrollments where workspace_id = $1 and sequence_id = $2 and status in {LIVE_SQL}"
    )))
    .bind(workspace_id)
    .bind(sequence_id)
    .fetch_all(&mut **conn)
    .await?
    .iter()
    .map(|row| row.try_get::<String, _>("id"))
    .collect::<Result<_, _>>()?;
    let ended = sqlx::query(AssertSqlSafe(format!(
        "update enrollments set status = 'finished', exit_reason = 'stopped', next_step_at = null, updated_at = $3 \
         where workspace_id = $1 and sequence_id = $2 and status in {LIVE_SQL} {ENDED_RETURNING}"
    )))
    .bind(workspace_id)
    .bind(sequence_id)
    .bind(now)
    .fetch_all(&mut **conn)
    .await?;
    for ended in &ended {
        ended_event(conn, ended, now, EventType::EnrollmentFinished, "stopped").await?;
    }
    let of = approval_items::PendingOf::Sequence(sequence_id);
    approval_items::expire_pending(conn, workspace_id, of, now).await?;
    record_events(
        conn,
        workspace_id,
        &live,
        now,
        EnrollmentEventKind::Stopped,
        Some("sequence_stopped"),
    )
    .await?;
    crate::followups::runs_decided(conn, clock, workspace_id, now).await
}

/// An enrollment with its history, oldest entry first.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EnrollmentDetail {
    #[serde(flatten)]
    pub enrollment: Enrollment,
    /// The approval item (`apr_...`) that decided whether it may start.
    pub approval_id: Option<String>,
    /// What happened, oldest first: added, approved, each step with what was sent and its outcome.
    pub history: Vec<EnrollmentEvent>,
}

/// The input of actions that name one enrollment.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EnrollmentId {
    /// `enr_...`
    pub id: String,
}

/// Get an enrollment with its history.
///
/// Its history holds each step with the text sent and the outcome.
///
/// Shows its status, next step and when it is due. The history holds every entry: when it was added
/// and approved, each step with the text sent and its outcome.
#[action(scope = "read", http = "GET /enrollments/{id}")]
pub async fn get_enrollment(ctx: Ctx, input: EnrollmentId) -> Result<EnrollmentDetail, ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    detail(&mut conn, ctx.workspace_id(), &input.id).await
}

outreach_runtime::prelude::example!(get_enrollment,
    request: {"id": "enr_OYC1RvHwvhhXPLiM61gx"},
    response: {
        "approval_id": "apr_YCD0yfaQxyGxSBDJPSaJ",
        "approved_at": "2026-11-23T21:19:40.433Z",
        "approved_by": "psn_XnIJgr1VrzYEO8amMjf7",
        "created_at": "2026-11-23T21:19:40.407Z",
        "exit_reason": null,
        "history": [
            {
                "at": "2026-11-23T21:19:40.407Z",
                "kind": "added",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.433Z",
                "kind": "approved",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.512Z",
                "kind": "paused",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.535Z",
                "kind": "resumed",
                "outcome": null,
                "step_index": null,
                "text": null
            }
        ],
        "id": "enr_OYC1RvHwvhhXPLiM61gx",
        "last_error": null,
        "next_step_at": "2026-11-23T21:19:40.535Z",
        "prospect_id": "prs_pQOP39fLUiEK6S7Cciku",
        "sender_id": "snd_jp6TNuolp8f32URYMVrb",
        "sequence_id": "seq_sGbl2nzkshQDV6qitLc9",
        "status": "scheduled",
        "step_index": 0,
        "updated_at": "2026-11-23T21:19:40.535Z"
    }
);

outreach_runtime::prelude::parity!(get_enrollment, read,
    ok: {"id": "$scheduled"},
    fails: {"id": "$missing:enr"} => NOT_FOUND
);

async fn detail(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<EnrollmentDetail, ApiError> {
    let enrollment = fetch(conn, workspace_id, id).await?;
    let rows = sqlx::query(
        "select at, kind, step_index, text, outcome, variant from enrollment_events \
         where workspace_id = $1 and enrollment_id = $2 order by at, id",
    )
    .bind(workspace_id)
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    let history = rows
        .iter()
        .map(|row| {
            Ok(EnrollmentEvent {
                at: Timestamp(row.try_get("at")?),
                kind: EnrollmentEventKind::from_db(&row.try_get::<String, _>("kind")?)?,
                step_index: row.try_get("step_index")?,
                text: row.try_get("text")?,
                outcome: row.try_get("outcome")?,
                variant: row.try_get("variant")?,
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let approval_id = sqlx::query(
        "select id from approvals where workspace_id = $1 and kind = 'enrollment' and subject_id = $2 \
         order by created_at desc, id desc limit 1",
    )
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .map(|row| row.try_get::<String, _>("id"))
    .transpose()?;
    Ok(EnrollmentDetail {
        enrollment,
        approval_id,
        history,
    })
}

/// The input of `list_enrollments`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListEnrollmentsInput {
    /// `seq_...`
    pub sequence_id: Option<String>,
    /// Only this status.
    pub status: Option<EnrollmentStatus>,
    /// `prs_...`
    pub prospect_id: Option<String>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List enrollments, newest first.
///
/// `get_enrollment` adds an enrollment's history.
///
/// Filter by `sequence_id`, `status` and `prospect_id`. Paged with `limit` (1 to 200, default 25)
/// and `offset`; follow `next_offset` while `has_more`.
#[action(scope = "read", http = "GET /enrollments")]
pub async fn list_enrollments(
    ctx: Ctx,
    input: ListEnrollmentsInput,
) -> Result<Page<Enrollment>, ApiError> {
    let mut filter = String::from("workspace_id = $1");
    // Unused filters compare a bound empty text with itself, so the placeholders stay fixed.
    filter.push_str(if input.sequence_id.is_some() {
        " and sequence_id = $2"
    } else {
        " and $2 = $2"
    });
    filter.push_str(if input.status.is_some() {
        " and status = $3"
    } else {
        " and $3 = $3"
    });
    filter.push_str(if input.prospect_id.is_some() {
        " and prospect_id = $4"
    } else {
        " and $4 = $4"
    });
    let sequence_id = input.sequence_id.clone().unwrap_or_default();
    let status = input.status.map_or("", EnrollmentStatus::as_str);
    let prospect_id = input.prospect_id.clone().unwrap_or_default();
    paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from enrollments where {filter}"),
        format!(
            "select {ENROLLMENT_COLUMNS} from enrollments where {filter} order by created_at desc, id desc limit $5 offset $6"
        ),
        |query| {
            query
                .bind(ctx.workspace_id())
                .bind(sequence_id.clone())
                .bind(status)
                .bind(prospect_id.clone())
        },
        Enrollment::from_row,
    )
    .await
}

outreach_runtime::prelude::example!(list_enrollments,
    request: {"limit": 1, "sequence_id": "seq_sGbl2nzkshQDV6qitLc9", "status": "scheduled"},
    response: {
        "count": 1,
        "has_more": false,
        "items": [
            {
                "approved_at": "2026-11-23T21:19:40.433Z",
                "approved_by": "psn_XnIJgr1VrzYEO8amMjf7",
                "created_at": "2026-11-23T21:19:40.407Z",
                "exit_reason": null,
                "id": "enr_OYC1RvHwvhhXPLiM61gx",
                "last_error": null,
                "next_step_at": "2026-11-23T21:19:40.433Z",
                "prospect_id": "prs_pQOP39fLUiEK6S7Cciku",
                "sender_id": "snd_jp6TNuolp8f32URYMVrb",
                "sequence_id": "seq_sGbl2nzkshQDV6qitLc9",
                "status": "scheduled",
                "step_index": 0,
                "updated_at": "2026-11-23T21:19:40.433Z"
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 1
    }
);

outreach_runtime::prelude::parity!(list_enrollments, read,
    ok: {"limit": 5, "sequence_id": "$active", "status": "scheduled"},
    fails: {"status": "done"} => INVALID_REQUEST
);

/// The 409 for a change an enrollment's status does not allow.
fn refusal(enrollment: &Enrollment, action: &str, allowed_from: &[EnrollmentStatus]) -> ApiError {
    let from = allowed_from
        .iter()
        .map(|status| format!("`{status}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let hint = match enrollment.status {
        EnrollmentStatus::AwaitingApproval => {
            " Approve or reject it in the approval queue (`approve_outreach`, `reject_outreach`)."
        }
        EnrollmentStatus::Finished | EnrollmentStatus::Failed => {
            " It has ended and changes no more."
        }
        _ => "",
    };
    ApiError::new(
        ErrorCode::INVALID_STATE,
        format!(
            "Enrollment `{}` is `{}`; `{action}` is allowed only from {from}.{hint}",
            enrollment.id, enrollment.status
        ),
    )
    .with_extra("status", enrollment.status.as_str())
}

/// Pause one enrollment: its next step is not sent until it is resumed.
///
/// From `scheduled` or `active`.
///
/// Takes effect before the next step.
#[action(scope = "send", idempotent, http = "POST /enrollments/{id}/pause")]
pub async fn pause_enrollment(ctx: Ctx, input: EnrollmentId) -> Result<EnrollmentDetail, ApiError> {
    change(&ctx, &input.id, Change::Pause).await
}

outreach_runtime::prelude::example!(pause_enrollment,
    request: {"id": "enr_OYC1RvHwvhhXPLiM61gx"},
    response: {
        "approval_id": "apr_YCD0yfaQxyGxSBDJPSaJ",
        "approved_at": "2026-11-23T21:19:40.433Z",
        "approved_by": "psn_XnIJgr1VrzYEO8amMjf7",
        "created_at": "2026-11-23T21:19:40.407Z",
        "exit_reason": null,
        "history": [
            {
                "at": "2026-11-23T21:19:40.407Z",
                "kind": "added",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.433Z",
                "kind": "approved",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.512Z",
                "kind": "paused",
                "outcome": null,
                "step_index": null,
                "text": null
            }
        ],
        "id": "enr_OYC1RvHwvhhXPLiM61gx",
        "last_error": null,
        "next_step_at": "2026-11-23T21:19:40.433Z",
        "prospect_id": "prs_pQOP39fLUiEK6S7Cciku",
        "sender_id": "snd_jp6TNuolp8f32URYMVrb",
        "sequence_id": "seq_sGbl2nzkshQDV6qitLc9",
        "status": "paused",
        "step_index": 0,
        "updated_at": "2026-11-23T21:19:40.512Z"
    }
);

outreach_runtime::prelude::parity!(pause_enrollment, write,
    ok: {"id": "$scheduled"},
    fails: {"id": "$paused_enrollment"} => INVALID_STATE
);

/// Resume a paused enrollment: its next step is sent again.
///
/// A step that fell due while paused goes at once, within the sender's hours and limits.
///
/// Allowed from `paused` only.
#[action(scope = "send", idempotent, http = "POST /enrollments/{id}/resume")]
pub async fn resume_enrollment(
    ctx: Ctx,
    input: EnrollmentId,
) -> Result<EnrollmentDetail, ApiError> {
    change(&ctx, &input.id, Change::Resume).await
}

outreach_runtime::prelude::example!(resume_enrollment,
    request: {"id": "enr_OYC1RvHwvhhXPLiM61gx"},
    response: {
        "approval_id": "apr_YCD0yfaQxyGxSBDJPSaJ",
        "approved_at": "2026-11-23T21:19:40.433Z",
        "approved_by": "psn_XnIJgr1VrzYEO8amMjf7",
        "created_at": "2026-11-23T21:19:40.407Z",
        "exit_reason": null,
        "history": [
            {
                "at": "2026-11-23T21:19:40.407Z",
                "kind": "added",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.433Z",
                "kind": "approved",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.512Z",
                "kind": "paused",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.535Z",
                "kind": "resumed",
                "outcome": null,
                "step_index": null,
                "text": null
            }
        ],
        "id": "enr_OYC1RvHwvhhXPLiM61gx",
        "last_error": null,
        "next_step_at": "2026-11-23T21:19:40.535Z",
        "prospect_id": "prs_pQOP39fLUiEK6S7Cciku",
        "sender_id": "snd_jp6TNuolp8f32URYMVrb",
        "sequence_id": "seq_sGbl2nzkshQDV6qitLc9",
        "status": "scheduled",
        "step_index": 0,
        "updated_at": "2026-11-23T21:19:40.535Z"
    }
);

outreach_runtime::prelude::parity!(resume_enrollment, write,
    ok: {"id": "$paused_enrollment"},
    fails: {"id": "$scheduled"} => INVALID_STATE
);

/// Stop one enrollment for good: nothing more is sent to this prospect in this sequence.
///
/// A pending approval item expires.
///
/// Finishes it with exit reason `stopped`. Allowed from every live status; a finished or failed
/// enrollment is a 409.
#[action(scope = "send", idempotent, http = "POST /enrollments/{id}/stop")]
pub async fn stop_enrollment(ctx: Ctx, input: EnrollmentId) -> Result<EnrollmentDetail, ApiError> {
    change(&ctx, &input.id, Change::Stop).await
}

outreach_runtime::prelude::example!(stop_enrollment,
    request: {"id": "enr_OYC1RvHwvhhXPLiM61gx"},
    response: {
        "approval_id": "apr_YCD0yfaQxyGxSBDJPSaJ",
        "approved_at": "2026-11-23T21:19:40.433Z",
        "approved_by": "psn_XnIJgr1VrzYEO8amMjf7",
        "created_at": "2026-11-23T21:19:40.407Z",
        "exit_reason": "stopped",
        "history": [
            {
                "at": "2026-11-23T21:19:40.407Z",
                "kind": "added",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.433Z",
                "kind": "approved",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.512Z",
                "kind": "paused",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.535Z",
                "kind": "resumed",
                "outcome": null,
                "step_index": null,
                "text": null
            },
            {
                "at": "2026-11-23T21:19:40.594Z",
                "kind": "stopped",
                "outcome": null,
                "step_index": null,
                "text": null
            }
        ],
        "id": "enr_OYC1RvHwvhhXPLiM61gx",
        "last_error": null,
        "next_step_at": null,
        "prospect_id": "prs_pQOP39fLUiEK6S7Cciku",
        "sender_id": "snd_jp6TNuolp8f32URYMVrb",
        "sequence_id": "seq_sGbl2nzkshQDV6qitLc9",
        "status": "finished",
        "step_index": 0,
        "updated_at": "2026-11-23T21:19:40.594Z"
    }
);

outreach_runtime::prelude::parity!(stop_enrollment, write,
    ok: {"id": "$scheduled"},
    fails: {"id": "$missing:enr"} => NOT_FOUND
);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Pause,
    Resume,
    Stop,
}

async fn change(ctx: &Ctx, id: &str, change: Change) -> Result<EnrollmentDetail, ApiError> {
    use EnrollmentStatus as S;
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    IdKind::Enrollment.check(id)?;
    let mut tx = ctx.tx().await?;
    let prospect_id: Option<String> = sqlx::query_scalar(
        "select prospect_id from enrollments where workspace_id = $1 and id = $2",
    )
    .bind(workspace_id)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    let prospect_id = prospect_id.ok_or_else(|| IdKind::Enrollment.not_found(id))?;
    let mut tx = crate::person_lock::lock(&mut tx, workspace_id, [prospect_id.as_str()]).await?;
    sqlx::query("update enrollments set updated_at = $3 where workspace_id = $1 and id = $2")
        .bind(workspace_id)
        .bind(id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
    let enrollment = fetch(&mut tx, workspace_id, id).await?;
    let (action, from): (&str, &[S]) = match change {
        Change::Pause => ("pause_enrollment", &[S::Scheduled, S::Active]),
        Change::Resume => ("resume_enrollment", &[S::Paused]),
        Change::Stop => ("stop_enrollment", S::LIVE),
    };
    if !from.contains(&enrollment.status) {
        return Err(refusal(&enrollment, action, from));
    }
    match change {
        Change::Pause => {
            sqlx::query("update enrollments set status = 'paused' where id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
            record_event(
                &mut tx,
                workspace_id,
                id,
                now,
                EnrollmentEventKind::Paused,
                None,
                None,
                None,
            )
            .await?;
        }
        Change::Resume => {
            // Back to where it was: `scheduled` until its first step went out, `active` after.
            let status = if enrollment.step_index == 0 {
                S::Scheduled
            } else {
                S::Active
            };
            let next = enrollment.next_step_at.map_or(now, |at| at.ms().max(now));
            sqlx::query("update enrollments set status = $2, next_step_at = $3 where id = $1")
                .bind(id)
                .bind(status.as_str())
                .bind(next)
                .execute(&mut *tx)
                .await?;
            record_event(
                &mut tx,
                workspace_id,
                id,
                now,
                EnrollmentEventKind::Resumed,
                None,
                None,
                None,
            )
            .await?;
            crate::step_jobs::schedule(&mut tx, ctx.clock(), workspace_id, id, next).await?;
        }
        Change::Stop => {
            finish(
                &mut tx,
                ctx.clock(),
                workspace_id,
                &[id.to_owned()],
                "stopped",
                now,
            )
            .await?;
            record_event(
                &mut tx,
                workspace_id,
                id,
                now,
                EnrollmentEventKind::Stopped,
                None,
                None,
                None,
            )
            .await?;
            crate::followups::runs_decided(&mut tx, ctx.clock(), workspace_id, now).await?;
        }
    }
    detail(&mut tx, workspace_id, id).await
}

// ----- The verbs: the only statements that write `enrollments` ------------------------------
// Each takes a `PersonTx`: the enrollment's person is locked first (see `person_lock`).

/// One enrollment to make, awaiting approval.
pub(crate) struct NewEnrollment<'a> {
    pub id: &'a str,
    pub prospect_id: &'a str,
    /// `None` while the sequence has no sender (one is assigned on approval).
    pub sender_id: Option<&'a str>,
}

/// Makes enrollments of a sequence, each `awaiting_approval`, a hundred per statement.
pub(crate) async fn insert_awaiting_approval(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    sequence_id: &str,
    rows: &[NewEnrollment<'_>],
    now: i64,
) -> Result<(), ApiError> {
    let conn: &mut sqlx::AnyConnection = conn;
    for chunk in rows.chunks(100) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let n = 4 + 3 * i;
                format!(
                    "(${n}, $1, $2, ${}, ${}, 'awaiting_approval', 0, $3, $3)",
                    n + 1,
                    n + 2
                )
            })
            .collect();
        let sql = format!(
            "insert into enrollments (id, workspace_id, sequence_id, prospect_id, sender_id, status, step_index, created_at, updated_at) values {}",
            values.join(", ")
        );
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .persistent(false)
            .bind(workspace_id)
            .bind(sequence_id)
            .bind(now);
        for row in chunk {
            query = query.bind(row.id).bind(row.prospect_id).bind(row.sender_id);
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Approves an enrollment awaiting approval: `scheduled` with its sender and first step's time.
/// Answers whether it was still awaiting approval (a `false` means it changed meanwhile).
pub(crate) async fn approve(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    id: &str,
    sender_id: &str,
    next_step_at: i64,
    person_id: &str,
    now: i64,
) -> Result<bool, ApiError> {
    let conn: &mut sqlx::AnyConnection = conn;
    let approved = sqlx::query(
        "update enrollments set status = 'scheduled', sender_id = $3, next_step_at = $4, approved_at = $5, \
         approved_by = $6, updated_at = $5 \
         where workspace_id = $1 and id = $2 and status = 'awaiting_approval'",
    )
    .bind(workspace_id)
    .bind(id)
    .bind(sender_id)
    .bind(next_step_at)
    .bind(now)
    .bind(person_id)
    .execute(&mut *conn)
    .await?;
    Ok(approved.rows_affected() == 1)
}

/// Finishes an approved enrollment that has not ended (`scheduled`, `active` or `paused`) with
/// `exit_reason`; answers whether it did (a `false` means it had ended already).
pub(crate) async fn finish_approved(
    conn: &mut PersonTx<'_>,
    id: &str,
    exit_reason: &str,
    now: i64,
) -> Result<bool, ApiError> {
    let ended = sqlx::query(AssertSqlSafe(format!(
        "update enrollments set status = 'finished', exit_reason = $2, next_step_at = null, updated_at = $3 \
         where id = $1 and status in ('scheduled', 'active', 'paused') {ENDED_RETURNING}"
    )))
    .bind(id)
    .bind(exit_reason)
    .bind(now)
    .fetch_optional(&mut **conn)
    .await?;
    let Some(ended) = ended else { return Ok(false) };
    ended_event(
        conn,
        &ended,
        now,
        EventType::EnrollmentFinished,
        exit_reason,
    )
    .await?;
    Ok(true)
}

/// Notes the person's first reply in an enrollment; answers whether this was it.
pub(crate) async fn mark_replied(
    conn: &mut PersonTx<'_>,
    id: &str,
    at_ms: i64,
) -> Result<bool, ApiError> {
    let marked =
        sqlx::query("update enrollments set replied_at = $2 where id = $1 and replied_at is null")
            .bind(id)
            .bind(at_ms)
            .execute(&mut **conn)
            .await?;
    Ok(marked.rows_affected() == 1)
}

/// Notes a reply on the person's enrollments from `sender_id` that had already gone through all
/// their steps: a reply to the last step counts for it (`get_sequence_stats`), whenever it comes.
pub(crate) async fn note_reply_after_last_step(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    prospect_id: &str,
    sender_id: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    sqlx::query(
        "update enrollments set replied_at = $4 where workspace_id = $1 and prospect_id = $2 \
         and sender_id = $3 and replied_at is null and status = 'finished' and exit_reason = 'completed_steps'",
    )
    .bind(workspace_id)
    .bind(prospect_id)
    .bind(sender_id)
    .bind(at_ms)
    .execute(&mut **conn)
    .await?;
    Ok(())
}

/// Finishes a live enrollment whose prospect replied (its sequence stops on reply).
pub(crate) async fn finish_replied(
    conn: &mut PersonTx<'_>,
    id: &str,
    now: i64,
) -> Result<(), ApiError> {
    let ended = sqlx::query(AssertSqlSafe(format!(
        "update enrollments set status = 'finished', exit_reason = 'replied', next_step_at = null, updated_at = $2 \
         where id = $1 {ENDED_RETURNING}"
    )))
    .bind(id)
    .bind(now)
    .fetch_optional(&mut **conn)
    .await?;
    if let Some(ended) = ended {
        ended_event(conn, &ended, now, EventType::EnrollmentFinished, "replied").await?;
    }
    Ok(())
}

/// Fails an approved enrollment that has not ended, keeping the error (`code: sentence`).
pub(crate) async fn fail(
    conn: &mut PersonTx<'_>,
    id: &str,
    last_error: &str,
    now: i64,
) -> Result<bool, ApiError> {
    let failed = sqlx::query(AssertSqlSafe(format!(
        "update enrollments set status = 'failed', last_error = $2, next_step_at = null, updated_at = $3 \
         where id = $1 and status in ('scheduled', 'active', 'paused') {ENDED_RETURNING}"
    )))
    .bind(id)
    .bind(last_error)
    .bind(now)
    .fetch_optional(&mut **conn)
    .await?;
    let Some(failed) = failed else {
        return Ok(false);
    };
    ended_event(conn, &failed, now, EventType::EnrollmentFailed, last_error).await?;
    Ok(true)
}

/// What an update that ends enrollments returns, for [`ended_event`].
const ENDED_RETURNING: &str = "returning id, workspace_id, sequence_id, prospect_id, approved_at";

/// The `enrollment.finished` (with its exit reason) or `enrollment.failed` (with its error) of
/// an enrollment an update ended, from the update's [`ENDED_RETURNING`] row.
async fn ended_event(
    conn: &mut PersonTx<'_>,
    ended: &AnyRow,
    now: i64,
    kind: EventType,
    why: &str,
) -> Result<(), ApiError> {
    let workspace_id: String = ended.try_get("workspace_id")?;
    let mut data = json!({
        "enrollment_id": ended.try_get::<String, _>("id")?,
        "sequence_id": ended.try_get::<String, _>("sequence_id")?,
        "prospect_id": ended.try_get::<String, _>("prospect_id")?,
    });
    let key = if kind == EventType::EnrollmentFailed {
        "error"
    } else {
        "exit_reason"
    };
    data[key] = Value::from(why);
    events::record(conn, &workspace_id, now, kind, data).await?;
    Ok(())
}

/// Sets when the enrollment's step is next looked at, and the sender slot it holds, if any.
pub(crate) async fn set_wait(
    conn: &mut PersonTx<'_>,
    id: &str,
    next_step_at: i64,
    slot_at: Option<i64>,
) -> Result<(), ApiError> {
    let conn: &mut sqlx::AnyConnection = conn;
    sqlx::query("update enrollments set next_step_at = $2, slot_at = $3 where id = $1")
        .bind(id)
        .bind(next_step_at)
        .bind(slot_at)
        .execute(conn)
        .await?;
    Ok(())
}

/// Whether any step of the enrollment reached the person (sent, or found them connected already).
pub(crate) async fn any_sent(conn: &mut PersonTx<'_>, id: &str) -> Result<bool, ApiError> {
    let sent: Option<i64> = sqlx::query_scalar(
        "select 1 from enrollment_events where enrollment_id = $1 \
         and outcome in ('sent', 'already_connected') limit 1",
    )
    .bind(id)
    .fetch_optional(&mut **conn)
    .await?;
    Ok(sent.is_some())
}

/// Holds an enrollment at its `condition` step until `until` (its `within_days` deadline).
pub(crate) async fn wait_on_condition(
    conn: &mut PersonTx<'_>,
    id: &str,
    until: i64,
    now: i64,
) -> Result<(), ApiError> {
    let conn: &mut sqlx::AnyConnection = conn;
    sqlx::query(
        "update enrollments set status = case when status = 'scheduled' then 'active' else status end, \
         condition_until = $2, next_step_at = $2, slot_at = null, updated_at = $3 where id = $1",
    )
    .bind(id)
    .bind(until)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// Something a waiting `condition` step asks about happened (an acceptance, a reply): the step
/// is decided again at `at_ms` instead of at its deadline. Answers whether it was waiting. An
/// enrollment held past an out-of-office reply (its next step no longer at the condition's
/// deadline) stays held.
pub(crate) async fn wake_condition(
    conn: &mut PersonTx<'_>,
    clock: &outreach_runtime::prelude::Clock,
    workspace_id: &str,
    id: &str,
    at_ms: i64,
) -> Result<bool, ApiError> {
    let woken: Option<String> = sqlx::query_scalar(
        "update enrollments set next_step_at = $2 where id = $1 and condition_until is not null \
         and next_step_at = condition_until and next_step_at > $2 returning status",
    )
    .bind(id)
    .bind(at_ms)
    .fetch_optional(&mut **conn)
    .await?;
    match woken.as_deref() {
        Some("scheduled" | "active") => {
            crate::step_jobs::schedule(conn, clock, workspace_id, id, at_ms).await?;
            Ok(true)
        }
        Some(_) => Ok(true),
        None => Ok(false),
    }
}

/// Notes that the enrollment's invitation was accepted at `at_ms`; with `next_step_at`, also when
/// its next step comes due.
pub(crate) async fn mark_accepted(
    conn: &mut PersonTx<'_>,
    id: &str,
    at_ms: i64,
    next_step_at: Option<i64>,
) -> Result<(), ApiError> {
    let conn: &mut sqlx::AnyConnection = conn;
    sqlx::query(
        "update enrollments set accepted_at = $2, next_step_at = coalesce($3, next_step_at) where id = $1",
    )
    .bind(id)
    .bind(at_ms)
    .bind(next_step_at)
    .execute(conn)
    .await?;
    Ok(())
}

/// Notes that the enrollment's invitation went out at `at_ms`.
pub(crate) async fn mark_invited(
    conn: &mut PersonTx<'_>,
    id: &str,
    at_ms: i64,
) -> Result<(), ApiError> {
    let conn: &mut sqlx::AnyConnection = conn;
    sqlx::query("update enrollments set invited_at = $2 where id = $1")
        .bind(id)
        .bind(at_ms)
        .execute(conn)
        .await?;
    Ok(())
}

/// Records that the steps before `step_index` are done (the last one: nothing follows).
pub(crate) async fn set_step_index(
    conn: &mut PersonTx<'_>,
    id: &str,
    step_index: i64,
) -> Result<(), ApiError> {
    let conn: &mut sqlx::AnyConnection = conn;
    sqlx::query("update enrollments set step_index = $2 where id = $1")
        .bind(id)
        .bind(step_index)
        .execute(conn)
        .await?;
    Ok(())
}

/// Moves the enrollment to its step `step_index`, due at `next_step_at`; a `scheduled` one
/// becomes `active`, a status a person set meanwhile (`paused`, finished) stays. Answers the
/// status after the change.
pub(crate) async fn advance(
    conn: &mut PersonTx<'_>,
    id: &str,
    step_index: i64,
    next_step_at: i64,
    now: i64,
) -> Result<EnrollmentStatus, ApiError> {
    let conn: &mut sqlx::AnyConnection = conn;
    let status: String = sqlx::query(
        "update enrollments set status = case when status in ('scheduled', 'active') then 'active' else status end, \
         step_index = $2, next_step_at = $3, slot_at = null, condition_until = null, updated_at = $4 \
         where id = $1 returning status",
    )
    .bind(id)
    .bind(step_index)
    .bind(next_step_at)
    .bind(now)
    .fetch_one(&mut *conn)
    .await?
    .try_get("status")?;
    EnrollmentStatus::from_db(&status)
}

/// Deletes a sequence's enrollments and their history (the sequence is being deleted).
pub(crate) async fn delete_of_sequence(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    sequence_id: &str,
) -> Result<(), ApiError> {
    let conn: &mut sqlx::AnyConnection = conn;
    for sql in [
        "delete from enrollment_events where enrollment_id in (select id from enrollments where workspace_id = $1 and sequence_id = $2)",
        "delete from enrollments where workspace_id = $1 and sequence_id = $2",
    ] {
        sqlx::query(sql)
            .bind(workspace_id)
            .bind(sequence_id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SQL list of live statuses is the typed one.
    #[test]
    fn live_sql_lists_the_live_statuses() {
        let listed: Vec<String> = EnrollmentStatus::LIVE
            .iter()
            .map(|status| format!("'{}'", status.as_str()))
            .collect();
        assert_eq!(LIVE_SQL, format!("({})", listed.join(", ")));
    }
}
