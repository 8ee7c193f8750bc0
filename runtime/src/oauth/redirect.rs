//! Redirect URIs: which may be registered, which requests match them, and how answers are added.
//!
//! A redirect URI is where the authorization code goes, so it is the one thing an attacker most
//! wants to choose. Registration accepts https anywhere and plain http only on a loopback host
//! (RFC 8252 section 7.3: a native app listening on its own machine), never a fragment. A request
//! must then name a registered URI exactly, character for character; the single exception is RFC
//! 8252 section 7.3's: a native app cannot reserve a port, so on an http loopback URI the port may
//! differ while everything else is identical.

use std::net::{Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// The longest redirect URI accepted, well above any real one.
const MAX_URI_LEN: usize = 2000;

/// Whether a host is one of the loopback names RFC 8252 allows for plain http.
pub fn is_loopback_host(host: &Host<&str>) -> bool {
    match host {
        Host::Domain(name) => name.eq_ignore_ascii_case("localhost"),
        Host::Ipv4(ip) => *ip == Ipv4Addr::LOCALHOST,
        Host::Ipv6(ip) => *ip == Ipv6Addr::LOCALHOST,
    }
}

/// Checks a redirect URI a client wants to register; the error says what is wrong.
pub fn check_registrable(uri: &str) -> Result<(), String> {
    if uri.len() > MAX_URI_LEN {
        return Err(format!(
            "a redirect URI is longer than {MAX_URI_LEN} characters"
        ));
    }
    let url =
        Url::parse(uri).map_err(|error| format!("`{uri}` is not an absolute URI ({error})"))?;
    if url.fragment().is_some() || uri.contains('#') {
        return Err(format!(
            "`{uri}` has a fragment, which redirect URIs may not have"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("`{uri}` carries a user name or password"));
    }
    let Some(host) = url.host() else {
        return Err(format!("`{uri}` has no host"));
    };
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback_host(&host) => Ok(()),
        "http" => Err(format!(
            "`{uri}` uses plain http on a host that is not loopback; use https, or http on 127.0.0.1, [::1] or localhost"
        )),
        other => Err(format!(
            "`{uri}` uses the `{other}` scheme; redirect URIs must be https, or http on a loopback host"
        )),
    }
}

/// Whether a requested redirect URI matches one of the registered ones.
pub fn matches(registered: &[String], requested: &str) -> bool {
    registered
        .iter()
        .any(|uri| uri == requested || loopback_port_variant(uri, requested))
}

/// RFC 8252 section 7.3: the same http loopback URI on another port.
fn loopback_port_variant(registered: &str, requested: &str) -> bool {
    let (Ok(mut registered), Ok(mut requested)) = (Url::parse(registered), Url::parse(requested))
    else {
        return false;
    };
    let loopback =
        |url: &Url| url.scheme() == "http" && url.host().is_some_and(|h| is_loopback_host(&h));
    if !loopback(&registered) || !loopback(&requested) || requested.fragment().is_some() {
        return false;
    }
    // Clearing the port on both leaves scheme, host, path and query to compare as they are.
    if registered.set_port(None).is_err() || requested.set_port(None).is_err() {
        return false;
    }
    registered.as_str() == requested.as_str()
}

/// The redirect URI with answer parameters appended to whatever query it already has.
pub fn with_params(redirect_uri: &str, pairs: &[(&str, &str)]) -> String {
    match Url::parse(redirect_uri) {
        Ok(mut url) => {
            {
                let mut query = url.query_pairs_mut();
                for (name, value) in pairs {
                    query.append_pair(name, value);
                }
            }
            url.to_string()
        }
        // Only validated URIs get here; fall back to the plain form rather than panic.
        Err(_) => redirect_uri.to_owned(),
    }
}

/// `host[:port]` of a URI, for the consent page.
pub fn display_host(uri: &str) -> String {
    Url::parse(uri)
        .ok()
        .and_then(|url| {
            let host = url.host_str()?.to_owned();
            Some(match url.port() {
                Some(port) => format!("{host}:{port}"),
                None => host,
            })
        })
        .unwrap_or_else(|| uri.to_owned())
}

/// Whether a URI's host is only this computer (the consent page warns about it).
pub fn is_loopback_uri(uri: &str) -> bool {
    Url::parse(uri)
        .ok()
        .and_then(|url| url.host().map(|host| is_loopback_host(&host)))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_accepts_https_and_loopback_http_only() {
        assert!(check_registrable("https://app.example/callback").is_ok());
        assert!(check_registrable("http://127.0.0.1:3000/cb").is_ok());
        assert!(check_registrable("http://[::1]/cb").is_ok());
        assert!(check_registrable("http://localhost:8765/callback").is_ok());
        assert!(check_registrable("http://app.example/callback").is_err());
        assert!(check_registrable("https://app.example/cb#frag").is_err());
        assert!(check_registrable("javascript:alert(1)").is_err());
        assert!(check_registrable("com.example.app:/cb").is_err());
        assert!(check_registrable("/relative").is_err());
        assert!(check_registrable("https://user:pw@app.example/cb").is_err());
    }

    #[test]
    fn matching_is_exact_except_the_loopback_port() {
        let registered = vec![
            "https://app.example/cb".to_owned(),
            "http://127.0.0.1/callback".to_owned(),
        ];
        assert!(matches(&registered, "https://app.example/cb"));
        assert!(!matches(&registered, "https://app.example/cb/"));
        assert!(!matches(&registered, "https://app.example/cb?x=1"));
        assert!(!matches(&registered, "https://app.example:8443/cb"));
        assert!(matches(&registered, "http://127.0.0.1:51234/callback"));
        assert!(!matches(&registered, "http://127.0.0.1:51234/other"));
        assert!(!matches(&registered, "http://localhost:51234/callback"));
        assert!(!matches(&registered, "https://127.0.0.1:51234/callback"));
    }

    #[test]
    fn answers_are_appended_to_the_query() {
        assert_eq!(
            with_params(
                "https://app.example/cb?a=1",
                &[("code", "x y"), ("state", "s")]
            ),
            "https://app.example/cb?a=1&code=x+y&state=s"
        );
    }
}
