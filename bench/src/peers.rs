//! The `peers` phase: the official MCP SDKs' own stateless servers, measured beside ours.
//!
//! Each peer serves one tool, `service_get_workspace`, that answers the same workspace JSON as
//! structuredContent (and a text block), with no credential and no database: what it costs is
//! the SDK's own HTTP and JSON-RPC path, the part our MCP face should beat by a wide margin even
//! though ours also authenticates against the database on every call. The scripts are in
//! `bench/peers/`; the SDKs are installed on first use into `target/bench-peers` (a Python venv
//! with `mcp`, an npm folder with `@modelcontextprotocol/sdk`), at the versions CI's real-client
//! checks pin, and reused after that.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::service::Running;

/// The Python SDK, as `.ci/requirements.txt` pins it.
const PYTHON_SDK: &str = "mcp==2.3.0";
/// The TypeScript SDK, as `.ci/mcp-ts/package.json` pins it.
const TYPESCRIPT_SDK: &str = "@modelcontextprotocol/sdk@1.32.2";

/// Where the peers' SDKs are installed: `target/bench-peers`.
pub struct Peers {
    dir: PathBuf,
    scripts: PathBuf,
}

/// Which SDK a peer server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    Python,
    /// On node's bare `http` (`peer_ts.mjs`).
    TypeScript,
    /// On the SDK's own Express app, as its documentation shows (`peer_ts_express.mjs`).
    TypeScriptExpress,
}

impl Sdk {
    pub fn title(self) -> &'static str {
        match self {
            Self::Python => "peer: official MCP Python SDK server (stateless, JSON)",
            Self::TypeScript => {
                "peer: official MCP TypeScript SDK server on node http (stateless, JSON)"
            }
            Self::TypeScriptExpress => {
                "peer: official MCP TypeScript SDK server on its Express app (stateless, JSON)"
            }
        }
    }
}

impl Peers {
    /// Installs the SDKs into `target_dir/bench-peers` unless they are there already.
    pub async fn install(root: &Path, target_dir: &Path) -> anyhow::Result<Self> {
        let dir = target_dir.join("bench-peers");
        let peers = Self {
            dir,
            scripts: root.join("bench").join("peers"),
        };
        std::fs::create_dir_all(&peers.dir)?;
        let python = peers.python();
        if !python.is_file() || !peers.dir.join("venv").join(".installed").is_file() {
            println!(
                "» installing the MCP Python SDK ({PYTHON_SDK}) into {}",
                peers.dir.display()
            );
            run(Command::new("python3")
                .args(["-m", "venv", "venv"])
                .current_dir(&peers.dir))
            .await?;
            run(Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", PYTHON_SDK])
                .current_dir(&peers.dir))
            .await?;
            std::fs::write(peers.dir.join("venv").join(".installed"), PYTHON_SDK)?;
        }
        let node = peers.dir.join("ts");
        let installed = node.join(".installed");
        if std::fs::read_to_string(&installed).ok().as_deref() != Some(TYPESCRIPT_SDK) {
            println!(
                "» installing the MCP TypeScript SDK ({TYPESCRIPT_SDK}) into {}",
                node.display()
            );
            std::fs::create_dir_all(&node)?;
            std::fs::write(
                node.join("package.json"),
                r#"{"name": "bench-peers", "private": true, "type": "module"}"#,
            )?;
            run(Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--silent",
                    TYPESCRIPT_SDK,
                ])
                .current_dir(&node))
            .await?;
            std::fs::write(&installed, TYPESCRIPT_SDK)?;
        }
        Ok(peers)
    }

    fn python(&self) -> PathBuf {
        self.dir.join("venv").join("bin").join("python")
    }

    /// Starts one peer serving `body_file`'s JSON; its stderr goes to `log`.
    pub async fn start(&self, sdk: Sdk, body_file: &Path, log: &Path) -> anyhow::Result<Running> {
        let mut command = match sdk {
            Sdk::Python => {
                let mut command = Command::new(self.python());
                command.arg(self.scripts.join("peer_py.py"));
                command
            }
            Sdk::TypeScript | Sdk::TypeScriptExpress => {
                let name = if sdk == Sdk::TypeScript {
                    "peer_ts.mjs"
                } else {
                    "peer_ts_express.mjs"
                };
                // The script is copied beside node_modules so its imports resolve there.
                let script = self.dir.join("ts").join(name);
                std::fs::copy(self.scripts.join(name), &script)?;
                let mut command = Command::new("node");
                command.arg(script);
                command
            }
        };
        command
            .arg(body_file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log)?)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .with_context(|| format!("could not start the {sdk:?} peer"))?;
        let pid = child.id().context("the peer exited at once")?;
        let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .context("the peer did not start within 60 s")??
            .with_context(|| format!("the peer exited before listening; see {}", log.display()))?;
        let addr = line
            .trim()
            .parse()
            .with_context(|| format!("the peer printed `{line}`, not its address"))?;
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Running::new(child, pid, addr))
    }
}

async fn run(command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .stdin(Stdio::null())
        .status()
        .await
        .context("could not run the installer (python3 with venv and npm are needed)")?;
    ensure!(status.success(), "{command:?} failed ({status})");
    Ok(())
}

/// Checks that a peer's tool call answers `expected` as structuredContent.
pub fn check_answer(
    sdk: Sdk,
    status: hyper::StatusCode,
    body: &[u8],
    expected: &[u8],
) -> anyhow::Result<()> {
    let text = String::from_utf8_lossy(body);
    ensure!(
        status.is_success(),
        "the {sdk:?} peer answered {status}: {text}"
    );
    let value: serde_json::Value = serde_json::from_slice(body)
        .with_context(|| format!("the {sdk:?} peer answered {text}"))?;
    let expected: serde_json::Value = serde_json::from_slice(expected)?;
    if value["result"]["structuredContent"] != expected {
        bail!("the {sdk:?} peer's structuredContent differs: {text}");
    }
    Ok(())
}
