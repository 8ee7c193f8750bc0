// Test: a path without a leading `/` says how to write it.
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

/// Get the thing.
#[action(scope = "read", http = "GET things/{id}")]
pub async fn get_thing(_ctx: Ctx, input: GetInput) -> Result<GetOutput, ApiError> {
    Ok(GetOutput { name: input.id })
}

fn main() {}
