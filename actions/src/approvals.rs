//! The approval queue: everything that waits for a person before it reaches the network.
//!
//! An item is small and general: a `kind` (`enrollment` today; reply drafts later), the object it
//! decides (`subject_id`), the prospect, sequence and sender it concerns, the rendered texts a
//! person approves, and who or what proposed it. `approve_outreach` and `reject_outreach` are
//! all-or-nothing: an id that is unknown (or another workspace's), of another sequence than the
//! one named, or already decided refuses the whole call with the ids named, so a caller never
//! mistakes a partial approval for a full one. Each first works out its plan by reading only;
//! `dry_run` returns that plan, and a real call writes it with conditional updates, so two calls
//! racing over the same items cannot both decide them.

use std::collections::{BTreeMap, HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use crate::common::{IdKind, json_text};
use crate::enrollments::{self, LIVE_SQL};
use crate::lists::placeholders;
use crate::sequences::{self, RenderedText, SequenceStatus};
use outreach_runtime::prelude::{
    ApiError, Clock, CredentialKind, Ctx, ErrorCode, Page, PageParams, Timestamp, action, paged,
};

/// The most item ids one decision takes.
pub const MAX_IDS: usize = 1000;

outreach_runtime::prelude::text_enum! {
    /// What an approval item decides.
    pub enum ApprovalKind {
        /// Whether a prospect may receive a sequence's steps (the subject is the enrollment).
        Enrollment => "enrollment",
    }
}

outreach_runtime::prelude::text_enum! {
    /// Where an approval item is.
    pub enum ApprovalStatus {
        /// Waits for a person.
        Pending => "pending",
        /// Approved: its outreach may go out.
        Approved => "approved",
        /// Rejected: nothing of it is sent.
        Rejected => "rejected",
        /// No longer relevant (its enrollment or sequence was stopped, or the prospect became do-not-contact).
        Expired => "expired",
    }
}

/// Who or what proposed an item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProposedBy {
    /// `api_key`, `oauth_token` (a person through a credential) or `agent`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The credential's or agent's id.
    pub id: String,
    /// The person behind the credential, if any.
    pub person_id: Option<String>,
    /// The credential's or agent's name.
    pub name: Option<String>,
}

impl ProposedBy {
    /// The caller of this request.
    pub fn caller(ctx: &Ctx) -> Self {
        let principal = ctx.principal();
        Self {
            kind: match principal.credential_kind {
                CredentialKind::ApiKey => "api_key",
                CredentialKind::OauthToken => "oauth_token",
            }
            .to_owned(),
            id: principal.credential_id.clone(),
            person_id: Some(principal.person_id.clone()),
            name: Some(principal.credential_name.clone()),
        }
    }
}

/// The prospect an item concerns, as a person deciding needs to see it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ProspectSummary {
    pub full_name: Option<String>,
    pub title: Option<String>,
    pub company_name: Option<String>,
    pub profile_url: Option<String>,
}

/// One item of the approval queue.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ApprovalItem {
    pub id: String,
    /// `enrollment`.
    pub kind: ApprovalKind,
    /// `pending`, `approved`, `rejected` or `expired`.
    pub status: ApprovalStatus,
    /// The object decided: the enrollment (`enr_...`) for kind `enrollment`.
    pub subject_id: String,
    pub prospect_id: String,
    pub prospect: Option<ProspectSummary>,
    pub sequence_id: Option<String>,
    pub sequence_name: Option<String>,
    pub sender_id: Option<String>,
    /// The texts the prospect would receive, rendered for them, by step.
    pub texts: Vec<RenderedText>,
    pub proposed_by: ProposedBy,
    /// The agent run (`run_...`) that proposed it; `null` when a person did.
    pub run_id: Option<String>,
    /// The agent (`agt_...`) whose run proposed it; `null` when a person did.
    pub agent_id: Option<String>,
    pub created_at: Timestamp,
    pub decided_at: Option<Timestamp>,
    /// The person (`psn_...`) who approved or rejected it.
    pub decided_by: Option<String>,
}

const ITEM_COLUMNS: &str = "a.id, a.kind, a.status, a.subject_id, a.prospect_id, a.sequence_id, a.sender_id, a.texts, \
     a.proposed_by, a.run_id, a.agent_id, a.created_at, a.decided_at, a.decided_by, \
     p.first_name, p.last_name, p.title, p.company_name, p.profile_url, s.name as sequence_name";

const ITEM_FROM: &str = "approvals a left join prospects p on p.id = a.prospect_id \
     left join sequences s on s.id = a.sequence_id";

impl ApprovalItem {
    fn from_row(row: &AnyRow) -> Result<Self, ApiError> {
        let first: Option<String> = row.try_get("first_name")?;
        let last: Option<String> = row.try_get("last_name")?;
        let profile_url: Option<String> = row.try_get("profile_url")?;
        let full_name = crate::prospects::normalize::full_name(first.as_deref(), last.as_deref());
        Ok(Self {
            id: row.try_get("id")?,
            kind: ApprovalKind::from_db(&row.try_get::<String, _>("kind")?)?,
            status: ApprovalStatus::from_db(&row.try_get::<String, _>("status")?)?,
            subject_id: row.try_get("subject_id")?,
            prospect_id: row.try_get("prospect_id")?,
            prospect: Some(ProspectSummary {
                full_name,
                title: row.try_get("title")?,
                company_name: row.try_get("company_name")?,
                profile_url,
            }),
            sequence_id: row.try_get("sequence_id")?,
            sequence_name: row.try_get("sequence_name")?,
            sender_id: row.try_get("sender_id")?,
            texts: serde_json::from_str(&row.try_get::<String, _>("texts")?)
                .map_err(ApiError::internal)?,
            proposed_by: serde_json::from_str(&row.try_get::<String, _>("proposed_by")?)
                .map_err(ApiError::internal)?,
            run_id: row.try_get("run_id")?,
            agent_id: row.try_get("agent_id")?,
            created_at: Timestamp(row.try_get("created_at")?),
            decided_at: row.try_get::<Option<i64>, _>("decided_at")?.map(Timestamp),
            decided_by: row.try_get("decided_by")?,
        })
    }
}

/// A new pending item, as `add_to_sequence` (and later the agents) propose it.
pub struct NewApproval<'a> {
    pub id: &'a str,
    pub kind: ApprovalKind,
    pub subject_id: &'a str,
    pub sequence_id: Option<&'a str>,
    pub prospect_id: &'a str,
    pub sender_id: Option<&'a str>,
    pub texts: &'a [RenderedText],
    /// The agent run that proposes it, with its agent; `None` for a person's proposal.
    pub run: Option<(&'a str, &'a str)>,
}

/// Inserts pending items in the caller's transaction, in chunks.
pub async fn insert_pending(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    proposed_by: &ProposedBy,
    now: i64,
    items: &[NewApproval<'_>],
) -> Result<(), ApiError> {
    let proposed_by = json_text(proposed_by)?;
    for chunk in items.chunks(100) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let n = 4 + 9 * i;
                format!(
                    "(${}, $1, ${}, ${}, ${}, ${}, ${}, 'pending', ${}, $2, ${}, ${}, $3)",
                    n,
                    n + 1,
                    n + 2,
                    n + 3,
                    n + 4,
                    n + 5,
                    n + 6,
                    n + 7,
                    n + 8
                )
            })
            .collect();
        let sql = format!(
            "insert into approvals (id, workspace_id, kind, subject_id, sequence_id, prospect_id, sender_id, status, texts, proposed_by, run_id, agent_id, created_at) values {}",
            values.join(", ")
        );
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .persistent(false)
            .bind(workspace_id)
            .bind(&proposed_by)
            .bind(now);
        for item in chunk {
            query = query
                .bind(item.id)
                .bind(item.kind.as_str())
                .bind(item.subject_id)
                .bind(item.sequence_id)
                .bind(item.prospect_id)
                .bind(item.sender_id)
                .bind(json_text(&item.texts)?)
                .bind(item.run.map(|(run_id, _)| run_id))
                .bind(item.run.map(|(_, agent_id)| agent_id));
        }
        query.execute(&mut *conn).await?;
    }
    Ok(())
}

/// The input of `list_approvals`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListApprovalsInput {
    /// Only items of this sequence (`seq_...`).
    pub sequence_id: Option<String>,
    /// Only items of this kind.
    pub kind: Option<ApprovalKind>,
    /// Only items proposed by this agent run (`run_...`).
    pub run_id: Option<String>,
    /// Only items proposed by runs of this agent (`agt_...`).
    pub agent_id: Option<String>,
    /// Only items in this status; default `pending`.
    pub status: Option<ApprovalStatus>,
    #[serde(flatten)]
    pub page: PageParams,
}

/// List the approval queue, newest first.
///
/// Shows what waits for a person before it reaches the network (`status` defaults to `pending`):
/// each item names the prospect (with name, title, company, profile), the sequence and sender, the
/// texts the prospect would receive, and who proposed it (with `run_id` and `agent_id` when an agent
/// run did). Filter by `sequence_id`, `kind`, `run_id` and `agent_id`. Paged
/// with `limit` (1 to 200, default 25) and `offset`. Costs nothing.
#[action(scope = "read", http = "GET /approvals")]
pub async fn list_approvals(
    ctx: Ctx,
    input: ListApprovalsInput,
) -> Result<Page<ApprovalItem>, ApiError> {
    let status = input.status.unwrap_or(ApprovalStatus::Pending);
    let mut filter = String::from("a.workspace_id = $1 and a.status = $2");
    filter.push_str(if input.sequence_id.is_some() {
        " and a.sequence_id = $3"
    } else {
        " and $3 = $3"
    });
    filter.push_str(if input.kind.is_some() {
        " and a.kind = $4"
    } else {
        " and $4 = $4"
    });
    filter.push_str(if input.run_id.is_some() {
        " and a.run_id = $5"
    } else {
        " and $5 = $5"
    });
    filter.push_str(if input.agent_id.is_some() {
        " and a.agent_id = $6"
    } else {
        " and $6 = $6"
    });
    let sequence_id = input.sequence_id.clone().unwrap_or_default();
    let run_id = input.run_id.clone().unwrap_or_default();
    let agent_id = input.agent_id.clone().unwrap_or_default();
    let kind = input.kind.map_or("", ApprovalKind::as_str);
    paged(
        ctx.db().pool(),
        input.page,
        format!("select count(*) from approvals a where {filter}"),
        format!(
            "select {ITEM_COLUMNS} from {ITEM_FROM} where {filter} order by a.created_at desc, a.id desc limit $7 offset $8"
        ),
        |query| {
            query
                .bind(ctx.workspace_id())
                .bind(status.as_str())
                .bind(sequence_id.clone())
                .bind(kind)
                .bind(run_id.clone())
                .bind(agent_id.clone())
        },
        ApprovalItem::from_row,
    )
    .await
}

/// The input of `approve_outreach` and `reject_outreach`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct DecideInput {
    /// Item ids (`apr_...`), 1 to 1000. With `sequence_id` too, every item must be of that sequence.
    pub ids: Option<Vec<String>>,
    /// Every pending item of this sequence (`seq_...`), when `ids` is not given.
    pub sequence_id: Option<String>,
    /// Return what would happen without changing anything. Default false.
    #[serde(default)]
    pub dry_run: bool,
}

/// One pending item chosen for a decision, with its enrollment.
#[derive(Debug, Clone)]
struct Chosen {
    id: String,
    enrollment_id: String,
    sequence_id: String,
    prospect_id: String,
    sender_id: Option<String>,
}

/// Reads the items a decision is about; every problem refuses the whole call.
async fn choose(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    input: &DecideInput,
) -> Result<Vec<Chosen>, ApiError> {
    if let Some(sequence_id) = &input.sequence_id {
        // 404 for a sequence that is not there, before anything else.
        sequences::fetch_row(conn, workspace_id, sequence_id).await?;
    }
    let columns = "id, kind, status, subject_id, sequence_id, prospect_id, sender_id";
    let rows = match (&input.ids, &input.sequence_id) {
        (None, None) => {
            return Err(ApiError::invalid_request(
                "Give `ids` (the items to decide) or `sequence_id` (every pending item of a sequence).",
            ));
        }
        (Some(ids), _) => {
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
                    ErrorCode::NotFound,
                    format!(
                        "No approval item with id {} in this workspace; nothing was decided.",
                        quoted(&unknown)
                    ),
                )
                .with_extra("unknown_ids", unknown));
            }
            rows
        }
        (None, Some(sequence_id)) => {
            sqlx::query(AssertSqlSafe(format!(
                "select {columns} from approvals where workspace_id = $1 and sequence_id = $2 and status = 'pending' \
                 order by created_at, id"
            )))
            .bind(workspace_id)
            .bind(sequence_id)
            .fetch_all(&mut *conn)
            .await?
        }
    };
    let mut other_sequence = Vec::new();
    let mut decided = Vec::new();
    let mut chosen = Vec::with_capacity(rows.len());
    for row in &rows {
        let id: String = row.try_get("id")?;
        let status = ApprovalStatus::from_db(&row.try_get::<String, _>("status")?)?;
        let item_sequence: Option<String> = row.try_get("sequence_id")?;
        if let Some(sequence_id) = &input.sequence_id
            && item_sequence.as_deref() != Some(sequence_id.as_str())
        {
            other_sequence.push(id);
            continue;
        }
        if status != ApprovalStatus::Pending {
            decided.push(format!("`{id}` is `{status}`"));
            continue;
        }
        chosen.push(Chosen {
            id,
            enrollment_id: row.try_get("subject_id")?,
            sequence_id: item_sequence.unwrap_or_default(),
            prospect_id: row.try_get("prospect_id")?,
            sender_id: row.try_get("sender_id")?,
        });
    }
    if !other_sequence.is_empty() {
        return Err(ApiError::invalid_request(format!(
            "{} {} not of sequence `{}`; nothing was decided.",
            quoted(&other_sequence),
            if other_sequence.len() == 1 {
                "is"
            } else {
                "are"
            },
            input.sequence_id.as_deref().unwrap_or_default()
        ))
        .with_extra("other_sequence_ids", other_sequence));
    }
    if !decided.is_empty() {
        return Err(ApiError::new(
            ErrorCode::InvalidState,
            format!(
                "Only `pending` items can be decided: {}; nothing was decided.",
                decided.join(", ")
            ),
        ));
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

/// What a sender would start sending.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SenderPlan {
    pub sender_id: String,
    /// How many approved enrollments it sends to.
    pub enrollments: u64,
    /// The earliest time its first step may go out (within its working hours and limits).
    pub first_send_at: Option<Timestamp>,
}

/// An item that was pending but is not approved, and why.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NotApproved {
    pub id: String,
    pub prospect_id: String,
    /// `do_not_contact`: the prospect was marked do-not-contact since it was proposed; the item
    /// expires and the enrollment finishes.
    pub reason: String,
}

/// What `approve_outreach` did, or would do with `dry_run`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ApproveOutcome {
    pub dry_run: bool,
    /// How many items were (or would be) approved.
    pub approved: u64,
    pub items: Vec<ApprovedItem>,
    /// Per sender: how many enrollments and the first send time.
    pub senders: Vec<SenderPlan>,
    /// Items that could not be approved, with the reason; they were expired (not with `dry_run`).
    pub not_approved: Vec<NotApproved>,
}

/// Approve outreach to people: their sequence steps may now be sent to them.
///
/// This reaches real people: once a sequence is active, each approved enrollment receives its
/// steps (invitations, messages) from its sender, within the sender's working hours and limits.
/// Preview first with `dry_run: true`, which returns the enrollments, the first send time per
/// sender and changes nothing. Takes item `ids` (1 to 1000) or a `sequence_id` (all its pending
/// items). All or nothing: an unknown id is a 404, an id of another sequence than `sequence_id` a
/// 400, an item already decided a 409, each naming the ids; nothing is approved then. Costs nothing.
#[action(scope = "send", http = "POST /approvals/approve")]
pub async fn approve_outreach(ctx: Ctx, input: DecideInput) -> Result<ApproveOutcome, ApiError> {
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let chosen = choose(&mut tx, workspace_id, &input).await?;

    // The sequences involved: stopped and completed ones take no approvals; each gives the first
    // step's delay and the senders to assign from.
    let mut plans: HashMap<String, SequencePlan> = HashMap::new();
    for item in &chosen {
        if plans.contains_key(&item.sequence_id) {
            continue;
        }
        let sequence = sequences::fetch(&mut tx, workspace_id, &item.sequence_id).await?;
        if matches!(
            sequence.status,
            SequenceStatus::Stopped | SequenceStatus::Completed
        ) {
            return Err(ApiError::new(
                ErrorCode::InvalidState,
                format!(
                    "Sequence `{}` is `{}`; its items cannot be approved. Nothing was decided.",
                    sequence.id, sequence.status
                ),
            )
            .with_extra("status", sequence.status.as_str()));
        }
        let needs_sender = chosen
            .iter()
            .any(|c| c.sequence_id == sequence.id && c.sender_id.is_none());
        if needs_sender && sequence.sender_ids.is_empty() {
            return Err(ApiError::new(
                ErrorCode::InvalidState,
                format!(
                    "Sequence `{}` has no senders to send from; add `sender_ids` with `update_sequence` before approving. Nothing was decided.",
                    sequence.id
                ),
            ));
        }
        let load =
            sequences::enroll::sender_load(&mut tx, workspace_id, &sequence.sender_ids).await?;
        let delay_ms = sequence
            .steps
            .first()
            .map_or(0, |step| i64::from(step.delay_hours) * 3_600_000);
        plans.insert(
            sequence.id.clone(),
            SequencePlan {
                load,
                next_step_at: now + delay_ms,
            },
        );
    }

    let blocked = do_not_contact(&mut tx, workspace_id, &chosen).await?;
    let mut items = Vec::new();
    let mut not_approved = Vec::new();
    for item in &chosen {
        if blocked.contains(&item.prospect_id) {
            not_approved.push(NotApproved {
                id: item.id.clone(),
                prospect_id: item.prospect_id.clone(),
                reason: "do_not_contact".to_owned(),
            });
            continue;
        }
        let plan = plans
            .get_mut(&item.sequence_id)
            .ok_or_else(|| ApiError::internal("an item's sequence was not planned"))?;
        let sender_id = match &item.sender_id {
            Some(sender_id) => sender_id.clone(),
            None => sequences::enroll::pick_sender(&mut plan.load)
                .ok_or_else(|| ApiError::internal("no sender to pick"))?,
        };
        items.push(ApprovedItem {
            id: item.id.clone(),
            enrollment_id: item.enrollment_id.clone(),
            prospect_id: item.prospect_id.clone(),
            sequence_id: item.sequence_id.clone(),
            sender_id,
            next_step_at: Timestamp(plan.next_step_at),
        });
    }

    let mut per_sender: BTreeMap<String, (u64, i64)> = BTreeMap::new();
    for item in &items {
        let entry = per_sender
            .entry(item.sender_id.clone())
            .or_insert((0, i64::MAX));
        entry.0 += 1;
        entry.1 = entry.1.min(item.next_step_at.ms());
    }
    let mut senders = Vec::with_capacity(per_sender.len());
    for (sender_id, (enrollments, earliest)) in per_sender {
        let first_send_at =
            crate::delivery::first_send_time(&mut tx, ctx.workspace_id(), &sender_id, earliest)
                .await?;
        senders.push(SenderPlan {
            sender_id,
            enrollments,
            first_send_at: first_send_at.map(Timestamp),
        });
    }

    if !input.dry_run {
        apply_approval(&ctx, &mut tx, &items, &not_approved, now).await?;
    }
    Ok(ApproveOutcome {
        dry_run: input.dry_run,
        approved: items.len() as u64,
        items,
        senders,
        not_approved,
    })
}

struct SequencePlan {
    load: Vec<(String, i64)>,
    next_step_at: i64,
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
        crate::delivery::schedule(
            conn,
            clock,
            workspace_id,
            &item.enrollment_id,
            item.next_step_at.ms(),
        )
        .await?;
    }
    crate::delivery::inbound::ensure_polling(conn, clock).await
}

async fn apply_approval(
    ctx: &Ctx,
    tx: &mut sqlx::AnyConnection,
    items: &[ApprovedItem],
    not_approved: &[NotApproved],
    now: i64,
) -> Result<(), ApiError> {
    let workspace_id = ctx.workspace_id();
    let person_id = &ctx.principal().person_id;
    for item in items {
        let approval = sqlx::query(
            "update approvals set status = 'approved', decided_at = $3, decided_by = $4, sender_id = $5 \
             where workspace_id = $1 and id = $2 and status = 'pending'",
        )
        .bind(workspace_id)
        .bind(&item.id)
        .bind(now)
        .bind(person_id)
        .bind(&item.sender_id)
        .execute(&mut *tx)
        .await?;
        let enrollment = sqlx::query(
            "update enrollments set status = 'scheduled', sender_id = $3, next_step_at = $4, approved_at = $5, \
             approved_by = $6, updated_at = $5 \
             where workspace_id = $1 and id = $2 and status = 'awaiting_approval'",
        )
        .bind(workspace_id)
        .bind(&item.enrollment_id)
        .bind(&item.sender_id)
        .bind(item.next_step_at.ms())
        .bind(now)
        .bind(person_id)
        .execute(&mut *tx)
        .await?;
        if approval.rows_affected() != 1 || enrollment.rows_affected() != 1 {
            return Err(changed_meanwhile(&item.id));
        }
    }
    for item in not_approved {
        expire(tx, workspace_id, &item.id, now).await?;
        let enrollment_id = subject_of(tx, workspace_id, &item.id).await?;
        sqlx::query(
            "update enrollments set status = 'finished', exit_reason = 'do_not_contact', next_step_at = null, updated_at = $3 \
             where workspace_id = $1 and id = $2 and status = 'awaiting_approval'",
        )
        .bind(workspace_id)
        .bind(&enrollment_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        enrollments::record_event(
            tx,
            workspace_id,
            &enrollment_id,
            now,
            "finished",
            None,
            None,
            Some("do_not_contact"),
        )
        .await?;
    }
    let ids: Vec<String> = items
        .iter()
        .map(|item| item.enrollment_id.clone())
        .collect();
    enrollments::record_events(tx, workspace_id, &ids, now, "approved", None).await?;
    schedule_first_steps(tx, ctx.clock(), workspace_id, items).await
}

async fn expire(
    tx: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
    now: i64,
) -> Result<(), ApiError> {
    let done = sqlx::query(
        "update approvals set status = 'expired', decided_at = $3 where workspace_id = $1 and id = $2 and status = 'pending'",
    )
    .bind(workspace_id)
    .bind(id)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() != 1 {
        return Err(changed_meanwhile(id));
    }
    Ok(())
}

async fn subject_of(
    tx: &mut sqlx::AnyConnection,
    workspace_id: &str,
    id: &str,
) -> Result<String, ApiError> {
    Ok(
        sqlx::query("select subject_id from approvals where workspace_id = $1 and id = $2")
            .bind(workspace_id)
            .bind(id)
            .fetch_one(&mut *tx)
            .await?
            .try_get("subject_id")?,
    )
}

/// Another call decided an item while this one planned: nothing of this call is kept.
fn changed_meanwhile(id: &str) -> ApiError {
    ApiError::new(
        ErrorCode::InvalidState,
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
    /// Their enrollments, now finished with exit reason `rejected`.
    pub enrollment_ids: Vec<String>,
}

/// Reject outreach: nothing of these items is ever sent.
///
/// Takes item `ids` (1 to 1000) or a `sequence_id` (all its pending items). Each item becomes
/// `rejected` and its enrollment finishes with exit reason `rejected`; the prospect can be added to
/// another sequence later. All or nothing, like `approve_outreach`; `dry_run` shows what would be
/// rejected. Costs nothing.
#[action(scope = "write", http = "POST /approvals/reject")]
pub async fn reject_outreach(ctx: Ctx, input: DecideInput) -> Result<RejectOutcome, ApiError> {
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let chosen = choose(&mut tx, workspace_id, &input).await?;
    if !input.dry_run {
        let person_id = &ctx.principal().person_id;
        for item in &chosen {
            let approval = sqlx::query(
                "update approvals set status = 'rejected', decided_at = $3, decided_by = $4 \
                 where workspace_id = $1 and id = $2 and status = 'pending'",
            )
            .bind(workspace_id)
            .bind(&item.id)
            .bind(now)
            .bind(person_id)
            .execute(&mut *tx)
            .await?;
            let enrollment = sqlx::query(AssertSqlSafe(format!(
                "update enrollments set status = 'finished', exit_reason = 'rejected', next_step_at = null, updated_at = $3 \
                 where workspace_id = $1 and id = $2 and status in {LIVE_SQL}"
            )))
            .bind(workspace_id)
            .bind(&item.enrollment_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            if approval.rows_affected() != 1 || enrollment.rows_affected() != 1 {
                return Err(changed_meanwhile(&item.id));
            }
        }
        let ids: Vec<String> = chosen.iter().map(|c| c.enrollment_id.clone()).collect();
        enrollments::record_events(&mut tx, workspace_id, &ids, now, "rejected", None).await?;
    }
    Ok(RejectOutcome {
        dry_run: input.dry_run,
        rejected: chosen.len() as u64,
        ids: chosen.iter().map(|c| c.id.clone()).collect(),
        enrollment_ids: chosen.iter().map(|c| c.enrollment_id.clone()).collect(),
    })
}
