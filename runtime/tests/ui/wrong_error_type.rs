// Test: a `Result` with an error type other than `ApiError` is reported once, on the error type.
use outreach_runtime::{Ctx, action};
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

/// Get the thing.
#[action(scope = "read")]
pub async fn get_thing(_ctx: Ctx, input: GetInput) -> Result<GetOutput, String> {
    Ok(GetOutput { name: input.id })
}

fn main() {}
