//! The credits ledger as the API shows it, and the `credits.low` event a spend writes when it
//! takes the balance under [`LOW_MARK`].

use outreach_runtime::prelude::credits::{self, Transaction};
use outreach_runtime::prelude::{ApiError, Ctx, Page, PageParams, action};

use crate::events::{self, EventType};
use schemars::JsonSchema;
use serde::Deserialize;

outreach_runtime::prelude::resource_tag!(
    "credits",
    toolset = "workspace",
    "The credit ledger: grants, spends and releases, each with its source."
);

/// The input of `list_credit_transactions`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListCreditTransactionsInput {
    #[serde(flatten)]
    pub page: PageParams,
}

/// List credit transactions, newest first.
///
/// Grants, spends and releases, each with the balance after it.
///
/// A spend names the action, the object it paid for and the idempotency key; a release gives back
/// the credits a spend did not use.
#[action(scope = "read", http = "GET /credits/transactions")]
pub async fn list_credit_transactions(
    ctx: Ctx,
    input: ListCreditTransactionsInput,
) -> Result<Page<Transaction>, ApiError> {
    credits::transactions(ctx.db(), ctx.workspace_id(), input.page).await
}

outreach_runtime::prelude::example!(list_credit_transactions,
    request: {"limit": 25},
    response: {
        "count": 4,
        "has_more": false,
        "items": [
            {
                "action": "process_list",
                "amount": -2,
                "balance_after": 995,
                "created_at": "2026-11-23T18:22:30.102Z",
                "id": "crd_g5bhIk9BPMLhzTuC2DzQ",
                "idempotency_key": null,
                "kind": "spend",
                "object_id": "scr_84UsLWJhvmLmULm2EVed",
                "person_id": "psn_v2q1QvxfTGRL4ccko2BH",
                "reason": null,
                "reservation_id": null
            },
            {
                "action": "start_scoring_run",
                "amount": -2,
                "balance_after": 997,
                "created_at": "2026-11-23T18:22:30.091Z",
                "id": "crd_klxKgyHYwf5kpPVIz2Fr",
                "idempotency_key": null,
                "kind": "spend",
                "object_id": "scr_mWmJJ8SkWmMn4SLpe7Ec",
                "person_id": "psn_v2q1QvxfTGRL4ccko2BH",
                "reason": null,
                "reservation_id": null
            },
            {
                "action": "import_prospects",
                "amount": -1,
                "balance_after": 999,
                "created_at": "2026-11-23T18:22:30.074Z",
                "id": "crd_wRIwDfMjGDcDK5mvkYlr",
                "idempotency_key": null,
                "kind": "spend",
                "object_id": "imp_lVtEiUF85cSeN2vqK2pm",
                "person_id": "psn_v2q1QvxfTGRL4ccko2BH",
                "reason": null,
                "reservation_id": null
            },
            {
                "action": null,
                "amount": 1000,
                "balance_after": 1000,
                "created_at": "2026-11-23T18:22:29.741Z",
                "id": "crd_QgyTWUUIo1mXIYfLvtw4",
                "idempotency_key": null,
                "kind": "grant",
                "object_id": null,
                "person_id": null,
                "reason": "example",
                "reservation_id": null
            }
        ],
        "next_offset": null,
        "offset": 0,
        "total": 4
    }
);

outreach_runtime::prelude::parity!(list_credit_transactions, read,
    ok: {"limit": 5},
    fails: {"limit": 201} => INVALID_REQUEST
);

/// The balance under which a workspace hears `credits.low`.
pub const LOW_MARK: i64 = 100;

/// After a spend of `spent` credits in `tx` (the workspace's row is locked by it): writes
/// `credits.low` when the spend took the balance from [`LOW_MARK`] or more to under it, so it is
/// heard once per crossing, not on every spend below.
pub async fn spent(
    tx: &mut sqlx::AnyConnection,
    workspace_id: &str,
    spent: i64,
    now_ms: i64,
) -> Result<(), ApiError> {
    if spent <= 0 {
        return Ok(());
    }
    let balance: i64 = sqlx::query_scalar("select credits_balance from workspaces where id = $1")
        .bind(workspace_id)
        .fetch_one(&mut *tx)
        .await?;
    if balance < LOW_MARK && balance + spent >= LOW_MARK {
        let data = serde_json::json!({"balance": balance, "threshold": LOW_MARK});
        events::record(tx, workspace_id, now_ms, EventType::CreditsLow, data).await?;
    }
    Ok(())
}
