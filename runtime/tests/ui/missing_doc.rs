// Test: an action without a doc comment must be documented.
use outreach_runtime::{ApiError, Ctx, action};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
pub struct GetInput {
    pub id: String,
}

#[derive(Serialize, JsonSchema)]
pub struct GetOutput {
    pub name: String,
}

#[action(scope = "read")]
pub async fn get_thing(_ctx: Ctx, input: GetInput) -> Result<GetOutput, ApiError> {
    Ok(GetOutput { name: input.id })
}

fn main() {}
