//! The MCP face: every action as a tool at `/api/mcp`, over rmcp's Streamable HTTP transport.
//!
//! The server is stateless (no sessions, JSON responses), so any instance answers any request and
//! both the `server/discover` probe of new clients and the `initialize` handshake of older ones
//! work. The handler is written by hand over the registry rather than with rmcp's tool macros:
//! tools are data here, built once at start-up from the same schema maps as the OpenAPI document.
//! A tool call goes through the same [`dispatch`] as REST; its `structuredContent` is the REST
//! body, success or error. The principal arrives from the shared auth middleware through the
//! HTTP request parts rmcp puts in the request context.
//!
//! rmcp's stateless transport builds a whole service for every POST (see [`fast`]), so the four
//! requests clients make all the time (`initialize`, `ping`, `tools/list`, `tools/call`) are
//! answered in front of it with rmcp's own types and the same handler methods; everything else
//! (other methods, notifications, `server/discover`, the per-request lifecycle of 2026-07-28)
//! still goes through rmcp's transport.
//!
//! Two things happen at the HTTP level, before rmcp: an OAuth client calling a tool beyond its
//! grant gets HTTP 403 with the `insufficient_scope` challenge (the MCP authorization spec's
//! step-up signal, which an API key client would not act on, so keys keep the in-band tool
//! error), and CORS, so browser-based clients can connect. Any `Origin` may call, because every
//! call needs a bearer credential (no cookie is honoured here, so a foreign page cannot ride on
//! one); DNS rebinding is stopped by holding `Host` to the base URL.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, MetaObject, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::transport::StreamableHttpServerConfig;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, service::RequestContext};
use serde_json::Value;

mod fast;
mod guard;
mod tools;

pub use guard::host_matches;
pub use tools::{input_schema, output_schema, tool_description, tools};

use crate::auth::{self, CredentialKind, Principal};
use crate::dispatch::Dispatcher;
use crate::error::{ApiError, ErrorCode};
use crate::json::JsonBody;
use crate::registry::{ESTIMATE_FIELD, IDEMPOTENCY_FIELD, Registry};
use crate::request_id::{RequestId, request_id};
use crate::rpc::ToolCall;
use crate::scope::Scope;
use crate::state::AppState;
use axum::extract::FromRef;

/// The MCP endpoint: rmcp's transport (stateless, JSON responses) behind [`guard::guard`],
/// which holds `Host` to the base URL and answers malformed requests in JSON.
pub fn service(state: Arc<AppState>) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(state.config.max_body_bytes)
        .disable_allowed_origins()
        .disable_allowed_hosts();
    let face = state.clone();
    let transport: StreamableHttpService<McpFace, NeverSessionManager> = StreamableHttpService::new(
        move || {
            Ok(McpFace {
                state: face.clone(),
            })
        },
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let transport = Arc::new(transport);
    let fast = state.config.mcp_fast_path.then(|| {
        fast::Fast::new(
            McpFace {
                state: state.clone(),
            },
            &state.tools,
        )
    });
    Router::new()
        .fallback(move |request: Request| {
            // Shared, not cloned: cloning rmcp's transport for every request showed in the profile.
            let (fast, transport) = (fast.clone(), transport.clone());
            async move {
                let request = match fast {
                    Some(fast) if request.method() == http::Method::POST => {
                        match fast.path.answer(&fast.face, request).await {
                            fast::Answer::Answered(response) => return response,
                            fast::Answer::Declined(request) => request,
                        }
                    }
                    _ => request,
                };
                transport.handle(request).await.map(Body::new)
            }
        })
        .layer(middleware::from_fn_with_state(
            guard::Guard::new(state),
            guard::guard,
        ))
}

/// The MCP server handler over the registry.
#[derive(Clone)]
pub struct McpFace {
    state: Arc<AppState>,
}

impl ServerHandler for McpFace {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("outreach", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Prospecting and outreach workspace. Call service_get_workspace first to see the workspace, \
                 your role and your scopes. Every tool is also a REST operation under /api/v1.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(
            self.state.tools.as_ref().clone(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.state
            .tools
            .iter()
            .find(|tool| tool.name == name)
            .cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.call(request, context.extensions.get::<http::request::Parts>())
            .await
    }
}

/// What a `tools/call` answered: most often the action's output as it is (the fast path writes
/// that as bytes), else a result made with rmcp's types.
pub(crate) enum CallAnswer {
    /// `structuredContent` and its text block: the action's output.
    Output(JsonBody),
    Result(CallToolResult),
}

impl CallAnswer {
    fn into_result(self) -> CallToolResult {
        match self {
            CallAnswer::Output(body) => CallToolResult::structured(body.to_value()),
            CallAnswer::Result(result) => result,
        }
    }
}

impl McpFace {
    /// A `tools/call` from rmcp's handler: `parts` are the HTTP request's, whose extensions hold
    /// the principal the auth middleware found and the request id.
    async fn call(
        &self,
        request: CallToolRequestParams,
        parts: Option<&http::request::Parts>,
    ) -> Result<CallToolResponse, McpError> {
        self.answer(request, parts)
            .await
            .map(|answer| answer.into_result().into())
    }

    /// A `tools/call`, from rmcp's handler or the fast path.
    async fn answer(
        &self,
        request: CallToolRequestParams,
        parts: Option<&http::request::Parts>,
    ) -> Result<CallAnswer, McpError> {
        let Some(action) = self.state.registry.by_tool_name(&request.name) else {
            return Err(McpError::invalid_params(
                format!(
                    "Unknown tool `{}`; tools/list names them all.",
                    request.name
                ),
                None,
            ));
        };
        let principal = parts
            .and_then(|parts| parts.extensions.get::<Arc<Principal>>())
            .cloned();
        let request_id: Arc<str> = parts
            .and_then(|parts| parts.extensions.get::<RequestId>())
            .map_or_else(|| Arc::from("unknown"), |id| id.0.clone());
        let Some(principal) = principal else {
            return Err(McpError::internal_error(
                "the request reached the MCP handler unauthenticated",
                None,
            ));
        };
        let mut arguments = request.arguments.unwrap_or_default();
        let idempotency_key = match arguments.remove(IDEMPOTENCY_FIELD) {
            None | Some(Value::Null) => None,
            Some(Value::String(key)) if action.def.idempotent => Some(key),
            Some(Value::String(_)) => {
                let error = ApiError::invalid_request(format!(
                    "Unknown field `{IDEMPOTENCY_FIELD}`: `{}` does not take idempotency keys.",
                    request.name
                ));
                return Ok(CallAnswer::Result(error_result(&error.body())));
            }
            Some(_) => {
                let error = ApiError::invalid_request(format!(
                    "Invalid field `{IDEMPOTENCY_FIELD}`: expected a string."
                ));
                return Ok(CallAnswer::Result(error_result(&error.body())));
            }
        };
        let answer = match Dispatcher::from_ref(&self.state)
            .dispatch(
                principal,
                action,
                Value::Object(arguments),
                idempotency_key,
                request_id.clone(),
            )
            .await
        {
            Ok(reply) if reply.status.is_success() && reply.replayed => {
                CallAnswer::Result(replayed_result(reply.body.to_value()))
            }
            Ok(reply) if reply.status.is_success() => CallAnswer::Output(reply.body),
            Ok(reply) => CallAnswer::Result(error_result(&reply.body.to_value())),
            Err(error) => CallAnswer::Result(error_result(&error.log(&request_id).body())),
        };
        Ok(answer)
    }
}

/// A failed call: `isError` with the `{error, code, ...}` body as JSON text, and no
/// `structuredContent`, which clients validate against the tool's `outputSchema` (the official
/// TypeScript SDK does even for errors, and throws instead of showing the sentence).
fn error_result(body: &Value) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}

/// The `_meta` key that marks an answer replayed for a reused idempotency key.
pub const REPLAYED_META: &str = "idempotent_replayed";

/// A replayed answer says so twice: `"replayed": true` in `structuredContent` (the output
/// schemas of idempotent tools declare it; see [`tools`]) for the model, and
/// `_meta.idempotent_replayed` for the host, beside the stored body unchanged otherwise.
fn replayed_result(mut body: Value) -> CallToolResult {
    if let Value::Object(fields) = &mut body {
        fields.insert(tools::REPLAYED_FIELD.to_owned(), Value::Bool(true));
    }
    let mut meta = MetaObject::new();
    meta.insert(REPLAYED_META.to_owned(), Value::Bool(true));
    CallToolResult::structured(body).with_meta(Some(meta))
}

/// CORS for browser-based MCP clients, on `/api/mcp` and the OAuth endpoints alike: any origin,
/// no cookies, and the headers a client must read (`WWW-Authenticate` leads it to the OAuth
/// metadata after a 401 or 403).
pub fn cors() -> tower_http::cors::CorsLayer {
    crate::cors::policy()
}

/// Middleware after authentication: an OAuth client's `tools/call` beyond its effective scope is
/// answered with HTTP 403 and `WWW-Authenticate: Bearer error="insufficient_scope", scope=...`,
/// so the client can ask the person for more (step-up authorization). Only OAuth requests below
/// the top scope have their body read here.
pub async fn step_up(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let Some(principal) = request.extensions().get::<Arc<Principal>>().cloned() else {
        return next.run(request).await;
    };
    if principal.credential_kind != CredentialKind::OauthToken || principal.allows(Scope::Send) {
        return next.run(request).await;
    }
    let request_id = request_id(&request);
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, state.config.max_body_bytes).await else {
        return ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!(
                "The request body is over the limit of {} bytes.",
                state.config.max_body_bytes
            ),
        )
        .into_response();
    };
    let needed = match ToolCall::of_or_read(&mut parts.extensions, &bytes) {
        Some(call) => scope_of_call(&state.registry, &call),
        None => scope_of_tool_call(&state.registry, &bytes),
    };
    if let Some(needed) = needed
        && !principal.allows(needed)
    {
        return auth::insufficient_scope(&state.config, &principal, needed)
            .log(&request_id)
            .into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// [`scope_of_tool_call`] of a call already read.
fn scope_of_call(registry: &Registry, call: &ToolCall) -> Option<Scope> {
    let def = registry.by_tool_name(&call.name)?.def;
    let estimate = def.price.is_some()
        && call
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get(ESTIMATE_FIELD))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    Some(if estimate { Scope::Read } else { def.scope })
}

/// The scope a JSON-RPC `tools/call` body needs, or `None` when it is anything else (rmcp
/// answers malformed bodies and unknown tools itself).
fn scope_of_tool_call(registry: &Registry, body: &[u8]) -> Option<Scope> {
    let message: Value = serde_json::from_slice(body).ok()?;
    if message.get("method")?.as_str()? != "tools/call" {
        return None;
    }
    let params = message.get("params")?;
    let def = registry.by_tool_name(params.get("name")?.as_str()?)?.def;
    let estimate = def.price.is_some()
        && params
            .get("arguments")
            .and_then(|arguments| arguments.get(ESTIMATE_FIELD))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    Some(if estimate { Scope::Read } else { def.scope })
}
