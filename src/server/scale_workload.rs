//! The workload behind a `scale` write, read from the apiserver for the
//! review to judge its template (the judgement is the core's:
//! draguard_core::review::scale).
//!
//! A `kubectl scale` sends the apiserver an `autoscaling/v1` Scale, which
//! carries the replicas and nothing of the template. draguard keeps no
//! workload cache: one GET per scale-up, so memory does not grow with the
//! number of workloads in the cluster. The webhook entry sends only
//! users' scale-ups (deploy/base/webhooks.yaml `scale.validate.draguard.dev`),
//! which are rare, so the GETs are too.
//!
//! Every way the GET can go wrong ends the same: the scale is admitted
//! without a warning. It is bounded three ways:
//! - in time: [`FETCH_TIMEOUT`] at most, and never more than half of what
//!   is left of the apiserver's deadline for the review (the entry's 1 s);
//! - in memory: the fetched object is charged against the review memory
//!   budget as it arrives ([`workload_charge`]), and the fetch stops when
//!   the budget has no room;
//! - in size: [`MAX_WORKLOAD_BYTES`], above anything etcd stores.
//!
//! A failure logs at debug, and at warn at most once a minute, with the
//! count since the last line; `draguard_scale_workload_fetches_total{result}`
//! counts every outcome.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::AsyncBufReadExt as _;
use serde_json::Value;

use super::review_memory::Shape;
use crate::log_field::clip;
use crate::review::scale::ScaleTarget;

/// The longest one GET may take. Under the entry's 1 s timeout with room
/// for the review itself and the answer: a GET from the apiserver's watch
/// cache takes milliseconds.
pub const FETCH_TIMEOUT: Duration = Duration::from_millis(500);

/// The largest workload read. etcd refuses objects over its request limit
/// (`--max-request-bytes`, 1.5 MiB by default), and the apiserver's own
/// limit on a request body is 3 MiB (kubernetes v1.36 staging/src/k8s.io/
/// apiserver/pkg/server/config.go, `MaxRequestBodyBytes`); no stored
/// workload is larger.
pub const MAX_WORKLOAD_BYTES: usize = 3 << 20;

/// A workload judged for a scale holds up to three times what a review of
/// its text is charged: its tree, its typed view with the template kept
/// whole, and the violations and warning of every toleration. Measured by
/// tests/review_memory.rs (a template of 200k refused tolerations: peak
/// 489 MB, charged 547 MB).
const COPIES_WHILE_JUDGED: usize = 3;

/// What a review is charged for the workload it read, on top of its own
/// charge ([`COPIES_WHILE_JUDGED`] times a review of the workload's text).
/// A stored workload is at most 1.5 MiB (etcd's default), charged up to
/// hundreds of MB when it is 125k tiny tolerations: over the 96 MiB budget, so
/// such a scale is admitted without a warning (`review_memory`).
pub fn workload_charge(workload: &[u8]) -> usize {
    let mut shape = Shape::default();
    shape.feed(workload);
    shape.charge().saturating_mul(COPIES_WHILE_JUDGED)
}

/// How a fetch ended, the `result` label of its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FetchOutcome {
    Fetched,
    /// No answer within the timeout.
    Timeout,
    /// 403: the ClusterRole lacks `get` on the workload kind.
    Forbidden,
    /// 404: deleted since the write was sent.
    NotFound,
    /// The review memory budget had no room for the object.
    ReviewMemory,
    /// Over [`MAX_WORKLOAD_BYTES`], or not JSON.
    Unreadable,
    /// Any other error from the apiserver or the connection.
    Failed,
}

impl FetchOutcome {
    pub(crate) const ALL: [FetchOutcome; 7] = [
        FetchOutcome::Fetched,
        FetchOutcome::Timeout,
        FetchOutcome::Forbidden,
        FetchOutcome::NotFound,
        FetchOutcome::ReviewMemory,
        FetchOutcome::Unreadable,
        FetchOutcome::Failed,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            FetchOutcome::Fetched => "fetched",
            FetchOutcome::Timeout => "timeout",
            FetchOutcome::Forbidden => "forbidden",
            FetchOutcome::NotFound => "not_found",
            FetchOutcome::ReviewMemory => "review_memory",
            FetchOutcome::Unreadable => "unreadable",
            FetchOutcome::Failed => "failed",
        }
    }
}

/// Reads workloads for scale reviews through the server's kube client.
/// Cheap to clone.
#[derive(Clone)]
pub struct ScaleWorkloads {
    client: kube::Client,
    throttle: Arc<Throttle>,
}

impl ScaleWorkloads {
    pub fn new(client: kube::Client) -> Self {
        ScaleWorkloads {
            client,
            throttle: Arc::default(),
        }
    }

    /// The workload `target` names, as stored. `left`: what is left of the
    /// review's deadline; the GET takes half of it at most. `charge` is
    /// told the bytes the object will cost as it arrives, and answers
    /// whether the review memory budget has room for them.
    pub(crate) async fn fetch(
        &self,
        target: &ScaleTarget<'_>,
        left: Duration,
        charge: impl FnMut(usize) -> bool,
    ) -> Result<Value, FetchOutcome> {
        let within = FETCH_TIMEOUT.min(left / 2);
        let outcome = match tokio::time::timeout(within, self.get(target, charge)).await {
            Ok(result) => result,
            Err(_) => Err((FetchOutcome::Timeout, format!("no answer within {within:?}"))),
        };
        outcome.map_err(|(outcome, error)| {
            self.throttle.note(target, outcome, &error);
            outcome
        })
    }

    async fn get(
        &self,
        target: &ScaleTarget<'_>,
        mut charge: impl FnMut(usize) -> bool,
    ) -> Result<Value, (FetchOutcome, String)> {
        let row = target.row;
        // Every part is a registry constant or a name `scale_target`
        // checked to be a DNS name: nothing in the request can steer it.
        let path = format!(
            "/apis/{}/{}/namespaces/{}/{}/{}",
            row.group, target.version, target.namespace, row.plural, target.name
        );
        let request = axum::http::Request::get(path)
            .header(axum::http::header::ACCEPT, "application/json")
            .body(Vec::new())
            .map_err(|e| (FetchOutcome::Failed, e.to_string()))?;
        let body = self.client.request_stream(request).await.map_err(|e| match e {
            kube::Error::Api(status) if status.code == 403 => (FetchOutcome::Forbidden, status.message),
            kube::Error::Api(status) if status.code == 404 => (FetchOutcome::NotFound, status.message),
            other => (FetchOutcome::Failed, other.to_string()),
        })?;
        futures::pin_mut!(body);
        let mut text = Vec::new();
        let mut shape = Shape::default();
        loop {
            let chunk = body
                .fill_buf()
                .await
                .map_err(|e| (FetchOutcome::Failed, e.to_string()))?;
            if chunk.is_empty() {
                break;
            }
            let n = chunk.len();
            if text.len().saturating_add(n) > MAX_WORKLOAD_BYTES {
                return Err((
                    FetchOutcome::Unreadable,
                    format!("the workload is over {MAX_WORKLOAD_BYTES} bytes"),
                ));
            }
            shape.feed(chunk);
            if !charge(shape.charge().saturating_mul(COPIES_WHILE_JUDGED)) {
                return Err((
                    FetchOutcome::ReviewMemory,
                    "the review memory budget has no room for the workload".into(),
                ));
            }
            text.extend_from_slice(chunk);
            futures::AsyncBufRead::consume(body.as_mut(), n);
        }
        serde_json::from_slice(&text).map_err(|e| (FetchOutcome::Unreadable, e.to_string()))
    }
}

/// A failed fetch logs at debug; at warn at most one line a minute names
/// the last failure and how many there were since the last line, so an
/// apiserver that is away costs a counter per scale, not a line.
#[derive(Default)]
struct Throttle {
    last: Mutex<Option<Instant>>,
    since_last: AtomicU64,
}

const FAILURE_LINE_EVERY: Duration = Duration::from_secs(60);

impl Throttle {
    fn note(&self, target: &ScaleTarget<'_>, outcome: FetchOutcome, error: &str) {
        let (kind, result) = (target.row.kind, outcome.label());
        // Request-derived: recorded as strings, cut to a few KiB.
        let object = clip(&format!("{}/{}", target.namespace, target.name)).into_owned();
        let error = clip(error);
        tracing::debug!(kind, object, result, error = &*error, "cannot read the scaled workload");
        let failed = self.since_last.fetch_add(1, Ordering::Relaxed) + 1;
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.is_some_and(|at| at.elapsed() < FAILURE_LINE_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        self.since_last.store(0, Ordering::Relaxed);
        drop(last);
        tracing::warn!(
            kind,
            object,
            result,
            error = &*error,
            failed,
            "cannot read the workload of a scale: admitted without the warning of the pods it would stamp \
             (see draguard_scale_workload_fetches_total)"
        );
    }
}
