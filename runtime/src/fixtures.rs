//! Parity fixtures: how to call each action once successfully and once unsuccessfully, declared
//! beside the action with [`parity!`](crate::parity) and collected like actions.
//!
//! Two checks replay them on both faces: the workspace's parity test (`tests/api/parity.rs`: REST
//! and MCP answer alike) and the TypeScript SDK check in CI (`.ci/mcp_ts_check.mjs`: every tool's
//! success and refusal through the official SDK, each result validated against its REST
//! operation's response in the OpenAPI document). Neither names an action, so adding one means its file and its test; a test
//! fails for an action without a fixture, and `tests/golden/parity_fixtures.json`, which the
//! TypeScript check reads, is this registry written out.
//!
//! A fixture's inputs name the objects of a *world*, a workspace each check fills through the API
//! (a prospect, a list, a sender, sequences in each state, ...), with templates in JSON strings:
//!
//! - `"$prospect"`: the whole string is replaced by the world's value of that name (an id, a list
//!   of ids, a number);
//! - `"Renamed ${tag}"`: `${name}` inside a longer string is replaced by the value's text;
//! - `"$missing:prs"`: a well-formed id of that kind that names nothing.
//!
//! The names a world holds are listed in [`WORLD`]; a fixture naming another does not pass the
//! registry's test.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::error::ErrorCode;

/// How a check calls an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixtureKind {
    /// Changes nothing: both faces read the same world, and must answer byte for byte alike.
    Read,
    /// Changes nothing, but its answer holds the time of the call (the dashboard's window ends
    /// then): compared with times masked.
    TimedRead,
    /// Changes state: each face acts on its own world, and the answers must be equal once ids and
    /// times are replaced by symbols.
    Write,
}

impl FixtureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::TimedRead => "timed_read",
            Self::Write => "write",
        }
    }
}

/// One action's fixture, as [`parity!`](crate::parity) registers it.
pub struct ActionFixture {
    pub action: &'static str,
    pub kind: FixtureKind,
    /// A valid input (a template).
    pub success: fn() -> Value,
    /// An input that fails (a template)...
    pub failure: fn() -> Value,
    /// ...with this code.
    pub failure_code: ErrorCode,
}

inventory::collect!(ActionFixture);

/// Declares an action's parity fixture beside it, inputs in `serde_json::json!` syntax:
///
/// ```ignore
/// parity!(get_prospect, read,
///     ok: {"id": "$prospect"},
///     fails: {"id": "$missing:prs"} => NOT_FOUND
/// );
/// ```
///
/// The kind is `read`, `timed_read` or `write` ([`FixtureKind`]) and the code one of
/// [`ErrorCode`]'s constants; the action's name is its function, so a name that is no function in
/// scope does not compile.
#[macro_export]
macro_rules! parity {
    ($action:ident, read, ok: $ok:tt, fails: $fails:tt => $code:ident $(,)?) => {
        $crate::parity!(@ $action, $crate::fixtures::FixtureKind::Read, $ok, $fails, $code);
    };
    ($action:ident, timed_read, ok: $ok:tt, fails: $fails:tt => $code:ident $(,)?) => {
        $crate::parity!(@ $action, $crate::fixtures::FixtureKind::TimedRead, $ok, $fails, $code);
    };
    ($action:ident, write, ok: $ok:tt, fails: $fails:tt => $code:ident $(,)?) => {
        $crate::parity!(@ $action, $crate::fixtures::FixtureKind::Write, $ok, $fails, $code);
    };
    (@ $action:ident, $kind:expr, $ok:tt, $fails:tt, $code:ident) => {
        const _: () = {
            #[allow(dead_code)]
            fn the_action_is_in_scope() {
                let _ = $action;
            }
            $crate::__private::inventory::submit! {
                $crate::fixtures::ActionFixture {
                    action: stringify!($action),
                    kind: $kind,
                    success: || $crate::__private::serde_json::json!($ok),
                    failure: || $crate::__private::serde_json::json!($fails),
                    failure_code: $crate::error::ErrorCode::$code,
                }
            }
        };
    };
}

/// The names a world holds, each with what it is. Both checks build worlds with exactly these.
pub const WORLD: &[(&str, &str)] = &[
    (
        "tag",
        "text unique to the world, for names that must be unique in a workspace",
    ),
    ("number", "the world's number, as text"),
    (
        "prospect",
        "a prospect with a name and a company, no profile URL or email, tagged `vip`",
    ),
    ("targeting", "a targeting"),
    ("list", "a list holding `prospect`"),
    ("import", "a finished import of one row"),
    ("run", "a scoring run of `prospect` against `targeting`"),
    (
        "sender",
        "a connected sender, the sender of `draft`, `active` and `paused`",
    ),
    ("spare_sender", "a sender that nothing uses"),
    ("status_sender", "a sender whose sandbox status may change"),
    (
        "pending_sender",
        "a sender whose invitation to `contact` is pending",
    ),
    (
        "connected_sender",
        "a sender whose invitation to `contact` was accepted",
    ),
    (
        "contact",
        "a prospect with a profile URL the sandbox network reaches",
    ),
    ("conversation", "a conversation with one inbound message"),
    ("draft", "a sequence in `draft`, with steps and `sender`"),
    ("active", "the same, `active`"),
    ("paused", "the same, `paused`"),
    (
        "reachable",
        "three prospects with profile URLs, enrolled in `active`",
    ),
    ("reachable_0", "the first, approved"),
    ("scheduled", "the first's enrollment"),
    ("pending_approval", "the second's approval item, pending"),
    (
        "paused_enrollment",
        "the third's enrollment, approved and paused",
    ),
    (
        "agent",
        "a prospector agent over `targeting`, `list` and `draft`",
    ),
    ("runner", "a writer agent over `list` and `draft`"),
    ("agent_run", "a run of `runner`, still queued"),
    (
        "event",
        "an event of the world: `paused`'s `sequence.paused`",
    ),
    (
        "webhook_endpoint",
        "a webhook endpoint taking `sequence.paused`, at a loopback port nothing answers",
    ),
    (
        "dnc_entry",
        "a do-not-contact entry of the domain `world-<number>.example`",
    ),
    (
        "variants",
        "a draft sequence whose step `s2`, a message, has A/B variants `a` and `b`",
    ),
];

/// Every registered fixture by action name; an action with two is an error (a test reads it).
pub fn fixtures() -> Result<BTreeMap<&'static str, &'static ActionFixture>, String> {
    let mut all = BTreeMap::new();
    for fixture in inventory::iter::<ActionFixture> {
        if all.insert(fixture.action, fixture).is_some() {
            return Err(format!("`{}` has two parity fixtures", fixture.action));
        }
    }
    Ok(all)
}

/// The registry as one JSON document, for checks written in other languages: the world's names
/// and, by action, `{kind, success, failure, failure_code}`.
pub fn document() -> Result<Value, String> {
    let mut actions = Map::new();
    for (name, fixture) in fixtures()? {
        actions.insert(
            name.to_owned(),
            json!({
                "kind": fixture.kind.as_str(),
                "success": (fixture.success)(),
                "failure": (fixture.failure)(),
                "failure_code": fixture.failure_code.as_str(),
            }),
        );
    }
    let world: Map<String, Value> = WORLD
        .iter()
        .map(|(name, what)| ((*name).to_owned(), Value::from(*what)))
        .collect();
    Ok(json!({"world": world, "actions": actions}))
}

/// A well-formed id of the given kind (`prs`, `lst`, ...) that names nothing.
pub fn missing_id(prefix: &str) -> String {
    format!("{prefix}_00000000000NoSuchOne")
}

/// `template` with the world's values put in (see the module's header); an unknown name is an
/// error that names it.
pub fn instantiate(
    template: &Value,
    world: &dyn Fn(&str) -> Option<Value>,
) -> Result<Value, String> {
    Ok(match template {
        Value::String(text) => {
            if let Some(prefix) = text.strip_prefix("$missing:") {
                Value::from(missing_id(prefix))
            } else if let Some(name) = text.strip_prefix('$').filter(|name| !name.starts_with('{'))
            {
                world(name).ok_or_else(|| format!("the world holds no `{name}`"))?
            } else {
                Value::from(interpolate(text, world)?)
            }
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| instantiate(item, world))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| Ok((key.clone(), instantiate(value, world)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// `text` with each `${name}` replaced by the world's value as text.
fn interpolate(text: &str, world: &dyn Fn(&str) -> Option<Value>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("`{text}` opens `${{` without closing it"))?;
        let name = &after[..end];
        match world(name).ok_or_else(|| format!("the world holds no `{name}`"))? {
            Value::String(value) => out.push_str(&value),
            value => out.push_str(&value.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(name: &str) -> Option<Value> {
        match name {
            "prospect" => Some(json!("prs_1")),
            "reachable" => Some(json!(["prs_2", "prs_3"])),
            "tag" => Some(json!("(world 1)")),
            _ => None,
        }
    }

    #[test]
    fn templates_take_whole_values_texts_and_missing_ids() {
        let template = json!({
            "id": "$prospect", "ids": "$reachable", "name": "Renamed ${tag}!",
            "gone": "$missing:lst", "limit": 5, "plain": "cost: $5"
        });
        assert_eq!(
            instantiate(&template, &world),
            Ok(json!({
                "id": "prs_1", "ids": ["prs_2", "prs_3"], "name": "Renamed (world 1)!",
                "gone": "lst_00000000000NoSuchOne", "limit": 5, "plain": "cost: $5"
            }))
        );
    }

    #[test]
    fn an_unknown_name_is_named() {
        assert_eq!(
            instantiate(&json!({"id": "$nobody"}), &world),
            Err("the world holds no `nobody`".to_owned())
        );
        assert_eq!(
            instantiate(&json!("${nobody} here"), &world),
            Err("the world holds no `nobody`".to_owned())
        );
    }
}
