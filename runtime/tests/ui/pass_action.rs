// Test: correct actions, with every argument and with `scope` alone, compile and register.
use outreach_runtime::{ApiError, Ctx, Priced, action, price_item};
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

price_item! {
    /// A row imported.
    pub IMPORT_ROW = "import.row", 1;
}

/// What the price function worked out, handed to the action.
pub struct ImportPlan {
    rows: usize,
}

/// Import prospects from CSV text or JSON rows.
///
/// Costs one credit per row.
#[action(scope = "write", credits = price_import, idempotent, http = "POST /imports")]
pub async fn import_prospects(
    _ctx: Ctx,
    _input: ImportInput,
    plan: ImportPlan,
) -> Result<ImportOutcome, ApiError> {
    Ok(ImportOutcome { created: plan.rows })
}

async fn price_import(ctx: &Ctx, input: &ImportInput) -> Result<Priced<ImportPlan>, ApiError> {
    let rows = input.rows.len();
    Ok(ctx.price(IMPORT_ROW, rows as i64).plan(ImportPlan { rows }))
}

#[derive(Deserialize, JsonSchema)]
pub struct Empty {}

/// Get the workspace.
#[action(scope = "read")]
pub async fn get_workspace(
    _ctx: outreach_runtime::Ctx,
    _: Empty,
) -> std::result::Result<ImportOutcome, outreach_runtime::ApiError> {
    Ok(ImportOutcome { created: 0 })
}

fn main() {
    let registry = outreach_runtime::registry::Registry::build().expect("a valid registry");
    let import = registry
        .get("import_prospects")
        .expect("`import_prospects` is registered");
    assert_eq!(
        import.def.summary,
        "Import prospects from CSV text or JSON rows."
    );
    assert_eq!(import.def.description, "Costs one credit per row.");
    assert_eq!(import.def.scope, outreach_runtime::Scope::Write);
    assert!(import.def.idempotent && import.def.price.is_some());
    let route = import.route.as_ref().expect("an HTTP route");
    assert_eq!(
        (route.method.as_str(), route.path.as_str()),
        ("POST", "/imports")
    );

    let workspace = registry
        .get("get_workspace")
        .expect("`get_workspace` is registered");
    assert_eq!(workspace.def.scope, outreach_runtime::Scope::Read);
    assert!(
        workspace.route.is_none() && workspace.def.price.is_none() && !workspace.def.idempotent
    );
}
