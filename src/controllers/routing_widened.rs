//! Where the defaulting webhook's routing sends claim and Pod CREATEs to
//! `/mutate` beyond what the policies' label selectors select
//! ([`Widening`]: selector entries merged past their bound, too many
//! selectors, a selector the apiserver would refuse): each such CREATE
//! costs a second call that adds nothing. Said once per change in the
//! log, and on `/metrics` at scrape time:
//! - `draguard_routing_widened_policies`: how many policies are sent
//!   beyond their selectors (0 when the routing is exact);
//! - `draguard_routing_widened{policy,namespaces}`: 1 per such policy
//!   and the namespaces that pay for it (a selector as kubectl writes
//!   it, `all` for every namespace the defaulting entry is sent for), at
//!   most [`MAX_SERIES`] series.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::mutate_selector_entries::Widening;

/// Series of `draguard_routing_widened` at most (the count says the rest).
pub const MAX_SERIES: usize = 100;

/// The widenings in force, shared by the controller and the scrape.
#[derive(Debug, Clone, Default)]
pub struct RoutingWidened(Arc<Mutex<Vec<Widening>>>);

impl RoutingWidened {
    fn with<T>(&self, f: impl FnOnce(&mut Vec<Widening>) -> T) -> T {
        match self.0.lock() {
            Ok(mut state) => f(&mut state),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Records the widenings of the policies in force, and logs them when
    /// they changed: a warning per widening, or a line that the routing is
    /// exact again.
    pub fn set(&self, now: &[Widening]) {
        let before = self.with(|state| std::mem::replace(state, now.to_vec()));
        if before == now {
            return;
        }
        for w in now {
            let namespaces = if w.namespaces.is_empty() {
                "every namespace the defaulting entry is sent for"
            } else {
                w.namespaces.as_str()
            };
            tracing::warn!(
                policies = %w.policies.join(","),
                namespaces,
                reason = w.reason,
                "claim and Pod CREATEs of these policies reach /mutate in namespaces their label selectors do not select: each costs a second webhook call there (draguard_routing_widened)"
            );
        }
        if now.is_empty() {
            tracing::info!("label-selector routing of the defaulting webhook is exact again");
        }
    }

    /// The Collector for `/metrics`.
    pub fn collector(&self) -> Box<dyn Collector> {
        Box::new(WidenedCollector(self.clone()))
    }
}

#[derive(Debug)]
struct WidenedCollector(RoutingWidened);

impl Collector for WidenedCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let widenings = self.0.with(|state| state.clone());
        let series: BTreeSet<(&str, &str)> = widenings
            .iter()
            .flat_map(|w| {
                let namespaces = if w.namespaces.is_empty() {
                    "all"
                } else {
                    w.namespaces.as_str()
                };
                w.policies.iter().map(move |p| (p.as_str(), namespaces))
            })
            .collect();
        let policies: BTreeSet<&str> = series.iter().map(|(p, _)| *p).collect();
        ConstGauge::new(i64::try_from(policies.len()).unwrap_or(i64::MAX)).encode(encoder.encode_descriptor(
            "draguard_routing_widened_policies",
            "Policies whose claim and Pod CREATEs reach /mutate in namespaces their label selectors do not select \
             (a second call there that adds nothing); 0 when the routing is exact.",
            None,
            MetricType::Gauge,
        )?)?;
        if series.is_empty() {
            return Ok(());
        }
        let mut metric = encoder.encode_descriptor(
            "draguard_routing_widened",
            "1 per policy sent to /mutate beyond its label selector, and the namespaces that pay for it \
             (a selector, or all).",
            None,
            MetricType::Gauge,
        )?;
        for (policy, namespaces) in series.into_iter().take(MAX_SERIES) {
            ConstGauge::new(1_i64).encode(metric.encode_family(&[("policy", policy), ("namespaces", namespaces)])?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(routing: &RoutingWidened) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(routing.collector());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        text
    }

    #[test]
    fn zero_when_exact_then_a_series_per_policy_and_namespaces() {
        let routing = RoutingWidened::default();
        let text = render(&routing);
        assert!(text.contains("\ndraguard_routing_widened_policies 0\n"), "{text}");
        assert!(!text.contains("draguard_routing_widened{"), "{text}");
        routing.set(&[
            Widening {
                policies: vec!["a".into(), "b".into()],
                namespaces: "team in (a,b)".into(),
                reason: "merged",
            },
            Widening {
                policies: vec!["c".into()],
                namespaces: String::new(),
                reason: "refused",
            },
        ]);
        let text = render(&routing);
        for line in [
            "draguard_routing_widened_policies 3",
            r#"draguard_routing_widened{policy="a",namespaces="team in (a,b)"} 1"#,
            r#"draguard_routing_widened{policy="b",namespaces="team in (a,b)"} 1"#,
            r#"draguard_routing_widened{policy="c",namespaces="all"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        routing.set(&[]);
        assert!(render(&routing).contains("\ndraguard_routing_widened_policies 0\n"));
    }
}
