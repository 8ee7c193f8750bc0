//! Which addresses a client metadata document may be fetched from.
//!
//! A metadata document URL is chosen by whoever starts an authorization, so fetching it is a
//! server-side request forgery waiting to happen: `https://169.254.169.254/...` reads a cloud's
//! instance credentials, `https://10.0.0.5/...` probes the private network. Only public unicast
//! addresses are allowed, and the check runs on the addresses a name resolves to (the resolver in
//! `cimd.rs` filters them), so a public name pointing at a private address is refused too. IPv6
//! forms that embed an IPv4 address (v4-mapped, NAT64) are judged by the address they embed.
//!
//! IPv6 is an allow-list: only global unicast (`2000::/3`) minus its special-use blocks, since
//! anything outside that range is not a public host.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address may not be fetched from, or `None` when it may.
pub fn refusal(ip: IpAddr, allow_loopback: bool) -> Option<&'static str> {
    match ip {
        IpAddr::V4(ip) => refusal_v4(ip, allow_loopback),
        IpAddr::V6(ip) => refusal_v6(ip, allow_loopback),
    }
}

fn refusal_v4(ip: Ipv4Addr, allow_loopback: bool) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if ip.is_loopback() {
        return (!allow_loopback).then_some("a loopback address");
    }
    Some(match (a, b, c) {
        (0, _, _) => "an unspecified (\"this network\") address",
        (10, _, _) | (172, 16..=31, _) | (192, 168, _) => "a private address",
        (100, 64..=127, _) => "a shared (carrier-grade NAT) address",
        (169, 254, _) => "a link-local address",
        (192, 0, 0) => "an IETF protocol assignment",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "a documentation address",
        (192, 88, 99) => "a 6to4 relay address",
        (198, 18..=19, _) => "a benchmarking address",
        (224..=239, _, _) => "a multicast address",
        (255, 255, 255) if ip == Ipv4Addr::BROADCAST => "the broadcast address",
        (240..=255, _, _) => "a reserved address",
        _ => return None,
    })
}

fn refusal_v6(ip: Ipv6Addr, allow_loopback: bool) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return refusal_v4(v4, allow_loopback);
    }
    let segments = ip.segments();
    // 64:ff9b::/96, the well-known NAT64 prefix: the last 32 bits are the IPv4 destination.
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [.., high, low] = segments;
        let v4 = Ipv4Addr::from((u32::from(high) << 16) | u32::from(low));
        return refusal_v4(v4, allow_loopback);
    }
    if ip == Ipv6Addr::LOCALHOST {
        return (!allow_loopback).then_some("a loopback address");
    }
    if ip.is_unspecified() {
        return Some("an unspecified address");
    }
    let first = segments[0];
    Some(match first {
        0xff00..=0xffff => "a multicast address",
        0xfe80..=0xfebf => "a link-local address",
        0xfec0..=0xfeff => "a site-local address",
        0xfc00..=0xfdff => "a unique local (private) address",
        // 2001::/23: IETF protocol assignments (Teredo, benchmarking, ORCHID, ...).
        0x2001 if segments[1] < 0x0200 => "an IETF protocol assignment",
        0x2001 if segments[1] == 0x0db8 => "a documentation address",
        0x3fff if segments[1] < 0x1000 => "a documentation address",
        // 6to4 embeds an IPv4 address that may be private; nothing public needs it any more.
        0x2002 => "a 6to4 address",
        0x2000..=0x3fff => return None,
        // 64:ff9b:1::/48 (local NAT64), ::/96 (IPv4-compatible), 100::/64 (discard) and the rest.
        _ => "a reserved or special-use address",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> bool {
        refusal(text.parse().expect("an address"), false).is_some()
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "93.184.215.14",
            "8.8.8.8",
            "2606:4700::1111",
            "2a00:1450:4001::200e",
        ] {
            assert!(!refused(ip), "{ip}");
        }
    }

    #[test]
    fn private_and_special_use_addresses_are_refused() {
        for ip in [
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "127.0.0.1",
            "127.8.9.10",
            "169.254.169.254",
            "192.0.0.8",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "198.18.0.1",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "64:ff9b::7f00:1",
            "64:ff9b:1::1",
            "::127.0.0.1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "2001::1",
            "2002:a00:1::1",
            "3fff::1",
            "100::1",
        ] {
            assert!(refused(ip), "{ip} should be refused");
        }
    }

    #[test]
    fn embedded_public_addresses_pass() {
        assert!(!refused("::ffff:8.8.8.8"));
        assert!(!refused("64:ff9b::808:808"));
    }

    #[test]
    fn loopback_only_when_allowed() {
        let allowed = |text: &str| refusal(text.parse().expect("an address"), true).is_none();
        assert!(allowed("127.0.0.1"));
        assert!(allowed("::1"));
        assert!(allowed("::ffff:127.0.0.1"));
        assert!(!allowed("10.0.0.1"));
        assert!(!allowed("169.254.169.254"));
    }
}
