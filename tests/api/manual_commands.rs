//! Every command the README and the manuals in `docs/` show in a ```` ```sh ```` block is run here,
//! against a real server, as a new user would paste it.
//!
//! The manuals write what a reader must fill in as placeholders (`pk_test_...`, `wsp_...`,
//! `prs_...`, the address `127.0.0.1:8080`, ...); [`PLACEHOLDERS`] replaces each with a real
//! value of this test's world (a workspace with a sender, a prospect it invited, a list, a
//! sequence and an agent), and the shell variables the manuals use (`$KEY`, `$WS`, `$API`) are
//! set to the same. Each block runs in `bash -euo pipefail`, where `curl` fails on any answer that
//! is not a 2xx; `outreach` is this build's binary on this test's database. A block must exit 0,
//! and no answer in it may carry a JSON-RPC or API `"error"`. The few commands that cannot run
//! here ([`SKIPPED`]: building the project, starting a second server, the MCP Inspector) are
//! named with where they do run; any other command that is not run fails the test.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::helpers::{OWNER_EMAIL, TestApp, spawn_app_with_test_clock};

/// Commands not run here, by how they start, and where they are run instead.
const SKIPPED: &[(&str, &str)] = &[
    (
        "cargo ",
        "building and testing the project itself: `.ci/run` runs these",
    ),
    (
        "outreach serve",
        "starting a server: this test's server is already running (`tests/api/cli.rs` starts the binary's)",
    ),
    (
        "npx @modelcontextprotocol/inspector",
        "the MCP Inspector: `.ci/run`'s mcp-ts sections run it against the server",
    ),
    (
        "outreach admin unipile",
        "it talks to Unipile: `tests/api/unipile.rs` runs it against a fake Unipile",
    ),
    (
        "target/ci-venv/bin/python .ci/",
        "the real-client checks: `.ci/run` runs these in the Python venv and with the Node modules it installs",
    ),
];

/// The files whose ```` ```sh ```` blocks are run.
fn manuals() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("read docs/")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The ```` ```sh ```` blocks of a markdown file, each with the line it starts on.
fn sh_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (number, line) in text.lines().enumerate() {
        match &mut current {
            None if line.trim_start() == "```sh" => current = Some((number + 1, String::new())),
            None => {}
            Some(_) if line.trim_start().starts_with("```") => {
                blocks.extend(current.take());
            }
            Some((_, block)) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    blocks
}

/// A block's commands: its lines with `\` continuations joined (and a single-quoted argument
/// that spans lines kept whole), comments and blank lines left out.
fn commands(block: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut pending = String::new();
    for line in block.lines() {
        let trimmed = line.trim();
        if pending.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head.trim_end());
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        if pending.matches('\'').count() % 2 == 1 {
            // Inside a single-quoted argument: the line break is part of it.
            pending.push('\n');
            continue;
        }
        commands.push(std::mem::take(&mut pending));
    }
    commands
}

/// Why a command is not run here, if it is not: judged on the command after any leading
/// `NAME=value` settings.
fn skipped(command: &str) -> Option<&'static str> {
    let mut program = command;
    while let Some((word, rest)) = program.split_once(' ') {
        let setting = word.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        });
        if !setting {
            break;
        }
        program = rest.trim_start();
    }
    SKIPPED
        .iter()
        .find(|(start, _)| program.starts_with(start))
        .map(|(_, why)| *why)
}

/// What a reader fills in, and the value it takes in this test's world.
struct World {
    base_url: String,
    key: String,
    workspace: String,
    prospect: String,
    sender: String,
    agent: String,
}

/// The placeholders of the manuals, each with its value in `world`.
fn placeholders(world: &World) -> Vec<(&'static str, String)> {
    vec![
        ("http://127.0.0.1:8080", world.base_url.clone()),
        ("pk_test_...", world.key.clone()),
        ("wsp_...", world.workspace.clone()),
        ("prs_...", world.prospect.clone()),
        ("snd_...", world.sender.clone()),
        ("agt_...", world.agent.clone()),
        ("ada@example.com", OWNER_EMAIL.to_owned()),
    ]
}

/// The world the manuals' commands run in: a sender that invited a prospect (so the sandbox's
/// acceptance and reply have someone to come from), a list with the prospect, a sequence and a
/// writer agent over them, 100 credits, and a `send` key.
async fn world(app: &TestApp) -> World {
    let key = crate::sequences::send_key(app).await;
    let sender = app
        .post_json(
            "/senders",
            &app.key,
            json!({"name": "Manual", "timezone": "UTC", "working_hours": crate::outreach::always()}),
        )
        .await;
    let sender = sender.expect(201)["id"].as_str().expect("id").to_owned();
    let url = crate::outreach::quiet_profile("manual");
    let prospect = app
        .post_json(
            "/prospects",
            &app.key,
            json!({"first_name": "Ada", "profile_url": url}),
        )
        .await;
    let prospect = prospect.expect(201)["id"].as_str().expect("id").to_owned();
    let sandbox = outreach_actions::network::Sandbox::new(
        app.db.clone(),
        app.clock.clone(),
        outreach_actions::network::DEFAULT_SANDBOX_SEED,
    );
    let to = outreach_actions::network::Outbound {
        account: outreach_actions::network::Account {
            workspace_id: &app.workspace_id,
            sender_id: &sender,
        },
        profile_url: &url,
        prospect_id: Some(&prospect),
        intent: "int_manualInvite0001",
    };
    outreach_actions::network::NetworkProvider::invite(&sandbox, to, Some("Hello Ada"))
        .await
        .expect("the invitation the manuals accept");
    let list = app
        .post_json("/lists", &app.key, json!({"name": "Manual list"}))
        .await;
    let list = list.expect(201)["id"].as_str().expect("id").to_owned();
    app.post_json(
        &format!("/lists/{list}/prospects"),
        &app.key,
        json!({"prospect_ids": [prospect]}),
    )
    .await
    .expect(200);
    let sequence = app
        .post_json(
            "/sequences",
            &app.key,
            json!({"name": "Manual sequence", "sender_ids": [sender], "steps": [
                {"type": "connection_request", "note": "Hi {{first_name}}, glad to connect."}]}),
        )
        .await;
    let sequence = sequence.expect(201)["id"].as_str().expect("id").to_owned();
    let agent = app
        .post_json(
            "/agents",
            &app.key,
            json!({"name": "Writer", "kind": "writer", "list_id": list, "sequence_id": sequence,
                   "max_prospects_per_run": 1}),
        )
        .await;
    let agent = agent.expect(201)["id"].as_str().expect("id").to_owned();
    app.grant_credits(100).await;
    World {
        base_url: app.base_url.clone(),
        key,
        workspace: app.workspace_id.clone(),
        prospect,
        sender,
        agent,
    }
}

/// The shell a block runs in: strict, with `curl` failing on any answer that is not a 2xx.
const PRELUDE: &str = "set -euo pipefail\n\
    curl() { command curl --fail-with-body --silent --show-error \"$@\"; }\n";

#[tokio::test]
async fn every_command_the_manuals_show_runs_against_a_real_server() {
    let app = spawn_app_with_test_clock().await;
    let world = world(&app).await;
    let replacements = placeholders(&world);
    let dir = tempfile::tempdir().expect("a working directory");
    let binary = Path::new(env!("CARGO_BIN_EXE_outreach"));
    let path = format!(
        "{}:{}",
        binary.parent().expect("the binary's directory").display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let mut ran = 0;
    let mut failures = Vec::new();
    for file in manuals() {
        let text = std::fs::read_to_string(&file).expect("read a manual");
        let shown = file
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or(&file)
            .display()
            .to_string();
        for (line, block) in sh_blocks(&text) {
            let mut script = String::from(PRELUDE);
            let mut runs = 0;
            for command in commands(&block) {
                if skipped(&command).is_some() {
                    continue;
                }
                let mut command = command;
                for (placeholder, value) in &replacements {
                    command = command.replace(placeholder, value);
                }
                // A server started in the background by the block is this test's server.
                script.push_str(&command);
                script.push('\n');
                runs += 1;
            }
            if runs == 0 {
                continue;
            }
            ran += runs;
            let output = tokio::process::Command::new("bash")
                .arg("-c")
                .arg(&script)
                .current_dir(dir.path())
                .env("PATH", &path)
                .env("DATABASE_URL", app.database_url())
                .env("OUTREACH_ENV", "development")
                .env("KEY", &world.key)
                .env("WS", &world.workspace)
                .env("API", format!("{}/api/v1", world.base_url))
                .output()
                .await
                .expect("run bash");
            let stdout = String::from_utf8_lossy(&output.stdout);
            let stderr = String::from_utf8_lossy(&output.stderr);
            let error_answer = stdout.contains("\"error\":") || stdout.contains("\"isError\":true");
            if !output.status.success() || error_answer {
                failures.push(format!(
                    "{shown}:{line}: the block failed ({}):\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
                    output.status
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        ran >= 15,
        "only {ran} commands ran: is the reader finding the manuals' blocks?"
    );
}

#[test]
fn the_reader_joins_continued_lines_and_leaves_comments_out() {
    let block = "# a comment\ncurl -s a \\\n  -H b\n\n# {\"out\": 1}\noutreach admin x\n\
                 curl -d '{\"a\": 1,\n  \"b\": 2}'\n";
    assert_eq!(
        commands(block),
        [
            "curl -s a -H b",
            "outreach admin x",
            "curl -d '{\"a\": 1,\n\"b\": 2}'"
        ],
        "three commands"
    );
    let text = "text\n```sh\ncargo test\n```\n```text\nnot run\n```\n";
    assert_eq!(sh_blocks(text), [(2, "cargo test\n".to_owned())]);
    assert!(skipped("TEST_DATABASE_URL=postgres://x cargo test --workspace").is_some());
    assert!(skipped("curl -s http://127.0.0.1:8080/api/v1/workspace").is_none());
    assert!(skipped("BODY='{}'").is_none());
}
