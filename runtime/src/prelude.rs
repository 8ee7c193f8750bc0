//! Everything an action author may use, in one import: `use outreach_runtime::prelude::*;`.
//!
//! This is the set an action may touch, and the promise runs both ways: what is here stays
//! stable for the `actions` crate, and what is not here (the state, the faces, auth, dispatch,
//! the OAuth server, the web pages) is the framework's own business and may change under it. An
//! action that needs something else should ask for it to be added here rather than reach past
//! this list into the crate's modules. The list is what `actions/` imports today: the attribute,
//! the context, errors, paging, prices, scopes and roles, ids, time formatting, the backend
//! switch for the few queries that differ, and the credit ledger that the credits actions show.

pub use outreach_macros::action;

pub use crate::clock::rfc3339;
pub use crate::credits::{self, Price};
pub use crate::ctx::Ctx;
pub use crate::db::{Backend, is_unique_violation};
pub use crate::error::{ApiError, ErrorCode};
pub use crate::ids;
pub use crate::paging::{Page, PageParams};
pub use crate::principal::CredentialKind;
pub use crate::scope::{Role, Scope};
