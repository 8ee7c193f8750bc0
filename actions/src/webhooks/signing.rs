//! Signatures as Standard Webhooks 1.0 says them, and the secrets that make them.
//!
//! A secret is `whsec_` and the base64 of its random bytes; the signature of a message is `v1,`
//! and the base64 of the HMAC-SHA256, keyed with those bytes, of `{id}.{timestamp}.{body}`. While
//! a rotated secret still signs, the header holds both signatures, space-separated, the newest
//! first: a receiver that knows either one accepts the message.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// The prefix of a secret as it is shown.
pub const SECRET_PREFIX: &str = "whsec_";

/// The random bytes of a new secret (the specification allows 24 to 64).
const SECRET_BYTES: usize = 32;

/// A new secret: `whsec_` and the base64 of 32 random bytes.
pub fn new_secret() -> String {
    let mut bytes = [0u8; SECRET_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    format!("{SECRET_PREFIX}{}", STANDARD.encode(bytes))
}

/// The key bytes of a secret (`whsec_` and base64); `None` for a text that is not one.
pub fn secret_key(secret: &str) -> Option<Vec<u8>> {
    STANDARD
        .decode(secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret))
        .ok()
        .filter(|bytes| !bytes.is_empty())
}

/// `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` under the secret's key.
pub fn sign(key: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body.as_bytes());
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` header: one signature per key, space-separated.
pub fn signature_header(keys: &[Vec<u8>], id: &str, timestamp: i64, body: &str) -> String {
    keys.iter()
        .map(|key| sign(key, id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector of the Standard Webhooks specification.
    #[test]
    fn the_specifications_test_vector_signs_as_it_says() {
        let key = secret_key("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").expect("a secret");
        let signature = sign(
            &key,
            "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
            1_649_367_553,
            r#"{"email":"test@example.com","username":"test_user"}"#,
        );
        assert_eq!(signature, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
    }

    #[test]
    fn a_new_secret_is_whsec_and_32_random_bytes() {
        let one = new_secret();
        let other = new_secret();
        assert_ne!(one, other);
        assert!(one.starts_with(SECRET_PREFIX));
        assert_eq!(secret_key(&one).map(|key| key.len()), Some(32));
    }

    #[test]
    fn two_keys_sign_twice_space_separated() {
        let header = signature_header(&[vec![1; 32], vec![2; 32]], "evt_1", 5, "{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|part| part.starts_with("v1,")));
        assert_ne!(parts[0], parts[1]);
    }
}
