// Test: a price function that is not `async` is reported on its name in the attribute.
use outreach_runtime::{ApiError, Ctx, Priced, action, price_item};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
pub struct ImportInput {
    pub rows: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct ImportOutcome {
    pub created: usize,
}

price_item! {
    /// A row imported.
    pub IMPORT_ROW = "import.row", 1;
}

pub struct ImportPlan {
    pub rows: usize,
}

/// Import prospects.
#[action(scope = "write", credits = price_import)]
pub async fn import_prospects(_ctx: Ctx, _input: ImportInput, plan: ImportPlan) -> Result<ImportOutcome, ApiError> {
    Ok(ImportOutcome { created: plan.rows })
}

fn price_import(ctx: &Ctx, input: &ImportInput) -> Result<Priced<ImportPlan>, ApiError> {
    Ok(ctx.price(IMPORT_ROW, input.rows.len() as i64).plan(ImportPlan { rows: input.rows.len() }))
}

fn main() {}
