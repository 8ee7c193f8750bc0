// Test: an input type that does not derive `Deserialize` is reported once, on the input type.
use outreach_runtime::{ApiError, Ctx, action};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(JsonSchema)]
pub struct GetInput {
    pub id: String,
}

#[derive(Serialize, JsonSchema)]
pub struct GetOutput {
    pub name: String,
}

/// Get the thing.
#[action(scope = "read")]
pub async fn get_thing(_ctx: Ctx, input: GetInput) -> Result<GetOutput, ApiError> {
    Ok(GetOutput { name: input.id })
}

fn main() {}
