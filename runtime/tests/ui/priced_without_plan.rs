// Test: a priced action without the plan argument is told to take it.
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
pub async fn import_prospects(_ctx: Ctx, input: ImportInput) -> Result<ImportOutcome, ApiError> {
    Ok(ImportOutcome { created: input.rows.len() })
}

async fn price_import(ctx: &Ctx, input: &ImportInput) -> Result<Priced<ImportPlan>, ApiError> {
    Ok(ctx.price(IMPORT_ROW, input.rows.len() as i64).plan(ImportPlan { rows: input.rows.len() }))
}

fn main() {}
