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
//! Actions the domain registers as long calls (`crate::tasks`) are offered as MCP tasks to
//! clients that declare the Tasks extension, and held open with progress for clients that ask
//! for progress instead ([`tasks`]); `tasks/get`, `tasks/update` and `tasks/cancel` dispatch the
//! registration's actions like any call.
//!
//! An action the domain gives an HTML view (`crate::apps`, the MCP Apps extension) has its tool
//! point at it, and the view is served as a resource to whoever may call the tool ([`apps`]).
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
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult, Implementation,
    ListPromptsResult, ListResourcesResult, ListToolsResult, MetaObject, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, RequestMetaObject, ServerCapabilities,
    ServerConfig, Tool, UpdateTaskParams,
};
use rmcp::transport::StreamableHttpServerConfig;
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, service::RequestContext};
use serde_json::Value;

mod apps;
mod confirm;
mod fast;
mod guard;
mod prompt;
mod selection;
mod tasks;
mod tools;

pub use guard::host_matches;
pub use tools::{input_schema, tool_description, tools};

use selection::Selection;
use tools::offered;

use crate::auth::{self, CredentialKind, Principal};
use crate::dispatch::Dispatcher;
use crate::error::ApiError;
use crate::json::JsonBody;
use crate::registry::{ESTIMATE_FIELD, FIELDS_FIELD, IDEMPOTENCY_FIELD, Registry};
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
        // Only a long call held open for its progress is answered with a stream (`tasks.rs`);
        // the comment keeps its connection from looking idle while the work has no news.
        .with_sse_keep_alive(Some(SSE_KEEP_ALIVE))
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
    // Shared, not cloned: cloning rmcp's transport for every request showed in the profile.
    let transport = Arc::new(transport);
    let fast = state.config.mcp_fast_path.then(|| {
        fast::Fast::new(McpFace {
            state: state.clone(),
        })
    });
    Router::new()
        .fallback(move |request: Request| {
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

/// How often an event stream carries a keep-alive comment.
pub const SSE_KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// The MCP server handler over the registry.
#[derive(Clone)]
pub struct McpFace {
    state: Arc<AppState>,
}

impl ServerHandler for McpFace {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_prompts()
            .enable_resources()
            .enable_tools()
            .build();
        apps::declare(&mut capabilities);
        // The Tasks extension, when some action is a long call (SEP-2663 has no per-tool marker:
        // the server decides per call).
        let capabilities = if self.state.registry.tasks().is_empty() {
            capabilities
        } else {
            let mut capabilities = capabilities;
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(
                    rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                    Default::default(),
                );
            capabilities
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("outreach", env!("CARGO_PKG_VERSION")))
            .with_instructions(instructions())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let parts = context.extensions.get::<http::request::Parts>();
        Ok(ListToolsResult::with_all_items(self.offered(parts)?))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let (scope, _) = self.view(context.extensions.get())?;
        Ok(ListPromptsResult::with_all_items(
            crate::prompts::offered(scope).map(prompt::listed).collect(),
        ))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let (scope, _) = self.view(context.extensions.get())?;
        prompt::rendered(scope, &request).map(GetPromptResponse::from)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let (scope, selection) = self.view(context.extensions.get())?;
        Ok(apps::listed(&self.state.registry, scope, selection))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let (scope, _) = self.view(context.extensions.get())?;
        apps::read(&self.state.registry, scope, &request.uri).map(ReadResourceResponse::from)
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
        let parts = context.extensions.get::<http::request::Parts>();
        let tasks = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        let progress = match context.meta.get_progress_token() {
            Some(token) if self.holds_open(&request.name, &context.meta, parts) => {
                Some(tasks::ProgressSink {
                    token,
                    context: context.clone(),
                })
            }
            _ => None,
        };
        if let Some(answer) = self.confirm_first(&request, &context).await? {
            return Ok(answer);
        }
        self.call(request, parts, tasks::Asked { tasks, progress })
            .await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.get_task_for(&request.task_id, context.extensions.get())
            .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.cancel_task_for(&request.task_id, context.extensions.get())
            .await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.update_task_for(&request.task_id, context.extensions.get())
            .await
    }
}

/// The server's instructions: where to start, and how to be offered more tools than the default.
/// Made once: every `initialize` sends them.
fn instructions() -> String {
    static INSTRUCTIONS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    INSTRUCTIONS.get_or_init(instructions_text).clone()
}

fn instructions_text() -> String {
    let toolsets = crate::toolsets::toolsets();
    let listed = |default: bool| {
        toolsets
            .iter()
            .filter(|toolset| toolset.default == default)
            .map(|toolset| {
                format!(
                    "`{}` ({})",
                    toolset.name,
                    toolset.description.trim_end_matches('.')
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    format!(
        "Prospecting and outreach workspace. Call service_get_workspace first to see the workspace, \
         your role and your scopes. Every tool is also a REST operation under /api/v1. \
         Only the tools your credential's scopes allow are listed. This connection lists the \
         toolsets you asked for, or by default {}. The others are {}: ask for them with \
         `?toolsets=<name>,<name>` (or `all`) on the MCP URL or an `X-MCP-Toolsets` header. \
         `/api/mcp/readonly` lists only the tools that change nothing. {}",
        listed(true),
        listed(false),
        tools::SHARED_ARGUMENTS_TEXT,
    )
}

/// Who is calling: the principal the auth middleware found, and the request's id.
pub(super) struct Caller {
    principal: Arc<Principal>,
    request_id: Arc<str>,
}

impl McpFace {
    /// The caller of a request whose HTTP `parts` rmcp or the fast path hands over.
    fn caller(&self, parts: Option<&http::request::Parts>) -> Result<Caller, McpError> {
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
        Ok(Caller {
            principal,
            request_id,
        })
    }

    /// The tools this request is offered: its selection (read by the guard) and its caller's
    /// scope decide, in the registry's fixed order.
    fn offered(&self, parts: Option<&http::request::Parts>) -> Result<Vec<Tool>, McpError> {
        let (scope, selection) = self.view(parts)?;
        Ok(offered(
            &self.state.registry,
            &self.state.tools,
            scope,
            selection,
        ))
    }

    /// What decides a request's tool list: its caller's scope now, and its selection.
    fn view(&self, parts: Option<&http::request::Parts>) -> Result<(Scope, Selection), McpError> {
        let caller = self.caller(parts)?;
        let selection = parts
            .and_then(|parts| parts.extensions.get::<Selection>())
            .copied()
            .unwrap_or_else(Selection::default_set);
        Ok((caller.principal.effective, selection))
    }

    /// Dispatches an action by name with no idempotency key: the success body, or the error.
    async fn dispatch_by_name(
        &self,
        caller: &Caller,
        name: &str,
        input: Value,
    ) -> Result<Value, ApiError> {
        let Some(action) = self.state.registry.get(name) else {
            return Err(ApiError::internal(format!("no action `{name}`")));
        };
        let reply = Dispatcher::from_ref(&self.state)
            .dispatch(
                caller.principal.clone(),
                action,
                input,
                None,
                caller.request_id.clone(),
            )
            .await?;
        if reply.status.is_success() {
            Ok(reply.body.to_value())
        } else {
            Err(ApiError::internal(format!(
                "`{name}` answered {} without an error",
                reply.status
            )))
        }
    }

    /// Whether a `tools/call` of `tool` is held open for its progress (see [`tasks`]): a long
    /// call, with a progress token, from a client without the Tasks extension that can read
    /// an event stream. The fast path leaves these to rmcp, whose transport streams.
    fn holds_open(
        &self,
        tool: &str,
        meta: &RequestMetaObject,
        parts: Option<&http::request::Parts>,
    ) -> bool {
        meta.get_progress_token().is_some()
            && !meta
                .client_capabilities()
                .is_some_and(|capabilities| capabilities.supports_tasks())
            && parts.is_some_and(|parts| {
                parts
                    .extensions
                    .get::<guard::EventStreamAccepted>()
                    .is_some()
            })
            && self
                .state
                .registry
                .by_tool_name(tool)
                .and_then(|action| self.state.registry.task_of(action.name()))
                .is_some()
    }

    /// A `tools/call`, from rmcp's handler or the fast path: `parts` are the HTTP request's,
    /// whose extensions hold the principal the auth middleware found and the request id;
    /// `asked` says how a long call may be answered.
    async fn call(
        &self,
        request: CallToolRequestParams,
        parts: Option<&http::request::Parts>,
        asked: tasks::Asked,
    ) -> Result<CallToolResponse, McpError> {
        Ok(match self.call_answer(request, parts, asked).await? {
            CallAnswer::Output(output) => success_result(output.to_value(), false).into(),
            CallAnswer::Response(response) => response,
        })
    }

    /// [`McpFace::call`], with a plain success left as the action's output bytes, which the
    /// fast path writes as they are.
    async fn call_answer(
        &self,
        request: CallToolRequestParams,
        parts: Option<&http::request::Parts>,
        asked: tasks::Asked,
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
        let readonly = parts
            .and_then(|parts| parts.extensions.get::<Selection>())
            .is_some_and(|selection| selection.readonly);
        if readonly && !action.is_read_only() {
            return Err(McpError::invalid_params(
                format!(
                    "`{}` changes things, and this connection is read-only (`/api/mcp/readonly` or \
                     `?readonly=true`); connect to `/api/mcp` to call it.",
                    request.name
                ),
                None,
            ));
        }
        let caller = self.caller(parts)?;
        let Caller {
            principal,
            request_id,
        } = &caller;
        let mut arguments = request.arguments.unwrap_or_default();
        let idempotency_key = match arguments.remove(IDEMPOTENCY_FIELD) {
            None | Some(Value::Null) => None,
            Some(Value::String(key)) if action.def.idempotent => Some(key),
            Some(Value::String(_)) => {
                let error = ApiError::invalid_request(format!(
                    "Unknown field `{IDEMPOTENCY_FIELD}`: `{}` does not take idempotency keys.",
                    request.name
                ));
                return Ok(CallAnswer::Response(error_result(&error.body()).into()));
            }
            Some(_) => {
                let error = ApiError::invalid_request(format!(
                    "Invalid field `{IDEMPOTENCY_FIELD}`: expected a string."
                ));
                return Ok(CallAnswer::Response(error_result(&error.body()).into()));
            }
        };
        let fields = match arguments.remove(FIELDS_FIELD) {
            None | Some(Value::Null) => None,
            Some(value) => match action.chosen_fields(value) {
                Ok(fields) => Some(fields),
                Err(error) => return Ok(CallAnswer::Response(error_result(&error.body()).into())),
            },
        };
        let result = match Dispatcher::from_ref(&self.state)
            .dispatch_fields(
                principal.clone(),
                action,
                Value::Object(arguments),
                idempotency_key,
                request_id.clone(),
                fields,
            )
            .await
        {
            // Neither a task nor a held call was asked for, so a long call answers as any other.
            Ok(reply)
                if reply.status.is_success()
                    && !reply.replayed
                    && !asked.tasks
                    && asked.progress.is_none() =>
            {
                return Ok(CallAnswer::Output(reply.body));
            }
            Ok(reply) if reply.status.is_success() => {
                return Ok(CallAnswer::Response(
                    self.answer(
                        action.name(),
                        reply.body.to_value(),
                        reply.replayed,
                        &caller,
                        asked,
                    )
                    .await,
                ));
            }
            Ok(reply) => error_result(&reply.body.to_value()),
            Err(error) => error_result(&error.log(request_id).body()),
        };
        Ok(CallAnswer::Response(result.into()))
    }

    /// A successful call's answer: a task or a held call for a long call when the client asked
    /// for one (see [`tasks`]), the output otherwise.
    async fn answer(
        &self,
        action: &str,
        output: Value,
        replayed: bool,
        caller: &Caller,
        asked: tasks::Asked,
    ) -> CallToolResponse {
        let long_call = self
            .state
            .registry
            .task_of(action)
            .and_then(|def| Some((def, tasks::view_of(def, &output)?)));
        let Some((def, view)) = long_call else {
            return success_result(output, replayed).into();
        };
        if asked.tasks {
            let created = tasks::created(&view);
            return CallToolResponse::Task(if replayed {
                created.with_meta(replayed_meta())
            } else {
                created
            });
        }
        match asked.progress {
            Some(sink) => {
                let (view, output) = self.hold(def, caller, view, output, sink).await;
                let result = tasks::final_result(&view, mark_replayed(output, replayed));
                match replayed {
                    true => result.with_meta(Some(replayed_meta())),
                    false => result,
                }
                .into()
            }
            None => success_result(output, replayed).into(),
        }
    }
}

/// What a `tools/call` answered: a plain success as the action's output bytes, else the
/// response made with rmcp's types.
pub(super) enum CallAnswer {
    Output(JsonBody),
    Response(CallToolResponse),
}

/// A failed call: `isError` with the `{error, code, ...}` body as JSON text, and no
/// `structuredContent`, which a client would validate against a tool's `outputSchema` if it had
/// one (the official TypeScript SDK does even for errors, and throws instead of showing the
/// sentence).
fn error_result(body: &Value) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}

/// The `_meta` key that marks an answer replayed for a reused idempotency key.
pub const REPLAYED_META: &str = "idempotent_replayed";

/// A successful call's output as its tool result. A replayed answer says so twice:
/// `"replayed": true` in `structuredContent` for the model (the REST answer says it in a header
/// instead), and `_meta.idempotent_replayed` for the host, beside the
/// stored body unchanged otherwise.
fn success_result(output: Value, replayed: bool) -> CallToolResult {
    let result = CallToolResult::structured(mark_replayed(output, replayed));
    match replayed {
        true => result.with_meta(Some(replayed_meta())),
        false => result,
    }
}

fn mark_replayed(mut output: Value, replayed: bool) -> Value {
    if replayed && let Value::Object(fields) = &mut output {
        fields.insert(tools::REPLAYED_FIELD.to_owned(), Value::Bool(true));
    }
    output
}

fn replayed_meta() -> MetaObject {
    let mut meta = MetaObject::new();
    meta.insert(REPLAYED_META.to_owned(), Value::Bool(true));
    meta
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
    let bytes = match crate::body::read(state.config.max_body_bytes, &parts.headers, body).await {
        Ok(bytes) => bytes,
        Err(error) => return error.into_response(),
    };
    let needed = match ToolCall::of_or_read(&mut parts.extensions, &bytes) {
        Some(call) => scope_of_plain_call(&state.registry, &call),
        None => scope_of_call(&state.registry, &bytes),
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

/// [`scope_of_call`] of a plain `tools/call` already read (see `crate::rpc`).
fn scope_of_plain_call(registry: &Registry, call: &ToolCall) -> Option<Scope> {
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

/// The scope a JSON-RPC `tools/call` body needs (or a task method's: the scope of the action it
/// dispatches), or `None` when it is anything else (rmcp answers malformed bodies and unknown
/// tools itself).
fn scope_of_call(registry: &Registry, body: &[u8]) -> Option<Scope> {
    let message: Value = serde_json::from_slice(body).ok()?;
    let params = message.get("params")?;
    let task = || registry.task_by_id(params.get("taskId")?.as_str()?);
    let action = match message.get("method")?.as_str()? {
        "tools/call" => params.get("name")?.as_str()?,
        "tasks/get" | "tasks/update" => return Some(registry.get(task()?.get)?.def.scope),
        "tasks/cancel" => return Some(registry.get(task()?.cancel)?.def.scope),
        _ => return None,
    };
    let def = registry.by_tool_name(action)?.def;
    let estimate = def.price.is_some()
        && params
            .get("arguments")
            .and_then(|arguments| arguments.get(ESTIMATE_FIELD))
            .and_then(Value::as_bool)
            .unwrap_or(false);
    Some(if estimate { Scope::Read } else { def.scope })
}
