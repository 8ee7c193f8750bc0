// Test: an output type without `JsonSchema` is reported once, on the output type.
use outreach_runtime::{ApiError, Ctx, action};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Deserialize, JsonSchema)]
pub struct GetInput {
    pub id: String,
}

#[derive(Serialize)]
pub struct GetOutput {
    pub name: String,
}

/// Get the thing.
#[action(scope = "read")]
pub async fn get_thing(_ctx: Ctx, input: GetInput) -> Result<GetOutput, ApiError> {
    Ok(GetOutput { name: input.id })
}

fn main() {}
