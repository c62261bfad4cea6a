//! A listener's accept loop and its cap on open connections.
//!
//! At its cap the webhook's HTTPS listener stops accepting until a
//! connection closes: new connections wait in the kernel's backlog instead
//! of taking descriptors and memory, and the silence timeouts make room
//! within seconds when the connections held are idle ones. The apiserver
//! retries a connection that waited too long.
//!
//! The plain metrics listener instead accepts and closes at once beyond
//! its small cap (counted in `draguard_metrics_connections_closed_total`):
//! a scraper behind a flood learns it at once instead of waiting in a
//! backlog full of idle connections, and a refused connection holds a
//! descriptor only for the moment between accept and close, so no number
//! of them can take the descriptors `/healthz`, the webhook and policy
//! reloads need (issue 27, N3).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use super::connection::{self, Listener, Shared};
use super::drain::signalled;
use super::metrics::MetricsClose;

/// How often the "connection cap reached" warning may be repeated.
const CAP_WARNING_EVERY: Duration = Duration::from_secs(60);

/// Open connections against a cap. Cheap to share.
pub(crate) struct OpenConnections {
    slots: Arc<Semaphore>,
    max: u32,
    /// The accept loop holds a slot while it waits in `accept`: the place
    /// of the next connection, not an open one.
    reserved: AtomicBool,
}

impl OpenConnections {
    pub(crate) fn new(max: usize) -> Self {
        let max = u32::try_from(max.clamp(1, Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
        OpenConnections {
            slots: Arc::new(Semaphore::new(max as usize)),
            max,
            reserved: AtomicBool::new(false),
        }
    }

    /// Connections open now, and the cap.
    pub(crate) fn count(&self) -> (usize, usize) {
        let max = self.max as usize;
        let reserved = usize::from(self.reserved.load(Ordering::Relaxed));
        (max.saturating_sub(self.slots.available_permits() + reserved), max)
    }
}

/// Accepts until `close`, then waits up to `drain_timeout` for every
/// connection to finish.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    open: Arc<OpenConnections>,
    mut close: watch::Receiver<bool>,
    drain_timeout: Duration,
) {
    let name = shared.listener.label();
    let refuse_at_cap = shared.listener == Listener::Metrics;
    let mut warned_at: Option<Instant> = None;
    let mut warn_at_cap = |what: &str| {
        if warned_at.is_none_or(|at| at.elapsed() >= CAP_WARNING_EVERY) {
            warned_at = Some(Instant::now());
            tracing::warn!(
                listener = name,
                max_connections = open.max,
                "connection cap reached: {what}"
            );
        }
    };
    loop {
        // The webhook takes its slot before `accept`, so at the cap it
        // stops accepting; the metrics port looks for one after, so at the
        // cap it closes the connection it just accepted.
        let waited = if refuse_at_cap {
            None
        } else {
            let slot = match open.slots.clone().try_acquire_owned() {
                Ok(slot) => slot,
                Err(_) => {
                    warn_at_cap("not accepting until a connection closes");
                    tokio::select! {
                        slot = open.slots.clone().acquire_owned() => match slot {
                            Ok(slot) => slot,
                            Err(_) => break,
                        },
                        () = signalled(&mut close) => break,
                    }
                }
            };
            open.reserved.store(true, Ordering::Relaxed);
            Some(slot)
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = signalled(&mut close) => break,
        };
        open.reserved.store(false, Ordering::Relaxed);
        match accepted {
            Ok((tcp, peer)) => {
                let slot = match waited.map_or_else(|| open.slots.clone().try_acquire_owned(), Ok) {
                    Ok(slot) => slot,
                    Err(_) => {
                        // Dropped here: closed before anything is read.
                        drop(tcp);
                        shared.metrics.metrics_connection_closed(MetricsClose::Refused);
                        warn_at_cap("closing new connections at once until one closes");
                        continue;
                    }
                };
                tokio::spawn(connection::serve(tcp, peer, shared.clone(), close.clone(), slot));
            }
            Err(e) => {
                // Usually out of file descriptors: back off instead of spinning.
                let error = e.to_string();
                tracing::warn!(listener = name, error = error.as_str(), "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop(listener);
    open.reserved.store(false, Ordering::Relaxed);
    let (connections, _) = open.count();
    tracing::info!(
        listener = name,
        connections,
        "stopped accepting; draining in-flight requests"
    );
    // Every slot back: every connection has finished.
    match tokio::time::timeout(drain_timeout, open.slots.acquire_many(open.max)).await {
        Ok(_) => tracing::info!(listener = name, "drained"),
        Err(_) => tracing::warn!(
            listener = name,
            connections = open.count().0,
            timeout_seconds = drain_timeout.as_secs_f64(),
            "connections still open after the shutdown timeout; closing them"
        ),
    }
}
