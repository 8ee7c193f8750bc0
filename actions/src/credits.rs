//! The credits ledger as the API shows it.

use outreach_runtime::prelude::credits::{self, Transaction};
use outreach_runtime::prelude::{ApiError, Ctx, Page, PageParams, action};
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
/// Every change of the workspace's balance: grants, spends (with the action, the object it paid
/// for and the idempotency key) and releases of credits a spend did not use. The balance after
/// each entry is shown. Paged with `limit` and `offset`. Costs nothing.
#[action(scope = "read", http = "GET /credits/transactions")]
pub async fn list_credit_transactions(
    ctx: Ctx,
    input: ListCreditTransactionsInput,
) -> Result<Page<Transaction>, ApiError> {
    credits::transactions(ctx.db(), ctx.workspace_id(), input.page).await
}
