//! Deciding the approval queue: `approve_outreach` (scope `send`: it reaches people) and
//! `reject_outreach` (scope `write`).
//!
//! Both are all-or-nothing: an id that is unknown (or another workspace's), of another sequence or
//! run than the one named, already decided, or an agent's proposal past its expiry refuses the
//! whole call with the ids named, so a caller never mistakes a partial approval for a full one.
//! Each first works out its plan by reading only; `dry_run` returns that plan, and a real call
//! writes it with conditional updates, so two calls racing over the same items cannot both decide
//! them. Approving never sends at once: an enrollment's first step is due after its delay and then
//! waits for its sender's working hours, limits and pacing; a reply is queued for the sender's next
//! working window. [`approve`] is the same decision for an autonomous agent run, on its behalf.

use std::collections::{BTreeMap, HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::{ApprovalKind, ApprovalStatus, MAX_IDS, expired};
use crate::approval_items::{self, Decision};
use crate::common::IdKind;
use crate::delivery::replies;
use crate::enrollments;
use crate::lists::placeholders;
use crate::person_lock::PersonTx;
use crate::senders::QuotaKind;
use crate::sequences::{self, RenderedText, SequenceStatus};
use outreach_runtime::prelude::{ApiError, Clock, Ctx, ErrorCode, Timestamp, action};

/// The input of `approve_outreach` and `reject_outreach`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(extend("not" = {"anyOf": [{"required": ["sequence_id", "run_id"], "properties": {"sequence_id": {"not": {"type": "null"}}, "run_id": {"not": {"type": "null"}}}}, {"properties": {"ids": {"type": "null"}, "sequence_id": {"type": "null"}, "run_id": {"type": "null"}}}]}))]
pub struct DecideInput {
    /// `apr_...`
    ///
    /// With `sequence_id` or `run_id` too, every item must be of that sequence or run. An unknown
    /// id is a 404, one of another sequence or run a 400, an item already decided or an agent's
    /// proposal past its 72-hour expiry a 409; nothing is decided then.
    #[schemars(length(min = 1, max = 1000))]
    pub ids: Option<Vec<String>>,
    /// Every pending item of this sequence (`seq_...`).
    pub sequence_id: Option<String>,
    /// Every pending item this agent run (`run_...`) proposed.
    pub run_id: Option<String>,
    /// Preview only; needs only `read`.
    ///
    /// Answers what would happen, changing nothing. The answer names the enrollments, the replies
    /// and the first send time per sender.
    #[serde(default)]
    pub dry_run: bool,
}

/// One pending item chosen for a decision.
#[derive(Debug, Clone)]
struct Chosen {
    id: String,
    kind: ApprovalKind,
    /// The enrollment, or for a reply the conversation.
    subject_id: String,
    sequence_id: Option<String>,
    prospect_id: String,
    sender_id: Option<String>,
    texts: Vec<RenderedText>,
}

/// Reads the items a decision is about; every problem refuses the whole call.
async fn choose(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    input: &DecideInput,
    now: i64,
) -> Result<Vec<Chosen>, ApiError> {
    if input.sequence_id.is_some() && input.run_id.is_some() {
        return Err(ApiError::invalid_request(
            "Give `sequence_id` or `run_id`, not both.",
        ));
    }
    // 404 for a sequence or run that is not there, before anything else.
    if let Some(sequence_id) = &input.sequence_id {
        sequences::fetch_row(conn, workspace_id, sequence_id).await?;
    }
    if let Some(run_id) = &input.run_id {
        check_run_exists(conn, workspace_id, run_id).await?;
    }
    let rows = read_items(conn, workspace_id, input).await?;
    judge(&rows, input, now)
}

/// The approval rows a decision names: its `ids` (404 naming the unknown ones), or every pending
/// item of its sequence or run, oldest first.
async fn read_items(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    input: &DecideInput,
) -> Result<Vec<AnyRow>, ApiError> {
    let columns = "id, kind, status, subject_id, sequence_id, prospect_id, sender_id, texts, run_id, expires_at";
    let rows = match (&input.ids, &input.sequence_id, &input.run_id) {
        (Some(ids), _, _) => {
            let mut seen = HashSet::new();
            let ids: Vec<&str> = ids
                .iter()
                .map(String::as_str)
                .filter(|id| seen.insert(*id))
                .collect();
            if ids.is_empty() {
                return Err(ApiError::invalid_request("`ids` must hold at least one id."));
            }
            if ids.len() > MAX_IDS {
                return Err(ApiError::invalid_request(format!(
                    "`ids` holds {} ids; send at most {MAX_IDS} per call.",
                    ids.len()
                )));
            }
            let shaped: Vec<&str> = ids
                .iter()
                .copied()
                .filter(|id| IdKind::Approval.is_id(id))
                .collect();
            let mut rows = Vec::new();
            for chunk in shaped.chunks(500) {
                let sql = format!(
                    "select {columns} from approvals where workspace_id = $1 and id in {}",
                    placeholders(2, chunk.len())
                );
                let mut query = sqlx::query(AssertSqlSafe(sql))
                    .persistent(false)
                    .bind(workspace_id);
                for id in chunk {
                    query = query.bind(*id);
                }
                rows.extend(query.fetch_all(&mut *conn).await?);
            }
            let found: HashSet<String> = rows
                .iter()
                .map(|row| row.try_get::<String, _>("id"))
                .collect::<Result<_, _>>()?;
            let unknown: Vec<String> = ids
                .iter()
                .filter(|id| !found.contains(**id))
                .map(|id| (*id).to_owned())
                .collect();
            if !unknown.is_empty() {
                return Err(ApiError::new(
                    ErrorCode::NOT_FOUND,
                    format!(
                        "No approval item with id {} in this workspace; nothing was decided.",
                        quoted(&unknown)
                    ),
                )
                .with_extra("unknown_ids", unknown));
            }
            rows
        }
        (None, Some(sequence_id), _) => {
            sqlx::query(AssertSqlSafe(format!(
                "select {columns} from approvals where workspace_id = $1 and sequence_id = $2 and status = 'pending' \
                 order by created_at, id"
            )))
            .bind(workspace_id)
            .bind(sequence_id)
            .fetch_all(&mut *conn)
            .await?
        }
        (None, None, Some(run_id)) => {
            sqlx::query(AssertSqlSafe(format!(
                "select {columns} from approvals where workspace_id = $1 and run_id = $2 and status = 'pending' \
                 order by created_at, id"
            )))
            .bind(workspace_id)
            .bind(run_id)
            .fetch_all(&mut *conn)
            .await?
        }
        (None, None, None) => {
            return Err(ApiError::invalid_request(
                "Give `ids` (the items to decide), `sequence_id` (every pending item of a sequence) or `run_id` \
                 (every pending item an agent run proposed).",
            ));
        }
    };
    Ok(rows)
}

/// Judges the rows read for a decision without touching the database: an item of another
/// sequence or run, one already decided, or one past its expiry refuses the whole call.
fn judge(rows: &[AnyRow], input: &DecideInput, now: i64) -> Result<Vec<Chosen>, ApiError> {
    let mut elsewhere = Vec::new();
    let mut decided = Vec::new();
    let mut lapsed = Vec::new();
    let mut chosen = Vec::with_capacity(rows.len());
    for row in rows {
        let id: String = row.try_get("id")?;
        let status = ApprovalStatus::from_db(&row.try_get::<String, _>("status")?)?;
        let item_sequence: Option<String> = row.try_get("sequence_id")?;
        let item_run: Option<String> = row.try_get("run_id")?;
        let other_sequence = input
            .sequence_id
            .as_ref()
            .is_some_and(|wanted| item_sequence.as_ref() != Some(wanted));
        let other_run = input
            .run_id
            .as_ref()
            .is_some_and(|wanted| item_run.as_ref() != Some(wanted));
        if other_sequence || other_run {
            elsewhere.push(id);
            continue;
        }
        if status != ApprovalStatus::Pending {
            decided.push(format!("`{id}` is `{status}`"));
            continue;
        }
        if row
            .try_get::<Option<i64>, _>("expires_at")?
            .is_some_and(|at| at <= now)
        {
            lapsed.push(id);
            continue;
        }
        chosen.push(Chosen {
            id,
            kind: ApprovalKind::from_db(&row.try_get::<String, _>("kind")?)?,
            subject_id: row.try_get("subject_id")?,
            sequence_id: item_sequence,
            prospect_id: row.try_get("prospect_id")?,
            sender_id: row.try_get("sender_id")?,
            texts: serde_json::from_str(&row.try_get::<String, _>("texts")?)
                .map_err(ApiError::internal)?,
        });
    }
    if !elsewhere.is_empty() {
        let (what, named) = match (&input.sequence_id, &input.run_id) {
            (Some(sequence_id), _) => ("sequence", sequence_id.as_str()),
            (_, Some(run_id)) => ("run", run_id.as_str()),
            _ => ("", ""),
        };
        return Err(ApiError::invalid_request(format!(
            "{} {} not of {what} `{named}`; nothing was decided.",
            quoted(&elsewhere),
            if elsewhere.len() == 1 { "is" } else { "are" },
        ))
        .with_extra(
            if what == "run" {
                "other_run_ids"
            } else {
                "other_sequence_ids"
            },
            elsewhere,
        ));
    }
    if !decided.is_empty() {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Only `pending` items can be decided: {}; nothing was decided.",
                decided.join(", ")
            ),
        ));
    }
    if !lapsed.is_empty() {
        return Err(expired(&lapsed));
    }
    Ok(chosen)
}

fn quoted(ids: &[String]) -> String {
    ids.iter()
        .map(|id| format!("`{id}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One enrollment an approval schedules.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ApprovedItem {
    /// The approval item (`apr_...`).
    pub id: String,
    pub enrollment_id: String,
    pub prospect_id: String,
    pub sequence_id: String,
    pub sender_id: String,
    /// When its first step is due (its delay after now), before the sender's hours and limits.
    pub next_step_at: Timestamp,
}

/// One reply an approval queues.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ApprovedReply {
    /// The approval item (`apr_...`).
    pub id: String,
    pub conversation_id: String,
    pub prospect_id: String,
    pub sender_id: String,
    /// The queued message (`msg_...`); `null` with `dry_run`.
    pub message_id: Option<String>,
    /// When it is due: the earliest moment its sender may send a message (working hours, a
    /// pause, the message limit, the gap after its last call).
    pub send_at: Timestamp,
}

/// What a sender would start sending.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SenderPlan {
    pub sender_id: String,
    /// How many approved enrollments it sends to.
    pub enrollments: u64,
    /// The earliest time its first step may go out, by the rules every send follows (working
    /// hours, a pause, the limits of the step's kind, the gap after the sender's last call); null
    /// when no time can be promised (the account is not connected, or a limit is 0).
    pub first_send_at: Option<Timestamp>,
}

/// An item that was pending but is not approved, and why.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NotApproved {
    pub id: String,
    pub prospect_id: String,
    /// `do_not_contact`: the prospect was marked do-not-contact since it was proposed; the item
    /// expires (and an enrollment finishes).
    pub reason: String,
}

/// What `approve_outreach` did, or would do with `dry_run`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ApproveOutcome {
    pub dry_run: bool,
    /// How many items were (or would be) approved.
    pub approved: u64,
    /// The enrollments scheduled.
    pub items: Vec<ApprovedItem>,
    /// The replies queued (items of kind `reply`).
    pub replies: Vec<ApprovedReply>,
    /// Per sender: how many enrollments and the first send time.
    pub senders: Vec<SenderPlan>,
    /// Items that could not be approved, with the reason; they were expired (not with `dry_run`).
    pub not_approved: Vec<NotApproved>,
}

/// Approve outreach: the sequence steps or drafted replies of these items may now be sent.
///
/// Reaches real people, paced by each sender's hours and limits; preview with `dry_run: true`.
/// Name the items by `ids`, a `sequence_id` or a `run_id` (with both, each id must be of it). All
/// or nothing: an unknown, decided or expired item refuses the call.
///
/// Name the items by `ids`, a `sequence_id` or a `run_id`. An unknown, foreign, decided or expired
/// item refuses the whole call, naming the ids. The preview needs only the `read` scope and changes
/// nothing. Sends go out paced, never in a burst.
#[action(scope = "send", idempotent, http = "POST /approvals/approve")]
pub async fn approve_outreach(ctx: Ctx, input: DecideInput) -> Result<ApproveOutcome, ApiError> {
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    approve(
        &mut tx,
        ctx.clock(),
        ctx.workspace_id(),
        &ctx.principal().person_id,
        &input,
        now,
    )
    .await
}

outreach_runtime::prelude::example!(approve_outreach,
    request: {"dry_run": true, "ids": ["apr_YCD0yfaQxyGxSBDJPSaJ"]},
    response: {
        "approved": 1,
        "dry_run": true,
        "items": [
            {
                "enrollment_id": "enr_OYC1RvHwvhhXPLiM61gx",
                "id": "apr_YCD0yfaQxyGxSBDJPSaJ",
                "next_step_at": "2026-11-23T21:19:40.423Z",
                "prospect_id": "prs_pQOP39fLUiEK6S7Cciku",
                "sender_id": "snd_jp6TNuolp8f32URYMVrb",
                "sequence_id": "seq_sGbl2nzkshQDV6qitLc9"
            }
        ],
        "not_approved": [],
        "replies": [],
        "senders": [
            {
                "enrollments": 1,
                "first_send_at": "2026-11-23T21:19:40.423Z",
                "sender_id": "snd_jp6TNuolp8f32URYMVrb"
            }
        ]
    }
);

outreach_runtime::prelude::parity!(approve_outreach, write,
    ok: {"dry_run": false, "ids": ["$pending_approval"]},
    fails: {"ids": ["$missing:apr"]} => NOT_FOUND
);

outreach_runtime::prelude::preview_field!(approve_outreach, "dry_run");

/// The decision of `approve_outreach`, made by `person_id` in the caller's transaction (an
/// autonomous agent run approves its own proposals through it, on behalf of the person who
/// started it).
pub(crate) async fn approve(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    person_id: &str,
    input: &DecideInput,
    now: i64,
) -> Result<ApproveOutcome, ApiError> {
    // The plan: what each chosen item becomes, and when each sender's first step is due. A dry
    // run answers it; a real one applies it.
    let chosen = choose(conn, workspace_id, input, now).await?;
    // A real decision writes the chosen people's items and enrollments: they are locked first
    // (see `person_lock`); the writes are conditional, so an item another call decided before
    // the lock refuses this one.
    let people = chosen
        .iter()
        .filter(|_| !input.dry_run)
        .map(|c| c.prospect_id.as_str());
    let conn = &mut crate::person_lock::lock(conn, workspace_id, people).await?;
    let mut plans = plan_sequences(conn, workspace_id, &chosen, now).await?;
    let blocked = do_not_contact(conn, workspace_id, &chosen).await?;
    let sorted = sort_chosen(conn, workspace_id, &chosen, &blocked, &mut plans, now).await?;
    let senders = plan_senders(conn, workspace_id, &sorted.items, &plans, now).await?;
    let approved_replies = if input.dry_run {
        sorted
            .replies
            .into_iter()
            .map(|(_, reply, _)| reply)
            .collect()
    } else {
        apply_plan(conn, clock, workspace_id, person_id, &sorted, now).await?
    };
    Ok(ApproveOutcome {
        dry_run: input.dry_run,
        approved: (sorted.items.len() + approved_replies.len()) as u64,
        items: sorted.items,
        replies: approved_replies,
        senders,
        not_approved: sorted.not_approved.into_iter().map(|(_, n)| n).collect(),
    })
}

/// The chosen items of an approval, sorted by what becomes of them.
struct Sorted<'c> {
    items: Vec<ApprovedItem>,
    replies: Vec<(&'c Chosen, ApprovedReply, replies::PlannedReply)>,
    not_approved: Vec<(&'c Chosen, NotApproved)>,
}

/// The sequences of the chosen items: stopped and completed ones take no approvals; each gives
/// the first step's delay and the senders to assign from.
async fn plan_sequences(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    chosen: &[Chosen],
    now: i64,
) -> Result<HashMap<String, SequencePlan>, ApiError> {
    let mut plans: HashMap<String, SequencePlan> = HashMap::new();
    for item in chosen {
        let Some(sequence_id) = &item.sequence_id else {
            continue;
        };
        if plans.contains_key(sequence_id) {
            continue;
        }
        let sequence = sequences::fetch(conn, workspace_id, sequence_id, now).await?;
        if matches!(
            sequence.status,
            SequenceStatus::Stopped | SequenceStatus::Completed
        ) {
            return Err(ApiError::new(
                ErrorCode::INVALID_STATE,
                format!(
                    "Sequence `{}` is `{}`; its items cannot be approved. Nothing was decided.",
                    sequence.id, sequence.status
                ),
            )
            .with_extra("status", sequence.status.as_str()));
        }
        let needs_sender = chosen.iter().any(|c| {
            c.sequence_id.as_ref() == Some(&sequence.id)
                && c.kind == ApprovalKind::Enrollment
                && c.sender_id.is_none()
        });
        if needs_sender && sequence.sender_ids.is_empty() {
            return Err(ApiError::new(
                ErrorCode::INVALID_STATE,
                format!(
                    "Sequence `{}` has no senders to send from; add `sender_ids` with `update_sequence` before approving. Nothing was decided.",
                    sequence.id
                ),
            ));
        }
        let load = super::propose::sender_load(conn, workspace_id, &sequence.sender_ids).await?;
        let first = sequence.steps.first();
        let delay_ms = first.map_or(0, |step| i64::from(step.delay_hours) * 3_600_000);
        plans.insert(
            sequence.id.clone(),
            SequencePlan {
                load,
                next_step_at: now + delay_ms,
                first_kind: first.and_then(|step| step.kind.quota_kind()),
            },
        );
    }

    Ok(plans)
}

/// What each chosen item becomes: an enrollment with its sender, a reply with its send time, or
/// not approved (the person is now do-not-contact).
async fn sort_chosen<'c>(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    chosen: &'c [Chosen],
    blocked: &HashSet<String>,
    plans: &mut HashMap<String, SequencePlan>,
    now: i64,
) -> Result<Sorted<'c>, ApiError> {
    let mut items = Vec::new();
    let mut replies = Vec::new();
    let mut not_approved = Vec::new();
    for item in chosen {
        if blocked.contains(&item.prospect_id) {
            not_approved.push((
                item,
                NotApproved {
                    id: item.id.clone(),
                    prospect_id: item.prospect_id.clone(),
                    reason: "do_not_contact".to_owned(),
                },
            ));
            continue;
        }
        match item.kind {
            ApprovalKind::Enrollment => {
                let plan = item
                    .sequence_id
                    .as_ref()
                    .and_then(|id| plans.get_mut(id))
                    .ok_or_else(|| ApiError::internal("an item's sequence was not planned"))?;
                let sender_id = match &item.sender_id {
                    Some(sender_id) => sender_id.clone(),
                    None => super::propose::pick_sender(&mut plan.load)
                        .ok_or_else(|| ApiError::internal("no sender to pick"))?,
                };
                items.push(ApprovedItem {
                    id: item.id.clone(),
                    enrollment_id: item.subject_id.clone(),
                    prospect_id: item.prospect_id.clone(),
                    sequence_id: item.sequence_id.clone().unwrap_or_default(),
                    sender_id,
                    next_step_at: Timestamp(plan.next_step_at),
                });
            }
            ApprovalKind::Reply => {
                let planned =
                    replies::plan_reply(conn, workspace_id, &item.subject_id, now).await?;
                replies.push((
                    item,
                    ApprovedReply {
                        id: item.id.clone(),
                        conversation_id: item.subject_id.clone(),
                        prospect_id: item.prospect_id.clone(),
                        sender_id: planned.sender_id.clone(),
                        message_id: None,
                        send_at: Timestamp(planned.due),
                    },
                    planned,
                ));
            }
        }
    }

    Ok(Sorted {
        items,
        replies,
        not_approved,
    })
}

/// Per sender, how many enrollments it gets and when its first step can go out, by the gate's
/// rules.
async fn plan_senders(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    items: &[ApprovedItem],
    plans: &HashMap<String, SequencePlan>,
    now: i64,
) -> Result<Vec<SenderPlan>, ApiError> {
    // Per sender, how many it gets and, per kind of first step, when the earliest is due.
    let mut per_sender: BTreeMap<String, (u64, Vec<FirstDue>)> = BTreeMap::new();
    for item in items {
        let kind = plans
            .get(&item.sequence_id)
            .and_then(|plan| plan.first_kind);
        let (count, due) = per_sender.entry(item.sender_id.clone()).or_default();
        *count += 1;
        let at = item.next_step_at.ms();
        match due.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, earliest)) => *earliest = (*earliest).min(at),
            None => due.push((kind, at)),
        }
    }
    let mut senders = Vec::with_capacity(per_sender.len());
    for (sender_id, (enrollments, due)) in per_sender {
        let mut first_send_at: Option<i64> = None;
        for (kind, earliest) in due {
            let at = crate::delivery::first_send_time(
                conn,
                workspace_id,
                &sender_id,
                kind,
                earliest,
                now,
            )
            .await?;
            first_send_at = match (first_send_at, at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        senders.push(SenderPlan {
            sender_id,
            enrollments,
            first_send_at: first_send_at.map(Timestamp),
        });
    }

    Ok(senders)
}

/// Applies an approval's plan: the enrollments scheduled, the replies queued, the blocked
/// items expired, and the follow-up that ends the runs now decided. Answers the replies with
/// their queued message ids.
async fn apply_plan(
    conn: &mut PersonTx<'_>,
    clock: &Clock,
    workspace_id: &str,
    person_id: &str,
    sorted: &Sorted<'_>,
    now: i64,
) -> Result<Vec<ApprovedReply>, ApiError> {
    let mut approved_replies = Vec::with_capacity(sorted.replies.len());
    apply_approval(conn, clock, workspace_id, person_id, &sorted.items, now).await?;
    for (item, reply, planned) in &sorted.replies {
        let text = item.texts.first().map(|t| t.text.as_str()).unwrap_or("");
        let message_id = replies::queue_reply(
            conn,
            clock,
            workspace_id,
            planned,
            text,
            Some(person_id),
            now,
        )
        .await?;
        mark_approved(conn, workspace_id, &item.id, person_id, None, now).await?;
        approved_replies.push(ApprovedReply {
            message_id: Some(message_id),
            ..reply.clone()
        });
    }
    for (item, _) in &sorted.not_approved {
        expire_item(conn, clock, workspace_id, item, "do_not_contact", now).await?;
    }
    crate::followups::runs_decided(conn, clock, workspace_id, now).await?;
    Ok(approved_replies)
}

/// Of a sender's approved enrollments whose first step is of one kind, when the earliest is due.
type FirstDue = (Option<QuotaKind>, i64);

struct SequencePlan {
    load: Vec<(String, i64)>,
    next_step_at: i64,
    /// What the first step counts against (`None`: the sequence has no steps).
    first_kind: Option<QuotaKind>,
}

/// The prospects among the chosen items now marked do-not-contact.
async fn do_not_contact(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    chosen: &[Chosen],
) -> Result<HashSet<String>, ApiError> {
    let ids: Vec<&str> = chosen.iter().map(|c| c.prospect_id.as_str()).collect();
    let mut blocked = HashSet::new();
    for chunk in ids.chunks(500) {
        let sql = format!(
            "select id from prospects where workspace_id = $1 and do_not_contact <> 0 and id in {}",
            placeholders(2, chunk.len())
        );
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .persistent(false)
            .bind(workspace_id);
        for id in chunk {
            query = query.bind(*id);
        }
        for row in query.fetch_all(&mut *conn).await? {
            blocked.insert(row.try_get::<String, _>("id")?);
        }
    }
    Ok(blocked)
}

/// Hands newly scheduled enrollments to the scheduler, in the approval's transaction: each
/// enrollment's step job, due at its `next_step_at`, commits with the approval or not at all.
pub async fn schedule_first_steps(
    conn: &mut sqlx::AnyConnection,
    clock: &Clock,
    workspace_id: &str,
    items: &[ApprovedItem],
) -> Result<(), ApiError> {
    for item in items {
        crate::step_jobs::schedule(
            conn,
            clock,
            workspace_id,
            &item.enrollment_id,
            item.next_step_at.ms(),
        )
        .await?;
    }
    crate::senders::ensure_polling(conn, clock).await
}

/// Marks one pending item approved (by `person_id`), or answers that another call decided it.
async fn mark_approved(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    id: &str,
    person_id: &str,
    sender_id: Option<&str>,
    now: i64,
) -> Result<(), ApiError> {
    let decision = Decision::Approved {
        by: person_id,
        sender_id,
    };
    if !approval_items::decide(conn, workspace_id, id, decision, now).await? {
        return Err(changed_meanwhile(id));
    }
    Ok(())
}

async fn apply_approval(
    conn: &mut PersonTx<'_>,
    clock: &Clock,
    workspace_id: &str,
    person_id: &str,
    items: &[ApprovedItem],
    now: i64,
) -> Result<(), ApiError> {
    for item in items {
        mark_approved(
            conn,
            workspace_id,
            &item.id,
            person_id,
            Some(&item.sender_id),
            now,
        )
        .await?;
        let approved = enrollments::approve(
            conn,
            workspace_id,
            &item.enrollment_id,
            &item.sender_id,
            item.next_step_at.ms(),
            person_id,
            now,
        )
        .await?;
        if !approved {
            return Err(changed_meanwhile(&item.id));
        }
    }
    let ids: Vec<String> = items
        .iter()
        .map(|item| item.enrollment_id.clone())
        .collect();
    enrollments::record_events(
        conn,
        workspace_id,
        &ids,
        now,
        enrollments::EnrollmentEventKind::Approved,
        None,
    )
    .await?;
    if items.is_empty() {
        return Ok(());
    }
    schedule_first_steps(conn, clock, workspace_id, items).await
}

/// Expires one pending item that can no longer be approved, and finishes its enrollment with
/// `exit_reason` (an item of kind `reply` has no enrollment).
async fn expire_item(
    conn: &mut PersonTx<'_>,
    clock: &Clock,
    workspace_id: &str,
    item: &Chosen,
    exit_reason: &str,
    now: i64,
) -> Result<(), ApiError> {
    if !approval_items::decide(conn, workspace_id, &item.id, Decision::Expired, now).await? {
        return Err(changed_meanwhile(&item.id));
    }
    if item.kind == ApprovalKind::Enrollment {
        let enrollment = &item.subject_id;
        super::expiry::finish_enrollment(conn, clock, workspace_id, enrollment, exit_reason, now)
            .await?;
    }
    Ok(())
}

/// Another call decided an item while this one planned: nothing of this call is kept.
pub(crate) fn changed_meanwhile(id: &str) -> ApiError {
    ApiError::new(
        ErrorCode::INVALID_STATE,
        format!(
            "Approval item `{id}` was decided by another call meanwhile; nothing was decided. List the queue again and retry."
        ),
    )
}

/// What `reject_outreach` did, or would do with `dry_run`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RejectOutcome {
    pub dry_run: bool,
    /// How many items were (or would be) rejected.
    pub rejected: u64,
    /// The rejected items (`apr_...`).
    pub ids: Vec<String>,
    /// Their enrollments, now finished with exit reason `rejected` (replies have none).
    pub enrollment_ids: Vec<String>,
}

/// Reject outreach: nothing of these items is ever sent.
///
/// All or nothing, as in `approve_outreach`; `dry_run` previews. The prospects may join another
/// sequence later.
///
/// Takes item `ids` (1 to 1000), a `sequence_id` (all its pending items) or a `run_id` (all pending
/// items an agent run proposed). Each item becomes `rejected`; an enrollment finishes with exit
/// reason `rejected`; a drafted reply is dropped. The `dry_run` preview needs only the `read`
/// scope.
#[action(scope = "write", idempotent, http = "POST /approvals/reject")]
pub async fn reject_outreach(ctx: Ctx, input: DecideInput) -> Result<RejectOutcome, ApiError> {
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let chosen = choose(&mut tx, workspace_id, &input, now).await?;
    let people = chosen
        .iter()
        .filter(|_| !input.dry_run)
        .map(|c| c.prospect_id.as_str());
    let mut tx = crate::person_lock::lock(&mut tx, workspace_id, people).await?;
    let enrollment_ids: Vec<String> = chosen
        .iter()
        .filter(|c| c.kind == ApprovalKind::Enrollment)
        .map(|c| c.subject_id.clone())
        .collect();
    if !input.dry_run {
        let person_id = &ctx.principal().person_id;
        for item in &chosen {
            let decision = Decision::Rejected { by: person_id };
            if !approval_items::decide(&mut tx, workspace_id, &item.id, decision, now).await? {
                return Err(changed_meanwhile(&item.id));
            }
            if item.kind != ApprovalKind::Enrollment {
                continue;
            }
            let subject = [item.subject_id.clone()];
            if enrollments::finish(
                &mut tx,
                ctx.clock(),
                workspace_id,
                &subject,
                "rejected",
                now,
            )
            .await?
                != 1
            {
                return Err(changed_meanwhile(&item.id));
            }
        }
        enrollments::record_events(
            &mut tx,
            workspace_id,
            &enrollment_ids,
            now,
            enrollments::EnrollmentEventKind::Rejected,
            None,
        )
        .await?;
        crate::followups::runs_decided(&mut tx, ctx.clock(), workspace_id, now).await?;
    }
    Ok(RejectOutcome {
        dry_run: input.dry_run,
        rejected: chosen.len() as u64,
        ids: chosen.iter().map(|c| c.id.clone()).collect(),
        enrollment_ids,
    })
}

outreach_runtime::prelude::example!(reject_outreach,
    request: {"ids": ["apr_A9vasBC8sr2fLNSKc52v"]},
    response: {
        "dry_run": false,
        "enrollment_ids": ["enr_myCc0bRsDEzr9570t9kj"],
        "ids": ["apr_A9vasBC8sr2fLNSKc52v"],
        "rejected": 1
    }
);

outreach_runtime::prelude::parity!(reject_outreach, write,
    ok: {"sequence_id": "$active"},
    fails: {
        "dry_run": true,
        "ids": ["$missing:apr"]
    } => NOT_FOUND
);

outreach_runtime::prelude::preview_field!(reject_outreach, "dry_run");

/// 404 unless the workspace has this run.
async fn check_run_exists(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<(), ApiError> {
    let found = IdKind::Run.is_id(id)
        && sqlx::query("select 1 as found from agent_runs where workspace_id = $1 and id = $2")
            .bind(workspace_id)
            .bind(id)
            .fetch_optional(conn)
            .await?
            .is_some();
    if found {
        Ok(())
    } else {
        Err(IdKind::Run.not_found(id))
    }
}
