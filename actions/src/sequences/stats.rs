//! Figures per step of a sequence: how many people each step reached, how many accepted an
//! invitation, replied after it, or failed at it. `get_sequence_stats` answers them for one
//! sequence, and the dashboard's outreach section shows the same per sequence.
//!
//! Everything is counted from the rows the engine keeps as it works (never from counters of its
//! own): a step was sent when its enrollment's history has it with the outcome `sent`; an
//! invitation was accepted when its enrollment's `accepted_at` came after it; a reply belongs to
//! the step it followed, when the enrollment's first reply (`replied_at`) came after that step
//! and before the enrollment's next one (after the last step, whenever it comes); a step failed
//! when the enrollment failed at it. The
//! period picks the steps by when they were sent (a cohort): the acceptances and replies that
//! followed are counted whenever they came, so a rate is over the same people as its count.

use std::collections::BTreeMap;

use outreach_runtime::prelude::{ApiError, Ctx, Timestamp, action};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::{AnyConnection, Row};

use super::{StepType, fetch_row};
use crate::common::{IdKind, Period};

/// One step's figures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StepFigures {
    /// The step's index (0-based).
    pub step_index: u32,
    /// The step's type.
    #[serde(rename = "type")]
    pub kind: StepType,
    /// People the step reached in the period (the network performed it).
    pub sent: i64,
    /// Of those, for a `connection_request`: how many accepted (so far); null for other steps.
    pub accepted: Option<i64>,
    /// Of those: how many replied after this step and before their next one.
    pub replied: i64,
    /// `accepted / sent`, 0 to 1; null for other steps or when none was sent.
    pub acceptance_rate: Option<f64>,
    /// `replied / sent`, 0 to 1; null when none was sent.
    pub reply_rate: Option<f64>,
    /// Enrollments that failed at this step in the period (the network refused the person).
    pub failed: i64,
}

impl StepFigures {
    /// A step nobody was sent yet: zeros, and no rates.
    fn unsent(step_index: u32, kind: StepType) -> Self {
        Self {
            step_index,
            kind,
            sent: 0,
            accepted: (kind == StepType::ConnectionRequest).then_some(0),
            replied: 0,
            acceptance_rate: None,
            reply_rate: None,
            failed: 0,
        }
    }
}

fn rate(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// The figures per step of every sequence of the workspace (or of `sequence_id` alone) for the
/// steps sent at or after `since`, by sequence, each in step order.
pub async fn step_figures(
    conn: &mut AnyConnection,
    workspace_id: &str,
    sequence_id: Option<&str>,
    since: Option<i64>,
) -> Result<BTreeMap<String, Vec<StepFigures>>, ApiError> {
    let since = since.unwrap_or(i64::MIN);
    // Each step sent, with when the enrollment's next step went (the end of its reply window);
    // the period's filter goes first, as a later step than one kept is kept too.
    let sent = sqlx::query(
        "with sent as ( \
           select e.sequence_id, v.step_index, v.kind, v.at, e.accepted_at, e.replied_at, \
             lead(v.at) over (partition by v.enrollment_id order by v.at, v.id) as next_at \
           from enrollment_events v join enrollments e on e.id = v.enrollment_id \
           where e.workspace_id = $1 and ($2 is null or e.sequence_id = $2) \
             and v.outcome = 'sent' and v.kind in ('view_profile', 'connection_request', 'message') \
             and v.at >= $3) \
         select sequence_id, step_index, kind, count(*) as sent, \
           cast(coalesce(sum(case when accepted_at is not null and accepted_at >= at then 1 else 0 end), 0) as bigint) as accepted, \
           cast(coalesce(sum(case when replied_at is not null and replied_at >= at \
             and (next_at is null or replied_at < next_at) then 1 else 0 end), 0) as bigint) as replied \
         from sent group by sequence_id, step_index, kind",
    )
    .bind(workspace_id)
    .bind(sequence_id)
    .bind(since)
    .fetch_all(&mut *conn)
    .await?;
    let failed = sqlx::query(
        "select e.sequence_id, v.step_index, count(*) as failed \
         from enrollment_events v join enrollments e on e.id = v.enrollment_id \
         where e.workspace_id = $1 and ($2 is null or e.sequence_id = $2) and v.kind = 'failed' \
           and v.step_index is not null and v.at >= $3 group by e.sequence_id, v.step_index",
    )
    .bind(workspace_id)
    .bind(sequence_id)
    .bind(since)
    .fetch_all(&mut *conn)
    .await?;
    let mut by_step: BTreeMap<(String, i64), StepFigures> = BTreeMap::new();
    for row in &sent {
        let kind = StepType::from_db(&row.try_get::<String, _>("kind")?)?;
        let step_index: i64 = row.try_get("step_index")?;
        let sent: i64 = row.try_get("sent")?;
        let accepted: i64 = row.try_get("accepted")?;
        let replied: i64 = row.try_get("replied")?;
        let invitation = kind == StepType::ConnectionRequest;
        by_step.insert(
            (row.try_get("sequence_id")?, step_index),
            StepFigures {
                step_index: u32::try_from(step_index).unwrap_or(0),
                kind,
                sent,
                accepted: invitation.then_some(accepted),
                replied,
                acceptance_rate: if invitation {
                    rate(accepted, sent)
                } else {
                    None
                },
                reply_rate: rate(replied, sent),
                failed: 0,
            },
        );
    }
    for row in &failed {
        let key: (String, i64) = (row.try_get("sequence_id")?, row.try_get("step_index")?);
        let count: i64 = row.try_get("failed")?;
        if let Some(step) = by_step.get_mut(&key) {
            step.failed = count;
            continue;
        }
        // A step that failed for everyone it was tried on has no sent row: its type is the
        // sequence's.
        let sequence = fetch_row(conn, workspace_id, &key.0).await?;
        let Some(step) = usize::try_from(key.1)
            .ok()
            .and_then(|index| sequence.steps.get(index))
        else {
            continue;
        };
        let figures = StepFigures {
            failed: count,
            ..StepFigures::unsent(u32::try_from(key.1).unwrap_or(0), step.kind)
        };
        by_step.insert(key.clone(), figures);
    }
    let mut by_sequence: BTreeMap<String, Vec<StepFigures>> = BTreeMap::new();
    for ((sequence, _), figures) in by_step {
        by_sequence.entry(sequence).or_default().push(figures);
    }
    Ok(by_sequence)
}

/// The input of `get_sequence_stats`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetSequenceStatsInput {
    /// The sequence (`seq_...`).
    pub id: String,
    /// `24h`, `7d`, `30d`, `90d`, `365d` or `all` (default): the steps sent in that window, with
    /// whatever came of them since.
    #[serde(default = "all_time")]
    pub period: Period,
}

fn all_time() -> Period {
    Period::All
}

/// A sequence's figures per step.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SequenceStats {
    pub sequence_id: String,
    pub period: Period,
    /// The start of the window; null for `all`.
    pub starts_at: Option<Timestamp>,
    /// The end of the window: the time of the call.
    pub ends_at: Timestamp,
    /// Every step of the sequence, in order; a step nobody reached yet has zeros.
    pub steps: Vec<StepFigures>,
}

/// Get a sequence's figures per step.
///
/// For each step, in order: how many people it reached (`sent`), for an invitation how many
/// accepted, how many replied after it and before their next step, the rates, and how many
/// failed at it. `period` picks the steps by when they were sent (default `all`). Costs nothing.
#[action(scope = "read", http = "GET /sequences/{id}/stats")]
pub async fn get_sequence_stats(
    ctx: Ctx,
    input: GetSequenceStatsInput,
) -> Result<SequenceStats, ApiError> {
    IdKind::Sequence.check(&input.id)?;
    let now = ctx.now_ms();
    let since = input.period.length_ms().map(|length| now - length);
    let mut conn = ctx.db().pool().acquire().await?;
    let sequence = fetch_row(&mut conn, ctx.workspace_id(), &input.id).await?;
    let mut figures = step_figures(&mut conn, ctx.workspace_id(), Some(&input.id), since)
        .await?
        .remove(&input.id)
        .unwrap_or_default();
    let mut steps = Vec::with_capacity(sequence.steps.len());
    for (index, step) in sequence.steps.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        match figures.iter().position(|figure| figure.step_index == index) {
            Some(at) => steps.push(figures.swap_remove(at)),
            None => steps.push(StepFigures::unsent(index, step.kind)),
        }
    }
    Ok(SequenceStats {
        sequence_id: input.id,
        period: input.period,
        starts_at: since.map(Timestamp),
        ends_at: Timestamp(now),
        steps,
    })
}

outreach_runtime::prelude::example!(get_sequence_stats,
    request: {"id": "seq_sGbl2nzkshQDV6qitLc9", "period": "30d"},
    response: {
        "ends_at": "2026-11-30T09:00:00.000Z",
        "period": "30d",
        "sequence_id": "seq_sGbl2nzkshQDV6qitLc9",
        "starts_at": "2026-10-31T09:00:00.000Z",
        "steps": [
            {"accepted": null, "acceptance_rate": null, "failed": 0, "replied": 0, "reply_rate": 0.0, "sent": 120, "step_index": 0, "type": "view_profile"},
            {"accepted": 46, "acceptance_rate": 0.3932, "failed": 3, "replied": 4, "reply_rate": 0.0342, "sent": 117, "step_index": 1, "type": "connection_request"},
            {"accepted": null, "acceptance_rate": null, "failed": 0, "replied": 11, "reply_rate": 0.2391, "sent": 46, "step_index": 2, "type": "message"}
        ]
    }
);

outreach_runtime::prelude::parity!(get_sequence_stats, timed_read,
    ok: {"id": "$active", "period": "7d"},
    fails: {"id": "$active", "period": "week"} => INVALID_REQUEST
);
