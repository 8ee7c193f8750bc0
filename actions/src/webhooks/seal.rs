//! The signing secrets at rest: sealed with the server's key when it has one.
//!
//! The service must sign with a secret, so it keeps the secret itself, not a hash of it. With
//! `OUTREACH_WEBHOOK_KEY` set (the base64 of 32 random bytes), each secret is stored sealed with
//! XChaCha20-Poly1305 under that key (`sealed:v1:` and the base64 of a random 24-byte nonce and
//! the ciphertext), so a copy of the database alone signs nothing. Without a key they are stored
//! as they are (`plain:`), which a production server warns of at start-up. A secret sealed
//! under a key the server no longer has cannot sign: its deliveries fail, saying so.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use outreach_runtime::prelude::{ApiError, Config};

const SEALED: &str = "sealed:v1:";
const PLAIN: &str = "plain:";
const NONCE_BYTES: usize = 24;

/// The webhook settings of a server, in its configuration's extensions.
#[derive(Clone, Default)]
pub struct WebhookSettings {
    /// The key that seals the signing secrets at rest (`OUTREACH_WEBHOOK_KEY`), if set.
    pub secret_key: Option<[u8; 32]>,
}

impl std::fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookSettings")
            .field("secret_key", &self.secret_key.map(|_| "<set>"))
            .finish()
    }
}

impl WebhookSettings {
    /// Reads `OUTREACH_WEBHOOK_KEY`'s value: the base64 of exactly 32 bytes.
    pub fn from_key_text(text: Option<&str>) -> Result<Self, String> {
        let Some(text) = text.map(str::trim).filter(|text| !text.is_empty()) else {
            return Ok(Self::default());
        };
        let bytes = STANDARD.decode(text).map_err(|_| {
            "OUTREACH_WEBHOOK_KEY must be the base64 of 32 random bytes (`openssl rand -base64 32`)"
                .to_owned()
        })?;
        let key: [u8; 32] = bytes.try_into().map_err(|bytes: Vec<u8>| {
            format!(
                "OUTREACH_WEBHOOK_KEY decodes to {} bytes; it must be 32 (`openssl rand -base64 32`)",
                bytes.len()
            )
        })?;
        Ok(Self {
            secret_key: Some(key),
        })
    }

    pub fn of(config: &Config) -> Self {
        config
            .extensions
            .get::<WebhookSettings>()
            .cloned()
            .unwrap_or_default()
    }
}

/// The secret as stored: sealed under the key when there is one.
pub fn seal(settings: &WebhookSettings, secret: &str) -> Result<String, ApiError> {
    let Some(key) = settings.secret_key else {
        return Ok(format!("{PLAIN}{secret}"));
    };
    let cipher = XChaCha20Poly1305::new(&key.into());
    let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
    let sealed = cipher
        .encrypt(&nonce, secret.as_bytes())
        .map_err(|_| ApiError::internal("sealing a webhook secret failed"))?;
    let mut bytes = nonce.to_vec();
    bytes.extend_from_slice(&sealed);
    Ok(format!("{SEALED}{}", STANDARD.encode(bytes)))
}

/// The secret a stored text holds, or why it cannot be read.
pub fn open(settings: &WebhookSettings, stored: &str) -> Result<String, String> {
    if let Some(secret) = stored.strip_prefix(PLAIN) {
        return Ok(secret.to_owned());
    }
    let Some(sealed) = stored.strip_prefix(SEALED) else {
        return Err("the stored signing secret is in no known form".to_owned());
    };
    let Some(key) = settings.secret_key else {
        return Err(
            "the signing secret is sealed, and this server has no OUTREACH_WEBHOOK_KEY to open it"
                .to_owned(),
        );
    };
    let bytes = STANDARD
        .decode(sealed)
        .map_err(|_| "the sealed signing secret is not base64".to_owned())?;
    if bytes.len() <= NONCE_BYTES {
        return Err("the sealed signing secret is too short".to_owned());
    }
    let (nonce, ciphertext) = bytes.split_at(NONCE_BYTES);
    let cipher = XChaCha20Poly1305::new(&key.into());
    let plain = cipher
        .decrypt(XNonce::from_slice(nonce), ciphertext)
        .map_err(|_| {
            "the signing secret was sealed under another OUTREACH_WEBHOOK_KEY than this server's"
                .to_owned()
        })?;
    String::from_utf8(plain).map_err(|_| "the opened signing secret is not text".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_with_its_key_only() {
        let settings = WebhookSettings {
            secret_key: Some([7; 32]),
        };
        let stored = seal(&settings, "whsec_abc").expect("sealed");
        assert!(stored.starts_with(SEALED));
        assert!(!stored.contains("whsec_abc"));
        assert_eq!(open(&settings, &stored).as_deref(), Ok("whsec_abc"));
        let other = WebhookSettings {
            secret_key: Some([8; 32]),
        };
        assert!(open(&other, &stored).is_err());
        assert!(open(&WebhookSettings::default(), &stored).is_err());
    }

    #[test]
    fn without_a_key_the_secret_is_kept_plain() {
        let settings = WebhookSettings::default();
        let stored = seal(&settings, "whsec_abc").expect("stored");
        assert_eq!(stored, "plain:whsec_abc");
        assert_eq!(open(&settings, &stored).as_deref(), Ok("whsec_abc"));
    }

    #[test]
    fn the_key_must_be_32_bytes_of_base64() {
        assert!(WebhookSettings::from_key_text(None).is_ok());
        assert!(WebhookSettings::from_key_text(Some("not base64!")).is_err());
        assert!(WebhookSettings::from_key_text(Some(&STANDARD.encode([1u8; 16]))).is_err());
        let settings = WebhookSettings::from_key_text(Some(&STANDARD.encode([1u8; 32])));
        assert_eq!(settings.map(|s| s.secret_key), Ok(Some([1; 32])));
    }
}
