//! Prometheus counters, rendered by hand in the text exposition format.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Upper bounds (seconds) of the review latency histogram: a review is
/// usually well under a millisecond; the apiserver gives up at 30 s.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 10.0,
];

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct RequestKey {
    endpoint: &'static str,
    /// A kind draguard handles, `other` or `undecodable`: never free text
    /// from the request, so the number of series stays bounded.
    kind: String,
    allowed: bool,
}

#[derive(Default)]
pub(crate) struct Metrics {
    requests: Mutex<BTreeMap<RequestKey, u64>>,
    review_seconds: Histogram,
    unhandled_kinds: AtomicU64,
    bad_requests: AtomicU64,
    timeouts: AtomicU64,
    policy_audits: AtomicU64,
}

impl Metrics {
    pub(crate) fn answered(&self, endpoint: &'static str, kind: &str, allowed: bool, took: Duration) {
        let key = RequestKey {
            endpoint,
            kind: kind.to_owned(),
            allowed,
        };
        *self
            .requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key)
            .or_default() += 1;
        self.review_seconds.observe(took);
    }

    pub(crate) fn unhandled_kind(&self) {
        self.unhandled_kinds.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn bad_request(&self) {
        self.bad_requests.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn timed_out(&self) {
        self.timeouts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn audited(&self, violations: usize) {
        self.policy_audits
            .fetch_add(u64::try_from(violations).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        header(
            &mut out,
            "draguard_admission_requests_total",
            "counter",
            "AdmissionReviews answered, by endpoint, object kind and verdict.",
        );
        let requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner).clone();
        for (key, count) in &requests {
            let _ = writeln!(
                out,
                "draguard_admission_requests_total{{endpoint=\"{}\",kind=\"{}\",allowed=\"{}\"}} {count}",
                key.endpoint,
                escape(&key.kind),
                key.allowed
            );
        }
        self.review_seconds
            .render(&mut out, "draguard_admission_review_seconds");
        counter(
            &mut out,
            "draguard_unhandled_kinds_total",
            "AdmissionReviews for kinds draguard does not judge (allowed unchanged).",
            &self.unhandled_kinds,
        );
        counter(
            &mut out,
            "draguard_bad_requests_total",
            "Requests answered with HTTP 400 or 413: not an AdmissionReview, or too large.",
            &self.bad_requests,
        );
        counter(
            &mut out,
            "draguard_review_timeouts_total",
            "Reviews that missed the apiserver's deadline (answered with HTTP 504).",
            &self.timeouts,
        );
        counter(
            &mut out,
            "draguard_policy_audit_violations_total",
            "Tolerations an Audit-mode policy would have denied (admitted and recorded).",
            &self.policy_audits,
        );
        out
    }
}

struct Histogram {
    /// Per-bucket counts (not cumulative); the last slot is above every bound.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_micros: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_micros: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    fn observe(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        let slot = BUCKETS.iter().position(|le| seconds <= *le).unwrap_or(BUCKETS.len());
        self.buckets[slot].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str) {
        header(
            out,
            name,
            "histogram",
            "Time to answer one AdmissionReview, from body read to verdict.",
        );
        let mut cumulative = 0u64;
        for (i, le) in BUCKETS.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
        }
        cumulative += self.buckets[BUCKETS.len()].load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {cumulative}");
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn counter(out: &mut String, name: &str, help: &str, value: &AtomicU64) {
    header(out, name, "counter", help);
    let _ = writeln!(out, "{name} {}", value.load(Ordering::Relaxed));
}

/// Label value escaping of the text format.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_cumulative_buckets() {
        let m = Metrics::default();
        m.answered("validate", "ResourceClaim", true, Duration::from_micros(200));
        m.answered("validate", "ResourceClaim", true, Duration::from_millis(2));
        m.answered("mutate", "other", true, Duration::from_secs(60));
        m.unhandled_kind();
        m.bad_request();
        let text = m.render();
        for line in [
            "draguard_admission_requests_total{endpoint=\"validate\",kind=\"ResourceClaim\",allowed=\"true\"} 2",
            "draguard_admission_requests_total{endpoint=\"mutate\",kind=\"other\",allowed=\"true\"} 1",
            "draguard_admission_review_seconds_bucket{le=\"0.0001\"} 0",
            "draguard_admission_review_seconds_bucket{le=\"0.00025\"} 1",
            "draguard_admission_review_seconds_bucket{le=\"0.0025\"} 2",
            "draguard_admission_review_seconds_bucket{le=\"10\"} 2",
            "draguard_admission_review_seconds_bucket{le=\"+Inf\"} 3",
            "draguard_admission_review_seconds_count 3",
            "draguard_admission_review_seconds_sum 60.0022",
            "draguard_unhandled_kinds_total 1",
            "draguard_bad_requests_total 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
    }

    #[test]
    fn escapes_label_values() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
