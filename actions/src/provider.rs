//! Which network this server reaches people through, read from its configuration.
//!
//! Low in the crate because modules on both sides of the network need the answer: a new sender
//! records its provider, `activate_sequence` refuses to start what could never be sent, and the
//! network module builds the adapter. The binary puts [`NetworkSettings`] in the runtime's
//! `Config::extensions` after [`check_network_setting`]; a configuration without it (a test's)
//! is the default: the sandbox with the default seed.

use std::time::Duration;

use outreach_runtime::prelude::{ApiError, Config, Environment, error_codes};

error_codes! {
    pub NETWORK_NOT_CONFIGURED = ("network_not_configured", 503, "production with no network provider configured: nothing is sent");
}

/// `OUTREACH_NETWORK=sandbox`.
pub const SANDBOX: &str = "sandbox";
/// `OUTREACH_NETWORK=unipile`.
pub const UNIPILE: &str = "unipile";

/// The sandbox network's seed when none is configured.
pub const DEFAULT_SANDBOX_SEED: u64 = 42;

/// Each Unipile call's limit when `UNIPILE_TIMEOUT_SECS` is not set.
pub const DEFAULT_UNIPILE_TIMEOUT_SECS: u64 = 20;

/// The network choice as configured (`OUTREACH_NETWORK`, `OUTREACH_SANDBOX_SEED`, `UNIPILE_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkSettings {
    /// The network's name; `None` for the default (the sandbox outside production, nothing in
    /// production).
    pub network: Option<String>,
    /// The sandbox network's seed: with a profile URL it decides who accepts and replies, and when.
    pub sandbox_seed: u64,
    /// How to reach Unipile, when `network` is `unipile`.
    pub unipile: Option<UnipileSettings>,
}

impl Default for NetworkSettings {
    fn default() -> Self {
        Self {
            network: None,
            sandbox_seed: DEFAULT_SANDBOX_SEED,
            unipile: None,
        }
    }
}

/// How this server reaches Unipile.
#[derive(Clone, PartialEq, Eq)]
pub struct UnipileSettings {
    /// `https://{sub}.unipile.com:{port}` (`UNIPILE_DSN`).
    pub dsn: String,
    /// `UNIPILE_API_KEY`, sent as `X-API-KEY`.
    pub api_key: String,
    /// `UNIPILE_WEBHOOK_SECRET`: what our webhook route wants in `Unipile-Auth`.
    pub webhook_secret: String,
    /// Each call's limit (`UNIPILE_TIMEOUT_SECS`).
    pub timeout: Duration,
}

impl std::fmt::Debug for UnipileSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the API key or the webhook secret.
        f.debug_struct("UnipileSettings")
            .field("dsn", &self.dsn)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl UnipileSettings {
    /// The settings from their values, or a sentence naming each one missing or wrong.
    pub fn from_values(
        dsn: Option<&str>,
        api_key: Option<&str>,
        webhook_secret: Option<&str>,
        timeout_secs: u64,
    ) -> Result<Self, String> {
        let given = |value: Option<&str>| {
            value
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let (dsn, api_key, secret) = (given(dsn), given(api_key), given(webhook_secret));
        let missing: Vec<&str> = [
            ("UNIPILE_DSN", dsn.is_none()),
            ("UNIPILE_API_KEY", api_key.is_none()),
            ("UNIPILE_WEBHOOK_SECRET", secret.is_none()),
        ]
        .iter()
        .filter(|(_, missing)| *missing)
        .map(|(name, _)| *name)
        .collect();
        let (Some(dsn), Some(api_key), Some(webhook_secret)) = (dsn, api_key, secret) else {
            return Err(format!(
                "OUTREACH_NETWORK=unipile needs {} set: the tenant's address, its API key, and the secret its webhooks carry",
                missing.join(", ")
            ));
        };
        if webhook_secret.len() < 16 {
            return Err(
                "UNIPILE_WEBHOOK_SECRET must be at least 16 characters: it is all that proves a webhook came from Unipile"
                    .to_owned(),
            );
        }
        let with_scheme = if dsn.contains("://") {
            dsn.clone()
        } else {
            format!("https://{dsn}")
        };
        match url::Url::parse(&with_scheme) {
            Ok(url) if matches!(url.scheme(), "https" | "http") && url.host().is_some() => {}
            _ => {
                return Err(format!(
                    "UNIPILE_DSN `{dsn}` is not an address such as `https://api1.unipile.com:13111`"
                ));
            }
        }
        Ok(Self {
            dsn: with_scheme.trim_end_matches('/').to_owned(),
            api_key,
            webhook_secret,
            timeout: Duration::from_secs(timeout_secs.max(1)),
        })
    }
}

/// The network a configuration reaches people through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    Sandbox,
    Unipile,
}

impl Provider {
    /// As stored on a sender (`senders.provider`) and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sandbox => SANDBOX,
            Self::Unipile => UNIPILE,
        }
    }
}

/// The settings in `config` (the default when the binary put none there).
pub fn settings(config: &Config) -> NetworkSettings {
    config
        .extensions
        .get::<NetworkSettings>()
        .cloned()
        .unwrap_or_default()
}

/// The provider of this configuration, or 503 `network_not_configured` with the settings to set:
/// production never falls back to the sandbox.
pub fn configured(config: &Config) -> Result<Provider, ApiError> {
    configured_in(&settings(config), &config.environment)
}

/// [`configured`] for settings already read.
pub fn configured_in(
    settings: &NetworkSettings,
    environment: &Environment,
) -> Result<Provider, ApiError> {
    let choice = settings
        .network
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty());
    match choice {
        Some(UNIPILE) if settings.unipile.is_some() => Ok(Provider::Unipile),
        Some(UNIPILE) => Err(not_configured(
            "OUTREACH_NETWORK=unipile is set without UNIPILE_DSN, UNIPILE_API_KEY and UNIPILE_WEBHOOK_SECRET",
        )),
        _ if environment.is_production() => Err(not_configured(
            "No professional network is configured for this production server, so nothing can be sent",
        )),
        None | Some(SANDBOX) => Ok(Provider::Sandbox),
        Some(other) => Err(not_configured(&format!(
            "The network `{other}` is not one this server knows"
        ))),
    }
}

fn not_configured(why: &str) -> ApiError {
    ApiError::new(
        NETWORK_NOT_CONFIGURED,
        format!(
            "{why}. An operator must set OUTREACH_NETWORK=unipile with UNIPILE_DSN, UNIPILE_API_KEY and \
             UNIPILE_WEBHOOK_SECRET (docs/unipile.md); the sandbox network is never used in production."
        ),
    )
}

/// Checks the network settings at start-up: a sentence for the operator when they cannot work
/// in `environment`.
pub fn check_network_setting(
    settings: &NetworkSettings,
    environment: &Environment,
) -> Result<(), String> {
    match settings
        .network
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
    {
        None => Ok(()),
        Some(SANDBOX) if environment.is_production() => Err(
            "OUTREACH_NETWORK=sandbox is refused with OUTREACH_ENV=production: the sandbox is a simulation, and \
             production never sends through it"
                .to_owned(),
        ),
        Some(SANDBOX) => Ok(()),
        Some(UNIPILE) if settings.unipile.is_none() => Err(
            "OUTREACH_NETWORK=unipile needs UNIPILE_DSN, UNIPILE_API_KEY and UNIPILE_WEBHOOK_SECRET set".to_owned(),
        ),
        Some(UNIPILE) => Ok(()),
        Some(other) => Err(format!(
            "OUTREACH_NETWORK=`{other}` is not a known network; use `unipile`, or `sandbox` outside production"
        )),
    }
}
