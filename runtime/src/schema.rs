//! Typed values for the schemas: enums of database text, and integer formats validators know.
//!
//! A status, tier, kind or source is stored as text and shown as one of a fixed set of strings.
//! [`text_enum!`](crate::text_enum) declares such a set once: the Rust enum, its wire and database
//! text (`as_str`, `FromStr`), and a schema that lists the values as a JSON Schema `enum` (rather
//! than schemars' `oneOf` of `const`s for documented variants), so OpenAPI generators make a real
//! enum type. Each variant's doc comment goes into the schema's description.
//!
//! schemars describes unsigned integers with the formats `uint32` and `uint64`, which no OpenAPI
//! tool knows; [`signed_int_formats`] rewrites them to `int32`/`int64` with their bounds.

use serde_json::Value;

#[doc(hidden)]
pub use schemars::{JsonSchema, Schema, SchemaGenerator};

/// Declares an enum whose values are fixed strings, stored as text and sent as the same text.
///
/// ```ignore
/// outreach_runtime::text_enum! {
///     /// Where a prospect came from.
///     pub enum ProspectSource {
///         /// Created by `create_prospect`.
///         Api => "api",
///         /// Created by an import.
///         Import => "import",
///     }
/// }
/// ```
///
/// The text is what serde reads and writes too (each variant is renamed to it), so any spelling
/// works, `snake_case` or dotted (`run.completed`).
#[macro_export]
macro_rules! text_enum {
    (
        $(#[doc = $doc:literal])*
        $vis:vis enum $name:ident {
            $(
                $(#[doc = $vdoc:literal])*
                $variant:ident => $text:literal,
            )+
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
        $vis enum $name {
            $(
                $(#[doc = $vdoc])*
                #[serde(rename = $text)]
                $variant,
            )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The text on the wire and in the database.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The value's doc comment, its lines joined (each begins with a space).
            #[allow(dead_code)]
            pub fn doc(self) -> &'static str {
                match self {
                    $($name::$variant => ::std::concat!($($vdoc,)*),)+
                }
            }

            /// Reads a stored value; unknown text is a fault on our side, not the caller's.
            pub fn from_db(text: &str) -> ::std::result::Result<Self, $crate::ApiError> {
                text.parse().map_err(|_| {
                    $crate::ApiError::internal(format!(
                        "stored {} `{text}` is not one of {:?}",
                        stringify!($name),
                        [$($text,)+]
                    ))
                })
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::schema::UnknownText;

            fn from_str(text: &str) -> ::std::result::Result<Self, Self::Err> {
                match text {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::schema::UnknownText),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $crate::schema::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            // The type's path, not only its name: two enums of one name in different modules are
            // two schemas (schemars numbers the second, which the OpenAPI tests refuse), never one
            // silently standing for both.
            fn schema_id() -> ::std::borrow::Cow<'static, str> {
                ::std::concat!(::std::module_path!(), "::", ::std::stringify!($name)).into()
            }

            fn json_schema(_: &mut $crate::schema::SchemaGenerator) -> $crate::schema::Schema {
                $crate::schema::text_enum_schema(
                    &[$($doc,)*],
                    &[$(($text, &[$($vdoc,)*]),)+],
                )
            }
        }
    };
}

/// Text that names no value of a [`text_enum!`](crate::text_enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownText;

/// The schema of a [`text_enum!`](crate::text_enum): `{"type": "string", "enum": [...]}`, described
/// by the enum's doc comment followed by one line per value.
#[doc(hidden)]
pub fn text_enum_schema(doc: &[&str], values: &[(&str, &[&str])]) -> Schema {
    let mut description = join_doc(doc);
    for (text, doc) in values {
        let doc = join_doc(doc);
        if !doc.is_empty() {
            if !description.is_empty() {
                description.push('\n');
            }
            description.push_str(&format!("- `{text}`: {doc}"));
        }
    }
    let mut schema = serde_json::Map::new();
    schema.insert("type".into(), "string".into());
    schema.insert(
        "enum".into(),
        values.iter().map(|(text, _)| Value::from(*text)).collect(),
    );
    if !description.is_empty() {
        schema.insert("description".into(), description.into());
    }
    Schema::from(schema)
}

/// Joins doc comment lines the way schemars does: trimmed, one space between lines of a paragraph.
fn join_doc(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|line| line.trim())
        .collect::<Vec<_>>()
        .join(" ")
        .trim()
        .to_owned()
}

/// Rewrites schemars' unsigned formats (`uint8` to `uint64`) to the signed formats OpenAPI tools
/// know (`int32`, `int64`), keeping the bounds as `minimum: 0` and a `maximum`: a `u32` does not
/// fit an `int32`, so it is an `int64` of at most `u32::MAX` unless its own maximum fits an `int32`
/// (generators and fuzzers read `int32` as "at most 2^31 - 1").
pub fn signed_int_formats(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let own_max = object.get("maximum").and_then(Value::as_u64);
    let (format, max) = match object.get("format").and_then(Value::as_str) {
        Some("uint64" | "uint") => ("int64", None),
        Some("uint32") if own_max.is_some_and(|max| max <= i32::MAX as u64) => ("int32", None),
        Some("uint32") => ("int64", Some(u64::from(u32::MAX))),
        Some("uint16") => ("int32", Some(u64::from(u16::MAX))),
        Some("uint8") => ("int32", Some(u64::from(u8::MAX))),
        _ => return,
    };
    object.insert("format".into(), format.into());
    object.entry("minimum").or_insert(Value::from(0));
    if let Some(max) = max {
        object.entry("maximum").or_insert(Value::from(max));
    }
}

/// The pattern of a string without the NUL character, which dispatch refuses in every input
/// (PostgreSQL text cannot hold it).
pub const NO_NUL: &str = "^[^\\x00]*$";

/// States the NUL rule in the schema: every string without a pattern, value list or format of
/// its own gets [`NO_NUL`], and every map's keys too, so a generated client or a fuzzer does not
/// send what dispatch refuses. (A field's own pattern excludes NUL itself.)
pub fn no_nul_strings(schema: &mut Schema) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let is_string = match object.get("type") {
        Some(Value::String(kind)) => kind == "string",
        Some(Value::Array(kinds)) => kinds.iter().any(|kind| kind == "string"),
        _ => false,
    };
    let constrained = ["pattern", "enum", "const", "format"]
        .iter()
        .any(|keyword| object.contains_key(*keyword));
    if is_string && !constrained {
        object.insert("pattern".into(), NO_NUL.into());
    }
    if object
        .get("additionalProperties")
        .is_some_and(Value::is_object)
        && !object.contains_key("propertyNames")
    {
        object.insert(
            "propertyNames".into(),
            serde_json::json!({ "pattern": NO_NUL }),
        );
    }
}

/// [`no_nul_strings`] applied to every subschema of an inlined input schema.
pub fn without_nul(schema: serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    use schemars::transform::{RecursiveTransform, Transform};
    let mut schema = Schema::from(schema);
    RecursiveTransform(no_nul_strings).transform(&mut schema);
    match schema.to_value() {
        Value::Object(object) => object,
        _ => serde_json::Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    crate::text_enum! {
        /// A test set.
        enum Colour {
            /// The sky.
            SkyBlue => "sky_blue",
            Red => "red",
        }
    }

    #[test]
    fn text_enum_text_matches_serde() {
        for colour in Colour::ALL {
            assert_eq!(
                serde_json::to_value(colour).ok(),
                Some(json!(colour.as_str()))
            );
            assert_eq!(colour.as_str().parse::<Colour>(), Ok(*colour));
        }
        assert!(Colour::from_db("green").is_err());
    }

    #[test]
    fn text_enum_schema_lists_values() {
        let schema = SchemaGenerator::default().root_schema_for::<Colour>();
        assert_eq!(schema.get("enum"), Some(&json!(["sky_blue", "red"])));
        assert_eq!(
            schema.get("description"),
            Some(&json!("A test set.\n- `sky_blue`: The sky."))
        );
    }

    #[test]
    fn a_u32_without_a_small_maximum_is_an_int64_of_at_most_u32_max() {
        let mut schema = Schema::from(
            json!({"type": "integer", "format": "uint32", "minimum": 0})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        signed_int_formats(&mut schema);
        assert_eq!(
            schema.as_value(),
            &json!({"type": "integer", "format": "int64", "minimum": 0, "maximum": 4_294_967_295_u64})
        );
    }

    #[test]
    fn unsigned_formats_become_signed() {
        let mut schema = Schema::from(
            json!({"type": "integer", "format": "uint64", "minimum": 0})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        signed_int_formats(&mut schema);
        assert_eq!(
            schema.as_value(),
            &json!({"type": "integer", "format": "int64", "minimum": 0})
        );
    }
}
