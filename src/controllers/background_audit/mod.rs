//! `serve --audit-interval`: the audit of what already runs, in the
//! background. Every interval, and promptly after a policy change, the
//! replica that holds the `draguard-audit` Lease reads the cluster
//! ([`round`]), judges it as `draguard audit --cluster` would, writes one
//! PolicyReport per namespace with findings and a ClusterPolicyReport
//! ([`reports`]), deletes its reports of namespaces whose findings are
//! gone, exports the counts ([`metrics`]) and logs one line. Other
//! replicas only keep trying for the Lease (`controllers::lease`).
//!
//! Nothing here is on a review's path: the webhook answers whether or not
//! the audit runs, and the audit writes only its own reports and Lease.

pub mod metrics;
pub mod reports;
pub mod round;

use std::sync::Arc;
use std::time::Duration;

use crate::controllers::lease::{Leader, LeaseTimes};
use metrics::AuditStatus;
use reports::ReportWriter;
use round::{Judge, Round, RoundOutcome, RoundSettings};

use crate::policy::toleration_restriction::TolerationRestrictionConfig;
use crate::policy_files::reload::PolicyStore;

/// The Lease's name, in draguard's namespace.
pub const LEASE_NAME: &str = "draguard-audit";

/// How a policy change waits for the edits that come with it (a
/// ConfigMap update touches every file at once, a `kubectl apply -f dir`
/// one after another) before the round it starts.
const CHANGE_SETTLE: Duration = Duration::from_secs(2);

pub struct AuditSettings {
    /// Between the ends of two rounds.
    pub every: Duration,
    /// Where the Lease is (draguard's namespace).
    pub namespace: String,
    pub identity: String,
    pub lease: LeaseTimes,
    pub round: RoundSettings,
}

pub struct BackgroundAudit {
    client: kube::Client,
    judge: Judge,
    writer: ReportWriter,
    leader: Leader,
    settings: AuditSettings,
    status: AuditStatus,
}

impl BackgroundAudit {
    pub fn new(
        client: kube::Client,
        policies: PolicyStore,
        toleration_restriction: Option<Arc<TolerationRestrictionConfig>>,
        target: crate::kubernetes::Target,
        settings: AuditSettings,
    ) -> Result<Self, String> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "draguard-audit".to_owned())
            .build()
            .map_err(|e| format!("cannot start the audit thread: {e}"))?;
        let leader = Leader::new(
            client.clone(),
            &settings.namespace,
            LEASE_NAME,
            settings.identity.clone(),
            settings.lease,
        );
        Ok(BackgroundAudit {
            writer: ReportWriter::new(client.clone()),
            client,
            judge: Judge {
                policies,
                toleration_restriction,
                target,
                pool: Arc::new(pool),
            },
            leader,
            settings,
            status: AuditStatus::default(),
        })
    }

    /// What `/metrics` exports of the audit.
    pub fn status(&self) -> AuditStatus {
        self.status.clone()
    }

    /// Runs until the task is dropped.
    pub async fn run(mut self) {
        let mut changes = self.judge.policies.changes();
        tracing::info!(
            every = ?self.settings.every,
            lease = %format!("{}/{LEASE_NAME}", self.settings.namespace),
            identity = %self.leader.identity(),
            "background audit on; the replica holding the Lease audits"
        );
        let mut due = tokio::time::Instant::now();
        // A change runs a round at once; its count is reported by the first
        // round that succeeds after it (a failed one retries at the
        // interval, not at once).
        let mut run_now = false;
        let mut unreported_change = false;
        loop {
            // Logged at most once a minute: a missing Role must not fill the log.
            let holds = self.leader.try_hold_logged().await;
            self.status.set_leader(holds);
            if holds && (run_now || tokio::time::Instant::now() >= due) {
                run_now = false;
                let done = self.round_logged(unreported_change).await.is_some();
                unreported_change &= !done;
                due = tokio::time::Instant::now() + self.settings.every;
            }
            tokio::select! {
                () = tokio::time::sleep(self.leader.times().renew_every) => {}
                changed = changes.changed() => match changed {
                    Ok(()) => {
                        tokio::time::sleep(CHANGE_SETTLE).await;
                        changes.borrow_and_update();
                        run_now = true;
                        unreported_change = true;
                    }
                    // The store is gone: no more changes to wait for.
                    Err(_) => tokio::time::sleep(self.leader.times().renew_every).await,
                },
            }
        }
    }

    /// One round, logged and counted; `after_change`: the first round
    /// after a policy change, which says what the change did.
    pub async fn round_logged(&mut self, after_change: bool) -> Option<RoundOutcome> {
        let before = self.status.last_denied();
        let started = std::time::Instant::now();
        let round = Round {
            client: &self.client,
            judge: &self.judge,
            writer: &self.writer,
            leader: &mut self.leader,
            settings: self.settings.round,
        };
        match round.run().await {
            Ok(outcome) => {
                log_round(
                    &outcome,
                    started.elapsed().as_secs_f64(),
                    after_change.then_some(before),
                );
                self.status.round_done(outcome.counts.clone(), after_change);
                Some(outcome)
            }
            Err(e) => {
                tracing::warn!(error = %e, "audit round stopped; the next one runs at the interval");
                self.status.round_failed();
                self.status.set_leader(self.leader.holds());
                None
            }
        }
    }
}

/// The round's one line, and after a policy change the line that says what
/// it did: `after_change` holds the denied count of the round before it
/// (`None` inside when there was none).
fn log_round(outcome: &RoundOutcome, seconds: f64, after_change: Option<Option<u64>>) {
    let c = &outcome.counts;
    let [fail, warn, error] = ["fail", "warn", "error"].map(|r| {
        c.findings
            .iter()
            .filter(|((_, result), _)| *result == r)
            .map(|(_, n)| n)
            .sum::<u64>()
    });
    tracing::info!(
        objects = c.objects,
        denied = c.denied,
        fail,
        warn,
        error,
        namespaces = outcome.namespaces,
        reports_written = outcome.reports_written,
        reports_deleted = outcome.reports_deleted,
        results_omitted = c.omitted,
        parts_not_judged = c.parts_not_judged,
        reports_not_written = outcome.not_written.as_deref().unwrap_or(""),
        seconds,
        "audit round: {} of {} existing objects would be denied now",
        c.denied,
        c.objects
    );
    match after_change {
        None => {}
        Some(Some(before)) => tracing::info!(
            denied = c.denied,
            before,
            "policy change: {} existing objects now denied ({before} before)",
            c.denied
        ),
        Some(None) => tracing::info!(
            denied = c.denied,
            "policy change: {} existing objects now denied (no round before it)",
            c.denied
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::log_capture::capture;

    fn outcome(denied: u64) -> RoundOutcome {
        let mut outcome = RoundOutcome::default();
        outcome.counts.objects = 40;
        outcome.counts.denied = denied;
        outcome.counts.add_findings("gpu-nodes", "fail", denied);
        outcome.counts.add_findings("draguard", "warn", 1);
        outcome.namespaces = 3;
        outcome.reports_written = 2;
        outcome
    }

    #[test]
    fn a_round_is_one_line_and_a_policy_change_says_what_it_did() {
        let logged = capture(false, false, || log_round(&outcome(7), 1.5, None));
        let lines: Vec<&str> = logged.lines().collect();
        assert_eq!(lines.len(), 1, "{logged}");
        assert!(
            lines[0].contains("audit round: 7 of 40 existing objects would be denied now objects=40 denied=7 fail=7 warn=1 error=0 namespaces=3 reports_written=2 reports_deleted=0"),
            "{logged}"
        );
        let logged = capture(false, false, || log_round(&outcome(7), 1.5, Some(Some(2))));
        assert!(
            logged.lines().nth(1).is_some_and(
                |l| l.contains("policy change: 7 existing objects now denied (2 before) denied=7 before=2")
            ),
            "{logged}"
        );
        let logged = capture(false, false, || log_round(&outcome(0), 1.5, Some(None)));
        assert!(
            logged.contains("policy change: 0 existing objects now denied (no round before it)"),
            "{logged}"
        );
    }
}
