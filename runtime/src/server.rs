//! The top of the crate: the state assembled, the router, and graceful shutdown.
//!
//! Everything meets here and nothing below imports it (only `lib.rs` declares it; the binary, the
//! tests and the bench use it). [`build_state`] validates the registry and renders the documents
//! that need the faces (OpenAPI, the tool list, the docs page) into the [`AppState`] that every
//! request shares behind an `Arc`. The router mounts the two faces behind the one auth
//! middleware, the public documents (`openapi.json`, the docs page, `/healthz`) in front of it,
//! the routes providers call back ([`crate::callbacks`]) beside them, and a JSON 404 behind
//! everything. Every request gets an id ([`crate::request_id`]), echoed in
//! `x-request-id` and on its log lines, and one access line. The bearer surfaces (REST and MCP)
//! share one CORS policy ([`crate::cors`], outside authentication so preflights need no
//! credential) and a per-credential rate limit ([`crate::rate_limit`], inside it). The accept
//! loop with its timeouts and connection caps is [`crate::connections`]. [`serve`] runs the job
//! worker beside the router unless told not to; [`work`] runs only the worker.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::auth;
use crate::clock::Clock;
use crate::config::Config;
use crate::db::Db;
use crate::error::ApiError;
use crate::registry::Registry;
use crate::request_id::with_request_id;
use crate::state::{AppState, Documents};
use crate::worker::{self, Worker};
use crate::{
    callbacks, connections, cors, docs, housekeeping, mcp, oauth, observe, openapi, rate_limit,
    rest, web,
};

/// Validates the registry, renders the tool list and the documents, and puts the state together;
/// fails with a message naming the action when the registry is invalid.
pub fn build_state(db: Db, clock: Clock, config: Config) -> anyhow::Result<Arc<AppState>> {
    let registry = Registry::build_for(&config.environment).map_err(anyhow::Error::msg)?;
    let document = openapi::document(&registry);
    let documents = Documents {
        docs_html: docs::render(&document),
        openapi_json: Bytes::from(serde_json::to_vec_pretty(&document)?),
    };
    let tools = mcp::tools(&registry);
    Ok(AppState::new(db, clock, config, registry, tools, documents))
}

/// The whole application router.
///
/// Every layer here costs each request it wraps: a layer on a `Router` wraps every route on its
/// own, and every request clones the boxed services of its route, one per layer (the profile in
/// bench/RESULTS.md found dozens of such clones per call). So the two layers every request goes
/// through (its id and access line, then the body timeout and the metrics) wrap the finished
/// router once, from outside, and authentication and the rate limit are one middleware
/// ([`bearer`]) rather than two.
pub fn router(state: Arc<AppState>) -> Router {
    app(state).0
}

/// The router, and the counters of the accept loop that serves it (on the same `/metrics`).
fn app(state: Arc<AppState>) -> (Router, observe::ConnectionMetrics) {
    let observer = observe::Observer::new(
        &state.registry,
        &state.job_metrics,
        state.config.http.body_timeout,
        state.config.metrics_token.clone(),
    );
    let gate = Bearer {
        state: state.clone(),
        limiter: rate_limit::Limiter::new(state.config.rate_limit),
    };
    let mcp = Router::new()
        .nest_service("/api/mcp", mcp::service(state.clone()))
        .route_layer(middleware::from_fn_with_state(
            observer.clone(),
            observe::mcp_tool,
        ))
        .route_layer(middleware::from_fn_with_state(state.clone(), mcp::step_up));
    let bearer = Router::new()
        .nest("/api/v1", rest::action_routes(&state))
        .merge(mcp)
        .route_layer(middleware::from_fn_with_state(gate, bearer))
        .layer(cors::policy());
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/api/v1/openapi.json", get(openapi_json))
        .route("/api/v1/docs", get(docs_page))
        .route(
            "/metrics",
            get(observe::metrics).with_state(observer.clone()),
        )
        .merge(web::routes(state.clone()))
        .merge(oauth::routes())
        .merge(callback_routes())
        .merge(bearer)
        .route_layer(middleware::from_fn_with_state(
            observer.clone(),
            observe::route,
        ))
        .fallback(rest::not_found)
        .with_state(state);
    let connections = observer.connections();
    let outer = tower::ServiceBuilder::new()
        .layer(middleware::from_fn(with_request_id))
        .layer(middleware::from_fn_with_state(observer, observe::track))
        .service(app);
    (Router::new().fallback_service(outer), connections)
}

/// Every declared callback route ([`callbacks`]): `POST`, outside the bearer check, each read
/// whole up to the body limit and answered with JSON.
fn callback_routes() -> Router<Arc<AppState>> {
    let mut router = Router::new();
    for callback in callbacks::all() {
        let handle = callback.handle;
        router = router.route(
            callback.path,
            axum::routing::post(
                move |State(state): State<Arc<AppState>>, request: Request| async move {
                    let (parts, body) = request.into_parts();
                    let body =
                        match crate::body::read(state.config.max_body_bytes, &parts.headers, body)
                            .await
                        {
                            Ok(body) => body,
                            Err(error) => return error.into_response(),
                        };
                    let ctx = callbacks::CallbackCtx {
                        db: state.db.clone(),
                        clock: state.clock.clone(),
                        config: state.config.clone(),
                    };
                    let request = callbacks::CallbackRequest {
                        headers: parts.headers,
                        query: parts.uri.query().unwrap_or("").to_owned(),
                        body,
                    };
                    let reply = handle(ctx, request).await;
                    let status = StatusCode::from_u16(reply.status)
                        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                    (status, axum::Json(reply.body)).into_response()
                },
            ),
        );
    }
    router
}

/// What the bearer surfaces (REST and MCP) check before a call: the credential, then its rate.
#[derive(Clone)]
struct Bearer {
    state: Arc<AppState>,
    limiter: rate_limit::Limiter,
}

/// Authenticates the request ([`auth::admit`]), then takes one token from the credential's
/// bucket ([`rate_limit::Limiter::admit`]), whose headers go on the answer.
async fn bearer(State(gate): State<Bearer>, mut request: Request, next: Next) -> Response {
    let principal = match auth::admit(&gate.state, &mut request).await {
        Ok(principal) => principal,
        Err(refusal) => return refusal,
    };
    match gate.limiter.admit(&principal, &request) {
        Ok(headers) => {
            let mut response = next.run(request).await;
            response.headers_mut().extend(headers);
            response
        }
        Err(refusal) => *refusal,
    }
}

async fn healthz(State(db): State<Db>) -> Response {
    match sqlx::query("select 1").execute(db.pool()).await {
        Ok(_) => axum::Json(serde_json::json!({"status": "ok"})).into_response(),
        Err(error) => ApiError::internal(error).log("healthz").into_response(),
    }
}

async fn openapi_json(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.documents.openapi_json.clone(),
    )
        .into_response()
}

async fn docs_page(State(state): State<Arc<AppState>>) -> Html<String> {
    Html(state.documents.docs_html.clone())
}

/// Serves until `shutdown` resolves, then finishes the requests in flight. Runs the job worker
/// too unless the configuration has none (`serve --no-worker`); at shutdown it stops claiming at
/// once and its running handlers get [`worker::SHUTDOWN_GRACE`] to finish.
pub async fn serve(
    state: Arc<AppState>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let purger = tokio::spawn(housekeeping::run(state.clone()));
    let worker = (state.config.jobs.workers > 0).then(|| start_worker(&state));
    let stopper = worker.as_ref().map(Worker::stopper);
    let flag = state.shutdown.clone();
    let shutdown = async move {
        shutdown.await;
        flag.begin();
        if let Some(stopper) = stopper {
            stopper.stop();
        }
    };
    let (router, metrics) = app(state.clone());
    let served = connections::serve(listener, router, &state.config, metrics, shutdown).await;
    if let Some(worker) = worker {
        worker.shutdown(worker::SHUTDOWN_GRACE).await;
    }
    purger.abort();
    served?;
    Ok(())
}

/// Runs only the job worker (and the recoveries and deletions every instance runs), with no
/// HTTP, until `shutdown` resolves; then as [`serve`] does. For `outreach worker`.
pub async fn work(
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    if state.config.jobs.workers == 0 {
        anyhow::bail!("a worker needs at least one slot (--workers 1 or more)");
    }
    let purger = tokio::spawn(housekeeping::run(state.clone()));
    let worker = start_worker(&state);
    shutdown.await;
    worker.shutdown(worker::SHUTDOWN_GRACE).await;
    purger.abort();
    Ok(())
}

fn start_worker(state: &AppState) -> Worker {
    Worker::start(
        state.db.clone(),
        state.clock.clone(),
        state.config.clone(),
        state.job_metrics.clone(),
    )
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
