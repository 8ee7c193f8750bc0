//! List processing: clean a list's prospects and score them, in one priced, idempotent call.
//!
//! Processing normalises the members' contact fields (email, company domain), removes from the list the members that duplicate an earlier member's email (the
//! prospects themselves stay), then scores what remains against a targeting (the given one or
//! the list's default) through the same code as a scoring run. The list is marked `processing`
//! by a conditional update before the work starts, so a second call for the same list is a 409
//! `invalid_state` while the first runs (a retry with the first call's idempotency key replays its
//! answer instead). The cleaning, the scores and the spend commit together.

use std::collections::HashSet;

use outreach_runtime::{ApiError, Ctx, ErrorCode, Price, action};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sqlx::Row;

use crate::lists::{self, ProcessingStatus};
use crate::prospects::normalize;
use crate::scoring::{ScoringRun, Subject, score_prospects};
use crate::targeting::{self, Targeting};

/// The price-table item a processed prospect costs (cleaning and scoring together).
pub const PRICE_ITEM: &str = "list_processing.prospect";

/// The input of `process_list`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ProcessListInput {
    /// The list's id (`lst_...`).
    pub id: String,
    /// The targeting to score against (`tgt_...`); defaults to the list's `default_targeting_id`.
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

async fn price_processing(ctx: &Ctx, input: &ProcessListInput) -> Result<Price, ApiError> {
    let (list, _) = resolve(ctx, input).await?;
    let prospects = member_count(ctx, &list.id).await?;
    Ok(
        Price::line(PRICE_ITEM, prospects, ctx.unit_price(PRICE_ITEM))
            .detail("prospects", prospects),
    )
}

/// Process a list: normalise, deduplicate and score its prospects.
///
/// Rewrites the members' emails and company domains to their normal form, removes from the list members whose email an earlier member already has (the prospects are
/// kept), then scores the remaining members against `targeting_id` or the list's default
/// targeting, like `start_scoring_run`. Returns the counts, the price paid and the scoring run.
///
/// Costs one `list_processing.prospect` unit (1 credit by default) per member scored; duplicates
/// removed are not charged. `estimate_only` returns the price for the current members. An empty
/// list, or no targeting given and none by default, is a 400. While a list is being processed, a
/// second call is a 409 `invalid_state`; honours `Idempotency-Key`, so a retry of the same call
/// replays its answer and spends nothing again.
#[action(scope = "write", credits = price_processing, idempotent, http = "POST /lists/{id}/process")]
pub async fn process_list(
    ctx: Ctx,
    input: ProcessListInput,
) -> Result<ProcessingOutcome, ApiError> {
    let (list, targeting) = resolve(&ctx, &input).await?;
    let claimed = sqlx::query(
        "update lists set processing_status = 'processing', updated_at = $3 \
         where workspace_id = $1 and id = $2 and processing_status <> 'processing'",
    )
    .bind(ctx.workspace_id())
    .bind(&list.id)
    .bind(ctx.now_ms())
    .execute(ctx.db().pool())
    .await?;
    if claimed.rows_affected() == 0 {
        return Err(ApiError::new(
            ErrorCode::InvalidState,
            format!(
                "The list `{}` is `processing` already; wait for it to become `processed` (see `get_list`) before processing it again.",
                list.id
            ),
        ).nothing_done());
    }
    let result = process(&ctx, &list.id, &targeting).await;
    if result.is_err() {
        let failed = sqlx::query("update lists set processing_status = 'failed', updated_at = $3 where workspace_id = $1 and id = $2")
            .bind(ctx.workspace_id())
            .bind(&list.id)
            .bind(ctx.now_ms())
            .execute(ctx.db().pool())
            .await;
        if let Err(error) = failed {
            tracing::warn!(list = list.id, %error, "could not mark a list `failed`");
        }
    }
    result
}

async fn process(
    ctx: &Ctx,
    list_id: &str,
    targeting: &Targeting,
) -> Result<ProcessingOutcome, ApiError> {
    let workspace_id = ctx.workspace_id();
    let mut tx = ctx.db().pool().begin().await?;
    // The first statement is a write, so SQLite takes its write lock now rather than failing to
    // upgrade a read snapshot later; and it is the workspace row, the lock every priced
    // transaction takes first, so two of them cannot deadlock on PostgreSQL.
    sqlx::query("update workspaces set credits_balance = credits_balance where id = $1")
        .bind(workspace_id)
        .execute(&mut *tx)
        .await?;
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
            sqlx::query(
                "update prospects set email = $3, company_domain = $4, updated_at = $5 where workspace_id = $1 and id = $2",
            )
            .bind(workspace_id)
            .bind(&id)
            .bind(&clean_email)
            .bind(&clean_domain)
            .bind(ctx.now_ms())
            .execute(&mut *tx)
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
        sqlx::query("delete from list_members where list_id = $1 and prospect_id = $2")
            .bind(list_id)
            .bind(id)
            .execute(&mut *tx)
            .await?;
    }

    let unit = ctx.unit_price(PRICE_ITEM);
    let run = score_prospects(ctx, &mut tx, targeting, Subject::List(list_id), unit).await?;
    let reserved = ctx
        .reservation()
        .map_or(0, |reservation| reservation.amount);
    if run.credits_spent > reserved {
        return Err(ApiError::new(
            ErrorCode::InvalidState,
            format!(
                "The list `{list_id}` grew while it was priced ({reserved} credits reserved, {} needed); nothing was done. Retry.",
                run.credits_spent
            ),
        ).nothing_done());
    }
    ctx.settle_credits(&mut tx, run.credits_spent, &run.id)
        .await?;
    sqlx::query(
        "update lists set processing_status = 'processed', processed_at = $3, updated_at = $3 where workspace_id = $1 and id = $2",
    )
    .bind(workspace_id)
    .bind(list_id)
    .bind(ctx.now_ms())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
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
