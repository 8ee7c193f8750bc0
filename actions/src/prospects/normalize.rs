//! Normalising and validating prospect fields.
//!
//! One person must be one row, however their profile address was pasted: the profile URL is
//! reduced to `host/path` (no scheme, no `www.`, no query or fragment, no trailing slash, all
//! lowercase) before it is stored or compared. The path is lowercased too: profile identifiers
//! (`/in/CaseTest-XY`) are case-insensitive on the networks we know, and a duplicate that differs
//! only in case would be charged twice. (LinkedIn Sales Navigator addresses, `/sales/...`, carry
//! case-sensitive ids and keep their case.) Every check returns a sentence that names the
//! field, so a bad value is a 400 the caller can act on.
//!
//! Addresses, domains and emails are first held to the schema's own patterns (`common::PROFILE_URL`,
//! `DOMAIN`, `EMAIL`), so the service refuses exactly what its published schema refuses: the URL
//! parser alone would drop tabs and newlines inside a value and turn a non-ASCII host into
//! punycode, so `https://acme.com/\t*` would have been stored as `acme.com`.

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use outreach_runtime::prelude::ApiError;
use regex::Regex;
use serde_json::Value;

use crate::common;

pub const MAX_TEXT_CHARS: usize = 500;
pub const MAX_TAGS: usize = 50;
pub const MAX_TAG_CHARS: usize = 64;
pub const MAX_CUSTOM_FIELDS: usize = 50;
/// The longest `custom_fields` key, in characters.
pub const MAX_CUSTOM_FIELD_KEY_CHARS: usize = 100;
/// The longest `custom_fields` value, in characters of its JSON text.
pub const MAX_CUSTOM_FIELD_VALUE_CHARS: usize = 10_000;
/// The most `custom_fields` may hold in all, in bytes of its JSON text: one prospect must stay a
/// small row, however its fields are split.
pub const MAX_CUSTOM_FIELDS_BYTES: usize = 64 * 1024;

/// Trims a text field; empty becomes `None`; too long is an error.
pub fn text(field: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(value) = value else { return Ok(None) };
    let trimmed = value.trim();
    if trimmed.chars().count() > MAX_TEXT_CHARS {
        return Err(ApiError::invalid_request(format!(
            "`{field}` is longer than {MAX_TEXT_CHARS} characters."
        )));
    }
    Ok((!trimmed.is_empty()).then(|| trimmed.to_owned()))
}

/// The schema's patterns, compiled once for the service to check what the schema promises.
static PROFILE_URL_SHAPE: LazyLock<Regex> = LazyLock::new(|| schema_pattern(common::PROFILE_URL));
static DOMAIN_SHAPE: LazyLock<Regex> = LazyLock::new(|| schema_pattern(common::DOMAIN));
static EMAIL_SHAPE: LazyLock<Regex> = LazyLock::new(|| schema_pattern(common::EMAIL));

fn schema_pattern(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|error| panic!("schema pattern {pattern}: {error}"))
}

/// Whether `raw` starts with `http://` or `https://` (in any case), as the schema's patterns
/// allow; a `://` further on (`?ref=https://...`) is part of the path or the query.
fn has_web_scheme(raw: &str) -> bool {
    let start = raw.get(..8).unwrap_or(raw).to_ascii_lowercase();
    start.starts_with("http://") || start.starts_with("https://")
}

/// Normalises a profile URL to a lowercase `host/path`, e.g.
/// `https://www.LinkedIn.com/in/Jane/?x=1` -> `linkedin.com/in/jane`.
pub fn profile_url(value: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(raw) = text("profile_url", value)? else {
        return Ok(None);
    };
    let bad = || {
        ApiError::invalid_request(format!(
            "`profile_url` must be the address of a profile page, such as `https://www.linkedin.com/in/jane-doe`; got `{raw}`."
        ))
    };
    if !PROFILE_URL_SHAPE.is_match(&raw) {
        return Err(bad());
    }
    let with_scheme = if has_web_scheme(&raw) {
        raw.clone()
    } else {
        format!("https://{raw}")
    };
    let url = url::Url::parse(&with_scheme).map_err(|_| bad())?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad());
    }
    let host = url.host_str().ok_or_else(bad)?.to_ascii_lowercase();
    let host = host.strip_prefix("www.").unwrap_or(&host);
    if !host.contains('.') {
        return Err(bad());
    }
    // Non-ASCII is percent-encoded by now, so ASCII lowercasing is the whole story (and is what
    // SQL `lower()` does on both backends, which the migration of stored rows relies on). Sales
    // Navigator ids (`linkedin.com/sales/lead/ACwAA...`) are case-sensitive: kept as they are.
    let path = url.path().trim_end_matches('/');
    let path = if host == "linkedin.com" && path.starts_with("/sales/") {
        path.to_owned()
    } else {
        path.to_ascii_lowercase()
    };
    if path.is_empty() {
        return Err(bad());
    }
    Ok(Some(format!("{host}{path}")))
}

/// Normalises a company domain to a lowercase host without `www.`.
pub fn company_domain(value: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(raw) = text("company_domain", value)? else {
        return Ok(None);
    };
    domain("company_domain", &raw).map(Some)
}

/// Reduces a domain, or a URL on it, to a lowercase host without `www.`: `field` names it in the
/// error. Prospects and targeting's excluded domains go through here, so they compare equal.
pub fn domain(field: &str, raw: &str) -> Result<String, ApiError> {
    let bad = || {
        ApiError::invalid_request(format!(
            "`{field}` must be a domain such as `acme.com`; got `{}`.",
            raw.trim()
        ))
    };
    if !DOMAIN_SHAPE.is_match(raw) {
        return Err(bad());
    }
    let raw = raw.trim();
    let with_scheme = if has_web_scheme(raw) {
        raw.to_owned()
    } else {
        format!("https://{raw}")
    };
    let host = url::Url::parse(&with_scheme)
        .ok()
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
        .filter(|host| host.contains('.'))
        .ok_or_else(bad)?;
    Ok(host.strip_prefix("www.").unwrap_or(&host).to_owned())
}

/// Lowercases an email address and checks its shape.
pub fn email(value: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(raw) = text("email", value)? else {
        return Ok(None);
    };
    let email = raw.to_lowercase();
    let valid = EMAIL_SHAPE.is_match(&raw)
        && email.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !domain.contains('@')
        })
        && !email.chars().any(char::is_whitespace);
    if !valid {
        return Err(ApiError::invalid_request(format!(
            "`email` must be an email address; got `{raw}`."
        )));
    }
    Ok(Some(email))
}

/// Trims tags, drops duplicates (keeping the first spelling) and checks the limits.
///
/// Linear in the input and stopped at the limit: a set remembers what was seen, and the 51st
/// distinct tag is the error, however many follow (an import's cell can hold 60,000).
pub fn tags(values: Vec<String>) -> Result<Vec<String>, ApiError> {
    let mut seen: HashSet<String> = HashSet::with_capacity(MAX_TAGS.min(values.len()));
    let mut tags: Vec<String> = Vec::with_capacity(MAX_TAGS.min(values.len()));
    for value in values {
        let tag = value.trim();
        if tag.is_empty() {
            return Err(ApiError::invalid_request(
                "`tags` must not contain empty strings.",
            ));
        }
        if tag.chars().count() > MAX_TAG_CHARS {
            return Err(ApiError::invalid_request(format!(
                "Tag `{tag}` is longer than {MAX_TAG_CHARS} characters."
            )));
        }
        if seen.insert(tag.to_owned()) {
            if tags.len() == MAX_TAGS {
                return Err(ApiError::invalid_request(format!(
                    "`tags` holds more than {MAX_TAGS} distinct tags; a prospect holds at most {MAX_TAGS}."
                )));
            }
            tags.push(tag.to_owned());
        }
    }
    Ok(tags)
}

/// Checks the custom fields: at most 50 non-empty keys of at most 100 characters, each value at
/// most 10,000 characters of JSON text, and 64 KB of JSON in all.
pub fn custom_fields(fields: BTreeMap<String, Value>) -> Result<BTreeMap<String, Value>, ApiError> {
    if fields.len() > MAX_CUSTOM_FIELDS {
        return Err(ApiError::invalid_request(format!(
            "`custom_fields` holds at most {MAX_CUSTOM_FIELDS} keys; got {}.",
            fields.len()
        )));
    }
    let mut total = 2;
    for (key, value) in &fields {
        if key.trim().is_empty() {
            return Err(ApiError::invalid_request(
                "`custom_fields` keys must not be empty.",
            ));
        }
        let key_chars = key.chars().count();
        if key_chars > MAX_CUSTOM_FIELD_KEY_CHARS {
            let start: String = key.chars().take(40).collect();
            return Err(ApiError::invalid_request(format!(
                "`custom_fields` key `{start}...` is {key_chars} characters long; a key is at most {MAX_CUSTOM_FIELD_KEY_CHARS}."
            )));
        }
        let text = value.to_string();
        let value_chars = text.chars().count();
        if value_chars > MAX_CUSTOM_FIELD_VALUE_CHARS {
            return Err(ApiError::invalid_request(format!(
                "`custom_fields.{key}` is {value_chars} characters of JSON; a value is at most {MAX_CUSTOM_FIELD_VALUE_CHARS}."
            )));
        }
        total += Value::String(key.clone()).to_string().len() + 1 + text.len() + 1;
    }
    if total > MAX_CUSTOM_FIELDS_BYTES {
        return Err(ApiError::invalid_request(format!(
            "`custom_fields` is {total} bytes of JSON in all; a prospect holds at most {MAX_CUSTOM_FIELDS_BYTES}."
        )));
    }
    Ok(fields)
}

/// The lowercased text the `q` filter searches: full name, company and title.
pub fn search_text(full_name: Option<&str>, company: Option<&str>, title: Option<&str>) -> String {
    [full_name, company, title]
        .iter()
        .flatten()
        .map(|part| part.to_lowercase())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// `first last`, or whichever part exists.
pub fn full_name(first: Option<&str>, last: Option<&str>) -> Option<String> {
    match (first, last) {
        (Some(first), Some(last)) => Some(format!("{first} {last}")),
        (Some(one), None) | (None, Some(one)) => Some(one.to_owned()),
        (None, None) => None,
    }
}

/// Escapes `%`, `_` and `\` for a `like ... escape '\'` pattern.
pub fn like_pattern(query: &str) -> String {
    let mut pattern = String::with_capacity(query.len() + 2);
    pattern.push('%');
    for c in query.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(raw: &str) -> Option<String> {
        profile_url(Some(raw.to_owned())).ok().flatten()
    }

    #[test]
    fn profile_urls_normalise_to_host_and_path() {
        let expected = Some("linkedin.com/in/jane-doe".to_owned());
        assert_eq!(url("https://www.linkedin.com/in/jane-doe/"), expected);
        assert_eq!(url("http://LinkedIn.com/in/jane-doe?utm=x#top"), expected);
        assert_eq!(url("www.linkedin.com/in/jane-doe"), expected);
        assert_eq!(url("linkedin.com/in/jane-doe"), expected);
        assert!(profile_url(Some("not a url".into())).is_err());
        assert!(profile_url(Some("https://linkedin.com/".into())).is_err());
        assert!(profile_url(Some("ftp://linkedin.com/in/x".into())).is_err());
        assert_eq!(profile_url(Some("   ".into())).ok(), Some(None));
    }

    #[test]
    fn profile_urls_ignore_case_in_the_identifier() {
        assert_eq!(
            url("https://www.linkedin.com/in/CaseTest-XY/"),
            url("linkedin.com/in/casetest-xy")
        );
        assert_eq!(
            url("linkedin.com/in/J%C3%A9r%C3%B4me"),
            Some("linkedin.com/in/j%c3%a9r%c3%b4me".to_owned())
        );
        assert_eq!(
            url("linkedin.com/in/Jérôme"),
            url("linkedin.com/in/j%C3%A9r%C3%B4me")
        );
    }

    #[test]
    fn custom_fields_have_size_limits_that_name_the_field() {
        let one =
            |key: &str, value: Value| custom_fields(BTreeMap::from([(key.to_owned(), value)]));
        assert!(one("note", Value::String("x".repeat(9_000))).is_ok());
        let long_value = one("note", Value::String("x".repeat(10_001))).unwrap_err();
        assert!(
            long_value.message.contains("custom_fields.note"),
            "{}",
            long_value.message
        );
        let long_key = one(&"k".repeat(101), Value::Bool(true)).unwrap_err();
        assert!(
            long_key.message.contains("at most 100"),
            "{}",
            long_key.message
        );
        let many: BTreeMap<String, Value> = (0..10)
            .map(|i| (format!("f{i}"), Value::String("x".repeat(9_000))))
            .collect();
        let total = custom_fields(many).unwrap_err();
        assert!(total.message.contains("65536"), "{}", total.message);
    }

    #[test]
    fn emails_and_domains() {
        assert_eq!(
            email(Some(" Jane@Acme.COM ".into())).ok().flatten(),
            Some("jane@acme.com".into())
        );
        assert!(email(Some("jane@".into())).is_err());
        assert!(email(Some("jane acme.com".into())).is_err());
        assert_eq!(
            company_domain(Some("https://www.Acme.com/about".into()))
                .ok()
                .flatten(),
            Some("acme.com".into())
        );
        assert!(company_domain(Some("acme".into())).is_err());
        // What the URL parser would quietly repair is refused, as the schema's pattern says.
        for refused in [
            "\u{c}https://acme.com/\u{c}\n\t*",
            "acme.com/a b",
            "bücher.de",
            "acme.com\u{0}",
        ] {
            assert!(company_domain(Some(refused.into())).is_err(), "{refused:?}");
        }
        assert!(profile_url(Some("linkedin.com/in/ja\tne".into())).is_err());
        assert_eq!(
            profile_url(Some("HTTPS://LinkedIn.com/in/Jane".into()))
                .ok()
                .flatten(),
            Some("linkedin.com/in/jane".into())
        );
        assert!(email(Some("ja\u{0}ne@acme.com".into())).is_err());
        // A `://` after the host is the path's or the query's, as the pattern reads it.
        assert_eq!(
            profile_url(Some("linkedin.com/in/jane?ref=https://x.io".into()))
                .ok()
                .flatten(),
            Some("linkedin.com/in/jane".into())
        );
        assert_eq!(
            company_domain(Some("acme.com/?r=http://x".into()))
                .ok()
                .flatten(),
            Some("acme.com".into())
        );
    }

    #[test]
    fn schema_white_space_is_what_trim_takes_in_every_dialect() {
        let white = Regex::new(concat!("^[", common::ws!(), "]$")).unwrap();
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            assert_eq!(
                white.is_match(c.encode_utf8(&mut [0; 4])),
                c.is_whitespace(),
                "U+{:04X}",
                c as u32
            );
        }
        // `\s`, `\d`, `\w` and `\b` mean different characters in ECMA-262, Python and Rust.
        for pattern in [
            common::NOT_BLANK,
            common::EMAIL,
            common::PROFILE_URL,
            common::DOMAIN,
            common::OPTIONAL_DOMAIN,
        ] {
            for escape in ["\\s", "\\S", "\\d", "\\D", "\\w", "\\W", "\\b"] {
                assert!(!pattern.contains(escape), "{pattern} holds {escape}");
            }
        }
        // Found by schemathesis: U+0085 inside a path segment is white space to Rust and Python,
        // not to ECMA-262. Inside an address only ASCII white space is refused (the URL parser
        // percent-encodes the rest), and at its ends all of it is trimmed, in every reading.
        let fuzzed = "\n P9gCdIBu.OeQZ.oqTM/O/J\u{a4}\u{85}\u{15}8/U//#& \r \u{b}";
        assert!(PROFILE_URL_SHAPE.is_match(fuzzed));
        assert!(profile_url(Some(fuzzed.into())).is_ok());
        let padded = "\u{85}\u{3000} linkedin.com/in/jane\u{a0}\u{2028}";
        assert!(PROFILE_URL_SHAPE.is_match(padded));
        assert_eq!(
            profile_url(Some(padded.into())).ok().flatten(),
            Some("linkedin.com/in/jane".into())
        );
        // The service checks the trimmed value, the schema the value as sent: they agree.
        for sent in [
            fuzzed,
            padded,
            "linkedin.com/in/ja\u{3000}",
            "linkedin.com/in/\u{3000}x",
            "\u{3000}",
            "x.co/a/\u{2029}",
            "x.co/a?\u{85}",
            "ja\u{a0}ne@acme.com",
            " jane@acme.com\u{205f}",
            "acme.com/\u{1680}",
        ] {
            for shape in [&*PROFILE_URL_SHAPE, &*EMAIL_SHAPE, &*DOMAIN_SHAPE] {
                assert_eq!(
                    shape.is_match(sent),
                    shape.is_match(sent.trim()),
                    "{sent:?} against {shape}"
                );
            }
        }
    }

    #[test]
    fn tags_are_trimmed_and_deduplicated() {
        assert_eq!(
            tags(vec![" a ".into(), "b".into(), "a".into()]).ok(),
            Some(vec!["a".into(), "b".into()])
        );
        assert!(tags(vec![" ".into()]).is_err());
    }

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_pattern("50%_A"), "%50\\%\\_a%");
    }
}
