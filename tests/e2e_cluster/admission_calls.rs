//! Calls per write, as draguard counts them: the difference of
//! `draguard_admission_requests_total{endpoint,kind,allowed}` (docs/src/
//! reference/metrics.md) scraped before and after one write, by endpoint, for the
//! kinds that write concerns (so that a controller's retries of another
//! kind, such as a ReplicaSet's refused Pods, are not counted).

use std::collections::BTreeMap;

use crate::draguard::Serve;

const SERIES: &str = "draguard_admission_requests_total{";

/// One scrape: the count of every series, by (endpoint, kind).
#[derive(Clone, Default)]
pub struct Scrape(BTreeMap<(String, String), u64>);

/// The reviews one write cost, by endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Calls {
    pub mutate: u64,
    pub validate: u64,
}

impl Calls {
    pub fn total(self) -> u64 {
        self.mutate + self.validate
    }
}

impl std::fmt::Display for Calls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (mutate {}, validate {})",
            self.total(),
            self.mutate,
            self.validate
        )
    }
}

impl Scrape {
    pub fn of(serve: &Serve) -> Scrape {
        let text = serve.metrics();
        // The admission counter has no series before the first call, and
        // a write draguard's routing does not send is no call: only an
        // answer without draguard's metrics at all is broken.
        assert!(
            text.contains("# HELP draguard_"),
            "serve's /metrics on 127.0.0.1:{} answered no draguard metric:\n{text}",
            serve.metrics_port
        );
        Scrape::parse(&text)
    }

    fn parse(text: &str) -> Scrape {
        let mut counts = BTreeMap::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix(SERIES) else {
                continue;
            };
            let Some((labels, value)) = rest.split_once("} ") else {
                continue;
            };
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                    .and_then(|v| v.strip_suffix('"'))
                    .unwrap_or_default()
                    .to_owned()
            };
            let value: f64 = value.trim().parse().unwrap_or_default();
            *counts.entry((label("endpoint"), label("kind"))).or_default() += value as u64;
        }
        Scrape(counts)
    }

    /// The calls made since `before`, counting only the kinds `kinds`
    /// (draguard's `kind` label: `Pod`, `ResourceClaim`, `Scale`, ...).
    pub fn since(&self, before: &Scrape, kinds: &[&str]) -> Calls {
        let count = |endpoint: &str| -> u64 {
            self.0
                .iter()
                .filter(|((e, k), _)| e == endpoint && kinds.contains(&k.as_str()))
                .map(|(key, after)| after.saturating_sub(before.0.get(key).copied().unwrap_or_default()))
                .sum()
        };
        Calls {
            mutate: count("mutate"),
            validate: count("validate"),
        }
    }

    /// Every (endpoint, kind) counted since `before`, as
    /// `endpoint/kind=N ...`: for a failure message.
    pub fn since_all(&self, before: &Scrape) -> String {
        self.0
            .iter()
            .map(|(key, after)| {
                (
                    key,
                    after.saturating_sub(before.0.get(key).copied().unwrap_or_default()),
                )
            })
            .filter(|(_, n)| *n > 0)
            .map(|((e, k), n)| format!("{e}/{k}={n}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A gauge or counter without labels from a scrape of `/metrics`.
pub fn plain_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} "))?.trim().parse().ok())
}
