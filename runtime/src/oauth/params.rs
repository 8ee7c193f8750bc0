//! Form and query parameters as OAuth reads them.
//!
//! RFC 6749 section 3.1: a parameter sent without a value is treated as omitted, and no parameter
//! may appear twice. A repeated `redirect_uri` or `client_id` is the classic way to make two
//! components disagree about which value counts, so duplicates are kept track of, not collapsed.

use axum::http::{HeaderMap, header};
use url::form_urlencoded;

use super::error::OAuthError;

/// Parameters in the order sent, with the names that were repeated.
#[derive(Debug, Clone, Default)]
pub struct Params {
    pairs: Vec<(String, String)>,
    pub duplicates: Vec<String>,
}

impl Params {
    /// Parses `application/x-www-form-urlencoded` text (a query string or a form body).
    pub fn parse(raw: &[u8]) -> Self {
        let mut params = Self::default();
        for (name, value) in form_urlencoded::parse(raw) {
            if params.pairs.iter().any(|(seen, _)| *seen == name) {
                if !params.duplicates.iter().any(|seen| *seen == name) {
                    params.duplicates.push(name.clone().into_owned());
                }
                continue;
            }
            params.pairs.push((name.into_owned(), value.into_owned()));
        }
        params
    }

    /// The value of a parameter; an empty value counts as absent.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(seen, _)| seen == name)
            .map(|(_, value)| value.as_str())
            .filter(|value| !value.is_empty())
    }

    pub fn is_duplicated(&self, name: &str) -> bool {
        self.duplicates.iter().any(|seen| seen == name)
    }

    /// The parameters except those named, for hidden form inputs and the sign-in return address.
    pub fn without(&self, names: &[&str]) -> Vec<(String, String)> {
        self.pairs
            .iter()
            .filter(|(name, _)| !names.contains(&name.as_str()))
            .cloned()
            .collect()
    }
}

/// Encodes pairs as a query string.
pub fn encode(pairs: &[(String, String)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// Whether the request's `Content-Type` is `mime` (parameters such as `charset` aside).
pub fn has_content_type(headers: &HeaderMap, mime: &str) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().to_ascii_lowercase().starts_with(mime))
}

/// The parameters of a POSTed form (token and revocation requests): the body must be
/// `application/x-www-form-urlencoded` and no parameter may repeat. `what` names the request in
/// the error.
pub fn form(headers: &HeaderMap, body: &[u8], what: &str) -> Result<Params, OAuthError> {
    if !has_content_type(headers, "application/x-www-form-urlencoded") {
        return Err(OAuthError::invalid_request(format!(
            "the {what} request must be `application/x-www-form-urlencoded`"
        )));
    }
    let params = Params::parse(body);
    if let Some(name) = params.duplicates.first() {
        return Err(OAuthError::invalid_request(format!(
            "the parameter `{name}` appears more than once"
        )));
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_values_are_absent_and_repeats_are_noted() {
        let params = Params::parse(b"a=1&b=&a=2&c=x%20y");
        assert_eq!(params.get("a"), Some("1"));
        assert_eq!(params.get("b"), None);
        assert_eq!(params.get("c"), Some("x y"));
        assert!(params.is_duplicated("a"));
        assert!(!params.is_duplicated("c"));
    }
}
