//! Prometheus metrics, kept and rendered by `prometheus-client` in the
//! OpenMetrics text format.
//!
//! The request path only touches atomics (one counter family lookup under a
//! short read lock, one histogram observation); everything that describes
//! state elsewhere (policies, certificate, caches, the process) is read by
//! collectors at scrape time, so a review never pays for it.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use super::scale_workload::FetchOutcome;
use super::taint_rule_reach::TaintRuleReach;
use super::tls::CertStore;
use crate::build_info;
#[cfg(test)]
use crate::kubernetes::KubeVersion;
use crate::kubernetes::Target;
use crate::kubernetes::apiserver_report::Mismatch;
use crate::policy_files::reload::PolicyStore;
use crate::view::ClusterView;

/// What `/metrics` answers with: prometheus-client writes OpenMetrics 1.0.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds (seconds) of the review latency histogram: a review is
/// usually well under a millisecond; the apiserver gives up at 30 s.
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 10.0,
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    /// A kind draguard handles, `other` or `undecodable`: never free text
    /// from the request, so the number of series stays bounded and the
    /// label costs no allocation.
    kind: &'static str,
    allowed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: &'static str,
}

/// Why a request to `/validate` or `/mutate` was refused before its review.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RejectReason {
    /// HTTP 503: the cap on reviews in progress was reached.
    Overloaded,
    /// HTTP 503: the reviews in progress hold the whole review memory
    /// budget.
    ReviewMemory,
    /// HTTP 408: the body did not arrive within the body timeout.
    BodyTimeout,
}

impl RejectReason {
    const ALL: [RejectReason; 3] = [
        RejectReason::Overloaded,
        RejectReason::ReviewMemory,
        RejectReason::BodyTimeout,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            RejectReason::Overloaded => "overloaded",
            RejectReason::ReviewMemory => "review_memory",
            RejectReason::BodyTimeout => "body_timeout",
        }
    }
}

/// Which timeout closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectionTimeout {
    /// No TLS handshake within the handshake timeout.
    Handshake,
    /// No request after the handshake within the first-request timeout.
    FirstRequest,
    /// No request on a keep-alive connection within the idle timeout.
    Idle,
}

impl ConnectionTimeout {
    const ALL: [ConnectionTimeout; 3] = [
        ConnectionTimeout::Handshake,
        ConnectionTimeout::FirstRequest,
        ConnectionTimeout::Idle,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            ConnectionTimeout::Handshake => "handshake",
            ConnectionTimeout::FirstRequest => "first_request",
            ConnectionTimeout::Idle => "idle",
        }
    }
}

/// Why the server closed a connection to the plain metrics port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MetricsClose {
    /// Closed at once: the port's connection cap was reached.
    Refused,
    /// No request within the first-request timeout.
    FirstRequest,
    /// No request on a keep-alive connection within the idle timeout.
    Idle,
}

impl MetricsClose {
    const ALL: [MetricsClose; 3] = [MetricsClose::Refused, MetricsClose::FirstRequest, MetricsClose::Idle];

    fn label(self) -> &'static str {
        match self {
            MetricsClose::Refused => "refused",
            MetricsClose::FirstRequest => "first_request",
            MetricsClose::Idle => "idle",
        }
    }
}

impl From<ConnectionTimeout> for MetricsClose {
    fn from(timeout: ConnectionTimeout) -> Self {
        match timeout {
            // The plain port has no handshake; were it ever to time one
            // out, that is silence before the first request too.
            ConnectionTimeout::Handshake | ConnectionTimeout::FirstRequest => MetricsClose::FirstRequest,
            ConnectionTimeout::Idle => MetricsClose::Idle,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TimeoutLabels {
    timeout: &'static str,
}

/// Reads how many connections and reviews are open, for the gauges; the
/// server hands over closures so that metrics need not know its types.
pub(crate) struct Capacity {
    /// Open connections and the cap.
    pub(crate) connections: Box<dyn Fn() -> (usize, usize) + Send + Sync>,
    /// Reviews in progress and the cap.
    pub(crate) reviews: Box<dyn Fn() -> (usize, usize) + Send + Sync>,
    /// Bytes the reviews in progress are charged, and the budget.
    pub(crate) review_memory: Box<dyn Fn() -> (usize, usize) + Send + Sync>,
}

fn review_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    review_seconds: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    unhandled_kinds: Counter,
    bad_requests: Counter,
    timeouts: Counter,
    policy_audits: Counter,
    internal_errors: Counter,
    reviews_rejected: Family<ReasonLabels, Counter>,
    connection_timeouts: Family<TimeoutLabels, Counter>,
    metrics_connections_closed: Family<ReasonLabels, Counter>,
    scale_workload_fetches: Family<ResultLabels, Counter>,
}

impl Metrics {
    /// The request metrics, `draguard_build_info` and, on Linux, the
    /// `process_*` metrics. Add the state collectors with the `watch_*`
    /// methods before sharing it.
    /// `target`: the rules in force, for `draguard_build_info`.
    pub(crate) fn new(target: Target) -> Self {
        let mut registry = Registry::default();
        // Help texts registered here have no final period: the registry
        // adds one. Collectors write theirs whole.
        let requests = Family::<RequestLabels, Counter>::default();
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "draguard_admission_requests",
            "AdmissionReviews answered, by endpoint, object kind and verdict",
            requests.clone(),
        );
        let review_seconds = Family::new_with_constructor(review_histogram as fn() -> Histogram);
        registry.register(
            "draguard_admission_review_seconds",
            "Time to answer one AdmissionReview, from body read to verdict, by endpoint",
            review_seconds.clone(),
        );
        let mut counter = |name: &str, help: &str| {
            let c = Counter::default();
            registry.register(name, help, c.clone());
            c
        };
        let unhandled_kinds = counter(
            "draguard_unhandled_kinds",
            "AdmissionReviews for kinds draguard does not judge (allowed unchanged)",
        );
        let bad_requests = counter(
            "draguard_bad_requests",
            "Requests answered with HTTP 400 or 413: not an AdmissionReview, or too large",
        );
        let timeouts = counter(
            "draguard_review_timeouts",
            "Reviews that missed the apiserver's deadline (answered with HTTP 504)",
        );
        let policy_audits = counter(
            "draguard_policy_audit_violations",
            "Tolerations an Audit-mode policy would have denied (admitted and recorded)",
        );
        let internal_errors = counter(
            "draguard_internal_errors",
            "Mutations draguard could not compute (its own bug): admitted without a patch, logged",
        );
        let reviews_rejected = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "draguard_reviews_rejected",
            "Requests to /validate and /mutate refused before their review, by reason: overloaded (HTTP 503, \
             the cap on reviews in progress), review_memory (HTTP 503, the review memory budget), body_timeout \
             (HTTP 408, the body did not arrive in time)",
            reviews_rejected.clone(),
        );
        let connection_timeouts = Family::<TimeoutLabels, Counter>::default();
        registry.register(
            "draguard_connection_timeouts",
            "Connections closed by the server for silence, by timeout: handshake (no TLS handshake), \
             first_request (no request after the handshake), idle (no request on a keep-alive connection)",
            connection_timeouts.clone(),
        );
        let metrics_connections_closed = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "draguard_metrics_connections_closed",
            "Connections to the plain metrics port (--metrics-listen) the server closed, by reason: refused \
             (at once: the port's connection cap was reached), first_request (no request in time), idle (no \
             request on a keep-alive connection)",
            metrics_connections_closed.clone(),
        );
        let scale_workload_fetches = Family::<ResultLabels, Counter>::default();
        registry.register(
            "draguard_scale_workload_fetches",
            "Workloads read for a scale-up's warning, by result: fetched, timeout, forbidden (RBAC), not_found, \
             review_memory (no room in the budget), unreadable (too large, not JSON), failed; every one but \
             fetched admits the scale without a warning",
            scale_workload_fetches.clone(),
        );
        for outcome in FetchOutcome::ALL {
            let _ = scale_workload_fetches.get_or_create(&ResultLabels {
                result: outcome.label(),
            });
        }
        // Every series from the start: `rate()` and `increase()` need the zero.
        for reason in MetricsClose::ALL {
            let _ = metrics_connections_closed.get_or_create(&ReasonLabels { reason: reason.label() });
        }
        for reason in RejectReason::ALL {
            let _ = reviews_rejected.get_or_create(&ReasonLabels { reason: reason.label() });
        }
        for timeout in ConnectionTimeout::ALL {
            let _ = connection_timeouts.get_or_create(&TimeoutLabels {
                timeout: timeout.label(),
            });
        }
        // The encoder appends `_info`.
        registry.register(
            "draguard_build",
            "The running draguard: version, git commit, the Kubernetes version whose rules are in force \
             and the feature gates set differently from that version's defaults",
            Info::new([
                ("version", build_info::VERSION.to_owned()),
                ("commit", build_info::GIT_COMMIT.to_owned()),
                ("kubernetes", target.version.to_string()),
                ("feature_gates", target.gates.changed_from_defaults(target.version)),
            ]),
        );
        registry.register_collector(Box::new(LibraryWarnings));
        #[cfg(target_os = "linux")]
        registry.register_collector(Box::new(super::process::ProcessCollector));
        Metrics {
            registry,
            requests,
            review_seconds,
            unhandled_kinds,
            bad_requests,
            timeouts,
            policy_audits,
            internal_errors,
            reviews_rejected,
            connection_timeouts,
            metrics_connections_closed,
            scale_workload_fetches,
        }
    }

    /// Exports open connections and reviews in progress against their caps.
    pub(crate) fn watch_capacity(&mut self, capacity: Capacity) {
        self.registry.register_collector(Box::new(CapacityCollector(capacity)));
    }

    /// Exports what another part of draguard collects.
    pub(crate) fn watch(&mut self, collector: Box<dyn Collector>) {
        self.registry.register_collector(collector);
    }

    pub(crate) fn review_rejected(&self, reason: RejectReason) {
        self.reviews_rejected
            .get_or_create(&ReasonLabels { reason: reason.label() })
            .inc();
    }

    pub(crate) fn scale_workload_fetched(&self, outcome: FetchOutcome) {
        self.scale_workload_fetches
            .get_or_create(&ResultLabels {
                result: outcome.label(),
            })
            .inc();
    }

    pub(crate) fn connection_timed_out(&self, timeout: ConnectionTimeout) {
        self.connection_timeouts
            .get_or_create(&TimeoutLabels {
                timeout: timeout.label(),
            })
            .inc();
    }

    pub(crate) fn metrics_connection_closed(&self, why: MetricsClose) {
        self.metrics_connections_closed
            .get_or_create(&ReasonLabels { reason: why.label() })
            .inc();
    }

    /// Exports how loading `policies` went.
    pub(crate) fn watch_policies(&mut self, policies: PolicyStore) {
        self.registry.register_collector(Box::new(PolicyCollector(policies)));
    }

    /// Exports when the certificate `store` serves expires.
    pub(crate) fn watch_certificate(&mut self, store: Arc<CertStore>) {
        self.registry.register_collector(Box::new(CertCollector(store)));
    }

    /// Exports the state of the cluster caches (none without a cluster).
    pub(crate) fn watch_caches(&mut self, cluster: Arc<dyn ClusterView>) {
        self.registry.register_collector(Box::new(CacheCollector(cluster)));
    }

    /// Exports what each standing DeviceTaintRule reaches.
    pub(crate) fn watch_taint_rule_reach(&mut self, reach: TaintRuleReach) {
        self.registry
            .register_collector(Box::new(TaintRuleReachCollector(reach)));
    }

    /// Exports whether the rules in force differ from the apiserver's.
    pub(crate) fn watch_apiserver_mismatch(&mut self, mismatch: Mismatch) {
        self.registry.register_collector(Box::new(MismatchCollector(mismatch)));
    }

    pub(crate) fn answered(&self, endpoint: &'static str, kind: &'static str, allowed: bool, took: Duration) {
        let labels = RequestLabels {
            endpoint,
            kind,
            allowed,
        };
        self.requests.get_or_create(&labels).inc();
        self.review_seconds
            .get_or_create(&EndpointLabels { endpoint })
            .observe(took.as_secs_f64());
    }

    pub(crate) fn unhandled_kind(&self) {
        self.unhandled_kinds.inc();
    }

    pub(crate) fn bad_request(&self) {
        self.bad_requests.inc();
    }

    /// A failure of draguard's own that `/mutate` answered by admitting
    /// without a patch.
    pub(crate) fn internal_error(&self) {
        self.internal_errors.inc();
    }

    pub(crate) fn timed_out(&self) {
        self.timeouts.inc();
    }

    pub(crate) fn audited(&self, violations: usize) {
        self.policy_audits.inc_by(u64::try_from(violations).unwrap_or(u64::MAX));
    }

    /// The OpenMetrics text of every metric, `# EOF` included.
    pub(crate) fn render(&self) -> String {
        let mut out = String::with_capacity(8 * 1024);
        // Writing into a String fails only if an encoder reports an error,
        // which none of ours do; a partial page beats a panic.
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "cannot encode the metrics");
        }
        out
    }
}

/// One metric with a single series.
fn single<M: EncodeMetric>(encoder: &mut DescriptorEncoder, name: &str, help: &str, metric: M) -> std::fmt::Result {
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// One metric with a series per label set.
fn family<S: EncodeLabelSet, M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    series: impl IntoIterator<Item = (S, M)>,
) -> std::fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in series {
        value.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

#[derive(Clone)]
struct PolicyCollector(PolicyStore);

impl std::fmt::Debug for PolicyCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PolicyCollector")
    }
}

impl Collector for PolicyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let stats = self.0.reload_stats();
        // Both results always: `rate()` and `increase()` need the zero.
        family(
            &mut encoder,
            "draguard_policy_reloads",
            "Loads of the policy folder (the one at start included), by result.",
            MetricType::Counter,
            [
                ([("result", "success")], ConstCounter::new(stats.successes)),
                ([("result", "failure")], ConstCounter::new(stats.failures)),
            ],
        )?;
        single(
            &mut encoder,
            "draguard_policy_last_reload_successful",
            "1 when the latest load of the policy folder was good, 0 when it was rejected.",
            ConstGauge::new(i64::from(!stats.last_failed)),
        )?;
        if let Some(at) = stats.last_success {
            single(
                &mut encoder,
                "draguard_policy_last_reload_success_timestamp_seconds",
                "When the policy folder was last loaded successfully (Unix seconds).",
                ConstGauge::new(at),
            )?;
        }
        let loaded = i64::try_from(self.0.current().policies.len()).unwrap_or(i64::MAX);
        single(
            &mut encoder,
            "draguard_policies_loaded",
            "Toleration policies in force.",
            ConstGauge::new(loaded),
        )
    }
}

#[derive(Debug)]
struct TaintRuleReachCollector(TaintRuleReach);

impl Collector for TaintRuleReachCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let rules = self.0.snapshot();
        // No family without a standing rule (or without a cluster).
        if rules.is_empty() {
            return Ok(());
        }
        let gauge = |n: u64| ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX));
        family(
            &mut encoder,
            "draguard_taint_rule_reach",
            "What each standing DeviceTaintRule reaches now, by kind: pods (evicted by a NoExecute rule, kept from \
             being scheduled again by a NoSchedule one) and their namespaces.",
            MetricType::Gauge,
            rules.iter().flat_map(|(rule, reach)| {
                [
                    ([("rule", rule.as_str()), ("kind", "pods")], gauge(reach.pods)),
                    (
                        [("rule", rule.as_str()), ("kind", "namespaces")],
                        gauge(reach.namespaces),
                    ),
                ]
            }),
        )
    }
}

#[derive(Debug)]
struct MismatchCollector(Mismatch);

impl Collector for MismatchCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        // No series for an aspect not read (no cluster, or RBAC refused):
        // 0 would claim an agreement nobody checked.
        let known = self.0.known();
        if known.is_empty() {
            return Ok(());
        }
        family(
            &mut encoder,
            "draguard_apiserver_mismatch",
            "1 when the rules in force differ from what the apiserver runs, by aspect: version (/version), \
             feature_gates (kubernetes_feature_enabled of /metrics); 0 when they agree.",
            MetricType::Gauge,
            known
                .into_iter()
                .map(|(aspect, value)| ([("aspect", aspect)], ConstGauge::new(value))),
        )
    }
}

#[derive(Debug)]
struct CertCollector(Arc<CertStore>);

impl Collector for CertCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        // Absent rather than 0 when unreadable: 0 would look expired.
        let Some(not_after) = self.0.not_after() else {
            return Ok(());
        };
        single(
            &mut encoder,
            "draguard_certificate_expiry_timestamp_seconds",
            "notAfter of the serving certificate new TLS handshakes get (Unix seconds).",
            ConstGauge::new(not_after),
        )
    }
}

/// The warnings of libraries the default log filter hides (`log_quiet`).
#[derive(Debug)]
struct LibraryWarnings;

impl Collector for LibraryWarnings {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        family(
            &mut encoder,
            "draguard_library_warnings",
            "Warnings logged by libraries whose per-event warnings the default log filter hides, shown or not, \
             by target: rustls (one per TLS handshake with an IP-address SNI, among others), \
             kube_runtime::watcher (one per retry of a failing watch).",
            MetricType::Counter,
            crate::log_quiet::warnings()
                .into_iter()
                .map(|(target, n)| ([("target", target)], ConstCounter::new(n))),
        )
    }
}

struct CapacityCollector(Capacity);

impl std::fmt::Debug for CapacityCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CapacityCollector")
    }
}

impl Collector for CapacityCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let gauge = |n: usize| ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX));
        let (open, max_connections) = (self.0.connections)();
        let (reviews, max_reviews) = (self.0.reviews)();
        let (charged, budget) = (self.0.review_memory)();
        single(
            &mut encoder,
            "draguard_connections_open",
            "Client connections open on the HTTPS port (TLS handshakes included).",
            gauge(open),
        )?;
        single(
            &mut encoder,
            "draguard_connections_max",
            "The cap on open connections; at it the listener stops accepting until one closes.",
            gauge(max_connections),
        )?;
        single(
            &mut encoder,
            "draguard_reviews_in_flight",
            "Reviews in progress on /validate and /mutate, body reading included.",
            gauge(reviews),
        )?;
        single(
            &mut encoder,
            "draguard_reviews_max",
            "The cap on reviews in progress; beyond it the answer is HTTP 503.",
            gauge(max_reviews),
        )?;
        single(
            &mut encoder,
            "draguard_review_memory_bytes",
            "Bytes the reviews in progress are charged, from their body to their written answer.",
            gauge(charged),
        )?;
        single(
            &mut encoder,
            "draguard_review_memory_budget_bytes",
            "The review memory budget; beyond it the answer is HTTP 503.",
            gauge(budget),
        )
    }
}

struct CacheCollector(Arc<dyn ClusterView>);

impl std::fmt::Debug for CacheCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheCollector")
    }
}

impl Collector for CacheCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let caches = self.0.caches();
        if caches.is_empty() {
            return Ok(());
        }
        let by_cache = |value: fn(&crate::view::CacheState) -> i64| {
            caches
                .iter()
                .map(move |c| ([("cache", c.name)], ConstGauge::new(value(c))))
        };
        family(
            &mut encoder,
            "draguard_cache_synced",
            "1 once the cache has its first full list from the apiserver, else 0.",
            MetricType::Gauge,
            by_cache(|c| i64::from(c.synced)),
        )?;
        family(
            &mut encoder,
            "draguard_cache_objects",
            "Objects in the cache.",
            MetricType::Gauge,
            by_cache(|c| i64::try_from(c.objects).unwrap_or(i64::MAX)),
        )?;
        let first_syncs: Vec<_> = caches
            .iter()
            .filter_map(|c| {
                c.first_synced_after
                    .map(|d| ([("cache", c.name)], ConstGauge::new(d.as_secs_f64())))
            })
            .collect();
        family(
            &mut encoder,
            "draguard_cache_first_sync_seconds",
            "Seconds from the start to the cache's first complete list (absent until then).",
            MetricType::Gauge,
            first_syncs,
        )?;
        family(
            &mut encoder,
            "draguard_cache_watch_errors",
            "Errors of the cache's list/watch (each one is retried with backoff).",
            MetricType::Counter,
            caches
                .iter()
                .map(|c| ([("cache", c.name)], ConstCounter::new(c.watch_errors))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::CacheState;

    fn has(text: &str, line: &str) {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }

    fn lacks(text: &str, prefix: &str) {
        assert!(
            !text.lines().any(|l| l.starts_with(prefix)),
            "unexpected {prefix:?} in\n{text}"
        );
    }

    #[test]
    fn renders_counters_and_cumulative_buckets_by_endpoint() {
        let m = Metrics::new(Target::default());
        m.answered("validate", "ResourceClaim", true, Duration::from_micros(200));
        m.answered("validate", "ResourceClaim", true, Duration::from_millis(2));
        m.answered("mutate", "other", true, Duration::from_secs(60));
        m.unhandled_kind();
        m.bad_request();
        m.timed_out();
        m.audited(3);
        m.internal_error();
        m.review_rejected(RejectReason::Overloaded);
        m.review_rejected(RejectReason::Overloaded);
        m.review_rejected(RejectReason::BodyTimeout);
        m.connection_timed_out(ConnectionTimeout::FirstRequest);
        m.metrics_connection_closed(MetricsClose::Refused);
        m.metrics_connection_closed(MetricsClose::Refused);
        m.metrics_connection_closed(ConnectionTimeout::Idle.into());
        let text = m.render();
        for line in [
            "draguard_metrics_connections_closed_total{reason=\"refused\"} 2",
            "draguard_metrics_connections_closed_total{reason=\"first_request\"} 0",
            "draguard_metrics_connections_closed_total{reason=\"idle\"} 1",
            "draguard_reviews_rejected_total{reason=\"overloaded\"} 2",
            "draguard_reviews_rejected_total{reason=\"review_memory\"} 0",
            "draguard_reviews_rejected_total{reason=\"body_timeout\"} 1",
            "draguard_connection_timeouts_total{timeout=\"handshake\"} 0",
            "draguard_connection_timeouts_total{timeout=\"first_request\"} 1",
            "draguard_connection_timeouts_total{timeout=\"idle\"} 0",
            "# HELP draguard_bad_requests Requests answered with HTTP 400 or 413: not an AdmissionReview, or too large.",
            "# TYPE draguard_admission_requests counter",
            "draguard_admission_requests_total{endpoint=\"validate\",kind=\"ResourceClaim\",allowed=\"true\"} 2",
            "draguard_admission_requests_total{endpoint=\"mutate\",kind=\"other\",allowed=\"true\"} 1",
            "# TYPE draguard_admission_review_seconds histogram",
            "draguard_admission_review_seconds_bucket{le=\"0.0001\",endpoint=\"validate\"} 0",
            "draguard_admission_review_seconds_bucket{le=\"0.00025\",endpoint=\"validate\"} 1",
            "draguard_admission_review_seconds_bucket{le=\"0.0025\",endpoint=\"validate\"} 2",
            "draguard_admission_review_seconds_bucket{le=\"+Inf\",endpoint=\"validate\"} 2",
            "draguard_admission_review_seconds_count{endpoint=\"validate\"} 2",
            "draguard_admission_review_seconds_sum{endpoint=\"validate\"} 0.0022",
            "draguard_admission_review_seconds_bucket{le=\"10.0\",endpoint=\"mutate\"} 0",
            "draguard_admission_review_seconds_bucket{le=\"+Inf\",endpoint=\"mutate\"} 1",
            "draguard_admission_review_seconds_sum{endpoint=\"mutate\"} 60.0",
            "draguard_unhandled_kinds_total 1",
            "draguard_bad_requests_total 1",
            "draguard_review_timeouts_total 1",
            "draguard_policy_audit_violations_total 3",
            "draguard_internal_errors_total 1",
        ] {
            has(&text, line);
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn build_info_names_version_commit_and_rules() {
        let text = Metrics::new(Target::default()).render();
        has(&text, "# TYPE draguard_build info");
        has(
            &text,
            &format!(
                "draguard_build_info{{version=\"{}\",commit=\"{}\",kubernetes=\"1.37\",feature_gates=\"\"}} 1",
                build_info::VERSION,
                build_info::GIT_COMMIT,
            ),
        );
        let target = Target::with_gates(KubeVersion::V1_36, "DRADeviceTaintRules=true").expect("a 1.36 gate");
        has(
            &Metrics::new(target).render(),
            &format!(
                "draguard_build_info{{version=\"{}\",commit=\"{}\",kubernetes=\"1.36\",feature_gates=\"DRADeviceTaintRules=true\"}} 1",
                build_info::VERSION,
                build_info::GIT_COMMIT,
            ),
        );
    }

    #[test]
    fn policy_reloads_and_policies_in_force() {
        let store = PolicyStore::default();
        let mut m = Metrics::new(Target::default());
        m.watch_policies(store.clone());
        let text = m.render();
        has(&text, "draguard_policy_reloads_total{result=\"success\"} 0");
        has(&text, "draguard_policy_reloads_total{result=\"failure\"} 0");
        has(&text, "draguard_policy_last_reload_successful 1");
        has(&text, "draguard_policies_loaded 0");
        lacks(&text, "draguard_policy_last_reload_success_timestamp_seconds ");

        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
        let set = crate::policy_files::load::load_dir(&dir)
            .expect("the example policies load")
            .set;
        let count = set.policies.len();
        assert!(count > 0);
        store.replace(set);
        store.rejected();
        let text = m.render();
        has(&text, "draguard_policy_reloads_total{result=\"success\"} 1");
        has(&text, "draguard_policy_reloads_total{result=\"failure\"} 1");
        has(&text, "draguard_policy_last_reload_successful 0");
        has(&text, &format!("draguard_policies_loaded {count}"));
        // The encoder writes floats as Rust's Debug does at this magnitude.
        let at = store.reload_stats().last_success.unwrap();
        has(
            &text,
            &format!("draguard_policy_last_reload_success_timestamp_seconds {at:?}"),
        );
    }

    #[derive(Debug)]
    struct Caches;

    impl ClusterView for Caches {
        fn namespace_labels(&self, _: &str) -> Option<std::collections::BTreeMap<String, String>> {
            None
        }

        fn caches(&self) -> Vec<CacheState> {
            vec![
                CacheState {
                    name: "namespaces",
                    synced: true,
                    objects: 12,
                    watch_errors: 0,
                    first_synced_after: Some(Duration::from_millis(1500)),
                },
                CacheState {
                    name: "resourceclaims",
                    synced: false,
                    objects: 0,
                    watch_errors: 4,
                    first_synced_after: None,
                },
            ]
        }
    }

    #[test]
    fn cache_state_by_cache() {
        let mut m = Metrics::new(Target::default());
        m.watch_caches(Arc::new(Caches));
        let text = m.render();
        for line in [
            "draguard_cache_synced{cache=\"namespaces\"} 1",
            "draguard_cache_synced{cache=\"resourceclaims\"} 0",
            "draguard_cache_objects{cache=\"namespaces\"} 12",
            "draguard_cache_objects{cache=\"resourceclaims\"} 0",
            "draguard_cache_watch_errors_total{cache=\"namespaces\"} 0",
            "draguard_cache_watch_errors_total{cache=\"resourceclaims\"} 4",
            "draguard_cache_first_sync_seconds{cache=\"namespaces\"} 1.5",
        ] {
            has(&text, line);
        }
        assert!(
            !text.contains("draguard_cache_first_sync_seconds{cache=\"resourceclaims\"}"),
            "no time before the first sync: {text}"
        );
    }

    /// Every metric name the alerts and the dashboard in deploy/monitoring
    /// query is one this server exports, so a rename breaks this test
    /// rather than silently emptying a panel or an alert. Linux only: the
    /// `process_*` metrics are.
    #[cfg(target_os = "linux")]
    #[test]
    fn deploy_monitoring_queries_exported_metrics() {
        let mut m = Metrics::new(Target::default());
        m.watch_policies(PolicyStore::default());
        m.watch_caches(Arc::new(Caches));
        m.watch_capacity(Capacity {
            connections: Box::new(|| (1, 896)),
            reviews: Box::new(|| (0, 256)),
            review_memory: Box::new(|| (0, 96 << 20)),
        });
        m.answered("validate", "Pod", true, Duration::from_millis(1));
        let text = m.render();
        let exported: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split(['{', ' ']).next())
            .collect();
        // The certificate gauge needs a served certificate; e2e_metrics
        // checks its line.
        let exported_elsewhere = ["draguard_certificate_expiry_timestamp_seconds"];

        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/monitoring");
        let mut used = std::collections::BTreeSet::new();
        for file in ["prometheusrule.yaml", "dashboard.json"] {
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            for (start, _) in text.match_indices(['d', 'p']) {
                let rest = &text[start..];
                if !(rest.starts_with("draguard_") || rest.starts_with("process_")) {
                    continue;
                }
                let before = text[..start].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                    continue;
                }
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                used.insert(rest[..end].to_owned());
            }
        }
        assert!(used.len() >= 15, "found only {used:?}");
        let unknown: Vec<&String> = used
            .iter()
            .filter(|n| !exported.contains(n.as_str()) && !exported_elsewhere.contains(&n.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "deploy/monitoring queries {unknown:?}; exported: {exported:?}"
        );
    }

    #[test]
    fn capacity_gauges_read_the_server_at_scrape_time() {
        let open = Arc::new(std::sync::atomic::AtomicUsize::new(3));
        let mut m = Metrics::new(Target::default());
        let reading = open.clone();
        m.watch_capacity(Capacity {
            connections: Box::new(move || (reading.load(std::sync::atomic::Ordering::Relaxed), 896)),
            reviews: Box::new(|| (1, 256)),
            review_memory: Box::new(|| (40 << 10, 96 << 20)),
        });
        let text = m.render();
        for line in [
            "draguard_connections_open 3",
            "draguard_connections_max 896",
            "draguard_reviews_in_flight 1",
            "draguard_reviews_max 256",
            "draguard_review_memory_bytes 40960",
            "draguard_review_memory_budget_bytes 100663296",
        ] {
            has(&text, line);
        }
        open.store(7, std::sync::atomic::Ordering::Relaxed);
        has(&m.render(), "draguard_connections_open 7");
    }

    #[test]
    fn library_warnings_are_exported_by_target() {
        let text = Metrics::new(Target::default()).render();
        for target in crate::log_quiet::QUIETED {
            let prefix = format!("draguard_library_warnings_total{{target=\"{target}\"}} ");
            assert!(
                text.lines().any(|l| l.starts_with(&prefix)),
                "missing {prefix:?} in\n{text}"
            );
        }
    }

    #[test]
    fn taint_rule_reach_by_rule_and_kind_and_gone_with_the_rule() {
        use crate::server::taint_rule_reach::{Reach, TaintRuleReach};
        let reach = TaintRuleReach::default();
        let mut m = Metrics::new(Target::default());
        m.watch_taint_rule_reach(reach.clone());
        lacks(&m.render(), "draguard_taint_rule_reach");
        reach.set("gpu-maintenance", Reach { pods: 5, namespaces: 2 });
        reach.set("drain", Reach { pods: 0, namespaces: 0 });
        let text = m.render();
        for line in [
            "# TYPE draguard_taint_rule_reach gauge",
            "draguard_taint_rule_reach{rule=\"drain\",kind=\"pods\"} 0",
            "draguard_taint_rule_reach{rule=\"gpu-maintenance\",kind=\"pods\"} 5",
            "draguard_taint_rule_reach{rule=\"gpu-maintenance\",kind=\"namespaces\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        reach.retain(|rule| rule != "gpu-maintenance");
        let text = m.render();
        assert!(
            !text.contains("gpu-maintenance"),
            "a deleted rule has no series:\n{text}"
        );
        assert!(text.contains("rule=\"drain\""));
    }

    #[test]
    fn no_cluster_no_cache_series() {
        let mut m = Metrics::new(Target::default());
        m.watch_caches(Arc::new(crate::view::NoCluster));
        let text = m.render();
        lacks(&text, "draguard_cache_");
    }
}
