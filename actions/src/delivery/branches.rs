//! Condition steps: where an enrollment goes next, decided when the step comes due.
//!
//! A `condition` reaches no network and takes no quota, so it is decided inside the step job's
//! first transaction, under the person's lock like every step. `connected` reads the enrollment's
//! `accepted_at` (set when the network reports the acceptance, or when an invitation found the
//! person already connected), `replied` its `replied_at` (an out-of-office answer is not a reply),
//! and `profile_has` the prospect's field at that moment.
//!
//! With `within_days`, a condition that does not hold yet waits: the enrollment keeps the step,
//! with `condition_until` its deadline and its next run at that deadline. An acceptance or a
//! reply meanwhile wakes it at once ([`crate::enrollments::wake_condition`]), and it is decided
//! again; at the deadline a `connected` condition asks the network once more (its signal can be
//! late) before taking the `else_step`. Every decision is a `branched` history entry naming what
//! was asked, the answer and where the enrollment went.

use outreach_runtime::prelude::{JobCtx, JobError, JobOutcome};

use super::{EnrollmentRow, acceptance_came, finish};
use crate::enrollments::{self, EnrollmentEventKind, EnrollmentStatus};
use crate::person_lock::PersonTx;
use crate::sequences::{ConditionKind, FINISH, Flow, Next, Sequence};
use outreach_runtime::prelude::ApiError;

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// Whether deciding the condition at `index` now needs the network's word on the connection: a
/// `connected` condition not known to hold, for someone this enrollment never invited (they may
/// be a connection already), or at its deadline (the network's signal can be late).
fn needs_network(enrollment: &EnrollmentRow, sequence: &Sequence, index: usize, now: i64) -> bool {
    let Some(condition) = sequence.steps.get(index).and_then(|s| s.condition.as_ref()) else {
        return false;
    };
    let at_deadline = condition.within_days.is_some()
        && enrollment.condition_until.is_some_and(|until| now >= until);
    condition.kind == ConditionKind::Connected
        && enrollment.accepted_at.is_none()
        && (enrollment.invited_at.is_none() || at_deadline)
}

/// What deciding a condition did: the step job's outcome, and the step the enrollment moved to
/// (none when it waits on the condition or finished).
pub(super) struct Decision {
    pub outcome: JobOutcome,
    pub next: Option<usize>,
}

/// Decides the condition at `index` for `enrollment` in a step job's run, asking the network when
/// the decision needs it.
pub(super) async fn decide_in_run(
    job: &JobCtx,
    tx: &mut PersonTx<'_>,
    enrollment: &EnrollmentRow,
    sequence: &Sequence,
    index: usize,
    now: i64,
) -> Result<JobOutcome, JobError> {
    let connected = if needs_network(enrollment, sequence, index, now) {
        Some(acceptance_came(job, tx, enrollment).await?)
    } else {
        None
    };
    decide(tx, enrollment, sequence, index, now, connected)
        .await?
        .map(|decision| decision.outcome)
        .ok_or_else(|| JobError::discard("a condition left undecided with the network's answer"))
}

/// Decides the condition at `index` for `enrollment`, now due, and moves it on (or holds it until
/// the condition's deadline); answers the outcome for its step job. `None`, and nothing written,
/// when the decision needs the network's word (`connected`, see [`needs_network`]) and none is
/// given: a sender's run that decides its due conditions together leaves those to their own run.
/// The caller holds the person's lock and checked that the enrollment is live, its sequence
/// active and the step due.
pub(super) async fn decide(
    tx: &mut PersonTx<'_>,
    enrollment: &EnrollmentRow,
    sequence: &Sequence,
    index: usize,
    now: i64,
    connected: Option<bool>,
) -> Result<Option<Decision>, ApiError> {
    let step = &sequence.steps[index];
    let Some(condition) = &step.condition else {
        return Err(ApiError::internal("a condition step without its condition"));
    };
    if needs_network(enrollment, sequence, index, now) && connected.is_none() {
        return Ok(None);
    }
    let mut holds = match condition.kind {
        ConditionKind::Connected => enrollment.accepted_at.is_some(),
        ConditionKind::Replied => enrollment.replied_at.is_some(),
        ConditionKind::ProfileHas => profile_has(tx, enrollment, condition).await?,
    };
    if connected == Some(true) && !holds {
        enrollments::mark_accepted(tx, &enrollment.id, now, None).await?;
        holds = true;
    }
    if !holds && let Some(days) = condition.within_days {
        let until = enrollment
            .condition_until
            .unwrap_or(now + i64::from(days) * DAY_MS);
        if now < until {
            enrollments::wait_on_condition(tx, &enrollment.id, until, now).await?;
            return Ok(Some(Decision {
                outcome: JobOutcome::Snooze { until_ms: until },
                next: None,
            }));
        }
    }
    let flow = Flow::new(&sequence.steps);
    let target = flow.branch(index, holds);
    let (branch, target_key) = if holds {
        ("then", step.then_step.as_deref().unwrap_or(FINISH))
    } else {
        ("else", step.else_step.as_deref().unwrap_or(FINISH))
    };
    let waited = match (condition.within_days, holds) {
        (Some(days), false) => format!(" within {days} days"),
        _ => String::new(),
    };
    let answer = if holds { "yes" } else { "no" };
    let why = format!(
        "`{}`: {}{waited}? {answer}; went to `{target_key}`.",
        condition.kind,
        condition.describe()
    );
    enrollments::record_step_event(
        tx,
        &enrollment.workspace_id,
        &enrollment.id,
        now,
        (EnrollmentEventKind::Branched, Some(enrollment.step_index)),
        (Some(&why), None),
        Some(branch),
    )
    .await?;
    let Next::Step(next) = target else {
        // Past every step: the index no step has.
        let past = i64::try_from(sequence.steps.len()).unwrap_or(i64::MAX);
        enrollments::set_step_index(tx, &enrollment.id, past).await?;
        finish(tx, enrollment, "completed_steps", now).await?;
        return Ok(Some(Decision {
            outcome: JobOutcome::Done,
            next: None,
        }));
    };
    let next_at = now + i64::from(sequence.steps[next].delay_hours) * HOUR_MS;
    let index = i64::try_from(next).unwrap_or(i64::MAX);
    let status = enrollments::advance(tx, &enrollment.id, index, next_at, now).await?;
    let outcome = if status == EnrollmentStatus::Active {
        JobOutcome::Snooze { until_ms: next_at }
    } else {
        JobOutcome::Done
    };
    Ok(Some(Decision {
        outcome,
        next: Some(next),
    }))
}

/// Whether the prospect's field contains the condition's text, letter case ignored.
async fn profile_has(
    tx: &mut PersonTx<'_>,
    enrollment: &EnrollmentRow,
    condition: &crate::sequences::Condition,
) -> Result<bool, ApiError> {
    let (Some(field), Some(contains)) = (condition.field, condition.contains.as_deref()) else {
        return Ok(false);
    };
    // The field's column alone (the enum's names are the prospects table's columns).
    let value: Option<Option<String>> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "select {} from prospects where id = $1",
        field.as_str()
    )))
    .bind(&enrollment.prospect_id)
    .fetch_optional(&mut **tx)
    .await?;
    Ok(value
        .flatten()
        .is_some_and(|value| value.to_lowercase().contains(&contains.to_lowercase())))
}
