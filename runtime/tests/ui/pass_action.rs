// Test: correct actions, with every argument and with none but `scope`, compile.
use outreach_runtime::{action, ApiError, Ctx, Price};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The rows to import.
#[derive(Deserialize, JsonSchema)]
pub struct ImportInput {
    pub rows: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct ImportOutcome {
    pub created: usize,
}

/// Import prospects from CSV text or JSON rows.
///
/// Costs one credit per row.
#[action(scope = "write", credits = price_import, idempotent, http = "POST /imports")]
pub async fn import_prospects(_ctx: Ctx, input: ImportInput) -> Result<ImportOutcome, ApiError> {
    Ok(ImportOutcome { created: input.rows.len() })
}

async fn price_import(_ctx: &Ctx, input: &ImportInput) -> Result<Price, ApiError> {
    Ok(Price::line("row", input.rows.len() as i64, 1))
}

#[derive(Deserialize, JsonSchema)]
pub struct Empty {}

/// Get the workspace.
#[action(scope = "read")]
pub async fn get_workspace(_ctx: outreach_runtime::Ctx, _: Empty) -> std::result::Result<ImportOutcome, outreach_runtime::ApiError> {
    Ok(ImportOutcome { created: 0 })
}

fn main() {}
