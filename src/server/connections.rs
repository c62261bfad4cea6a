//! The HTTPS listener and the cap on open connections. At the cap the
//! listener stops accepting until a connection closes: new connections wait
//! in the kernel's backlog instead of taking descriptors and memory, and
//! the silence timeouts make room within seconds when the connections held
//! are idle ones.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use super::connection::{self, Shared};
use super::drain::signalled;

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
    let mut warned_at: Option<Instant> = None;
    loop {
        let slot = match open.slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if warned_at.is_none_or(|at| at.elapsed() >= CAP_WARNING_EVERY) {
                    warned_at = Some(Instant::now());
                    tracing::warn!(
                        max_connections = open.max,
                        "connection cap reached: not accepting until a connection closes"
                    );
                }
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
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = signalled(&mut close) => break,
        };
        open.reserved.store(false, Ordering::Relaxed);
        match accepted {
            Ok((tcp, peer)) => {
                tokio::spawn(connection::serve(tcp, peer, shared.clone(), close.clone(), slot));
            }
            Err(e) => {
                // Usually out of file descriptors: back off instead of spinning.
                let error = e.to_string();
                tracing::warn!(error = error.as_str(), "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop(listener);
    open.reserved.store(false, Ordering::Relaxed);
    let (connections, _) = open.count();
    tracing::info!(connections, "stopped accepting; draining in-flight requests");
    // Every slot back: every connection has finished.
    match tokio::time::timeout(drain_timeout, open.slots.acquire_many(open.max)).await {
        Ok(_) => tracing::info!("drained"),
        Err(_) => tracing::warn!(
            connections = open.count().0,
            timeout_seconds = drain_timeout.as_secs_f64(),
            "connections still open after the shutdown timeout; closing them"
        ),
    }
}
