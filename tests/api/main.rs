//! The end-to-end suite: the real app on a random port with a fresh database, over HTTP.
//!
//! One test binary (so the app and the actions are linked once); one module per area. Run it with
//! `cargo test --test api`; set `TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres` to
//! run it on PostgreSQL (a fresh database per test), and `UPDATE_GOLDEN=1` to rewrite the golden
//! files in `tests/golden/` after an intended change.

mod fake_unipile;
mod helpers;

mod agent_jobs;
mod agent_runs;
mod agents;
mod approvals;
mod auth;
mod bad_input;
mod branching;
mod cli;
mod confirmations;
mod connections;
mod conversations;
mod crash;
mod do_not_contact;
mod events;
mod finding;
mod gate;
mod golden;
mod housekeeping;
mod hygiene;
mod imports;
mod instances;
mod isolation;
mod lists;
mod manual_commands;
mod manuals;
mod mcp;
mod mcp_apps;
mod mcp_tasks;
mod network_rules;
mod oauth;
mod oauth_tokens;
mod openapi;
mod outreach;
mod outreach_instances;
mod outreach_month;
mod owners;
mod paging;
mod parity;
mod processing;
mod prompts;
mod prospects;
mod round_trips;
mod sandbox;
mod sandbox_clock;
mod scoring;
mod senders;
mod sequences;
mod soak;
mod targeting;
mod toolsets;
mod unipile;
mod unipile_crash;
mod unipile_month;
mod uploads;
mod web;
mod web_approvals;
mod web_webhooks;
mod webhooks;
mod worst_inputs;
