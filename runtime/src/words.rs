//! Decoding errors in JSON words, for people and models who write JSON, not Rust.
//!
//! serde reports a wrong value in the words of the Rust type it was decoding into (`invalid
//! type: map, expected a sequence`, `expected u32`, `expected struct Criterion`), which says
//! nothing to a caller who only sees the API's JSON. [`decode_message`] rewrites such a message
//! for the field at fault: what was expected comes from the action's input schema at that path
//! when it can be found there ("a whole number between 1 and 200", "a list of objects like
//! {"value": ..., "points": ...}"), else from a translation of serde's own words; what was
//! sent is said as JSON ("an object", "the string \"CTO\""). Messages written by hand in a
//! custom deserializer (`limit` out of range) are kept as they are.
//!
//! This is a foundation: it knows JSON Schema and serde's phrasing, nothing of the API.

use serde_json::{Map, Value};

/// The sentence for a decoding error at `path` (serde_path_to_error's `a.b[0].c`, `.` for the
/// root) whose serde message is `inner`, given the input's JSON Schema.
///
/// A flattened struct (paging's `limit` and `offset`) loses serde's path; when the message then
/// names a top-level field in backticks, the field, its schema and the value sent in `input` make
/// the sentence instead.
pub fn decode_message(
    path: &str,
    inner: &str,
    schema: Option<&Map<String, Value>>,
    input: Option<&Value>,
) -> String {
    let at = |path: &str| schema.and_then(|root| schema_at(root, path));
    if path == "."
        && let Some(field) = between(inner, "`", "`")
        && let Some(property) = at(field)
        && let Some(value) = input.and_then(|input| input.get(field))
    {
        return format!(
            "Invalid field `{field}`: expected {}, got {}.",
            describe(property),
            value_words(value)
        );
    }
    if let Some(field) = between(inner, "missing field `", "`") {
        let full = join_path(path, field);
        let expected = at(&full).map(|schema| format!(": expected {}", describe(schema)));
        return format!("Missing field `{full}`{}.", expected.unwrap_or_default());
    }
    let variant = between(inner, "unknown variant `", "`").map(|name| format!("string \"{name}\""));
    let (unexpected, expected) = match split_invalid(inner) {
        Some(parts) => parts,
        None if variant.is_some() && at(path).is_some() => {
            (variant.as_deref().unwrap_or_default(), "")
        }
        None if inner.starts_with("data did not match any variant") => ("", ""),
        None if path == "." => return format!("Invalid input: {}.", trim_dot(inner)),
        None => {
            let inner = trim_dot(inner);
            // A custom message that already names the field reads best alone.
            let named = path
                .rsplit(['.', '['])
                .next()
                .is_some_and(|last| inner.contains(&format!("`{last}`")));
            return if named {
                format!("Invalid field `{path}`: {inner}.")
            } else {
                format!("Invalid field `{path}`: {}.", rust_words(inner))
            };
        }
    };
    let expected = at(path)
        .map(describe)
        .unwrap_or_else(|| rust_words(expected));
    let got = if unexpected.is_empty() {
        String::new()
    } else {
        format!(", got {}", json_words(unexpected))
    };
    if path == "." {
        format!("Invalid input: expected {expected}{got}.")
    } else {
        format!("Invalid field `{path}`: expected {expected}{got}.")
    }
}

/// `invalid type: X, expected Y` and `invalid value: X, expected Y` as `(X, Y)`.
fn split_invalid(inner: &str) -> Option<(&str, &str)> {
    let rest = inner
        .strip_prefix("invalid type: ")
        .or_else(|| inner.strip_prefix("invalid value: "))?;
    let (unexpected, expected) = rest.split_once(", expected ")?;
    Some((unexpected, trim_dot(expected)))
}

fn trim_dot(text: &str) -> &str {
    text.trim().trim_end_matches('.')
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = text.strip_prefix(start)?;
    rest.split_once(end).map(|(inside, _)| inside)
}

fn join_path(parent: &str, field: &str) -> String {
    if parent == "." || parent.is_empty() {
        field.to_owned()
    } else {
        format!("{parent}.{field}")
    }
}

/// The subschema at a serde_path_to_error path, following `properties`, `items` and the
/// non-null branch of nullable `anyOf`s.
pub fn schema_at<'a>(root: &'a Map<String, Value>, path: &str) -> Option<&'a Map<String, Value>> {
    let mut schema = root;
    if path == "." {
        return Some(schema);
    }
    for segment in segments(path) {
        schema = non_null(schema);
        // Of alternatives (`anyOf: [{object}, {array}]`), the one the segment can enter.
        let next = |schema: &'a Map<String, Value>| match segment {
            Segment::Field(name) => schema.get("properties")?.get(name)?.as_object(),
            Segment::Index => schema.get("items")?.as_object(),
        };
        schema = next(schema).or_else(|| {
            alternatives(schema)?
                .iter()
                .filter_map(Value::as_object)
                .find_map(next)
        })?;
    }
    Some(non_null(schema))
}

enum Segment<'a> {
    Field(&'a str),
    Index,
}

fn segments(path: &str) -> Vec<Segment<'_>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (name, indexes) = part
            .split_once('[')
            .map_or((part, ""), |(name, rest)| (name, rest));
        if !name.is_empty() {
            out.push(Segment::Field(name));
        }
        out.extend(indexes.matches(']').map(|_| Segment::Index));
    }
    out
}

fn alternatives(schema: &Map<String, Value>) -> Option<&Vec<Value>> {
    schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array)
}

/// `anyOf: [X, {type: null}]` as `X`.
fn non_null(schema: &Map<String, Value>) -> &Map<String, Value> {
    let Some(Value::Array(options)) = schema.get("anyOf").or_else(|| schema.get("oneOf")) else {
        return schema;
    };
    let mut concrete = options
        .iter()
        .filter_map(Value::as_object)
        .filter(|option| option.get("type") != Some(&Value::String("null".into())));
    match (concrete.next(), concrete.next()) {
        (Some(only), None) => only,
        _ => schema,
    }
}

/// What a schema accepts, in JSON words.
pub fn describe(schema: &Map<String, Value>) -> String {
    let schema = non_null(schema);
    if let Some(options) = alternatives(schema) {
        let words: Vec<String> = options
            .iter()
            .filter_map(Value::as_object)
            .filter(|option| option.get("type") != Some(&Value::String("null".into())))
            .map(describe)
            .collect();
        return words.join(" or ");
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        let values: Vec<String> = values
            .iter()
            .filter(|value| !value.is_null())
            .map(Value::to_string)
            .collect();
        return format!("one of {}", values.join(", "));
    }
    match main_type(schema) {
        Some("integer") => whole_number(schema),
        Some("number") => "a number".to_owned(),
        Some("boolean") => "true or false".to_owned(),
        Some("string") => match schema.get("format").and_then(Value::as_str) {
            Some("date-time") => "a date-time string like \"2025-01-31T09:00:00Z\"".to_owned(),
            _ => "a string".to_owned(),
        },
        Some("array") => match schema.get("items").and_then(Value::as_object).map(non_null) {
            Some(items) => match plural(items) {
                Some(words) => format!("a list of {words}"),
                None => "a list".to_owned(),
            },
            None => "a list".to_owned(),
        },
        Some("object") if schema.contains_key("properties") => {
            format!("an object like {}", object_shape(schema))
        }
        Some("object") => "an object".to_owned(),
        _ => "a valid value".to_owned(),
    }
}

/// The items of a list in JSON words: `strings`, `objects like {...}`, `strings or objects like
/// {...}`.
fn plural(items: &Map<String, Value>) -> Option<String> {
    if let Some(options) = alternatives(items) {
        let words: Option<Vec<String>> = options
            .iter()
            .filter_map(Value::as_object)
            .filter(|option| option.get("type") != Some(&Value::String("null".into())))
            .map(plural)
            .collect();
        return words.map(|words| words.join(" or "));
    }
    match main_type(items) {
        Some("object") if items.contains_key("properties") => {
            Some(format!("objects like {}", object_shape(items)))
        }
        Some("integer") => Some("whole numbers".to_owned()),
        Some("string") => Some("strings".to_owned()),
        _ => None,
    }
}

fn main_type(schema: &Map<String, Value>) -> Option<&str> {
    match schema.get("type")? {
        Value::String(kind) => Some(kind),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|kind| *kind != "null"),
        _ => None,
    }
}

fn whole_number(schema: &Map<String, Value>) -> String {
    let bound = |key: &str| schema.get(key).and_then(Value::as_i64);
    match (bound("minimum"), bound("maximum")) {
        (Some(min), Some(max)) => format!("a whole number between {min} and {max}"),
        (Some(0), None) => "a whole number of 0 or more".to_owned(),
        (Some(min), None) => format!("a whole number of at least {min}"),
        (None, Some(max)) => format!("a whole number of at most {max}"),
        (None, None) => "a whole number".to_owned(),
    }
}

/// `{"value": ..., "points": ...}`: the required fields, or the first few when none is.
fn object_shape(schema: &Map<String, Value>) -> String {
    let mut names: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|required| required.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if names.is_empty() {
        names = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|properties| properties.keys().map(String::as_str).take(3).collect())
            .unwrap_or_default();
    }
    let fields: Vec<String> = names
        .iter()
        .map(|name| format!("\"{name}\": ..."))
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// A JSON value as the sentence names it: `the string "x"`, `the number 3`, `an object`.
pub fn value_words(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => format!("the number {number}"),
        Value::String(text) if text.chars().count() > 60 => "a long string".to_owned(),
        Value::String(_) => format!("the string {value}"),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// serde's name for what it found, as JSON: `map` -> `an object`, `string "x"` -> `the string "x"`.
pub fn json_words(unexpected: &str) -> String {
    let unexpected = unexpected.trim();
    if let Some(text) = unexpected.strip_prefix("string ") {
        return format!("the string {text}");
    }
    for prefix in ["integer ", "floating point ", "boolean "] {
        if let Some(value) = unexpected.strip_prefix(prefix) {
            return format!("the number {}", value.trim_matches('`'))
                .replace("the number true", "true")
                .replace("the number false", "false");
        }
    }
    match unexpected {
        "map" => "an object".to_owned(),
        "sequence" => "a list".to_owned(),
        "unit value" | "null" | "none" | "Option value" => "null".to_owned(),
        "string" => "a string".to_owned(),
        "boolean" => "true or false".to_owned(),
        other => other.to_owned(),
    }
}

/// serde's and Rust's words for an expected type, as JSON words.
pub fn rust_words(expected: &str) -> String {
    let expected = trim_dot(expected);
    match expected {
        "u8" => return "a whole number between 0 and 255".to_owned(),
        "u16" => return "a whole number between 0 and 65535".to_owned(),
        "u32" | "u64" | "u128" | "usize" => return "a whole number of 0 or more".to_owned(),
        "i8" | "i16" | "i32" | "i64" | "i128" | "isize" => return "a whole number".to_owned(),
        "f32" | "f64" => return "a number".to_owned(),
        "a sequence" => return "a list".to_owned(),
        "a map" => return "an object".to_owned(),
        "a boolean" | "bool" => return "true or false".to_owned(),
        "a string" | "a borrowed string" | "string" => return "a string".to_owned(),
        "char" | "a character" => return "a single character".to_owned(),
        "unit" => return "null".to_owned(),
        "option" => return "a value or null".to_owned(),
        "variant identifier" | "field identifier" => return "one of the allowed values".to_owned(),
        _ => {}
    }
    if expected.starts_with("struct ") {
        return "an object".to_owned();
    }
    if expected.starts_with("enum ") {
        return "one of the allowed values".to_owned();
    }
    if let Some(size) = expected.strip_prefix("a tuple of size ") {
        return format!("a list of {size} items");
    }
    expected.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Map<String, Value> {
        let Value::Object(schema) = json!({
            "type": "object",
            "properties": {
                "limit": {"type": ["integer", "null"], "minimum": 1, "maximum": 200},
                "id": {"type": "string"},
                "archived": {"type": "boolean"},
                "criteria": {"type": "object", "properties": {
                    "industries": {"type": "array", "items": {
                        "type": "object",
                        "required": ["value", "points"],
                        "properties": {"value": {"type": "string"}, "points": {"type": "integer", "minimum": 1, "maximum": 100}},
                    }},
                }},
                "tier": {"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"type": "null"}]},
            },
        }) else {
            unreachable!()
        };
        schema
    }

    #[test]
    fn type_errors_say_what_is_expected_in_json_words_and_name_the_field() {
        let schema = schema();
        let message = |path: &str, inner: &str| decode_message(path, inner, Some(&schema), None);
        assert_eq!(
            message("limit", "invalid type: string \"x\", expected u32"),
            "Invalid field `limit`: expected a whole number between 1 and 200, got the string \"x\"."
        );
        assert_eq!(
            message(
                "criteria.industries",
                "invalid type: map, expected a sequence"
            ),
            "Invalid field `criteria.industries`: expected a list of objects like {\"value\": ..., \"points\": ...}, got an object."
        );
        assert_eq!(
            message(
                "criteria.industries[0].points",
                "invalid type: string \"9\", expected i64"
            ),
            "Invalid field `criteria.industries[0].points`: expected a whole number between 1 and 100, got the string \"9\"."
        );
        assert_eq!(
            message("id", "invalid type: integer `42`, expected a string"),
            "Invalid field `id`: expected a string, got the number 42."
        );
        assert_eq!(
            message(
                "archived",
                "invalid type: string \"yes\", expected a boolean"
            ),
            "Invalid field `archived`: expected true or false, got the string \"yes\"."
        );
        assert_eq!(
            message("tier", "unknown variant `z`, expected `a` or `b`"),
            "Invalid field `tier`: expected one of \"a\", \"b\", got the string \"z\"."
        );
        assert_eq!(
            message("criteria.industries[0]", "missing field `points`"),
            "Missing field `criteria.industries[0].points`: expected a whole number between 1 and 100."
        );
        assert_eq!(
            decode_message(
                ".",
                "`limit` must be between 1 and 200, got 300",
                Some(&schema),
                Some(&json!({"limit": 300}))
            ),
            "Invalid field `limit`: expected a whole number between 1 and 200, got the number 300."
        );
        assert_eq!(
            message("limit", "`limit` must be between 1 and 200, got 300"),
            "Invalid field `limit`: `limit` must be between 1 and 200, got 300."
        );
    }

    #[test]
    fn without_a_schema_serdes_rust_words_are_translated() {
        assert_eq!(
            decode_message("n", "invalid type: map, expected u32", None, None),
            "Invalid field `n`: expected a whole number of 0 or more, got an object."
        );
        assert_eq!(
            decode_message(
                "x",
                "invalid type: sequence, expected struct Criterion",
                None,
                None
            ),
            "Invalid field `x`: expected an object, got a list."
        );
        assert_eq!(
            decode_message(
                ".",
                "invalid type: sequence, expected struct Input",
                None,
                None
            ),
            "Invalid input: expected an object, got a list."
        );
    }
}
