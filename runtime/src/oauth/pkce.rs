//! PKCE (RFC 7636), S256 only.
//!
//! `plain` would put the verifier itself in the front channel, which defeats the point, so OAuth
//! 2.1 and the MCP specification require S256 and so do we. The challenge is always the 43
//! characters of an unpadded base64url SHA-256; the verifier 43 to 128 unreserved characters.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::session::constant_time_eq;

/// Whether a `code_challenge` has the shape of an S256 challenge.
pub fn valid_challenge(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether a `code_verifier` has the shape RFC 7636 section 4.1 requires.
pub fn valid_verifier(verifier: &str) -> bool {
    (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// The S256 challenge of a verifier.
pub fn challenge_of(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Whether the verifier answers the challenge.
pub fn verify(verifier: &str, challenge: &str) -> bool {
    constant_time_eq(&challenge_of(verifier), challenge)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of RFC 7636 appendix B.
    #[test]
    fn s256_matches_the_rfc_example() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(valid_verifier(verifier));
        assert!(valid_challenge(challenge));
        assert!(verify(verifier, challenge));
        assert!(!verify(&verifier.replace('d', "e"), challenge));
        assert!(!valid_verifier("short"));
        assert!(!valid_challenge("plain-text-challenge"));
    }
}
