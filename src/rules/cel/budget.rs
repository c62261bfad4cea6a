//! What one request may spend on compiling CEL, and when it must stop.
//!
//! A request can carry hundreds of 10 KiB selectors (32 requests of 32 in a
//! claim), and a pathological one keeps the parser busy for most of a
//! second. One budget per review bounds both: the source bytes compiled
//! ([`SOURCE_MAX`]) and the parser's time ([`TIME_MAX`]). The expression
//! that would go past either is denied with a message naming the budget,
//! and the rest are not compiled. The budget also carries the review's
//! deadline: past it, nothing more is compiled and the review stops
//! (the server has answered 504 already).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::field::{At, FieldError};

/// CEL source a request may have compiled: 50 selectors of the maximum
/// 10 KiB, far beyond any real claim.
pub const SOURCE_MAX: usize = 512 << 10;
/// Parser time a request may use. A real selector compiles in a
/// millisecond; a 10 KiB pathological one takes most of a second.
pub const TIME_MAX: Duration = Duration::from_secs(1);

/// One review's CEL compile budget. Shared by reference through the
/// validation of one object; each review makes its own.
pub struct CompileBudget {
    source_max: usize,
    time_max: Duration,
    deadline: Option<Instant>,
    spent: Mutex<Spent>,
}

#[derive(Default)]
struct Spent {
    source: usize,
    time: Duration,
    /// An expression went over; the denial names it, the rest are skipped.
    over: bool,
    /// The deadline passed: nothing more is compiled.
    cancelled: bool,
}

/// Whether an expression is compiled.
pub enum Admission {
    Compile,
    /// Not compiled, and nothing to report: an earlier expression was
    /// denied for the budget, or the review is being cancelled.
    Skip,
    /// Not compiled: this expression went over the budget.
    Refuse(FieldError),
}

impl CompileBudget {
    /// The standard budget, for a review that must stop at `deadline`
    /// (`None`: the CLI, which has none).
    pub fn new(deadline: Option<Instant>) -> Self {
        Self::with_limits(SOURCE_MAX, TIME_MAX, deadline)
    }

    pub fn with_limits(source_max: usize, time_max: Duration, deadline: Option<Instant>) -> Self {
        CompileBudget {
            source_max,
            time_max,
            deadline,
            spent: Mutex::default(),
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn spent(&self) -> std::sync::MutexGuard<'_, Spent> {
        self.spent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the review's deadline passed while compiling (or before):
    /// it stops, and what validation found is incomplete.
    pub fn cancelled(&self) -> bool {
        self.spent().cancelled
    }

    /// Marks the review cancelled: a compile ran into its deadline.
    pub fn cancel(&self) {
        self.spent().cancelled = true;
    }

    /// Charges `len` bytes of source for the expression at `path`, unless
    /// the budget is spent or the deadline passed. Every expression is
    /// charged, remembered or not, so that a request's verdict does not
    /// depend on what other requests compiled before it.
    pub fn admit(&self, path: At<'_>, len: usize) -> Admission {
        let past_deadline = self.deadline.is_some_and(|d| Instant::now() >= d);
        let mut spent = self.spent();
        if spent.cancelled || past_deadline {
            spent.cancelled = true;
            return Admission::Skip;
        }
        if spent.over {
            return Admission::Skip;
        }
        if spent.time >= self.time_max {
            spent.over = true;
            return Admission::Refuse(FieldError::forbidden(
                path,
                format!(
                    "not checked: compiling this request's CEL selectors took longer than draguard's budget of {:?} per request",
                    self.time_max
                ),
            ));
        }
        if spent.source + len > self.source_max {
            spent.over = true;
            return Admission::Refuse(FieldError::forbidden(
                path,
                format!(
                    "not checked: this request's CEL selectors total more than draguard's budget of {} bytes per request",
                    self.source_max
                ),
            ));
        }
        spent.source += len;
        Admission::Compile
    }

    /// Charges the parser's time for one compile.
    pub fn spend(&self, took: Duration) {
        self.spent().time += took;
    }
}

impl Default for CompileBudget {
    /// The standard budget without a deadline.
    fn default() -> Self {
        Self::new(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;

    fn outcome(a: Admission) -> String {
        match a {
            Admission::Compile => "compile".into(),
            Admission::Skip => "skip".into(),
            Admission::Refuse(e) => e.to_string(),
        }
    }

    #[test]
    fn source_past_the_budget_is_refused_once_then_skipped() {
        let budget = CompileBudget::with_limits(100, TIME_MAX, None);
        let root = Path::new("s");
        let at = |i| outcome(budget.admit(At::new(&root).index(i), 40));
        assert_eq!(at(0), "compile");
        assert_eq!(at(1), "compile");
        assert_eq!(
            at(2),
            "s[2]: Forbidden: not checked: this request's CEL selectors total more than draguard's budget of 100 bytes per request"
        );
        assert_eq!(at(3), "skip");
        assert!(!budget.cancelled());
    }

    #[test]
    fn time_past_the_budget_is_refused() {
        let budget = CompileBudget::with_limits(SOURCE_MAX, Duration::from_millis(500), None);
        let root = Path::new("s");
        assert_eq!(outcome(budget.admit(At::new(&root), 1)), "compile");
        budget.spend(Duration::from_millis(700));
        assert_eq!(
            outcome(budget.admit(At::new(&root), 1)),
            "s: Forbidden: not checked: compiling this request's CEL selectors took longer than draguard's budget of 500ms per request"
        );
    }

    #[test]
    fn a_passed_deadline_cancels() {
        let budget = CompileBudget::new(Some(Instant::now() - Duration::from_millis(1)));
        let root = Path::new("s");
        assert_eq!(outcome(budget.admit(At::new(&root), 1)), "skip");
        assert!(budget.cancelled());
    }
}
