//! What every request shares: the database, the clock, the configuration, the registry and the
//! documents rendered from it once at start-up.
//!
//! This module sits low on purpose. Every module that serves requests (the faces, auth, the OAuth
//! server, the web pages) takes `State<Arc<AppState>>`, so the state must not import any of them:
//! a state that knew its handlers would put the whole crate in one cycle. The tool list, the
//! OpenAPI document and the docs page are made by modules above this one (`mcp`, `openapi`,
//! `docs`), so `server::build_state` renders them at the top and hands them in already made. A handler that needs only a
//! piece can ask for just that through axum's [`FromRef`]: `State<Db>` or `State<Clock>`. (Not
//! `State<Arc<Config>>`: the orphan rule forbids implementing a foreign trait for `Arc<Config>`.)

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::FromRef;

use crate::clock::Clock;
use crate::config::Config;
use crate::db::Db;
use crate::registry::Registry;
use crate::retry::Retries;
use crate::worker::JobMetrics;

/// What every request shares.
pub struct AppState {
    pub db: Db,
    pub clock: Clock,
    pub config: Arc<Config>,
    pub registry: Arc<Registry>,
    pub tools: Arc<Vec<rmcp::model::Tool>>,
    pub documents: Documents,
    /// The job worker's counters, shown on `/metrics`.
    pub job_metrics: JobMetrics,
    /// Conflicts run again in place by dispatch and the worker, shown on `/metrics`.
    pub retries: Retries,
    /// Set when the server begins to shut down, for the requests that wait on purpose (an MCP
    /// call held open for its progress) to answer at once rather than hold the shutdown up.
    pub shutdown: Shutdown,
}

/// A flag raised once, when the server begins to shut down; cheap to clone and to wait on.
#[derive(Clone)]
pub struct Shutdown(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Shutdown {
    fn default() -> Self {
        Self(Arc::new(tokio::sync::watch::channel(false).0))
    }
}

impl Shutdown {
    /// Raises the flag; whoever waits wakes.
    pub fn begin(&self) {
        self.0.send_replace(true);
    }

    /// Resolves once the flag is raised (at once if it already is).
    pub async fn begun(&self) {
        let mut receiver = self.0.subscribe();
        // An error means the sender is gone, which cannot happen while `self` holds it.
        let _ = receiver.wait_for(|begun| *begun).await;
    }
}

/// The documents served as they are, rendered once from the registry.
pub struct Documents {
    /// `/api/v1/openapi.json`, pretty-printed.
    pub openapi_json: Bytes,
    /// `/api/v1/docs`.
    pub docs_html: String,
}

impl AppState {
    /// Puts the pieces together; `server::build_state` validates the registry and renders the
    /// tool list and the documents first.
    pub fn new(
        db: Db,
        clock: Clock,
        config: Config,
        registry: Registry,
        tools: Vec<rmcp::model::Tool>,
        documents: Documents,
    ) -> Arc<Self> {
        let retries = Retries::default();
        Arc::new(Self {
            db,
            clock,
            config: Arc::new(config),
            registry: Arc::new(registry),
            tools: Arc::new(tools),
            documents,
            job_metrics: JobMetrics::with_retries(retries.clone()),
            retries,
            shutdown: Shutdown::default(),
        })
    }
}

impl FromRef<Arc<AppState>> for Db {
    fn from_ref(state: &Arc<AppState>) -> Self {
        state.db.clone()
    }
}

impl FromRef<Arc<AppState>> for Clock {
    fn from_ref(state: &Arc<AppState>) -> Self {
        state.clock.clone()
    }
}
