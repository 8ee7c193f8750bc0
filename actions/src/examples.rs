//! Example requests and responses for the OpenAPI document, one per routed action.
//!
//! The runtime knows no domain type, so the examples live here as one JSON table by action name
//! (`examples.json`) rather than beside each type: a table is easy to refresh from a real session
//! (every response in it was answered by the server) and to review as a whole. A test decodes
//! each request with its action's strict decoder, and `redocly lint` in CI checks each response
//! against its schema, so an example cannot drift from the contract unnoticed.

outreach_runtime::prelude::example_table!(include_str!("examples.json"));
