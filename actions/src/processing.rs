//! List processing: clean a list's prospects and score them, in one priced, idempotent call.
//!
//! Processing normalises the members' contact fields (email, company domain), removes from the list the members that duplicate an earlier member's email (the
//! prospects themselves stay), then scores what remains against a targeting (the given one or
//! the list's default) through the same code as a scoring run. The cleaning, the scores, the
//! spend and the list's `processed` status commit together, in the transaction dispatch gives.
//!
//! Before that transaction begins (and so before its reservation takes the workspace row), the
//! list is marked `processing` by a committed compare-and-set on its processing token: the call
//! must still see the token its plan read, and the work rotates the token as it finishes. So of
//! many calls planned while one runs, none can mark the list, even after the first commits: each
//! is a 409 `invalid_state` that charges nothing (a retry with the first call's idempotency key
//! replays its answer instead). The mark is a lease, renewed while the work runs: if the process
//! dies, the lease lapses, a retry may mark the list again, and recovery sets it `failed`.

use std::collections::HashSet;

use outreach_runtime::prelude::{
    ApiError, Clock, Ctx, Db, ErrorCode, Priced, action, ids, price_item, recovery,
};
use outreach_runtime::prelude::{Heartbeat, lease};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::events::{self, EventType};
use crate::lists::{self, ProcessingStatus, processing_lease};
use crate::prospects::normalize;
use crate::scoring::{ScoringRun, Subject, score_prospects};
use crate::targeting::{self, Targeting};

price_item! {
    /// A list member processed: cleaned and scored together.
    pub LIST_PROCESSING_PROSPECT = "list_processing.prospect", 1;
}

/// The input of `process_list`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ProcessListInput {
    /// `lst_...`
    pub id: String,
    /// `tgt_...`; default: the list's `default_targeting_id`.
    pub targeting_id: Option<String>,
}

/// What processing a list did.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProcessingOutcome {
    pub list_id: String,
    /// The list's status afterwards: `processed`.
    pub status: ProcessingStatus,
    /// Members when processing began.
    pub prospects: i64,
    /// Members whose contact fields were rewritten to their normal form.
    pub normalised: i64,
    /// Members removed from the list because an earlier member has the same email.
    pub duplicates_removed: i64,
    /// Members scored.
    pub scored: i64,
    /// Credits spent: one `list_processing.prospect` unit per member scored.
    pub credits_spent: i64,
    /// The scoring run this processing started.
    pub scoring_run: ScoringRun,
}

/// The targeting a call uses: the given one or the list's default.
async fn resolve(
    ctx: &Ctx,
    input: &ProcessListInput,
) -> Result<(lists::List, Targeting), ApiError> {
    let mut conn = ctx.db().pool().acquire().await?;
    let list = lists::fetch(&mut conn, ctx.workspace_id(), &input.id).await?;
    let targeting_id = input.targeting_id.clone().or_else(|| list.default_targeting_id.clone()).ok_or_else(|| {
        ApiError::invalid_request(format!(
            "The list `{}` has no default targeting; give `targeting_id` or set the list's `default_targeting_id`.",
            list.id
        ))
    })?;
    let targeting = targeting::fetch(&mut *conn, ctx.workspace_id(), &targeting_id).await?;
    Ok((list, targeting))
}

async fn member_count(ctx: &Ctx, list_id: &str) -> Result<i64, ApiError> {
    let total: i64 = sqlx::query(
        "select count(*) as total from list_members m join prospects p on p.id = m.prospect_id \
         where m.list_id = $1 and p.workspace_id = $2",
    )
    .bind(list_id)
    .bind(ctx.workspace_id())
    .fetch_one(ctx.db().pool())
    .await?
    .try_get("total")?;
    if total == 0 {
        return Err(ApiError::invalid_request(format!(
            "The list `{list_id}` has no prospects; add prospects to it before processing it."
        )));
    }
    Ok(total)
}

/// What a processing will work on, worked out by its price function.
pub struct ProcessingPlan {
    list_id: String,
    targeting: Targeting,
    /// The list's processing token when the call was planned: the call may mark the list only
    /// if nobody marked it since.
    seen_token: String,
    /// The list's processing status and `updated_at` then, put back when the call is refused.
    seen_status: String,
    seen_updated_at: i64,
}

async fn price_processing(
    ctx: &Ctx,
    input: &ProcessListInput,
) -> Result<Priced<ProcessingPlan>, ApiError> {
    // The token first: a processing that finishes after this read rotates it, so this call
    // cannot then mark the list with a plan made before.
    let seen = sqlx::query(
        "select coalesce(processing_token, '') as token, processing_status, updated_at from lists \
         where workspace_id = $1 and id = $2",
    )
    .bind(ctx.workspace_id())
    .bind(input.id.trim())
    .fetch_optional(ctx.db().pool())
    .await?;
    let (seen_token, seen_status, seen_updated_at) = match seen {
        Some(row) => (
            row.try_get("token")?,
            row.try_get("processing_status")?,
            row.try_get("updated_at")?,
        ),
        // `resolve` answers the 404.
        None => (String::new(), String::new(), 0),
    };
    let (list, targeting) = resolve(ctx, input).await?;
    let prospects = member_count(ctx, &list.id).await?;
    Ok(ctx
        .price(LIST_PROCESSING_PROSPECT, prospects)
        .detail("prospects", prospects)
        .plan(ProcessingPlan {
            list_id: list.id,
            targeting,
            seen_token,
            seen_status,
            seen_updated_at,
        }))
}

recovery!("lists left processing", recover_lists);

/// Sets `failed` on lists whose processing lease lapsed: the call that marked them died, and its
/// work was rolled back with its transaction. Clearing the token lets the next call mark them.
async fn recover_lists(db: &Db, clock: &Clock) -> Result<u64, ApiError> {
    processing_lease::recover_lapsed(db, clock.now_ms()).await
}

/// Marks the list `processing` for this call, unless another call marked it since the plan
/// (or holds it now): a committed compare-and-set with a lease. A mark whose lease lapsed is
/// taken over at once, and so is a mark under this call's own token (an earlier attempt with the
/// same idempotency key, which died: its key's claim is this call's now).
async fn mark(ctx: &Ctx, plan: &ProcessingPlan, token: &str) -> Result<(), ApiError> {
    let now = ctx.now_ms();
    let mark = lease_mark(ctx, plan, token);
    if processing_lease::take(ctx.db(), &mark, now + lease::LEASE_MS, now).await? {
        return Ok(());
    }
    // Held by a call whose lease is alive: say how long it has left (a call whose process died
    // is taken over once that is past, by the next call, at once).
    let lease: Option<i64> = sqlx::query(
        "select processing_lease_expires_at from lists where workspace_id = $1 and id = $2 and processing_status = $3",
    )
    .bind(ctx.workspace_id())
    .bind(&plan.list_id)
    .bind(ProcessingStatus::Processing.as_str())
    .fetch_optional(ctx.db().pool())
    .await?
    .map(|row| row.try_get("processing_lease_expires_at"))
    .transpose()?
    .flatten();
    let error = ApiError::new(
        ErrorCode::INVALID_STATE,
        format!(
            "The list `{}` is `processing` for another call, or was processed by one while this call started; \
             nothing was done or charged. See `get_list`, and process it again once it is `processed` if you still need to.",
            plan.list_id
        ),
    );
    Err(match lease {
        Some(expires_at) => error.with_retry_after(expires_at - now),
        None => error,
    })
}

/// Process a list: normalise, deduplicate and score its prospects.
///
/// Drops members whose email an earlier member has (the prospects stay). Costs one
/// `list_processing.prospect` unit (1 credit by default) per member scored; `estimate_only` prices
/// it. One call at a time per list (409 `invalid_state`).
///
/// Rewrites the members' emails and company domains to their normal form, removes the duplicates,
/// and scores the rest against `targeting_id` or the list's default targeting, like
/// `start_scoring_run`. Honours `Idempotency-Key`.
#[action(scope = "write", credits = price_processing, idempotent, http = "POST /lists/{id}/process")]
pub async fn process_list(
    ctx: Ctx,
    _input: ProcessListInput,
    plan: ProcessingPlan,
) -> Result<ProcessingOutcome, ApiError> {
    // With an idempotency key, the token is the call's own (the same on every retry): a mark
    // left by an attempt that died is this call's, and is taken over at once rather than after
    // its lease. Without one, a fresh token.
    let token = ctx
        .call_id()
        .map_or_else(|| ids::new_id("lease"), ToOwned::to_owned);
    mark(&ctx, &plan, &token).await?;
    let heartbeat = {
        let (db, workspace_id, list_id, token, clock) = (
            ctx.db().clone(),
            ctx.workspace_id().to_owned(),
            plan.list_id.clone(),
            token.clone(),
            ctx.clock().clone(),
        );
        Heartbeat::start("list processing", move || {
            let (db, workspace_id, list_id, token, clock) = (
                db.clone(),
                workspace_id.clone(),
                list_id.clone(),
                token.clone(),
                clock.clone(),
            );
            async move {
                let mark = processing_lease::Mark {
                    workspace_id: &workspace_id,
                    list_id: &list_id,
                    token: &token,
                    seen_token: "",
                };
                processing_lease::renew(&db, &mark, clock.now_ms() + lease::LEASE_MS).await
            }
        })
    };
    let result = process(&ctx, &plan.list_id, &plan.targeting, &token).await;
    drop(heartbeat);
    if let Err(error) = &result {
        // Undo the work first: on SQLite its transaction holds the write lock the mark needs.
        ctx.rollback().await;
        unmark(&ctx, &plan, &token, error).await;
    }
    result
}

outreach_runtime::prelude::example!(process_list,
    request: {"id": "lst_R4d0zhECHdJUnPY7RrLC", "targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84"},
    response: {
        "credits_spent": 2,
        "duplicates_removed": 0,
        "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
        "normalised": 0,
        "prospects": 2,
        "scored": 2,
        "scoring_run": {
            "by_tier": {"a": 1, "b": 0, "c": 1, "d": 0, "disqualified": 0},
            "completed_at": "2026-11-23T18:22:30.104Z",
            "created_at": "2026-11-23T18:22:30.103Z",
            "credits_spent": 2,
            "id": "scr_84UsLWJhvmLmULm2EVed",
            "list_id": "lst_R4d0zhECHdJUnPY7RrLC",
            "status": "completed",
            "targeting_id": "tgt_vGZf5Xhp2UaJ5CH2dq84",
            "targeting_version": 2,
            "total": 2
        },
        "status": "processed"
    }
);

outreach_runtime::prelude::parity!(process_list, write,
    ok: {"id": "$list", "targeting_id": "$targeting"},
    fails: {
        "id": "$missing:lst",
        "targeting_id": "$missing:tgt"
    } => NOT_FOUND
);

/// The processing mark of this call on the planned list.
fn lease_mark<'a>(
    ctx: &'a Ctx,
    plan: &'a ProcessingPlan,
    token: &'a str,
) -> processing_lease::Mark<'a> {
    processing_lease::Mark {
        workspace_id: ctx.workspace_id(),
        list_id: &plan.list_id,
        token,
        seen_token: &plan.seen_token,
    }
}

/// Takes this call's mark off a list whose processing failed (its work rolled back). A refusal
/// (too few credits, a list that changed since it was priced) did nothing, so the list is put
/// back as it was; a fault leaves it `failed`, which says the last processing did not finish.
async fn unmark(ctx: &Ctx, plan: &ProcessingPlan, token: &str, error: &ApiError) {
    let refused = error.code != ErrorCode::INTERNAL_ERROR && !error.is_contention();
    let mark = lease_mark(ctx, plan, token);
    let unmarked = if refused {
        processing_lease::give_back(ctx.db(), &mark, &plan.seen_status, plan.seen_updated_at).await
    } else {
        processing_lease::fail(ctx.db(), &mark, ctx.now_ms()).await
    };
    if let Err(error) = unmarked {
        // Its lease lapses and recovery marks it `failed` then.
        tracing::warn!(list = plan.list_id, %error, "could not take the processing mark off a list");
    }
}

async fn process(
    ctx: &Ctx,
    list_id: &str,
    targeting: &Targeting,
    token: &str,
) -> Result<ProcessingOutcome, ApiError> {
    let workspace_id = ctx.workspace_id();
    // The reservation is the transaction's first statement: the workspace row, the lock every
    // priced transaction takes first, so two of them cannot deadlock on PostgreSQL.
    let mut tx = ctx.tx().await?;
    let members = sqlx::query(
        "select p.id, p.email, p.company_domain from list_members m \
         join prospects p on p.id = m.prospect_id \
         where m.list_id = $1 and p.workspace_id = $2 order by p.created_at, p.id",
    )
    .bind(list_id)
    .bind(workspace_id)
    .fetch_all(&mut *tx)
    .await?;
    let prospects = i64::try_from(members.len()).unwrap_or(i64::MAX);
    if prospects == 0 {
        return Err(ApiError::invalid_request(format!(
            "The list `{list_id}` has no prospects; add prospects to it before processing it."
        )));
    }

    let mut normalised = 0;
    let mut duplicates = Vec::new();
    let mut emails_seen = HashSet::new();
    for member in &members {
        let id: String = member.try_get("id")?;
        let email: Option<String> = member.try_get("email")?;
        let domain: Option<String> = member.try_get("company_domain")?;
        // A stored value that no longer passes its check is kept as it is: cleaning never loses data.
        let clean_email = normalize::email(email.clone()).unwrap_or_else(|_| email.clone());
        let clean_domain =
            normalize::company_domain(domain.clone()).unwrap_or_else(|_| domain.clone());
        if (&clean_email, &clean_domain) != (&email, &domain) {
            crate::prospects::set_contact(
                &mut tx,
                workspace_id,
                &id,
                clean_email.as_deref(),
                clean_domain.as_deref(),
                ctx.now_ms(),
            )
            .await?;
            normalised += 1;
        }
        if let Some(email) = clean_email
            && !emails_seen.insert(email)
        {
            duplicates.push(id);
        }
    }
    for id in &duplicates {
        lists::remove_member(&mut tx, list_id, id).await?;
    }

    let unit = ctx.unit_price(LIST_PROCESSING_PROSPECT);
    let run = score_prospects(ctx, &mut tx, targeting, Subject::List(list_id), unit).await?;
    // A list that grew since it was priced is a 409 here, and everything rolls back.
    ctx.settle(&mut tx, run.credits_spent, &run.id).await?;
    crate::credits::spent(&mut tx, workspace_id, run.credits_spent, ctx.now_ms()).await?;
    // Fenced by the token: if the lease lapsed and the list was taken from this call, the call
    // rolls back. The token rotates, so calls planned while this one ran cannot mark the list.
    let mark = processing_lease::Mark {
        workspace_id,
        list_id,
        token,
        seen_token: "",
    };
    let next_token = ids::new_id("lease");
    let finished = processing_lease::finish(&mut tx, &mark, &next_token, ctx.now_ms()).await?;
    if !finished {
        return Err(ApiError::new(
            ErrorCode::INVALID_STATE,
            format!(
                "The list `{list_id}` was taken over by another call while this one ran; nothing was done or charged."
            ),
        ));
    }
    let data = serde_json::json!({"list_id": list_id, "scoring_run_id": run.id});
    events::record(
        &mut tx,
        workspace_id,
        ctx.now_ms(),
        EventType::ListProcessed,
        data,
    )
    .await?;
    Ok(ProcessingOutcome {
        list_id: list_id.to_owned(),
        status: ProcessingStatus::Processed,
        prospects,
        normalised,
        duplicates_removed: i64::try_from(duplicates.len()).unwrap_or(i64::MAX),
        scored: run.total,
        credits_spent: run.credits_spent,
        scoring_run: run,
    })
}
