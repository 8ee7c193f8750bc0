//! The load generator: a fixed number of keep-alive HTTP/1.1 connections, each driven by one task
//! that sends its next request as soon as the previous response has been read (closed loop).
//!
//! It is meant to run on a current-thread tokio runtime so that it takes at most one of the
//! machine's cores and leaves the rest to the server under test. Each connection is a raw hyper
//! `http1` connection: no pool, no retries, no redirects, no decompression.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use crate::procfs;

/// One kind of request, sent over and over.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub method: Method,
    pub path: String,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    /// A 2xx response whose body contains this is still an error (an MCP tool error or a
    /// JSON-RPC error comes back with status 200).
    pub error_markers: Vec<&'static [u8]>,
}

impl Target {
    pub fn get(addr: SocketAddr, path: &str) -> Self {
        Self {
            addr,
            method: Method::GET,
            path: path.to_owned(),
            headers: Vec::new(),
            body: Bytes::new(),
            error_markers: Vec::new(),
        }
    }

    pub fn header(mut self, name: &'static str, value: &str) -> anyhow::Result<Self> {
        self.headers
            .push((HeaderName::from_static(name), HeaderValue::from_str(value)?));
        Ok(self)
    }

    fn request(&self) -> anyhow::Result<Request<Full<Bytes>>> {
        let mut builder = Request::builder()
            .method(self.method.clone())
            .uri(self.path.as_str())
            .header(hyper::header::HOST, self.addr.to_string());
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        Ok(builder.body(Full::new(self.body.clone()))?)
    }

    /// Whether a response counts as a success.
    fn succeeded(&self, status: StatusCode, body: &[u8]) -> bool {
        status.is_success()
            && !self
                .error_markers
                .iter()
                .any(|marker| contains(body, marker))
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty()
        && haystack
            .windows(needle.len())
            .any(|window| window == needle)
}

/// How hard and how long to push.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub connections: usize,
    pub warmup: Duration,
    pub duration: Duration,
}

/// What one phase measured. Only requests started after the warm-up and finished before the end
/// count for the rate and the latencies; errors count over the whole phase, warm-up included.
#[derive(Debug)]
pub struct Outcome {
    pub requests: u64,
    pub elapsed: Duration,
    /// Sorted, in nanoseconds.
    pub latencies_ns: Vec<u64>,
    pub errors: u64,
    pub first_error: Option<String>,
    pub body_bytes: u64,
    /// CPU time (user + system) the server process and this process used during the measured window.
    pub server_cpu: Duration,
    pub client_cpu: Duration,
    /// Context switches of the server process's threads during the measured window.
    pub server_switches: u64,
}

impl Outcome {
    /// A rate measured by another tool (pgbench): `per_second` over one second, nothing else.
    pub fn rate_only(per_second: f64) -> Self {
        Self {
            requests: per_second.round() as u64,
            elapsed: Duration::from_secs(1),
            latencies_ns: Vec::new(),
            errors: 0,
            first_error: None,
            body_bytes: 0,
            server_cpu: Duration::ZERO,
            client_cpu: Duration::ZERO,
            server_switches: 0,
        }
    }

    pub fn requests_per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// Nearest-rank percentile, `p` in 0..=100.
    pub fn percentile(&self, p: f64) -> Duration {
        if self.latencies_ns.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.latencies_ns.len() as f64).ceil() as usize;
        Duration::from_nanos(self.latencies_ns[rank.clamp(1, self.latencies_ns.len()) - 1])
    }

    pub fn mean_body_bytes(&self) -> u64 {
        self.body_bytes.checked_div(self.requests).unwrap_or(0)
    }
}

/// Sends one request on a fresh connection and returns the status and the body.
pub async fn probe(target: &Target) -> anyhow::Result<(StatusCode, Bytes)> {
    let mut sender = connect(target.addr).await?;
    let response = sender.send_request(target.request()?).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

/// Sends `count` requests one after another on one keep-alive connection (as a client with a
/// connection pool sends to one host) and answers how long they took; a non-2xx is an error.
pub async fn sequential(target: &Target, count: usize) -> anyhow::Result<Duration> {
    let mut sender = connect(target.addr).await?;
    let started = Instant::now();
    for _ in 0..count {
        sender.ready().await?;
        let response = sender.send_request(target.request()?).await?;
        let status = response.status();
        response.into_body().collect().await?;
        anyhow::ensure!(status.is_success(), "{} answered {status}", target.path);
    }
    Ok(started.elapsed())
}

async fn connect(addr: SocketAddr) -> anyhow::Result<SendRequest<Full<Bytes>>> {
    let stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("could not connect to {addr}"))?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        // Ends when the sender is dropped or the server closes the connection.
        let _ = connection.await;
    });
    Ok(sender)
}

/// Drives `settings.connections` connections at `target` for the warm-up and then the measured
/// duration. `server_pid` is the process whose CPU time is sampled over the measured window.
pub async fn run(target: &Target, settings: Settings, server_pid: u32) -> anyhow::Result<Outcome> {
    // Open every connection first, so a refused connection fails the phase before it starts.
    let mut senders = Vec::with_capacity(settings.connections);
    for _ in 0..settings.connections {
        senders.push(connect(target.addr).await?);
    }
    let started = Instant::now();
    let measure_from = started + settings.warmup;
    let until = measure_from + settings.duration;
    let mut workers = JoinSet::new();
    for sender in senders {
        let target = target.clone();
        workers.spawn(async move { worker(target, sender, measure_from, until).await });
    }

    tokio::time::sleep_until(measure_from.into()).await;
    let server_before = procfs::cpu_time(server_pid)?;
    let switches_before = procfs::context_switches(server_pid)?;
    let client_before = procfs::cpu_time_self()?;
    tokio::time::sleep_until(until.into()).await;
    let server_cpu = procfs::cpu_time(server_pid)?.saturating_sub(server_before);
    let server_switches = procfs::context_switches(server_pid)?.saturating_sub(switches_before);
    let client_cpu = procfs::cpu_time_self()?.saturating_sub(client_before);

    let mut outcome = Outcome {
        requests: 0,
        elapsed: settings.duration,
        latencies_ns: Vec::new(),
        errors: 0,
        first_error: None,
        body_bytes: 0,
        server_cpu,
        client_cpu,
        server_switches,
    };
    while let Some(joined) = workers.join_next().await {
        let tally = joined?;
        outcome.requests += tally.latencies_ns.len() as u64;
        outcome.latencies_ns.extend_from_slice(&tally.latencies_ns);
        outcome.errors += tally.errors;
        outcome.body_bytes += tally.body_bytes;
        if outcome.first_error.is_none() {
            outcome.first_error = tally.first_error;
        }
    }
    outcome.latencies_ns.sort_unstable();
    Ok(outcome)
}

#[derive(Default)]
struct Tally {
    latencies_ns: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
    body_bytes: u64,
}

impl Tally {
    fn error(&mut self, what: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what);
        }
    }
}

async fn worker(
    target: Target,
    mut sender: SendRequest<Full<Bytes>>,
    measure_from: Instant,
    until: Instant,
) -> Tally {
    let mut tally = Tally {
        latencies_ns: Vec::with_capacity(1 << 16),
        ..Tally::default()
    };
    loop {
        let sent = Instant::now();
        if sent >= until {
            return tally;
        }
        let result = exchange(&target, &mut sender).await;
        let done = Instant::now();
        match result {
            Ok((status, body)) => {
                if !target.succeeded(status, &body) {
                    let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
                    tally.error(format!("{status}: {text}"));
                } else if sent >= measure_from && done <= until {
                    tally
                        .latencies_ns
                        .push(u64::try_from((done - sent).as_nanos()).unwrap_or(u64::MAX));
                    tally.body_bytes += body.len() as u64;
                }
            }
            Err(error) => {
                tally.error(format!("transport: {error:#}"));
                // The connection is gone: open another one and go on.
                loop {
                    if Instant::now() >= until {
                        return tally;
                    }
                    match connect(target.addr).await {
                        Ok(fresh) => {
                            sender = fresh;
                            break;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                    }
                }
            }
        }
    }
}

async fn exchange(
    target: &Target,
    sender: &mut SendRequest<Full<Bytes>>,
) -> anyhow::Result<(StatusCode, Bytes)> {
    sender.ready().await?;
    let response = sender.send_request(target.request()?).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}
