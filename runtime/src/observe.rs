//! What an operator sees of the traffic: the body timeout, the facts for the access line, and
//! the Prometheus metrics at `/metrics`.
//!
//! [`track`] wraps every request inside the request-id layer: it bounds how long the body may
//! take to arrive (a body that trickles in holds a connection as surely as unfinished headers),
//! and when the response is ready it counts it and its latency. [`route`] records the matched
//! route template, and with it the action, for the access line and the labels; [`mcp_tool`]
//! reads the tool name of an MCP `tools/call`, since the route of MCP is always `/api/mcp`.
//!
//! Labels are bounded on purpose: an action is named only when the registry knows it (a client
//! can send any tool name, and a label per name would grow without end); every other request is
//! labelled by its route template, or `unmatched`. The registry is this instance's own
//! (`prometheus-client`, not a global recorder), so tests running several apps in one process
//! each read their own figures. The job worker's counters ([`JobMetrics`]) and the accept loop's
//! ([`ConnectionMetrics`]: connections refused, evicted and timed out, which never reach a
//! request) are registered here too.
//!
//! `/metrics` is public by default, as is common for a self-hosted service scraped on its own
//! port; setting a metrics token makes it need `Authorization: Bearer <token>`.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry as Metrics;
use subtle::ConstantTimeEq;

use crate::error::{ApiError, ErrorCode};
use crate::registry::Registry;
use crate::request_id::{RequestLog, clip, note, request_id};
use crate::rpc::ToolCall;
use crate::worker::JobMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    action: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    action: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// What the accept loop (`crate::connections`) refused, and closed of its own accord.
#[derive(Clone, Default)]
pub struct ConnectionMetrics {
    refused: Family<ReasonLabels, Counter>,
    closed: Family<ReasonLabels, Counter>,
}

impl ConnectionMetrics {
    fn register(&self, metrics: &mut Metrics) {
        metrics.register(
            "outreach_connections_refused",
            "Connections refused at accept with 429, by reason: per_client (the client address holds its cap), all_busy (every slot has a request in flight)",
            self.refused.clone(),
        );
        metrics.register(
            "outreach_connections_closed",
            "Connections the server closed of its own accord, by reason: evicted (its slot went to a newcomer), no_request (no request head within the header timeout of accept), idle (the idle timeout)",
            self.closed.clone(),
        );
    }

    pub fn refused(&self, reason: &'static str) {
        self.refused.get_or_create(&ReasonLabels { reason }).inc();
    }

    pub fn closed(&self, reason: &'static str) {
        self.closed.get_or_create(&ReasonLabels { reason }).inc();
    }
}

/// This instance's metrics, the action of each REST route, and the limits `track` applies.
#[derive(Clone)]
pub struct Observer(Arc<Inner>);

struct Inner {
    metrics: Mutex<Metrics>,
    connections: ConnectionMetrics,
    requests: Family<RequestLabels, Counter>,
    latency: Family<LatencyLabels, Histogram>,
    /// `(method, "/api/v1/...")` to the action's name.
    routes: HashMap<(Method, String), &'static str>,
    /// Tool name to action name.
    tools: HashMap<String, &'static str>,
    body_timeout: Duration,
    token: Option<String>,
}

fn latency_histogram() -> Histogram {
    // 1 ms to about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Observer {
    pub fn new(
        registry: &Registry,
        jobs: &JobMetrics,
        body_timeout: Duration,
        token: Option<String>,
    ) -> Self {
        let mut metrics = Metrics::default();
        jobs.register(&mut metrics);
        let connections = ConnectionMetrics::default();
        connections.register(&mut metrics);
        let requests = Family::<RequestLabels, Counter>::default();
        metrics.register(
            "outreach_http_requests",
            "Requests answered, by action (or route) and status",
            requests.clone(),
        );
        let latency = Family::<LatencyLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        metrics.register(
            "outreach_http_request_duration_seconds",
            "Time from the request to its response headers, by action (or route)",
            latency.clone(),
        );
        let mut routes = HashMap::new();
        let mut tools = HashMap::new();
        for action in registry.actions() {
            if let Some(route) = &action.route {
                routes.insert(
                    (route.method.clone(), format!("/api/v1{}", route.path)),
                    action.name(),
                );
            }
            tools.insert(action.tool_name(), action.name());
        }
        Self(Arc::new(Inner {
            metrics: Mutex::new(metrics),
            connections,
            requests,
            latency,
            routes,
            tools,
            body_timeout,
            token: token.filter(|token| !token.is_empty()),
        }))
    }

    /// The accept loop's counters, on this instance's `/metrics`.
    pub fn connections(&self) -> ConnectionMetrics {
        self.0.connections.clone()
    }

    fn encode(&self) -> String {
        let mut text = String::new();
        let metrics = self
            .0
            .metrics
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if prometheus_client::encoding::text::encode(&mut text, &metrics).is_err() {
            text.clear();
        }
        text
    }
}

/// Outer middleware (inside the request id): bounds the body's arrival, then counts the answer.
pub async fn track(State(observer): State<Observer>, request: Request, next: Next) -> Response {
    let log = request.extensions().get::<Arc<RequestLog>>().cloned();
    let request_id = request_id(&request);
    let started = Instant::now();
    let timeout = observer.0.body_timeout;
    let (parts, body) = request.into_parts();
    let timed_out = log.clone();
    let body = Body::new(TimedBody {
        inner: body,
        timeout,
        deadline: None,
        on_timeout: Some(Box::new(move || {
            if let Some(log) = timed_out {
                log.update(|fields| fields.body_timed_out = true);
            }
        })),
    });
    let mut response = next.run(Request::from_parts(parts, body)).await;
    let fields = log.map(|log| log.fields()).unwrap_or_default();
    if fields.body_timed_out {
        // Whatever the handler made of a body cut short (a 413, a parse error), the cause is the
        // clock.
        response = ApiError::new(
            ErrorCode::INVALID_REQUEST,
            format!(
                "The request body did not arrive within {} seconds; send it faster, or in smaller requests.",
                timeout.as_secs()
            ),
        )
        .log(&request_id)
        .into_response();
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    let action = fields
        .action
        .or(fields.route)
        .unwrap_or_else(|| "unmatched".to_owned());
    observer
        .0
        .requests
        .get_or_create(&RequestLabels {
            action: action.clone(),
            status: response.status().as_u16().to_string(),
        })
        .inc();
    observer
        .0
        .latency
        .get_or_create(&LatencyLabels { action })
        .observe(started.elapsed().as_secs_f64());
    response
}

/// Route middleware: records the matched route template and, for a REST action, its name.
pub async fn route(State(observer): State<Observer>, request: Request, next: Next) -> Response {
    if let Some(matched) = request.extensions().get::<MatchedPath>() {
        let template = matched.as_str().to_owned();
        let action = observer
            .0
            .routes
            .get(&(request.method().clone(), template.clone()))
            .map(|name| (*name).to_owned());
        note(&request, |log| {
            log.route = Some(template);
            if action.is_some() {
                log.action = action;
            }
        });
    }
    next.run(request).await
}

/// The largest MCP body read here for its tool name; larger ones are left to the transport.
const MCP_PEEK_BYTES: u64 = 1024 * 1024;

/// MCP middleware (after authentication): records the tool of a `tools/call`. A known tool is the
/// action; an unknown one is logged clipped and counted as `unknown_tool`.
pub async fn mcp_tool(State(observer): State<Observer>, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if request.method() != Method::POST || declared.is_none_or(|length| length > MCP_PEEK_BYTES) {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MCP_PEEK_BYTES as usize).await {
        Ok(bytes) => bytes,
        Err(_) => {
            // The body timed out or the client went away; `track` says which.
            let request = Request::from_parts(parts, Body::empty());
            return ApiError::invalid_request("The request body could not be read.")
                .log(&request_id(&request))
                .into_response();
        }
    };
    // A plain call is read once here for the layers after (see `crate::rpc`).
    let tool = match ToolCall::of_or_read(&mut parts.extensions, &bytes) {
        Some(call) => Some(call.name.clone()),
        None => tool_name(&bytes),
    };
    if let Some(tool) = tool {
        let action = match observer.0.tools.get(&tool) {
            Some(name) => (*name).to_owned(),
            None => "unknown_tool".to_owned(),
        };
        let logged = clip(&tool).into_owned();
        if let Some(log) = parts.extensions.get::<Arc<RequestLog>>() {
            log.update(|fields| {
                fields.action = Some(action);
                fields.route = Some(format!("/api/mcp tools/call {logged}"));
            });
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn tool_name(body: &Bytes) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Call {
        method: String,
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        name: Option<String>,
    }
    let call: Call = serde_json::from_slice(body).ok()?;
    (call.method == "tools/call").then_some(call.params?.name?)
}

/// `GET /metrics`: the Prometheus text format.
pub async fn metrics(State(observer): State<Observer>, request: Request) -> Response {
    if let Some(token) = &observer.0.token {
        let sent = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .unwrap_or("");
        if !bool::from(sent.as_bytes().ct_eq(token.as_bytes())) {
            return ApiError::new(
                ErrorCode::UNAUTHENTICATED,
                "The metrics need `Authorization: Bearer <metrics token>` (the server's OUTREACH_METRICS_TOKEN).",
            )
            .into_response();
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        observer.encode(),
    )
        .into_response()
}

/// A request body that must arrive in full within `timeout` of its first read.
struct TimedBody {
    inner: Body,
    timeout: Duration,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    on_timeout: Option<Box<dyn FnOnce() + Send + Sync>>,
}

/// The error a [`TimedBody`] ends with.
#[derive(Debug)]
struct BodyTimedOut;

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyTimedOut {}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let timeout = this.timeout;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        if deadline.as_mut().poll(cx).is_ready() {
            if let Some(on_timeout) = this.on_timeout.take() {
                on_timeout();
            }
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
