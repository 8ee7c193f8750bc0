//! `outreach`: serve the API, migrate the database, administer workspaces from scripts.
//!
//! The command shapes here are a contract external scripts depend on (issue 2): `serve`,
//! `migrate` and `admin ...` with `--json` for one JSON object on stdout. Errors go to stderr (and
//! as `{"error": "..."}` on stdout with `--json`) with exit status 1.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use outreach_actions::drafting::DraftingModel;
use outreach_actions::network::{NetworkSettings, UnipileSettings};
use outreach_actions::webhooks::seal::WebhookSettings;
use outreach_runtime::clock::parse_rfc3339;
use outreach_runtime::config::{HttpLimits, JobsConfig, RateLimit};
use outreach_runtime::credits::PriceTable;
use outreach_runtime::registry::Registry;
use outreach_runtime::server::{build_state, serve, shutdown_signal, work};
use outreach_runtime::{Clock, Config, Db, Environment, Role, Scope, admin, credits};
use serde_json::{Value, json};
use tokio::net::TcpListener;

// The actions register themselves; this keeps the linker from dropping them.
use outreach_actions as _;

mod log_fields;

/// jemalloc rather than the system allocator: glibc keeps what a large request (an import of
/// 100,000 rows) freed in per-thread arenas, so the server's memory stayed at its peak. jemalloc
/// is built with a background thread that hands freed pages back to the system about a second
/// after they were freed (`.cargo/config.toml`), even while the server is idle; mimalloc, used
/// before, purged only when the thread that freed them allocated again, so an idle server kept
/// what its start and its last large request had used (bench/RESULTS.md has the figures). It runs
/// one arena for every thread, so what one thread frees the next one reuses (measured on two
/// cores; on a larger machine `_RJEM_MALLOC_CONF=narenas:N` in the environment overrides it).
/// Off (the `jemalloc` feature) only to profile the heap with tools that watch the system
/// allocator.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "outreach",
    version,
    about = "Prospecting and outreach workspace: REST API and MCP server"
)]
struct Cli {
    /// `text` (default) or `json`: one JSON object per log line, on stderr.
    #[arg(
        long,
        global = true,
        env = "OUTREACH_LOG_FORMAT",
        default_value = "text",
        value_parser = ["text", "json"]
    )]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Migrate the database, then serve REST (/api/v1) and MCP (/api/mcp), and run the job
    /// worker (unless --no-worker).
    Serve(ServeArgs),
    /// Migrate the database, then run only the job worker (no HTTP), until SIGTERM or Ctrl-C.
    Worker(WorkerArgs),
    /// Apply pending database migrations and exit.
    Migrate(DatabaseArgs),
    /// Administer workspaces, members, keys and terms (scriptable).
    Admin(AdminArgs),
}

#[derive(Args)]
struct DatabaseArgs {
    /// `sqlite://file.db` (default, created if missing) or `postgres://...`.
    #[arg(long, env = "DATABASE_URL", default_value = "sqlite://outreach.db")]
    database_url: String,
}

#[derive(Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "OUTREACH_ADDR", default_value = "127.0.0.1:8080")]
    addr: String,
    /// Public base URL (default `http://<addr>`); names the settings page and the MCP resource.
    #[arg(long, env = "OUTREACH_BASE_URL")]
    base_url: Option<String>,
    /// Development and testing only (refused when OUTREACH_ENV=production): let OAuth client
    /// metadata documents live on loopback addresses, and over plain http on a loopback host.
    #[arg(long)]
    cimd_allow_loopback: bool,
    /// A PEM root certificate to trust, besides the public ones, when fetching OAuth client
    /// metadata documents (repeatable; for a test https server).
    #[arg(long, value_name = "PEM_FILE")]
    cimd_root_cert: Vec<std::path::PathBuf>,
    /// A reverse proxy's address (repeatable): when the TCP peer is one, the sign-in throttle
    /// counts the right-most X-Forwarded-For address that is not a trusted proxy, and its
    /// connections are not held to --max-connections-per-client. X-Forwarded-For from any other
    /// peer is ignored.
    #[arg(
        long = "trusted-proxy",
        value_name = "IP",
        env = "OUTREACH_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    trusted_proxies: Vec<std::net::IpAddr>,
    /// Seconds a new connection has, from its accept, to send its first request's headers (and
    /// an HTTP/1 keep-alive connection, from the end of a response, to send the next one's)
    /// before it is closed without an answer.
    #[arg(long, env = "OUTREACH_HEADER_TIMEOUT", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    header_timeout: u64,
    /// Seconds a request body has to arrive in full once it is read; 400 `invalid_request` after.
    #[arg(long, env = "OUTREACH_BODY_TIMEOUT", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    body_timeout: u64,
    /// Seconds without a byte either way after which a connection is closed.
    #[arg(long, env = "OUTREACH_IDLE_TIMEOUT", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout: u64,
    /// Connections served at once. Past it a new connection takes the slot of the one waiting
    /// longest with no request in flight; when every slot has a request in flight it is refused
    /// at once with 429 `rate_limited`.
    #[arg(long, env = "OUTREACH_MAX_CONNECTIONS", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections: u64,
    /// Connections one client address may hold at once (an IPv6 client counts by its /64);
    /// past it a new one is refused at once with 429 `rate_limited`. Trusted proxies are exempt.
    #[arg(long, env = "OUTREACH_MAX_CONNECTIONS_PER_CLIENT", default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..))]
    max_connections_per_client: u64,
    /// Requests a second per credential, per instance (0 turns the limit off).
    #[arg(long, env = "OUTREACH_RATE_LIMIT", default_value_t = 100)]
    rate_limit: u32,
    /// Requests a credential may make at once before the rate applies.
    #[arg(long, env = "OUTREACH_RATE_LIMIT_BURST", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    rate_limit_burst: u32,
    /// When set, `/metrics` needs `Authorization: Bearer <token>`; otherwise it is public.
    #[arg(long, env = "OUTREACH_METRICS_TOKEN", hide_env_values = true)]
    metrics_token: Option<String>,
    /// Run no job worker in this instance (jobs are still enqueued; `outreach worker` instances
    /// on the same database run them).
    #[arg(long)]
    no_worker: bool,
    #[command(flatten)]
    jobs: JobsArgs,
    #[command(flatten)]
    network: NetworkArgs,
    #[command(flatten)]
    database: DatabaseArgs,
}

/// The clock, the network and the webhook key: what `serve` and `worker` must agree on.
#[derive(Args)]
struct NetworkArgs {
    /// Testing and demos only (refused when OUTREACH_ENV=production): the clock adds an offset
    /// stored in the database, which `advance_clock` moves for every instance on it.
    #[arg(long)]
    test_clock: bool,
    /// The network outreach goes through: `unipile` (with the UNIPILE_* settings), or `sandbox`
    /// (the default outside production; refused in production, where without `unipile` sends fail
    /// with network_not_configured).
    #[arg(long, env = "OUTREACH_NETWORK")]
    network: Option<String>,
    #[command(flatten)]
    unipile: UnipileArgs,
    /// The sandbox network's seed: with a profile URL it decides who accepts and replies, and when.
    #[arg(long, env = "OUTREACH_SANDBOX_SEED", default_value_t = outreach_actions::network::DEFAULT_SANDBOX_SEED)]
    sandbox_seed: u64,
    /// The key that seals webhook signing secrets at rest: the base64 of 32 random bytes
    /// (`openssl rand -base64 32`). Without it they are stored unsealed. Every instance on one
    /// database needs the same key, and it must be kept: secrets sealed under a lost key cannot
    /// sign (rotate them).
    #[arg(long, env = "OUTREACH_WEBHOOK_KEY", hide_env_values = true)]
    webhook_key: Option<String>,
}

/// How to reach Unipile (`OUTREACH_NETWORK=unipile`; docs/unipile.md).
#[derive(Args)]
struct UnipileArgs {
    /// The Unipile tenant's address, `https://{sub}.unipile.com:{port}`.
    #[arg(long, env = "UNIPILE_DSN")]
    unipile_dsn: Option<String>,
    /// The Unipile API key (sent as X-API-KEY).
    #[arg(long, env = "UNIPILE_API_KEY", hide_env_values = true)]
    unipile_api_key: Option<String>,
    /// The secret Unipile's webhooks carry in the `Unipile-Auth` header (at least 16 characters;
    /// `outreach admin unipile register-webhooks` sets it on them).
    #[arg(long, env = "UNIPILE_WEBHOOK_SECRET", hide_env_values = true)]
    unipile_webhook_secret: Option<String>,
    /// Seconds each call to Unipile may take.
    #[arg(long, env = "UNIPILE_TIMEOUT_SECS", default_value_t = outreach_actions::provider::DEFAULT_UNIPILE_TIMEOUT_SECS, value_parser = clap::value_parser!(u64).range(1..))]
    unipile_timeout_secs: u64,
}

impl UnipileArgs {
    /// The settings, or `None` when none of them is given; a sentence naming what is missing.
    fn settings(&self, required: bool) -> anyhow::Result<Option<UnipileSettings>> {
        let any = self.unipile_dsn.is_some()
            || self.unipile_api_key.is_some()
            || self.unipile_webhook_secret.is_some();
        if !any && !required {
            return Ok(None);
        }
        UnipileSettings::from_values(
            self.unipile_dsn.as_deref(),
            self.unipile_api_key.as_deref(),
            self.unipile_webhook_secret.as_deref(),
            self.unipile_timeout_secs,
        )
        .map(Some)
        .map_err(anyhow::Error::msg)
    }
}

impl NetworkArgs {
    /// The network settings these flags give, checked against the environment.
    fn settings(&self, environment: &Environment) -> anyhow::Result<NetworkSettings> {
        let wants_unipile =
            self.network.as_deref().map(str::trim) == Some(outreach_actions::provider::UNIPILE);
        let settings = NetworkSettings {
            network: self.network.clone(),
            sandbox_seed: self.sandbox_seed,
            unipile: self.unipile.settings(wants_unipile)?,
        };
        outreach_actions::network::check_network_setting(&settings, environment)
            .map_err(anyhow::Error::msg)?;
        Ok(settings)
    }

    /// The clock these flags ask for, after checking the flags against the environment (the
    /// test clock and the sandbox are refused in production, before anything is written).
    fn clock(&self, environment: &Environment) -> anyhow::Result<Clock> {
        self.settings(environment)?;
        if !self.test_clock {
            return Ok(Clock::default());
        }
        if environment.is_production() {
            anyhow::bail!(
                "--test-clock is for testing and demos; it is refused when OUTREACH_ENV=production, where time is the system's"
            );
        }
        Ok(Clock::shared())
    }

    /// Writes the network choice and the webhook key into `config`; refuses a key that is not
    /// 32 bytes of base64.
    fn apply(&self, config: &mut Config) -> anyhow::Result<()> {
        let settings = self.settings(&config.environment)?;
        config.extensions.insert(settings);
        let webhooks = WebhookSettings::from_key_text(self.webhook_key.as_deref())
            .map_err(anyhow::Error::msg)?;
        if webhooks.secret_key.is_none() && config.environment.is_production() {
            tracing::warn!(
                "OUTREACH_WEBHOOK_KEY is not set: webhook signing secrets are stored unsealed"
            );
        }
        config.extensions.insert(webhooks);
        Ok(())
    }
}

#[derive(Args)]
struct JobsArgs {
    /// Job handlers this instance runs at once.
    #[arg(long, env = "OUTREACH_WORKERS", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    workers: u64,
    /// Milliseconds an idle worker waits before it looks for due jobs again.
    #[arg(long, env = "OUTREACH_JOB_POLL_MS", default_value_t = 200, value_parser = clap::value_parser!(u64).range(10..))]
    job_poll_ms: u64,
}

impl JobsArgs {
    fn config(&self, run_worker: bool) -> JobsConfig {
        JobsConfig {
            workers: if run_worker {
                usize::try_from(self.workers).unwrap_or(usize::MAX)
            } else {
                0
            },
            poll_interval: Duration::from_millis(self.job_poll_ms),
        }
    }
}

#[derive(Args)]
struct WorkerArgs {
    /// The public base URL of the API instances, for handlers that name it.
    #[arg(
        long,
        env = "OUTREACH_BASE_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    base_url: String,
    #[command(flatten)]
    jobs: JobsArgs,
    #[command(flatten)]
    network: NetworkArgs,
    #[command(flatten)]
    database: DatabaseArgs,
}

#[derive(Args)]
struct AdminArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Print one JSON object on stdout.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Subcommand)]
enum AdminCommand {
    /// Workspaces.
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Members of a workspace.
    #[command(subcommand)]
    Member(MemberCommand),
    /// People (accounts that sign in to the web pages).
    #[command(subcommand)]
    Person(PersonCommand),
    /// API keys.
    #[command(subcommand)]
    Key(KeyCommand),
    /// The sending terms.
    #[command(subcommand)]
    Terms(TermsCommand),
    /// Credits.
    #[command(subcommand)]
    Credits(CreditsCommand),
    /// The sandbox network's test helpers (refused when OUTREACH_ENV=production).
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// The Unipile network provider (docs/unipile.md).
    #[command(subcommand)]
    Unipile(UnipileCommand),
}

#[derive(Subcommand)]
enum UnipileCommand {
    /// Register this server's webhook route with Unipile for the `users`, `messaging` and
    /// `account_status` sources, with the secret header; a source already registered for the URL
    /// is left as it is.
    RegisterWebhooks {
        /// The public address of the webhook route:
        /// `https://<your host>/api/v1/network/webhooks/unipile`.
        #[arg(long)]
        url: String,
        #[command(flatten)]
        unipile: UnipileArgs,
    },
}

#[derive(Subcommand)]
enum SandboxCommand {
    /// Make a prospect accept a sender's pending invitation now.
    Accept {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        prospect: String,
        #[arg(long)]
        sender: String,
    },
    /// Withdraw a sender's pending invitation to a prospect now, as its owner would in the
    /// network's own app.
    Withdraw {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        prospect: String,
        #[arg(long)]
        sender: String,
    },
    /// Make a (connected) prospect send a sender a message now.
    Reply {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        prospect: String,
        #[arg(long)]
        sender: String,
        #[arg(long)]
        text: String,
    },
    /// Set a sender account's status on the sandbox network.
    SetSenderStatus {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        sender: String,
        /// connected, needs_reauth, restricted or disconnected.
        #[arg(long)]
        status: String,
    },
    /// List what the sandbox network received (oldest first).
    Log {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        sender: Option<String>,
        #[arg(long)]
        prospect: Option<String>,
        /// profile_view, invitation, withdrawal or message.
        #[arg(long)]
        kind: Option<String>,
        #[arg(long, default_value_t = 25)]
        limit: u32,
        #[arg(long, default_value_t = 0)]
        offset: u64,
    },
    /// Move the shared test clock forward (for servers started with --test-clock); the
    /// server's workers then run what is due at the new time. The `advance_clock` action also
    /// plays the interval out, each step at its own time.
    AdvanceClock {
        #[arg(long)]
        seconds: i64,
    },
}

#[derive(Subcommand)]
enum PersonCommand {
    /// Set a person's sign-in password and sign them out of every browser.
    SetPassword {
        #[arg(long)]
        email: String,
        /// At least 8 characters; a random one is generated and printed once when omitted.
        #[arg(long)]
        password: Option<String>,
    },
}

#[derive(Subcommand)]
enum CreditsCommand {
    /// Add credits to a workspace's balance (recorded in its ledger).
    Grant {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        amount: i64,
        #[arg(long)]
        reason: Option<String>,
    },
}

#[derive(Subcommand)]
enum WorkspaceCommand {
    /// Create a workspace with its first owner.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        owner_email: String,
        /// At least 8 characters; a random one is generated and printed when omitted.
        #[arg(long)]
        owner_password: Option<String>,
    },
}

#[derive(Subcommand)]
enum MemberCommand {
    /// Add a person (created if new) to a workspace.
    Add {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        email: String,
        #[arg(long, value_parser = parse_role)]
        role: Role,
        #[arg(long)]
        password: Option<String>,
    },
    /// Remove a person from a workspace; their keys fail on the next call.
    Remove {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        email: String,
    },
    /// Change a member's role; it caps their keys from the next call.
    SetRole {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        email: String,
        #[arg(long, value_parser = parse_role)]
        role: Role,
    },
}

#[derive(Subcommand)]
enum KeyCommand {
    /// Create an API key; its value is printed once.
    Create {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        email: String,
        #[arg(long)]
        name: String,
        /// Comma-separated: read, write, send (they nest).
        #[arg(long, value_parser = parse_scopes)]
        scopes: Scope,
        /// RFC 3339, e.g. 2027-01-01T00:00:00Z.
        #[arg(long, value_parser = parse_expiry)]
        expires_at: Option<i64>,
        /// For an unattended agent: MCP never asks a person to confirm its calls.
        #[arg(long)]
        unattended: bool,
    },
    /// Revoke an API key; it fails from its next request.
    Revoke {
        #[arg(long)]
        id: String,
    },
    /// Mark a key as an unattended agent's (`true`: MCP never asks a person to confirm its calls)
    /// or as a person's again (`false`); takes effect from its next request.
    SetUnattended {
        #[arg(long)]
        id: String,
        #[arg(long, action = clap::ArgAction::Set)]
        unattended: bool,
    },
}

#[derive(Subcommand)]
enum TermsCommand {
    /// Record that an owner or admin accepted the sending terms.
    Accept {
        #[arg(long)]
        workspace: String,
        #[arg(long)]
        email: String,
    },
}

fn parse_role(text: &str) -> Result<Role, String> {
    Role::parse(text)
        .ok_or_else(|| format!("unknown role `{text}`: expected owner, admin or member"))
}

fn parse_scopes(text: &str) -> Result<Scope, String> {
    Scope::parse_list(text)
}

fn parse_expiry(text: &str) -> Result<i64, String> {
    parse_rfc3339(text)
        .ok_or_else(|| format!("`{text}` is not an RFC 3339 time such as 2027-01-01T00:00:00Z"))
}

fn environment() -> Environment {
    Environment::new(&std::env::var("OUTREACH_ENV").unwrap_or_default())
}

/// What a new workspace starts with: `OUTREACH_STARTER_CREDITS`, 1,000 by default, none in
/// production.
fn starter_credits(environment: &Environment) -> anyhow::Result<i64> {
    let value = std::env::var("OUTREACH_STARTER_CREDITS").ok();
    outreach_runtime::config::starter_credits(environment, value.as_deref())
        .map_err(anyhow::Error::msg)
}

/// The drafting model of `writer` agents: `LLM_BASE_URL`, `LLM_API_KEY` and `LLM_MODEL`
/// (all or none) and `LLM_TIMEOUT_MS`. Read from the environment only, never from flags, so the
/// key does not show in the process list.
fn drafting_model() -> anyhow::Result<Option<DraftingModel>> {
    let var = |name: &str| std::env::var(name).ok();
    let model = DraftingModel::from_settings(
        var("LLM_BASE_URL").as_deref(),
        var("LLM_API_KEY").as_deref(),
        var("LLM_MODEL").as_deref(),
        var("LLM_TIMEOUT_MS").as_deref(),
    )
    .map_err(anyhow::Error::msg)?;
    if let Some(model) = &model {
        tracing::info!(base_url = %model.base_url, model = %model.model, "writer drafts ask a model");
    }
    Ok(model)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let log = init_tracing(cli.log_format == "json");
    let json_output = matches!(&cli.command, Command::Admin(args) if args.json);
    let outcome = run(cli).await;
    // Writes out the lines still buffered, before the last word below and before exiting.
    drop(log);
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            if json_output {
                println!("{}", json!({"error": format!("{error:#}")}));
            }
            #[allow(
                clippy::print_stderr,
                reason = "the CLI reports its failure to the operator"
            )]
            {
                eprintln!("error: {error:#}");
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// rmcp logs a refused request at `warn` with the client's whole input in the line (a 100 KB
/// tool name made one 100 KB line); the access line already records each call with the tool
/// name clipped, so rmcp speaks only of its own errors by default.
const DEFAULT_LOG_FILTER: &str = "info,sqlx=warn,rmcp=error";

/// Lines the log may hold before a request that logs waits for the writer to catch up. Small
/// enough (about 1 MB of JSON lines) to be written out within the second the guard waits for the
/// writer at exit (tracing-appender's fixed wait), large enough to ride out a burst.
const LOG_BUFFERED_LINES: usize = 4_096;

/// The writer thread's buffer: what one `write(2)` takes at most.
const LOG_WRITE_BYTES: usize = 64 * 1024;

/// Installs the log. Lines go to stderr from a thread of their own (`tracing_appender`'s
/// non-blocking writer), so a request's access line costs a hand-off, not a `write(2)` on the
/// request's path, and lines that queue up together are written together. It never drops a
/// line: when the buffer is full, the next line waits. The returned guard writes out what is
/// buffered when it is dropped, at the end of `main`, waiting for the writer up to a second.
fn init_tracing(json: bool) -> tracing_appender::non_blocking::WorkerGuard {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .buffered_lines_limit(LOG_BUFFERED_LINES)
        .thread_name("outreach-log")
        // The thread writes every line waiting for it, then flushes: a burst's lines go out in
        // a few large writes, and a quiet server's line at once.
        .finish(std::io::BufWriter::with_capacity(
            LOG_WRITE_BYTES,
            std::io::stderr(),
        ));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    if json {
        builder.json().init();
    } else if std::io::stderr().is_terminal() {
        builder.with_ansi(true).init();
    } else {
        // The same text as the default field formatter writes without colours, cheaper (see
        // `log_fields`).
        builder
            .with_ansi(false)
            .fmt_fields(log_fields::PlainFields)
            .init();
    }
    guard
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => run_serve(args).await,
        Command::Worker(args) => run_worker(args).await,
        Command::Migrate(args) => {
            let db = Db::connect(&args.database_url).await?;
            db.migrate().await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Admin(args) => run_admin(args).await,
    }
}

async fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    // Listen for SIGTERM/Ctrl-C before anything is printed, so a signal is never missed.
    let shutdown = shutdown_signal();
    let environment = environment();
    if args.cimd_allow_loopback && environment.is_production() {
        anyhow::bail!(
            "--cimd-allow-loopback is for development and testing; it is refused when OUTREACH_ENV=production"
        );
    }
    let mut cimd_roots = Vec::with_capacity(args.cimd_root_cert.len());
    for path in &args.cimd_root_cert {
        let pem = std::fs::read(path)
            .with_context(|| format!("could not read --cimd-root-cert {}", path.display()))?;
        if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
            anyhow::bail!(
                "--cimd-root-cert {} is not a PEM certificate",
                path.display()
            );
        }
        cimd_roots.push(pem);
    }
    // Everything that can refuse a start is checked before anything is written or printed: the
    // actions and their toolsets, the price items and their overrides.
    let registry = Registry::build().map_err(anyhow::Error::msg)?;
    outreach_runtime::toolsets::validate_registered(&registry).map_err(anyhow::Error::msg)?;
    outreach_runtime::prompts::validate_registered(&registry).map_err(anyhow::Error::msg)?;
    outreach_runtime::confirmations::validate_registered(&registry).map_err(anyhow::Error::msg)?;
    outreach_runtime::apps::validate_registered(&registry).map_err(anyhow::Error::msg)?;
    PriceTable::validate_registered().map_err(anyhow::Error::msg)?;
    outreach_runtime::jobs::validate_kinds().map_err(anyhow::Error::msg)?;
    let prices = match std::env::var("OUTREACH_PRICES") {
        Ok(overrides) => PriceTable::default()
            .with_overrides(&overrides)
            .map_err(|error| anyhow::anyhow!("OUTREACH_PRICES: {error}"))?,
        Err(_) => PriceTable::default(),
    };
    let clock = args.network.clock(&environment)?;
    let starter_credits = starter_credits(&environment)?;
    let drafting_model = drafting_model()?;
    let db = Db::connect(&args.database.database_url).await?;
    db.migrate()
        .await
        .context("could not migrate the database")?;
    let listener = TcpListener::bind(&args.addr)
        .await
        .with_context(|| format!("could not listen on {}", args.addr))?;
    let local: SocketAddr = listener.local_addr()?;
    let base_url = args.base_url.unwrap_or_else(|| format!("http://{local}"));
    // The MCP authorization spec requires every authorization server endpoint to be served over
    // HTTPS, and session cookies are only `Secure` on an https base URL.
    if environment.is_production() && !base_url.starts_with("https://") {
        anyhow::bail!(
            "OUTREACH_ENV=production needs an https --base-url (the address clients use, e.g. \
             behind a TLS-terminating proxy); got {base_url}"
        );
    }
    let mut config = Config::new(&base_url, environment.clone());
    config.cimd.allow_loopback = args.cimd_allow_loopback;
    config.cimd.extra_root_certificates = cimd_roots;
    config.trusted_proxies = args.trusted_proxies;
    config.http = HttpLimits {
        header_timeout: Duration::from_secs(args.header_timeout),
        body_timeout: Duration::from_secs(args.body_timeout),
        idle_timeout: Duration::from_secs(args.idle_timeout),
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
        max_connections_per_client: usize::try_from(args.max_connections_per_client)
            .unwrap_or(usize::MAX),
    };
    config.rate_limit = RateLimit {
        per_second: args.rate_limit,
        burst: args.rate_limit_burst,
    };
    config.metrics_token = args.metrics_token.filter(|token| !token.is_empty());
    config.prices = prices;
    config.jobs = args.jobs.config(!args.no_worker);
    if let Some(model) = drafting_model {
        config.extensions.insert(model);
    }
    args.network.apply(&mut config)?;
    // Take the stored offset before the first request, for the lines printed below too.
    clock
        .sync(&db)
        .await
        .map_err(|error| anyhow::anyhow!(error.message))?;
    let state = build_state(db.clone(), clock.clone(), config)?;
    if let Some(first) =
        admin::bootstrap_if_empty(&db, &clock, &environment, starter_credits).await?
    {
        println!("Created a first workspace (shown once; save these now):");
        println!("  workspace: {}", first.workspace_id);
        println!("  owner:     {} / password {}", first.email, first.password);
        println!("  API key:   {} (scopes read,write)", first.key.key);
    }
    println!("REST: {base_url}/api/v1");
    println!("MCP:  {base_url}/api/mcp");
    println!("Docs: {base_url}/api/v1/docs");
    tracing::info!(%local, %base_url, "listening");
    serve(state, listener, shutdown).await?;
    db.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// `outreach worker`: like `serve` it migrates first (migrations take a lock, so instances
/// starting together on one PostgreSQL apply them once), so a worker can be started before,
/// after or without any API instance.
async fn run_worker(args: WorkerArgs) -> anyhow::Result<()> {
    let shutdown = shutdown_signal();
    let environment = environment();
    Registry::build().map_err(anyhow::Error::msg)?;
    outreach_runtime::jobs::validate_kinds().map_err(anyhow::Error::msg)?;
    let clock = args.network.clock(&environment)?;
    let drafting_model = drafting_model()?;
    let db = Db::connect(&args.database.database_url).await?;
    db.migrate()
        .await
        .context("could not migrate the database")?;
    let mut config = Config::new(&args.base_url, environment);
    config.jobs = args.jobs.config(true);
    if let Some(model) = drafting_model {
        config.extensions.insert(model);
    }
    args.network.apply(&mut config)?;
    clock
        .sync(&db)
        .await
        .map_err(|error| anyhow::anyhow!(error.message))?;
    let workers = config.jobs.workers;
    let state = build_state(db.clone(), clock, config)?;
    println!("Worker: running up to {workers} jobs at once");
    tracing::info!(workers, "job worker started");
    work(state, shutdown).await?;
    db.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// The file a `sqlite:` URL names, unless it is an in-memory database.
fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = path.split('?').next().unwrap_or(path);
    (!path.is_empty() && !path.contains(":memory:")).then(|| std::path::PathBuf::from(path))
}

async fn run_admin(args: AdminArgs) -> anyhow::Result<()> {
    // Unipile's commands talk to Unipile, not to the database.
    if let AdminCommand::Unipile(UnipileCommand::RegisterWebhooks { url, unipile }) = &args.command
    {
        let settings = unipile.settings(true)?.context("the Unipile settings")?;
        let parsed =
            url::Url::parse(url).map_err(|error| anyhow::anyhow!("--url `{url}`: {error}"))?;
        if !matches!(parsed.scheme(), "https" | "http") {
            anyhow::bail!(
                "--url must be an http(s) address, such as https://outreach.example.com/api/v1/network/webhooks/unipile"
            );
        }
        let registered =
            outreach_actions::network::unipile::connect::register_webhooks(&settings, url)
                .await
                .map_err(anyhow::Error::msg)?;
        let output = json!({"url": url, "webhooks": registered});
        if args.json {
            println!("{output}");
        } else {
            print_plain(&output);
        }
        return Ok(());
    }
    // Only `workspace create` may start a database. Any other command run from the wrong folder
    // would otherwise make a new, empty `outreach.db` and answer "No workspace with id ...".
    let creates_workspace = matches!(
        args.command,
        AdminCommand::Workspace(WorkspaceCommand::Create { .. })
    );
    if let Some(file) = sqlite_file(&args.database.database_url)
        && !creates_workspace
        && !file.exists()
    {
        let shown = std::path::absolute(&file).unwrap_or(file);
        anyhow::bail!(
            "there is no database at {}: admin commands work on the database `outreach serve` uses. Run them \
             from the folder where `serve` runs, or name its database with --database-url (or DATABASE_URL)",
            shown.display()
        );
    }
    let db = Db::connect(&args.database.database_url).await?;
    db.migrate().await?;
    let clock = Clock::default();
    let output: Value = match args.command {
        AdminCommand::Workspace(WorkspaceCommand::Create {
            name,
            owner_email,
            owner_password,
        }) => {
            let created = admin::create_workspace(
                &db,
                &clock,
                &name,
                &owner_email,
                owner_password.as_deref(),
                starter_credits(&environment())?,
            )
            .await?;
            serde_json::to_value(created)?
        }
        AdminCommand::Member(MemberCommand::Add {
            workspace,
            email,
            role,
            password,
        }) => {
            let added =
                admin::add_member(&db, &clock, &workspace, &email, role, password.as_deref())
                    .await?;
            let mut value = json!({"person_id": added.person_id});
            if let Some(password) = added.password {
                value["password"] = json!(password);
            }
            value
        }
        AdminCommand::Person(PersonCommand::SetPassword { email, password }) => {
            let set = admin::set_password(&db, &email, password.as_deref(), None).await?;
            serde_json::to_value(set)?
        }
        AdminCommand::Member(MemberCommand::Remove { workspace, email }) => {
            admin::remove_member(&db, &workspace, &email).await?;
            json!({"removed": true})
        }
        AdminCommand::Member(MemberCommand::SetRole {
            workspace,
            email,
            role,
        }) => {
            admin::set_role(&db, &workspace, &email, role).await?;
            json!({"role": role})
        }
        AdminCommand::Key(KeyCommand::Create {
            workspace,
            email,
            name,
            scopes,
            expires_at,
            unattended,
        }) => {
            let key = admin::create_key(
                &db,
                &clock,
                &environment(),
                &workspace,
                &email,
                &name,
                scopes,
                expires_at,
            )
            .await?;
            if unattended && let Err(error) = admin::set_unattended(&db, &key.id, true).await {
                // Its secret is never printed: revoke it rather than leave a key no one holds.
                admin::revoke_key(&db, &clock, &key.id).await?;
                return Err(error);
            }
            let mut key = serde_json::to_value(key)?;
            key["unattended"] = json!(unattended);
            key
        }
        AdminCommand::Key(KeyCommand::Revoke { id }) => {
            admin::revoke_key(&db, &clock, &id).await?;
            json!({"revoked": true})
        }
        AdminCommand::Key(KeyCommand::SetUnattended { id, unattended }) => {
            admin::set_unattended(&db, &id, unattended).await?;
            json!({"id": id, "unattended": unattended})
        }
        AdminCommand::Terms(TermsCommand::Accept { workspace, email }) => {
            admin::accept_terms(&db, &clock, &workspace, &email).await?;
            json!({"accepted": true})
        }
        AdminCommand::Credits(CreditsCommand::Grant {
            workspace,
            amount,
            reason,
        }) => {
            let source = credits::Source {
                reason: Some(reason.as_deref().unwrap_or("granted by an operator")),
                ..Default::default()
            };
            let balance = credits::grant(&db, &clock, &workspace, amount, &source)
                .await
                .map_err(|error| anyhow::anyhow!(error.message))?;
            json!({"balance": balance})
        }
        AdminCommand::Sandbox(command) => run_sandbox(&db, command).await?,
        AdminCommand::Unipile(_) => anyhow::bail!("Unipile commands do not use the database"),
    };
    db.close().await;
    if args.json {
        println!("{output}");
    } else {
        print_plain(&output);
    }
    Ok(())
}

/// `outreach admin sandbox ...`: the same functions as the test-helper actions, on a shared test
/// clock (so "now" is what a `--test-clock` server on this database shows).
async fn run_sandbox(db: &Db, command: SandboxCommand) -> anyhow::Result<Value> {
    use outreach_actions::sandbox_helpers::{self as helpers, ListSandboxLogInput};
    use outreach_runtime::paging::PageParams;
    if environment().is_production() {
        anyhow::bail!(
            "the sandbox network's helpers do not exist in production (OUTREACH_ENV=production)"
        );
    }
    let clock = Clock::shared();
    clock.sync(db).await.map_err(api_error)?;
    let now = clock.now_ms();
    let in_tx = async |work: SandboxWrite| -> anyhow::Result<Value> {
        let mut tx = db.begin_write().await?;
        let value = match work {
            SandboxWrite::Accept(workspace, input) => serde_json::to_value(
                helpers::accept_invitation(&mut tx, &clock, &workspace, &input)
                    .await
                    .map_err(api_error)?,
            )?,
            SandboxWrite::Withdraw(workspace, input) => serde_json::to_value(
                helpers::withdraw_invitation(&mut tx, &clock, &workspace, &input)
                    .await
                    .map_err(api_error)?,
            )?,
            SandboxWrite::Reply(workspace, input) => serde_json::to_value(
                helpers::reply(&mut tx, &clock, &workspace, &input)
                    .await
                    .map_err(api_error)?,
            )?,
            SandboxWrite::Status(workspace, input) => serde_json::to_value(
                helpers::set_sender_status(&mut tx, &workspace, &input, now)
                    .await
                    .map_err(api_error)?,
            )?,
        };
        tx.commit().await?;
        Ok(value)
    };
    match command {
        SandboxCommand::Accept {
            workspace,
            prospect,
            sender,
        } => {
            let input = helpers::AcceptInvitationInput {
                prospect_id: prospect,
                sender_id: sender,
            };
            in_tx(SandboxWrite::Accept(workspace, input)).await
        }
        SandboxCommand::Withdraw {
            workspace,
            prospect,
            sender,
        } => {
            let input = helpers::WithdrawInvitationInput {
                prospect_id: prospect,
                sender_id: sender,
            };
            in_tx(SandboxWrite::Withdraw(workspace, input)).await
        }
        SandboxCommand::Reply {
            workspace,
            prospect,
            sender,
            text,
        } => {
            let input = helpers::SandboxReplyInput {
                prospect_id: prospect,
                sender_id: sender,
                text,
            };
            in_tx(SandboxWrite::Reply(workspace, input)).await
        }
        SandboxCommand::SetSenderStatus {
            workspace,
            sender,
            status,
        } => {
            let status = serde_json::from_value(json!(status)).map_err(|_| {
                anyhow::anyhow!("unknown status `{status}`: expected connected, needs_reauth, restricted or disconnected")
            })?;
            let input = helpers::SetSenderStatusInput {
                sender_id: sender,
                status,
            };
            in_tx(SandboxWrite::Status(workspace, input)).await
        }
        SandboxCommand::Log {
            workspace,
            sender,
            prospect,
            kind,
            limit,
            offset,
        } => {
            let kind = kind
                .map(|kind| {
                    serde_json::from_value(json!(kind)).map_err(|_| {
                        anyhow::anyhow!("unknown kind `{kind}`: expected profile_view, invitation, withdrawal or message")
                    })
                })
                .transpose()?;
            let page: PageParams =
                serde_json::from_value(json!({"limit": limit, "offset": offset}))
                    .map_err(|error| anyhow::anyhow!("{error}"))?;
            let input = ListSandboxLogInput {
                sender_id: sender,
                prospect_id: prospect,
                kind,
                page,
            };
            Ok(serde_json::to_value(
                helpers::log_page(db, &workspace, &input)
                    .await
                    .map_err(api_error)?,
            )?)
        }
        SandboxCommand::AdvanceClock { seconds } => {
            let now = outreach_actions::sandbox_clock::advance(db, &clock, seconds)
                .await
                .map_err(api_error)?;
            Ok(json!({"now": outreach_runtime::clock::rfc3339(now)}))
        }
    }
}

/// A write of `admin sandbox`, run in one transaction.
enum SandboxWrite {
    Accept(
        String,
        outreach_actions::sandbox_helpers::AcceptInvitationInput,
    ),
    Withdraw(
        String,
        outreach_actions::sandbox_helpers::WithdrawInvitationInput,
    ),
    Reply(String, outreach_actions::sandbox_helpers::SandboxReplyInput),
    Status(
        String,
        outreach_actions::sandbox_helpers::SetSenderStatusInput,
    ),
}

/// An action's refusal as the CLI reports it: `code: sentence`.
fn api_error(error: outreach_runtime::ApiError) -> anyhow::Error {
    anyhow::Error::new(error)
}

/// `key: value` lines for people at a terminal.
fn print_plain(output: &Value) {
    if let Some(map) = output.as_object() {
        for (key, value) in map {
            match value {
                Value::String(text) => println!("{key}: {text}"),
                other => println!("{key}: {other}"),
            }
        }
    }
}
