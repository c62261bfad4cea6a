//! What the background audit exports on `/metrics`, read at scrape time
//! from the last round's counts.
//!
//! Cardinality: `draguard_audit_findings` has one series per policy that
//! had a finding and per result (`fail`, `warn`, `error`), at most
//! [`MAX_POLICY_SERIES`] policies; findings of any further policy are
//! counted under `policy="other"`. The API's own rules count as
//! `policy="draguard"`, as in the PolicyReports.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Policies with series of their own at most.
pub const MAX_POLICY_SERIES: usize = 100;

/// The counts of one finished round.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoundCounts {
    /// Objects judged.
    pub objects: u64,
    /// Objects that would be denied now.
    pub denied: u64,
    /// Findings by policy and result (`fail`, `warn`, `error`).
    pub findings: BTreeMap<(String, &'static str), u64>,
    /// Results left out of reports past their cap.
    pub omitted: u64,
    /// Parts (the cluster's, or a namespace) not judged: too large, or
    /// not readable.
    pub parts_not_judged: u64,
}

impl RoundCounts {
    /// Counts `n` findings, under their policy while there is room for it.
    pub fn add_findings(&mut self, policy: &str, result: &'static str, n: u64) {
        let known = self.findings.keys().any(|(p, _)| p == policy);
        let policies = self
            .findings
            .keys()
            .map(|(p, _)| p.as_str())
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let policy = if known || policies < MAX_POLICY_SERIES {
            policy
        } else {
            "other"
        };
        *self.findings.entry((policy.to_owned(), result)).or_default() += n;
    }
}

#[derive(Debug, Default)]
struct State {
    leader: bool,
    last: Option<RoundCounts>,
    /// Unix seconds the last round finished.
    last_round_at: Option<f64>,
    rounds_ok: u64,
    rounds_failed: u64,
    /// Objects denied after the last policy change, when a round has run
    /// since one.
    after_policy_change: Option<u64>,
}

/// The audit's state, shared by its loop and the scrape.
#[derive(Debug, Clone, Default)]
pub struct AuditStatus(Arc<Mutex<State>>);

impl AuditStatus {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        match self.0.lock() {
            Ok(mut state) => f(&mut state),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    pub fn set_leader(&self, leader: bool) {
        self.with(|s| s.leader = leader);
    }

    pub fn round_done(&self, counts: RoundCounts, after_policy_change: bool) {
        let now = jiff::Timestamp::now().as_millisecond() as f64 / 1000.0;
        self.with(|s| {
            if after_policy_change {
                s.after_policy_change = Some(counts.denied);
            }
            s.last = Some(counts);
            s.last_round_at = Some(now);
            s.rounds_ok += 1;
        });
    }

    pub fn round_failed(&self) {
        self.with(|s| s.rounds_failed += 1);
    }

    /// The denied count of the last finished round.
    pub fn last_denied(&self) -> Option<u64> {
        self.with(|s| s.last.as_ref().map(|c| c.denied))
    }

    /// The Collector for `/metrics`.
    pub fn collector(&self) -> Box<dyn Collector> {
        Box::new(StatusCollector(self.clone()))
    }
}

#[derive(Debug)]
struct StatusCollector(AuditStatus);

impl Collector for StatusCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let (leader, last, at, ok, failed, after_change) = self.0.with(|s| {
            (
                s.leader,
                s.last.clone(),
                s.last_round_at,
                s.rounds_ok,
                s.rounds_failed,
                s.after_policy_change,
            )
        });
        let gauge = |n: u64| ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX));
        let one = |encoder: &mut DescriptorEncoder, name: &str, help: &str, metric: ConstGauge| {
            metric.encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)
        };
        one(
            &mut encoder,
            "draguard_audit_leader",
            "1 while this replica holds the audit Lease (only it audits and writes PolicyReports), else 0.",
            ConstGauge::new(i64::from(leader)),
        )?;
        {
            let mut metric = encoder.encode_descriptor(
                "draguard_audit_rounds",
                "Background audit rounds, by result: success, failure (the apiserver could not be read).",
                None,
                MetricType::Counter,
            )?;
            for (result, n) in [("success", ok), ("failure", failed)] {
                ConstCounter::new(n).encode(metric.encode_family(&[("result", result)])?)?;
            }
        }
        if let Some(at) = at {
            ConstGauge::new(at).encode(encoder.encode_descriptor(
                "draguard_audit_last_round_timestamp_seconds",
                "When the last background audit round finished (Unix seconds).",
                None,
                MetricType::Gauge,
            )?)?;
        }
        if let Some(counts) = &last {
            {
                let mut metric = encoder.encode_descriptor(
                    "draguard_audit_findings",
                    "Findings of the last background audit round, by policy (draguard for the API's own rules) \
                     and result (fail: would be denied now, warn, error: could not be judged).",
                    None,
                    MetricType::Gauge,
                )?;
                for ((policy, result), n) in &counts.findings {
                    gauge(*n).encode(metric.encode_family(&[("policy", policy.as_str()), ("result", *result)])?)?;
                }
            }
            one(
                &mut encoder,
                "draguard_audit_denied_objects",
                "Existing objects the last background audit round found would be denied now.",
                gauge(counts.denied),
            )?;
            one(
                &mut encoder,
                "draguard_audit_objects",
                "Objects the last background audit round judged.",
                gauge(counts.objects),
            )?;
            one(
                &mut encoder,
                "draguard_audit_results_omitted",
                "Results left out of the PolicyReports of the last round, past the cap of results per report.",
                gauge(counts.omitted),
            )?;
            one(
                &mut encoder,
                "draguard_audit_parts_not_judged",
                "Parts of the cluster (the cluster-scoped objects, or one namespace) the last round could not \
                 judge: too large for the part budget, or unreadable.",
                gauge(counts.parts_not_judged),
            )?;
        }
        if let Some(n) = after_change {
            one(
                &mut encoder,
                "draguard_policy_change_denied_objects",
                "Existing objects denied under the policies in force, as counted by the first audit round after \
                 the last policy change.",
                gauge(n),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_of_policies_past_the_cap_count_under_other() {
        let mut counts = RoundCounts::default();
        for i in 0..MAX_POLICY_SERIES {
            counts.add_findings(&format!("p{i}"), "fail", 1);
        }
        counts.add_findings("late", "fail", 3);
        counts.add_findings("late", "warn", 1);
        // A policy with series already keeps them.
        counts.add_findings("p0", "warn", 2);
        assert_eq!(counts.findings.get(&("other".to_owned(), "fail")), Some(&3));
        assert_eq!(counts.findings.get(&("other".to_owned(), "warn")), Some(&1));
        assert_eq!(counts.findings.get(&("late".to_owned(), "fail")), None);
        assert_eq!(counts.findings.get(&("p0".to_owned(), "warn")), Some(&2));
    }

    #[test]
    fn the_scrape_has_the_leader_and_after_a_round_its_counts() {
        let status = AuditStatus::default();
        let render = |status: &AuditStatus| {
            let mut registry = prometheus_client::registry::Registry::default();
            registry.register_collector(status.collector());
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
            text
        };
        let text = render(&status);
        assert!(text.contains("\ndraguard_audit_leader 0\n"), "{text}");
        assert!(!text.contains("draguard_audit_findings"), "{text}");
        status.set_leader(true);
        let mut counts = RoundCounts {
            objects: 9,
            denied: 2,
            ..RoundCounts::default()
        };
        counts.add_findings("gpu-nodes", "fail", 2);
        status.round_done(counts, true);
        let text = render(&status);
        for line in [
            "draguard_audit_leader 1",
            "draguard_audit_rounds_total{result=\"success\"} 1",
            "draguard_audit_rounds_total{result=\"failure\"} 0",
            "draguard_audit_findings{policy=\"gpu-nodes\",result=\"fail\"} 2",
            "draguard_audit_denied_objects 2",
            "draguard_audit_objects 9",
            "draguard_policy_change_denied_objects 2",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
    }
}
