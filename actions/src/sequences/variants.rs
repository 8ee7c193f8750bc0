//! A/B variants: which variant of a step each enrollment is given, and turning one off.
//!
//! The choice is weighted rendezvous hashing: each live variant draws a score from a hash of
//! (enrollment, step key, variant key) and its weight, and the lowest score wins. It needs no
//! stored state to be stable (a retry, a restart or another instance computes the same answer),
//! it follows the weights, and turning a variant off moves only the enrollments that had it: every
//! other enrollment's winner is unchanged. What was given is recorded where it matters: the
//! step's intent keeps its variant, so the call is settled or sent again with the same text, and
//! the history entry of the sent step names it (what `get_sequence_stats` counts by).
//!
//! Every variant's text is rendered into the approval item (see `steps::render_steps`), so a
//! variant turned on again later was approved like the others.

use schemars::JsonSchema;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{Sequence, SequenceStatus, Step, fetch, lock};
use crate::common::json_text;
use outreach_runtime::prelude::{ApiError, Ctx, ErrorCode, action};

/// The variant `enrollment_id` is given at `step`, among the live ones `usable` accepts (those
/// with an approved text); `None` when the step has no variants or none is usable.
pub fn assign<'s>(
    enrollment_id: &str,
    step: &'s Step,
    usable: impl Fn(&str) -> bool,
) -> Option<&'s str> {
    let variants = step.variants.as_ref()?;
    variants
        .iter()
        .filter(|variant| variant.live() && usable(variant.key()))
        .map(|variant| {
            let score = -unit_draw(enrollment_id, step.key(), variant.key()).ln()
                / f64::from(variant.weight);
            (score, variant.key())
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, key)| key)
}

/// A uniform draw in (0, 1] from a hash of the three keys.
fn unit_draw(enrollment_id: &str, step_key: &str, variant_key: &str) -> f64 {
    let mut hasher = Sha256::new();
    for part in [enrollment_id, step_key, variant_key] {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    let digest = hasher.finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    // 53 bits, the mantissa's width: (n + 1) / 2^53 is never 0.
    let n = u64::from_be_bytes(bytes) >> 11;
    (n as f64 + 1.0) / (1u64 << 53) as f64
}

/// The input of `update_step_variant`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateStepVariantInput {
    /// `seq_...`
    pub id: String,
    /// The step's `key` (default `s1`, `s2`, ...).
    pub step: String,
    /// The variant's `key` (`a`, `b`, ...).
    pub variant: String,
    /// False: no new enrollment is given it.
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default)]
    #[schemars(range(max = 100))]
    pub weight: Option<u32>,
}

/// Turn one A/B variant of a step off or on, or change its weight.
///
/// Affects enrollments not yet at the step. One variant must stay on with a weight above 0.
///
/// Leaves the other variants as they are. Works while the sequence is a draft, active or paused.
/// From then on, enrollments that have not reached the step yet are given a variant among those
/// left on (only those that had this one move; a step already sent keeps its variant). Turning
/// off or weighing 0 the last live variant of the step is a 400.
#[action(scope = "write", idempotent, http = "PATCH /sequences/{id}/variants")]
pub async fn update_step_variant(
    ctx: Ctx,
    input: UpdateStepVariantInput,
) -> Result<Sequence, ApiError> {
    if input.enabled.is_none() && input.weight.is_none() {
        return Err(ApiError::invalid_request(
            "Give `enabled`, `weight` or both: there is nothing to change.",
        ));
    }
    if let Some(weight) = input.weight
        && weight > super::steps::MAX_WEIGHT
    {
        return Err(ApiError::invalid_request(format!(
            "`weight` is {weight}; it must be between 0 and 100."
        )));
    }
    let workspace_id = ctx.workspace_id();
    let now = ctx.now_ms();
    let mut tx = ctx.tx().await?;
    let mut tx = crate::person_lock::lock(&mut tx, workspace_id, []).await?;
    let current = lock(&mut tx, workspace_id, &input.id, now).await?;
    if matches!(
        current.status,
        SequenceStatus::Completed | SequenceStatus::Stopped
    ) {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "Sequence `{}` is `{}`; its variants change only while it is a draft, active or paused.",
                current.id, current.status
            ),
        )
        .with_extra("status", current.status.as_str()));
    }
    let mut steps = current.steps.clone();
    let Some(step) = steps.iter_mut().find(|step| step.key() == input.step) else {
        let keys: Vec<&str> = current.steps.iter().map(Step::key).collect();
        return Err(ApiError::invalid_request(format!(
            "`step` is `{}`, which no step of sequence `{}` is; its steps are {}.",
            input.step,
            current.id,
            keys.join(", ")
        )));
    };
    let step_key = step.key().to_owned();
    let Some(variants) = step.variants.as_mut() else {
        return Err(ApiError::invalid_request(format!(
            "Step `{step_key}` has no variants; give a `message` or `connection_request` step `variants` with `update_sequence` (while the sequence is a draft or paused)."
        )));
    };
    let keys: Vec<String> = variants.iter().map(|v| v.key().to_owned()).collect();
    let Some(variant) = variants.iter_mut().find(|v| v.key() == input.variant) else {
        return Err(ApiError::invalid_request(format!(
            "`variant` is `{}`, which step `{step_key}` has not; its variants are {}.",
            input.variant,
            keys.join(", ")
        )));
    };
    if let Some(enabled) = input.enabled {
        variant.enabled = enabled;
    }
    if let Some(weight) = input.weight {
        variant.weight = weight;
    }
    if !variants.iter().any(super::Variant::live) {
        return Err(ApiError::invalid_request(format!(
            "This would leave step `{step_key}` with no variant to give (each is off or weighs 0); keep at least one on with a weight above 0."
        )));
    }
    sqlx::query(
        "update sequences set steps = $3, updated_at = $4 where workspace_id = $1 and id = $2",
    )
    .bind(workspace_id)
    .bind(&current.id)
    .bind(json_text(&steps)?)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    fetch(&mut tx, workspace_id, &current.id, now).await
}

outreach_runtime::prelude::example!(update_step_variant,
    request: {"id": "seq_sGbl2nzkshQDV6qitLc9", "step": "s2", "variant": "b", "enabled": false},
    response: {
        "activated_at": "2026-11-25T08:02:11.503Z",
        "created_at": "2026-11-24T16:40:02.118Z",
        "enrollment_counts": {
            "active": 31,
            "awaiting_approval": 0,
            "failed": 1,
            "finished": 8,
            "paused": 0,
            "scheduled": 0
        },
        "finished_at": null,
        "id": "seq_sGbl2nzkshQDV6qitLc9",
        "name": "Q3 heads of sales (DACH)",
        "schedule": {"respect_prospect_timezone": false},
        "sender_ids": ["snd_jp6TNuolp8f32URYMVrb"],
        "sending": {
            "next_send_at": "2026-11-30T08:00:41.000Z",
            "reason": null,
            "sending": true
        },
        "settings": {
            "exit_after_days_without_acceptance": 21,
            "out_of_office_hold_days": 7,
            "skip_if_contacted_within_days": 30,
            "skip_if_in_other_live_sequence": true,
            "stop_on_reply": true
        },
        "status": "active",
        "steps": [
            {"delay_hours": 0, "key": "s1", "note": "Hi {{first_name|there}}, would be glad to connect.", "text": null, "type": "connection_request"},
            {
                "delay_hours": 48,
                "key": "s2",
                "note": null,
                "text": null,
                "type": "message",
                "variants": [
                    {"enabled": true, "key": "a", "text": "Thanks for connecting, {{first_name|there}}.", "weight": 1},
                    {"enabled": false, "key": "b", "text": "Glad we are connected, {{first_name|there}}!", "weight": 1}
                ]
            }
        ],
        "updated_at": "2026-11-30T07:41:09.220Z"
    }
);

outreach_runtime::prelude::parity!(update_step_variant, write,
    ok: {"id": "$variants", "step": "s2", "variant": "b", "enabled": false},
    fails: {"id": "$variants", "step": "s2", "variant": "zz", "enabled": false} => INVALID_REQUEST
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sequences::{StepType, Variant};

    fn step(weights: &[(u32, bool)]) -> Step {
        Step {
            key: Some("s2".into()),
            variants: Some(
                weights
                    .iter()
                    .enumerate()
                    .map(|(i, (weight, enabled))| Variant {
                        key: Some(((b'a' + i as u8) as char).to_string()),
                        note: None,
                        text: Some("hi".into()),
                        weight: *weight,
                        enabled: *enabled,
                    })
                    .collect(),
            ),
            ..Step::of(StepType::Message)
        }
    }

    #[test]
    fn assignments_follow_the_weights_and_are_stable() {
        let step = step(&[(1, true), (3, true)]);
        let ids: Vec<String> = (0..4000).map(|i| format!("enr_{i}")).collect();
        let b = ids
            .iter()
            .filter(|id| assign(id, &step, |_| true) == Some("b"))
            .count();
        // 3 in 4 expected: 3,000 of 4,000, within 5 standard deviations (27).
        assert!((2865..=3135).contains(&b), "{b}");
        assert_eq!(
            assign("enr_7", &step, |_| true),
            assign("enr_7", &step, |_| true)
        );
    }

    #[test]
    fn turning_a_variant_off_moves_only_its_enrollments() {
        let before = step(&[(1, true), (1, true), (1, true)]);
        let after = step(&[(1, true), (1, false), (1, true)]);
        for i in 0..2000 {
            let id = format!("enr_{i}");
            let was = assign(&id, &before, |_| true);
            let is = assign(&id, &after, |_| true);
            if was != Some("b") {
                assert_eq!(was, is, "{id}");
            } else {
                assert_ne!(is, Some("b"));
            }
        }
    }
}
