//! `add_to_sequence`: prospects join a sequence as enrollments awaiting approval.
//!
//! Every prospect asked for is either enrolled (with an approval item holding the texts rendered
//! for them) or reported in `skipped` with a reason, never dropped silently. The checks run in the
//! order a person would ask them: is the id known, may we contact this person at all, can we reach
//! them, are they busy elsewhere or contacted lately, are they here already, and do the texts
//! render within the network's limits. Enrollments are spread over the sequence's senders by load:
//! each goes to the sender with the fewest live enrollments in the workspace (ties by the
//! sequence's sender order), so a new sequence does not pile onto a busy account.

use std::collections::{HashMap, HashSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::{AssertSqlSafe, Row};

use crate::approvals::{self, ApprovalKind, NewApproval, ProposedBy};
use crate::common::IdKind;
use crate::enrollments;
use crate::lists::placeholders;
use crate::person_lock::PersonTx;
use crate::prospects::{COLUMNS, Prospect};
use crate::sequences::DraftedBy;
use crate::sequences::{self, RenderedText, Sequence, SequenceStatus, lock, render_steps};
use crate::step_jobs::LIVE_SQL;
use outreach_runtime::prelude::{ApiError, Ctx, ErrorCode, action, ids};

/// The most prospect ids one call takes.
pub const MAX_PROSPECT_IDS: usize = 1000;
/// The most members of a list one call enrolls.
pub const MAX_LIST_MEMBERS: usize = 10_000;
const CHUNK: usize = 500;

outreach_runtime::prelude::text_enum! {
    /// Why a prospect was not enrolled.
    pub enum SkipReason {
        /// No prospect with this id in the workspace.
        UnknownProspect => "unknown_prospect",
        /// The prospect is marked do-not-contact.
        DoNotContact => "do_not_contact",
        /// The prospect has no profile URL, so the network cannot reach them.
        NoProfileUrl => "no_profile_url",
        /// The prospect is in another live sequence (the setting `skip_if_in_other_live_sequence`).
        InOtherLiveSequence => "in_other_live_sequence",
        /// The prospect was contacted within `skip_if_contacted_within_days`.
        ContactedRecently => "contacted_recently",
        /// The prospect is in this sequence already.
        AlreadyEnrolled => "already_enrolled",
        /// A template names a field the prospect has no value for, without a fallback.
        MissingValue => "missing_value",
        /// A rendered note or message is over its limit.
        TextTooLong => "text_too_long",
    }
}

/// The input of `add_to_sequence`.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("not" = {"anyOf": [{"required": ["list_id", "prospect_ids"], "properties": {"list_id": {"not": {"type": "null"}}, "prospect_ids": {"not": {"type": "null"}}}}, {"properties": {"list_id": {"type": "null"}, "prospect_ids": {"type": "null"}}}]}))]
pub struct AddToSequenceInput {
    /// `seq_...`, with steps, in `draft`, `active` or `paused`.
    pub sequence_id: String,
    /// `prs_...`; or `list_id`.
    #[schemars(length(min = 1, max = 1000))]
    pub prospect_ids: Option<Vec<String>>,
    /// `lst_...`: every member, at most 10,000.
    pub list_id: Option<String>,
}

/// One enrollment made.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "EnrollmentAdded")]
pub struct Added {
    pub prospect_id: String,
    pub enrollment_id: String,
    /// The approval item (`apr_...`) that waits for a person.
    pub approval_id: String,
    /// The sender it is assigned to; null while the sequence has none (assigned on approval).
    pub sender_id: Option<String>,
}

/// One prospect not enrolled, and why.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "ProspectSkipped")]
pub struct Skipped {
    pub prospect_id: String,
    pub reason: SkipReason,
    /// The reason as a sentence (which step, which variable, how long).
    pub detail: String,
}

/// What `add_to_sequence` did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct AddedToSequence {
    /// How many enrollments were made, each awaiting approval.
    pub added: u64,
    pub enrollments: Vec<Added>,
    /// Every prospect not enrolled, with the reason.
    pub skipped: Vec<Skipped>,
    /// The sequence after the change.
    pub sequence: Sequence,
}

/// Add prospects to a sequence, awaiting approval.
///
/// Nothing is sent until each is approved (`approve_outreach`); those not enrolled come back in
/// `skipped`, with the reason.
///
/// Takes `prospect_ids` (1 to 1000) or a `list_id`. Each prospect becomes an enrollment
/// `awaiting_approval` with an item in the approval queue showing the texts rendered for them. The
/// sequence must be `draft`, `active` or `paused` and have steps.
#[action(
    scope = "write",
    idempotent,
    http = "POST /sequences/{sequence_id}/enrollments"
)]
pub async fn add_to_sequence(
    ctx: Ctx,
    input: AddToSequenceInput,
) -> Result<AddedToSequence, ApiError> {
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    if input.prospect_ids.is_some() == input.list_id.is_some() {
        return Err(ApiError::invalid_request(
            "Give either `prospect_ids` or `list_id`, not both and not neither.",
        ));
    }
    let mut tx = ctx.tx().await?;
    let asked = asked_ids(&mut tx, workspace_id, &input).await?;
    // The people asked for are locked before the sequence (see `person_lock`): their
    // enrollments and approval items are written below.
    let mut tx =
        crate::person_lock::lock(&mut tx, workspace_id, asked.iter().map(String::as_str)).await?;
    let sequence = lock(&mut tx, workspace_id, &input.sequence_id, now).await?;
    check_proposable(&sequence)?;
    let Checked { eligible, skipped } =
        check_prospects(&mut tx, workspace_id, &sequence, &asked, now).await?;
    let proposals: Vec<Proposal<'_>> = eligible
        .iter()
        .map(|eligible| Proposal {
            prospect_id: &eligible.prospect.id,
            texts: &eligible.texts,
            drafted_by: None,
            reasons: None,
        })
        .collect();
    let source = ProposalSource {
        proposed_by: ProposedBy::caller(&ctx),
        run: None,
        expires_at: None,
    };
    let added = propose(&mut tx, workspace_id, &sequence, &proposals, &source, now).await?;
    let sequence = sequences::fetch(&mut tx, workspace_id, &sequence.id, now).await?;
    Ok(AddedToSequence {
        added: added.len() as u64,
        enrollments: added,
        skipped,
        sequence,
    })
}

outreach_runtime::prelude::example!(add_to_sequence,
    request: {
        "prospect_ids": ["prs_pQOP39fLUiEK6S7Cciku", "prs_irraAUEPxSP8BgG24Gm9", "prs_00000000000NoSuchOne"],
        "sequence_id": "seq_sGbl2nzkshQDV6qitLc9"
    },
    response: {
        "added": 2,
        "enrollments": [
            {
                "approval_id": "apr_YCD0yfaQxyGxSBDJPSaJ",
                "enrollment_id": "enr_OYC1RvHwvhhXPLiM61gx",
                "prospect_id": "prs_pQOP39fLUiEK6S7Cciku",
                "sender_id": "snd_jp6TNuolp8f32URYMVrb"
            },
            {
                "approval_id": "apr_A9vasBC8sr2fLNSKc52v",
                "enrollment_id": "enr_myCc0bRsDEzr9570t9kj",
                "prospect_id": "prs_irraAUEPxSP8BgG24Gm9",
                "sender_id": "snd_jp6TNuolp8f32URYMVrb"
            }
        ],
        "sequence": {
            "activated_at": null,
            "created_at": "2026-11-23T21:19:40.394Z",
            "enrollment_counts": {
                "active": 0,
                "awaiting_approval": 2,
                "failed": 0,
                "finished": 0,
                "paused": 0,
                "scheduled": 0
            },
            "finished_at": null,
            "id": "seq_sGbl2nzkshQDV6qitLc9",
            "name": "Q3 heads of sales (DACH)",
            "schedule": {"respect_prospect_timezone": false},
            "sender_ids": ["snd_jp6TNuolp8f32URYMVrb"],
            "sending": {
                "next_send_at": null,
                "reason": "The sequence is a draft; `activate_sequence` starts it.",
                "sending": false
            },
            "settings": {
                "exit_after_days_without_acceptance": 14,
                "out_of_office_hold_days": 7,
                "skip_if_contacted_within_days": 60,
                "skip_if_in_other_live_sequence": true,
                "stop_on_reply": true
            },
            "status": "draft",
            "steps": [
                {"delay_hours": 0, "note": null, "text": null, "type": "view_profile"},
                {
                    "delay_hours": 24,
                    "note": "Hi {{first_name|there}}, I work with sales teams like {{company_name}}'s and would like to connect.",
                    "text": null,
                    "type": "connection_request"
                },
                {
                    "delay_hours": 72,
                    "note": null,
                    "text": "Thanks for connecting, {{first_name}}! Would a short call next week be useful?",
                    "type": "message"
                }
            ],
            "updated_at": "2026-11-23T21:19:40.407Z"
        },
        "skipped": [
            {
                "detail": "No prospect with id `prs_00000000000NoSuchOne` in this workspace.",
                "prospect_id": "prs_00000000000NoSuchOne",
                "reason": "unknown_prospect"
            }
        ]
    }
);

outreach_runtime::prelude::parity!(add_to_sequence, write,
    ok: {"prospect_ids": ["$reachable_0", "$prospect", "$missing:prs"], "sequence_id": "$draft"},
    fails: {"sequence_id": "$draft"} => INVALID_REQUEST
);

/// Refuses a sequence that cannot take new enrollments: one that is `stopped` or `completed`
/// (409), or has no steps to render texts from (409).
pub(crate) fn check_proposable(sequence: &Sequence) -> Result<(), ApiError> {
    if !matches!(
        sequence.status,
        SequenceStatus::Draft | SequenceStatus::Active | SequenceStatus::Paused
    ) {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Sequence `{}` is `{}`; prospects can be added only while it is `draft`, `active` or `paused`.",
                sequence.id, sequence.status
            ),
        )
        .with_extra("status", sequence.status.as_str()));
    }
    if sequence.steps.is_empty() {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Sequence `{}` has no steps yet; add them with `update_sequence` first, so each prospect's texts can be rendered for approval.",
                sequence.id
            ),
        ));
    }

    Ok(())
}

/// A prospect that passed every check, with the sequence's texts rendered for them.
pub(crate) struct Eligible {
    pub prospect: Prospect,
    pub texts: Vec<RenderedText>,
}

/// What [`check_prospects`] made of the prospects asked for.
pub(crate) struct Checked {
    pub eligible: Vec<Eligible>,
    /// Every prospect asked for and not eligible, with the reason, in the order asked.
    pub skipped: Vec<Skipped>,
}

/// Checks prospects for a sequence, in the order a person would ask: is the id known, may we
/// contact this person at all, can we reach them, are they busy elsewhere or contacted lately,
/// are they here already, and do the texts render within the network's limits. Reads only.
pub(crate) async fn check_prospects(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sequence: &Sequence,
    asked: &[String],
    now: i64,
) -> Result<Checked, ApiError> {
    let mut skipped = Vec::new();
    let mut skip = |prospect_id: &str, reason: SkipReason, detail: String| {
        skipped.push(Skipped {
            prospect_id: prospect_id.to_owned(),
            reason,
            detail,
        });
    };

    let shaped: Vec<&str> = asked
        .iter()
        .map(String::as_str)
        .filter(|id| IdKind::Prospect.is_id(id))
        .collect();
    let mut prospects = load_prospects(conn, workspace_id, &shaped).await?;
    let in_other = if sequence.settings.skip_if_in_other_live_sequence {
        prospects_where(
            conn,
            &format!(
                "select distinct prospect_id as id from enrollments where workspace_id = $1 and sequence_id <> $2 \
                 and status in {LIVE_SQL} and prospect_id in"
            ),
            workspace_id,
            Some(&sequence.id),
            &shaped,
        )
        .await?
    } else {
        HashSet::new()
    };
    let here = prospects_where(
        conn,
        "select prospect_id as id from enrollments where workspace_id = $1 and sequence_id = $2 and prospect_id in",
        workspace_id,
        Some(&sequence.id),
        &shaped,
    )
    .await?;
    let recent_days = sequence.settings.skip_if_contacted_within_days;
    let recent_since = now - i64::from(recent_days) * 86_400_000;

    let mut eligible = Vec::new();
    for id in asked {
        // `asked` holds each id once, so each prospect is taken once.
        let Some((prospect, last_contacted_at)) = prospects.remove(id.as_str()) else {
            skip(
                id,
                SkipReason::UnknownProspect,
                format!("No prospect with id `{id}` in this workspace."),
            );
            continue;
        };
        if prospect.do_not_contact {
            skip(
                id,
                SkipReason::DoNotContact,
                "The prospect is marked do-not-contact.".into(),
            );
            continue;
        }
        if prospect.profile_url.is_none() {
            skip(
                id,
                SkipReason::NoProfileUrl,
                "The prospect has no `profile_url`, so the network cannot reach them.".into(),
            );
            continue;
        }
        if in_other.contains(id) {
            skip(
                id,
                SkipReason::InOtherLiveSequence,
                "The prospect is in another live sequence (setting `skip_if_in_other_live_sequence`).".into(),
            );
            continue;
        }
        if recent_days > 0
            && let Some(at) = last_contacted_at
            && at >= recent_since
        {
            skip(
                id,
                SkipReason::ContactedRecently,
                format!(
                    "The prospect was contacted at {}, within {recent_days} days (setting `skip_if_contacted_within_days`).",
                    outreach_runtime::prelude::rfc3339(at)
                ),
            );
            continue;
        }
        if here.contains(id) {
            skip(
                id,
                SkipReason::AlreadyEnrolled,
                format!("The prospect is in sequence `{}` already.", sequence.id),
            );
            continue;
        }
        match render_steps(&sequence.steps, &prospect) {
            Ok(texts) => eligible.push(Eligible { prospect, texts }),
            Err(problem) => {
                let (reason, detail) = render_skip(&problem);
                skip(id, reason, detail);
            }
        }
    }
    Ok(Checked { eligible, skipped })
}

/// The skip reason and sentence of texts that do not render for a prospect.
pub(crate) fn render_skip(problem: &sequences::RenderProblem) -> (SkipReason, String) {
    let reason = match problem {
        sequences::RenderProblem::MissingValue { .. } => SkipReason::MissingValue,
        sequences::RenderProblem::TooLong { .. } => SkipReason::TextTooLong,
    };
    let mut detail = problem.sentence();
    if let Some(first) = detail.get(..1) {
        detail = format!("{}{}.", first.to_uppercase(), &detail[1..]);
    }
    (reason, detail)
}

/// One enrollment to propose: the prospect and the texts a person will approve.
pub(crate) struct Proposal<'a> {
    pub prospect_id: &'a str,
    pub texts: &'a [RenderedText],
    /// Who wrote the texts, when an agent drafted them.
    pub drafted_by: Option<DraftedBy>,
    /// Why an agent chose the prospect, as JSON text.
    pub reasons: Option<String>,
}

/// Who proposes, and for how long the proposals wait.
pub(crate) struct ProposalSource<'a> {
    pub proposed_by: ProposedBy,
    /// The agent run that proposes, with its agent.
    pub run: Option<(&'a str, &'a str)>,
    /// When the proposals expire (an agent's do, after 72 hours); `None`: never.
    pub expires_at: Option<i64>,
}

/// Enrolls checked prospects in a sequence, awaiting approval: each gets an enrollment, an item
/// in the approval queue with its texts, and an `added` event, in the caller's transaction.
/// Enrollments are spread over the sequence's senders by load, counting what this call assigns.
pub(crate) async fn propose(
    conn: &mut PersonTx<'_>,
    workspace_id: &str,
    sequence: &Sequence,
    proposals: &[Proposal<'_>],
    source: &ProposalSource<'_>,
    now: i64,
) -> Result<Vec<Added>, ApiError> {
    let mut load = sender_load(conn, workspace_id, &sequence.sender_ids).await?;
    let mut added = Vec::with_capacity(proposals.len());
    for proposal in proposals {
        added.push(Added {
            prospect_id: proposal.prospect_id.to_owned(),
            enrollment_id: ids::new_id("enr"),
            approval_id: ids::new_id("apr"),
            sender_id: pick_sender(&mut load),
        });
    }
    let rows: Vec<enrollments::NewEnrollment<'_>> = added
        .iter()
        .map(|row| enrollments::NewEnrollment {
            id: &row.enrollment_id,
            prospect_id: &row.prospect_id,
            sender_id: row.sender_id.as_deref(),
        })
        .collect();
    enrollments::insert_awaiting_approval(conn, workspace_id, &sequence.id, &rows, now).await?;
    let approvals: Vec<NewApproval<'_>> = added
        .iter()
        .zip(proposals)
        .map(|(added, proposal)| NewApproval {
            id: &added.approval_id,
            kind: ApprovalKind::Enrollment,
            subject_id: &added.enrollment_id,
            sequence_id: Some(&sequence.id),
            prospect_id: &added.prospect_id,
            sender_id: added.sender_id.as_deref(),
            texts: proposal.texts,
            run: source.run,
            drafted_by: proposal.drafted_by,
            reasons: proposal.reasons.as_deref(),
            expires_at: source.expires_at,
        })
        .collect();
    approvals::insert_pending(conn, workspace_id, &source.proposed_by, now, &approvals).await?;
    let enrollment_ids: Vec<String> = added.iter().map(|a| a.enrollment_id.clone()).collect();
    enrollments::record_events(
        conn,
        workspace_id,
        &enrollment_ids,
        now,
        enrollments::EnrollmentEventKind::Added,
        None,
    )
    .await?;
    Ok(added)
}

/// The prospect ids asked for, without repeats, in order.
async fn asked_ids(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    input: &AddToSequenceInput,
) -> Result<Vec<String>, ApiError> {
    let ids: Vec<String> = match (&input.prospect_ids, &input.list_id) {
        (Some(ids), _) => {
            if ids.is_empty() {
                return Err(ApiError::invalid_request(
                    "`prospect_ids` must hold at least one id.",
                ));
            }
            if ids.len() > MAX_PROSPECT_IDS {
                return Err(ApiError::invalid_request(format!(
                    "`prospect_ids` holds {} ids; send at most {MAX_PROSPECT_IDS} per call (or use `list_id`).",
                    ids.len()
                )));
            }
            ids.clone()
        }
        (None, Some(list_id)) => {
            let list = crate::lists::fetch(conn, workspace_id, list_id).await?;
            if list.size > MAX_LIST_MEMBERS as i64 {
                return Err(ApiError::invalid_request(format!(
                    "List `{}` holds {} prospects; `add_to_sequence` takes lists of at most {MAX_LIST_MEMBERS}. Split it, or pass `prospect_ids`.",
                    list.id, list.size
                )));
            }
            sqlx::query(
                "select prospect_id from list_members where workspace_id = $1 and list_id = $2 order by added_at, prospect_id",
            )
            .bind(workspace_id)
            .bind(&list.id)
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|row| row.try_get::<String, _>("prospect_id"))
            .collect::<Result<_, _>>()?
        }
        (None, None) => Vec::new(),
    };
    let mut seen = HashSet::new();
    Ok(ids
        .into_iter()
        .filter(|id| seen.insert(id.clone()))
        .collect())
}

/// The prospects of the workspace among `ids`, with their last contact time.
async fn load_prospects(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    ids: &[&str],
) -> Result<HashMap<String, (Prospect, Option<i64>)>, ApiError> {
    let mut found = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(CHUNK) {
        let sql = format!(
            "select {} from prospects where workspace_id = $1 and id in {}",
            *COLUMNS,
            placeholders(2, chunk.len())
        );
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .persistent(false)
            .bind(workspace_id);
        for id in chunk {
            query = query.bind(*id);
        }
        for row in query.fetch_all(&mut *conn).await? {
            let prospect = Prospect::from_row(&row)?;
            let last = prospect.last_contacted_at.map(|at| at.ms());
            found.insert(prospect.id.clone(), (prospect, last));
        }
    }
    Ok(found)
}

/// The ids `sql_prefix (ids)` returns, with `$1` the workspace and `$2` an optional extra value.
async fn prospects_where(
    conn: &mut sqlx::AnyConnection,
    sql_prefix: &str,
    workspace_id: &str,
    extra: Option<&str>,
    ids: &[&str],
) -> Result<HashSet<String>, ApiError> {
    let mut found = HashSet::new();
    let first = if extra.is_some() { 3 } else { 2 };
    for chunk in ids.chunks(CHUNK) {
        let sql = format!("{sql_prefix} {}", placeholders(first, chunk.len()));
        let mut query = sqlx::query(AssertSqlSafe(sql))
            .persistent(false)
            .bind(workspace_id);
        if let Some(extra) = extra {
            query = query.bind(extra);
        }
        for id in chunk {
            query = query.bind(*id);
        }
        for row in query.fetch_all(&mut *conn).await? {
            found.insert(row.try_get::<String, _>("id")?);
        }
    }
    Ok(found)
}

/// Each sender's live enrollments in the workspace, in the sequence's sender order.
pub(crate) async fn sender_load(
    conn: &mut sqlx::AnyConnection,
    workspace_id: &str,
    sender_ids: &[String],
) -> Result<Vec<(String, i64)>, ApiError> {
    if sender_ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "select sender_id, count(*) as n from enrollments where workspace_id = $1 and status in {LIVE_SQL} \
         and sender_id in {} group by sender_id",
        placeholders(2, sender_ids.len())
    );
    let mut query = sqlx::query(AssertSqlSafe(sql))
        .persistent(false)
        .bind(workspace_id);
    for id in sender_ids {
        query = query.bind(id);
    }
    let mut counts: HashMap<String, i64> = HashMap::new();
    for row in query.fetch_all(&mut *conn).await? {
        counts.insert(row.try_get("sender_id")?, row.try_get("n")?);
    }
    Ok(sender_ids
        .iter()
        .map(|id| (id.clone(), counts.get(id).copied().unwrap_or(0)))
        .collect())
}

/// The least-loaded sender (the first in order on a tie), counted as one more.
pub(crate) fn pick_sender(load: &mut [(String, i64)]) -> Option<String> {
    let (index, _) = load
        .iter()
        .enumerate()
        .min_by_key(|(index, (_, n))| (*n, *index))?;
    load[index].1 += 1;
    Some(load[index].0.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn senders_are_picked_least_loaded_first_in_order_on_ties() {
        let mut load = vec![
            ("a".to_owned(), 2),
            ("b".to_owned(), 0),
            ("c".to_owned(), 0),
        ];
        let picks: Vec<String> = (0..5).filter_map(|_| pick_sender(&mut load)).collect();
        assert_eq!(picks, ["b", "c", "b", "c", "a"]);
        assert_eq!(pick_sender(&mut []), None);
    }
}
