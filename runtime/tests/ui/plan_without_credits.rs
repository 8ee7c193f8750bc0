// Test: a plan argument on an action that is not priced is refused.
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
#[action(scope = "write")]
pub async fn import_prospects(_ctx: Ctx, _input: ImportInput, plan: ImportPlan) -> Result<ImportOutcome, ApiError> {
    Ok(ImportOutcome { created: plan.rows })
}

fn main() {}
