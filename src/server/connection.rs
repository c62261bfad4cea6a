//! One accepted connection, from the TCP socket to its close: the TLS
//! handshake under a deadline (the webhook listener; the plain metrics
//! listener has none), then HTTP/1.1 or HTTP/2 while requests come, closed
//! when it stays silent (no first request after the handshake, or an idle
//! keep-alive) or when the server shuts down.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, Request, Version, header};
use axum::response::Response;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{Notify, OwnedSemaphorePermit, watch};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::drain::{Draining, signalled};
use super::limits::HANDSHAKE_TIMEOUT;
use super::metrics::{ConnectionTimeout, Metrics};

/// Which listener a connection came from: each counts its closes in its
/// own metric, so that a flood of the metrics port never reads as trouble
/// on the webhook's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listener {
    /// HTTPS: `/validate`, `/mutate`, the probes.
    Webhook,
    /// Plain HTTP `/metrics` (`--metrics-listen`).
    Metrics,
}

impl Listener {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Listener::Webhook => "webhook",
            Listener::Metrics => "metrics",
        }
    }
}

/// What every connection of a listener shares.
pub(crate) struct Shared {
    pub(crate) listener: Listener,
    /// `None`: plain HTTP, no handshake.
    pub(crate) acceptor: Option<TlsAcceptor>,
    pub(crate) app: Router,
    pub(crate) http: auto::Builder<TokioExecutor>,
    pub(crate) first_request_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    /// How long a connection told to close may take to finish what it has
    /// in flight (the shutdown timeout); then it is dropped.
    pub(crate) close_timeout: Duration,
    pub(crate) draining: Draining,
    pub(crate) metrics: Arc<Metrics>,
}

impl Shared {
    fn timed_out(&self, timeout: ConnectionTimeout) {
        match self.listener {
            Listener::Webhook => self.metrics.connection_timed_out(timeout),
            Listener::Metrics => self.metrics.metrics_connection_closed(timeout.into()),
        }
    }
}

/// Serves one socket until the client leaves, a timeout closes it, or
/// `close` asks every connection to finish. `_slot` is its place under the
/// connection cap, given back when this returns.
pub(crate) async fn serve(
    tcp: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut close: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
) {
    // Without it, a response written in two segments waits ~40 ms for an ACK.
    if let Err(e) = tcp.set_nodelay(true) {
        let error = e.to_string();
        tracing::debug!(%peer, error = error.as_str(), "cannot set TCP_NODELAY");
    }
    let Some(acceptor) = &shared.acceptor else {
        return serve_http(tcp, peer, &shared, close).await;
    };
    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
    let tls = tokio::select! {
        done = handshake => match done {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                let error = e.to_string();
                tracing::debug!(%peer, error = error.as_str(), "TLS handshake failed");
                return;
            }
            Err(_) => {
                shared.timed_out(ConnectionTimeout::Handshake);
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        },
        // Nothing was asked on it yet: nothing to finish.
        () = signalled(&mut close) => return,
    };
    serve_http(tls, peer, &shared, close).await;
}

/// HTTP on an established stream (after the handshake, if any) until the
/// client leaves, a silence timeout closes it, or `close`.
async fn serve_http<I>(io: I, peer: SocketAddr, shared: &Shared, mut close: watch::Receiver<bool>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let service = Tracked {
        app: shared.app.clone(),
        activity: activity.clone(),
        draining: shared.draining.clone(),
    };
    let conn = shared
        .http
        .serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
    tokio::pin!(conn);
    let closing = loop {
        let silent = activity.silent_until(shared.first_request_timeout, shared.idle_timeout);
        tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    let error = e.to_string();
                    tracing::debug!(%peer, error = error.as_str(), "connection ended with an error");
                }
                return;
            }
            // Either a deadline passed or the last request in flight ended:
            // look again.
            () = activity.wait(silent) => {
                if let Some(timeout) = activity.timed_out(shared.first_request_timeout, shared.idle_timeout) {
                    break Some(timeout);
                }
            }
            () = signalled(&mut close) => break None,
        }
    };
    if let Some(timeout) = closing {
        shared.timed_out(timeout);
        tracing::debug!(%peer, timeout = timeout.label(), "closing a silent connection");
    }
    // HTTP/1.1: closes at once when idle, else after the answer in flight.
    // HTTP/2: GOAWAY, then closes when the open streams are done. Before
    // the protocol is known: closes at once.
    conn.as_mut().graceful_shutdown();
    if tokio::time::timeout(shared.close_timeout, conn).await.is_err() {
        tracing::debug!(%peer, "connection did not finish within the shutdown timeout; dropped");
    }
}

/// What a connection's requests are doing, for the silence timeouts.
struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    requests: AtomicU64,
    /// When the last request ended, in milliseconds since `started`.
    last_done_ms: AtomicU64,
    /// Woken when the last request in flight ends.
    quiet: Notify,
}

impl Activity {
    fn new() -> Self {
        Activity {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            last_done_ms: AtomicU64::new(0),
            quiet: Notify::new(),
        }
    }

    /// Counts a request in until the guard is dropped.
    fn begin(self: &Arc<Self>) -> InFlight {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(self.clone())
    }

    /// When the connection will have been silent too long, if nothing
    /// happens before; `None` while a request is in flight.
    fn silent_until(&self, first_request: Duration, idle: Duration) -> Option<(Instant, ConnectionTimeout)> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        if self.requests.load(Ordering::Relaxed) == 0 {
            return Some((self.started + first_request, ConnectionTimeout::FirstRequest));
        }
        let last_done = self.started + Duration::from_millis(self.last_done_ms.load(Ordering::Relaxed));
        Some((last_done + idle, ConnectionTimeout::Idle))
    }

    /// Which timeout has passed now, if one has.
    fn timed_out(&self, first_request: Duration, idle: Duration) -> Option<ConnectionTimeout> {
        let (deadline, timeout) = self.silent_until(first_request, idle)?;
        (Instant::now() >= deadline).then_some(timeout)
    }

    /// Until `silent`'s deadline, or until the last request in flight
    /// ends (which moves the deadline: the idle clock starts again).
    async fn wait(&self, silent: Option<(Instant, ConnectionTimeout)>) {
        match silent {
            Some((deadline, _)) => {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {}
                    () = self.quiet.notified() => {}
                }
            }
            None => self.quiet.notified().await,
        }
    }
}

/// A request in flight on a connection.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        let since_start = u64::try_from(activity.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        activity.last_done_ms.store(since_start, Ordering::Relaxed);
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            // A permit is kept if the watcher is not waiting yet.
            activity.quiet.notify_one();
        }
    }
}

/// The router, counting each request in the connection's activity and,
/// while the server drains, closing each HTTP/1.x connection after its
/// answer.
#[derive(Clone)]
struct Tracked {
    app: Router,
    activity: Arc<Activity>,
    draining: Draining,
}

impl<B> tower::Service<Request<B>> for Tracked
where
    Router: tower::Service<Request<B>, Response = Response, Error = Infallible>,
    <Router as tower::Service<Request<B>>>::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The router is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let in_flight = self.activity.begin();
        let h1 = request.version() <= Version::HTTP_11;
        let draining = self.draining.clone();
        let answer = tower::Service::call(&mut self.app, request);
        Box::pin(async move {
            let mut response = answer.await?;
            if h1 && draining.is_draining() {
                // The client closes this connection after the answer and
                // opens its next one through the updated endpoints. HTTP/2
                // gets GOAWAY when the drain closes connections.
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            drop(in_flight);
            Ok(response)
        })
    }
}
