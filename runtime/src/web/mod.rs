//! The web pages: sign-in and the settings area (API keys, connected apps, members, sending terms).
//!
//! Server-rendered HTML from compile-time templates (askama, `runtime/templates/`), one small
//! hand-written stylesheet built into the binary, no script from anywhere else. Every page reads
//! its [`session::Session`] from the database; every form carries a CSRF token.

use std::sync::Arc;

use axum::Router;

use crate::server::AppState;

pub mod session;

/// The routes of the web pages (`/login`, `/logout`, `/settings/...`, `/assets/...`).
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
}
