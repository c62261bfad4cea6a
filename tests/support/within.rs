//! Waiting on a controller that runs against the fake API server.

use std::time::Duration;

/// Polls `done` every 20 ms for at most `limit`: how long it took, or
/// `None` if it never held.
pub async fn within(limit: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        if done() {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}
