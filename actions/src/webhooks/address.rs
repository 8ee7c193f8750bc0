//! Where a webhook may go: the URL's form when an endpoint is saved, and the addresses its host
//! resolves to, when it is saved and again at every attempt (after DNS, so a name that later
//! points inward is refused where it is used).
//!
//! Refused everywhere: private, link-local (the cloud metadata address 169.254.169.254
//! included), shared (100.64.0.0/10), multicast, broadcast, unspecified and documentation-only
//! addresses, and their IPv6 kin (unique-local `fc00::/7`, link-local `fe80::/10`, an IPv4
//! address mapped into IPv6 judged as itself). In production the URL is `https` and loopback is
//! refused too; outside production `http` is allowed and so is loopback, so a user can point an
//! endpoint at a receiver on their own machine.
//!
//! At delivery the check is the HTTP client's resolver ([`CheckedResolver`]): the client
//! connects only to the addresses it checked, never to a second answer of the same name.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use outreach_runtime::prelude::{ApiError, Environment};
use url::{Host, Url};

/// The longest URL an endpoint may have.
pub const MAX_URL_CHARS: usize = 2_000;

/// The schema pattern of an endpoint URL, which the service checks as the schema says it:
/// `http` or `https` in any case, a host of ASCII labels or an address (`[...]` for IPv6), an
/// optional port, then an optional path and query; no white space, NUL, user name or fragment.
/// What the pattern cannot say (a port over 65535, a malformed address, `https` in production,
/// where the host points) is refused with its own sentence.
pub const URL_PATTERN: &str = concat!(
    "^[Hh][Tt][Tt][Pp][Ss]?://([A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*\\.?|\\[[0-9A-Fa-f:.]+\\])",
    "(:[0-9]{1,5})?([/?][^\\t-\\r \\x00#]*)?$"
);

static URL_SHAPE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(URL_PATTERN).unwrap_or_else(|error| panic!("{URL_PATTERN}: {error}"))
});

/// How long saving an endpoint waits for its host's addresses.
const RESOLVE_AT_SAVE: Duration = Duration::from_secs(2);

/// What an environment lets an endpoint reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reach {
    /// `http` as well as `https` (outside production).
    pub plain_http: bool,
    /// Loopback addresses (outside production).
    pub loopback: bool,
}

impl Reach {
    /// `development` (the default) and `test` open `http` and loopback; every other environment
    /// (`production`, and a `staging` alike) is held to `https` and public addresses.
    pub fn of(environment: &Environment) -> Self {
        let open = matches!(environment.name(), "development" | "test");
        Self {
            plain_http: open,
            loopback: open,
        }
    }

    /// Why `ip` may not be reached, if it may not.
    pub fn refusal(self, ip: IpAddr) -> Option<&'static str> {
        match ip {
            IpAddr::V4(v4) => self.refusal_v4(v4),
            IpAddr::V6(v6) => match embedded_v4(v6) {
                Some(v4) => self.refusal_v4(v4),
                None => self.refusal_v6(v6),
            },
        }
    }

    fn refusal_v4(self, ip: Ipv4Addr) -> Option<&'static str> {
        let [a, b, c, _] = ip.octets();
        if ip.is_loopback() {
            return (!self.loopback).then_some("a loopback address");
        }
        if ip == Ipv4Addr::new(169, 254, 169, 254) {
            return Some("the cloud metadata address");
        }
        if ip.is_private() {
            return Some("a private address");
        }
        if ip.is_link_local() {
            return Some("a link-local address");
        }
        if a == 100 && (64..128).contains(&b) {
            return Some("a shared (carrier-grade NAT) address");
        }
        if (a == 192 && b == 0 && c == 0) || (a == 198 && (b == 18 || b == 19)) {
            return Some("a reserved address");
        }
        if ip.is_multicast() || ip.is_broadcast() {
            return Some("a multicast or broadcast address");
        }
        if ip.is_unspecified() || a == 0 {
            return Some("an unspecified address");
        }
        if ip.is_documentation() || a >= 240 {
            return Some("a reserved address");
        }
        None
    }

    fn refusal_v6(self, ip: Ipv6Addr) -> Option<&'static str> {
        let first = ip.segments()[0];
        if ip.is_loopback() {
            return (!self.loopback).then_some("a loopback address");
        }
        if ip.is_unspecified() {
            return Some("an unspecified address");
        }
        if ip.is_multicast() {
            return Some("a multicast address");
        }
        if first & 0xfe00 == 0xfc00 {
            return Some("a private (unique-local) address");
        }
        if first & 0xffc0 == 0xfe80 {
            return Some("a link-local address");
        }
        if first & 0xffc0 == 0xfec0 {
            return Some("a site-local address");
        }
        if first == 0x2001 && ip.segments()[1] == 0x0db8 {
            return Some("a reserved address");
        }
        None
    }
}

/// The IPv4 address an IPv6 one carries to the IPv4 network, judged as itself: mapped
/// (`::ffff:a.b.c.d`), compatible (`::a.b.c.d`), NAT64 (`64:ff9b::/96`, `64:ff9b:1::/48`) and
/// 6to4 (`2002:aabb:ccdd::/48`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let low = Ipv4Addr::new(
        (s[6] >> 8) as u8,
        (s[6] & 0xff) as u8,
        (s[7] >> 8) as u8,
        (s[7] & 0xff) as u8,
    );
    if s[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified() {
        return Some(low);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) {
        return Some(low);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            (s[1] & 0xff) as u8,
            (s[2] >> 8) as u8,
            (s[2] & 0xff) as u8,
        ));
    }
    None
}

/// Checks an endpoint URL as it is saved: its form, and the addresses its host resolves to now
/// (a name that does not resolve yet is accepted and checked at each attempt). Answers the URL
/// as stored.
pub async fn check_url(reach: Reach, text: &str) -> Result<String, ApiError> {
    if text.chars().count() > MAX_URL_CHARS {
        return Err(ApiError::invalid_request(format!(
            "`url` is longer than {MAX_URL_CHARS} characters."
        )));
    }
    if !URL_SHAPE.is_match(text) {
        return Err(ApiError::invalid_request(
            "`url` must be an `https` (or, in development and test, `http`) URL of a host name or address, \
             with an optional port, path and query and no white space, user name or fragment: \
             `https://hooks.example.com/outreach`.",
        ));
    }
    let url = Url::parse(text).map_err(|error| {
        ApiError::invalid_request(format!(
            "`url` is not an absolute URL ({error}): give one such as `https://example.com/hooks`."
        ))
    })?;
    match url.scheme() {
        "https" => {}
        "http" if reach.plain_http => {}
        "http" => {
            return Err(ApiError::invalid_request(
                "`url` must be `https` outside development and test: deliveries carry your workspace's data.",
            ));
        }
        other => {
            return Err(ApiError::invalid_request(format!(
                "`url` must be an `https` URL, not `{other}`."
            )));
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(ApiError::invalid_request(
            "`url` must not hold a user name or password: deliveries are authenticated by their signature.",
        ));
    }
    if url.fragment().is_some() {
        return Err(ApiError::invalid_request(
            "`url` must not have a fragment (`#...`): it is never sent.",
        ));
    }
    let port = url.port_or_known_default().unwrap_or(443);
    let addresses: Vec<IpAddr> = match url.host() {
        Some(Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
        Some(Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
        Some(Host::Domain(name)) => {
            if name.eq_ignore_ascii_case("localhost") || name.ends_with(".localhost") {
                vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]
            } else {
                resolve_briefly(name, port).await
            }
        }
        None => {
            return Err(ApiError::invalid_request("`url` must name a host."));
        }
    };
    for ip in addresses {
        if let Some(why) = reach.refusal(ip) {
            return Err(ApiError::invalid_request(format!(
                "`url` reaches {why} ({ip}); webhooks go to public addresses{}.",
                if reach.loopback {
                    " or, in development and test, to loopback"
                } else {
                    ""
                }
            )));
        }
    }
    Ok(url.to_string())
}

/// The addresses a name resolves to now; none when it does not resolve in a few seconds.
async fn resolve_briefly(name: &str, port: u16) -> Vec<IpAddr> {
    match tokio::time::timeout(RESOLVE_AT_SAVE, tokio::net::lookup_host((name, port))).await {
        Ok(Ok(addresses)) => addresses.map(|address| address.ip()).collect(),
        _ => Vec::new(),
    }
}

/// The HTTP client's resolver: the system's, with every answer checked against [`Reach`].
#[derive(Debug, Clone, Copy)]
pub struct CheckedResolver(pub Reach);

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let reach = self.0;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if found.is_empty() {
                return Err(format!("`{host}` resolves to no address").into());
            }
            for address in &found {
                if let Some(why) = reach.refusal(address.ip()) {
                    return Err(format!(
                        "`{host}` resolves to {why} ({}), which webhooks may not reach",
                        address.ip()
                    )
                    .into());
                }
            }
            let addresses: reqwest::dns::Addrs = Box::new(found.into_iter());
            Ok(addresses)
        })
    }
}

/// The resolver as the client builder takes it.
pub fn resolver(reach: Reach) -> Arc<CheckedResolver> {
    Arc::new(CheckedResolver(reach))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: Reach = Reach {
        plain_http: false,
        loopback: false,
    };
    const OPEN: Reach = Reach {
        plain_http: true,
        loopback: true,
    };

    #[test]
    fn inward_addresses_are_refused() {
        for ip in [
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.1.1",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "0.0.0.0",
            "::",
            "fd00:ec2::254",
            "fe80::1",
            "ff02::1",
            "::ffff:10.0.0.1",
            "::10.0.0.1",
            "64:ff9b::a00:5",
            "64:ff9b:1::a9fe:a9fe",
            "2002:c0a8:0101::1",
            "fec0::1",
            "192.0.0.8",
            "198.18.0.1",
        ] {
            let ip: IpAddr = ip.parse().expect("an address");
            assert!(STRICT.refusal(ip).is_some(), "{ip}");
            assert!(OPEN.refusal(ip).is_some(), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "2606:4700::1111",
            "93.184.216.34",
            "64:ff9b::808:808",
        ] {
            let ip: IpAddr = ip.parse().expect("an address");
            assert_eq!(STRICT.refusal(ip), None, "{ip}");
        }
    }

    #[test]
    fn loopback_only_outside_production() {
        for ip in ["127.0.0.1", "::1", "::ffff:127.0.0.1"] {
            let ip: IpAddr = ip.parse().expect("an address");
            assert!(STRICT.refusal(ip).is_some(), "{ip}");
            assert_eq!(OPEN.refusal(ip), None, "{ip}");
        }
    }

    #[tokio::test]
    async fn urls_are_checked_as_saved() {
        assert!(
            check_url(STRICT, "http://93.184.216.34/hooks")
                .await
                .is_err()
        );
        assert!(
            check_url(STRICT, "https://93.184.216.34/hooks")
                .await
                .is_ok()
        );
        assert!(check_url(STRICT, "https://localhost/hooks").await.is_err());
        assert!(check_url(OPEN, "http://127.0.0.1:9/hooks").await.is_ok());
        assert!(check_url(OPEN, "http://10.1.2.3/hooks").await.is_err());
        assert!(check_url(OPEN, "ftp://93.184.216.34/").await.is_err());
        assert!(
            check_url(OPEN, "https://user:pw@93.184.216.34/")
                .await
                .is_err()
        );
        assert!(check_url(OPEN, "not a url").await.is_err());
    }
}
