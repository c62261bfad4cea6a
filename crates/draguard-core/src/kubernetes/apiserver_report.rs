//! What a running apiserver says about itself, against the rules draguard
//! judges with: its `/version` and the feature gates of its `/metrics`.
//!
//! The gates come from the gauge `kubernetes_feature_enabled{name, stage}`
//! (k8s.io/component-base metrics/prometheus/feature/metrics.go: namespace
//! `kubernetes`, name `feature_enabled`, labels `name` and `stage`, 1 when
//! the gate is on), in the Prometheus text format. Only that one metric is
//! read, so a small line parser does instead of a general one: an
//! apiserver's `/metrics` runs to megabytes, and [`FeatureScan`] keeps only
//! the lines of that metric, each bounded, as they stream past.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use super::feature_gates::unknown_dra_gates;
use super::{KubeVersion, Target};

/// The metric's name in the text format.
pub const FEATURE_METRIC: &str = "kubernetes_feature_enabled";

/// A line longer than this is not one of the metric's (real ones are under
/// 100 bytes); it is skipped, not buffered.
const MAX_LINE: usize = 4096;
/// Gates kept at most (an apiserver has a few hundred).
const MAX_GATES: usize = 4096;

/// `kubernetes_feature_enabled{name="DRADeviceTaints",stage="BETA"} 1` →
/// `("DRADeviceTaints", true)`. `None` for any other line, and for one of
/// the metric whose labels or value do not parse.
pub fn parse_feature_line(line: &str) -> Option<(String, bool)> {
    let rest = line.trim_end().strip_prefix(FEATURE_METRIC)?.strip_prefix('{')?;
    let (labels, rest) = parse_labels(rest)?;
    // The value, then an optional timestamp.
    let value: f64 = rest.split_whitespace().next()?.parse().ok()?;
    let name = labels.into_iter().find(|(key, _)| key == "name")?.1;
    Some((name, value != 0.0))
}

/// The label pairs up to the closing `}`, and what follows it. Values are
/// quoted, with `\\`, `\"` and `\n` escaped (the text format's only escapes).
fn parse_labels(mut rest: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let (key, after) = rest.split_once('=')?;
        let mut chars = after.trim_start().strip_prefix('"')?.char_indices();
        let mut value = String::new();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        let after = after.trim_start();
        // `after` starts with the opening quote: the value ends at 1 + end.
        rest = &after[end + 2..];
        labels.push((key.trim().to_owned(), value));
        rest = rest.trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// Reads the metric's lines out of a `/metrics` body fed in pieces of any
/// size, holding at most one line of it at a time.
#[derive(Debug, Default)]
pub struct FeatureScan {
    /// The current line so far, while it may still be one of the metric's.
    line: Vec<u8>,
    /// The current line is not one of the metric's: skip to its end.
    skipping: bool,
    gates: Vec<(String, bool)>,
}

impl FeatureScan {
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let (piece, ended) = match bytes.iter().position(|b| *b == b'\n') {
                Some(end) => (&bytes[..end], Some(end + 1)),
                None => (bytes, None),
            };
            if !self.skipping {
                self.line.extend_from_slice(piece);
                let prefix = FEATURE_METRIC.as_bytes();
                let shared = self.line.len().min(prefix.len());
                if self.line[..shared] != prefix[..shared] || self.line.len() > MAX_LINE {
                    self.line.clear();
                    self.skipping = true;
                }
            }
            match ended {
                Some(next) => {
                    self.end_line();
                    bytes = &bytes[next..];
                }
                None => break,
            }
        }
    }

    fn end_line(&mut self) {
        if !self.skipping && self.gates.len() < MAX_GATES {
            let line = String::from_utf8_lossy(&self.line);
            if let Some(gate) = parse_feature_line(&line) {
                self.gates.push(gate);
            }
        }
        self.line.clear();
        self.skipping = false;
    }

    /// The gates read, in the body's order.
    pub fn finish(mut self) -> Vec<(String, bool)> {
        self.end_line();
        self.gates
    }
}

/// How the rules in force differ from what the apiserver runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Differences {
    /// `None`: the version was not read.
    pub version: Option<bool>,
    /// `Gate (draguard: on, apiserver: off)`; `None`: the gates were not read.
    pub gates: Option<Vec<String>>,
    /// The DRA gates the apiserver reports that draguard's table does not
    /// have for the version in force (`feature_gates::unknown_dra_gates`):
    /// what they change is not mirrored. Empty when the gates were not read.
    pub unknown_gates: Vec<String>,
}

impl Differences {
    /// Compares `target` with the apiserver's `gitVersion` and its gates,
    /// each when read.
    pub fn of(target: &Target, git_version: Option<&str>, gates: Option<&[(String, bool)]>) -> Self {
        Differences {
            version: git_version.map(|git| version_differs(target.version, git)),
            gates: gates.map(|reported| target.gates.differences(target.version, reported)),
            unknown_gates: gates.map_or_else(Vec::new, |reported| unknown_dra_gates(target.version, reported)),
        }
    }

    pub fn any(&self) -> bool {
        self.version == Some(true) || self.gates.as_ref().is_some_and(|g| !g.is_empty())
    }
}

/// Whether rules for `version` are not the apiserver's own (`gitVersion`
/// of another minor, or one draguard cannot read).
fn version_differs(version: KubeVersion, git_version: &str) -> bool {
    !KubeVersion::for_apiserver(git_version).is_ok_and(|nearest| nearest.exact && nearest.version == version)
}

/// The differences as gauges, for `/metrics`: per aspect, 1 when the rules
/// in force differ from the apiserver's, 0 when they agree, and no series
/// while unknown (not read, or not allowed).
#[derive(Debug, Clone)]
pub struct Mismatch(Arc<[AtomicI64; 2]>);

const UNKNOWN: i64 = -1;

impl Default for Mismatch {
    fn default() -> Self {
        Mismatch(Arc::new([AtomicI64::new(UNKNOWN), AtomicI64::new(UNKNOWN)]))
    }
}

impl Mismatch {
    /// The aspects, as the metric's `aspect` label names them.
    pub const ASPECTS: [&'static str; 2] = ["version", "feature_gates"];

    pub fn set(&self, differences: &Differences) {
        let gauge = |known: Option<bool>| known.map_or(UNKNOWN, i64::from);
        self.0[0].store(gauge(differences.version), Ordering::Relaxed);
        let gates = differences.gates.as_ref().map(|g| !g.is_empty());
        self.0[1].store(gauge(gates), Ordering::Relaxed);
    }

    /// The rules in force are the apiserver's own: its version and its
    /// feature gates were both read, and both agree. While either is
    /// unknown (not read yet, or `/metrics` not allowed) this is false:
    /// what it guards (draguard's webhook routing) then sends everything.
    pub fn rules_match(&self) -> bool {
        self.0.iter().all(|aspect| aspect.load(Ordering::Relaxed) == 0)
    }

    /// `(aspect, 0 or 1)` for each aspect known.
    pub fn known(&self) -> Vec<(&'static str, i64)> {
        Mismatch::ASPECTS
            .into_iter()
            .zip(self.0.iter())
            .map(|(aspect, value)| (aspect, value.load(Ordering::Relaxed)))
            .filter(|(_, value)| *value != UNKNOWN)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An excerpt of a kube-apiserver v1.36 `/metrics`, as served: other
    /// metrics around the one read, its HELP and TYPE lines, and label
    /// values with escapes in another metric.
    const METRICS: &str = r#"# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="namespaces",scope="cluster",subresource="",verb="LIST",version="v1"} 12
# HELP kubernetes_feature_enabled [BETA] This metric records the data about the stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="DRAAdminAccess",stage=""} 1
kubernetes_feature_enabled{name="DRAConsumableCapacity",stage="BETA"} 1
kubernetes_feature_enabled{name="DRADeviceTaintRules",stage="ALPHA"} 1
kubernetes_feature_enabled{name="DRADeviceTaints",stage="BETA"} 1
kubernetes_feature_enabled{name="DRAPartitionableDevices",stage="BETA"} 0
kubernetes_feature_enabled{name="InPlacePodVerticalScaling",stage="BETA"} 1
# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single healthcheck.
# TYPE kubernetes_healthcheck gauge
kubernetes_healthcheck{name="etcd",type="readyz"} 1
kubernetes_feature_enabled_total_not_this{name="X"} 1
workqueue_depth{name="a \"quoted\" \\ name\nx"} 0
"#;

    fn expected() -> Vec<(String, bool)> {
        [
            ("DRAAdminAccess", true),
            ("DRAConsumableCapacity", true),
            ("DRADeviceTaintRules", true),
            ("DRADeviceTaints", true),
            ("DRAPartitionableDevices", false),
            ("InPlacePodVerticalScaling", true),
        ]
        .into_iter()
        .map(|(n, on)| (n.to_owned(), on))
        .collect()
    }

    #[test]
    fn the_feature_gauge_is_read_from_a_metrics_page_in_pieces_of_any_size() {
        for size in [1, 7, 64, 4096] {
            let mut scan = FeatureScan::default();
            for piece in METRICS.as_bytes().chunks(size) {
                scan.feed(piece);
            }
            assert_eq!(scan.finish(), expected(), "pieces of {size}");
        }
    }

    #[test]
    fn lines_of_the_metric() {
        assert_eq!(
            parse_feature_line(r#"kubernetes_feature_enabled{name="DRADeviceTaints",stage="BETA"} 1"#),
            Some(("DRADeviceTaints".into(), true))
        );
        // Label order, spaces, a timestamp, a float value.
        assert_eq!(
            parse_feature_line(r#"kubernetes_feature_enabled{ stage="ALPHA" , name="A\"b" } 0.0 1700000000000"#),
            Some(("A\"b".into(), false))
        );
        for bad in [
            r#"kubernetes_feature_enabled{stage="BETA"} 1"#,
            r#"kubernetes_feature_enabled{name="A"} one"#,
            r#"kubernetes_feature_enabled{name="A} 1"#,
            r#"kubernetes_feature_enabled{name=A} 1"#,
            r#"kubernetes_feature_enabled_x{name="A"} 1"#,
            "kubernetes_feature_enabled 1",
            "",
        ] {
            assert_eq!(parse_feature_line(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_overlong_line_is_skipped_not_held() {
        let mut scan = FeatureScan::default();
        scan.feed(format!("{FEATURE_METRIC}{{name=\"").as_bytes());
        scan.feed(&vec![b'A'; 2 * MAX_LINE]);
        assert!(scan.line.is_empty(), "not buffered past the limit");
        scan.feed(b"\"} 1\nkubernetes_feature_enabled{name=\"B\"} 1");
        assert_eq!(scan.finish(), [("B".to_owned(), true)]);
    }

    #[test]
    fn differences_name_the_version_and_each_gate() {
        let target = Target::new(KubeVersion::V1_37);
        let reported = expected();
        let found = Differences::of(&target, Some("v1.36.2"), Some(&reported));
        assert_eq!(found.version, Some(true));
        assert_eq!(
            found.gates,
            Some(vec![
                "DRAPartitionableDevices (draguard: on, apiserver: off)".to_owned()
            ])
        );
        assert!(found.any());
        let same = Differences::of(&target, Some("v1.37.0-eks-1"), Some(&[]));
        assert_eq!(
            same,
            Differences {
                version: Some(false),
                gates: Some(vec![]),
                unknown_gates: vec![],
            }
        );
        assert!(!same.any());
        assert_eq!(Differences::of(&target, Some("v1.38.0"), None).version, Some(true));
        assert_eq!(Differences::of(&target, Some("garbage"), None).version, Some(true));
        let mismatch = Mismatch::default();
        assert_eq!(mismatch.known(), []);
        assert!(!mismatch.rules_match(), "unknown");
        mismatch.set(&found);
        assert_eq!(mismatch.known(), [("version", 1), ("feature_gates", 1)]);
        assert!(!mismatch.rules_match());
        mismatch.set(&Differences::of(&target, Some("v1.37.1"), None));
        assert_eq!(mismatch.known(), [("version", 0)]);
        assert!(!mismatch.rules_match(), "the gates unknown");
        mismatch.set(&same);
        assert!(mismatch.rules_match());
    }
}
