//! Small types and helpers every resource module shares.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use outreach_runtime::prelude::{ApiError, ids};

/// What a `delete_*` action returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Deleted {
    pub id: String,
    pub deleted: bool,
}

/// The kinds of object an id names. Every lookup of a kind answers a malformed id and an id that
/// names nothing in the workspace with the same 404 sentence, so a caller cannot tell them apart
/// (nor another workspace's id from a typo).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Prospect,
    List,
    Targeting,
    Import,
    ScoringRun,
    Conversation,
    Sequence,
    Enrollment,
    Approval,
    Sender,
    Agent,
    Run,
    Event,
    WebhookEndpoint,
}

impl IdKind {
    /// The id prefix (`prs`, `lst`, ...).
    pub fn prefix(self) -> &'static str {
        match self {
            IdKind::Prospect => "prs",
            IdKind::List => "lst",
            IdKind::Targeting => "tgt",
            IdKind::Import => "imp",
            IdKind::ScoringRun => "scr",
            IdKind::Conversation => "cnv",
            IdKind::Sequence => "seq",
            IdKind::Enrollment => "enr",
            IdKind::Approval => "apr",
            IdKind::Sender => "snd",
            IdKind::Agent => "agt",
            IdKind::Run => "run",
            IdKind::Event => "evt",
            IdKind::WebhookEndpoint => "whe",
        }
    }

    /// The kind as a sentence names it.
    pub fn noun(self) -> &'static str {
        match self {
            IdKind::Prospect => "prospect",
            IdKind::List => "list",
            IdKind::Targeting => "targeting",
            IdKind::Import => "import",
            IdKind::ScoringRun => "scoring run",
            IdKind::Conversation => "conversation",
            IdKind::Sequence => "sequence",
            IdKind::Enrollment => "enrollment",
            IdKind::Approval => "approval item",
            IdKind::Sender => "sender",
            IdKind::Agent => "agent",
            IdKind::Run => "run",
            IdKind::Event => "event",
            IdKind::WebhookEndpoint => "webhook endpoint",
        }
    }

    /// The 404 for `id`: `No list with id `lst_x` in this workspace.`
    pub fn not_found(self, id: &str) -> ApiError {
        ApiError::not_found(self.noun(), id)
    }

    /// Whether `id` has this kind's shape: worth a lookup.
    pub fn is_id(self, id: &str) -> bool {
        ids::is_id(self.prefix(), id)
    }

    /// The same 404 as a lookup that finds nothing, for an id without this kind's shape.
    pub fn check(self, id: &str) -> Result<(), ApiError> {
        if self.is_id(id) {
            Ok(())
        } else {
            Err(self.not_found(id))
        }
    }
}

/// Serialises a value stored as JSON text (tags, custom fields, criteria).
pub fn json_text<T: Serialize>(value: &T) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(ApiError::internal)
}

/// For `#[serde(default, deserialize_with = "crate::common::one_or_many")]` on an
/// `Option<Vec<String>>` filter that takes one value or a list (a list over REST is
/// comma-separated): a string is a list of one. Its schema is [`one_or_many_ids_schema`].
pub fn one_or_many<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<OneOrMany>::deserialize(deserializer)? {
        None => None,
        Some(OneOrMany::One(one)) => Some(vec![one]),
        Some(OneOrMany::Many(many)) => Some(many),
    })
}

/// [`one_or_many`] for a required field: one value, or a list.
pub fn one_or_many_required<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    one_or_many(deserializer)?
        .ok_or_else(|| serde::de::Error::custom("expected an id or a list of ids, not null"))
}

/// The schema of a [`one_or_many`] filter of ids: one id, or a list of 1 to 20. One schema of
/// several types (not `anyOf`), so OpenAPI's query style (`form`, not exploded: `a,b`) applies.
pub fn one_or_many_ids_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["string", "array", "null"],
        "minLength": 1,
        "items": {"type": "string", "minLength": 1},
        "minItems": 1,
        "maxItems": 20
    })
}

/// For `#[serde(default, deserialize_with = "crate::common::patch")]` on an `Option<Option<T>>`
/// field of an update input: absent keeps the value, `null` clears it, a value sets it.
pub fn patch<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// The white space of schema patterns, spelled out: exactly what Rust's `str::trim` takes
/// (Unicode `White_Space`), which is what the service trims. A schema's `\s` means three things to
/// three readers (ECMA-262 adds U+FEFF and leaves out U+0085, Python adds U+001C to U+001F), so a
/// fuzzer reading the published schema with one of them would find values the service judges
/// otherwise; a spelled-out class reads the same everywhere. The separators are written as
/// themselves to keep the tool list small; the controls and the line and paragraph separators
/// (which YAML and old JavaScript take for line breaks) as escapes. Used inside classes:
/// `concat!("[", ws!(), "]")`, or negated.
macro_rules! ws {
    () => {
        "\\t-\\r \\x85\\u2028\\u2029\u{a0}\u{1680}\u{2000}-\u{200a}\u{202f}\u{205f}\u{3000}"
    };
}
#[cfg(test)]
pub(crate) use ws;

/// ASCII white space (tab to carriage return, and space), for what may not appear *inside* a web
/// address. Where the service trims, at the ends, the patterns use [`ws!`]; inside, other Unicode
/// spaces are left to the URL parser (which percent-encodes them), so both readings agree.
macro_rules! ascii_ws {
    () => {
        "\\t-\\r "
    };
}

/// The schema pattern of a text that must not be blank: at least one character that is not
/// white space (the service trims texts, so `"  "` is empty), and no NUL anywhere.
pub const NOT_BLANK: &str = concat!("^[^\\x00]*[^", ws!(), "\\x00][^\\x00]*$");

/// The schema pattern of an email address as `normalize::email` takes it (or a blank, which is
/// no email): something, `@`, and a domain with a dot inside it; no white space of any kind
/// (surrounding ones are trimmed) and no second `@`.
pub const EMAIL: &str = concat!(
    "^[",
    ws!(),
    "]*$|^[",
    ws!(),
    "]*",
    "[^",
    ws!(),
    "@\\x00]+@[^",
    ws!(),
    "@.\\x00][^",
    ws!(),
    "@\\x00]*\\.[^",
    ws!(),
    "@\\x00]*[^",
    ws!(),
    "@.\\x00]",
    "[",
    ws!(),
    "]*$"
);

/// The schema pattern of a profile address as `normalize::profile_url` takes it: an optional
/// `http(s)://` in any case, a host of ASCII labels whose last one starts with a letter, and a path of at
/// least one segment (each starting with a letter, digit, `_`, `~`, `+` or `-`, so that no
/// segment is `.` or `..`), then an optional query or fragment. A host of just `www.` and one
/// label is refused by the service (it drops `www.`) and cannot be said without look-ahead; it
/// is stated in the description.
pub const PROFILE_URL: &str = concat!(
    "^[",
    ws!(),
    "]*$|^[",
    ws!(),
    "]*",
    "([Hh][Tt][Tt][Pp][Ss]?://)?([A-Za-z0-9-]+\\.)+[A-Za-z][A-Za-z0-9-]*",
    "(/[A-Za-z0-9_~+-][^",
    ascii_ws!(),
    "?#/\\\\\\x00]*)+/*([?#][^",
    ascii_ws!(),
    "\\x00]*)?",
    "[",
    ws!(),
    "]*$"
);

/// The schema pattern of a company domain: a host with a dot, optionally as a URL.
pub const DOMAIN: &str = concat!(
    "^[",
    ws!(),
    "]*",
    "([Hh][Tt][Tt][Pp][Ss]?://)?([A-Za-z0-9-]+\\.)+[A-Za-z][A-Za-z0-9-]*(/[^",
    ascii_ws!(),
    "\\x00]*)?",
    "[",
    ws!(),
    "]*$"
);

/// [`DOMAIN`] or a blank (a prospect's `company_domain` left empty is no domain).
pub const OPTIONAL_DOMAIN: &str = concat!(
    "^[",
    ws!(),
    "]*$|^[",
    ws!(),
    "]*",
    "([Hh][Tt][Tt][Pp][Ss]?://)?([A-Za-z0-9-]+\\.)+[A-Za-z][A-Za-z0-9-]*(/[^",
    ascii_ws!(),
    "\\x00]*)?",
    "[",
    ws!(),
    "]*$"
);

/// Writes `text` into `out` as ` word word `: lowercase, each run of characters that are not
/// letters or digits one space, a space at each end. Empty or punctuation-only text gives `" "`.
pub fn words_into(text: &str, out: &mut String) {
    out.clear();
    out.push(' ');
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.ends_with(' ') {
            out.push(' ');
        }
    }
    if !out.ends_with(' ') {
        out.push(' ');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_and_missing_ids_get_one_sentence() {
        assert_eq!(
            IdKind::List.check("lst_x").err().map(|error| error.message),
            Some("No list with id `lst_x` in this workspace.".to_owned())
        );
        assert_eq!(
            IdKind::ScoringRun.not_found("scr_x").message,
            "No scoring run with id `scr_x` in this workspace."
        );
    }
}

/// How far back the period-bound figures look.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum Period {
    #[serde(rename = "24h")]
    Day,
    #[serde(rename = "7d")]
    Week,
    #[default]
    #[serde(rename = "30d")]
    Month,
    #[serde(rename = "90d")]
    Quarter,
    #[serde(rename = "365d")]
    Year,
    #[serde(rename = "all")]
    All,
}

impl Period {
    /// The window's length; `None` for `all`.
    pub fn length_ms(self) -> Option<i64> {
        const DAY: i64 = 24 * 60 * 60 * 1000;
        match self {
            Period::Day => Some(DAY),
            Period::Week => Some(7 * DAY),
            Period::Month => Some(30 * DAY),
            Period::Quarter => Some(90 * DAY),
            Period::Year => Some(365 * DAY),
            Period::All => None,
        }
    }
}
