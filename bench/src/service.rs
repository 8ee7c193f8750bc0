//! Child processes under test: the release `outreach` server (and its admin CLI) and the baseline.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::load::{self, Target};

/// A running child process that is killed when dropped.
pub struct Running {
    child: Child,
    pub pid: u32,
    pub addr: SocketAddr,
}

impl Running {
    /// A child started elsewhere (the SDK peers), listening at `addr`.
    pub fn new(child: Child, pid: u32, addr: SocketAddr) -> Self {
        Self { child, pid, addr }
    }

    /// Stops the process (SIGKILL: nothing it holds needs a clean shutdown here).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        Ok(())
    }
}

/// Clears the environment variables the service reads, so only the flags given here count.
fn clean(command: &mut Command) {
    for name in [
        "DATABASE_URL",
        "OUTREACH_ADDR",
        "OUTREACH_BASE_URL",
        "OUTREACH_ENV",
        "RUST_LOG",
    ] {
        command.env_remove(name);
    }
}

/// Runs `outreach admin --json --database-url URL ARGS...` and returns its JSON object.
pub async fn admin(bin: &Path, database_url: &str, args: &[&str]) -> anyhow::Result<Value> {
    let mut command = Command::new(bin);
    clean(&mut command);
    command
        .args(["admin", "--json", "--database-url", database_url])
        .args(args);
    let output = command
        .output()
        .await
        .with_context(|| format!("could not run {}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!(
            "`outreach admin {}` failed ({}): {stdout} {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_str(stdout.trim())
        .with_context(|| format!("`outreach admin` printed no JSON: {stdout}"))
}

/// Starts `outreach serve` on a free loopback port; its stderr goes to `log`. Returns once
/// `/healthz` answers 200.
pub async fn start_server(bin: &Path, database_url: &str, log: &Path) -> anyhow::Result<Running> {
    let mut command = Command::new(bin);
    clean(&mut command);
    command
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--database-url",
            database_url,
            // The per-credential limit (100/s by default) would answer 429 to a benchmark's one
            // key; set far above any rate reached here, so the limiter still runs on every
            // request but never refuses one.
            "--rate-limit",
            "100000000",
            "--rate-limit-burst",
            "100000000",
            // The load generator is one client address: the per-client connection cap (128 by
            // default) would refuse a run with more connections than that, so it is the global
            // cap here.
            "--max-connections-per-client",
            "1024",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log)?)
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .with_context(|| format!("could not start {}", bin.display()))?;
    let pid = child.id().context("the server exited at once")?;
    // `serve` prints `REST: http://127.0.0.1:PORT/api/v1` once it listens.
    let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
    let addr = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await? {
            if let Some(rest) = line.strip_prefix("REST: http://") {
                let authority = rest.split('/').next().unwrap_or_default();
                return Ok(authority.parse::<SocketAddr>()?);
            }
        }
        bail!("the server exited before listening; see {}", log.display())
    })
    .await
    .context("the server did not start listening within 60 s")??;
    // Keep draining stdout so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let running = Running { child, pid, addr };
    wait_healthy(&Target::get(addr, "/healthz"), log).await?;
    Ok(running)
}

async fn wait_healthy(target: &Target, log: &Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match load::probe(target).await {
            Ok((status, _)) if status.is_success() => return Ok(()),
            _ if Instant::now() >= deadline => bail!(
                "/healthz did not answer 200 within 30 s; see {}",
                log.display()
            ),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Starts this binary's hidden `baseline` subcommand serving the bytes of `body_file`.
pub async fn start_baseline(body_file: &Path) -> anyhow::Result<Running> {
    let exe: PathBuf = std::env::current_exe()?;
    let mut child = Command::new(exe)
        .arg("baseline")
        .arg("--body-file")
        .arg(body_file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().context("the baseline exited at once")?;
    let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .context("the baseline did not start within 10 s")??
        .context("the baseline exited before listening")?;
    let addr: SocketAddr = line.trim().parse()?;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(Running { child, pid, addr })
}
