//! `outreach-bench`: the benchmark harness of the outreach service, run by hand (see README.md).
//!
//! One run builds the release server (unless `--no-build`), starts it on a fresh SQLite database in
//! a temporary directory, creates a workspace and a key with the admin CLI, seeds prospects, and
//! then drives, one after another and for a fixed time each, at a fixed number of keep-alive
//! connections:
//!
//! 1. the baseline: a bare axum handler returning the same bytes as `GET /api/v1/workspace`;
//! 2. `GET /api/v1/workspace` with the key;
//! 3. MCP `tools/call service_get_workspace` at `/api/mcp`;
//! 4. `GET /api/v1/prospects?limit=200` over the seeded prospects.
//!
//! `--phases peers` measures the official MCP Python and TypeScript SDKs' stateless servers with
//! one equivalent tool (see `peers.rs`), and `--phases pg-rest,pg-mcp` the first two requests on a
//! second server over a fresh PostgreSQL database, all against the same baseline.
//!
//! `--phases issue3` adds the benchmark of issue 3 (see `issue3.rs`): a CSV import against a plain
//! batched insert of the same rows, a scoring run over them, and scoring's writes alone in its
//! storage layouts (`scoring_floor.rs`), `--rounds` times.
//!
//! It prints requests/s, p50/p99 latency, errors, the ratio to the baseline, the CPU time the
//! server spent per request, and the server's peak RSS. It asserts nothing about time: a figure
//! that misses its aim is reported, and the run still completes.

mod baseline;
mod issue3;
mod load;
mod oauth_token;
mod peers;
mod pg;
mod procfs;
mod scheduler;
mod scoring_floor;
mod seed;
mod service;
mod webhooks;

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use bytes::Bytes;
use clap::{Args, Parser, Subcommand, ValueEnum};
use hyper::Method;
use serde_json::{Value, json};

use crate::load::{Outcome, Settings, Target};

#[derive(Parser)]
#[command(
    name = "outreach-bench",
    about = "Benchmark the outreach service against a bare axum baseline (run by hand; see bench/README.md)",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    internal: Option<Internal>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Internal {
    /// Serve the baseline handler (started by the harness itself as a child process).
    #[command(hide = true)]
    Baseline {
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
        #[arg(long)]
        body_file: PathBuf,
    },
}

#[derive(Args)]
struct RunArgs {
    /// Seconds each phase is measured for.
    #[arg(long, default_value_t = 10)]
    duration: u64,
    /// Seconds of load before each phase's measurement starts (not counted).
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Concurrent keep-alive connections, each with one request in flight.
    #[arg(long, default_value_t = 32)]
    connections: usize,
    /// Prospects seeded before the list phase; also the rows the `issue3` phase imports and scores.
    #[arg(long, default_value_t = 100_000)]
    prospects: u64,
    /// Events of the `webhooks` phase's burst (one enrollment each).
    #[arg(long, default_value_t = 2_000)]
    webhook_events: usize,
    /// Do not run `cargo build --release -p outreach` first.
    #[arg(long)]
    no_build: bool,
    /// The server binary (default: the workspace's target/release/outreach).
    #[arg(long)]
    server_bin: Option<PathBuf>,
    /// Keep the temporary directory (database, server log) instead of removing it.
    #[arg(long)]
    keep: bool,
    /// The PostgreSQL server of the `pg-rest` and `pg-mcp` phases (a fresh database is created
    /// beside the one named, and dropped at the end).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    postgres_url: String,
    /// Rounds of the load phases: each round runs every phase, and each figure reported is the
    /// median round's, its ratio taken against the same round's baseline.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Refuse to run while the machine's 1-minute load average stays above this (waiting up to
    /// two minutes for it to fall): a busy machine moves every figure.
    #[arg(long, default_value_t = 2.5)]
    max_load: f64,
    /// Which phases to run, in this order (e.g. `--phases rest` to profile one of them).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "baseline,rest,mcp,mcp-oauth,list"
    )]
    phases: Vec<PhaseKind>,
}

/// The measured phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PhaseKind {
    /// A bare axum handler returning the same JSON as `GET /api/v1/workspace`.
    Baseline,
    /// `GET /api/v1/workspace` with the key.
    Rest,
    /// MCP `tools/call service_get_workspace`.
    Mcp,
    /// The same tool call with an OAuth access token instead of the key.
    McpOauth,
    /// `GET /api/v1/prospects?limit=200` over the seeded prospects.
    List,
    /// The last page of the same listing (`offset` = seeded - 200).
    ListLast,
    /// `GET /api/v1/workspace` on a second server over a fresh PostgreSQL database.
    PgRest,
    /// MCP `tools/call service_get_workspace` on the PostgreSQL server.
    PgMcp,
    /// PostgreSQL's own ceiling for the credential read every request makes: `pgbench` running
    /// that statement, prepared, on the PostgreSQL server's database (see `pg.rs`).
    PgCeiling,
    /// The official MCP Python and TypeScript SDKs' stateless servers with one equivalent tool
    /// (installed into target/bench-peers on first use); our MCP as a multiple of each.
    Peers,
    #[value(skip)]
    PeerPython,
    #[value(skip)]
    PeerTypescript,
    #[value(skip)]
    PeerTypescriptExpress,
    /// Issue 3: a CSV import of `--prospects` rows against a plain batched insert, then scoring
    /// them (see `issue3.rs`). Not a load phase: it runs after the others, on its own databases.
    Issue3,
    /// Issue 11: the scheduler and the sandbox network (see `scheduler.rs`). Not a load phase.
    Scheduler,
    /// Issue 25: webhook deliveries to a loopback receiver (see `webhooks.rs`). Not a load phase.
    Webhooks,
}

impl PhaseKind {
    fn title(self) -> &'static str {
        match self {
            Self::Baseline => "baseline: bare axum, same JSON",
            Self::Rest => "REST GET /api/v1/workspace",
            Self::Mcp => "MCP tools/call service_get_workspace",
            Self::McpOauth => "MCP tools/call service_get_workspace, OAuth token",
            Self::List => "REST GET /api/v1/prospects?limit=200",
            Self::ListLast => "REST GET /api/v1/prospects?limit=200, the last page",
            Self::PgRest => "PostgreSQL: REST GET /api/v1/workspace",
            Self::PgMcp => "PostgreSQL: MCP tools/call service_get_workspace",
            Self::PgCeiling => "PostgreSQL: pgbench, the credential query alone",
            Self::Peers => "peers: the official MCP SDKs' servers",
            Self::PeerPython => peers::Sdk::Python.title(),
            Self::PeerTypescript => peers::Sdk::TypeScript.title(),
            Self::PeerTypescriptExpress => peers::Sdk::TypeScriptExpress.title(),
            Self::Issue3 => "issue 3: CSV import vs batched insert, scoring",
            Self::Scheduler => "issue 11: the scheduler with the sandbox network",
            Self::Webhooks => "issue 25: webhook deliveries to a loopback receiver",
        }
    }
}

fn main() -> ExitCode {
    match start(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // The message and its causes, without the backtrace anyhow adds under RUST_BACKTRACE.
            let _ = writeln!(std::io::stderr(), "error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn start(cli: Cli) -> anyhow::Result<()> {
    match cli.internal {
        Some(Internal::Baseline { addr, body_file }) => {
            // Like the service's `#[tokio::main]`: a multi-thread runtime, one worker per core.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            runtime.block_on(baseline::serve(addr, &body_file))
        }
        None => {
            // The load generator gets one thread, so it takes at most one of the cores it shares
            // with the server under test.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(Box::pin(run(cli.run)))
        }
    }
}

/// The workspace root: this crate's parent directory.
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

fn default_server_bin(root: &Path) -> PathBuf {
    target_dir(root).join("release").join("outreach")
}

fn build_release(root: &Path) -> anyhow::Result<()> {
    println!("» cargo build --release -p outreach");
    let status = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
        .args(["build", "--release", "-p", "outreach"])
        .current_dir(root)
        .status()
        .context("could not run cargo; build the server with `cargo build --release -p outreach` and pass --no-build")?;
    ensure!(
        status.success(),
        "`cargo build --release -p outreach` failed ({status})"
    );
    Ok(())
}

fn shell_line(command: &str, args: &[&str]) -> String {
    std::process::Command::new(command)
        .args(args)
        .output()
        .ok()
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|text| text.trim().to_owned())
        .unwrap_or_default()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

/// A fresh temporary directory for this run's database and logs.
fn temp_dir() -> anyhow::Result<PathBuf> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.subsec_nanos();
    let dir = std::env::temp_dir().join(format!("outreach-bench-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

async fn run(args: RunArgs) -> anyhow::Result<()> {
    ensure!(
        args.duration > 0 && args.connections > 0,
        "--duration and --connections must be positive"
    );
    let root = workspace_root();
    if !args.no_build {
        build_release(&root)?;
    }
    let bin = args
        .server_bin
        .clone()
        .unwrap_or_else(|| default_server_bin(&root));
    ensure!(
        bin.is_file(),
        "no server binary at {}: run `cargo build --release -p outreach` (or pass --server-bin)",
        bin.display()
    );
    let dir = temp_dir()?;
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    println!(
        "outreach-bench {}",
        shell_line("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"])
    );
    println!(
        "machine: {cores} cores ({}), {}",
        cpu_model(),
        shell_line("uname", &["-sr"])
    );
    println!("load average before: {}", load_average());
    wait_for_quiet(args.max_load).await?;
    let load_phases = args.phases.iter().any(|&kind| {
        !matches!(
            kind,
            PhaseKind::Issue3 | PhaseKind::Scheduler | PhaseKind::Webhooks
        )
    });
    let mut result = Ok(());
    if load_phases {
        result = measure(&args, &root, &bin, &dir).await;
    }
    if result.is_ok() && args.phases.contains(&PhaseKind::Issue3) {
        result = issue3::run(
            &bin,
            &dir,
            usize::try_from(args.prospects)?,
            args.rounds,
            load_average,
        )
        .await;
    }
    if result.is_ok() && args.phases.contains(&PhaseKind::Scheduler) {
        result = scheduler::run(&bin, &dir, usize::try_from(args.prospects)?).await;
    }
    if result.is_ok() && args.phases.contains(&PhaseKind::Webhooks) {
        result = webhooks::run(&bin, &dir, args.webhook_events).await;
    }
    if args.keep || result.is_err() {
        println!("» kept {} (database and server.log)", dir.display());
    } else {
        std::fs::remove_dir_all(&dir).ok();
    }
    result
}

/// One measured phase of one round.
struct Phase {
    kind: PhaseKind,
    /// Which round (from 0) it was measured in.
    round: usize,
    outcome: Outcome,
    /// The server's peak RSS (KiB) after the phase.
    server_hwm_kib: u64,
}

/// The phases in the order they run: `peers` stands for its two SDKs, after our own MCP phase
/// (added when the run does not name it, since the peers are reported as its multiples).
fn expand_phases(phases: &[PhaseKind]) -> Vec<PhaseKind> {
    let mut out = Vec::new();
    for &kind in phases {
        if kind == PhaseKind::Peers {
            if !phases.contains(&PhaseKind::Mcp) {
                out.push(PhaseKind::Mcp);
            }
            out.extend([
                PhaseKind::PeerPython,
                PhaseKind::PeerTypescript,
                PhaseKind::PeerTypescriptExpress,
            ]);
        } else {
            out.push(kind);
        }
    }
    out
}

/// `tools/call service_get_workspace` at `path`, with the headers every MCP client sends.
fn mcp_target(addr: SocketAddr, path: &str) -> anyhow::Result<Target> {
    Target {
        method: Method::POST,
        body: Bytes::from(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "service_get_workspace", "arguments": {}}})
            .to_string(),
        ),
        error_markers: vec![b"\"isError\":true", b"\"error\":{"],
        ..Target::get(addr, path)
    }
    .header("content-type", "application/json")?
    .header("accept", "application/json, text/event-stream")?
    .header("mcp-protocol-version", "2025-06-18")
}

/// A workspace and a read+write key made with the admin CLI on `database_url`.
async fn workspace_and_key(bin: &Path, database_url: &str) -> anyhow::Result<(String, String)> {
    let created = service::admin(
        bin,
        database_url,
        &[
            "workspace",
            "create",
            "--name",
            "Bench",
            "--owner-email",
            "bench@example.com",
        ],
    )
    .await?;
    let workspace_id = created["workspace_id"]
        .as_str()
        .context("no workspace_id")?
        .to_owned();
    let key = service::admin(
        bin,
        database_url,
        &[
            "key",
            "create",
            "--workspace",
            &workspace_id,
            "--email",
            "bench@example.com",
            "--name",
            "bench",
            "--scopes",
            "read,write",
        ],
    )
    .await?;
    let key = key["key"].as_str().context("no key")?.to_owned();
    Ok((workspace_id, key))
}

/// The PostgreSQL side of a run: its database, its server and its two requests.
struct PgServer {
    database: pg::FreshDatabase,
    server: service::Running,
    rest: Target,
    mcp: Target,
}

async fn start_pg(args: &RunArgs, bin: &Path, dir: &Path) -> anyhow::Result<PgServer> {
    println!(
        "» PostgreSQL: a fresh database beside {}",
        args.postgres_url
    );
    let database = pg::FreshDatabase::create(&args.postgres_url).await?;
    let (_, key) = workspace_and_key(bin, &database.url).await?;
    let server = service::start_server(bin, &database.url, &dir.join("server-pg.log")).await?;
    println!(
        "  pid {} at http://{} on {}",
        server.pid, server.addr, database.url
    );
    let bearer = format!("Bearer {key}");
    let rest = Target::get(server.addr, "/api/v1/workspace").header("authorization", &bearer)?;
    let mcp = mcp_target(server.addr, "/api/mcp")?.header("authorization", &bearer)?;
    let rest_body = check_rest(&rest).await?;
    check_mcp(&mcp, &rest_body).await?;
    Ok(PgServer {
        database,
        server,
        rest,
        mcp,
    })
}

/// The two SDK peers, started and checked.
struct PeerServers {
    python: service::Running,
    typescript: service::Running,
    express: service::Running,
    python_target: Target,
    typescript_target: Target,
    express_target: Target,
}

async fn start_peers(
    root: &Path,
    dir: &Path,
    body_file: &Path,
    rest_body: &[u8],
) -> anyhow::Result<PeerServers> {
    let peers = peers::Peers::install(root, &target_dir(root)).await?;
    let python = peers
        .start(peers::Sdk::Python, body_file, &dir.join("peer-python.log"))
        .await?;
    let typescript = peers
        .start(
            peers::Sdk::TypeScript,
            body_file,
            &dir.join("peer-typescript.log"),
        )
        .await?;
    let python_target = mcp_target(python.addr, "/mcp")?;
    let express = peers
        .start(
            peers::Sdk::TypeScriptExpress,
            body_file,
            &dir.join("peer-typescript-express.log"),
        )
        .await?;
    let typescript_target = mcp_target(typescript.addr, "/mcp")?;
    // The SDK's Express app checks the Host header against the loopback names.
    let express_target = mcp_target(express.addr, "/mcp")?;
    for (sdk, target) in [
        (peers::Sdk::Python, &python_target),
        (peers::Sdk::TypeScript, &typescript_target),
        (peers::Sdk::TypeScriptExpress, &express_target),
    ] {
        let (status, body) = load::probe(target).await?;
        peers::check_answer(sdk, status, &body, rest_body)?;
        println!(
            "  {sdk:?} SDK peer at http://{}: the same structuredContent",
            target.addr
        );
    }
    Ok(PeerServers {
        python,
        typescript,
        express,
        python_target,
        typescript_target,
        express_target,
    })
}

async fn measure(args: &RunArgs, root: &Path, bin: &Path, dir: &Path) -> anyhow::Result<()> {
    let settings = Settings {
        connections: args.connections,
        warmup: Duration::from_secs(args.warmup),
        duration: Duration::from_secs(args.duration),
    };
    let db_path = dir.join("bench.db");
    let database_url = format!("sqlite://{}", db_path.display());
    println!("server: {} with {database_url}", bin.display());
    println!(
        "load: {} connections, {} s warm-up + {} s measured per phase, client on one tokio current-thread runtime",
        args.connections, args.warmup, args.duration
    );

    println!("» creating a workspace and a key with the admin CLI");
    let (workspace_id, key) = workspace_and_key(bin, &database_url).await?;

    let listing = args
        .phases
        .iter()
        .any(|kind| matches!(kind, PhaseKind::List | PhaseKind::ListLast));
    if listing {
        println!(
            "» seeding {} prospects straight into SQLite",
            args.prospects
        );
        let took = seed::prospects(&db_path, &workspace_id, args.prospects).await?;
        println!("  done in {:.1} s", took.as_secs_f64());
    }

    println!("» starting the server");
    let server = service::start_server(bin, &database_url, &dir.join("server.log")).await?;
    println!("  pid {} at http://{}", server.pid, server.addr);
    let bearer = format!("Bearer {key}");

    let rest = Target::get(server.addr, "/api/v1/workspace").header("authorization", &bearer)?;
    let mcp = mcp_target(server.addr, "/api/mcp")?.header("authorization", &bearer)?;
    let list =
        Target::get(server.addr, "/api/v1/prospects?limit=200").header("authorization", &bearer)?;
    let last_page = format!(
        "/api/v1/prospects?limit=200&offset={}",
        args.prospects.saturating_sub(200)
    );
    let list_last = Target::get(server.addr, &last_page).header("authorization", &bearer)?;
    let resource = format!("http://{}/api/mcp", server.addr);
    let token = oauth_token::insert(&db_path, &workspace_id, &resource).await?;
    let mcp_oauth = Target {
        headers: Vec::new(),
        ..mcp.clone()
    }
    .header("authorization", &format!("Bearer {token}"))?
    .header("content-type", "application/json")?
    .header("accept", "application/json, text/event-stream")?
    .header("mcp-protocol-version", "2025-06-18")?;

    println!("» checking each request once");
    let rest_body = check_rest(&rest).await?;
    check_mcp(&mcp, &rest_body).await?;
    check_mcp_oauth(&mcp_oauth, &rest_body).await?;
    if listing {
        check_list(&list, args.prospects).await?;
    }

    let body_file = dir.join("workspace.json");
    std::fs::write(&body_file, &rest_body)?;
    let baseline = service::start_baseline(&body_file).await?;
    let baseline_target = Target::get(baseline.addr, "/api/v1/workspace");
    let (status, body) = load::probe(&baseline_target).await?;
    ensure!(
        status.is_success() && body == rest_body,
        "the baseline does not answer the REST body"
    );
    println!(
        "  baseline pid {} at http://{} serves the same {} bytes",
        baseline.pid,
        baseline.addr,
        body.len()
    );

    let order = expand_phases(&args.phases);
    let pg = if order.iter().any(|kind| {
        matches!(
            kind,
            PhaseKind::PgRest | PhaseKind::PgMcp | PhaseKind::PgCeiling
        )
    }) {
        Some(start_pg(args, bin, dir).await?)
    } else {
        None
    };
    let peer_servers = if order.contains(&PhaseKind::PeerPython) {
        Some(start_peers(root, dir, &body_file, &rest_body).await?)
    } else {
        None
    };

    let mut phases = Vec::new();
    for round in 0..args.rounds.max(1) {
        println!(
            "» round {} of {} (load average {})",
            round + 1,
            args.rounds.max(1),
            load_average()
        );
        for &kind in &order {
            if kind == PhaseKind::PgCeiling
                && let Some(pg) = &pg
            {
                println!("» {}", kind.title());
                let tps = pg::credential_query_tps(
                    &pg.database.url,
                    dir,
                    args.connections,
                    args.duration,
                )
                .await?;
                println!("  {tps:.0} statements/s");
                phases.push(Phase {
                    kind,
                    round,
                    outcome: Outcome::rate_only(tps),
                    server_hwm_kib: 0,
                });
                continue;
            }
            let (target, pid) = match (kind, &pg, &peer_servers) {
                (PhaseKind::Baseline, _, _) => (&baseline_target, baseline.pid),
                (PhaseKind::Rest, _, _) => (&rest, server.pid),
                (PhaseKind::Mcp, _, _) => (&mcp, server.pid),
                (PhaseKind::McpOauth, _, _) => (&mcp_oauth, server.pid),
                (PhaseKind::List, _, _) => (&list, server.pid),
                (PhaseKind::ListLast, _, _) => (&list_last, server.pid),
                (PhaseKind::PgRest, Some(pg), _) => (&pg.rest, pg.server.pid),
                (PhaseKind::PgMcp, Some(pg), _) => (&pg.mcp, pg.server.pid),
                (PhaseKind::PeerPython, _, Some(peers)) => (&peers.python_target, peers.python.pid),
                (PhaseKind::PeerTypescript, _, Some(peers)) => {
                    (&peers.typescript_target, peers.typescript.pid)
                }
                (PhaseKind::PeerTypescriptExpress, _, Some(peers)) => {
                    (&peers.express_target, peers.express.pid)
                }
                _ => continue,
            };
            println!("» {}", kind.title());
            let outcome = load::run(target, settings, pid).await?;
            let (server_hwm_kib, _) = procfs::rss_kib(server.pid)?;
            println!(
                "  {:.0} req/s, p50 {}, p99 {}, errors {}",
                outcome.requests_per_second(),
                ms(outcome.percentile(50.0)),
                ms(outcome.percentile(99.0)),
                outcome.errors
            );
            if let Some(error) = &outcome.first_error {
                println!("  first error: {error}");
            }
            phases.push(Phase {
                kind,
                round,
                outcome,
                server_hwm_kib,
            });
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    // The allocator gives freed memory back after a short delay; the end figure is read after it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (hwm_kib, rss_kib) = procfs::rss_kib(server.pid)?;
    let (baseline_hwm_kib, _) = procfs::rss_kib(baseline.pid)?;
    baseline.stop().await?;
    server.stop().await?;
    if let Some(peers) = peer_servers {
        peers.python.stop().await?;
        peers.typescript.stop().await?;
        peers.express.stop().await?;
    }
    if let Some(pg) = pg {
        pg.server.stop().await?;
        pg.database.drop_database().await?;
    }
    println!("load average at the end: {}", load_average());

    println!();
    println!("{}", report(&phases, hwm_kib, rss_kib, baseline_hwm_kib));
    // A load run counts only answers: any refusal or failure fails the run.
    let errors: u64 = phases.iter().map(|phase| phase.outcome.errors).sum();
    ensure!(
        errors == 0,
        "{errors} requests answered an error (non-2xx or a tool error): the figures above count them"
    );
    Ok(())
}

/// `GET /api/v1/workspace` answers 200 with the workspace and the caller; returns the body.
async fn check_rest(rest: &Target) -> anyhow::Result<Bytes> {
    let (status, body) = load::probe(rest).await?;
    ensure!(
        status.is_success(),
        "GET /api/v1/workspace answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    let value: Value = serde_json::from_slice(&body)?;
    ensure!(
        value["workspace"]["id"].is_string(),
        "GET /api/v1/workspace has no workspace.id: {value}"
    );
    println!("  REST workspace: {status}, {} bytes", body.len());
    Ok(body)
}

/// MCP `tools/call` works without `initialize` and its `structuredContent` equals the REST body.
async fn check_mcp(mcp: &Target, rest_body: &[u8]) -> anyhow::Result<()> {
    let (status, body) = load::probe(mcp).await?;
    let text = String::from_utf8_lossy(&body);
    ensure!(
        status.is_success(),
        "MCP tools/call answered {status}: {text}"
    );
    let value: Value =
        serde_json::from_slice(&body).with_context(|| format!("MCP answered no JSON: {text}"))?;
    if value.get("error").is_some() || value["result"]["isError"] == json!(true) {
        bail!("MCP tools/call failed: {value}");
    }
    let rest: Value = serde_json::from_slice(rest_body)?;
    ensure!(
        value["result"]["structuredContent"] == rest,
        "MCP structuredContent differs from the REST body: {value}"
    );
    println!(
        "  MCP tools/call without initialize: {status}, {} bytes, structuredContent = REST body",
        body.len()
    );
    Ok(())
}

/// The tool call with the OAuth token works and is made as that token: the same workspace as the
/// REST body, with the OAuth grant as the caller's credential.
async fn check_mcp_oauth(mcp: &Target, rest_body: &[u8]) -> anyhow::Result<()> {
    let (status, body) = load::probe(mcp).await?;
    let text = String::from_utf8_lossy(&body);
    ensure!(
        status.is_success(),
        "MCP tools/call with the OAuth token answered {status}: {text}"
    );
    let value: Value =
        serde_json::from_slice(&body).with_context(|| format!("MCP answered no JSON: {text}"))?;
    let structured = &value["result"]["structuredContent"];
    let rest: Value = serde_json::from_slice(rest_body)?;
    ensure!(
        value["result"]["isError"] != json!(true)
            && structured["workspace"] == rest["workspace"]
            && structured["caller"]["credential_kind"] == json!("oauth_token"),
        "MCP tools/call with the OAuth token: {value}"
    );
    println!(
        "  MCP tools/call with an OAuth token: {status}, {} bytes, same workspace",
        body.len()
    );
    Ok(())
}

/// The first page of prospects has 200 items out of the seeded total.
async fn check_list(list: &Target, seeded: u64) -> anyhow::Result<()> {
    let (status, body) = load::probe(list).await?;
    ensure!(
        status.is_success(),
        "GET /api/v1/prospects answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    let value: Value = serde_json::from_slice(&body)?;
    let items = value["items"].as_array().map_or(0, Vec::len);
    let expected = usize::try_from(seeded.min(200))?;
    ensure!(
        items == expected,
        "GET /api/v1/prospects?limit=200 gave {items} items, expected {expected}: {value:.300}"
    );
    println!(
        "  REST prospects: {status}, {items} items, {} bytes, total {}",
        body.len(),
        value["total"]
    );
    Ok(())
}

fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1_000.0)
}

fn us_per_request(cpu: Duration, requests: u64) -> String {
    if requests == 0 {
        return "-".to_owned();
    }
    format!("{:.0}", cpu.as_secs_f64() * 1e6 / requests as f64)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The median of `values` (the lower middle one of an even count); `None` when there are none.
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    values.get(values.len().saturating_sub(1) / 2).copied()
}

/// The results as a Markdown table plus the aims, ready for RESULTS.md: each phase's median
/// round, and each aim from the median of the rounds' own figures.
fn report(phases: &[Phase], hwm_kib: u64, rss_kib: u64, baseline_hwm_kib: u64) -> String {
    let rate_in = |kind: PhaseKind, round: usize| {
        phases
            .iter()
            .find(|phase| phase.kind == kind && phase.round == round)
            .map(|phase| phase.outcome.requests_per_second())
    };
    let rounds = phases
        .iter()
        .map(|phase| phase.round + 1)
        .max()
        .unwrap_or(0);
    // A figure of each round, from the rates of that round; its median over the rounds.
    let per_round = |figure: &dyn Fn(usize) -> Option<f64>| -> Vec<f64> {
        (0..rounds).filter_map(figure).collect()
    };
    let ratio = |phase: &Phase| {
        rate_in(PhaseKind::Baseline, phase.round)
            .map(|base| phase.outcome.requests_per_second() / base)
    };
    // Each kind's row is its median round's (by the ratio to that round's baseline).
    let mut kinds: Vec<PhaseKind> = Vec::new();
    for phase in phases {
        if !kinds.contains(&phase.kind) {
            kinds.push(phase.kind);
        }
    }
    let rows: Vec<(&Phase, Vec<f64>)> = kinds
        .iter()
        .filter_map(|&kind| {
            let mut of_kind: Vec<&Phase> =
                phases.iter().filter(|phase| phase.kind == kind).collect();
            // The baseline's ratios are all 1: its own rate orders its rounds.
            let key = |phase: &Phase| match kind {
                PhaseKind::Baseline => phase.outcome.requests_per_second(),
                _ => ratio(phase).unwrap_or(phase.outcome.requests_per_second()),
            };
            of_kind.sort_by(|a, b| key(a).total_cmp(&key(b)));
            let middle = *of_kind.get(of_kind.len().saturating_sub(1) / 2)?;
            let mut by_round: Vec<&Phase> =
                phases.iter().filter(|phase| phase.kind == kind).collect();
            by_round.sort_by_key(|phase| phase.round);
            let ratios = by_round.iter().filter_map(|phase| ratio(phase)).collect();
            Some((middle, ratios))
        })
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{rounds} rounds; each row is its phase's median round, its ratio against that round's baseline\n"
    );
    out.push_str(
        "| phase | req/s | vs baseline | by round | p50 | p99 | max | errors | body bytes | server CPU µs/req | server context switches/req | client CPU µs/req | server peak RSS after |\n",
    );
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (phase, ratios) in &rows {
        let outcome = &phase.outcome;
        let by_round = ratios
            .iter()
            .map(|ratio| format!("{ratio:.2}"))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(
            out,
            "| {} | {:.0} | {} | {by_round} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {:.1} MiB |",
            phase.kind.title(),
            outcome.requests_per_second(),
            ratio(phase).map_or_else(|| "-".to_owned(), |ratio| format!("{ratio:.2}")),
            ms(outcome.percentile(50.0)),
            ms(outcome.percentile(99.0)),
            ms(outcome.percentile(100.0)),
            outcome.errors,
            outcome.mean_body_bytes(),
            us_per_request(outcome.server_cpu, outcome.requests),
            outcome.server_switches as f64 / outcome.requests.max(1) as f64,
            us_per_request(outcome.client_cpu, outcome.requests),
            mib(phase.server_hwm_kib),
        );
    }
    let _ = writeln!(
        out,
        "\nserver peak RSS (VmHWM) {:.1} MiB, RSS at the end {:.1} MiB; baseline peak RSS {:.1} MiB",
        mib(hwm_kib),
        mib(rss_kib),
        mib(baseline_hwm_kib)
    );
    out.push_str("(server CPU and context switches are the baseline process's for the baseline phase)\n\naims (medians over the rounds):\n");
    let mut aim = |ok: bool, text: String| {
        let _ = writeln!(out, "- [{}] {text}", if ok { "met" } else { "MISSED" });
    };
    let quotient = |top: PhaseKind, bottom: PhaseKind| {
        median(per_round(&|round| {
            Some(rate_in(top, round)? / rate_in(bottom, round)?.max(f64::MIN_POSITIVE))
        }))
    };
    for (peer, floor) in [
        (PhaseKind::PeerPython, 25.0),
        (PhaseKind::PeerTypescript, 20.0),
        (PhaseKind::PeerTypescriptExpress, 20.0),
    ] {
        if let Some(multiple) = quotient(PhaseKind::Mcp, peer) {
            aim(
                multiple >= floor,
                format!(
                    "MCP tools/call >= {floor:.0}x the {}: {multiple:.1}x",
                    peer.title().trim_start_matches("peer: ")
                ),
            );
        }
    }
    if let Some(share) = quotient(PhaseKind::Mcp, PhaseKind::Rest) {
        aim(
            share >= 0.8,
            format!("MCP tools/call >= 0.80 of REST: {share:.2}"),
        );
    }
    // PostgreSQL's side: a request cannot beat bare axum and the credential statement taking
    // turns on the same two cores, `1 / (1/axum + 1/pgbench)`.
    let ceiling = |round: usize| {
        let axum = rate_in(PhaseKind::Baseline, round)?;
        let statement = rate_in(PhaseKind::PgCeiling, round)?;
        Some(1.0 / (1.0 / axum + 1.0 / statement))
    };
    if let Some(ceiling_rate) = median(per_round(&ceiling)) {
        for kind in [PhaseKind::PgRest, PhaseKind::PgMcp] {
            if let Some(share) = median(per_round(&|round| {
                Some(rate_in(kind, round)? / ceiling(round)?)
            })) {
                aim(
                    kind != PhaseKind::PgRest || share >= 0.6,
                    format!(
                        "{} against the same round's ceiling 1/(1/axum + 1/pgbench) (median {ceiling_rate:.0} req/s){}: {share:.2}",
                        kind.title(),
                        if kind == PhaseKind::PgRest {
                            " >= 0.60"
                        } else {
                            ""
                        }
                    ),
                );
            }
        }
    }
    for (phase, _) in &rows {
        let (floor, p99_ms) = match phase.kind {
            PhaseKind::Baseline
            | PhaseKind::Issue3
            | PhaseKind::Scheduler
            | PhaseKind::Webhooks
            | PhaseKind::Peers
            | PhaseKind::PeerPython
            | PhaseKind::PeerTypescript
            | PhaseKind::PeerTypescriptExpress
            | PhaseKind::PgCeiling => continue,
            PhaseKind::Rest => (Some(0.40), 5),
            // The MCP aim holds whatever the credential is.
            PhaseKind::Mcp | PhaseKind::McpOauth => (Some(0.30), 10),
            PhaseKind::PgRest | PhaseKind::PgMcp | PhaseKind::List | PhaseKind::ListLast => {
                (None, 10)
            }
        };
        if let Some(floor) = floor
            && let Some(share) = quotient(phase.kind, PhaseKind::Baseline)
        {
            aim(
                share >= floor,
                format!(
                    "{} >= {floor:.2} of baseline: {share:.2}",
                    phase.kind.title()
                ),
            );
        }
        let p99 = phase.outcome.percentile(99.0);
        aim(
            p99 < Duration::from_millis(p99_ms),
            format!("{} p99 < {p99_ms} ms: {}", phase.kind.title(), ms(p99)),
        );
    }
    let rate = |kind: PhaseKind| median(per_round(&|round| rate_in(kind, round)));
    if let Some(first) = rate(PhaseKind::List) {
        aim(
            first >= 1_000.0,
            format!("{} >= 1,000 req/s: {first:.0}", PhaseKind::List.title()),
        );
        if let Some(last) = rate(PhaseKind::ListLast) {
            aim(
                last * 2.0 >= first,
                format!("the last page within 2x of the first: {last:.0} vs {first:.0} req/s"),
            );
        }
    }
    let errors: u64 = phases.iter().map(|phase| phase.outcome.errors).sum();
    aim(
        errors == 0,
        format!("no errors (non-2xx or tool errors): {errors}"),
    );
    aim(
        hwm_kib < 100 * 1024,
        format!("server peak RSS < 100 MiB: {:.1} MiB", mib(hwm_kib)),
    );
    aim(
        rss_kib < 64 * 1024,
        format!("server RSS at the end < 64 MiB: {:.1} MiB", mib(rss_kib)),
    );
    out
}

/// Waits up to two minutes for the 1-minute load average to be at most `max_load`; refuses the
/// run if it stays above.
async fn wait_for_quiet(max_load: f64) -> anyhow::Result<()> {
    let one_minute = || {
        load_average()
            .split_whitespace()
            .next()
            .and_then(|load| load.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    for waited in 0..=24 {
        let load = one_minute();
        if load <= max_load {
            return Ok(());
        }
        if waited == 0 {
            println!("» waiting for the load average ({load:.2}) to fall to {max_load}");
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    bail!(
        "refused: the 1-minute load average is {:.2}, above --max-load {max_load}; other work would move every figure",
        one_minute()
    )
}

/// `/proc/loadavg`'s three load averages: other work on the machine skews every figure.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}
