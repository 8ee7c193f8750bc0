//! A sequence's state machine: `draft -> active <-> paused -> completed | stopped`.
//!
//! Every transition is one table ([`allowed`]), so a wrong one is a 409 `invalid_state` whose
//! sentence names the current status and the transitions it allows: the field's most common
//! complaint is a state error that does not say the state. Starting and resuming run a preflight
//! that reports every reason at once (no steps, no senders, a sender not `connected`, sending terms
//! not accepted) rather than the first. Pausing a sequence leaves its enrollments as they are: the
//! scheduler checks the sequence's status before each step, so the pause takes effect on the next
//! step. Stopping finishes its live enrollments (`stopped`) and expires its pending approvals.

use sqlx::Row;

use serde_json::json;

use super::{Sequence, SequenceId, SequenceStatus, fetch, lock};
use crate::events::{self, EventType};
use crate::lists::placeholders;
use outreach_runtime::prelude::{ApiError, Ctx, ErrorCode, action};

/// A transition a caller may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Activate,
    Pause,
    Resume,
    Stop,
}

impl Transition {
    fn action(self) -> &'static str {
        match self {
            Transition::Activate => "activate_sequence",
            Transition::Pause => "pause_sequence",
            Transition::Resume => "resume_sequence",
            Transition::Stop => "stop_sequence",
        }
    }

    fn target(self) -> SequenceStatus {
        match self {
            Transition::Activate | Transition::Resume => SequenceStatus::Active,
            Transition::Pause => SequenceStatus::Paused,
            Transition::Stop => SequenceStatus::Stopped,
        }
    }
}

/// The transitions each status allows.
pub fn allowed(status: SequenceStatus) -> &'static [Transition] {
    match status {
        SequenceStatus::Draft => &[Transition::Activate],
        SequenceStatus::Active => &[Transition::Pause, Transition::Stop],
        SequenceStatus::Paused => &[Transition::Resume, Transition::Stop],
        SequenceStatus::Completed | SequenceStatus::Stopped => &[],
    }
}

/// The 409 for `transition` from `status`, naming both and what is allowed.
pub fn refusal(id: &str, status: SequenceStatus, transition: Transition) -> ApiError {
    let allowed = allowed(status);
    let what = if allowed.is_empty() {
        let extra = if status == SequenceStatus::Draft {
            ""
        } else {
            " (a finished sequence changes no more; create a new one)"
        };
        format!("nothing is allowed from `{status}`{extra}")
    } else {
        format!(
            "from `{status}` only {} {} allowed",
            allowed
                .iter()
                .map(|t| format!("`{}`", t.action()))
                .collect::<Vec<_>>()
                .join(" and "),
            if allowed.len() == 1 { "is" } else { "are" }
        )
    };
    let hint = match (status, transition) {
        (SequenceStatus::Draft, Transition::Stop) => {
            " A draft has sent nothing: delete it with `delete_sequence`."
        }
        (SequenceStatus::Paused, Transition::Activate) => " Use `resume_sequence`.",
        _ => "",
    };
    ApiError::new(
        ErrorCode::INVALID_STATE,
        format!(
            "Sequence `{id}` is `{status}`, so `{}` cannot run: {what}.{hint}",
            transition.action()
        ),
    )
    .with_extra("status", status.as_str())
    .with_extra(
        "allowed",
        allowed.iter().map(|t| t.action()).collect::<Vec<_>>(),
    )
}

/// Why a sequence cannot send: every reason, empty when it can.
async fn preflight(
    conn: &mut sqlx::AnyConnection,
    sequence: &Sequence,
    terms_accepted: bool,
) -> Result<Vec<String>, ApiError> {
    let mut reasons = Vec::new();
    if sequence.steps.is_empty() {
        reasons.push("it has no steps (add them with `update_sequence`)".to_owned());
    }
    if sequence.sender_ids.is_empty() {
        reasons.push("it has no senders (set `sender_ids` with `update_sequence`)".to_owned());
    } else {
        let sql = format!(
            "select id, status from senders where id in {} order by id",
            placeholders(1, sequence.sender_ids.len())
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).persistent(false);
        for id in &sequence.sender_ids {
            query = query.bind(id);
        }
        for row in query.fetch_all(&mut *conn).await? {
            let status: String = row.try_get("status")?;
            if status != "connected" {
                let id: String = row.try_get("id")?;
                reasons.push(format!(
                    "sender `{id}` is `{status}`, not `connected` (reconnect it or remove it from the sequence)"
                ));
            }
        }
    }
    if !terms_accepted {
        reasons.push("the workspace's sending terms are not accepted".to_owned());
    }
    Ok(reasons)
}

/// Runs one transition on a locked sequence.
async fn transition(ctx: &Ctx, id: &str, transition: Transition) -> Result<Sequence, ApiError> {
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    // A stop finishes the live enrollments: their people first, before the sequence's row (see
    // `person_lock`). Activating, pausing and resuming write only the sequence's row (and its
    // steps' jobs): a step job reads that row with a share lock as it decides whether its
    // sequence lets it go on (`delivery`), so it sees a change made before it, and a change
    // made after waits for it and then finds its job ended and enqueues a new one.
    let mut tx = if transition == Transition::Stop {
        crate::person_lock::lock_of_sequence(&mut tx, workspace_id, id).await?
    } else {
        crate::person_lock::lock(&mut tx, workspace_id, []).await?
    };
    let sequence = lock(&mut tx, workspace_id, id, now).await?;
    if transition == Transition::Stop {
        tx.confirm_of_sequence(workspace_id, id).await?;
    }
    if !allowed(sequence.status).contains(&transition) {
        return Err(refusal(&sequence.id, sequence.status, transition));
    }
    if matches!(transition, Transition::Activate | Transition::Resume) {
        let reasons = preflight(&mut tx, &sequence, ctx.principal().terms_accepted).await?;
        if !reasons.is_empty() {
            return Err(ApiError::new(
                ErrorCode::INVALID_STATE,
                format!(
                    "Sequence `{}` cannot start: {}.",
                    sequence.id,
                    reasons.join("; ")
                ),
            )
            .with_extra("status", sequence.status.as_str())
            .with_extra("reasons", reasons));
        }
    }
    let target = transition.target();
    sqlx::query(
        "update sequences set status = $3, updated_at = $4, \
         activated_at = case when $5 = 1 and activated_at is null then $4 else activated_at end, \
         finished_at = case when $6 = 1 then $4 else finished_at end \
         where workspace_id = $1 and id = $2",
    )
    .bind(workspace_id)
    .bind(&sequence.id)
    .bind(target.as_str())
    .bind(now)
    .bind(i64::from(transition == Transition::Activate))
    .bind(i64::from(transition == Transition::Stop))
    .execute(&mut *tx)
    .await?;
    let event = match transition {
        Transition::Activate | Transition::Resume => Some(EventType::SequenceActivated),
        Transition::Pause => Some(EventType::SequencePaused),
        // A stop says itself through each enrollment's `enrollment.finished`.
        Transition::Stop => None,
    };
    if let Some(event) = event {
        events::record(
            &mut tx,
            workspace_id,
            now,
            event,
            json!({"sequence_id": sequence.id}),
        )
        .await?;
    }
    if transition == Transition::Stop {
        crate::enrollments::stop_all_of_sequence(
            &mut tx,
            ctx.clock(),
            workspace_id,
            &sequence.id,
            now,
        )
        .await?;
    }
    if matches!(transition, Transition::Activate | Transition::Resume) {
        // Approved enrollments get their step jobs back (a job that ran while the sequence was
        // not active ended itself).
        crate::step_jobs::schedule_sequence(&mut tx, ctx.clock(), workspace_id, &sequence.id, now)
            .await?;
    }
    fetch(&mut tx, workspace_id, &sequence.id, now).await
}

/// Start a draft sequence: approved enrollments begin to receive its steps.
///
/// Only enrollments approved with `approve_outreach` are sent to. Only a `draft` (a paused one is
/// resumed with `resume_sequence`); it needs steps and `connected` senders.
///
/// Real invitations and messages go from its senders. A preflight refuses with 409 `invalid_state`
/// and every reason (no steps, no senders, a sender not `connected`). A paused sequence is resumed
/// instead (`resume_sequence`).
#[action(scope = "send", idempotent, http = "POST /sequences/{id}/activate")]
pub async fn activate_sequence(ctx: Ctx, input: SequenceId) -> Result<Sequence, ApiError> {
    // Nothing could ever be sent (production without a network): refused before anything
    // changes, rather than activated to wait forever.
    crate::provider::configured(ctx.config())?;
    transition(&ctx, &input.id, Transition::Activate).await
}

outreach_runtime::prelude::example!(activate_sequence,
    request: {"id": "seq_sGbl2nzkshQDV6qitLc9"},
    response: {
        "activated_at": "2026-11-23T21:19:40.461Z",
        "created_at": "2026-11-23T21:19:40.394Z",
        "enrollment_counts": {
            "active": 0,
            "awaiting_approval": 0,
            "failed": 0,
            "finished": 1,
            "paused": 0,
            "scheduled": 1
        },
        "finished_at": null,
        "id": "seq_sGbl2nzkshQDV6qitLc9",
        "name": "Q3 heads of sales (DACH)",
        "schedule": {"respect_prospect_timezone": false},
        "sender_ids": ["snd_jp6TNuolp8f32URYMVrb"],
        "sending": {"next_send_at": "2026-11-23T21:19:40.433Z", "reason": null, "sending": true},
        "settings": {
            "exit_after_days_without_acceptance": 14,
            "out_of_office_hold_days": 7,
            "skip_if_contacted_within_days": 60,
            "skip_if_in_other_live_sequence": true,
            "stop_on_reply": true
        },
        "status": "active",
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
        "updated_at": "2026-11-23T21:19:40.461Z"
    }
);

outreach_runtime::prelude::parity!(activate_sequence, write,
    ok: {"id": "$draft"},
    fails: {"id": "$active"} => INVALID_STATE
);

/// Pause an active sequence: no step of it is sent until it is resumed.
///
/// Enrollments keep their place; a step already being sent finishes.
///
/// Only an `active` sequence can be paused. Takes effect before the next step of each
/// enrollment.
#[action(scope = "send", idempotent, http = "POST /sequences/{id}/pause")]
pub async fn pause_sequence(ctx: Ctx, input: SequenceId) -> Result<Sequence, ApiError> {
    transition(&ctx, &input.id, Transition::Pause).await
}

outreach_runtime::prelude::example!(pause_sequence,
    request: {"id": "seq_sGbl2nzkshQDV6qitLc9"},
    response: {
        "activated_at": "2026-11-23T21:19:40.461Z",
        "created_at": "2026-11-23T21:19:40.394Z",
        "enrollment_counts": {
            "active": 0,
            "awaiting_approval": 0,
            "failed": 0,
            "finished": 1,
            "paused": 0,
            "scheduled": 1
        },
        "finished_at": null,
        "id": "seq_sGbl2nzkshQDV6qitLc9",
        "name": "Q3 heads of sales (DACH)",
        "schedule": {"respect_prospect_timezone": false},
        "sender_ids": ["snd_jp6TNuolp8f32URYMVrb"],
        "sending": {
            "next_send_at": null,
            "reason": "The sequence is paused; `resume_sequence` resumes it.",
            "sending": false
        },
        "settings": {
            "exit_after_days_without_acceptance": 14,
            "out_of_office_hold_days": 7,
            "skip_if_contacted_within_days": 60,
            "skip_if_in_other_live_sequence": true,
            "stop_on_reply": true
        },
        "status": "paused",
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
        "updated_at": "2026-11-23T21:19:40.575Z"
    }
);

outreach_runtime::prelude::parity!(pause_sequence, write,
    ok: {"id": "$active"},
    fails: {"id": "$draft"} => INVALID_STATE
);

/// Resume a paused sequence: its approved enrollments receive their next steps again.
///
/// With `activate_sequence`'s preflight. Steps that fell due while paused go out as hours and
/// limits allow.
#[action(scope = "send", idempotent, http = "POST /sequences/{id}/resume")]
pub async fn resume_sequence(ctx: Ctx, input: SequenceId) -> Result<Sequence, ApiError> {
    transition(&ctx, &input.id, Transition::Resume).await
}

outreach_runtime::prelude::example!(resume_sequence,
    request: {"id": "seq_sGbl2nzkshQDV6qitLc9"},
    response: {
        "activated_at": "2026-11-23T21:19:40.461Z",
        "created_at": "2026-11-23T21:19:40.394Z",
        "enrollment_counts": {
            "active": 0,
            "awaiting_approval": 0,
            "failed": 0,
            "finished": 1,
            "paused": 0,
            "scheduled": 1
        },
        "finished_at": null,
        "id": "seq_sGbl2nzkshQDV6qitLc9",
        "name": "Q3 heads of sales (DACH)",
        "schedule": {"respect_prospect_timezone": false},
        "sender_ids": ["snd_jp6TNuolp8f32URYMVrb"],
        "sending": {"next_send_at": "2026-11-23T21:19:40.535Z", "reason": null, "sending": true},
        "settings": {
            "exit_after_days_without_acceptance": 14,
            "out_of_office_hold_days": 7,
            "skip_if_contacted_within_days": 60,
            "skip_if_in_other_live_sequence": true,
            "stop_on_reply": true
        },
        "status": "active",
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
        "updated_at": "2026-11-23T21:19:40.587Z"
    }
);

outreach_runtime::prelude::parity!(resume_sequence, write,
    ok: {"id": "$paused"},
    fails: {"id": "$active"} => INVALID_STATE
);

/// Stop a sequence for good.
///
/// Cannot be undone; pending approval items expire. From `active` or `paused` only.
///
/// Every live enrollment finishes with exit reason `stopped`; nothing more is sent. A draft is
/// deleted instead (`delete_sequence`).
#[action(scope = "send", idempotent, http = "POST /sequences/{id}/stop")]
pub async fn stop_sequence(ctx: Ctx, input: SequenceId) -> Result<Sequence, ApiError> {
    transition(&ctx, &input.id, Transition::Stop).await
}

outreach_runtime::prelude::example!(stop_sequence,
    request: {"id": "seq_sGbl2nzkshQDV6qitLc9"},
    response: {
        "activated_at": "2026-11-23T21:19:40.461Z",
        "created_at": "2026-11-23T21:19:40.394Z",
        "enrollment_counts": {
            "active": 0,
            "awaiting_approval": 0,
            "failed": 0,
            "finished": 2,
            "paused": 0,
            "scheduled": 0
        },
        "finished_at": "2026-11-23T21:19:40.600Z",
        "id": "seq_sGbl2nzkshQDV6qitLc9",
        "name": "Q3 heads of sales (DACH)",
        "schedule": {"respect_prospect_timezone": false},
        "sender_ids": ["snd_jp6TNuolp8f32URYMVrb"],
        "sending": {"next_send_at": null, "reason": "The sequence is stopped.", "sending": false},
        "settings": {
            "exit_after_days_without_acceptance": 14,
            "out_of_office_hold_days": 7,
            "skip_if_contacted_within_days": 60,
            "skip_if_in_other_live_sequence": true,
            "stop_on_reply": true
        },
        "status": "stopped",
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
        "updated_at": "2026-11-23T21:19:40.600Z"
    }
);

outreach_runtime::prelude::parity!(stop_sequence, write,
    ok: {"id": "$active"},
    fails: {"id": "$draft"} => INVALID_STATE
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_status_and_what_is_allowed() {
        let error = refusal("seq_x", SequenceStatus::Active, Transition::Activate);
        assert_eq!(error.code, ErrorCode::INVALID_STATE);
        assert!(error.message.contains("is `active`"), "{}", error.message);
        assert!(
            error
                .message
                .contains("`pause_sequence` and `stop_sequence` are allowed"),
            "{}",
            error.message
        );
        let error = refusal("seq_x", SequenceStatus::Stopped, Transition::Resume);
        assert!(
            error.message.contains("nothing is allowed from `stopped`"),
            "{}",
            error.message
        );
        let error = refusal("seq_x", SequenceStatus::Draft, Transition::Stop);
        assert!(
            error.message.contains("delete_sequence"),
            "{}",
            error.message
        );
    }
}
