// Test: an action that does not return a `Result` is told the expected return type.
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
pub async fn get_thing(_ctx: Ctx, input: GetInput) -> GetOutput {
    GetOutput { name: input.id }
}

fn main() {}
