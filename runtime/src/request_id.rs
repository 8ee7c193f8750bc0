//! Request ids: every request gets one, echoed in `x-request-id` and on its log lines.
//!
//! A leaf of its own so that the auth middleware, both faces and the error logging can name a
//! request's id without reaching up to the server that installs the middleware.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::ids;

/// The request id, put in the extensions by [`with_request_id`].
#[derive(Debug, Clone)]
pub struct RequestId(pub Arc<str>);

/// The id of a request (or `unknown` outside the middleware).
pub fn request_id(request: &Request) -> String {
    request
        .extensions()
        .get::<RequestId>()
        .map_or_else(|| "unknown".to_owned(), |id| id.0.to_string())
}

/// Gives the request an id, logs one line when it ends, and returns the id in `x-request-id`.
pub async fn with_request_id(mut request: Request, next: Next) -> Response {
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
