//! The manuals in `docs/` say what the code does.
//!
//! - The error table of `docs/errors.md` is generated from `ErrorCode` (its code, status and
//!   sentence), and the event table of `docs/events.md` from `EventType` (its doc comments):
//!   `UPDATE_GOLDEN=1 cargo test --test api manuals` rewrites them, and without that a
//!   difference fails, as the golden documents do.
//! - The configuration table of `docs/configuration.md` names every setting the server reads,
//!   once, and nothing it does not: every `--flag` of `outreach serve --help`, every variable
//!   that help names, and every `OUTREACH_*`, `LLM_*` and `DATABASE_URL` the sources read.
//! - Every `curl` in a shell block of the README or a manual that sends a body names its
//!   `Content-Type`. (The commands are not run here yet: their ids are placeholders.)

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

use outreach_layers::rust_files;
use outreach_runtime::ErrorCode;

const ERRORS_START: &str = "<!-- The table is generated from `ErrorCode::all()` (the runtime's codes and those the actions register) by tests/api/manuals.rs. -->";
const TABLE_END: &str = "<!-- End of the generated table. -->";

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn error_table() -> String {
    let mut table = String::from("| code | status | when |\n|---|---|---|\n");
    for code in ErrorCode::all() {
        table.push_str(&format!(
            "| `{}` | {} | {} |\n",
            code.as_str(),
            code.status().as_u16(),
            code.when().replace('|', "\\|")
        ));
    }
    table
}

/// The actions register their codes beside the runtime's; a name used twice would make two rows
/// of the table answer one code.
#[test]
fn every_error_code_is_named_once_and_the_actions_register_theirs() {
    let all = ErrorCode::all();
    let mut names: Vec<&str> = all.iter().map(|code| code.as_str()).collect();
    assert!(
        names.contains(&"not_connected"),
        "the network's codes are registered: {names:?}"
    );
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "an error code is declared twice");
}

/// Checks that `docs/{name}` holds `table` between `start_marker` and [`TABLE_END`], or writes it
/// there with `UPDATE_GOLDEN=1`.
fn check_generated_table(name: &str, start_marker: &str, table: &str, source: &str) {
    let path = repository().join("docs").join(name);
    let text = fs::read_to_string(&path).unwrap_or_else(|_| panic!("read docs/{name}"));
    let start = text.find(start_marker).expect("the table's start marker") + start_marker.len();
    let end = text.find(TABLE_END).expect("the table's end marker");
    let wanted = format!("\n{table}");
    if text[start..end] == wanted {
        return;
    }
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let updated = format!("{}{wanted}{}", &text[..start], &text[end..]);
        fs::write(&path, updated).unwrap_or_else(|_| panic!("write docs/{name}"));
        return;
    }
    panic!(
        "docs/{name}'s table differs from {source}; run \
         `UPDATE_GOLDEN=1 cargo test --test api manuals` and review the diff"
    );
}

#[test]
fn the_error_table_is_made_from_the_error_codes() {
    check_generated_table("errors.md", ERRORS_START, &error_table(), "ErrorCode");
}

const EVENTS_START: &str = "<!-- The table is generated from `EventType` (each type's doc comment) by tests/api/manuals.rs. -->";

/// Every event type, what it says and the keys of its `data`.
fn event_table() -> String {
    use outreach_actions::events::EventType;
    let mut table = String::from("| type | when | `data` |\n|---|---|---|\n");
    for kind in EventType::ALL {
        let doc = kind.doc().trim();
        let when = doc.split_once(" `data`:").map_or(doc, |(when, _)| when);
        let keys: Vec<String> = kind
            .data_keys()
            .iter()
            .map(|key| format!("`{key}`"))
            .collect();
        table.push_str(&format!(
            "| `{}` | {} | {} |\n",
            kind.as_str(),
            when.replace('|', "\\|"),
            keys.join(", ")
        ));
    }
    table
}

#[test]
fn the_event_table_is_made_from_the_event_types() {
    check_generated_table("events.md", EVENTS_START, &event_table(), "EventType");
}

/// The cells of a Markdown table's rows (after its header and rule), trimmed.
fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|line| line.starts_with('|'))
        .skip(2)
        .map(|line| {
            // `\|` inside a cell is a literal bar.
            line.replace("\\|", "\u{0}")
                .trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().replace('\u{0}', "|"))
                .collect()
        })
        .collect()
}

/// The first backquoted word of a cell (`--addr` of "`--addr` ADDR"), if any.
fn first_code_word(cell: &str) -> Option<String> {
    let inner = cell.strip_prefix('`')?;
    let word: String = inner
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '`')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// The environment variables the sources name as a whole string literal (`"OUTREACH_ADDR"`).
fn variables_in_sources() -> BTreeSet<String> {
    let mut files = Vec::new();
    for dir in ["src", "runtime/src", "actions/src"] {
        rust_files(&repository().join(dir), &mut files);
    }
    let mut names = BTreeSet::new();
    for file in files {
        let text = fs::read_to_string(&file).expect("read a source file");
        for piece in text.split('"').skip(1).step_by(2) {
            let is_setting = ["OUTREACH_", "LLM_"]
                .iter()
                .any(|prefix| piece.starts_with(prefix))
                || piece == "DATABASE_URL";
            if is_setting && piece.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                names.insert(piece.to_owned());
            }
        }
    }
    names
}

#[test]
fn the_configuration_table_names_every_setting_the_server_reads() {
    let help = Command::new(env!("CARGO_BIN_EXE_outreach"))
        .args(["serve", "--help"])
        .output()
        .expect("run outreach serve --help");
    assert!(help.status.success(), "{help:?}");
    let help = String::from_utf8(help.stdout).expect("help is text");
    let mut flags = BTreeSet::new();
    let mut variables = variables_in_sources();
    for line in help.lines() {
        if let Some(at) = line.find("--") {
            let flag: String = line[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if flag != "--help" && flag.len() > 2 {
                flags.insert(flag);
            }
        }
        if let Some(at) = line.find("[env: ") {
            let name: String = line[at + 6..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                .collect();
            variables.insert(name);
        }
    }
    // The log filter is read by the tracing subscriber, not by name in our sources.
    variables.insert("RUST_LOG".to_owned());

    let text =
        fs::read_to_string(repository().join("docs/configuration.md")).expect("read the manual");
    let mut documented_flags = BTreeSet::new();
    let mut documented_variables = BTreeSet::new();
    for row in table_rows(&text) {
        if let Some(variable) = row.first().and_then(|cell| first_code_word(cell)) {
            assert!(
                documented_variables.insert(variable.clone()),
                "`{variable}` has two rows"
            );
        }
        if let Some(flag) = row.get(1).and_then(|cell| first_code_word(cell)) {
            assert!(
                documented_flags.insert(flag.clone()),
                "`{flag}` has two rows"
            );
        }
    }
    let missing: Vec<_> = variables.difference(&documented_variables).collect();
    let stale: Vec<_> = documented_variables.difference(&variables).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/configuration.md: variables the server reads but the table lacks: {missing:?}; \
         rows for variables nothing reads: {stale:?}"
    );
    let missing: Vec<_> = flags.difference(&documented_flags).collect();
    let stale: Vec<_> = documented_flags.difference(&flags).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/configuration.md: flags of `outreach serve` the table lacks: {missing:?}; \
         rows for flags it does not take: {stale:?}"
    );
}

/// The shell blocks (```sh) of the README and the manuals, each command on one line (a line that
/// ends in `\` continues on the next): (file, command).
fn shell_commands() -> Vec<(String, String)> {
    let mut files = vec![repository().join("README.md")];
    let mut manuals: Vec<PathBuf> = fs::read_dir(repository().join("docs"))
        .expect("read docs/")
        .map(|entry| entry.expect("a docs entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    manuals.sort();
    files.extend(manuals);
    let mut commands = Vec::new();
    for file in files {
        let shown = file
            .strip_prefix(repository())
            .expect("under the repository")
            .display()
            .to_string();
        let text = fs::read_to_string(&file).expect("read a manual");
        let mut in_shell = false;
        let mut command = String::new();
        for line in text.lines() {
            if line.starts_with("```") {
                in_shell = !in_shell && line.trim() == "```sh";
                continue;
            }
            if !in_shell {
                continue;
            }
            match line.strip_suffix('\\') {
                Some(start) => command.push_str(start),
                None => {
                    command.push_str(line);
                    commands.push((shown.clone(), std::mem::take(&mut command)));
                }
            }
        }
    }
    commands
}

/// A `curl` in the manuals that sends a body says what it is: the API answers 415
/// `unsupported_media_type` to a body without `Content-Type` (the sandbox examples once lacked
/// it). A form upload (`-F`) sets its own.
#[test]
fn every_documented_curl_that_sends_a_body_names_its_content_type() {
    let commands = shell_commands();
    let curls: Vec<&(String, String)> = commands
        .iter()
        .filter(|(_, command)| command.trim_start().starts_with("curl "))
        .collect();
    assert!(
        curls.len() >= 10,
        "the reader found {} curl commands in the manuals: is it reading them?",
        curls.len()
    );
    let sends_body = |command: &str| {
        command
            .split_whitespace()
            .any(|word| matches!(word, "-d" | "--data" | "--data-binary" | "--data-raw"))
    };
    let missing: Vec<String> = curls
        .iter()
        .filter(|(_, command)| sends_body(command) && !command.contains(" -F "))
        .filter(|(_, command)| !command.to_ascii_lowercase().contains("content-type:"))
        .map(|(file, command)| format!("{file}: {}", command.trim()))
        .collect();
    assert!(
        missing.is_empty(),
        "these documented calls send a body without a Content-Type (the API answers 415):\n{}",
        missing.join("\n")
    );
}

/// The table of docs/connecting.md that starts with `header`, its lines as written.
fn connecting_table(header: &str) -> String {
    let text = fs::read_to_string(repository().join("docs/connecting.md")).expect("read the docs");
    let start = text
        .find(header)
        .unwrap_or_else(|| panic!("no table `{header}` in docs/connecting.md"));
    text[start..]
        .lines()
        .take_while(|line| line.starts_with('|'))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The toolsets table of docs/connecting.md names every declared toolset once, with whether a
/// connection that names none is shown it.
#[test]
fn the_toolsets_table_names_every_toolset_and_its_default() {
    let table = connecting_table("| toolset | tools for | shown by default |");
    let mut documented: Vec<(String, bool)> = table_rows(&table)
        .iter()
        .map(|row| {
            let name = first_code_word(&row[0]).expect("a toolset name in backquotes");
            (name, row[2] == "yes")
        })
        .collect();
    documented.sort();
    let mut declared: Vec<(String, bool)> = outreach_runtime::toolsets::toolsets()
        .iter()
        .map(|toolset| (toolset.name.to_owned(), toolset.default))
        .collect();
    declared.sort();
    assert_eq!(documented, declared, "docs/connecting.md's toolsets table");
}

/// A row of the prompts table: the name, the arguments (name, required) and the scopes.
type PromptRow = (String, Vec<(String, bool)>, String);

/// The prompts table of docs/connecting.md is the declared prompts: each name, its arguments in
/// order (required ones in bold, defaults of the short ones in brackets are prose, not checked),
/// and the scopes it is listed for.
#[test]
fn the_prompts_table_is_the_declared_prompts() {
    let table = connecting_table("| prompt | arguments (required in bold) | listed for |");
    let code_words = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    let documented: Vec<PromptRow> = table_rows(&table)
        .iter()
        .map(|row| {
            let name = first_code_word(&row[0]).expect("a prompt name in backquotes");
            let arguments = row[1]
                .split(", ")
                .filter_map(|part| {
                    let word = code_words(part).into_iter().next()?;
                    Some((word, part.starts_with("**")))
                })
                .collect();
            (name, arguments, row[2].clone())
        })
        .collect();
    let declared: Vec<PromptRow> = outreach_runtime::prompts::prompts()
        .iter()
        .map(|prompt| {
            let arguments = prompt
                .arguments
                .iter()
                .map(|argument| (argument.name.to_owned(), argument.required()))
                .collect();
            let listed = match prompt.scope {
                outreach_runtime::Scope::Read => "every scope".to_owned(),
                scope => outreach_runtime::Scope::ALL
                    .iter()
                    .filter(|other| **other >= scope)
                    .map(|other| format!("`{other}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            (prompt.name.to_owned(), arguments, listed)
        })
        .collect();
    assert_eq!(documented, declared, "docs/connecting.md's prompts table");
}

/// The confirmations table of docs/connecting.md names the tools that ask first, each once: the
/// registered confirmations, then the priced tools' row.
#[test]
fn the_confirmations_table_names_the_tools_that_ask() {
    let table = connecting_table("| tool | what the message says |");
    let documented: BTreeSet<String> = table_rows(&table)
        .iter()
        .filter_map(|row| first_code_word(&row[0]))
        .collect();
    let registered: BTreeSet<String> = outreach_runtime::confirmations::all()
        .map(|confirmation| format!("service_{}", confirmation.action))
        .collect();
    assert_eq!(
        documented, registered,
        "docs/connecting.md's confirmations table"
    );
    assert!(
        table.contains(&format!(
            "priced tool whose estimate is {} credits or more",
            outreach_runtime::confirmations::CREDITS_THRESHOLD
        )),
        "the table names the threshold"
    );
}
