//! Server configuration: where to listen, what the public address is, which database.
//!
//! The CLI fills it from flags and environment variables; tests build it directly. The base URL is
//! the one address the service knows itself by: it names the settings page in scope errors, the
//! OAuth resource, and the hosts the MCP endpoint accepts.
//!
//! The HTTP limits ([`HttpLimits`], [`RateLimit`]) have defaults that a small self-hosted
//! deployment can keep; every one of them is a flag and a variable of `outreach serve`.
//!
//! The settings of the domain (the network, the sandbox's seed, the drafting model) are the
//! actions crate's types, carried by type in [`Config::extensions`]: the runtime names no domain.

use std::time::Duration;

use http::Extensions;

use crate::credits::PriceTable;

/// Whether keys are `pk_live_` (production) or `pk_test_` (anything else).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment(String);

impl Environment {
    pub fn new(name: &str) -> Self {
        let name = name.trim();
        Self(if name.is_empty() {
            "development".to_owned()
        } else {
            name.to_owned()
        })
    }

    pub fn is_production(&self) -> bool {
        self.0 == "production"
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    /// The API key prefix this environment issues and accepts.
    pub fn key_prefix(&self) -> &'static str {
        if self.is_production() {
            "pk_live_"
        } else {
            "pk_test_"
        }
    }

    /// The stored environment tag of keys: `live` or `test`.
    pub fn key_tag(&self) -> &'static str {
        if self.is_production() { "live" } else { "test" }
    }
}

impl Default for Environment {
    fn default() -> Self {
        Self::new("development")
    }
}

/// Everything `serve` needs besides the database handle.
#[derive(Debug, Clone)]
pub struct Config {
    /// The public base URL without a trailing slash, e.g. `http://127.0.0.1:8080`.
    pub base_url: String,
    pub environment: Environment,
    /// The largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Unit prices of the actions that spend credits.
    pub prices: PriceTable,
    /// What the OAuth server may fetch when a client identifies itself by a metadata document URL.
    pub cimd: CimdPolicy,
    /// Reverse proxies whose `X-Forwarded-For` names the client the sign-in throttle counts
    /// (the right-most entry that is not one of them), and whose connections are not held to
    /// the per-client connection cap. Empty: the TCP peer is the client, and `X-Forwarded-For`
    /// is ignored.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Timeouts and the connection caps of the listener.
    pub http: HttpLimits,
    /// Requests per credential, per instance.
    pub rate_limit: RateLimit,
    /// When set, `/metrics` needs `Authorization: Bearer <this>`; otherwise it is public.
    pub metrics_token: Option<String>,
    /// The job workers this instance runs.
    pub jobs: JobsConfig,
    /// Whether the MCP face answers `initialize`, `ping`, `tools/list` and `tools/call` itself,
    /// in front of rmcp's per-request service (`mcp/fast.rs`). On by default; the tests turn it
    /// off to check that both paths give the same answers.
    pub mcp_fast_path: bool,
    /// The settings of the crate of actions, by type (its network, the sandbox's seed, its
    /// drafting model): the runtime carries them to every action and job and reads none of them,
    /// so it names no domain. The binary that assembles the service inserts them; an action
    /// reads its own with `config.extensions.get::<T>()`.
    pub extensions: Extensions,
}

/// How many jobs this instance runs at once, and how often it looks for due ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobsConfig {
    /// Handlers running at once; 0 runs no worker (`serve --no-worker`).
    pub workers: usize,
    /// How long an idle worker waits before it looks for due jobs again (real time). An enqueue
    /// in the same process wakes it sooner.
    pub poll_interval: Duration,
}

impl Default for JobsConfig {
    fn default() -> Self {
        Self {
            workers: 4,
            poll_interval: Duration::from_millis(200),
        }
    }
}

/// What a connection may hold, and for how long, before it is closed (see `crate::connections`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLimits {
    /// For a connection's first request, from its accept to the end of the request's head: a
    /// connection that has not sent one by then is closed without an answer. For each later
    /// request on an HTTP/1 keep-alive connection, from the end of the previous response (so an
    /// idle keep-alive connection is closed after this too).
    pub header_timeout: Duration,
    /// From the first read of a request body to its last byte.
    pub body_timeout: Duration,
    /// A connection on which no byte moves either way for this long is closed (after the
    /// response in flight, if any).
    pub idle_timeout: Duration,
    /// Connections served at once. Past it, a new connection takes the slot of the one that
    /// has waited longest with no request in flight (never sent a request, or idle between
    /// two), which is closed; when every slot has a request in flight, the new one is refused
    /// at once with 429 `rate_limited`.
    pub max_connections: usize,
    /// Connections one client address may hold at once (an IPv6 client counts by its /64);
    /// past it a new one is refused at once with 429 `rate_limited`. Connections from
    /// [`Config::trusted_proxies`] are not counted, since every client behind a proxy shares its
    /// address.
    pub max_connections_per_client: usize,
}

/// The default per-client cap: an eighth of the default global cap, so at least eight addresses
/// are needed to fill the server, and still far above what one client needs (a browser opens 6
/// connections to a host, the benchmark drives 32). Many clients behind one address with no
/// trusted proxy in front (a NAT) may need it raised.
pub const DEFAULT_MAX_CONNECTIONS_PER_CLIENT: usize = 128;

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(120),
            max_connections: 1024,
            max_connections_per_client: DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
        }
    }
}

/// A token bucket per credential: `burst` requests at once, refilled at `per_second`.
/// `per_second == 0` turns the limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub per_second: u32,
    pub burst: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            per_second: 100,
            burst: 1000,
        }
    }
}

/// How client ID metadata documents are fetched. The defaults are the production ones: only
/// https, only public addresses, only the bundled web PKI roots. The two relaxations exist so a
/// test (or a developer) can serve a document from their own machine; `serve` refuses them in
/// production.
#[derive(Debug, Clone, Default)]
pub struct CimdPolicy {
    /// Lets a document URL resolve to a loopback address, and accepts `http://` URLs whose host is
    /// a loopback host (`127.0.0.1`, `[::1]`, `localhost`).
    pub allow_loopback: bool,
    /// Extra trusted root certificates (PEM), for a test https server.
    pub extra_root_certificates: Vec<Vec<u8>>,
}

/// What a new workspace starts with outside production, granted in the ledger with the reason
/// `starter`, so that a newcomer's first import is not a 402.
pub const DEFAULT_STARTER_CREDITS: i64 = 1_000;

/// The starter credits of a new workspace: `OUTREACH_STARTER_CREDITS` (`value`) or
/// [`DEFAULT_STARTER_CREDITS`], `0` for none. Production ignores the setting and grants nothing:
/// there, credits are an operator's act (`outreach admin credits grant`).
pub fn starter_credits(environment: &Environment, value: Option<&str>) -> Result<i64, String> {
    if environment.is_production() {
        return Ok(0);
    }
    match value.map(str::trim) {
        None | Some("") => Ok(DEFAULT_STARTER_CREDITS),
        Some(text) => text.parse::<i64>().ok().filter(|amount| *amount >= 0).ok_or_else(|| {
            format!(
                "OUTREACH_STARTER_CREDITS must be a whole number of credits, 0 or more (0 grants none); got `{text}`"
            )
        }),
    }
}

/// Bodies larger than this are refused with 413 `payload_too_large`.
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

impl Config {
    pub fn new(base_url: &str, environment: Environment) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            environment,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            prices: PriceTable::default(),
            cimd: CimdPolicy::default(),
            trusted_proxies: Vec::new(),
            http: HttpLimits::default(),
            rate_limit: RateLimit::default(),
            metrics_token: None,
            jobs: JobsConfig::default(),
            mcp_fast_path: true,
            extensions: Extensions::new(),
        }
    }

    pub fn settings_api_url(&self) -> String {
        format!("{}/settings/api", self.base_url)
    }

    /// Where an owner or admin accepts the sending terms that the `send` scope needs.
    pub fn sending_terms_url(&self) -> String {
        format!("{}/settings/sending-terms", self.base_url)
    }

    pub fn mcp_url(&self) -> String {
        format!("{}/api/mcp", self.base_url)
    }

    /// RFC 9728 protected-resource metadata of the MCP endpoint (served by the OAuth module).
    pub fn resource_metadata_url(&self) -> String {
        format!(
            "{}/.well-known/oauth-protected-resource/api/mcp",
            self.base_url
        )
    }

    /// The `host[:port]` authority of the base URL, for `Host` checks.
    pub fn authority(&self) -> Option<String> {
        let url = url::Url::parse(&self.base_url).ok()?;
        let host = url.host_str()?;
        Some(match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        })
    }

    /// The `scheme://host[:port]` origin of the base URL, for `Origin` checks.
    pub fn origin(&self) -> Option<String> {
        let url = url::Url::parse(&self.base_url).ok()?;
        Some(url.origin().ascii_serialization())
    }
}
