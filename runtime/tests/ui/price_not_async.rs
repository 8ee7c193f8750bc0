// Test: a price function that is not `async` is reported on its name in the attribute.
use outreach_runtime::{ApiError, Ctx, Price, action};
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

/// Import prospects.
#[action(scope = "write", credits = price_import)]
pub async fn import_prospects(_ctx: Ctx, input: ImportInput) -> Result<ImportOutcome, ApiError> {
    Ok(ImportOutcome {
        created: input.rows.len(),
    })
}

fn price_import(_ctx: &Ctx, input: &ImportInput) -> Result<Price, ApiError> {
    Ok(Price::line("row", input.rows.len() as i64, 1))
}

fn main() {}
