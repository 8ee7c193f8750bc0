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

/// What came of one step, or of one of its variants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    sent: i64,
    accepted: i64,
    replied: i64,
    failed: i64,
}

impl Counts {
    /// `(accepted, acceptance_rate, reply_rate)` as a step of `kind` shows them: acceptances
    /// only for an invitation.
    fn rates(self, kind: StepType) -> (Option<i64>, Option<f64>, Option<f64>) {
        let invitation = kind == StepType::ConnectionRequest;
        (
            invitation.then_some(self.accepted),
            invitation.then(|| rate(self.accepted, self.sent)).flatten(),
            rate(self.replied, self.sent),
        )
    }

    fn add(&mut self, other: Counts) {
        self.sent += other.sent;
        self.accepted += other.accepted;
        self.replied += other.replied;
        self.failed += other.failed;
    }
}

/// One step's figures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StepFigures {
    /// The step's index (0-based).
    pub step_index: u32,
    /// The step's key (`s1`, `s2`, ... when the author gave none); null on the dashboard for a
    /// step the sequence no longer has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
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
    /// Enrollments that failed at this step in the period (the network refused the person; for
    /// an InMail, also the account: no InMail, or no credits left).
    pub failed: i64,
    /// On a step with A/B variants: the same figures per variant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<VariantFigures>,
    /// On a step with variants that were sent: whether the leading variant's lead is significant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<VariantComparison>,
    /// On a `condition` step: how many enrollments it sent each way in the period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branches: Option<BranchCounts>,
}

/// One A/B variant's figures.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct VariantFigures {
    /// The variant's key.
    pub variant: String,
    /// Whether it is given to enrollments now; null on the dashboard.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    pub sent: i64,
    /// For a `connection_request`: how many accepted (so far); null for a message.
    pub accepted: Option<i64>,
    pub replied: i64,
    pub acceptance_rate: Option<f64>,
    pub reply_rate: Option<f64>,
    pub failed: i64,
}

/// The leading variant against the runner-up on the step's rate (acceptance for an invitation,
/// reply for a message): a two-proportion z-test (pooled), significant at 95 % when |z| >= 1.96.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct VariantComparison {
    /// `acceptance_rate` or `reply_rate`.
    pub metric: String,
    /// The variant with the higher rate.
    pub leader: String,
    /// The variant it is compared with (the next highest rate).
    pub other: String,
    /// The test statistic; null when it cannot be computed (a variant sent to nobody, or
    /// every rate 0 or 1).
    pub z: Option<f64>,
    /// `|z| >= 1.96`: the lead holds at 95 % confidence.
    pub significant: bool,
    /// The same as a sentence, with the counts.
    pub note: String,
}

/// Where a condition step sent enrollments.
#[derive(Debug, Clone, Copy, Default, Serialize, JsonSchema)]
pub struct BranchCounts {
    /// To its `then_step`: the condition held.
    #[serde(rename = "then")]
    pub then_step: i64,
    /// To its `else_step`.
    #[serde(rename = "else")]
    pub else_step: i64,
}

/// The two-sided 95 % threshold of a standard normal statistic.
const Z_95: f64 = 1.96;

impl StepFigures {
    /// A step nobody was sent yet: zeros, and no rates.
    fn unsent(step_index: u32, kind: StepType) -> Self {
        Self::of(step_index, kind, Counts::default())
    }

    fn of(step_index: u32, kind: StepType, counts: Counts) -> Self {
        let (accepted, acceptance_rate, reply_rate) = counts.rates(kind);
        Self {
            step_index,
            key: None,
            kind,
            sent: counts.sent,
            accepted,
            replied: counts.replied,
            acceptance_rate,
            reply_rate,
            failed: counts.failed,
            variants: Vec::new(),
            comparison: None,
            branches: (kind == StepType::Condition).then(BranchCounts::default),
        }
    }

    /// Adds the variants of the step as the sequence has them now (those nobody was sent show
    /// zeros), with whether each is on, and the comparison of the two leading ones.
    fn complete(&mut self, step: &super::Step) {
        self.key = Some(step.key().to_owned());
        let Some(variants) = &step.variants else {
            return;
        };
        for variant in variants {
            match self
                .variants
                .iter_mut()
                .find(|v| v.variant == variant.key())
            {
                Some(figures) => figures.enabled = Some(variant.enabled),
                None => {
                    let mut figures =
                        VariantFigures::of(variant.key(), self.kind, Counts::default());
                    figures.enabled = Some(variant.enabled);
                    self.variants.push(figures);
                }
            }
        }
        let order: Vec<&str> = variants.iter().map(|v| v.key()).collect();
        self.variants.sort_by_key(|v| {
            order
                .iter()
                .position(|k| *k == v.variant)
                .unwrap_or(usize::MAX)
        });
        self.comparison = compare(self.kind, &self.variants);
    }
}

impl VariantFigures {
    fn of(variant: &str, kind: StepType, counts: Counts) -> Self {
        let (accepted, acceptance_rate, reply_rate) = counts.rates(kind);
        Self {
            variant: variant.to_owned(),
            enabled: None,
            sent: counts.sent,
            accepted,
            replied: counts.replied,
            acceptance_rate,
            reply_rate,
            failed: counts.failed,
        }
    }
}

/// `part / whole` to 4 decimals (what a person reads, and a number every JSON reader round-trips).
fn rate(part: i64, whole: i64) -> Option<f64> {
    (whole > 0).then(|| (part as f64 / whole as f64 * 10_000.0).round() / 10_000.0)
}

/// The pooled two-proportion z statistic of `x1/n1` against `x2/n2`.
fn two_proportion_z(x1: i64, n1: i64, x2: i64, n2: i64) -> Option<f64> {
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let (x1, n1, x2, n2) = (x1 as f64, n1 as f64, x2 as f64, n2 as f64);
    let pooled = (x1 + x2) / (n1 + n2);
    let se = (pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)).sqrt();
    (se > 0.0).then(|| (x1 / n1 - x2 / n2) / se)
}

/// The leading variant against the runner-up, among those sent to someone.
fn compare(kind: StepType, variants: &[VariantFigures]) -> Option<VariantComparison> {
    let (metric, part): (&str, fn(&VariantFigures) -> i64) = if kind == StepType::ConnectionRequest
    {
        ("acceptance_rate", |v| v.accepted.unwrap_or(0))
    } else {
        ("reply_rate", |v| v.replied)
    };
    let mut sent: Vec<&VariantFigures> = variants.iter().filter(|v| v.sent > 0).collect();
    if sent.len() < 2 {
        return None;
    }
    sent.sort_by(|a, b| {
        let (ra, rb) = (
            part(a) as f64 / a.sent as f64,
            part(b) as f64 / b.sent as f64,
        );
        rb.total_cmp(&ra)
    });
    let (leader, other) = (sent[0], sent[1]);
    let z = two_proportion_z(part(leader), leader.sent, part(other), other.sent);
    let significant = z.is_some_and(|z| z.abs() >= Z_95);
    let counts = format!(
        "`{}` {}/{} against `{}` {}/{}",
        leader.variant,
        part(leader),
        leader.sent,
        other.variant,
        part(other),
        other.sent
    );
    let note = match z {
        Some(z) if significant => format!(
            "`{}` leads on {metric} ({counts}); two-proportion z-test z = {z:.2}, at or over 1.96: significant at 95 %.",
            leader.variant
        ),
        Some(z) => format!(
            "`{}` leads on {metric} ({counts}), but not yet significantly: two-proportion z-test z = {z:.2}, under 1.96 (95 %). Keep sending both.",
            leader.variant
        ),
        None => format!(
            "No difference can be tested yet on {metric} ({counts}): the two-proportion z-test needs both rates between 0 and 1 together."
        ),
    };
    Some(VariantComparison {
        metric: metric.to_owned(),
        leader: leader.variant.clone(),
        other: other.variant.clone(),
        z: z.map(|z| (z * 1000.0).round() / 1000.0),
        significant,
        note,
    })
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
           select e.sequence_id, v.step_index, v.kind, v.variant, v.at, e.accepted_at, e.replied_at, \
             lead(v.at) over (partition by v.enrollment_id order by v.at, v.id) as next_at \
           from enrollment_events v join enrollments e on e.id = v.enrollment_id \
           where e.workspace_id = $1 and ($2 is null or e.sequence_id = $2) \
             and v.outcome = 'sent' and v.kind in ('view_profile', 'connection_request', 'message', 'inmail') \
             and v.at >= $3) \
         select sequence_id, step_index, kind, variant, count(*) as sent, \
           cast(coalesce(sum(case when accepted_at is not null and accepted_at >= at then 1 else 0 end), 0) as bigint) as accepted, \
           cast(coalesce(sum(case when replied_at is not null and replied_at >= at \
             and (next_at is null or replied_at < next_at) then 1 else 0 end), 0) as bigint) as replied \
         from sent group by sequence_id, step_index, kind, variant",
    )
    .bind(workspace_id)
    .bind(sequence_id)
    .bind(since)
    .fetch_all(&mut *conn)
    .await?;
    // A failure's variant is its step's history entry's (the refused call).
    let failed = sqlx::query(
        "select sequence_id, step_index, variant, count(*) as failed from ( \
           select e.sequence_id, v.step_index, \
             (select s.variant from enrollment_events s where s.enrollment_id = v.enrollment_id \
                and s.step_index = v.step_index and s.variant is not null order by s.at desc limit 1) as variant \
           from enrollment_events v join enrollments e on e.id = v.enrollment_id \
           where e.workspace_id = $1 and ($2 is null or e.sequence_id = $2) \
             and (v.kind = 'failed' or (v.kind = 'inmail' and v.outcome in ('not_allowed_inmail', 'insufficient_inmail_credits'))) \
             and v.step_index is not null and v.at >= $3) f \
         group by sequence_id, step_index, variant",
    )
    .bind(workspace_id)
    .bind(sequence_id)
    .bind(since)
    .fetch_all(&mut *conn)
    .await?;
    let branched = sqlx::query(
        "select e.sequence_id, v.step_index, v.outcome, count(*) as n \
         from enrollment_events v join enrollments e on e.id = v.enrollment_id \
         where e.workspace_id = $1 and ($2 is null or e.sequence_id = $2) and v.kind = 'branched' \
           and v.step_index is not null and v.at >= $3 group by e.sequence_id, v.step_index, v.outcome",
    )
    .bind(workspace_id)
    .bind(sequence_id)
    .bind(since)
    .fetch_all(&mut *conn)
    .await?;
    // (sequence, step) -> (kind, per variant ("" for none) counts)
    type ByVariant = BTreeMap<String, Counts>;
    let mut by_step: BTreeMap<(String, i64), (Option<StepType>, ByVariant)> = BTreeMap::new();
    for row in &sent {
        let kind = StepType::from_db(&row.try_get::<String, _>("kind")?)?;
        let key = (row.try_get("sequence_id")?, row.try_get("step_index")?);
        let variant: Option<String> = row.try_get("variant")?;
        let entry = by_step.entry(key).or_default();
        entry.0 = Some(kind);
        entry
            .1
            .entry(variant.unwrap_or_default())
            .or_default()
            .add(Counts {
                sent: row.try_get("sent")?,
                accepted: row.try_get("accepted")?,
                replied: row.try_get("replied")?,
                failed: 0,
            });
    }
    for row in &failed {
        let key = (row.try_get("sequence_id")?, row.try_get("step_index")?);
        let variant: Option<String> = row.try_get("variant")?;
        let entry = by_step.entry(key).or_default();
        entry
            .1
            .entry(variant.unwrap_or_default())
            .or_default()
            .failed += row.try_get::<i64, _>("failed")?;
    }
    let mut branches: BTreeMap<(String, i64), BranchCounts> = BTreeMap::new();
    for row in &branched {
        let key = (row.try_get("sequence_id")?, row.try_get("step_index")?);
        by_step
            .entry((row.try_get("sequence_id")?, row.try_get("step_index")?))
            .or_default()
            .0 = Some(StepType::Condition);
        let n: i64 = row.try_get("n")?;
        let counts = branches.entry(key).or_default();
        match row.try_get::<Option<String>, _>("outcome")?.as_deref() {
            Some("then") => counts.then_step += n,
            _ => counts.else_step += n,
        }
    }
    let mut sequences: BTreeMap<String, Option<super::Sequence>> = BTreeMap::new();
    let mut by_sequence: BTreeMap<String, Vec<StepFigures>> = BTreeMap::new();
    for ((sequence_id, step_index), (kind, variants)) in by_step {
        // A step that failed for everyone it was tried on has no sent row: its type is the
        // sequence's.
        let kind = match kind {
            Some(kind) => kind,
            None => {
                if !sequences.contains_key(&sequence_id) {
                    let sequence = fetch_row(conn, workspace_id, &sequence_id).await.ok();
                    sequences.insert(sequence_id.clone(), sequence);
                }
                let step = sequences
                    .get(&sequence_id)
                    .and_then(Option::as_ref)
                    .and_then(|s| {
                        usize::try_from(step_index)
                            .ok()
                            .and_then(|i| s.steps.get(i))
                    });
                let Some(step) = step else { continue };
                step.kind
            }
        };
        let mut total = Counts::default();
        for counts in variants.values() {
            total.add(*counts);
        }
        let index = u32::try_from(step_index).unwrap_or(0);
        let mut figures = StepFigures::of(index, kind, total);
        figures.variants = variants
            .iter()
            .filter(|(variant, _)| !variant.is_empty())
            .map(|(variant, counts)| VariantFigures::of(variant, kind, *counts))
            .collect();
        figures.comparison = compare(kind, &figures.variants);
        if let Some(counts) = branches.get(&(sequence_id.clone(), step_index)) {
            figures.branches = Some(*counts);
        }
        by_sequence.entry(sequence_id).or_default().push(figures);
    }
    Ok(by_sequence)
}

/// The input of `get_sequence_stats`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetSequenceStatsInput {
    /// `seq_...`
    pub id: String,
    /// Steps sent in this window, with what came of them since.
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
/// Per step: sent, accepted, replied before the next step, failed, and the rates.
///
/// For each step, in order: how many people it reached (`sent`), for an invitation how many
/// accepted, how many replied after it and before their next step, the rates, and how many
/// failed at it. `period` picks the steps by when they were sent (default `all`).
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
    let mut by_step = step_figures(&mut conn, ctx.workspace_id(), Some(&input.id), since)
        .await?
        .remove(&input.id)
        .unwrap_or_default();
    let mut steps = Vec::with_capacity(sequence.steps.len());
    let figures = &mut by_step;
    for (index, step) in sequence.steps.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let mut figures = match figures.iter().position(|figure| figure.step_index == index) {
            Some(at) => figures.swap_remove(at),
            None => StepFigures::unsent(index, step.kind),
        };
        figures.complete(step);
        steps.push(figures);
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
