//! The domain of the outreach service: one module per resource, each a set of `#[action]`s.
//!
//! Nothing here is wired by hand: an action registers itself, and the runtime makes its REST
//! route, OpenAPI operation and MCP tool. To add a capability, write one annotated async function
//! in the module of its resource (see the README, "Adding an action").

pub mod agents;
pub mod approval_items;
pub mod approvals;
pub mod apps;
pub mod common;
pub mod confirmations;
pub mod conversations;
pub mod credits;
pub mod dashboard;
pub mod deliveries;
pub mod delivery;
pub mod drafting;
pub mod enrollments;
pub mod events;
pub mod followups;
pub mod imports;
pub mod lists;
pub mod network;
pub mod person_lock;
pub mod placeholders;
pub mod processing;
pub mod prompts;
pub mod prospects;
pub mod provider;
pub mod reply_reading;
pub mod sandbox_clock;
pub mod sandbox_helpers;
pub mod scoring;
pub mod senders;
pub mod sequences;
pub mod step_jobs;
pub mod targeting;
pub mod webhooks;
pub mod workspace;

// The toolsets an MCP client picks from (`?toolsets=prospecting,outreach`); each module's
// `resource_tag!` places its resource in one. The default ones are what a client that names none
// gets: the workspace and the outreach it runs, the day-to-day work of an assistant (approvals,
// replies, sequences), within the 40 tools some hosts send their model.
outreach_runtime::prelude::toolset!(
    "workspace",
    default = true,
    "The workspace, its dashboard and its credit ledger."
);
outreach_runtime::prelude::toolset!(
    "outreach",
    default = true,
    "Senders, sequences, enrollments, the approval queue and conversations."
);
outreach_runtime::prelude::toolset!(
    "prospecting",
    default = false,
    "Prospects, lists, targeting, imports, scoring runs and list processing."
);
outreach_runtime::prelude::toolset!(
    "agents",
    default = false,
    "Agents (prospector, writer, inbox triage) and their runs."
);
outreach_runtime::prelude::toolset!(
    "webhooks",
    default = false,
    "Webhook endpoints: where the workspace's events are delivered, signed, and how each delivery went."
);
outreach_runtime::prelude::toolset!(
    "sandbox",
    default = false,
    "Test helpers of the simulated network (outside production only): the clock, acceptances, replies."
);
