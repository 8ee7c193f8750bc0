//! Where drafts are asked for: the drafting model's endpoint, read from the conventional `LLM_*`
//! variables and checked whole at start, so a half-configured model refuses the start rather than
//! silently drafting nothing. The binary reads the variables and puts the model in the runtime's
//! `Config::extensions`; [`Drafter`](super::Drafter) takes it from there.

use std::time::Duration;

/// An OpenAI-compatible chat-completions endpoint: `POST {base_url}/chat/completions` with
/// `Authorization: Bearer {api_key}`.
#[derive(Clone, PartialEq, Eq)]
pub struct DraftingModel {
    /// Without a trailing slash, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: String,
    pub model: String,
    /// For the whole request, connecting included; past it the template is used.
    pub timeout: Duration,
}

/// How long a draft may take when `LLM_TIMEOUT_MS` is not set.
pub const DEFAULT_DRAFTING_TIMEOUT: Duration = Duration::from_secs(10);

/// The `LLM_TIMEOUT_MS` values accepted: long enough for a round trip, short enough that a stuck
/// endpoint cannot hold an agent run for minutes per draft.
pub const DRAFTING_TIMEOUT_MS: std::ops::RangeInclusive<u64> = 100..=120_000;

impl DraftingModel {
    /// The model the `LLM_BASE_URL`, `LLM_API_KEY`, `LLM_MODEL` and `LLM_TIMEOUT_MS` values
    /// describe: `None` when none of the first three is set, an error naming the variable when
    /// only some are, or when one is unusable. An empty value counts as unset, as `LLM_API_KEY=`
    /// in an env file usually means "not configured" rather than "an empty key".
    pub fn from_settings(
        base_url: Option<&str>,
        api_key: Option<&str>,
        model: Option<&str>,
        timeout_ms: Option<&str>,
    ) -> Result<Option<Self>, String> {
        // Checked even with no model, so a typo is found before the model is switched on.
        let timeout = drafting_timeout(timeout_ms)?;
        let values = (set(base_url), set(api_key), set(model));
        let (Some(base_url), Some(api_key), Some(model)) = values else {
            let missing: Vec<&str> = [
                ("LLM_BASE_URL", values.0.is_none()),
                ("LLM_API_KEY", values.1.is_none()),
                ("LLM_MODEL", values.2.is_none()),
            ]
            .into_iter()
            .filter_map(|(name, unset)| unset.then_some(name))
            .collect();
            if missing.len() == 3 {
                return Ok(None);
            }
            let (verb, pronoun) = if missing.len() == 1 {
                ("is", "it")
            } else {
                ("are", "them")
            };
            return Err(format!(
                "the drafting model needs LLM_BASE_URL, LLM_API_KEY and LLM_MODEL together; {} {verb} not set (set {pronoun} too, or unset the others to draft from templates only)",
                missing.join(" and "),
            ));
        };
        Ok(Some(Self {
            base_url: drafting_base_url(base_url)?,
            api_key: api_key.to_owned(),
            model: model.to_owned(),
            timeout,
        }))
    }

    /// Where drafts are asked for.
    pub fn chat_completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }
}

/// The key is a credential for a paid third-party service: logs and panics show it masked.
impl std::fmt::Debug for DraftingModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DraftingModel")
            .field("base_url", &self.base_url)
            .field("api_key", &"***")
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .finish()
    }
}

fn drafting_base_url(text: &str) -> Result<String, String> {
    let refused = |why: &str| {
        format!(
            "LLM_BASE_URL must be an http:// or https:// URL such as https://api.openai.com/v1 (the part before /chat/completions); `{text}` {why}"
        )
    };
    let url = url::Url::parse(text).map_err(|error| refused(&format!("is not a URL ({error})")))?;
    // The key travels as a bearer header; one in the URL would also be sent as basic auth, and
    // would show wherever the URL is printed (this message does not echo it).
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "LLM_BASE_URL must not hold a user name or password; put the key in LLM_API_KEY"
                .to_owned(),
        );
    }
    if !matches!(url.scheme(), "http" | "https") {
        return Err(refused(&format!("has the scheme `{}`", url.scheme())));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(refused("has no host"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(refused(
            "has a query or fragment, which /chat/completions cannot follow",
        ));
    }
    Ok(text.trim_end_matches('/').to_owned())
}

/// A variable's value, with blank counted as unset.
fn set(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|value| !value.is_empty())
}

fn drafting_timeout(value: Option<&str>) -> Result<Duration, String> {
    let Some(text) = set(value) else {
        return Ok(DEFAULT_DRAFTING_TIMEOUT);
    };
    text.parse::<u64>()
        .ok()
        .filter(|ms| DRAFTING_TIMEOUT_MS.contains(ms))
        .map(Duration::from_millis)
        .ok_or_else(|| {
            format!(
                "LLM_TIMEOUT_MS must be a whole number of milliseconds from {} to {}; got `{text}`",
                DRAFTING_TIMEOUT_MS.start(),
                DRAFTING_TIMEOUT_MS.end()
            )
        })
}

#[cfg(test)]
mod tests {
    use outreach_runtime::prelude::{Config, Environment};

    use super::*;

    fn parse(
        base_url: Option<&str>,
        api_key: Option<&str>,
        model: Option<&str>,
        timeout_ms: Option<&str>,
    ) -> Result<Option<DraftingModel>, String> {
        DraftingModel::from_settings(base_url, api_key, model, timeout_ms)
    }

    const URL: Option<&str> = Some("https://llm.example/v1/");
    const KEY: Option<&str> = Some("sk-secret-key");
    const MODEL: Option<&str> = Some("small-model");

    #[test]
    fn no_drafting_model_is_configured_by_default() {
        assert_eq!(parse(None, None, None, None), Ok(None));
        assert_eq!(parse(Some(""), Some(" "), None, None), Ok(None));
    }

    #[test]
    fn a_complete_drafting_model_is_read_with_the_default_timeout() {
        let model = parse(URL, KEY, MODEL, None).unwrap().unwrap();
        assert_eq!(model.base_url, "https://llm.example/v1");
        assert_eq!(model.api_key, "sk-secret-key");
        assert_eq!(model.model, "small-model");
        assert_eq!(model.timeout, DEFAULT_DRAFTING_TIMEOUT);
        assert_eq!(
            model.chat_completions_url(),
            "https://llm.example/v1/chat/completions"
        );
        let quick = parse(Some("http://127.0.0.1:9000"), KEY, MODEL, Some("250"))
            .unwrap()
            .unwrap();
        assert_eq!(quick.timeout, Duration::from_millis(250));
    }

    #[test]
    fn a_partial_drafting_model_is_refused_naming_what_is_missing() {
        let error = parse(URL, None, MODEL, None).unwrap_err();
        assert!(error.contains("LLM_API_KEY is not set"), "{error}");
        let error = parse(URL, KEY, Some("  "), None).unwrap_err();
        assert!(error.contains("LLM_MODEL is not set"), "{error}");
        let error = parse(None, KEY, None, None).unwrap_err();
        assert!(
            error.contains("LLM_BASE_URL and LLM_MODEL are not set"),
            "{error}"
        );
    }

    #[test]
    fn a_drafting_base_url_that_is_not_http_is_refused() {
        for url in [
            "api.example/v1",
            "ftp://llm.example/v1",
            "file:///tmp/llm",
            "https://llm.example/v1?key=1",
        ] {
            let error = parse(Some(url), KEY, MODEL, None).unwrap_err();
            assert!(error.starts_with("LLM_BASE_URL must be"), "{url}: {error}");
            assert!(error.contains(url), "{url}: {error}");
        }
        let error = parse(
            Some("https://user:sk-secret@llm.example/v1"),
            KEY,
            MODEL,
            None,
        )
        .unwrap_err();
        assert!(error.starts_with("LLM_BASE_URL must not hold a user name or password"));
        assert!(!error.contains("sk-secret"), "{error}");
    }

    #[test]
    fn a_drafting_timeout_outside_its_range_is_refused() {
        for timeout in ["99", "120001", "ten", "-5", "1.5"] {
            let error = parse(URL, KEY, MODEL, Some(timeout)).unwrap_err();
            assert!(
                error.starts_with("LLM_TIMEOUT_MS must be") && error.contains(timeout),
                "{timeout}: {error}"
            );
        }
        assert!(parse(URL, KEY, MODEL, Some("100")).is_ok());
        assert!(parse(URL, KEY, MODEL, Some("120000")).is_ok());
        // A typo is reported before the model is switched on.
        assert!(parse(None, None, None, Some("soon")).is_err());
    }

    #[test]
    fn drafting_model_debug_hides_the_api_key() {
        let model = parse(URL, KEY, MODEL, None).unwrap().unwrap();
        let shown = format!("{model:?}");
        assert!(!shown.contains("sk-secret-key"), "{shown}");
        assert!(shown.contains(r#"api_key: "***""#), "{shown}");
        let mut config = Config::new("http://x", Environment::default());
        config.extensions.insert(model);
        assert!(!format!("{config:?}").contains("sk-secret-key"));
    }
}
