//! The HTTP server: state shared by every request, the router, and graceful shutdown.
//!
//! [`AppState`] is built once (registry validated, OpenAPI document and tool list generated) and
//! shared behind an `Arc`. The router mounts the two faces behind the one auth middleware, the
//! public documents (`openapi.json`, the docs page, `/healthz`) in front of it, and a JSON 404
//! behind everything. Every request gets an id, echoed in `x-request-id` and on its log lines.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::auth;
use crate::clock::Clock;
use crate::config::Config;
use crate::db::Db;
use crate::dispatch::Dispatcher;
use crate::registry::Registry;
use crate::{docs, housekeeping, ids, mcp, oauth, openapi, rest, web};

/// What every request shares.
pub struct AppState {
    pub db: Db,
    pub clock: Clock,
    pub config: Arc<Config>,
    pub registry: Arc<Registry>,
    pub tools: Arc<Vec<rmcp::model::Tool>>,
    /// The one dispatch both faces call, over the same database, clock, config and registry.
    pub dispatcher: Dispatcher,
    openapi_json: Bytes,
    docs_html: String,
}

impl AppState {
    /// Validates the registry and renders the documents; fails with a message naming the action
    /// when the registry is invalid.
    pub fn new(db: Db, clock: Clock, config: Config) -> anyhow::Result<Arc<Self>> {
        let registry = Registry::build().map_err(anyhow::Error::msg)?;
        let document = openapi::document(&registry);
        let docs_html = docs::render(&document);
        let openapi_json = Bytes::from(serde_json::to_vec_pretty(&document)?);
        let tools = Arc::new(mcp::tools(&registry));
        let (config, registry) = (Arc::new(config), Arc::new(registry));
        let dispatcher = Dispatcher {
            db: db.clone(),
            clock: clock.clone(),
            config: config.clone(),
            registry: registry.clone(),
        };
        Ok(Arc::new(Self {
            db,
            clock,
            config,
            registry,
            dispatcher,
            tools,
            openapi_json,
            docs_html,
        }))
    }
}

/// The request id, put in the extensions by the request-id middleware.
#[derive(Debug, Clone)]
pub struct RequestId(pub Arc<str>);

/// The id of a request (or `unknown` outside the middleware).
pub fn request_id(request: &Request) -> String {
    request
        .extensions()
        .get::<RequestId>()
        .map_or_else(|| "unknown".to_owned(), |id| id.0.to_string())
}

/// The whole application router.
pub fn router(state: Arc<AppState>) -> Router {
    let mcp = Router::new()
        .nest_service("/api/mcp", mcp::service(state.clone()))
        .route_layer(middleware::from_fn_with_state(state.clone(), mcp::step_up))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_principal,
        ))
        .layer(mcp::cors());
    let authenticated = Router::new()
        .nest("/api/v1", rest::action_routes(&state))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_principal,
        ))
        .merge(mcp);
    Router::new()
        .route("/healthz", get(healthz))
        .route("/api/v1/openapi.json", get(openapi_json))
        .route("/api/v1/docs", get(docs_page))
        .merge(web::routes())
        .merge(oauth::routes())
        .merge(authenticated)
        .fallback(rest::not_found)
        .layer(middleware::from_fn(with_request_id))
        .with_state(state)
}

async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    match sqlx::query("select 1").execute(state.db.pool()).await {
        Ok(_) => axum::Json(serde_json::json!({"status": "ok"})).into_response(),
        Err(error) => crate::ApiError::internal(error)
            .log("healthz")
            .into_response(),
    }
}

async fn openapi_json(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.openapi_json.clone(),
    )
        .into_response()
}

async fn docs_page(State(state): State<Arc<AppState>>) -> Html<String> {
    Html(state.docs_html.clone())
}

/// Gives the request an id, logs one line when it ends, and returns the id in `x-request-id`.
async fn with_request_id(mut request: Request, next: Next) -> Response {
    let id: Arc<str> = ids::new_id("req").into();
    request.extensions_mut().insert(RequestId(id.clone()));
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let span = tracing::info_span!("request", request_id = %id, %method, %path);
    let started = Instant::now();
    let mut response = next.run(request).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::debug!(
            status = response.status().as_u16(),
            elapsed_us = started.elapsed().as_micros() as u64,
            "done"
        );
    });
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

/// Serves until `shutdown` resolves, then finishes the requests in flight.
pub async fn serve(
    state: Arc<AppState>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let purger = tokio::spawn(housekeeping::run(state.clone()));
    let app = router(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await;
    purger.abort();
    served?;
    Ok(())
}

/// Resolves on Ctrl-C or SIGTERM. The handlers are installed when this is called, not when the
/// future is first polled, so a signal that arrives while the server is still starting is not lost.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    let ctrl_c = tokio::spawn(tokio::signal::ctrl_c());
    async move {
        let ctrl_c = async {
            if !matches!(ctrl_c.await, Ok(Ok(()))) {
                std::future::pending::<()>().await;
            }
        };
        #[cfg(unix)]
        let terminate = async move {
            match terminate {
                Some(mut signal) => {
                    signal.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let terminate = std::future::pending::<()>();
        tokio::select! {
            () = ctrl_c => {},
            () = terminate => {},
        }
        tracing::info!("shutting down: finishing requests in flight");
    }
}
