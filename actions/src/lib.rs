//! The domain of the outreach service: one module per resource, each a set of `#[action]`s.
//!
//! Nothing here is wired by hand: an action registers itself, and the runtime makes its REST
//! route, OpenAPI operation and MCP tool. To add a capability, write one annotated async function
//! in the module of its resource (see the README, "Adding an action").

pub mod agents;
pub mod approvals;
pub mod common;
pub mod conversations;
pub mod credits;
pub mod dashboard;
pub mod delivery;
pub mod drafting;
pub mod enrollments;
mod examples;
pub mod followups;
pub mod imports;
pub mod lists;
pub mod network;
pub mod processing;
pub mod prospects;
pub mod sandbox_helpers;
pub mod scoring;
pub mod senders;
pub mod sequences;
pub mod step_jobs;
pub mod targeting;
pub mod workspace;
