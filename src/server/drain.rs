//! Shutdown in two steps, so that no call still routed here is refused.
//!
//! When a pod is deleted, the kubelet sends SIGTERM while the endpoint
//! removal is still on its way to the apiservers and every node's
//! kube-proxy: for a few seconds new connections still arrive, and
//! keep-alive connections opened earlier keep carrying calls (conntrack
//! keeps them on this pod whatever the endpoints say). A server that closes
//! its listener at SIGTERM refuses those calls.
//!
//! So, on the shutdown request:
//! 1. **Draining**, for the shutdown delay: everything keeps being accepted
//!    and answered, but `/readyz` fails at once ("shutting down"), and every
//!    HTTP/1.1 answer carries `Connection: close`, so each keep-alive
//!    connection is closed by its client after its next answer and the
//!    client's next connection goes through the updated endpoints.
//! 2. **Closing**: the listener closes, idle HTTP/1.1 connections are
//!    closed, HTTP/2 connections get GOAWAY (whose last-stream id tells the
//!    client which calls to retry elsewhere), and in-flight requests get up
//!    to the shutdown timeout to finish.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// Whether the server is draining; read by `/readyz` and by every HTTP/1.1
/// answer. Cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct Draining(Arc<AtomicBool>);

impl Draining {
    pub(crate) fn is_draining(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn start(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What `/readyz` answers while draining.
pub(crate) const SHUTTING_DOWN: &str = "shutting down";

/// Waits for the shutdown request (or for every handle to be dropped),
/// drains for `delay`, then tells the listeners and connections to close
/// through `close`.
pub(crate) async fn sequence(
    mut requested: watch::Receiver<bool>,
    draining: Draining,
    delay: Duration,
    close: watch::Sender<bool>,
) {
    signalled(&mut requested).await;
    draining.start();
    if !delay.is_zero() {
        tracing::info!(
            delay_seconds = delay.as_secs_f64(),
            "shutdown requested: /readyz fails, HTTP/1.1 answers close their connection; still accepting and answering for the shutdown delay"
        );
        tokio::time::sleep(delay).await;
    }
    close.send_replace(true);
}

/// Resolves when `signal` turns true, or when every sender is gone and
/// nobody could turn it any more.
pub(crate) async fn signalled(signal: &mut watch::Receiver<bool>) {
    let _ = signal.wait_for(|on| *on).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn draining_starts_at_once_and_closing_after_the_delay() {
        let (request, requested) = watch::channel(false);
        let (close, mut closing) = watch::channel(false);
        let draining = Draining::default();
        let delay = Duration::from_millis(400);
        let task = tokio::spawn(sequence(requested, draining.clone(), delay, close));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!draining.is_draining(), "nothing before the request");
        let asked = tokio::time::Instant::now();
        request.send_replace(true);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(draining.is_draining());
        assert!(!*closing.borrow(), "still serving during the delay");
        signalled(&mut closing).await;
        assert!(asked.elapsed() >= delay, "closed after {:?}", asked.elapsed());
        task.await.expect("sequence ends");
    }

    #[tokio::test]
    async fn dropping_every_handle_drains_too() {
        let (request, requested) = watch::channel(false);
        let (close, mut closing) = watch::channel(false);
        let draining = Draining::default();
        let task = tokio::spawn(sequence(requested, draining.clone(), Duration::ZERO, close));
        drop(request);
        signalled(&mut closing).await;
        assert!(draining.is_draining());
        task.await.expect("sequence ends");
    }
}
