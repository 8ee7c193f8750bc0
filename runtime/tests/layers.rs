//! The runtime's modules form layers, and this test keeps them that way.
//!
//! [`LAYERS`] lists the crate's top-level modules from the bottom up. A module may import from its
//! own layer or any layer below it, never from one above, and no set of modules may import each
//! other in a circle (which could otherwise happen inside one layer). The point is that a reader
//! can take the crate bottom-up and a change to a module can only break what sits above it: when
//! `server.rs` held the state and every handler imported it while it imported them, the whole
//! crate was one knot. `lib.rs` repeats the order in its header for readers.
//!
//! The reader is `outreach-layers` (`layers/`), shared with the actions' own layers test; it says
//! how it reads the graph. A name re-exported at the crate root (`crate::ApiError`) is refused:
//! write `crate::error::ApiError`. Adding a module means adding it to [`LAYERS`] in the right
//! place; this test says so if you forget.

use std::path::{Path, PathBuf};

use outreach_layers::{Layers, check_every_module_in_one_layer, find_cycle, graph, upward_imports};

/// The top-level modules of `runtime/src`, bottom layer first.
const LAYERS: Layers = &[
    // Foundations: they import nothing from this crate.
    &[
        "clock",
        "ids",
        "json",
        "error",
        "scope",
        "columns",
        "paging",
        "db",
        "batched_reads",
        "schema",
        "words",
        "cors",
        "body",
        "input",
        "fixtures",
    ],
    // The bookkeeping and the rules that the faces, the web pages and the CLI share.
    // `lease` keeps a hold on a shared row alive while its work runs; `retry` runs again what the
    // database ended for a conflict.
    &[
        "lease",
        "credits",
        "idempotency",
        "principal",
        "config",
        "admin",
        "test_clock",
        "retry",
    ],
    // What an action receives; durable jobs, what their handlers receive, and the loop that
    // runs them.
    &["ctx", "jobs", "worker"],
    // Every action, collected and validated, the long calls among them, the toolsets their
    // resource tags belong to, the prompts that walk them, the calls that ask first and the
    // views an MCP host draws for their results; the routes a provider calls back.
    &[
        "registry",
        "tasks",
        "toolsets",
        "prompts",
        "confirmations",
        "apps",
        "callbacks",
    ],
    // What a dead process held, given back (the domain registers its own recoveries).
    &["recovery"],
    // What every request shares, its id, and an MCP tool call read once for every layer.
    &["state", "request_id", "rpc"],
    // Who is calling: by bearer credential, or by browser cookie; how often a credential may
    // call; the body timeout and the metrics.
    &["auth", "session", "rate_limit", "observe"],
    // The one path from an authenticated call to an action and back.
    &["dispatch"],
    // The documents and the two faces.
    &["openapi", "docs", "rest", "mcp"],
    // The authorization server for MCP clients (it shares the MCP face's CORS policy).
    &["oauth"],
    // The settings pages (they disconnect OAuth grants) and the periodic deletions (they keep
    // codes as long as OAuth refresh tokens live).
    &["web", "housekeeping"],
    // The top: nothing in the crate imports these, but `server` runs the accept loop beside it
    // (`connections`: the timeouts and the connection caps).
    &["server", "prelude", "connections"],
];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_is_in_exactly_one_layer() {
    if let Err(problem) = check_every_module_in_one_layer(LAYERS, &src_dir()) {
        panic!("{problem}");
    }
}

#[test]
fn no_module_imports_a_module_above_it() {
    let graph = graph(LAYERS, &src_dir());
    assert!(
        graph
            .get("server")
            .is_some_and(|edges| edges.contains_key("state")),
        "the reader found no imports in server.rs: is it reading the right directory?"
    );
    let offences = upward_imports(LAYERS, &graph);
    assert!(offences.is_empty(), "{}", offences.join("\n"));
}

#[test]
fn the_modules_import_each_other_in_no_cycle() {
    if let Some(cycle) = find_cycle(&graph(LAYERS, &src_dir())) {
        panic!("the modules import each other in a cycle:\n{cycle}");
    }
}
