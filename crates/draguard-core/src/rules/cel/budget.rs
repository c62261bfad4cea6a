//! What one request may spend on compiling CEL, and when it must stop.
//!
//! The budget never denies what the apiserver admits. Its bounds:
//! - Source bytes ([`SOURCE_MAX`]): the apiserver's own bound. A claim may
//!   hold 32 requests × 8 subrequests × 32 selectors of 10 KiB (80 MiB)
//!   by its list limits, but no object the apiserver accepts is bigger
//!   than its request body limit, 3 MiB
//!   (k8s.io/apiserver/pkg/server/config.go, `MaxRequestBodyBytes`), and
//!   its selectors are less than that. A review carries the object and,
//!   on update, the old one: twice that. Past it the request is no object
//!   the apiserver sent; the expression is denied with a message naming
//!   the budget, and the rest are not compiled.
//! - Parser time ([`TIME_MAX`]): a share, not a limit. Valid selectors can
//!   take the parser a long time (a 10 KiB chain of `+` about 0.2 s), so
//!   a request past its share goes on compiling while no other compile
//!   waits in the lane it needs; only when one does (real pressure on the
//!   compiler) is its next selector refused with "try again", as the pool
//!   refuses a compile it has no room for, and the rest are not compiled.
//!   Remembered expressions cost no time and are never refused. A request
//!   past its share that has an invalid selector already is denied
//!   whatever the rest hold: its other selectors are not compiled (the
//!   denial lists fewer causes than the apiserver's would, never a
//!   different verdict).
//!
//! The budget also carries the review's deadline: past it, nothing more is
//! compiled and the review stops (the server has answered 504 already).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::CelCompiler;
use crate::field::{At, FieldError};

/// CEL source a request may have compiled: twice the apiserver's request
/// body limit of 3 MiB (the object and the old object of an update).
pub const SOURCE_MAX: usize = 2 * (3 << 20);
/// Parser time a request may use while other compiles wait. A real
/// selector compiles in a millisecond.
pub const TIME_MAX: Duration = Duration::from_secs(1);

/// The detail of the error for a selector refused because this request had
/// its share of the compiler while others waited.
pub const YIELDED: &str =
    "selector not checked: the CEL compiler is busy and this request has had its share; try again";

/// One review's CEL compile budget, and the compiler it compiles on.
/// Shared by reference through the validation of one object; each review
/// makes its own.
pub struct CompileBudget<'c> {
    compiler: &'c dyn CelCompiler,
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
    /// An expression was invalid: the request is denied.
    denied: bool,
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

impl<'c> CompileBudget<'c> {
    /// The standard budget, for a review that must stop at `deadline`
    /// (`None`: the CLI, which has none), compiling on `compiler`.
    pub fn new(deadline: Option<Instant>, compiler: &'c dyn CelCompiler) -> Self {
        CompileBudget {
            compiler,
            ..Self::with_limits(SOURCE_MAX, TIME_MAX, deadline)
        }
    }

    /// A budget of other limits, on the process's compiler (tests).
    pub fn with_limits(source_max: usize, time_max: Duration, deadline: Option<Instant>) -> Self {
        CompileBudget {
            compiler: super::shared(),
            source_max,
            time_max,
            deadline,
            spent: Mutex::default(),
        }
    }

    pub fn compiler(&self) -> &'c dyn CelCompiler {
        self.compiler
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
    /// the budget is spent or the deadline passed. `contended` says whether
    /// compiling it would make others wait (asked only past the time share).
    /// Every expression is charged its source, remembered or not, so that
    /// a request's verdict does not depend on what other requests compiled
    /// before it.
    pub fn admit(&self, path: At<'_>, len: usize, contended: impl FnOnce() -> bool) -> Admission {
        let past_deadline = self.deadline.is_some_and(|d| Instant::now() >= d);
        let mut spent = self.spent();
        if spent.cancelled || past_deadline {
            spent.cancelled = true;
            return Admission::Skip;
        }
        if spent.over {
            return Admission::Skip;
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
        if spent.time >= self.time_max {
            if spent.denied {
                return Admission::Skip;
            }
            if contended() {
                spent.over = true;
                return Admission::Refuse(FieldError::internal(path, YIELDED));
            }
        }
        spent.source += len;
        Admission::Compile
    }

    /// Charges the parser's time for one compile.
    pub fn spend(&self, took: Duration) {
        self.spent().time += took;
    }

    /// Notes that an expression was invalid: the request is denied.
    pub fn deny(&self) {
        self.spent().denied = true;
    }
}

impl Default for CompileBudget<'static> {
    /// The standard budget without a deadline, on the process's compiler.
    fn default() -> Self {
        Self::new(None, super::shared())
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
        let at = |i| outcome(budget.admit(At::new(&root).index(i), 40, || false));
        assert_eq!(at(0), "compile");
        assert_eq!(at(1), "compile");
        assert_eq!(
            at(2),
            "s[2]: Forbidden: not checked: this request's CEL selectors total more than draguard's budget of 100 bytes per request"
        );
        assert_eq!(at(3), "skip");
        assert!(!budget.cancelled());
    }

    /// N10: the most selector source a claim the apiserver admits can
    /// hold is within the standard budget. A claim is at most the
    /// apiserver's 3 MiB body; filled with 10 KiB selectors (307 of them,
    /// fewer than the 32 × 8 × 32 its lists allow), every one is compiled.
    #[test]
    fn what_the_apiserver_admits_is_within_the_source_budget() {
        let budget = CompileBudget::default();
        let root = Path::new("s");
        let selectors = (3 << 20) / (10 << 10);
        for i in 0..selectors {
            assert_eq!(
                outcome(budget.admit(At::new(&root).index(i), 10 << 10, || true)),
                "compile",
                "{i}"
            );
        }
        // The old object of an update as much again.
        for i in 0..selectors {
            assert_eq!(
                outcome(budget.admit(At::new(&root).index(i), 10 << 10, || true)),
                "compile",
                "{i}"
            );
        }
    }

    /// Past its time share a request goes on while nothing waits, and
    /// yields ("try again") when something does.
    #[test]
    fn past_the_time_share_a_request_yields_only_under_pressure() {
        let budget = CompileBudget::with_limits(SOURCE_MAX, Duration::from_millis(500), None);
        let root = Path::new("s");
        assert_eq!(
            outcome(budget.admit(At::new(&root), 1, || true)),
            "compile",
            "within its share"
        );
        budget.spend(Duration::from_millis(700));
        assert_eq!(
            outcome(budget.admit(At::new(&root), 1, || false)),
            "compile",
            "nothing waits"
        );
        assert_eq!(
            outcome(budget.admit(At::new(&root).index(1), 1, || true)),
            "s[1]: Internal error: selector not checked: the CEL compiler is busy and this request has had its share; try again"
        );
        assert_eq!(outcome(budget.admit(At::new(&root).index(2), 1, || false)), "skip");
    }

    /// Past its time share, a request already denied compiles no more.
    #[test]
    fn past_the_time_share_a_denied_request_stops() {
        let budget = CompileBudget::with_limits(SOURCE_MAX, Duration::from_millis(500), None);
        let root = Path::new("s");
        budget.deny();
        assert_eq!(
            outcome(budget.admit(At::new(&root), 1, || false)),
            "compile",
            "within its share"
        );
        budget.spend(Duration::from_millis(700));
        assert_eq!(outcome(budget.admit(At::new(&root), 1, || false)), "skip");
    }

    #[test]
    fn a_passed_deadline_cancels() {
        let budget = CompileBudget::new(Some(Instant::now() - Duration::from_millis(1)), super::super::shared());
        let root = Path::new("s");
        assert_eq!(outcome(budget.admit(At::new(&root), 1, || false)), "skip");
        assert!(budget.cancelled());
    }
}
