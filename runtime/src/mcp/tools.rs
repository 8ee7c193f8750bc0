//! The tool list: every action as an MCP tool, worded and sized for a model's context.
//!
//! The registry's schemas and doc comments are written for both faces; this module adapts them to
//! the MCP face, where every byte of `tools/list` is read into a model's context on every
//! conversation (hosts cut long lists short, and the budget is 40 KB for the default set,
//! 90 KB for every tool):
//!
//! - A tool or a field shows the first paragraph of its doc text, its brief; the paragraphs after
//!   a blank line are the long form, which the REST reference (the OpenAPI document) shows too.
//! - Descriptions name tools, not operations or statuses: a backticked action name becomes its
//!   tool name (`list_prospects` -> `service_list_prospects`), an HTTP status becomes its error
//!   code (`a 409 \`conflict\`` -> `a \`conflict\` error`, `a 404` -> `a \`not_found\` error`), the
//!   `Idempotency-Key` header becomes the `idempotency_key` argument, and hard-wrapped lines are
//!   joined into paragraphs.
//! - Input schemas keep their structure and every description a model needs to fill them in, and
//!   leave out what only the server needs: a description repeated deeper in the same schema (the
//!   same criterion item five times) is kept once; `"default": null`, `null` in an optional
//!   field's type (but where `null` clears, [`NULL_CLEARS`]), integer widths and the NUL
//!   guards go (the server checks them with a sentence);
//!   a large shape another tool of the same list spells out is pointed at by name. No `$ref`:
//!   several hosts still hand tool schemas to models that do not resolve references.
//! - No output schemas. They were a quarter of the list, no host shows them to its model, and each
//!   answer carries its data as `structuredContent` and as text anyway. The full shape of every
//!   answer is the REST operation's response in the OpenAPI document (the same object), which the
//!   CI's TypeScript check validates each answer against.
//!
//! The input schemas are still the REST operation's inputs, field for field.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use rmcp::model::{Tool, ToolAnnotations};
use serde_json::{Map, Value};

use super::selection::Selection;
use crate::error::ErrorCode;
use crate::idempotency::MAX_KEY_LEN;
use crate::registry::{Action, FIELDS_FIELD, IDEMPOTENCY_FIELD, Registry};
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

/// What a send tool that reaches people (one that asks first, `crate::confirmations`) ends with.
const SEND_KEY_ADVICE: &str =
    "\n\nReaches people: pass an `idempotency_key`, so a retry never acts twice.";

/// What a priced tool's description ends with.
const PRICED_KEY_ADVICE: &str =
    "\n\nSpends credits: pass an `idempotency_key`, so a retry never charges twice.";

/// Appended to a tool that asks its person first (`crate::confirmations`).
const CONFIRM_ADVICE: &str = " A client with elicitation is asked to confirm first.";

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
    let mut offered: Vec<Tool> = registry
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
        .collect();
    point_at_shapes_spelled_out(&mut offered);
    offered
}

/// A property's schema at least this long (in bytes of JSON) is spelled out once per list.
const SHARED_SHAPE_MIN: usize = 400;

/// Spells out a large property shape once per list: where a tool's top-level property has the
/// shape (descriptions at any depth aside) of a property an earlier tool of the same list spells out, such
/// as `criteria` of `service_update_targeting` and of `service_create_targeting`, the later one
/// keeps its type and its own description and names where the shape is. Done on the list a
/// connection is offered, so the tool it points at is always in it. The server checks the
/// argument against the whole shape all the same.
fn point_at_shapes_spelled_out(tools: &mut [Tool]) {
    let mut spelled_out: HashMap<String, (String, String)> = HashMap::new();
    for tool in tools.iter_mut() {
        let tool_name = tool.name.to_string();
        let schema = Arc::make_mut(&mut tool.input_schema);
        let Some(Value::Object(properties)) = schema.get_mut("properties") else {
            continue;
        };
        for (name, property) in properties.iter_mut() {
            let Value::Object(property) = property else {
                continue;
            };
            let Some(shape) = shape_key(property, SHARED_SHAPE_MIN) else {
                continue;
            };
            let Some((owner, field)) = spelled_out.get(&shape) else {
                spelled_out.insert(shape, (tool_name.clone(), name.clone()));
                continue;
            };
            *property = pointer(
                property,
                &format!("The same shape as `{field}` of `{owner}`."),
            );
        }
    }
}

fn tool(action: &Action, actions: &BTreeSet<&str>) -> Tool {
    let def = action.def;
    let brief = brief(def.description);
    let mut description = if brief.is_empty() {
        def.summary.to_owned()
    } else {
        format!("{}\n\n{brief}", def.summary)
    };
    // A client may send a call again after its connection broke (the 2026-07-28 revision says
    // so); with a key, what reaches people, or spends, still happens once.
    let asks = crate::confirmations::of(def.name).is_some();
    if def.idempotent && def.scope == Scope::Send && asks {
        description.push_str(SEND_KEY_ADVICE);
    } else if def.idempotent && def.price.is_some() {
        description.push_str(PRICED_KEY_ADVICE);
    }
    if asks {
        description.push_str(CONFIRM_ADVICE);
    }
    let read_only = action.is_read_only();
    let mut annotations = ToolAnnotations::with_title(def.summary.trim_end_matches('.'));
    // Each hint is sent only where it differs from the spec's default (not read-only,
    // destructive, not idempotent, open world), or for a tool that reaches people: a missing hint
    // means the default.
    if read_only {
        annotations.read_only_hint = Some(true);
    } else {
        if !action.is_destructive() {
            annotations.destructive_hint = Some(false);
        }
        if def.idempotent {
            annotations.idempotent_hint = Some(true);
        }
    }
    // Send-scoped actions reach real people on the network, and say so in so many words (a host
    // may warn on them); the others stay in the workspace.
    if def.scope == Scope::Send {
        annotations.open_world_hint = Some(true);
        annotations.destructive_hint = Some(true);
    } else {
        annotations.open_world_hint = Some(false);
    }
    let mut tool = Tool::new(
        action.tool_name(),
        tool_description(&description, actions),
        input_schema(action),
    );
    tool.annotations = Some(annotations);
    tool.meta = super::apps::tool_meta(def.name);
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
    let place = Place { under_not: false };
    trim_input(&mut schema, &mut seen, place);
    closed_below_the_top(&mut schema);
    let mut whole = Value::Object(schema);
    portable(&mut whole);
    like_a_sibling(&mut whole);
    let Value::Object(mut schema) = whole else {
        unreachable!("an object stays an object")
    };
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        if let Some(key) = properties.get_mut(IDEMPOTENCY_FIELD) {
            // The server still refuses an empty key or one outside printable ASCII, with a
            // sentence.
            *key = serde_json::json!({"type": "string", "maxLength": MAX_KEY_LEN});
        }
        for shared in SHARED_ARGUMENTS {
            if let Some(Value::Object(argument)) = properties.get_mut(*shared) {
                argument.remove("description");
            }
        }
    }
    schema
}

/// The arguments many tools take with one meaning, said once in the server's instructions
/// ([`SHARED_ARGUMENTS_TEXT`]) rather than in every tool: `idempotency_key` alone is in 56.
const SHARED_ARGUMENTS: &[&str] = &[IDEMPOTENCY_FIELD, "limit", "offset", FIELDS_FIELD];

/// What the server's instructions say of [`SHARED_ARGUMENTS`].
pub const SHARED_ARGUMENTS_TEXT: &str = "Arguments many tools share mean the same everywhere. \
    `idempotency_key` makes a retry safe: the same key and arguments within 24 hours answer the \
    first result again and do nothing twice (a different call with a used key is refused); pass \
    one to every tool that reaches people or spends credits. `limit` and `offset` page a list: go on from the \
    previous page's `next_offset` while `has_more` is true. `fields` keeps only those fields of \
    each item (and its `id`), for a smaller page.";

/// The first paragraph of a doc text: what a tool or a field shows a model. A doc comment's later
/// paragraphs (after a blank line) are the long form, shown in the REST reference only, so the
/// brief must say what a caller needs to call it right; examples and fine print go below it.
fn brief(text: &str) -> &str {
    let text = text.trim();
    text.split_once("\n\n")
        .map_or(text, |(first, _)| first.trim_end())
}

/// A `format` a model can act on; the integer widths (`int64`, `uint32`...) tell it nothing its
/// `minimum` and `maximum` do not.
const TELLING_FORMATS: &[&str] = &["date-time", "date", "email", "uri"];

/// Where in the input schema [`trim_input`] is.
#[derive(Clone, Copy)]
struct Place {
    /// Inside a `not`, where dropping a keyword would tighten the schema, not loosen it.
    under_not: bool,
}

/// The mark of a field on which `null` means "clear it", unlike leaving it out (an update's
/// `#[serde(deserialize_with = "crate::common::patch")]` fields carry
/// `#[schemars(extend("x-null-clears" = true))]`): such a field keeps `null` in its type. The
/// mark itself is for this module and the REST reference; the tool list leaves it out.
pub const NULL_CLEARS: &str = "x-null-clears";

fn trim_input(schema: &mut Map<String, Value>, seen: &mut BTreeSet<String>, place: Place) {
    if schema.get("default") == Some(&Value::Null) {
        schema.remove("default");
    }
    // The guards against NUL (which no database column stores) and the spelled-out shapes of an
    // email or a profile URL are checked by the server with a sentence; as patterns they are
    // hundreds of bytes a model cannot read.
    if !place.under_not
        && schema
            .get("pattern")
            .and_then(Value::as_str)
            .is_some_and(|pattern| pattern.contains("\\x00"))
    {
        schema.remove("pattern");
    }
    if !place.under_not
        && schema
            .get("format")
            .and_then(Value::as_str)
            .is_some_and(|format| !TELLING_FORMATS.contains(&format))
    {
        schema.remove("format");
    }
    if !place.under_not {
        optional_is_not_null(schema);
    }
    schema.remove(NULL_CLEARS);
    let below = |key: &str| Place {
        under_not: place.under_not || key == "not",
    };
    if let Some(Value::String(description)) = schema.get_mut("description") {
        let kept = join_lines(brief(description));
        if seen.insert(kept.clone()) {
            *description = kept;
        } else {
            schema.remove("description");
        }
    }
    for (key, value) in schema.iter_mut() {
        let place = below(key);
        match (key.as_str(), value) {
            ("properties" | "$defs", Value::Object(properties)) => {
                for property in properties.values_mut() {
                    if let Value::Object(property) = property {
                        trim_input(property, seen, place);
                    }
                }
            }
            (_, Value::Object(sub)) => trim_input(sub, seen, place),
            (_, Value::Array(items)) => {
                for item in items {
                    if let Value::Object(item) = item {
                        trim_input(item, seen, place);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A nested field's shape at least this long (in bytes of JSON) is spelled out once among its
/// siblings.
const SIBLING_SHAPE_MIN: usize = 150;

/// Spells out a shape once among sibling fields: where fields of one object have the same shape
/// (descriptions at any depth and their defaults aside), such as a sender's seven `working_hours` days or a
/// targeting's criterion groups, the later ones keep their type, default and description and say
/// `Like \`monday\`.` The server checks each against the whole shape all the same.
fn like_a_sibling(value: &mut Value) {
    match value {
        Value::Object(schema) => {
            for child in schema.values_mut() {
                like_a_sibling(child);
            }
            let Some(Value::Object(properties)) = schema.get_mut("properties") else {
                return;
            };
            let mut first: HashMap<String, String> = HashMap::new();
            for (name, property) in properties.iter_mut() {
                let Value::Object(property) = property else {
                    continue;
                };
                let Some(shape) = shape_key(property, SIBLING_SHAPE_MIN) else {
                    continue;
                };
                let Some(sibling) = first.get(&shape) else {
                    first.insert(shape, name.clone());
                    continue;
                };
                *property = pointer(property, &format!("Like `{sibling}`."));
            }
        }
        Value::Array(items) => items.iter_mut().for_each(like_a_sibling),
        _ => {}
    }
}

/// What two properties are compared by when one may point at the other: the property without its
/// default and its descriptions at any depth, as JSON; `None` when the property is shorter than
/// `least` bytes, too small to be worth a pointer.
fn shape_key(property: &Map<String, Value>, least: usize) -> Option<String> {
    if Value::Object(property.clone()).to_string().len() < least {
        return None;
    }
    let mut shape = property.clone();
    shape.remove("default");
    Some(undescribed(Value::Object(shape)).to_string())
}

/// What stands in for `property` when its shape is spelled out elsewhere: its type, default and
/// own description, followed by `where_it_is`.
fn pointer(property: &Map<String, Value>, where_it_is: &str) -> Map<String, Value> {
    let mut pointer = Map::new();
    for keyword in ["type", "default"] {
        if let Some(value) = property.get(keyword) {
            pointer.insert(keyword.to_owned(), value.clone());
        }
    }
    let own = property
        .get("description")
        .and_then(Value::as_str)
        .map(|text| format!("{text} "))
        .unwrap_or_default();
    pointer.insert(
        "description".to_owned(),
        Value::String(format!("{own}{where_it_is}")),
    );
    pointer
}

/// A schema without its descriptions, at any depth: what two shapes are compared by.
fn undescribed(value: Value) -> Value {
    match value {
        Value::Object(schema) => Value::Object(
            schema
                .into_iter()
                .filter(|(key, value)| key != "description" || !value.is_string())
                .map(|(key, value)| (key, undescribed(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(undescribed).collect()),
        other => other,
    }
}

/// The keywords that apply to a value of one JSON type, for splitting a `type` list.
const KEYWORDS_OF_TYPE: &[(&str, &[&str])] = &[
    ("string", &["minLength", "maxLength", "pattern", "format"]),
    (
        "array",
        &[
            "items",
            "prefixItems",
            "minItems",
            "maxItems",
            "uniqueItems",
            "contains",
        ],
    ),
    (
        "object",
        &[
            "properties",
            "required",
            "additionalProperties",
            "propertyNames",
            "minProperties",
            "maxProperties",
        ],
    ),
    (
        "integer",
        &[
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        ],
    ),
    (
        "number",
        &[
            "minimum",
            "maximum",
            "exclusiveMinimum",
            "exclusiveMaximum",
            "multipleOf",
        ],
    ),
];

/// Writes what is left of the schema in the most portable spelling, which the Inspector's schema
/// check asks for: a `type` list (`["string", "array"]`, or a required or nested `["string",
/// "null"]`) becomes `anyOf` branches of one type each, each with its own keywords (hosts that map
/// tool schemas onto a single-type dialect, such as Gemini's, refuse a list); and a
/// `propertyNames` left with no check at all (its NUL guard gone) goes.
fn portable(value: &mut Value) {
    match value {
        Value::Object(schema) => {
            for child in schema.values_mut() {
                portable(child);
            }
            if schema
                .get("propertyNames")
                .and_then(Value::as_object)
                .is_some_and(|names| names.keys().all(|key| key == "description"))
            {
                schema.remove("propertyNames");
            }
            let Some(Value::Array(kinds)) = schema.get("type").cloned() else {
                return;
            };
            if schema.contains_key("anyOf") || schema.contains_key("oneOf") {
                return;
            }
            schema.remove("type");
            let branches: Vec<Value> = kinds
                .iter()
                .map(|kind| {
                    let mut branch = Map::from_iter([("type".to_owned(), kind.clone())]);
                    let own = KEYWORDS_OF_TYPE
                        .iter()
                        .find(|(name, _)| Some(*name) == kind.as_str())
                        .map_or(&[][..], |(_, keywords)| *keywords);
                    for keyword in own {
                        if let Some(value) = schema.get(*keyword) {
                            branch.insert((*keyword).to_owned(), value.clone());
                        }
                    }
                    Value::Object(branch)
                })
                .collect();
            for (_, keywords) in KEYWORDS_OF_TYPE {
                for keyword in *keywords {
                    schema.remove(*keyword);
                }
            }
            schema.insert("anyOf".to_owned(), Value::Array(branches));
        }
        Value::Array(items) => items.iter_mut().for_each(portable),
        _ => {}
    }
}

/// Leaves `additionalProperties: false` on the input object only: a nested object's unknown
/// field is refused by the server with a sentence naming it, and saying so on every nested object
/// cost a few KB of every list.
fn closed_below_the_top(schema: &mut Map<String, Value>) {
    let Some(Value::Object(properties)) = schema.get_mut("properties") else {
        return;
    };
    for property in properties.values_mut() {
        open_objects(property);
    }
}

fn open_objects(value: &mut Value) {
    match value {
        Value::Object(schema) => {
            if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                schema.remove("additionalProperties");
            }
            for child in schema.values_mut() {
                open_objects(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(open_objects),
        _ => {}
    }
}

/// An optional field is left out rather than sent as `null`, so its schema need not allow `null`:
/// `"type": ["string", "null"]` becomes `"type": "string"` (and `null` leaves its enum and its
/// `anyOf`). The server takes a `null` there as absent. Not for a field marked [`NULL_CLEARS`],
/// where `null` clears. Hosts and the Inspector handle a single type best, and it is shorter.
fn optional_is_not_null(schema: &mut Map<String, Value>) {
    let required: BTreeSet<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let Some(Value::Object(properties)) = schema.get_mut("properties") else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        if required.contains(name) {
            continue;
        }
        let Value::Object(property) = property else {
            continue;
        };
        if property.get(NULL_CLEARS) == Some(&Value::Bool(true)) {
            continue;
        }
        without_null(property);
    }
}

fn without_null(property: &mut Map<String, Value>) {
    let null = Value::String("null".to_owned());
    if let Some(Value::Array(kinds)) = property.get_mut("type") {
        kinds.retain(|kind| *kind != null);
        if let [only] = kinds.as_slice() {
            let only = only.clone();
            property.insert("type".to_owned(), only);
        }
    }
    if let Some(Value::Array(values)) = property.get_mut("enum") {
        values.retain(|value| !value.is_null());
    }
    let null_schema = serde_json::json!({"type": "null"});
    if let Some(Value::Array(options)) = property.get_mut("anyOf") {
        options.retain(|option| *option != null_schema);
        if let [Value::Object(only)] = options.as_slice() {
            let only = only.clone();
            property.remove("anyOf");
            for (key, value) in only {
                property.entry(key).or_insert(value);
            }
        }
    }
}

/// The field a replayed answer of an idempotent tool carries in `structuredContent`.
pub const REPLAYED_FIELD: &str = "replayed";

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

    fn object(value: Value) -> Map<String, Value> {
        let Value::Object(map) = value else {
            panic!("not an object: {value}")
        };
        map
    }

    fn trimmed(schema: Value) -> Value {
        let mut schema = object(schema);
        let place = Place { under_not: false };
        trim_input(&mut schema, &mut BTreeSet::new(), place);
        let mut schema = Value::Object(schema);
        portable(&mut schema);
        schema
    }

    #[test]
    fn an_optional_field_drops_null_but_one_that_null_clears_keeps_it() {
        let input = json!({
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": ["string", "null"]},
                "headline": {"type": ["string", "null"], "maxLength": 10},
                "tier": {"enum": ["a", "b", null], "type": ["string", "null"]},
                "title": {"type": ["string", "null"], "maxLength": 10, NULL_CLEARS: true},
            },
        });
        assert_eq!(
            trimmed(input),
            json!({
                "type": "object",
                "required": ["name"],
                "properties": {
                    // Required and nullable: one branch per type.
                    "name": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    "headline": {"type": "string", "maxLength": 10},
                    "tier": {"enum": ["a", "b"], "type": "string"},
                    // `null` clears: it stays, spelled as branches, and the mark goes.
                    "title": {"anyOf": [{"type": "string", "maxLength": 10}, {"type": "null"}]},
                },
            })
        );
    }

    #[test]
    fn nul_guards_and_integer_widths_go_but_not_under_a_not() {
        let input = json!({
            "type": "object",
            "properties": {
                "q": {"type": "string", "pattern": "^[^\\x00]*$"},
                "n": {"type": "integer", "format": "int64"},
                "at": {"type": "string", "format": "date-time"},
            },
            "not": {"properties": {"q": {"type": "string", "pattern": "^[^\\x00]*$"}}},
        });
        assert_eq!(
            trimmed(input),
            json!({
                "type": "object",
                "properties": {
                    "q": {"type": "string"},
                    "n": {"type": "integer"},
                    "at": {"type": "string", "format": "date-time"},
                },
                "not": {"properties": {"q": {"type": "string", "pattern": "^[^\\x00]*$"}}},
            })
        );
    }

    #[test]
    fn a_type_list_becomes_branches_with_their_own_keywords() {
        let mut schema = json!({
            "description": "One or many.",
            "type": ["string", "array"],
            "minLength": 1,
            "items": {"type": "string"},
            "maxItems": 100,
        });
        portable(&mut schema);
        assert_eq!(
            schema,
            json!({
                "description": "One or many.",
                "anyOf": [
                    {"type": "string", "minLength": 1},
                    {"type": "array", "items": {"type": "string"}, "maxItems": 100},
                ],
            })
        );
    }

    #[test]
    fn a_large_shape_is_spelled_out_once_per_list_and_pointed_at_after() {
        let big = json!({"type": "object", "properties": {"x": {"type": "string", "description": "y".repeat(SHARED_SHAPE_MIN)}}});
        let tool = |name: &'static str, description: &str| {
            let mut shape = big.clone();
            shape["description"] = json!(description);
            Tool::new(
                name,
                "",
                object(json!({"type": "object", "properties": {"criteria": shape}})),
            )
        };
        let mut tools = vec![
            tool("service_create_targeting", "The criteria."),
            tool("service_update_targeting", "Replaces them."),
        ];
        point_at_shapes_spelled_out(&mut tools);
        assert_eq!(
            tools[0].input_schema["properties"]["criteria"]["properties"],
            big["properties"]
        );
        assert_eq!(
            Value::Object(tools[1].input_schema.as_ref().clone())["properties"]["criteria"],
            json!({
                "type": "object",
                "description": "Replaces them. The same shape as `criteria` of `service_create_targeting`.",
            })
        );
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
}
