//! A 0/1 gauge of whether this replica holds a Lease, read at scrape time:
//! `sum(...) == 0` across the pods says that nobody holds it (the Role
//! missing, the apiserver unreachable), which the log says only once a
//! minute per pod.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

/// Shared between the loop that holds the Lease and `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct LeaseGauge(Arc<AtomicBool>);

impl LeaseGauge {
    pub fn set(&self, holds: bool) {
        self.0.store(holds, Ordering::Relaxed);
    }

    /// The Collector exporting it as `name`.
    pub fn collector(&self, name: &'static str, help: &'static str) -> Box<dyn Collector> {
        Box::new(GaugeCollector {
            holds: self.clone(),
            name,
            help,
        })
    }
}

#[derive(Debug)]
struct GaugeCollector {
    holds: LeaseGauge,
    name: &'static str,
    help: &'static str,
}

impl Collector for GaugeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let holds = self.holds.0.load(Ordering::Relaxed);
        ConstGauge::new(i64::from(holds)).encode(encoder.encode_descriptor(
            self.name,
            self.help,
            None,
            MetricType::Gauge,
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(collector: Box<dyn Collector>) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(collector);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        text
    }

    #[test]
    fn zero_until_held_then_one() {
        let gauge = LeaseGauge::default();
        let text = render(gauge.collector("draguard_x_leader", "Holds the x Lease."));
        assert!(
            text.contains("# TYPE draguard_x_leader gauge\ndraguard_x_leader 0\n"),
            "{text}"
        );
        gauge.set(true);
        let text = render(gauge.collector("draguard_x_leader", "Holds the x Lease."));
        assert!(text.contains("\ndraguard_x_leader 1\n"), "{text}");
    }
}
