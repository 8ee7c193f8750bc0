//! The actions' modules form layers, and this test keeps them that way (as the runtime's own
//! `tests/layers.rs` does for the runtime, with the same reader, `outreach-layers`).
//!
//! [`LAYERS`] lists the top-level modules of `actions/src` from the bottom up: a module may
//! import from its own layer or any layer below, never from one above, and no modules may import
//! each other in a circle. What a lower module needs from a higher one moves down (a type beside
//! the table it describes: `Classification` beside conversations, `Tier` beside prospects), or
//! the higher module registers itself for it (a job kind the lower module owns and enqueues:
//! `senders::PollJob` handled by `delivery::inbound`, `followups::RunsDecided` by `agents`), or
//! the lower one hands its result up (the network's `poll` returns its events to delivery).
//!
//! [`OWED`] lists the upward imports not yet removed, each with what removes it; the checks judge
//! the graph without them, and a listed import the code no longer has fails the test until it is
//! struck, so the list only shrinks.

use std::path::{Path, PathBuf};

use outreach_layers::{
    Layers, check_every_module_in_one_layer, find_cycle, graph, set_aside, upward_imports,
};

/// The top-level modules of `actions/src`, bottom layer first.
const LAYERS: Layers = &[
    // What every module shares: ids and patterns, the events every owner writes (and their
    // webhook deliveries), credits, the
    // workspace, the one lock rule
    // every writer of outreach state follows, each enrollment's step job, and the follow-up jobs
    // a low module enqueues for a higher one's derived state, which network the configuration
    // names, the MCP prompts, the confirmations and the MCP apps (text naming tools, which
    // imports no module).
    &[
        "common",
        "deliveries",
        "events",
        "credits",
        "workspace",
        "person_lock",
        "placeholders",
        "step_jobs",
        "followups",
        "provider",
        "prompts",
        "confirmations",
        "apps",
    ],
    // The workspace's webhook endpoints, which receive its events.
    &["webhooks"],
    // The people and how they are judged: prospects, the ideal-customer profile, scoring.
    &["prospects", "targeting", "scoring"],
    // Groups of people and how they arrive: lists, imports, a list's processing.
    &["lists", "imports", "processing"],
    // The accounts outreach is sent from, the network behind them, what was said.
    &["senders", "network", "conversations", "reply_reading"],
    // What is sent to whom: sequences, their enrollments, and the items that approve them.
    &["sequences", "enrollments", "approval_items"],
    // The texts a model drafts for a step.
    &["drafting"],
    // The jobs that perform the steps and the replies, and apply what comes back.
    &["delivery"],
    // The approval queue: proposals, and the decisions that start outreach.
    &["approvals"],
    // The agents and their runs, which propose.
    &["agents"],
    // Counts over everything, and the sandbox's test helpers and its clock, which drive the
    // network, delivery and the job queue.
    &["dashboard", "sandbox_helpers", "sandbox_clock"],
];

/// Upward imports still to remove: (importer, imported, what removes it). None are left; the
/// list stays so that a debt taken on knowingly is written down with its way out.
const OWED: &[(&str, &str, &str)] = &[];

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
fn no_module_imports_a_module_above_it_but_the_owed_imports() {
    let mut graph = graph(LAYERS, &src_dir());
    assert!(
        graph
            .get("delivery")
            .is_some_and(|edges| edges.contains_key("senders")),
        "the reader found no imports in delivery: is it reading the right directory?"
    );
    let paid = set_aside(&mut graph, OWED);
    assert!(paid.is_empty(), "{}", paid.join("\n"));
    let offences = upward_imports(LAYERS, &graph);
    assert!(offences.is_empty(), "{}", offences.join("\n"));
}

#[test]
fn the_modules_import_each_other_in_no_cycle_but_through_the_owed_imports() {
    let mut graph = graph(LAYERS, &src_dir());
    set_aside(&mut graph, OWED);
    if let Some(cycle) = find_cycle(&graph) {
        panic!("the modules import each other in a cycle:\n{cycle}");
    }
}
