//! The accept loop: how long a connection may take, how many are served at once, and who gives
//! way when there are too many.
//!
//! `axum::serve` sets no timer and no cap, so sockets that never finish (or never start) a
//! request hold their connections and file descriptors without a credential, and a few hundred
//! of them starve everyone. A first version of this loop added hyper's timers and a semaphore
//! taken before `accept`, and was still locked out for two minutes by 1,100 sockets that sent
//! nothing: hyper's header timer starts at a connection's first byte (hyper-util's auto builder
//! first reads the HTTP/2 preface with no timer), so they held every permit until the idle
//! timeout, while newcomers waited in the listen backlog. Now:
//!
//! - every connection is accepted at once and given a slot or refused ([`slots`]): each client
//!   address has a cap (`max_connections_per_client`, not applied to trusted proxies), and when
//!   the global cap (`max_connections`) is reached a newcomer evicts the connection that has
//!   waited longest with no request in flight; only when every slot has a request in flight is
//!   it refused. A refusal is a fixed `429 rate_limited` written without waiting ([`refuse`]);
//! - the first request's head must arrive within the header timeout of the accept, or the
//!   connection is closed without an answer; later requests on a keep-alive connection are
//!   hyper's (`header_read_timeout`, which runs from the end of the previous response);
//! - the idle timeout watches the bytes ([`idle`]): a connection on which nothing moved either
//!   way for that long is shut down gracefully (a response in flight still finishes).
//!
//! What eviction cannot do: a flood that opens more new connections than `max_connections` in
//! the moment between a real client's connect and the arrival of its request head evicts that
//! client too (it sees its connection reset, and may retry). With the defaults that takes over
//! a thousand connections within milliseconds, from at least eight addresses; sockets that sit
//! idle for minutes, or trickle a byte a second, are nowhere near it.
//!
//! A request is in flight from the moment its head reaches the service to the last byte of its
//! response body: the service marks it, and the mark rides on the response body. The body
//! timeout is not here: it is per request, on the request body (`observe`). Graceful shutdown is
//! `axum::serve`'s: stop accepting, ask every connection to finish, wait for them.

mod idle;
mod refuse;
mod slots;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;
use tower::ServiceExt;

use self::idle::{Activity, Watched};
use self::refuse::Refuser;
use self::slots::{Client, InFlight, Refusal, Slot, Slots};
use crate::config::{Config, HttpLimits};
use crate::observe::ConnectionMetrics;

/// Serves `router` on `listener` with `config`'s HTTP limits until `shutdown` resolves, then
/// waits for the connections to finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: &Config,
    metrics: ConnectionMetrics,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let limits = config.http.clone();
    let trusted: Vec<IpAddr> = config
        .trusted_proxies
        .iter()
        .map(IpAddr::to_canonical)
        .collect();
    let slots = Slots::new(limits.max_connections, limits.max_connections_per_client);
    let refuser = Refuser::new(limits.max_connections_per_client.max(1));
    let (signal_tx, signal_rx) = watch::channel(());
    tokio::spawn(async move {
        shutdown.await;
        drop(signal_rx);
    });
    let (close_tx, close_rx) = watch::channel(());
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) if is_connection_error(&error) => continue,
                Err(error) => {
                    // Out of file descriptors, typically: wait rather than spin.
                    tracing::error!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
            () = signal_tx.closed() => break,
        };
        let accepted = Instant::now();
        let address = remote.ip().to_canonical();
        let client = (!trusted.contains(&address)).then(|| Client::of(address));
        let slot = match slots.admit(client) {
            Ok(admitted) => {
                if admitted.evicted_another {
                    metrics.closed("evicted");
                }
                admitted.slot
            }
            Err(refusal) => {
                metrics.refused(match refusal {
                    Refusal::PerClient => "per_client",
                    Refusal::AllBusy => "all_busy",
                });
                refuser.refuse(stream, refusal);
                continue;
            }
        };
        let connection = Connection {
            stream,
            remote,
            accepted,
            slot,
            router: router.clone(),
            limits: limits.clone(),
            metrics: metrics.clone(),
        };
        let signal_tx = signal_tx.clone();
        let close_rx = close_rx.clone();
        tokio::spawn(async move {
            connection.run(signal_tx.closed()).await;
            drop(close_rx);
        });
    }
    drop(close_rx);
    drop(listener);
    close_tx.closed().await;
    Ok(())
}

fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// An accepted connection with its slot.
struct Connection {
    stream: TcpStream,
    remote: SocketAddr,
    accepted: Instant,
    slot: Slot,
    router: Router,
    limits: HttpLimits,
    metrics: ConnectionMetrics,
}

impl Connection {
    /// Serves the connection until it ends, is evicted, misses its first deadline, goes idle, or
    /// `shutdown` resolves.
    async fn run(self, shutdown: impl Future<Output = ()>) {
        let Self {
            stream,
            remote,
            accepted,
            slot,
            router,
            limits,
            metrics,
        } = self;
        stream.set_nodelay(true).ok();
        let requests = slot.requests();
        let service = tower::service_fn(move |request: Request<Incoming>| {
            let in_flight = requests.start();
            let mut request = request.map(Body::new);
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(remote));
            let response = router.clone().oneshot(request);
            async move {
                let response = response.await?;
                Ok::<_, Infallible>(response.map(|body| {
                    Body::new(Marked {
                        body,
                        _in_flight: in_flight,
                    })
                }))
            }
        });
        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(Watched {
            stream,
            activity: activity.clone(),
        });
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout);
        builder.http2().timer(TokioTimer::new());
        let mut conn =
            pin!(builder.serve_connection_with_upgrades(io, TowerToHyperService::new(service)));
        let mut shutdown = pin!(shutdown);
        let mut idle = pin!(activity.idle(limits.idle_timeout));
        let mut evicted = pin!(slot.evicted());
        let mut first_deadline = pin!(tokio::time::sleep_until(accepted + limits.header_timeout));
        let mut awaiting_first = true;
        let mut closing = false;
        loop {
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "connection ended with an error");
                    }
                    break;
                }
                () = &mut first_deadline, if awaiting_first => {
                    awaiting_first = false;
                    if !slot.has_started() {
                        metrics.closed("no_request");
                        break;
                    }
                }
                () = &mut evicted, if !closing => {
                    // Nothing is in flight unless a request arrived since the eviction: close at
                    // once, or let that one finish.
                    if !slot.is_busy() {
                        break;
                    }
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
                () = &mut shutdown, if !closing => {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
                () = &mut idle, if !closing => {
                    closing = true;
                    metrics.closed("idle");
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// A response body that keeps its request marked in flight until it is written (or dropped).
struct Marked {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for Marked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
