//! Client ID Metadata Documents: a client whose `client_id` is the https URL of its metadata.
//!
//! The URL comes from whoever starts an authorization, so the fetch is hardened as a server-side
//! request to an untrusted address: https only, on the default port (443), no redirects (a
//! redirect would let a public URL hand the fetch to a private one), a 10-second budget for the
//! whole exchange, a 5 KB cap on the body (read in chunks and abandoned past the cap, so a huge or
//! endless body costs nothing), no proxy (a proxy would resolve the name where our checks cannot
//! see), and only public addresses. The address check runs after resolution, in a reqwest DNS
//! resolver that drops private and special-use answers (`netguard`); hosts written as IP literals
//! are not resolved by reqwest, so they are checked before the request.
//!
//! The fetch must not be a probe either. Any port would let a person map which ports of a public
//! host are open, so only 443 is fetched from (the loopback relaxation of tests and development
//! lifts this: their documents are on random ports). And every failure to reach the document
//! (the name does not resolve, or only to refused addresses, the connection is refused or times
//! out, TLS fails) is the same sentence, so the page does not tell them apart; the cause goes to
//! the log. What the server answered, once it did, is the document's own fault and is said
//! precisely: its status, a redirect, too large, not JSON, the wrong `client_id`.
//!
//! Documents are cached per instance for their `Cache-Control: max-age`, capped at 24 hours, with
//! `no-store` and `no-cache` honoured and nothing cached without a max-age. Failures are never
//! cached: a client that fixes its document is heard on the next try.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{ACCEPT, CACHE_CONTROL, CONTENT_LENGTH};
use url::{Host, Url};

use super::client::{Client, Source, validate_metadata};
use super::{netguard, redirect};
use crate::config::CimdPolicy;
use crate::state::AppState;

/// The whole fetch, connection to last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest document accepted.
pub const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
/// The longest a document is trusted without fetching it again.
const MAX_CACHE_MS: i64 = 24 * 60 * 60 * 1000;
/// Entries kept at most; past it, expired ones go, and if that is not enough, all of them.
const MAX_CACHE_ENTRIES: usize = 1024;

/// Fetches and caches metadata documents; one per server instance.
#[derive(Default)]
pub struct Fetcher {
    /// Built on first use from the instance's [`CimdPolicy`]; an unusable root certificate is
    /// an error every fetch reports.
    http: OnceLock<Result<reqwest::Client, String>>,
    cache: Mutex<HashMap<String, Cached>>,
}

struct Cached {
    client: Client,
    expires_at: i64,
}

/// The resolver's refusal, found again in the error chain to tell the person what happened.
#[derive(Debug)]
struct RefusedAddress {
    host: String,
    reason: &'static str,
}

impl std::fmt::Display for RefusedAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} resolves to {}", self.host, self.reason)
    }
}

impl std::error::Error for RefusedAddress {}

/// Resolves with the system resolver, then keeps only the addresses `netguard` allows.
struct PublicOnly {
    allow_loopback: bool,
}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_loopback = self.allow_loopback;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| match netguard::refusal(addr.ip(), allow_loopback) {
                    None => true,
                    Some(reason) => {
                        refused.get_or_insert(reason);
                        false
                    }
                })
                .collect();
            if allowed.is_empty() {
                let reason = refused.unwrap_or("no address");
                return Err(Box::new(RefusedAddress { host, reason }) as _);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

fn build_http(policy: &CimdPolicy) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(FETCH_TIMEOUT)
        .no_proxy()
        .user_agent(concat!(
            "outreach/",
            env!("CARGO_PKG_VERSION"),
            " (client metadata fetcher)"
        ))
        .dns_resolver(std::sync::Arc::new(PublicOnly {
            allow_loopback: policy.allow_loopback,
        }));
    for pem in &policy.extra_root_certificates {
        let certificate = reqwest::Certificate::from_pem(pem)
            .map_err(|error| format!("an extra root certificate is unusable: {error}"))?;
        builder = builder.add_root_certificate(certificate);
    }
    builder.build().map_err(|error| error.to_string())
}

impl Fetcher {
    /// The client a metadata document URL names, or the sentence saying why it cannot be used.
    pub async fn fetch(&self, state: &AppState, client_id: &str) -> Result<Client, String> {
        let policy = &state.config.cimd;
        let url = check_url(client_id, policy)?;
        let now = state.clock.now_ms();
        if let Some(client) = self.cached(client_id, now) {
            return Ok(client);
        }
        let http = self
            .http
            .get_or_init(|| build_http(policy))
            .as_ref()
            .map_err(Clone::clone)?;
        let (client, max_age_ms) = download(http, &url, client_id).await?;
        if let Some(max_age_ms) = max_age_ms {
            self.store(client_id, &client, now, now + max_age_ms.min(MAX_CACHE_MS));
        }
        Ok(client)
    }

    fn cached(&self, client_id: &str, now: i64) -> Option<Client> {
        let cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache
            .get(client_id)
            .filter(|entry| entry.expires_at > now)
            .map(|entry| entry.client.clone())
    }

    fn store(&self, client_id: &str, client: &Client, now: i64, expires_at: i64) {
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= MAX_CACHE_ENTRIES {
            cache.retain(|_, entry| entry.expires_at > now);
            if cache.len() >= MAX_CACHE_ENTRIES {
                cache.clear();
            }
        }
        cache.insert(
            client_id.to_owned(),
            Cached {
                client: client.clone(),
                expires_at,
            },
        );
    }
}

/// The URL rules: https (or http on a loopback host when the policy allows loopback), a path,
/// no fragment, no credentials, no port other than https's own (any port when the policy allows
/// loopback), and already in canonical form, since the document's `client_id` must equal it
/// character for character. Canonical form has no default port, so `:443` is refused as
/// non-canonical: the port is left out.
fn check_url(client_id: &str, policy: &CimdPolicy) -> Result<Url, String> {
    let url = Url::parse(client_id)
        .map_err(|error| format!("the client_id `{client_id}` is not a valid URL ({error})"))?;
    let Some(host) = url.host() else {
        return Err(format!("the client_id `{client_id}` has no host"));
    };
    let loopback_host = redirect::is_loopback_host(&host);
    match url.scheme() {
        "https" => {}
        "http" if policy.allow_loopback && loopback_host => {}
        _ => {
            return Err(format!(
                "the client_id `{client_id}` must be an https URL to be fetched as a client metadata document"
            ));
        }
    }
    if url.as_str() != client_id {
        return Err(format!(
            "the client_id `{client_id}` is not in canonical form (it reads as `{url}`); dot segments, default ports and upper-case hosts are not allowed"
        ));
    }
    if url.fragment().is_some() || !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "the client_id `{client_id}` may have neither a fragment nor credentials"
        ));
    }
    if url.path() == "/" {
        return Err(format!(
            "the client_id `{client_id}` must have a path naming the document"
        ));
    }
    let literal = match host {
        Host::Ipv4(ip) => Some(ip.into()),
        Host::Ipv6(ip) => Some(ip.into()),
        Host::Domain(_) => None,
    };
    if let Some(ip) = literal
        && let Some(reason) = netguard::refusal(ip, policy.allow_loopback)
    {
        return Err(format!(
            "the client metadata document at `{client_id}` is on {reason}, which this server does not fetch from"
        ));
    }
    // `port()` is `None` for the scheme's default, which canonical form leaves out anyway.
    if let Some(port) = url.port()
        && !policy.allow_loopback
    {
        return Err(format!(
            "the client_id `{client_id}` names port {port}; a client metadata document is fetched only from the default https port (443), so its URL has no port"
        ));
    }
    Ok(url)
}

/// Fetches, size-caps and validates one document; returns it with its cache lifetime.
async fn download(
    http: &reqwest::Client,
    url: &Url,
    client_id: &str,
) -> Result<(Client, Option<i64>), String> {
    let failed = |error: reqwest::Error| describe_failure(client_id, &error);
    let mut response = http
        .get(url.clone())
        .header(ACCEPT, "application/json")
        .send()
        .await
        .map_err(failed)?;
    let status = response.status();
    if status.is_redirection() {
        return Err(format!(
            "the client metadata document at `{client_id}` answered with a redirect ({status}); redirects are not followed"
        ));
    }
    if !status.is_success() {
        return Err(format!(
            "the client metadata document at `{client_id}` could not be fetched: it answered {status}"
        ));
    }
    let too_large = || {
        format!(
            "the client metadata document at `{client_id}` is larger than {MAX_DOCUMENT_BYTES} bytes"
        )
    };
    let declared = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_DOCUMENT_BYTES as u64) {
        return Err(too_large());
    }
    let max_age_ms = cache_lifetime_ms(
        response
            .headers()
            .get_all(CACHE_CONTROL)
            .iter()
            .filter_map(|value| value.to_str().ok()),
    );
    let mut body = Vec::with_capacity(MAX_DOCUMENT_BYTES);
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    let document: serde_json::Value = serde_json::from_slice(&body).map_err(|error| {
        format!("the client metadata document at `{client_id}` is not valid JSON ({error})")
    })?;
    if !document.is_object() {
        return Err(format!(
            "the client metadata document at `{client_id}` is not a JSON object"
        ));
    }
    if document.get("client_id").and_then(|id| id.as_str()) != Some(client_id) {
        return Err(format!(
            "the client metadata document at `{client_id}` names a different client_id ({}); it must equal the document's URL",
            document
                .get("client_id")
                .map_or_else(|| "none".to_owned(), ToString::to_string)
        ));
    }
    let validated = validate_metadata(&document).map_err(|error| {
        format!(
            "the client metadata document at `{client_id}` is not acceptable ({}: {})",
            error.error, error.description
        )
    })?;
    let name = validated
        .client_name
        .unwrap_or_else(|| url.host_str().unwrap_or(client_id).to_owned());
    let client = Client {
        client_id: client_id.to_owned(),
        name,
        redirect_uris: validated.redirect_uris,
        source: Source::MetadataDocument,
    };
    Ok((client, max_age_ms))
}

/// The one sentence for every failure to reach the document, whatever the cause: a resolver
/// refusal, an unknown name, a refused or reset connection, a timeout and a TLS failure read the
/// same, so the page cannot serve to probe hosts, ports or internal names. The cause is logged.
fn describe_failure(client_id: &str, error: &reqwest::Error) -> String {
    let mut causes = vec![error.to_string()];
    let mut source = std::error::Error::source(error);
    while let Some(current) = source {
        causes.push(current.to_string());
        source = current.source();
    }
    tracing::info!(
        client_id,
        cause = causes.join(": "),
        "client metadata document not fetched"
    );
    format!(
        "the client metadata document at `{client_id}` could not be fetched: its host was not reachable over https on a public address within {} seconds",
        FETCH_TIMEOUT.as_secs()
    )
}

/// How long `Cache-Control` lets a document be kept, or `None` for not at all.
fn cache_lifetime_ms<'a>(values: impl Iterator<Item = &'a str>) -> Option<i64> {
    let mut max_age = None;
    for directive in values.flat_map(|value| value.split(',')) {
        let directive = directive.trim().to_ascii_lowercase();
        if directive == "no-store" || directive == "no-cache" || directive == "private" {
            return None;
        }
        if let Some(seconds) = directive.strip_prefix("max-age=") {
            max_age = seconds.trim_matches('"').parse::<i64>().ok();
        }
    }
    max_age
        .filter(|seconds| *seconds > 0)
        .map(|seconds| seconds.saturating_mul(1000).min(MAX_CACHE_MS))
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    #[test]
    fn cache_lifetime_follows_cache_control() {
        assert_eq!(cache_lifetime_ms(["max-age=60"].into_iter()), Some(60_000));
        assert_eq!(
            cache_lifetime_ms(["public, max-age=999999999"].into_iter()),
            Some(MAX_CACHE_MS)
        );
        assert_eq!(
            cache_lifetime_ms(["max-age=60, no-store"].into_iter()),
            None
        );
        assert_eq!(cache_lifetime_ms(["no-cache"].into_iter()), None);
        assert_eq!(cache_lifetime_ms(std::iter::empty()), None);
    }

    #[test]
    fn urls_must_be_canonical_https_with_a_path() {
        let policy = CimdPolicy::default();
        assert!(check_url("https://app.example/client.json", &policy).is_ok());
        assert!(check_url("http://app.example/client.json", &policy).is_err());
        assert!(check_url("https://app.example", &policy).is_err());
        assert!(check_url("https://app.example/", &policy).is_err());
        assert!(check_url("https://app.example/a/../client.json", &policy).is_err());
        assert!(check_url("https://app.example/c.json#x", &policy).is_err());
        assert!(check_url("https://10.0.0.1/c.json", &policy).is_err());
        assert!(check_url("https://[::1]/c.json", &policy).is_err());
        assert!(check_url("http://127.0.0.1:9/c.json", &policy).is_err());
        let loopback = CimdPolicy {
            allow_loopback: true,
            ..CimdPolicy::default()
        };
        assert!(check_url("http://127.0.0.1:9/c.json", &loopback).is_ok());
        assert!(check_url("http://10.0.0.1/c.json", &loopback).is_err());
    }

    #[test]
    fn only_the_default_https_port_unless_loopback_is_allowed() {
        let policy = CimdPolicy::default();
        for other in [
            "https://app.example:8443/c.json",
            "https://app.example:22/c.json",
            "https://app.example:80/c.json",
            "https://93.184.215.14:6379/c.json",
        ] {
            let refusal = check_url(other, &policy).expect_err(other);
            assert!(refusal.contains("default https port"), "{refusal}");
        }
        // The default port is written by leaving it out; `:443` is not canonical.
        let explicit = check_url("https://app.example:443/c.json", &policy).expect_err(":443");
        assert!(explicit.contains("canonical"), "{explicit}");
        let loopback = CimdPolicy {
            allow_loopback: true,
            ..CimdPolicy::default()
        };
        assert!(check_url("https://localhost:8443/c.json", &loopback).is_ok());
    }

    #[tokio::test]
    async fn names_resolving_only_to_refused_addresses_are_not_connected_to() {
        let refused = PublicOnly {
            allow_loopback: false,
        }
        .resolve(Name::from_str("localhost").expect("a name"))
        .await
        .map(|_| ())
        .expect_err("localhost is loopback");
        assert!(
            refused.downcast_ref::<RefusedAddress>().is_some(),
            "{refused}"
        );
        let allowed = PublicOnly {
            allow_loopback: true,
        }
        .resolve(Name::from_str("localhost").expect("a name"))
        .await;
        assert!(allowed.is_ok());
    }
}
