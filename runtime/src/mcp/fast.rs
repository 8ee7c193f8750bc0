//! The common MCP requests answered without building rmcp's service for each one.
//!
//! rmcp's stateless transport serves every POST by building a whole service around a one-shot
//! transport: a peer, three channels, cancellation tokens, the server info, and three spawned
//! tasks (the serve loop, the handler, the response send), then waits for the answer to come
//! back through them. For a stateless server that is pure overhead: the bench measured it at
//! about as much CPU as the rest of a `tools/call`.
//!
//! Here the four requests a client makes all the time (`initialize`, `ping`, `tools/list`,
//! `tools/call`, but not a long call held open for its progress, whose answer is a stream) are
//! answered in place, with rmcp's own types and the same handler methods
//! ([`McpFace::call`], [`ServerHandler::negotiate_initialize`]), exactly as rmcp's stateless
//! path answers them for a client on a version with the `initialize` handshake: the result with
//! `resultType` and any non-object tool output stripped, an error as a JSON-RPC error, both with
//! HTTP 200. Everything else goes on to rmcp unchanged: other methods, notifications,
//! `server/discover`, requests that carry their protocol version in `_meta` or name a version
//! from 2026-07-28 on (the per-request lifecycle and its header checks), and anything rmcp's
//! types do not parse (its error, not ours). A request is taken here only when rmcp would take
//! the same path, so the answer is the same either way; `fast_path_answers_as_rmcp_does` in
//! tests/api/mcp.rs holds them side by side.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientJsonRpcMessage, ClientRequest, GetMeta,
    JsonRpcMessage, JsonRpcRequest, ListToolsResult, ProtocolVersion, RequestId,
    ServerJsonRpcMessage, ServerResult,
};

use super::selection::Selection;
use super::{CallAnswer, McpFace};
use crate::json::JsonBody;
use crate::rpc::{CallId, ToolCall};
use crate::scope::Scope;

/// The header a client names its protocol version in (rmcp's constant is private).
const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";

/// What became of a request: answered here, or handed back for rmcp.
pub(super) enum Answer {
    Answered(Response),
    Declined(Request),
}

/// What the fast path keeps: each `tools/list` result it has answered, serialised once per
/// caller scope and selection (at most three scopes times the selections clients use).
#[derive(Default)]
pub(super) struct FastPath {
    tools_results: Mutex<HashMap<(Scope, Selection), Bytes>>,
}

impl FastPath {
    /// The `tools/list` result for `view`, serialised (empty if it could not be).
    fn tools_result(&self, face: &McpFace, view: (Scope, Selection)) -> Bytes {
        if let Some(bytes) = self.results().get(&view) {
            return bytes.clone();
        }
        let tools = super::tools::offered(&face.state.registry, &face.state.tools, view.0, view.1);
        let mut result = ServerResult::ListToolsResult(ListToolsResult::with_all_items(tools));
        strip_for_legacy_peer(&mut result);
        let bytes = serde_json::to_vec(&result).map_or_else(|_| Bytes::new(), Bytes::from);
        self.results().insert(view, bytes.clone());
        bytes
    }

    fn results(&self) -> std::sync::MutexGuard<'_, HashMap<(Scope, Selection), Bytes>> {
        self.tools_results
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Answers `request` if it is one of the requests above; gives it back otherwise.
    pub(super) async fn answer(&self, face: &McpFace, request: Request) -> Answer {
        if !legacy_version_header(request.headers().get(PROTOCOL_VERSION_HEADER)) {
            return Answer::Declined(request);
        }
        let (mut parts, body) = request.into_parts();
        // The guard in front has read the body already: this is the bytes it put back.
        let bytes = match axum::body::to_bytes(body, usize::MAX).await {
            Ok(bytes) => bytes,
            Err(_) => return Answer::Declined(Request::from_parts(parts, Body::empty())),
        };
        // A plain call read by an earlier layer (see `crate::rpc`) is exactly what rmcp's types
        // would make of these bytes, with no `_meta`: no progress token, no Tasks extension, so
        // neither a held call nor a task.
        if ToolCall::of(&parts.extensions, &bytes).is_some()
            && let Some(call) = parts.extensions.remove::<Arc<ToolCall>>()
        {
            let call = Arc::try_unwrap(call).unwrap_or_else(|call| (*call).clone());
            let id = match call.id {
                CallId::Number(number) => RequestId::Number(number),
                CallId::Text(text) => RequestId::String(text.into()),
            };
            let mut params = CallToolRequestParams::new(call.name);
            params.arguments = call.arguments;
            let asked = super::tasks::Asked {
                tasks: false,
                progress: None,
            };
            return Answer::Answered(match face.call_answer(params, Some(&parts), asked).await {
                // An object: nothing of it is stripped for a legacy peer.
                Ok(CallAnswer::Output(output)) if output.bytes().starts_with(b"{") => {
                    json_response(structured_envelope(&id, &output))
                }
                Ok(CallAnswer::Output(output)) => respond(
                    Ok(ServerResult::from(CallToolResponse::from(
                        super::success_result(output.to_value(), false),
                    ))),
                    id,
                ),
                Ok(CallAnswer::Response(response)) => respond(Ok(ServerResult::from(response)), id),
                Err(error) => respond(Err(error), id),
            });
        }
        let decline = |parts: http::request::Parts, bytes: Bytes| {
            Answer::Declined(Request::from_parts(parts, Body::from(bytes)))
        };
        let Ok(JsonRpcMessage::Request(JsonRpcRequest { id, request, .. })) =
            serde_json::from_slice::<ClientJsonRpcMessage>(&bytes)
        else {
            return decline(parts, bytes);
        };
        let meta = request.get_meta().clone();
        if meta.protocol_version().is_some() {
            return decline(parts, bytes);
        }
        let result = match request {
            ClientRequest::InitializeRequest(initialize) => {
                let requested = &initialize.params.protocol_version;
                let header = parts.headers.get(PROTOCOL_VERSION_HEADER);
                if !requested.has_initialize()
                    || header
                        .is_some_and(|header| header.as_bytes() != requested.as_str().as_bytes())
                {
                    return decline(parts, bytes);
                }
                face.negotiate_initialize(&initialize.params)
                    .map(ServerResult::InitializeResult)
            }
            ClientRequest::PingRequest(_) => Ok(ServerResult::empty(())),
            ClientRequest::ListToolsRequest(_) => {
                let view = match face.view(Some(&parts)) {
                    Ok(view) => view,
                    Err(error) => return Answer::Answered(respond(Err(error), id)),
                };
                let result = self.tools_result(face, view);
                if result.is_empty() {
                    return decline(parts, bytes);
                }
                return Answer::Answered(json_response(envelope(&id, &result)));
            }
            // A long call held open for its progress is answered with a stream: rmcp's.
            ClientRequest::CallToolRequest(call)
                if face.holds_open(&call.params.name, &meta, Some(&parts)) =>
            {
                return decline(parts, bytes);
            }
            ClientRequest::CallToolRequest(call) => {
                let asked = super::tasks::Asked {
                    tasks: meta
                        .client_capabilities()
                        .is_some_and(|capabilities| capabilities.supports_tasks()),
                    progress: None,
                };
                face.call(call.params, Some(&parts), asked)
                    .await
                    .map(ServerResult::from)
            }
            _ => return decline(parts, bytes),
        };
        Answer::Answered(respond(result, id))
    }
}

/// The answer to a request, as rmcp's stateless path writes it for a legacy peer.
fn respond(result: Result<ServerResult, rmcp::ErrorData>, id: RequestId) -> Response {
    let message = match result {
        Ok(mut result) => {
            strip_for_legacy_peer(&mut result);
            ServerJsonRpcMessage::response(result, id)
        }
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    };
    match serde_json::to_vec(&message) {
        Ok(body) => json_response(body),
        Err(error) => {
            crate::error::ApiError::internal(format!("MCP answer: {error}")).into_response()
        }
    }
}

/// What rmcp writes for `CallToolResult::structured(output)` answered to a legacy peer, written
/// from the output's bytes: the output once as a JSON string (the text block) and once as it is
/// (`structuredContent`, whose bytes are the same as a tree of it would give). For an object
/// output, which the legacy stripping leaves alone. `structured_envelope_is_what_rmcp_writes`
/// holds the two to the same bytes.
fn structured_envelope(id: &RequestId, output: &JsonBody) -> Vec<u8> {
    let text = output.as_str();
    let mut body = Vec::with_capacity(2 * text.len() + 128);
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    if serde_json::to_writer(&mut body, id).is_err() {
        body.extend_from_slice(b"null");
    }
    body.extend_from_slice(br#","result":{"content":[{"type":"text","text":"#);
    if serde_json::to_writer(&mut body, text).is_err() {
        body.extend_from_slice(b"\"\"");
    }
    body.extend_from_slice(br#"}],"structuredContent":"#);
    body.extend_from_slice(text.as_bytes());
    body.extend_from_slice(br#","isError":false}}"#);
    body
}

/// What rmcp's handler does to a result for a peer on a version with the `initialize` handshake:
/// no `resultType: "complete"`, and no non-object tool output (SEP-2106; ours are objects, but
/// the answer stays rmcp's whatever a tool declares).
fn strip_for_legacy_peer(result: &mut ServerResult) {
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
}

/// Whether the request's protocol version (the header, or 2025-03-26 without one) is one rmcp
/// serves on the path with the `initialize` handshake and no per-request header checks.
fn legacy_version_header(header: Option<&HeaderValue>) -> bool {
    let Some(header) = header else {
        return true;
    };
    let Ok(version) = header.to_str() else {
        return false;
    };
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .any(|known| known.as_str() == version && known.has_initialize())
}

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}`, as serde writes a `JsonRpcResponse`.
fn envelope(id: &RequestId, result: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(result.len() + 48);
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    if serde_json::to_writer(&mut body, id).is_err() {
        body.extend_from_slice(b"null");
    }
    body.extend_from_slice(br#","result":"#);
    body.extend_from_slice(result);
    body.push(b'}');
    body
}

fn json_response(body: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// Keeps the face and the fast path together for the router.
pub(super) struct Fast {
    pub(super) face: McpFace,
    pub(super) path: FastPath,
}

impl Fast {
    pub(super) fn new(face: McpFace) -> Arc<Self> {
        Arc::new(Self {
            path: FastPath::default(),
            face,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{EmptyResult, NumberOrString};

    #[test]
    fn the_envelope_is_what_serde_writes_for_a_response() {
        let result = ServerResult::EmptyResult(EmptyResult {});
        let bytes = serde_json::to_vec(&result).unwrap();
        for id in [
            NumberOrString::Number(7),
            NumberOrString::String("a\"b".into()),
        ] {
            let expected =
                serde_json::to_vec(&ServerJsonRpcMessage::response(result.clone(), id.clone()))
                    .unwrap();
            assert_eq!(envelope(&id, &bytes), expected);
        }
    }

    #[test]
    fn structured_envelope_is_what_rmcp_writes() {
        use rmcp::model::CallToolResult;
        let outputs = [
            serde_json::json!({"workspace": {"id": "wsp_1", "name": "A \"quoted\" name\n"}, "caller": {"scopes": ["read"]}}),
            serde_json::json!({"items": [], "total": 0, "note": "é \u{7f} </script>"}),
            serde_json::json!({}),
        ];
        for output in outputs {
            for id in [
                NumberOrString::Number(1),
                NumberOrString::String("req \"7\"".into()),
            ] {
                let body = JsonBody::of(&output).unwrap();
                let mut result = ServerResult::from(CallToolResponse::from(
                    CallToolResult::structured(output.clone()),
                ));
                strip_for_legacy_peer(&mut result);
                let expected =
                    serde_json::to_vec(&ServerJsonRpcMessage::response(result, id.clone()))
                        .unwrap();
                assert_eq!(
                    String::from_utf8(structured_envelope(&id, &body)).unwrap(),
                    String::from_utf8(expected).unwrap()
                );
            }
        }
    }

    #[test]
    fn only_versions_with_the_initialize_handshake_take_the_fast_path() {
        assert!(legacy_version_header(None));
        assert!(legacy_version_header(Some(&HeaderValue::from_static(
            "2025-06-18"
        ))));
        assert!(!legacy_version_header(Some(&HeaderValue::from_static(
            "2026-07-28"
        ))));
        assert!(!legacy_version_header(Some(&HeaderValue::from_static(
            "1999-01-01"
        ))));
    }
}
