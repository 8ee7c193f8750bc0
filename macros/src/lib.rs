//! The `#[action]` attribute: one async function becomes a REST route, an MCP tool and an OpenAPI
//! operation.
//!
//! Use it through `outreach_runtime::action`; the expansion names only `::outreach_runtime`, so a
//! crate of actions needs no other dependency for it.
//!
//! ```ignore
//! use outreach_runtime::{action, ApiError, Ctx, Price};
//!
//! /// Import prospects from CSV text or JSON rows.
//! ///
//! /// Rows are deduplicated by profile URL, then email. Costs one credit per row.
//! #[action(scope = "write", credits = price_import, idempotent, http = "POST /imports")]
//! pub async fn import_prospects(ctx: Ctx, input: ImportInput) -> Result<ImportOutcome, ApiError> {
//!     // ...
//! }
//!
//! async fn price_import(ctx: &Ctx, input: &ImportInput) -> Result<Price, ApiError> {
//!     // ...
//! }
//! ```
//!
//! Arguments:
//!
//! - `scope = "read" | "write" | "send"` (required): the scope a credential needs to call it.
//! - `http = "METHOD /path/{param}"`: the REST route under `/api/v1`; each `{param}` is a field of
//!   the input. Without it the action is reachable over MCP only.
//! - `idempotent`: the action honours `Idempotency-Key` (REST) and `idempotency_key` (MCP).
//! - `test_helper`: a test helper (the sandbox's `advance_clock`, ...): it exists outside
//!   production only; a production server neither routes, lists nor calls it.
//! - `credits = price_fn`: the action spends credits; `price_fn` is an
//!   `async fn(&Ctx, &Input) -> Result<Price, ApiError>` that prices a call before it runs.
//!
//! The function name is the action's name (snake_case, at most 64 characters); the first
//! paragraph of its doc comment is the summary and the rest the description. The function must
//! be `async`, take the context and one input type, and return `Result<Output, ApiError>`, where
//! the input derives `Deserialize` + `JsonSchema` and the output `Serialize` + `JsonSchema`.
//!
//! The function is emitted unchanged; a hidden `const _` block registers it with the runtime's
//! registry through `inventory`.

mod attr;
mod doc;
mod expand;
mod signature;

use proc_macro::TokenStream;

/// Registers an async function as an action. See the [crate documentation](crate).
#[proc_macro_attribute]
pub fn action(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(attr.into(), item.into()).into()
}

/// Folds errors into one, so that every problem is reported, not only the first.
fn combine(mut first: syn::Error, next: syn::Error) -> syn::Error {
    first.combine(next);
    first
}
