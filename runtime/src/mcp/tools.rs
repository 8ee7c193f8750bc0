//! The tool list: every action as an MCP tool, worded and sized for a model's context.
//!
//! The registry's schemas and doc comments are written for both faces; this module adapts them to
//! the MCP face, where every byte of `tools/list` is read into a model's context on every
//! conversation and a client validates `structuredContent` against `outputSchema`:
//!
//! - Descriptions name tools, not operations or statuses: a backticked action name becomes its
//!   tool name (`list_prospects` -> `service_list_prospects`), an HTTP status becomes its error
//!   code (`a 409 \`conflict\`` -> `a \`conflict\` error`, `a 404` -> `a \`not_found\` error`), the
//!   `Idempotency-Key` header becomes the `idempotency_key` argument, and hard-wrapped lines are
//!   joined into paragraphs.
//! - Input schemas keep their structure and every description a model needs to fill them in, but
//!   a description repeated deeper in the same schema (the same criterion item five times) is
//!   kept once, and `"default": null` (which says nothing an optional field does not) is dropped.
//!   No `$ref`: several hosts still hand tool schemas to models that do not resolve references.
//! - Output schemas are loosened, never tightened, so a valid answer always validates: the top
//!   level keeps its property names, types, enums and required fields; nested objects and arrays
//!   keep only their type; descriptions, formats, titles and defaults go; `oneOf` becomes `anyOf`.
//!   The full shapes stay in the OpenAPI document, and each answer carries its data anyway.
//!
//! `tools/list` for today's tools stays under 60 KB (a test measures it); the input schemas are
//! still the REST operation's inputs, field for field.

use std::collections::BTreeSet;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value};

use super::selection::Selection;
use crate::error::ErrorCode;
use crate::registry::{Action, Registry};
use crate::scope::Scope;

/// Builds the tool list once: name, description, schemas and annotations for every action.
pub fn tools(registry: &Registry) -> Vec<Tool> {
    let actions: BTreeSet<&str> = registry.actions().iter().map(Action::name).collect();
    registry
        .actions()
        .iter()
        .map(|action| tool(action, &actions))
        .collect()
}

/// What a send tool's description ends with.
const SEND_KEY_ADVICE: &str = "\n\nThis reaches people: pass an `idempotency_key`, so that the call sent \
    again (after a broken connection, say) answers the first result instead of acting twice.";

/// The tools a caller with `scope` is offered under `selection`, in the registry's (fixed) order:
/// `tools` is [`tools`] of `registry`, one per action in the same order. A tool is offered when
/// the selection includes it and the scope allows it; a priced tool's `estimate_only` call and a
/// declared preview (`dry_run`) need only `read`, so a caller below the tool's scope is offered it
/// with a line saying so.
pub fn offered(
    registry: &Registry,
    tools: &[Tool],
    scope: Scope,
    selection: Selection,
) -> Vec<Tool> {
    registry
        .actions()
        .iter()
        .zip(tools)
        .filter(|(action, _)| selection.includes(action))
        .filter_map(|(action, tool)| {
            if action.def.scope <= scope {
                return Some(tool.clone());
            }
            let switch = action.preview_switch()?;
            let mut tool = tool.clone();
            let description = format!(
                "{}\n\nYour credential's scopes allow only `{switch}: true` here: it answers what the \
                 call would do and changes nothing. Doing it needs the `{}` scope.",
                tool.description.as_deref().unwrap_or_default(),
                action.def.scope.as_str()
            );
            tool.description = Some(description.into());
            Some(tool)
        })
        .collect()
}

fn tool(action: &Action, actions: &BTreeSet<&str>) -> Tool {
    let def = action.def;
    let mut description = if def.description.is_empty() {
        def.summary.to_owned()
    } else {
        format!("{}\n\n{}", def.summary, def.description)
    };
    // A client may send a call again after its connection broke (the 2026-07-28 revision says
    // so); with a key, what reaches people still happens once.
    if def.scope == Scope::Send && def.idempotent {
        description.push_str(SEND_KEY_ADVICE);
    }
    let read_only = action.is_read_only();
    let mut annotations = ToolAnnotations::with_title(def.summary.trim_end_matches('.'))
        .read_only(read_only)
        // Send-scoped actions reach real people on the network.
        .open_world(def.scope == Scope::Send);
    if !read_only {
        annotations = annotations
            .destructive(action.is_destructive())
            .idempotent(def.idempotent);
    }
    let mut tool = Tool::new(
        action.tool_name(),
        tool_description(&description, actions),
        input_schema(action),
    );
    tool.output_schema = Some(output_schema(action).into());
    tool.annotations = Some(annotations);
    tool
}

/// The tool's input schema: the action's MCP input with repeated descriptions and null defaults
/// taken out (see the module header).
pub fn input_schema(action: &Action) -> Map<String, Value> {
    let mut schema = action.mcp_input_schema.as_ref().clone();
    // The Rust type's name and "The input of `x`." tell a model nothing the tool does not.
    schema.remove("description");
    schema.remove("title");
    let mut seen = BTreeSet::new();
    trim_input(&mut schema, &mut seen);
    schema
}

fn trim_input(schema: &mut Map<String, Value>, seen: &mut BTreeSet<String>) {
    if schema.get("default") == Some(&Value::Null) {
        schema.remove("default");
    }
    if let Some(Value::String(description)) = schema.get("description")
        && !seen.insert(description.clone())
    {
        schema.remove("description");
    }
    for (key, value) in schema.iter_mut() {
        match (key.as_str(), value) {
            ("properties" | "$defs", Value::Object(properties)) => {
                for property in properties.values_mut() {
                    if let Value::Object(property) = property {
                        trim_input(property, seen);
                    }
                }
            }
            (_, Value::Object(sub)) => trim_input(sub, seen),
            (_, Value::Array(items)) => {
                for item in items {
                    if let Value::Object(item) = item {
                        trim_input(item, seen);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The field a replayed answer of an idempotent tool carries in `structuredContent`.
pub const REPLAYED_FIELD: &str = "replayed";

/// The tool's output schema: the action's output schema loosened to its top level (see the
/// module header), so whatever matches the full schema matches this one. An idempotent tool's
/// also declares `replayed`, which its answer carries when it is the stored answer of an
/// earlier call with the same `idempotency_key`.
pub fn output_schema(action: &Action) -> Map<String, Value> {
    let mut schema = loosen(action.output_schema.as_ref(), 0);
    if action.def.idempotent {
        allow_replayed(&mut schema);
        if let Value::Object(properties) = schema
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()))
        {
            properties.insert(
                REPLAYED_FIELD.to_owned(),
                serde_json::json!({
                    "type": "boolean",
                    "description": "Present and true when this is the stored answer of an earlier call with the same `idempotency_key`; nothing was done again."
                }),
            );
        }
    }
    schema
}

/// Lets `replayed` through a closed object and each of its alternatives.
fn allow_replayed(schema: &mut Map<String, Value>) {
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        schema.remove("additionalProperties");
    }
    for key in ["anyOf", "allOf"] {
        if let Some(Value::Array(options)) = schema.get_mut(key) {
            for option in options {
                if let Value::Object(option) = option {
                    allow_replayed(option);
                }
            }
        }
    }
}

/// Keywords that only describe or narrow a value; dropping them never rejects a valid answer.
const DESCRIPTIVE: &[&str] = &[
    "description",
    "format",
    "title",
    "default",
    "examples",
    "$schema",
];

fn loosen(schema: &Map<String, Value>, depth: usize) -> Map<String, Value> {
    let nested = schema.contains_key("properties")
        || schema.contains_key("items")
        || schema.contains_key("additionalProperties");
    if depth >= 1 && nested {
        return schema
            .get("type")
            .map(|kind| Map::from_iter([("type".to_owned(), kind.clone())]))
            .unwrap_or_default();
    }
    let mut out = Map::new();
    for (key, value) in schema {
        if DESCRIPTIVE.contains(&key.as_str()) {
            continue;
        }
        let value = match (key.as_str(), value) {
            ("properties", Value::Object(properties)) => Value::Object(
                properties
                    .iter()
                    .map(|(name, property)| (name.clone(), loosen_value(property, depth + 1)))
                    .collect(),
            ),
            ("items" | "additionalProperties", value) => loosen_value(value, depth + 1),
            ("oneOf" | "anyOf" | "allOf", Value::Array(options)) => Value::Array(
                options
                    .iter()
                    .map(|option| loosen_value(option, depth))
                    .collect(),
            ),
            (_, value) => value.clone(),
        };
        // Loosened alternatives may overlap, which `oneOf` refuses and `anyOf` allows.
        let key = if key == "oneOf" {
            "anyOf"
        } else {
            key.as_str()
        };
        out.insert(key.to_owned(), value);
    }
    out
}

fn loosen_value(value: &Value, depth: usize) -> Value {
    match value {
        Value::Object(schema) => Value::Object(loosen(schema, depth)),
        other => other.clone(),
    }
}

/// Rewrites an action's doc text for the MCP face (see the module header).
pub fn tool_description(text: &str, actions: &BTreeSet<&str>) -> String {
    let text = join_lines(text).replace("`Idempotency-Key`", "`idempotency_key`");
    let text = rename_actions(&text, actions);
    statuses_to_codes(&text)
}

/// Joins hard-wrapped lines into paragraphs; blank lines and list items keep their breaks.
fn join_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (index, line) in text.lines().enumerate() {
        let starts_block = line.is_empty()
            || line.starts_with("- ")
            || line.starts_with("* ")
            || line.starts_with('|')
            || line.starts_with("  ");
        if index > 0 {
            let previous_blank = out.ends_with('\n') || out.is_empty();
            if starts_block || previous_blank {
                out.push('\n');
            } else {
                out.push(' ');
            }
        }
        out.push_str(line.trim_end());
    }
    out
}

/// `` `list_prospects` `` -> `` `service_list_prospects` `` for every action name in backticks.
fn rename_actions(text: &str, actions: &BTreeSet<&str>) -> String {
    let mut out = String::with_capacity(text.len());
    for (index, piece) in text.split('`').enumerate() {
        if index > 0 {
            out.push('`');
        }
        if index % 2 == 1 && actions.contains(piece) {
            out.push_str("service_");
        }
        out.push_str(piece);
    }
    out
}

/// Replaces HTTP error statuses with the error codes a tool result carries: `a 409 `conflict``
/// becomes `a `conflict` error`, a bare `a 404` becomes `a `not_found` error`, `400s` becomes
/// `` `invalid_request` errors``. Only the statuses of the error table count, as whole words.
fn statuses_to_codes(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut index = 0;
    while index < words.len() {
        let word = words[index];
        let (open, rest) = word
            .strip_prefix('(')
            .map_or(("", word), |rest| ("(", rest));
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let tail = &rest[digits.len()..];
        let plural = tail.starts_with('s');
        let tail = if plural { &tail[1..] } else { tail };
        let status = (digits.len() == 3 && !tail.starts_with(|c: char| c.is_alphanumeric()))
            .then(|| digits.parse::<u16>().ok())
            .flatten()
            .and_then(default_code);
        let Some(default) = status else {
            out.push(word.to_owned());
            index += 1;
            continue;
        };
        let errors = if plural { "errors" } else { "error" };
        // `409 `conflict`` names its code in the next word; a bare status takes the table's.
        let next = words.get(index + 1).copied().unwrap_or_default();
        let named = tail.is_empty()
            && next.starts_with('`')
            && next[1..]
                .split('`')
                .next()
                .is_some_and(|code| ErrorCode::named(code).is_some());
        let phrase = if named {
            let code_end = next[1..].find('`').map_or(next.len(), |end| end + 2);
            index += 1;
            format!("{open}{} {errors}{}", &next[..code_end], &next[code_end..])
        } else {
            format!("{open}`{default}` {errors}{tail}")
        };
        if let Some(article) = out.last_mut()
            && (article == "a" || article == "A")
            && phrase
                .trim_start_matches(['(', '`'])
                .starts_with(['a', 'e', 'i', 'o', 'u'])
        {
            article.push('n');
        }
        out.push(phrase);
        index += 1;
    }
    out.join(" ")
}

/// The code an HTTP error status stands for when the text names none.
fn default_code(status: u16) -> Option<&'static str> {
    ErrorCode::all()
        .iter()
        .find(|code| code.status().as_u16() == status && status >= 400)
        .map(|code| code.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn describe(text: &str) -> String {
        tool_description(
            text,
            &BTreeSet::from(["list_prospects", "start_scoring_run"]),
        )
    }

    #[test]
    fn descriptions_name_tools_and_codes_not_operations_and_statuses() {
        assert_eq!(
            describe("A duplicate is a 409 `conflict` whose `existing_id` names it."),
            "A duplicate is a `conflict` error whose `existing_id` names it."
        );
        assert_eq!(
            describe("An unknown `list_id` is a 404; empty lists are 400s."),
            "An unknown `list_id` is a `not_found` error; empty lists are `invalid_request` errors."
        );
        assert_eq!(
            describe("A missing targeting is a 400.\nLike `start_scoring_run`."),
            "A missing targeting is an `invalid_request` error. Like `service_start_scoring_run`."
        );
        assert_eq!(
            describe("Limits: 100,000 rows (413 `payload_too_large` past it), `limit` 1 to 200."),
            "Limits: 100,000 rows (`payload_too_large` error past it), `limit` 1 to 200."
        );
        assert_eq!(
            describe("Honours `Idempotency-Key`.\n\nSee `list_prospects`."),
            "Honours `idempotency_key`.\n\nSee `service_list_prospects`."
        );
    }

    #[test]
    fn output_schemas_keep_the_top_level_and_only_loosen() {
        let schema = json!({
            "type": "object",
            "title": "Page",
            "description": "A page.",
            "required": ["items", "total"],
            "properties": {
                "total": {"type": "integer", "format": "int64", "description": "How many."},
                "tier": {"enum": ["a", "b", null], "type": ["string", "null"]},
                "items": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}},
            },
            "oneOf": [{"required": ["total"]}],
        });
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        assert_eq!(
            Value::Object(loosen(&schema, 0)),
            json!({
                "type": "object",
                "required": ["items", "total"],
                "properties": {
                    "total": {"type": "integer"},
                    "tier": {"enum": ["a", "b", null], "type": ["string", "null"]},
                    "items": {"type": "array"},
                },
                "anyOf": [{"required": ["total"]}],
            })
        );
    }
}
