//! Rate limit for repeated errors of one watch (or of the webhook
//! certificate controller's loop). An apiserver that cannot be reached makes
//! a watch fail on every retry; without a limit that is several log lines a
//! second per watch, which buries everything else and costs log storage. The
//! clock is passed in, so the policy is a pure piece that tests drive
//! without sleeping.

use std::time::{Duration, Instant};

/// At most one line per watch (or per controller) a minute while it keeps
/// failing: enough to see it is still down, few enough to read the rest of
/// the log.
pub(crate) const ERROR_LINE_EVERY: Duration = Duration::from_secs(60);

/// Tells, for each error and each success of one watch, whether to log.
#[derive(Debug)]
pub(crate) struct ErrorLog {
    every: Duration,
    /// When the last error line was written.
    last_line: Option<Instant>,
    /// Errors not logged since the last error line.
    suppressed: u64,
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
            last_line: None,
            suppressed: 0,
            outage_errors: 0,
            outage_reported: false,
        }
    }

    /// The watch failed at `now`.
    pub(crate) fn failed(&mut self, now: Instant) -> ErrorLineAction {
        self.outage_errors += 1;
        // Across recoveries too: a watch that flaps between failing and
        // working must not get a line per flap.
        let due = self
            .last_line
            .is_none_or(|last| now.saturating_duration_since(last) >= self.every);
        if due {
            self.last_line = Some(now);
            self.outage_reported = true;
            ErrorLineAction::Log {
                suppressed: std::mem::take(&mut self.suppressed),
            }
        } else {
            self.suppressed += 1;
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
    fn a_clock_that_goes_backwards_does_not_log_more() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let mut log = ErrorLog::new(EVERY);
        assert_eq!(log.failed(t0), ErrorLineAction::Log { suppressed: 0 });
        assert_eq!(log.failed(t0 - Duration::from_secs(10)), ErrorLineAction::Quiet);
    }
}
