//! The baseline: a bare axum handler that returns the bytes of a real `GET /api/v1/workspace`
//! response, with no auth, no database, no middleware. It runs in a child process (this binary's
//! hidden `baseline` subcommand) on a multi-thread runtime with the default worker count, as the
//! service does, so it competes with the load generator for the cores the same way.

use std::net::SocketAddr;
use std::path::Path;

use axum::Router;
use axum::http::header;
use axum::routing::get;
use bytes::Bytes;
use tokio::net::TcpListener;

/// Serves the body in `body_file` at `GET /api/v1/workspace`; prints the bound address on the
/// first line of stdout.
pub async fn serve(addr: SocketAddr, body_file: &Path) -> anyhow::Result<()> {
    let body = Bytes::from(std::fs::read(body_file)?);
    let app = Router::new().route(
        "/api/v1/workspace",
        get(move || {
            let body = body.clone();
            async move { ([(header::CONTENT_TYPE, "application/json")], body) }
        }),
    );
    let listener = TcpListener::bind(addr).await?;
    println!("{}", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
