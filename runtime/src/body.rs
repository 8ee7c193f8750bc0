//! A request's body, read whole under the configured limit, for both faces.
//!
//! One reader so that REST and MCP refuse the same body the same way: 413 for a body over the
//! limit, 400 for one that cannot be read. It also holds a large body once, not twice: axum's
//! `to_bytes` keeps every chunk until the last has come and then copies them all.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, header};

use crate::error::{ApiError, ErrorCode};

/// Reads a request's body whole, up to `limit` bytes: 413 `payload_too_large` past it (before
/// anything is read when `Content-Length` says so), 400 `invalid_request` when the body cannot be
/// read (its chunked framing breaks, the client goes away).
pub async fn read(limit: usize, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let too_large = || {
        ApiError::new(
            ErrorCode::PAYLOAD_TOO_LARGE,
            format!("The body is larger than the limit of {limit} bytes."),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > limit as u64) {
        return Err(too_large());
    }
    // Not `axum::body::to_bytes`: it keeps every chunk until the last has come and then copies
    // them into one buffer, so a large body (an import's 8.5 MiB) is held twice. Here each chunk
    // is copied into a buffer sized by `Content-Length` as it comes, and dropped.
    let mut body = std::pin::pin!(body);
    let mut next = async || {
        std::future::poll_fn(|cx| http_body::Body::poll_frame(body.as_mut(), cx))
            .await
            .transpose()
            .map_err(|error| {
                ApiError::invalid_request(format!(
                    "The request body could not be read ({error}); send it again, whole."
                ))
            })
    };
    let expected = declared.map_or(0, |length| length as usize).min(limit);
    let mut first: Option<Bytes> = None;
    let mut collected: Vec<u8> = Vec::new();
    while let Some(frame) = next().await? {
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let so_far = first.as_ref().map_or(collected.len(), Bytes::len);
        if so_far + data.len() > limit {
            return Err(too_large());
        }
        if first.is_none() && collected.is_empty() {
            first = Some(data);
            continue;
        }
        if let Some(held) = first.take() {
            collected.extend_from_slice(&held);
        }
        // Room for the whole declared body at once, but only once an eighth of it has come: a
        // client cannot have the limit set aside by declaring it and sending two bytes.
        if collected.len() + data.len() >= expected / 8 && collected.capacity() < expected {
            collected.reserve_exact(expected - collected.len());
        }
        collected.extend_from_slice(&data);
    }
    Ok(first.unwrap_or_else(|| Bytes::from(collected)))
}
