//! An MCP `tools/call` read once per request, for every layer that needs to look inside it.
//!
//! Four layers read an MCP request's JSON-RPC body: the step-up check (the tool's scope), the
//! metrics (the tool's name), the guard (is it a well-formed message) and the fast path (the
//! call itself, through rmcp's message types, whose untagged and flattened enums parse through an
//! intermediate buffer). Each parsed it for itself; callgrind put the four parses at about 40,000
//! instructions a call, a fifth of the whole request.
//!
//! [`ToolCall::read`] parses the common case once, strictly: exactly `jsonrpc`, `id`, `method`
//! and `params`, with `params` exactly `name` and `arguments`, `jsonrpc` `"2.0"`, `method`
//! `"tools/call"`, an id that is a string or a whole number that fits an `i64`, and no escapes in
//! the fixed strings. A body it accepts is one every layer would accept and read the same way
//! (no duplicate keys, no `_meta`, nothing rmcp would route elsewhere), so each layer may use the
//! result in place of its own parse; anything else (a notification, `_meta`, an odd id, a
//! duplicate key, another method) is left to each layer's own reading, as before. The result
//! travels in the request's extensions beside the bytes it was read from, and a layer uses it
//! only for those same bytes.

use std::sync::Arc;

use axum::body::Bytes;
use http::Extensions;
use serde::Deserialize;
use serde_json::{Map, Value};

/// A JSON-RPC request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallId {
    Number(i64),
    Text(String),
}

/// A plain `tools/call`, as read by [`ToolCall::read`].
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub id: CallId,
    pub name: String,
    pub arguments: Option<Map<String, Value>>,
    /// The body this was read from.
    body: Bytes,
}

impl ToolCall {
    /// Reads `body` if it is a plain `tools/call` (see the module header); `None` otherwise.
    pub fn read(body: &Bytes) -> Option<Self> {
        let wire: Wire<'_> = serde_json::from_slice(body).ok()?;
        if wire.jsonrpc != "2.0" || wire.method != "tools/call" {
            return None;
        }
        Some(Self {
            id: wire.id.0,
            name: wire.params.name,
            arguments: wire.params.arguments,
            body: body.clone(),
        })
    }

    /// The call an earlier layer read from `body` and left in `extensions`, if any.
    pub fn of(extensions: &Extensions, body: &[u8]) -> Option<Arc<Self>> {
        extensions
            .get::<Arc<Self>>()
            .filter(|call| call.body.as_ref() == body)
            .cloned()
    }

    /// The call read from `body`: the one an earlier layer left in `extensions`, or read now
    /// and left there for the layers after.
    pub fn of_or_read(extensions: &mut Extensions, body: &Bytes) -> Option<Arc<Self>> {
        if let Some(call) = Self::of(extensions, body) {
            return Some(call);
        }
        let call = Arc::new(Self::read(body)?);
        extensions.insert(call.clone());
        Some(call)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire<'a> {
    jsonrpc: &'a str,
    id: WireId,
    method: &'a str,
    params: WireParams,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireParams {
    name: String,
    arguments: Option<Map<String, Value>>,
}

/// A string, or a whole number that fits an `i64` (written as an integer, not `1.0`).
struct WireId(CallId);

impl<'de> Deserialize<'de> for WireId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = WireId;
            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a string or a whole number")
            }
            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<WireId, E> {
                Ok(WireId(CallId::Number(value)))
            }
            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<WireId, E> {
                i64::try_from(value)
                    .map(|value| WireId(CallId::Number(value)))
                    .map_err(|_| E::custom("id out of range"))
            }
            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<WireId, E> {
                Ok(WireId(CallId::Text(value.to_owned())))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Option<ToolCall> {
        ToolCall::read(&Bytes::from(text.to_owned()))
    }

    #[test]
    fn only_plain_tool_calls_are_read() {
        let call = read(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"service_x","arguments":{"a":1}}}"#,
        )
        .expect("a plain call");
        assert_eq!(call.id, CallId::Number(7));
        assert_eq!(call.name, "service_x");
        assert_eq!(call.arguments.unwrap()["a"], 1);
        assert_eq!(
            read(r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"n"}}"#)
                .map(|call| call.id),
            Some(CallId::Text("a".into()))
        );
        for other in [
            // Not a tools/call, or not plainly one.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"n"}}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"n"}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/call","params":{"name":"n"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"n"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"n"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"n"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"n"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","name":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n","arguments":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n"},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n"}}]"#,
            "not json",
        ] {
            assert!(read(other).is_none(), "{other}");
        }
    }

    #[test]
    fn a_call_is_shared_only_for_the_bytes_it_was_read_from() {
        let body = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"n"}}"#,
        );
        let mut extensions = Extensions::new();
        assert!(ToolCall::of_or_read(&mut extensions, &body).is_some());
        assert!(ToolCall::of(&extensions, &body).is_some());
        assert!(ToolCall::of(&extensions, b"{}").is_none());
    }
}
