//! Server configuration: where to listen, what the public address is, which database.
//!
//! The CLI fills it from flags and environment variables; tests build it directly. The base URL is
//! the one address the service knows itself by: it names the settings page in scope errors, the
//! OAuth resource, and the hosts the MCP endpoint accepts.
//!
//! The HTTP limits ([`HttpLimits`], [`RateLimit`]) have defaults that a small self-hosted
//! deployment can keep; every one of them is a flag and a variable of `outreach serve`.
//!
//! The optional drafting model ([`DraftingModel`]) is only an endpoint here: the runtime holds
//! where to ask and with which key, and the actions crate decides what to ask. It is read from
//! the conventional `LLM_*` variables and checked whole at start, so a half-configured model
//! refuses the start rather than silently drafting nothing.

use std::time::Duration;

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
    /// The network outreach goes through (`OUTREACH_NETWORK`): `None` for the default (the
    /// sandbox outside production, nothing in production). The actions crate reads it.
    pub network: Option<String>,
    /// The sandbox network's seed (`OUTREACH_SANDBOX_SEED`).
    pub sandbox_seed: u64,
    /// Whether the MCP face answers `initialize`, `ping`, `tools/list` and `tools/call` itself,
    /// in front of rmcp's per-request service (`mcp/fast.rs`). On by default; the tests turn it
    /// off to check that both paths give the same answers.
    pub mcp_fast_path: bool,
    /// The chat-completions endpoint that drafts `writer` texts (`LLM_*`); `None` (the default)
    /// renders the templates only.
    pub drafting_model: Option<DraftingModel>,
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

/// The sandbox network's seed when none is configured.
pub const DEFAULT_SANDBOX_SEED: u64 = 42;

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

/// An OpenAI-compatible chat-completions endpoint: `POST {base_url}/chat/completions` with
/// `Authorization: Bearer {api_key}`.
#[derive(Clone, PartialEq, Eq)]
pub struct DraftingModel {
    /// Without a trailing slash, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: String,
    pub model: String,
    /// For the whole request, connecting included; past it the template is used.
    pub timeout: Duration,
}

/// How long a draft may take when `LLM_TIMEOUT_MS` is not set.
pub const DEFAULT_DRAFTING_TIMEOUT: Duration = Duration::from_secs(10);

/// The `LLM_TIMEOUT_MS` values accepted: long enough for a round trip, short enough that a stuck
/// endpoint cannot hold an agent run for minutes per draft.
pub const DRAFTING_TIMEOUT_MS: std::ops::RangeInclusive<u64> = 100..=120_000;

impl DraftingModel {
    /// The model the `LLM_BASE_URL`, `LLM_API_KEY`, `LLM_MODEL` and `LLM_TIMEOUT_MS` values
    /// describe: `None` when none of the first three is set, an error naming the variable when
    /// only some are, or when one is unusable. An empty value counts as unset, as `LLM_API_KEY=`
    /// in an env file usually means "not configured" rather than "an empty key".
    pub fn from_settings(
        base_url: Option<&str>,
        api_key: Option<&str>,
        model: Option<&str>,
        timeout_ms: Option<&str>,
    ) -> Result<Option<Self>, String> {
        // Checked even with no model, so a typo is found before the model is switched on.
        let timeout = drafting_timeout(timeout_ms)?;
        let values = (set(base_url), set(api_key), set(model));
        let (Some(base_url), Some(api_key), Some(model)) = values else {
            let missing: Vec<&str> = [
                ("LLM_BASE_URL", values.0.is_none()),
                ("LLM_API_KEY", values.1.is_none()),
                ("LLM_MODEL", values.2.is_none()),
            ]
            .into_iter()
            .filter_map(|(name, unset)| unset.then_some(name))
            .collect();
            if missing.len() == 3 {
                return Ok(None);
            }
            let (verb, pronoun) = if missing.len() == 1 {
                ("is", "it")
            } else {
                ("are", "them")
            };
            return Err(format!(
                "the drafting model needs LLM_BASE_URL, LLM_API_KEY and LLM_MODEL together; {} {verb} not set (set {pronoun} too, or unset the others to draft from templates only)",
                missing.join(" and "),
            ));
        };
        Ok(Some(Self {
            base_url: drafting_base_url(base_url)?,
            api_key: api_key.to_owned(),
            model: model.to_owned(),
            timeout,
        }))
    }

    /// Where drafts are asked for.
    pub fn chat_completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }
}

/// The key is a credential for a paid third-party service: logs and panics show it masked.
impl std::fmt::Debug for DraftingModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DraftingModel")
            .field("base_url", &self.base_url)
            .field("api_key", &"***")
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .finish()
    }
}

fn drafting_base_url(text: &str) -> Result<String, String> {
    let refused = |why: &str| {
        format!(
            "LLM_BASE_URL must be an http:// or https:// URL such as https://api.openai.com/v1 (the part before /chat/completions); `{text}` {why}"
        )
    };
    let url = url::Url::parse(text).map_err(|error| refused(&format!("is not a URL ({error})")))?;
    // The key travels as a bearer header; one in the URL would also be sent as basic auth, and
    // would show wherever the URL is printed (this message does not echo it).
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "LLM_BASE_URL must not hold a user name or password; put the key in LLM_API_KEY"
                .to_owned(),
        );
    }
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refused(&format!("has the scheme `{}`", url.scheme())));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(refused("has no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(refused(
            "has a query or fragment, which /chat/completions cannot follow",
        ));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// A variable's value, with blank counted as unset.
fn set(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|value| !value.is_empty())
}

fn drafting_timeout(value: Option<&str>) -> Result<Duration, String> {
    let Some(text) = set(value) else {
        return Ok(DEFAULT_DRAFTING_TIMEOUT);
    };
    text.parse::<u64>()
        .ok()
        .filter(|ms| DRAFTING_TIMEOUT_MS.contains(ms))
        .map(Duration::from_millis)
        .ok_or_else(|| {
            format!(
                "LLM_TIMEOUT_MS must be a whole number of milliseconds from {} to {}; got `{text}`",
                DRAFTING_TIMEOUT_MS.start(),
                DRAFTING_TIMEOUT_MS.end()
            )
        })
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
            network: None,
            sandbox_seed: DEFAULT_SANDBOX_SEED,
            mcp_fast_path: true,
            drafting_model: None,
        }
    }

    pub fn settings_api_url(&self) -> String {
        format!("{}/settings/api", self.base_url)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(
        base_url: Option<&str>,
        api_key: Option<&str>,
        model: Option<&str>,
        timeout_ms: Option<&str>,
    ) -> Result<Option<DraftingModel>, String> {
        DraftingModel::from_settings(base_url, api_key, model, timeout_ms)
    }

    const URL: Option<&str> = Some("https://llm.example/v1/");
    const KEY: Option<&str> = Some("sk-secret-key");
    const MODEL: Option<&str> = Some("small-model");

    #[test]
    fn no_drafting_model_is_configured_by_default() {
        assert_eq!(parse(None, None, None, None), Ok(None));
        assert_eq!(parse(Some(""), Some(" "), None, None), Ok(None));
        assert!(
            Config::new("http://x", Environment::default())
                .drafting_model
                .is_none()
        );
    }

    #[test]
    fn a_complete_drafting_model_is_read_with_the_default_timeout() {
        let model = parse(URL, KEY, MODEL, None).unwrap().unwrap();
        assert_eq!(model.base_url, "https://llm.example/v1");
        assert_eq!(model.api_key, "sk-secret-key");
        assert_eq!(model.model, "small-model");
        assert_eq!(model.timeout, DEFAULT_DRAFTING_TIMEOUT);
        assert_eq!(
            model.chat_completions_url(),
            "https://llm.example/v1/chat/completions"
        );
        let quick = parse(Some("http://127.0.0.1:9000"), KEY, MODEL, Some("250"))
            .unwrap()
            .unwrap();
        assert_eq!(quick.timeout, Duration::from_millis(250));
    }

    #[test]
    fn a_partial_drafting_model_is_refused_naming_what_is_missing() {
        let error = parse(URL, None, MODEL, None).unwrap_err();
        assert!(error.contains("LLM_API_KEY is not set"), "{error}");
        let error = parse(URL, KEY, Some("  "), None).unwrap_err();
        assert!(error.contains("LLM_MODEL is not set"), "{error}");
        let error = parse(None, KEY, None, None).unwrap_err();
        assert!(
            error.contains("LLM_BASE_URL and LLM_MODEL are not set"),
            "{error}"
        );
    }

    #[test]
    fn a_drafting_base_url_that_is_not_http_is_refused() {
        for url in [
            "api.example/v1",
            "ftp://llm.example/v1",
            "file:///tmp/llm",
            "https://llm.example/v1?key=1",
        ] {
            let error = parse(Some(url), KEY, MODEL, None).unwrap_err();
            assert!(error.starts_with("LLM_BASE_URL must be"), "{url}: {error}");
            assert!(error.contains(url), "{url}: {error}");
        }
        let error = parse(
            Some("https://user:sk-secret@llm.example/v1"),
            KEY,
            MODEL,
            None,
        )
        .unwrap_err();
        assert!(error.starts_with("LLM_BASE_URL must not hold a user name or password"));
        assert!(!error.contains("sk-secret"), "{error}");
    }

    #[test]
    fn a_drafting_timeout_outside_its_range_is_refused() {
        for timeout in ["99", "120001", "ten", "-5", "1.5"] {
            let error = parse(URL, KEY, MODEL, Some(timeout)).unwrap_err();
            assert!(
                error.starts_with("LLM_TIMEOUT_MS must be") && error.contains(timeout),
                "{timeout}: {error}"
            );
        }
        assert!(parse(URL, KEY, MODEL, Some("100")).is_ok());
        assert!(parse(URL, KEY, MODEL, Some("120000")).is_ok());
        // A typo is reported before the model is switched on.
        assert!(parse(None, None, None, Some("soon")).is_err());
    }

    #[test]
    fn drafting_model_debug_hides_the_api_key() {
        let model = parse(URL, KEY, MODEL, None).unwrap().unwrap();
        let shown = format!("{model:?}");
        assert!(!shown.contains("sk-secret-key"), "{shown}");
        assert!(shown.contains(r#"api_key: "***""#), "{shown}");
        let mut config = Config::new("http://x", Environment::default());
        config.drafting_model = Some(model);
        assert!(!format!("{config:?}").contains("sk-secret-key"));
    }
}
