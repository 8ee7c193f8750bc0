//! Every table of the actions has one owner, and this test keeps writes to it there.
//!
//! [`OWNERS`] names, for each table, the file or folder under `actions/src` whose verbs change it
//! (`enrollments::approve`, `enrollments::finish`, ...): any `insert into`, `update ... set` or
//! `delete from` of the table elsewhere fails the test, naming the file, the line and the owner to
//! call instead. Reads stay free: a dashboard may count any table. A table the actions write that
//! is in no row fails too, so a new table is given its owner when it is made.
//!
//! [`OWED`] lists the writes outside their owner not yet moved into a verb, each a (file, table)
//! pair; the test fails when one is gone and still listed, so the list only shrinks.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use outreach_layers::rust_files;

/// Each table, and the file or folder (relative to `actions/src`) that owns its writes.
const OWNERS: &[(&str, &str)] = &[
    ("events", "events.rs"),
    ("webhook_deliveries", "deliveries.rs"),
    ("webhook_endpoints", "webhooks/"),
    ("prospects", "prospects/"),
    ("prospect_tags", "prospects/"),
    ("prospect_totals", "prospects/"),
    ("do_not_contact_entries", "prospects/do_not_contact.rs"),
    ("targetings", "targeting.rs"),
    ("scoring_runs", "scoring/"),
    ("scoring_results", "scoring/"),
    ("lists", "lists/"),
    ("list_members", "lists/"),
    ("imports", "imports/"),
    ("senders", "senders/"),
    ("sender_usage", "senders/"),
    ("conversations", "conversations.rs"),
    ("messages", "conversations.rs"),
    ("sandbox_accounts", "network/"),
    ("sandbox_connections", "network/"),
    ("sandbox_messages", "network/"),
    ("sandbox_log", "network/"),
    ("unipile_links", "network/unipile/"),
    ("unipile_people", "network/unipile/"),
    ("unipile_inbox", "network/unipile/"),
    ("unipile_sync", "network/unipile/"),
    ("sequences", "sequences/"),
    ("sequence_senders", "sequences/"),
    ("enrollments", "enrollments.rs"),
    ("enrollment_events", "enrollments.rs"),
    ("outbound_intents", "delivery/"),
    ("inbound_events", "delivery/"),
    ("approvals", "approval_items.rs"),
    ("agents", "agents/"),
    ("agent_runs", "agents/"),
    ("agent_run_items", "agents/"),
    ("agent_run_log", "agents/"),
];

/// Writes outside their owner still to move into the owner's verbs: (file, table).
const OWED: &[(&str, &str)] = &[];

fn is_name_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
}

/// The tables a line of SQL writes: `insert into T`, `update T set`, `delete from T`.
fn written_tables(line: &str) -> Vec<String> {
    let line = line.to_ascii_lowercase();
    let mut tables = Vec::new();
    for (verb, needs_set) in [
        ("insert into ", false),
        ("update ", true),
        ("delete from ", false),
    ] {
        let mut rest = line.as_str();
        while let Some(at) = rest.find(verb) {
            let before = rest[..at].chars().next_back();
            let after = &rest[at + verb.len()..];
            rest = after;
            if before.is_some_and(is_name_char) {
                continue;
            }
            let table: String = after.chars().take_while(|&c| is_name_char(c)).collect();
            let tail = after[table.len()..].trim_start();
            // `update T` ending its line (`\` continues the string on the next) is a write too.
            let set_follows = tail.starts_with("set ") || tail.is_empty() || tail.starts_with('\\');
            // `on conflict ... do update set` writes the insert's own table, counted already.
            if table == "set" || (needs_set && !set_follows) {
                continue;
            }
            // A verb with no table name after it (`delete from \` continued on the next line,
            // `format!("delete from {table}")`) cannot be judged: it is reported, not skipped.
            if table.is_empty() {
                tables.push("?".to_owned());
                continue;
            }
            tables.push(table);
        }
    }
    tables
}

/// Every line of code in the sources, comments left out: (file relative to `src`, line number,
/// the line without its indentation).
fn code_lines() -> Vec<(String, usize, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let shown = file
            .strip_prefix(&src)
            .expect("under src")
            .display()
            .to_string();
        let text = fs::read_to_string(&file).expect("read a source file");
        for (number, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if !code.starts_with("//") {
                found.push((shown.clone(), number + 1, code.to_owned()));
            }
        }
    }
    found
}

/// Every write in the sources: (file relative to `src`, line number, table).
fn writes() -> Vec<(String, usize, String)> {
    let mut found = Vec::new();
    for (file, line, code) in code_lines() {
        for table in written_tables(&code) {
            found.push((file.clone(), line, table));
        }
    }
    found
}

fn owner_of(table: &str) -> Option<&'static str> {
    OWNERS
        .iter()
        .find(|(name, _)| *name == table)
        .map(|(_, owner)| *owner)
}

fn owns(owner: &str, file: &str) -> bool {
    if owner.ends_with('/') {
        file.starts_with(owner)
    } else {
        file == owner
    }
}

#[test]
fn every_table_is_written_by_its_owner_only_but_the_owed_writes() {
    let writes = writes();
    assert!(
        writes
            .iter()
            .any(|(file, _, table)| file == "enrollments.rs" && table == "enrollments"),
        "the reader found no write of enrollments in enrollments.rs: is it reading the sources?"
    );
    let mut offences = Vec::new();
    let mut owed_seen = BTreeSet::new();
    for (file, line, table) in &writes {
        if table == "?" {
            offences.push(format!(
                "{file}:{line}: a write whose table is not on the same line; keep `insert into`, \
                 `update` and `delete from` beside their table's name"
            ));
            continue;
        }
        let Some(owner) = owner_of(table) else {
            offences.push(format!(
                "{file}:{line}: `{table}` has no owner; add it to OWNERS (actions/tests/owners.rs)"
            ));
            continue;
        };
        if owns(owner, file) {
            continue;
        }
        if OWED.contains(&(file.as_str(), table.as_str())) {
            owed_seen.insert((file.clone(), table.clone()));
            continue;
        }
        offences.push(format!(
            "{file}:{line}: writes `{table}`, which `{owner}` owns; call a verb of its owner instead"
        ));
    }
    for (file, table) in OWED {
        if !owed_seen.contains(&(file.to_string(), table.to_string())) {
            offences.push(format!(
                "{file} no longer writes `{table}`: strike it from OWED (actions/tests/owners.rs)"
            ));
        }
    }
    assert!(offences.is_empty(), "{}", offences.join("\n"));
}

#[test]
fn the_reader_finds_the_three_writes_and_nothing_else() {
    assert_eq!(
        written_tables(r#""insert into enrollments (id) values ($1)""#),
        ["enrollments"]
    );
    assert_eq!(
        written_tables("update approvals set status = 'expired' where id in (select 1)"),
        ["approvals"]
    );
    assert_eq!(
        written_tables("\"DELETE FROM list_members WHERE list_id = $1\""),
        ["list_members"]
    );
    // Words that only look like SQL: no `set` after `update`, a name before the verb.
    assert!(written_tables("we update that row later").is_empty());
    assert!(written_tables("fn soft_update prospects set").is_empty());
    assert_eq!(
        written_tables(
            "insert into sandbox_log (id) values ($1) on conflict (id) do update set \\"
        ),
        ["sandbox_log"]
    );
}

/// Where the actions take row locks themselves (`for update`, `for no key update`, `for share`,
/// `for key share`), and why; anywhere else fails [`row_locks_are_taken_where_the_lock_rule_says`].
/// A person's outreach state is locked only through `person_lock` (its one rule).
const ROW_LOCKS: &[(&str, &str)] = &[
    (
        "person_lock.rs",
        "the people: the one lock rule of outreach state",
    ),
    (
        "senders/mod.rs",
        "a sender's row, for its quota and gap, after its people",
    ),
    (
        "sequences/mod.rs",
        "a sequence's row, shared by the step jobs that decide by it, after their person",
    ),
    (
        "prospects/bulk.rs",
        "the rows an import rewrites whole, before it rewrites them",
    ),
    (
        "scoring/run.rs",
        "the prospects a scoring run copies its scores to, in id order",
    ),
    (
        "deliveries.rs",
        "a webhook endpoint's row, so the claims of its next delivery queue",
    ),
    (
        "webhooks/deliver.rs",
        "a webhook endpoint's row, before the deliveries an attempt's outcome changes",
    ),
    (
        "webhooks/mod.rs",
        "the workspace's row, so two endpoints made at once cannot both be the 16th",
    ),
];

/// The row locks in the sources: (file relative to `src`, line number).
fn row_locks() -> Vec<(String, usize)> {
    let locks = [
        "for update",
        "for no key update",
        "for share",
        "for key share",
    ];
    code_lines()
        .into_iter()
        .filter(|(_, _, code)| {
            let code = code.to_ascii_lowercase();
            locks.iter().any(|lock| code.contains(lock))
        })
        .map(|(file, line, _)| (file, line))
        .collect()
}

#[test]
fn row_locks_are_taken_where_the_lock_rule_says() {
    let locks = row_locks();
    assert!(
        locks.iter().any(|(file, _)| file == "person_lock.rs"),
        "the reader found no lock in person_lock.rs: is it reading the sources?"
    );
    let offences: Vec<String> = locks
        .iter()
        .filter(|(file, _)| !ROW_LOCKS.iter().any(|(allowed, _)| allowed == file))
        .map(|(file, line)| {
            format!(
                "{file}:{line}: takes a row lock; a person's outreach state is locked with \
                 `person_lock::lock` (or `try_lock`), other rows by their owner listed in ROW_LOCKS \
                 (actions/tests/owners.rs)"
            )
        })
        .collect();
    assert!(offences.is_empty(), "{}", offences.join("\n"));
}
