//! Normalising and validating prospect fields.
//!
//! One person must be one row, however their profile address was pasted: the profile URL is
//! reduced to `host/path` (no scheme, no `www.`, no query or fragment, no trailing slash, host
//! lowercased) before it is stored or compared. Every check returns a sentence that names the
//! field, so a bad value is a 400 the caller can act on.

use std::collections::BTreeMap;

use outreach_runtime::ApiError;
use serde_json::Value;

pub const MAX_TEXT_CHARS: usize = 500;
pub const MAX_TAGS: usize = 50;
pub const MAX_TAG_CHARS: usize = 64;
pub const MAX_CUSTOM_FIELDS: usize = 50;

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

/// Normalises a profile URL to `host/path`, e.g. `https://www.LinkedIn.com/in/jane/?x=1` ->
/// `linkedin.com/in/jane`.
pub fn profile_url(value: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(raw) = text("profile_url", value)? else {
        return Ok(None);
    };
    let bad = || {
        ApiError::invalid_request(format!(
            "`profile_url` must be the address of a profile page, such as `https://www.linkedin.com/in/jane-doe`; got `{raw}`."
        ))
    };
    let with_scheme = if raw.contains("://") {
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
    let path = url.path().trim_end_matches('/');
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
    let with_scheme = if raw.contains("://") {
        raw.clone()
    } else {
        format!("https://{raw}")
    };
    let host = url::Url::parse(&with_scheme)
        .ok()
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
        .filter(|host| host.contains('.'))
        .ok_or_else(|| {
            ApiError::invalid_request(format!(
                "`company_domain` must be a domain such as `acme.com`; got `{raw}`."
            ))
        })?;
    Ok(Some(host.strip_prefix("www.").unwrap_or(&host).to_owned()))
}

/// Lowercases an email address and checks its shape.
pub fn email(value: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(raw) = text("email", value)? else {
        return Ok(None);
    };
    let email = raw.to_lowercase();
    let valid = email.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty()
            && domain.contains('.')
            && !domain.starts_with('.')
            && !domain.ends_with('.')
            && !domain.contains('@')
    }) && !email.chars().any(char::is_whitespace);
    if !valid {
        return Err(ApiError::invalid_request(format!(
            "`email` must be an email address; got `{raw}`."
        )));
    }
    Ok(Some(email))
}

/// Trims tags, drops duplicates (keeping the first spelling) and checks the limits.
pub fn tags(values: Vec<String>) -> Result<Vec<String>, ApiError> {
    let mut tags: Vec<String> = Vec::with_capacity(values.len());
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
        if !tags.iter().any(|existing| existing == tag) {
            tags.push(tag.to_owned());
        }
    }
    if tags.len() > MAX_TAGS {
        return Err(ApiError::invalid_request(format!(
            "A prospect holds at most {MAX_TAGS} tags; got {}.",
            tags.len()
        )));
    }
    Ok(tags)
}

/// Checks the custom fields: string keys (non-empty), at most 50 of them.
pub fn custom_fields(fields: BTreeMap<String, Value>) -> Result<BTreeMap<String, Value>, ApiError> {
    if fields.len() > MAX_CUSTOM_FIELDS {
        return Err(ApiError::invalid_request(format!(
            "`custom_fields` holds at most {MAX_CUSTOM_FIELDS} keys; got {}.",
            fields.len()
        )));
    }
    if fields.keys().any(|key| key.trim().is_empty()) {
        return Err(ApiError::invalid_request(
            "`custom_fields` keys must not be empty.",
        ));
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
