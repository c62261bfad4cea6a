//! Rate limit for repeated errors of one watch (or of the webhook
//! certificate controller's loop). An apiserver that cannot be reached makes
//! a watch fail on every retry; without a limit that is several log lines a
//! second per watch, which buries everything else and costs log storage.
//! Each distinct error (a key the caller gives: `watch_error::key`) gets
//! its own line a minute, so a second cause is not hidden behind the first;
//! at most [`MAX_DISTINCT`] are tracked at once. The clock is passed in, so
//! the policy is a pure piece that tests drive without sleeping.

use std::time::{Duration, Instant};

/// At most one line per watch (or per controller) a minute while it keeps
/// failing: enough to see it is still down, few enough to read the rest of
/// the log.
pub(crate) const ERROR_LINE_EVERY: Duration = Duration::from_secs(60);

/// Distinct errors tracked at once: one watch seldom fails in more than
/// two or three ways. A new one beyond them waits until the oldest line is
/// a window old, so that errors whose text always differs still get at most
/// this many lines a window.
pub(crate) const MAX_DISTINCT: usize = 8;

/// One distinct error's line rate.
#[derive(Debug)]
struct Distinct {
    key: String,
    /// When its last line was written.
    last_line: Instant,
    /// Its errors not logged since that line.
    suppressed: u64,
}

/// Tells, for each error and each success of one watch, whether to log.
#[derive(Debug)]
pub(crate) struct ErrorLog {
    every: Duration,
    /// The errors that got a line, at most [`MAX_DISTINCT`].
    distinct: Vec<Distinct>,
    /// Errors since the watch last worked.
    outage_errors: u64,
    /// Whether this outage got an error line: only then is its end worth
    /// a line of its own.
    outage_reported: bool,
}

/// What to do with one error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorLineAction {
    /// Write a line, saying how many errors were left out since the last.
    Log { suppressed: u64 },
    /// Count it, write nothing.
    Quiet,
}

impl ErrorLog {
    /// At most one error line per `every`, whatever the error rate.
    pub(crate) fn new(every: Duration) -> Self {
        ErrorLog {
            every,
            distinct: Vec::new(),
            outage_errors: 0,
            outage_reported: false,
        }
    }

    /// The watch failed at `now`, all its errors taken as one.
    pub(crate) fn failed(&mut self, now: Instant) -> ErrorLineAction {
        self.failed_with(now, "")
    }

    /// The watch failed at `now` with the error `key`: a line when this
    /// error had none for a window.
    pub(crate) fn failed_with(&mut self, now: Instant, key: &str) -> ErrorLineAction {
        self.outage_errors += 1;
        let every = self.every;
        // Across recoveries too: a watch that flaps between failing and
        // working must not get a line per flap.
        let due = |last: Instant| now.saturating_duration_since(last) >= every;
        let slot = match self.distinct.iter().position(|d| d.key == key) {
            Some(i) => i,
            None if self.distinct.len() < MAX_DISTINCT => {
                self.distinct.push(Distinct {
                    key: key.to_owned(),
                    last_line: now,
                    suppressed: 0,
                });
                self.outage_reported = true;
                return ErrorLineAction::Log { suppressed: 0 };
            }
            None => {
                // Full: the error whose line is oldest makes room if that
                // line is a window old; else this one waits, counted there.
                let Some(oldest) = (0..self.distinct.len()).min_by_key(|&i| self.distinct[i].last_line) else {
                    return ErrorLineAction::Quiet;
                };
                let entry = &mut self.distinct[oldest];
                if !due(entry.last_line) {
                    entry.suppressed += 1;
                    return ErrorLineAction::Quiet;
                }
                *entry = Distinct {
                    key: key.to_owned(),
                    last_line: now,
                    suppressed: 0,
                };
                self.outage_reported = true;
                return ErrorLineAction::Log { suppressed: 0 };
            }
        };
        let entry = &mut self.distinct[slot];
        if due(entry.last_line) {
            entry.last_line = now;
            self.outage_reported = true;
            ErrorLineAction::Log {
                suppressed: std::mem::take(&mut entry.suppressed),
            }
        } else {
            entry.suppressed += 1;
            ErrorLineAction::Quiet
        }
    }

    /// The watch delivered an event. `Some(errors)` when it had been
    /// failing and that was logged: say it recovered, after `errors` errors.
    pub(crate) fn succeeded(&mut self) -> Option<u64> {
        if self.outage_errors == 0 {
            return None;
        }
        let errors = std::mem::take(&mut self.outage_errors);
        std::mem::take(&mut self.outage_reported).then_some(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVERY: Duration = Duration::from_secs(60);

    #[test]
    fn first_error_logs_then_one_line_per_window_with_the_count() {
        let t0 = Instant::now();
        let mut log = ErrorLog::new(EVERY);
        assert_eq!(log.failed(t0), ErrorLineAction::Log { suppressed: 0 });
        // An unreachable apiserver: an error every 200 ms.
        let mut quiet = 0;
        for i in 1..300u64 {
            match log.failed(t0 + Duration::from_millis(200 * i)) {
                ErrorLineAction::Quiet => quiet += 1,
                other => panic!("line at {i}: {other:?}"),
            }
        }
        assert_eq!(quiet, 299);
        // 60 s after the first line: the next one, with what it left out.
        assert_eq!(log.failed(t0 + EVERY), ErrorLineAction::Log { suppressed: 299 });
        assert_eq!(log.failed(t0 + EVERY + Duration::from_secs(1)), ErrorLineAction::Quiet);
        assert_eq!(log.failed(t0 + EVERY * 2), ErrorLineAction::Log { suppressed: 1 });
    }

    #[test]
    fn recovery_is_told_once_with_the_error_count() {
        let t0 = Instant::now();
        let mut log = ErrorLog::new(EVERY);
        assert_eq!(log.succeeded(), None, "healthy: nothing to say");
        log.failed(t0);
        log.failed(t0 + Duration::from_secs(1));
        log.failed(t0 + Duration::from_secs(2));
        assert_eq!(log.succeeded(), Some(3));
        assert_eq!(log.succeeded(), None, "said once");
    }

    #[test]
    fn a_flapping_watch_stays_within_the_window() {
        let t0 = Instant::now();
        let mut log = ErrorLog::new(EVERY);
        assert_eq!(log.failed(t0), ErrorLineAction::Log { suppressed: 0 });
        assert_eq!(log.succeeded(), Some(1));
        // Fails and recovers again within the window: no error line, and
        // no recovery line for an outage nobody was told about.
        assert_eq!(log.failed(t0 + Duration::from_secs(5)), ErrorLineAction::Quiet);
        assert_eq!(log.succeeded(), None);
        assert_eq!(log.failed(t0 + Duration::from_secs(10)), ErrorLineAction::Quiet);
        assert_eq!(log.succeeded(), None);
        // After the window the next error is told, with the two left out.
        assert_eq!(log.failed(t0 + EVERY), ErrorLineAction::Log { suppressed: 2 });
        assert_eq!(log.succeeded(), Some(1));
    }

    #[test]
    fn each_distinct_error_gets_its_own_line_a_minute() {
        let t0 = Instant::now();
        let mut log = ErrorLog::new(EVERY);
        // A forbidden watch retried every 1.2 s, as kube-runtime does.
        assert_eq!(
            log.failed_with(t0, "HTTP 403 Forbidden"),
            ErrorLineAction::Log { suppressed: 0 }
        );
        for i in 1..50u64 {
            let at = t0 + Duration::from_millis(1200 * i);
            assert_eq!(
                log.failed_with(at, "HTTP 403 Forbidden"),
                ErrorLineAction::Quiet,
                "at {i}"
            );
        }
        // A second cause is told at once, not hidden behind the first...
        let later = t0 + Duration::from_secs(30);
        assert_eq!(
            log.failed_with(later, "connection refused"),
            ErrorLineAction::Log { suppressed: 0 }
        );
        assert_eq!(log.failed_with(later, "connection refused"), ErrorLineAction::Quiet);
        // ...and each keeps its own window and count.
        assert_eq!(
            log.failed_with(t0 + EVERY, "HTTP 403 Forbidden"),
            ErrorLineAction::Log { suppressed: 49 }
        );
        assert_eq!(
            log.failed_with(t0 + EVERY, "connection refused"),
            ErrorLineAction::Quiet
        );
        assert_eq!(
            log.failed_with(later + EVERY, "connection refused"),
            ErrorLineAction::Log { suppressed: 2 }
        );
    }

    #[test]
    fn errors_that_always_differ_get_at_most_max_distinct_lines_a_window() {
        let t0 = Instant::now();
        let mut log = ErrorLog::new(EVERY);
        let lines = (0..1000u64)
            .filter(|i| {
                let at = t0 + Duration::from_millis(10 * i);
                log.failed_with(at, &format!("error number {i}")) != ErrorLineAction::Quiet
            })
            .count();
        assert_eq!(lines, MAX_DISTINCT, "10 s of ever-new errors");
        // A window after the first lines, new errors make room again.
        let after = t0 + EVERY;
        assert_eq!(
            log.failed_with(after, "yet another"),
            ErrorLineAction::Log { suppressed: 0 }
        );
        assert_eq!(log.distinct.len(), MAX_DISTINCT);
    }

    #[test]
    fn a_clock_that_goes_backwards_does_not_log_more() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let mut log = ErrorLog::new(EVERY);
        assert_eq!(log.failed(t0), ErrorLineAction::Log { suppressed: 0 });
        assert_eq!(log.failed(t0 - Duration::from_secs(10)), ErrorLineAction::Quiet);
    }
}
