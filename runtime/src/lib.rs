//! The framework behind the outreach service; it knows nothing of prospects.
//!
//! An action is one async function annotated with [`action`]. The macro registers it; at start-up
//! the [`registry`] collects and validates every action, and the [`rest`] and [`mcp`] faces, the
//! [`openapi`] document and the [`docs`] page are all made from that one registry. Both faces
//! authenticate with [`auth`] and call the same [`dispatch`]. Read `registry.rs` first, then
//! `dispatch.rs`.

pub mod admin;
pub mod auth;
pub mod clock;
pub mod config;
pub mod credits;
pub mod ctx;
pub mod db;
pub mod dispatch;
pub mod docs;
pub mod error;
pub mod housekeeping;
pub mod idempotency;
pub mod ids;
pub mod mcp;
pub mod oauth;
pub mod openapi;
pub mod paging;
pub mod registry;
pub mod rest;
pub mod schema;
pub mod scope;
pub mod server;
pub mod web;

pub use auth::{CredentialKind, Principal, WorkspaceSnapshot};
pub use clock::{Clock, Timestamp};
pub use config::{Config, Environment};
pub use credits::Price;
pub use ctx::Ctx;
pub use db::{Backend, Db};
pub use error::{ApiError, ErrorCode};
pub use outreach_macros::action;
pub use paging::{Page, PageParams};
pub use scope::{Role, Scope};

/// What the `#[action]` expansion refers to. Not a public API: names here may change freely.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
    pub use schemars::{Schema, SchemaGenerator};
    pub use serde_json::Value;

    use crate::ApiError;
    pub use crate::registry::{ActionDef, BoxFuture, ErasedInput, HttpRoute};

    /// What an action's input type must be.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be an action input",
        label = "derive `serde::Deserialize` and `schemars::JsonSchema` for this type",
        note = "an action input is a struct with named fields deriving `Deserialize` and `JsonSchema`"
    )]
    pub trait ActionInput:
        serde::de::DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static
    {
    }
    impl<T: serde::de::DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static> ActionInput
        for T
    {
    }

    /// What an action's output type must be.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be an action output",
        label = "derive `serde::Serialize` and `schemars::JsonSchema` for this type",
        note = "an action output is a struct with named fields deriving `Serialize` and `JsonSchema`"
    )]
    pub trait ActionOutput: serde::Serialize + schemars::JsonSchema + Send + 'static {}
    impl<T: serde::Serialize + schemars::JsonSchema + Send + 'static> ActionOutput for T {}

    /// Only [`ApiError`] is an action's error type.
    #[diagnostic::on_unimplemented(
        message = "an action's error type must be `outreach_runtime::ApiError`, not `{Self}`",
        label = "return `Result<Output, ApiError>`"
    )]
    pub trait IsApiError {}
    impl IsApiError for ApiError {}

    pub const fn assert_input<T: ActionInput>() {}
    pub const fn assert_output<T: ActionOutput>() {}
    pub const fn assert_api_error<T: IsApiError>() {}

    pub fn schema<T: schemars::JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
        generator.root_schema_for::<T>()
    }

    pub fn decode<T: ActionInput>(value: Value) -> Result<ErasedInput, ApiError> {
        crate::dispatch::decode_input::<T>(value).map(|input| Box::new(input) as ErasedInput)
    }

    /// Unwraps an input decoded by the same action's `decode`.
    pub fn input<T: 'static>(input: ErasedInput) -> T {
        match input.downcast::<T>() {
            Ok(input) => *input,
            Err(_) => unreachable!("an action's input is decoded by its own decode function"),
        }
    }

    pub fn input_ref<T: 'static>(input: &ErasedInput) -> &T {
        match input.downcast_ref::<T>() {
            Some(input) => input,
            None => unreachable!("an action's input is decoded by its own decode function"),
        }
    }

    pub fn encode<T: ActionOutput>(output: &T) -> Result<Value, ApiError> {
        serde_json::to_value(output).map_err(ApiError::internal)
    }
}
