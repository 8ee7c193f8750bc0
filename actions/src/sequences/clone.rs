//! `clone_sequence`: a new draft with another sequence's steps, schedule, settings and senders,
//! and none of its enrollments, so a proven sequence is the start of the next one.

use outreach_runtime::prelude::{ApiError, Ctx, action, ids};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Sequence, check_name, fetch, write_senders};
use crate::common::json_text;

/// The input of `clone_sequence`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct CloneSequenceInput {
    /// `seq_...`
    pub id: String,
    /// Default: the original's, then ` (copy)`.
    #[schemars(length(min = 1, max = 200), regex(pattern = crate::common::NOT_BLANK))]
    pub name: Option<String>,
}

/// Copy a sequence into a new draft.
///
/// With its steps, schedule, settings and senders; no enrollments.
///
/// The original may be in any status. The copy is a `draft` whatever the original's status, so
/// nothing is sent until it is activated and people are added and approved.
#[action(scope = "write", idempotent, http = "POST /sequences/{id}/clone")]
pub async fn clone_sequence(ctx: Ctx, input: CloneSequenceInput) -> Result<Sequence, ApiError> {
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let original = fetch(&mut tx, ctx.workspace_id(), &input.id, now).await?;
    let name = match input.name {
        Some(name) => check_name(&name)?,
        None => {
            let copy: String = original.name.chars().take(193).collect();
            format!("{} (copy)", copy.trim_end())
        }
    };
    let id = ids::new_id("seq");
    sqlx::query(
        "insert into sequences (id, workspace_id, name, status, steps, schedule, settings, created_at, updated_at) \
         values ($1, $2, $3, 'draft', $4, $5, $6, $7, $7)",
    )
    .bind(&id)
    .bind(ctx.workspace_id())
    .bind(&name)
    .bind(json_text(&original.steps)?)
    .bind(json_text(&original.schedule)?)
    .bind(json_text(&original.settings)?)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    write_senders(&mut tx, ctx.workspace_id(), &id, &original.sender_ids).await?;
    fetch(&mut tx, ctx.workspace_id(), &id, now).await
}

outreach_runtime::prelude::example!(clone_sequence,
    request: {"id": "seq_sGbl2nzkshQDV6qitLc9", "name": "Q4 heads of sales"},
    response: {
        "activated_at": null,
        "created_at": "2026-11-25T08:02:11.503Z",
        "enrollment_counts": {
            "active": 0,
            "awaiting_approval": 0,
            "failed": 0,
            "finished": 0,
            "paused": 0,
            "scheduled": 0
        },
        "finished_at": null,
        "id": "seq_Vb3nQ8xLm2cK7pW1tZr5",
        "name": "Q4 heads of sales",
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
            "skip_if_contacted_within_days": 30,
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
            }
        ],
        "updated_at": "2026-11-25T08:02:11.503Z"
    }
);

outreach_runtime::prelude::parity!(clone_sequence, write,
    ok: {"id": "$active", "name": "Copy ${tag}"},
    fails: {"id": "$missing:seq"} => NOT_FOUND
);
