//! An input object made ready for decoding, by the rules of its own JSON Schema.
//!
//! Two things happen between the JSON a caller sent and the action's input type, for REST and MCP
//! alike (both go through [`dispatch`](crate::dispatch), which calls [`prepare`] once):
//!
//! - **Sizes first.** Every `maxItems`, `maxProperties` and `maxLength` the schema states is
//!   checked on the JSON tree before anything is decoded, and an array or object is measured
//!   before its members are visited. Decoding a list and then finding it too long costs as much as
//!   the list is long, and some checks cost its square (de-duplicating 100,000 tags took a minute
//!   of CPU to answer 400); here a list over its bound costs one comparison. The schema is the
//!   contract, so a body valid by it passes and one over a bound gets a 400 that names the field.
//! - **Whole numbers as JSON Schema counts them.** In JSON Schema 2020-12 `66833.0` is an
//!   `integer`; serde refuses it for an `i64`. Where the schema says `integer`, an integer-valued
//!   number is rewritten as that integer, so a generated client that writes numbers as floats is
//!   understood. Anything else (`1.5`, `1e300`) is left for the decoder to refuse by name.
//!
//! The walk follows `properties`, `additionalProperties`, `items` and, for a value that could take
//! several shapes (`anyOf`/`oneOf`), the branch whose `type` fits it. The registry's input schemas
//! are inlined, so there is no `$ref` to follow; a subschema this walk does not understand is
//! simply not checked here, and the action's own validation still applies.

use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

use crate::error::ApiError;

/// Checks `input` against the size bounds of `schema` and rewrites integer-valued numbers where
/// `schema` says `integer`; the first bound exceeded is the error, naming its field.
pub fn prepare(
    input: &mut Map<String, Value>,
    schema: &Map<String, Value>,
) -> Result<(), ApiError> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    let mut path = String::new();
    for (name, value) in input.iter_mut() {
        if let Some(Value::Object(field)) = properties.get(name) {
            path.clear();
            path.push_str(name);
            walk(value, field, &mut path)?;
        }
    }
    Ok(())
}

fn walk(value: &mut Value, schema: &Map<String, Value>, path: &mut String) -> Result<(), ApiError> {
    let Some(branch) = branch_for(value, schema) else {
        return refuse_list(value, schema, path);
    };
    if value.is_array() && branch.contains_key("type") && !says(branch, "array") {
        return refuse_list(value, schema, path);
    }
    let schema = branch;
    match value {
        Value::Number(number) => {
            if says(schema, "integer")
                && let Some(whole) = whole_number(number)
            {
                *number = whole;
            }
        }
        Value::String(text) => {
            if let Some(max) = bound(schema, "maxLength") {
                // Bytes bound characters from above: most texts need no count at all.
                if text.len() > max {
                    let count = text.chars().count();
                    if count > max {
                        return Err(too_long(path, count, max));
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(max) = bound(schema, "maxItems")
                && items.len() > max
            {
                return Err(ApiError::invalid_request(format!(
                    "`{}` holds {} entries; it takes at most {max}.",
                    shown(path),
                    items.len()
                )));
            }
            if let Some(Value::Object(item_schema)) = schema.get("items")
                && has_rules(item_schema)
            {
                let at = path.len();
                for (index, item) in items.iter_mut().enumerate() {
                    let _ = write!(path, "[{index}]");
                    walk(item, item_schema, path)?;
                    path.truncate(at);
                }
            }
        }
        Value::Object(fields) => {
            if let Some(max) = bound(schema, "maxProperties")
                && fields.len() > max
            {
                return Err(ApiError::invalid_request(format!(
                    "`{}` holds {} keys; it takes at most {max}.",
                    shown(path),
                    fields.len()
                )));
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema
                .get("additionalProperties")
                .and_then(Value::as_object);
            let key_bound = schema
                .get("propertyNames")
                .and_then(Value::as_object)
                .and_then(|names| bound(names, "maxLength"));
            let at = path.len();
            for (key, item) in fields.iter_mut() {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                if let Some(max) = key_bound
                    && key.len() > max
                    && key.chars().count() > max
                {
                    return Err(ApiError::invalid_request(format!(
                        "`{}` key `{}...` is {} characters long; a key is at most {max}.",
                        shown(&path[..at]),
                        key.chars().take(40).collect::<String>(),
                        key.chars().count()
                    )));
                }
                let item_schema = properties
                    .and_then(|properties| properties.get(key))
                    .and_then(Value::as_object)
                    .or(additional);
                if let Some(item_schema) = item_schema {
                    walk(item, item_schema, path)?;
                }
                path.truncate(at);
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
    Ok(())
}

/// Whether the walk has anything to do in a value of `schema` (most list items are plain text).
fn has_rules(schema: &Map<String, Value>) -> bool {
    const KEYWORDS: [&str; 9] = [
        "maxItems",
        "maxProperties",
        "maxLength",
        "propertyNames",
        "properties",
        "additionalProperties",
        "items",
        "anyOf",
        "oneOf",
    ];
    KEYWORDS.iter().any(|keyword| schema.contains_key(*keyword)) || says(schema, "integer")
}

/// The schema that applies to `value`: `schema` itself, or, when it offers alternatives, the
/// first whose `type` fits the value (`None` when none does: the decoder will say what is wrong).
fn branch_for<'a>(value: &Value, schema: &'a Map<String, Value>) -> Option<&'a Map<String, Value>> {
    let Some(options) = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array)
    else {
        return Some(schema);
    };
    options
        .iter()
        .filter_map(Value::as_object)
        .find(|option| fits(value, option))
}

fn fits(value: &Value, schema: &Map<String, Value>) -> bool {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    match schema.get("type") {
        None => {
            schema
                .get("anyOf")
                .or_else(|| schema.get("oneOf"))
                .is_some()
                || kind != "null"
        }
        Some(_) if kind == "number" => says(schema, "number") || says(schema, "integer"),
        Some(_) => says(schema, kind),
    }
}

/// Whether the schema's `type` (a string or a list) names `kind`.
fn says(schema: &Map<String, Value>, kind: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(one)) => one == kind,
        Some(Value::Array(many)) => many.iter().any(|one| one == kind),
        _ => false,
    }
}

fn bound(schema: &Map<String, Value>, keyword: &str) -> Option<usize> {
    schema
        .get(keyword)
        .and_then(Value::as_u64)
        .map(|max| usize::try_from(max).unwrap_or(usize::MAX))
}

/// `66833.0` as `66833`; `None` for a number that is already an integer, has a fraction, or is
/// out of the range of 64-bit integers.
fn whole_number(number: &Number) -> Option<Number> {
    if number.is_i64() || number.is_u64() {
        return None;
    }
    let float = number.as_f64()?;
    if float.fract() != 0.0 || !float.is_finite() {
        return None;
    }
    // The bounds are exact powers of two, so the comparisons are exact too.
    if (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&float) {
        Some(Number::from(float as i64))
    } else if (0.0..18_446_744_073_709_551_616.0).contains(&float) {
        Some(Number::from(float as u64))
    } else {
        None
    }
}

/// serde reads a struct from a list of its fields in order (`[null, null]`); JSON Schema does not,
/// and neither does this API: a list where the schema has none is refused by name.
fn refuse_list(value: &Value, schema: &Map<String, Value>, path: &str) -> Result<(), ApiError> {
    if value.is_array() {
        return Err(ApiError::invalid_request(format!(
            "Invalid field `{}`: expected {}, got a list.",
            shown(path),
            crate::words::describe(schema)
        )));
    }
    Ok(())
}

fn shown(path: &str) -> &str {
    if path.is_empty() { "input" } else { path }
}

fn too_long(path: &str, count: usize, max: usize) -> ApiError {
    ApiError::invalid_request(format!(
        "`{}` is longer than {max} characters ({count} characters).",
        shown(path)
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Map<String, Value> {
        json!({
            "type": "object",
            "properties": {
                "seconds": {"type": "integer"},
                "score": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                "ratio": {"type": "number"},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 3}},
                "fields": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "integer"}},
                "titles": {"anyOf": [
                    {"type": "array", "maxItems": 1, "items": {"type": "string"}},
                    {"type": "object", "properties": {"include": {"type": "array", "maxItems": 1}}}
                ]}
            }
        })
        .as_object()
        .cloned()
        .expect("an object")
    }

    fn prepared(input: Value) -> Result<Value, String> {
        let Value::Object(mut fields) = input else {
            panic!("an object")
        };
        prepare(&mut fields, &schema())
            .map(|()| Value::Object(fields))
            .map_err(|error| error.to_string())
    }

    #[test]
    fn integer_valued_numbers_become_integers_where_the_schema_says_integer() {
        let input = json!({"seconds": 66833.0, "score": -4.0, "ratio": 2.0, "fields": {"a": 1.0}});
        let out = prepared(input).expect("valid");
        assert_eq!(
            out,
            json!({"seconds": 66833, "score": -4, "ratio": 2.0, "fields": {"a": 1}})
        );
        assert!(out["seconds"].is_i64());
        // A fraction stays a fraction, for the decoder to refuse by name.
        assert_eq!(
            prepared(json!({"seconds": 1.5})).expect("left"),
            json!({"seconds": 1.5})
        );
        assert_eq!(
            prepared(json!({"seconds": 1e300})).expect("left"),
            json!({"seconds": 1e300})
        );
    }

    #[test]
    fn a_list_over_its_bound_is_refused_by_name_before_its_items_are_read() {
        let error = prepared(json!({"tags": ["a", "b", "c"]})).expect_err("too many");
        assert!(
            error.contains("`tags` holds 3 entries; it takes at most 2."),
            "{error}"
        );
        let error = prepared(json!({"tags": ["a", "long"]})).expect_err("too long");
        assert!(
            error.contains("`tags[1]` is longer than 3 characters (4 characters)."),
            "{error}"
        );
        let error = prepared(json!({"fields": {"a": 1, "b": 2}})).expect_err("too many keys");
        assert!(
            error.contains("`fields` holds 2 keys; it takes at most 1."),
            "{error}"
        );
    }

    #[test]
    fn alternatives_are_checked_by_the_branch_that_fits_the_value() {
        let error = prepared(json!({"titles": ["a", "b"]})).expect_err("array form");
        assert!(error.contains("`titles` holds 2 entries"), "{error}");
        let error = prepared(json!({"titles": {"include": ["a", "b"]}})).expect_err("object form");
        assert!(
            error.contains("`titles.include` holds 2 entries"),
            "{error}"
        );
        assert!(
            prepared(json!({"titles": 3})).is_ok(),
            "left for the decoder"
        );
        let error = prepared(json!({"fields": [1, 2]})).expect_err("a list for a map");
        assert!(
            error.contains("Invalid field `fields`: expected an object, got a list."),
            "{error}"
        );
    }
}
