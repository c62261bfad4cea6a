//! Asks the running apiserver what it runs: `GET /version`, and the feature
//! gates of `GET /metrics` (`kubernetes_feature_enabled`). `serve` asks at
//! start, to pick and check its rules, then every [`RECHECK_EVERY`], and
//! every [`RETRY_EVERY`] while the apiserver does not answer, so that it
//! asks again soon after a reconnect (an apiserver upgraded under draguard
//! restarts), warning when the rules in force and the apiserver part ways.
//!
//! `/metrics` needs RBAC (`nonResourceURLs: ["/metrics"]`, verb `get`;
//! deploy/base/rbac.yaml grants it). When refused (403), that is said once
//! and `/metrics` is not asked again: the answer will not change until the
//! ClusterRole does, and a restart picks that up.

use std::time::Duration;

use futures::AsyncBufReadExt as _;

use crate::kubernetes::Target;
use crate::kubernetes::apiserver_report::{Differences, FeatureScan, Mismatch};

/// How long one read (of `/version` or of all of `/metrics`) may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the apiserver is asked again after start.
pub const RECHECK_EVERY: Duration = Duration::from_secs(600);
/// How often the apiserver is asked while `/version` fails.
pub const RETRY_EVERY: Duration = Duration::from_secs(30);
/// `/metrics` bytes read at most: a big apiserver serves tens of MB; the
/// gauge is near the end (metrics are sorted by name), so the cap is wide,
/// and it costs time only, never memory ([`FeatureScan`] keeps one line).
const MAX_METRICS_BYTES: u64 = 256 << 20;

/// What one round of asking found; `None` where it found nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiserverFacts {
    /// `/version`'s `gitVersion` (`v1.36.2`).
    pub git_version: Option<String>,
    /// `kubernetes_feature_enabled`: each gate's name and whether it is on.
    pub gates: Option<Vec<(String, bool)>>,
}

/// Asks the apiserver, remembering across rounds what it refused.
pub struct Apiserver {
    client: kube::Client,
    /// `/metrics` answered 403: not asked again.
    metrics_forbidden: bool,
    /// A `/version` failure was logged at WARN; later ones at DEBUG.
    version_warned: bool,
}

impl Apiserver {
    pub fn new(client: kube::Client) -> Self {
        Apiserver {
            client,
            metrics_forbidden: false,
            version_warned: false,
        }
    }

    /// `/version`, then `/metrics` unless it was refused before or
    /// `/version` failed (the apiserver is away: no second wait).
    pub async fn read(&mut self) -> ApiserverFacts {
        let git_version = match tokio::time::timeout(READ_TIMEOUT, self.client.apiserver_version()).await {
            Ok(Ok(info)) => Some(info.git_version),
            Ok(Err(e)) => {
                self.version_failed(&e.to_string());
                None
            }
            Err(_) => {
                self.version_failed(&format!("no answer within {READ_TIMEOUT:?}"));
                None
            }
        };
        let gates = if self.metrics_forbidden || git_version.is_none() {
            None
        } else {
            match tokio::time::timeout(READ_TIMEOUT, read_gates(&self.client)).await {
                Ok(Ok(gates)) => Some(gates),
                Ok(Err(kube::Error::Api(status))) if status.code == 403 => {
                    self.metrics_forbidden = true;
                    tracing::warn!(
                        error = %status.message,
                        "the apiserver does not let draguard read /metrics (RBAC: nonResourceURLs [\"/metrics\"], verb get): its feature gates are assumed, not read; not asking again"
                    );
                    None
                }
                Ok(Err(e)) => {
                    tracing::info!(error = %e, "cannot read the apiserver's feature gates from /metrics; assuming them");
                    None
                }
                Err(_) => {
                    tracing::info!(timeout = ?READ_TIMEOUT, "the apiserver's /metrics did not answer in time; assuming its feature gates");
                    None
                }
            }
        };
        ApiserverFacts { git_version, gates }
    }

    fn version_failed(&mut self, error: &str) {
        if std::mem::replace(&mut self.version_warned, true) {
            tracing::debug!(error, "cannot read the apiserver's /version");
        } else {
            tracing::warn!(error, "cannot read the apiserver's /version");
        }
    }
}

/// The gauge's lines of `/metrics`, read as they stream.
async fn read_gates(client: &kube::Client) -> Result<Vec<(String, bool)>, kube::Error> {
    let request = axum::http::Request::get("/metrics")
        .header(axum::http::header::ACCEPT, "text/plain")
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    let body = client.request_stream(request).await?;
    futures::pin_mut!(body);
    let mut scan = FeatureScan::default();
    let mut read: u64 = 0;
    while read < MAX_METRICS_BYTES {
        let chunk = body.fill_buf().await.map_err(kube::Error::ReadEvents)?;
        if chunk.is_empty() {
            break;
        }
        scan.feed(chunk);
        let n = chunk.len();
        read += n as u64;
        futures::AsyncBufRead::consume(body.as_mut(), n);
    }
    Ok(scan.finish())
}

/// Compares the rules in force with what the apiserver reported, sets the
/// gauges, and logs: one WARN line naming both sides when they differ
/// (once per distinct difference: `last` holds the one logged), an INFO
/// line when they agree again.
pub fn compare(target: &Target, report: &ApiserverFacts, mismatch: &Mismatch, last: &mut Option<Differences>) {
    if report.git_version.is_none() && report.gates.is_none() {
        // Nothing read (the apiserver is away): what was known stands.
        return;
    }
    let found = Differences::of(target, report.git_version.as_deref(), report.gates.as_deref());
    if last.as_ref() == Some(&found) {
        mismatch.set(&found);
        return;
    }
    if !found.unknown_gates.is_empty() && last.as_ref().is_none_or(|l| l.unknown_gates != found.unknown_gates) {
        tracing::warn!(
            kubernetes = %target.version,
            apiserver = report.git_version.as_deref().unwrap_or("unknown"),
            unknown_gates = found.unknown_gates.join(", "),
            "the apiserver reports DRA feature gates draguard does not know: what they change is not judged"
        );
    }
    if found.any() {
        let gates = found.gates.as_ref().map(|g| g.join(", ")).unwrap_or_default();
        tracing::warn!(
            kubernetes = %target.version,
            apiserver = report.git_version.as_deref().unwrap_or("unknown"),
            version_differs = found.version == Some(true),
            feature_gates_differ = gates,
            "draguard judges with rules that differ from what the apiserver runs: set --kubernetes-version and --feature-gates to match it, or leave them out to follow it"
        );
    } else if last.as_ref().is_some_and(Differences::any) {
        tracing::info!(kubernetes = %target.version, apiserver = report.git_version.as_deref().unwrap_or("unknown"), "draguard's rules agree with the apiserver again");
    }
    // After the line: whoever sees the gauge finds the line written.
    mismatch.set(&found);
    *last = Some(found);
}

/// When to ask again: `every`, or `retry` while the apiserver's `/version`
/// does not answer.
#[derive(Debug, Clone, Copy)]
pub struct Recheck {
    pub every: Duration,
    pub retry: Duration,
}

impl Default for Recheck {
    fn default() -> Self {
        Recheck {
            every: RECHECK_EVERY,
            retry: RETRY_EVERY,
        }
    }
}

/// Compares `first` (the round `serve` made at start; `None`: ask now),
/// then asks again and compares, forever.
pub async fn follow(
    mut apiserver: Apiserver,
    target: Target,
    mismatch: Mismatch,
    first: Option<ApiserverFacts>,
    when: Recheck,
) {
    let mut report = match first {
        Some(report) => report,
        None => apiserver.read().await,
    };
    let mut last = None;
    loop {
        compare(&target, &report, &mismatch, &mut last);
        let answered = report.git_version.is_some();
        tokio::time::sleep(if answered { when.every } else { when.retry }).await;
        report = apiserver.read().await;
    }
}
