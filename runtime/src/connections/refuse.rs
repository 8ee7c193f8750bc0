//! The answer to a connection that gets no slot: a fixed HTTP/1.1 `429` written without waiting,
//! then the socket closed.
//!
//! Refusing must cost less than serving, or a flood of refusals is the outage again; so the
//! answer does not go through hyper. It is rendered once per listener, and written with one
//! non-blocking write on the socket just accepted, whose send buffer is empty: it never waits
//! for the client. The client may not have sent its request yet; HTTP/1.1 lets a server answer
//! early and close, and `connection: close` says it will.
//!
//! Why `429 rate_limited` for both refusals rather than a `503`: the error codes are a public
//! contract with one status each, and `rate_limited` with `Retry-After` already means "too much
//! from you or at once: back off and retry", which is what a client should do in both cases (its
//! address holds too many connections, or every slot has a request in flight). The sentence
//! says which.
//!
//! Closing: a socket closed while the client's request sits unread in it sends a reset, and some
//! clients drop an answer they have not read yet when the reset arrives. So the write side is
//! shut first (the answer is followed by a FIN) and the socket lingers, reading and discarding,
//! until the client closes or [`LINGER`] passes. At most [`LINGERING`] sockets linger at once;
//! past that a refused socket is closed at once, after discarding what has already arrived,
//! which only risks the answer of a client that is part of a flood.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use super::slots::Refusal;
use crate::error::{ApiError, ErrorCode};

/// How long a refused socket waits for its client to close.
const LINGER: Duration = Duration::from_secs(1);

/// Refused sockets lingering at once, at most.
const LINGERING: usize = 64;

/// The `Retry-After` of both refusals, in seconds: a slot is usually free again that soon.
const RETRY_AFTER: u64 = 1;

/// The two answers, rendered, and the bound on lingering sockets.
pub(super) struct Refuser {
    per_client: Vec<u8>,
    all_busy: Vec<u8>,
    lingering: Arc<Semaphore>,
}

impl Refuser {
    pub(super) fn new(per_client_cap: usize) -> Self {
        Self {
            per_client: render(&format!(
                "Too many connections from your address: at most {per_client_cap} at once. Close idle ones, or retry in {RETRY_AFTER} s."
            )),
            all_busy: render(&format!(
                "The server is busy: every connection has a request in flight. Retry in {RETRY_AFTER} s."
            )),
            lingering: Arc::new(Semaphore::new(LINGERING)),
        }
    }

    /// Writes the answer to `refusal` on `stream` if it fits without waiting, and closes it.
    pub(super) fn refuse(&self, stream: TcpStream, refusal: Refusal) {
        let answer = match refusal {
            Refusal::PerClient => &self.per_client,
            Refusal::AllBusy => &self.all_busy,
        };
        // Tokio's `try_write` trusts its readiness cache, which stays empty until the reactor has
        // seen the new socket, so it would mostly refuse to try; the plain socket writes now
        // (it is non-blocking).
        let Ok(stream) = stream.into_std() else {
            return;
        };
        // A fresh socket's send buffer takes a few hundred bytes at once; should it not, the
        // client gets a cut answer and the close.
        let written = (&stream).write(answer).unwrap_or(0);
        if written < answer.len() || stream.shutdown(Shutdown::Write).is_err() {
            return;
        }
        let Ok(permit) = self.lingering.clone().try_acquire_owned() else {
            discard_arrived(&stream);
            return;
        };
        let Ok(stream) = TcpStream::from_std(stream) else {
            return;
        };
        tokio::spawn(async move {
            let mut stream = stream;
            let mut discard = [0_u8; 512];
            let drain = async { while let Ok(1..) = stream.read(&mut discard).await {} };
            tokio::time::timeout(LINGER, drain).await.ok();
            drop(permit);
        });
    }
}

/// Reads and drops what the client has sent so far, without waiting, so that closing does not
/// send a reset for it.
fn discard_arrived(mut stream: &std::net::TcpStream) {
    let mut discard = [0_u8; 512];
    for _ in 0..8 {
        if !matches!(stream.read(&mut discard), Ok(1..)) {
            return;
        }
    }
}

/// A complete HTTP/1.1 response carrying the `{error, code, retry_after}` body of a
/// `rate_limited` refusal.
fn render(sentence: &str) -> Vec<u8> {
    let error =
        ApiError::new(ErrorCode::RATE_LIMITED, sentence).with_extra("retry_after", RETRY_AFTER);
    let body = error.body().to_string();
    let status = error.status();
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: {RETRY_AFTER}\r\nconnection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or_default(),
        body.len(),
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_a_complete_http_response_with_the_json_error_body() {
        let answer = String::from_utf8(render("Too many.")).expect("text");
        let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
        assert!(
            head.starts_with("HTTP/1.1 429 Too Many Requests\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\nretry-after: 1"), "{head}");
        assert!(head.contains("\r\nconnection: close"), "{head}");
        assert!(
            head.contains(&format!("\r\ncontent-length: {}", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(
            body,
            serde_json::json!({"error": "Too many.", "code": "rate_limited", "retry_after": 1})
        );
    }
}
