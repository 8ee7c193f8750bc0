//! Identifiers and secrets.
//!
//! Ids are a short type prefix plus random base62 (`prs_3kTq...`), so an id says what it names
//! and a wrong kind of id is caught before any query. Secrets (API keys, later tokens) are at
//! least 32 random bytes rendered in base62; only their SHA-256 is stored.

use rand::Rng;
use sha2::{Digest, Sha256};

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Random characters per id: 20 base62 characters are about 119 bits.
const ID_CHARS: usize = 20;

/// Random characters per secret: 43 base62 characters carry more than 256 bits.
const SECRET_CHARS: usize = 43;

fn base62(len: usize) -> String {
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from(BASE62[rng.random_range(0..BASE62.len())]))
        .collect()
}

/// A new id such as `prs_4f...` for the given prefix (without the underscore).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", base62(ID_CHARS))
}

/// Whether `id` has the shape of an id with this prefix; anything else cannot exist.
pub fn is_id(prefix: &str, id: &str) -> bool {
    id.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|rest| {
            rest.len() == ID_CHARS && rest.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

/// A new secret value: `prefix` followed by random base62.
pub fn new_secret(prefix: &str) -> String {
    format!("{prefix}{}", base62(SECRET_CHARS))
}

/// Whether the part after a secret's prefix has the right shape.
pub fn is_secret_body(body: &str) -> bool {
    body.len() == SECRET_CHARS && body.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The stored form of a secret: lowercase hex SHA-256.
pub fn hash_secret(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

/// Lowercase hexadecimal.
pub fn hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        hex.push(char::from(b"0123456789abcdef"[usize::from(byte & 0xf)]));
    }
    hex
}

/// A random password for accounts the CLI creates without one.
pub fn new_password() -> String {
    base62(24)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_their_prefix_and_shape() {
        let id = new_id("prs");
        assert!(is_id("prs", &id), "{id}");
        assert!(!is_id("lst", &id));
        assert!(!is_id("prs", "prs_short"));
        assert_ne!(new_id("prs"), new_id("prs"));
    }

    #[test]
    fn secrets_hash_to_hex_sha256() {
        assert_eq!(
            hash_secret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let secret = new_secret("pk_test_");
        assert!(is_secret_body(
            secret.strip_prefix("pk_test_").unwrap_or_default()
        ));
    }
}
