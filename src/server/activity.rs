//! The info-level pulse of the server. Each review logs at debug; at info
//! an operator sees one line per interval with what was answered since the
//! last one, and denial lines at a bounded rate. A flood of denied requests
//! (a misconfigured controller retrying, a hostile client) then costs a
//! counter, not a line each.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// How often the summary line is written by default.
pub(crate) const DEFAULT_SUMMARY_EVERY: Duration = Duration::from_secs(60);
/// Denials logged at info per second; the rest are counted in the summary.
pub(crate) const DENIAL_LINES_PER_SECOND: u64 = 10;

/// Counts since the last summary line. Updated with relaxed atomics: the
/// line is a report, not an invariant.
pub(crate) struct Activity {
    started: Instant,
    allowed: AtomicU64,
    denied: AtomicU64,
    /// Denials whose line the rate limit dropped.
    unlogged_denials: AtomicU64,
    /// The second (since `started`) the denial budget counts in.
    denial_second: AtomicU64,
    denial_lines_this_second: AtomicU64,
}

/// What one summary line reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ActivitySummary {
    pub(crate) allowed: u64,
    pub(crate) denied: u64,
    pub(crate) unlogged_denials: u64,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            started: Instant::now(),
            allowed: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            unlogged_denials: AtomicU64::new(0),
            denial_second: AtomicU64::new(0),
            denial_lines_this_second: AtomicU64::new(0),
        }
    }
}

impl Activity {
    /// Counts one answered review. For a denial, says whether its own info
    /// line may be written now (at most [`DENIAL_LINES_PER_SECOND`]).
    pub(crate) fn answered(&self, allowed: bool) -> bool {
        if allowed {
            self.allowed.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.denied.fetch_add(1, Ordering::Relaxed);
        let second = self.started.elapsed().as_secs();
        let may_log = self.denial_line_allowed(second);
        if !may_log {
            self.unlogged_denials.fetch_add(1, Ordering::Relaxed);
        }
        may_log
    }

    /// A fixed one-second window; two threads crossing into a new second
    /// together may let a line or two more through, which is harmless.
    fn denial_line_allowed(&self, second: u64) -> bool {
        if self.denial_second.swap(second, Ordering::Relaxed) != second {
            self.denial_lines_this_second.store(0, Ordering::Relaxed);
        }
        self.denial_lines_this_second.fetch_add(1, Ordering::Relaxed) < DENIAL_LINES_PER_SECOND
    }

    /// The counts since the last call, which start again from zero.
    pub(crate) fn take(&self) -> ActivitySummary {
        ActivitySummary {
            allowed: self.allowed.swap(0, Ordering::Relaxed),
            denied: self.denied.swap(0, Ordering::Relaxed),
            unlogged_denials: self.unlogged_denials.swap(0, Ordering::Relaxed),
        }
    }
}

impl ActivitySummary {
    /// One info line for the `covered` time, or nothing for an idle
    /// interval: a quiet server does not fill its log with zeros.
    pub(crate) fn log(self, covered: Duration) {
        if self == ActivitySummary::default() {
            return;
        }
        let ActivitySummary {
            allowed,
            denied,
            unlogged_denials,
        } = self;
        let seconds = covered.as_secs();
        tracing::info!(seconds, allowed, denied, unlogged_denials, "admission reviews answered");
    }
}

/// Writes the summary line every `every` until the server stops, and once
/// more on the way out so that nothing counted is lost; each line says how
/// many seconds it covers.
pub(crate) async fn report(activity: std::sync::Arc<Activity>, every: Duration, mut stop: watch::Receiver<bool>) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut since = Instant::now();
    let flush = |since: &mut Instant| {
        activity.take().log(since.elapsed());
        *since = Instant::now();
    };
    loop {
        tokio::select! {
            _ = ticks.tick() => flush(&mut since),
            _ = stop.wait_for(|stopped| *stopped) => {
                flush(&mut since);
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::log_capture::capture;

    #[test]
    fn counts_reset_with_each_summary() {
        let activity = Activity::default();
        for allowed in [true, true, false] {
            activity.answered(allowed);
        }
        assert_eq!(
            activity.take(),
            ActivitySummary {
                allowed: 2,
                denied: 1,
                unlogged_denials: 0
            }
        );
        assert_eq!(activity.take(), ActivitySummary::default());
    }

    #[test]
    fn denial_lines_are_limited_per_second_and_the_rest_counted() {
        let activity = Activity::default();
        let limit = usize::try_from(DENIAL_LINES_PER_SECOND).expect("small");
        // Within one second: the first `limit` may log, the rest may not.
        let verdicts: Vec<bool> = (0..limit + 5).map(|_| activity.denial_line_allowed(7)).collect();
        assert!(verdicts[..limit].iter().all(|v| *v), "{verdicts:?}");
        assert!(verdicts[limit..].iter().all(|v| !*v), "{verdicts:?}");
        // A new second starts a new budget.
        assert!(activity.denial_line_allowed(8));
        // Allowed reviews never ask for a line of their own.
        assert!(!activity.answered(true));
    }

    #[test]
    fn a_flood_of_denials_is_counted_not_logged() {
        let activity = Activity::default();
        let logged = (0..1000).filter(|_| activity.answered(false)).count();
        // The test runs within a second or two of `started`.
        assert!(logged <= 2 * 10, "{logged} lines");
        let summary = activity.take();
        assert_eq!(summary.denied, 1000);
        assert_eq!(summary.unlogged_denials, 1000 - u64::try_from(logged).expect("small"));
    }

    #[test]
    fn shutdown_writes_what_was_counted_since_the_last_line_with_its_true_span() {
        let activity = std::sync::Arc::new(Activity::default());
        for allowed in [true, true, false] {
            activity.answered(allowed);
        }
        let logged = capture(true, false, || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let (stop, stopped) = watch::channel(false);
                let reporter = tokio::spawn(report(activity.clone(), Duration::from_secs(3600), stopped));
                stop.send(true).expect("reporter listens");
                reporter.await.expect("reporter ends");
            });
        });
        let lines: Vec<&str> = logged.lines().collect();
        assert_eq!(lines.len(), 1, "{logged}");
        let line: serde_json::Value = serde_json::from_str(lines[0]).expect("json");
        assert_eq!(line["allowed"], 2);
        assert_eq!(line["denied"], 1);
        assert_eq!(line["seconds"], 0, "the span it covers, not the interval");
    }

    #[test]
    fn the_summary_line_says_what_was_answered_and_idle_intervals_are_silent() {
        let logged = capture(true, false, || {
            ActivitySummary::default().log(Duration::from_secs(60));
            ActivitySummary {
                allowed: 40,
                denied: 12,
                unlogged_denials: 2,
            }
            .log(Duration::from_secs(60));
        });
        let lines: Vec<&str> = logged.lines().collect();
        assert_eq!(lines.len(), 1, "{logged}");
        let line: serde_json::Value = serde_json::from_str(lines[0]).expect("json");
        assert_eq!(line["message"], "admission reviews answered");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["allowed"], 40);
        assert_eq!(line["denied"], 12);
        assert_eq!(line["unlogged_denials"], 2);
        assert_eq!(line["seconds"], 60);
    }
}
