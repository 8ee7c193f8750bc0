//! The framework behind the outreach service; it knows nothing of prospects.
//!
//! An action is one async function annotated with [`action`]. The macro registers it; at start-up
//! the [`registry`] collects and validates every action, and the [`rest`] and [`mcp`] faces, the
//! [`openapi`] document and the [`docs`] page are all made from that one registry. Both faces
//! authenticate with [`auth`] and call the same [`dispatch`]. An action author needs only the
//! [`prelude`].
//!
//! Where to start reading: the crate is layered, and reads best from the bottom up. Begin with
//! `registry.rs` (what an action is) and `ctx.rs` (what it gets), then `state.rs` (what every
//! request shares), `dispatch.rs` (one call, whichever face it came through), and finish at
//! `server.rs`, where the router puts it all together. The layers, bottom to top; a module imports
//! only from its own layer or below, never from above, and there are no cycles (`tests/layers.rs`
//! checks both and holds the same list):
//!
//! 1. `clock`, `ids`, `json`, `error`, `scope`, `columns`, `paging`, `db`, `batched_reads`,
//!    `schema`, `words`, `cors`, `body`, `input`: foundations that import nothing above them (`db`
//!    starts `batched_reads`); beside them `fixtures`, how to call each action once, for the
//!    checks that replay every action.
//! 2. `lease`, `credits`, `idempotency`, `principal`, `config`, `admin`, `test_clock`: the
//!    bookkeeping and the rules that the faces, the web pages and the CLI share.
//! 3. `ctx`: what an action receives; `jobs`, `worker`: durable jobs, what their handlers
//!    receive, and the loop that runs them.
//! 4. `registry`: every action, collected and validated; `callbacks`: the routes a provider
//!    calls back, which are not actions; `tasks`: which of them start work
//!    that goes on after the call (MCP tasks); `toolsets`: the resource tags and the toolsets an
//!    MCP client picks from; `prompts`: the workflows an MCP client is offered as prompts;
//!    `confirmations`: the calls an MCP client asks its person to confirm first; `apps`: the
//!    HTML views an MCP host draws for a tool's result (MCP Apps);
//!    `recovery`: what a dead process held, given back.
//! 5. `state`, `request_id`, `rpc`: what every request shares, its id, and an MCP tool call read
//!    once for every layer that looks inside it.
//! 6. `auth`, `session`: who is calling, by bearer credential or by browser cookie; `rate_limit`:
//!    how often a credential may call; `observe`: the body timeout and the metrics.
//! 7. `dispatch`: the one path from an authenticated call to an action and back.
//! 8. `openapi`, `docs`, `rest`, `mcp`: the documents and the two faces.
//! 9. `oauth`: the authorization server for MCP clients (it shares the MCP face's CORS policy).
//! 10. `web`, `housekeeping`: the settings pages (which disconnect OAuth grants) and the periodic
//!     deletions (which keep codes as long as OAuth refresh tokens live).
//! 11. `server`, `prelude`: the top; nothing in the crate imports them. Beside them
//!     `connections`, the accept loop with its timeouts and connection caps, which only `server`
//!     runs.

// Declared bottom to top, in the order above.
pub mod batched_reads;
pub mod body;
pub mod clock;
pub mod columns;
pub mod cors;
pub mod db;
pub mod error;
pub mod fixtures;
pub mod ids;
pub mod input;
pub mod json;
pub mod paging;
pub mod schema;
pub mod scope;
pub mod words;

pub mod admin;
pub mod config;
pub mod credits;
pub mod idempotency;
pub mod lease;
pub mod principal;
pub mod test_clock;

pub mod ctx;
pub mod jobs;
pub mod worker;

pub mod apps;
pub mod callbacks;
pub mod confirmations;
pub mod prompts;
pub mod registry;
pub mod retry;
pub mod tasks;
pub mod toolsets;

pub mod recovery;

pub mod request_id;
pub mod rpc;
pub mod state;

pub mod auth;
pub mod observe;
pub mod rate_limit;
pub mod session;

pub mod dispatch;

pub mod docs;
pub mod mcp;
pub mod openapi;
pub mod rest;

pub mod oauth;

pub mod housekeeping;
pub mod web;

pub mod connections;
pub mod prelude;
pub mod server;

pub use clock::{Clock, Timestamp};
pub use config::{Config, Environment};
pub use credits::{Price, PriceItem, Priced};
pub use ctx::Ctx;
pub use db::{Backend, Db};
pub use error::{ApiError, ErrorCode};
pub use outreach_macros::action;
pub use paging::{Page, PageParams};
pub use principal::{CredentialKind, Principal, WorkspaceSnapshot};
pub use scope::{Role, Scope};

/// What the `#[action]` expansion refers to. Not a public API: names here may change freely.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
    pub use schemars::{Schema, SchemaGenerator};
    pub use serde_json;
    pub use serde_json::Value;

    use crate::ApiError;
    pub use crate::registry::{ActionDef, BoxFuture, ErasedInput, ErasedPlan, HttpRoute};

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

    pub fn decode<T: ActionInput>(
        value: &Value,
        schema: &serde_json::Map<String, Value>,
    ) -> Result<ErasedInput, ApiError> {
        crate::dispatch::decode_input::<T>(value, Some(schema))
            .map(|input| Box::new(input) as ErasedInput)
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

    /// Erases a price function's answer: the price, and the plan boxed for the action.
    pub fn erase_priced<P: Send + 'static>(
        priced: Result<crate::Priced<P>, ApiError>,
    ) -> Result<(crate::Price, ErasedPlan), ApiError> {
        priced.map(|priced| (priced.price, Box::new(priced.plan) as ErasedPlan))
    }

    /// Unwraps the plan made by the same action's price function.
    pub fn plan<P: 'static>(plan: Option<ErasedPlan>) -> P {
        match plan.map(|plan| plan.downcast::<P>()) {
            Some(Ok(plan)) => *plan,
            _ => unreachable!("a priced action receives the plan of its own price function"),
        }
    }

    /// The output as the JSON every face sends (see [`crate::json`]).
    pub fn encode<T: ActionOutput>(output: &T) -> Result<crate::json::JsonBody, ApiError> {
        crate::json::JsonBody::of(output).map_err(ApiError::internal)
    }
}
