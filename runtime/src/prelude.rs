//! Everything an action author may use, in one import: `use outreach_runtime::prelude::*;`.
//!
//! This is the set an action may touch, and the promise runs both ways: what is here stays
//! stable for the `actions` crate, and what is not here (the state, the faces, auth, dispatch,
//! the OAuth server, the web pages) is the framework's own business and may change under it. An
//! action that needs something else should ask for it to be added here rather than reach past
//! this list into the crate's modules. The list is what `actions/` imports today: the attribute,
//! the context and its transaction, errors, paging, prices and their plans, price items and
//! recoveries (declared beside the actions that need them), the long calls the MCP face offers as
//! tasks (`mcp_task!` and the view of their output), the views an MCP host draws for a tool's
//! result (`mcp_app!`), durable jobs and their handlers, the
//! configuration (which network to use, which drafting model) and the shared test clock (with
//! the worker's `drain`, which plays out what falls due as it moves), leases
//! for marks others must see while work runs, the deletions of a domain's old rows (`purge!`), scopes and roles (and a credential's scope read
//! afresh, for a job acting on a person's behalf), ids, times and stored text enums, the backend
//! switch for the few queries that differ, and the credit ledger that the credits actions show.

pub use outreach_macros::action;

pub use crate::apps::McpApp;
pub use crate::callbacks::{CallbackCtx, CallbackReply, CallbackRequest};
pub use crate::clock::{Clock, Timestamp, rfc3339};
pub use crate::columns::{Columns, Cursor, FromColumns};
pub use crate::config::{Config, Environment};
pub use crate::confirmations::Look;
pub use crate::credits::{self, Price, PriceItem, Priced};
pub use crate::ctx::{Ctx, Tx};
pub use crate::db::{Backend, Db, is_unique_violation};
pub use crate::error::{ApiError, ErrorCode};
pub use crate::ids;
pub use crate::jobs::{
    self, Job, JobArgs, JobCtx, JobError, JobOutcome, JobResult, JobState, NewJob, enqueue,
};
pub use crate::lease::{self, Heartbeat};
pub use crate::paging::{
    AnyQuery, Bind, MAX_PAGE_BYTES, OrderTerm, Page, PageParams, SortedQuery, Total, paged,
    paged_sorted,
};
pub use crate::principal::{CredentialKind, scope_now};
pub use crate::prompts::{Prompt, PromptArgument};
pub use crate::scope::{Role, Scope};
pub use crate::tasks::{TaskProgress, TaskState, TaskView};
pub use crate::test_clock;
pub use crate::worker;
pub use crate::{
    callback, confirmation, error_codes, example, job, mcp_app, mcp_task, parity, preview_field,
    price_item, prompt, purge, recovery, resource_tag, text_body, text_enum, toolset,
};
