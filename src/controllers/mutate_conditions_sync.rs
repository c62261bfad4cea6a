//! Keeps [`super::mutate_conditions`]' condition in draguard's defaulting
//! webhook entry, and the selector entries of
//! [`super::mutate_selector_entries`] beside it, in step with the policies
//! in force: at start, within a
//! second of a policy reload, and within the watch's latency when someone
//! edits it away (a `kubectl apply` of the manifests, a GitOps sync, a hand
//! edit). Runs beside the caBundle controller (`webhook_certs`, under
//! `--manage-webhook-certs`), with the same rights: `get`, `list`, `watch`
//! and `patch` on the MutatingWebhookConfiguration named draguard
//! (deploy/base/rbac-webhook-certs.yaml).
//!
//! Failing is safe: until the condition is written, or while RBAC refuses
//! the patch, the manifest's own conditions stay, and every claim,
//! template and Pod CREATE is sent to `/mutate` as before (two calls where
//! one would do, never a default lost). The condition and the selector
//! entries change in one patch, so the narrower condition never stands
//! without the entries that send what it leaves out. A condition written for older
//! policies can be narrower than the new ones for at most the time this
//! takes to notice the reload, as a reload itself takes effect only when
//! each replica polls its folder.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client};
use serde_json::Value;

use super::mutate_conditions::CONDITION_NAME;
use super::mutate_selector_entries::{Managed, managed, plan};
use super::routing_widened::RoutingWidened;
use super::webhook_certs::{CertSettings, backoff};
use crate::cluster::error_log::{ERROR_LINE_EVERY, ErrorLineAction, ErrorLog};
use crate::cluster::watch_error;
use crate::policy::PolicySet;
use crate::policy_files::reload::PolicyStore;

/// How often the policies in force are compared with those last written:
/// a pointer comparison, then a rebuild of the condition only on a reload.
const POLICY_EVERY: Duration = Duration::from_secs(1);
/// The configuration is read again this often even when the watch says
/// nothing (a watch that is down or refused).
const RECHECK_EVERY: Duration = Duration::from_secs(60);
/// How many times one pass re-reads the configuration after a `test` op
/// failed (someone changed it between our read and our patch).
const RACE_RETRIES: usize = 3;
/// An edit that undoes ours this soon after we wrote is taken for another
/// writer that wants something else: above all a replica of an older
/// version during a rolling upgrade, which computes another condition
/// (and knows no selector entries). The first is repaired at once; each
/// further one in a row waits twice as long (1 s up to [`RECHECK_EVERY`]),
/// so two versions trade a few patches until the rollout ends, instead of
/// one per watch round trip.
const CONTENDED_WITHIN: Duration = Duration::from_secs(10);

/// Why the condition could not be written; retried with a backoff.
#[derive(Debug, thiserror::Error)]
pub enum ConditionError {
    #[error("cannot {what} MutatingWebhookConfiguration {name}: {source}")]
    Api {
        what: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("MutatingWebhookConfiguration {0} changed under us {RACE_RETRIES} times in a row")]
    Contended(String),
}

impl ConditionError {
    /// RBAC refused: this will not fix itself.
    fn is_denied(&self) -> bool {
        matches!(self, ConditionError::Api { source: kube::Error::Api(s), .. } if s.code == 403)
    }
}

/// The controller: one per replica.
pub struct MutateConditions {
    api: Api<MutatingWebhookConfiguration>,
    settings: CertSettings,
    policies: PolicyStore,
    toleration_restriction: bool,
    routing: RoutingWidened,
}

impl MutateConditions {
    pub fn new(client: Client, settings: CertSettings, policies: PolicyStore, toleration_restriction: bool) -> Self {
        MutateConditions {
            api: Api::all(client),
            settings,
            policies,
            toleration_restriction,
            routing: RoutingWidened::default(),
        }
    }

    /// Where the routing of the policies in force is wider than their
    /// selectors: for `/metrics`.
    pub fn routing(&self) -> RoutingWidened {
        self.routing.clone()
    }

    /// The managed state for `set`; its widenings are recorded (and
    /// logged when they changed).
    fn desired(&self, set: &PolicySet) -> Managed {
        let desired = managed(set, self.toleration_restriction);
        self.routing.set(&desired.widenings);
        desired
    }

    fn plan(&self, webhooks: &[MutatingWebhook], desired: &Managed) -> Vec<Value> {
        plan(webhooks, &self.settings.namespace, &self.settings.service, desired)
    }

    /// Reads the configuration and patches `desired` into it where it
    /// differs. `Ok(true)` when something was written.
    pub async fn ensure(&self, desired: &Managed) -> Result<bool, ConditionError> {
        let name = &self.settings.webhook_config;
        let failed = |what| {
            move |source| ConditionError::Api {
                what,
                name: name.clone(),
                source,
            }
        };
        for _ in 0..RACE_RETRIES {
            let Some(config) = self.api.get_opt(name).await.map_err(failed("read"))? else {
                tracing::debug!(name, "no MutatingWebhookConfiguration to keep a matchCondition in");
                return Ok(false);
            };
            let ops = self.plan(config.webhooks.as_deref().unwrap_or_default(), desired);
            if ops.is_empty() {
                return Ok(false);
            }
            let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops))
                .map_err(|e| failed("build a patch for")(kube::Error::SerdeError(e)))?;
            match self
                .api
                .patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
                .await
            {
                Ok(_) => {
                    tracing::info!(
                        name,
                        condition = CONDITION_NAME,
                        expression = desired.split.expression.as_str(),
                        selector_entries = desired.selectors.len(),
                        "matchCondition and selector entries of the defaulting webhook set for the policies in force"
                    );
                    return Ok(true);
                }
                // A `test` op failed: read it again.
                Err(kube::Error::Api(status)) if status.is_invalid() => {
                    tracing::debug!(
                        name,
                        "webhook configuration changed while we patched it; reading it again"
                    );
                }
                Err(e) => return Err(failed("patch")(e)),
            }
        }
        Err(ConditionError::Contended(name.clone()))
    }

    /// Runs forever: writes the condition at start, after every policy
    /// reload, when the watch sees it edited away, and at least every
    /// [`RECHECK_EVERY`]; after a failure, again after a backoff (1 s
    /// doubling to a minute). Failures are logged at most once a minute.
    pub async fn run(self) {
        let changes = entries(self.api.clone(), &self.settings.webhook_config);
        futures::pin_mut!(changes);
        let mut watching = true;
        let mut in_force = self.policies.current();
        let mut desired = self.desired(&in_force);
        let mut due = true;
        let mut next_recheck = Instant::now() + RECHECK_EVERY;
        let mut retry_at: Option<Instant> = None;
        let mut failures: u32 = 0;
        let mut log = ErrorLog::new(ERROR_LINE_EVERY);
        let mut last_written: Option<Instant> = None;
        let mut contended: u32 = 0;
        let mut contention_log = ErrorLog::new(ERROR_LINE_EVERY);
        let mut tick = tokio::time::interval(POLICY_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let now = self.policies.current();
                    if !Arc::ptr_eq(&now, &in_force) {
                        in_force = now;
                        let next = self.desired(&in_force);
                        due |= next != desired;
                        desired = next;
                    }
                    due |= Instant::now() >= next_recheck;
                }
                seen = changes.next(), if watching => match seen {
                    Some(Seen { webhooks, listed }) => {
                        if !self.plan(&webhooks, &desired).is_empty() {
                            due = true;
                            let now = Instant::now();
                            let undone = undoes_ours(listed, last_written, now);
                            contended = if undone { contended.saturating_add(1) } else { 0 };
                            // The first undo in a row is repaired at once
                            // (a person's edit); from the second on, later.
                            if contended >= 2 {
                                let delay = backoff(contended - 1, RECHECK_EVERY);
                                retry_at = Some(now + delay);
                                if let ErrorLineAction::Log { suppressed } = contention_log.failed(now) {
                                    tracing::warn!(
                                        name = %self.settings.webhook_config,
                                        condition = CONDITION_NAME,
                                        suppressed,
                                        retry_in = ?delay,
                                        "another writer keeps undoing the defaulting webhook's matchCondition or selector entries (a replica of another draguard version during a rollout?); putting them back more slowly (at most one line a minute)"
                                    );
                                }
                            } else {
                                tracing::info!(
                                    name = %self.settings.webhook_config,
                                    condition = CONDITION_NAME,
                                    "the defaulting webhook's matchCondition or selector entries changed under us; putting them back"
                                );
                                // Someone else's edit is repaired now, not
                                // after a backoff left from an earlier failure.
                                retry_at = None;
                            }
                        }
                    }
                    // The watcher never ends; were it to, the periodic
                    // check is left.
                    None => watching = false,
                },
            }
            if !due || retry_at.is_some_and(|at| Instant::now() < at) {
                continue;
            }
            match self.ensure(&desired).await {
                Ok(wrote) => {
                    if wrote {
                        last_written = Some(Instant::now());
                    }
                    if let Some(errors) = log.succeeded() {
                        tracing::info!(failures = errors, "defaulting webhook matchCondition written again");
                    }
                    due = false;
                    failures = 0;
                    retry_at = None;
                    next_recheck = Instant::now() + RECHECK_EVERY;
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    let delay = backoff(failures, RECHECK_EVERY);
                    retry_at = Some(Instant::now() + delay);
                    if let ErrorLineAction::Log { suppressed } = log.failed(Instant::now()) {
                        if e.is_denied() {
                            tracing::error!(
                                error = %e,
                                suppressed,
                                "cannot keep the defaulting webhook's matchCondition; this will not fix itself: grant get and patch on mutatingwebhookconfigurations named draguard (deploy/base/rbac-webhook-certs.yaml). Every claim and Pod CREATE is still sent to /mutate (at most one line a minute)"
                            );
                        } else {
                            tracing::warn!(
                                error = %e,
                                suppressed,
                                retry_in = ?delay,
                                "cannot keep the defaulting webhook's matchCondition; every claim and Pod CREATE is still sent to /mutate meanwhile (at most one line a minute)"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The configuration's entries each time the watch sees it (narrowed by
/// `metadata.name`, which is what lets RBAC's `resourceNames` apply to a
/// watch: see `webhook_config_watch`). A deletion says nothing: there is
/// no entry to keep a condition in.
/// Whether a state the watch saw that differs from ours is another writer
/// undoing our last write: a change event soon after it. A listed state may
/// predate that write (the watch's first list can answer after the start's
/// patch), so it is checked, never taken for an undo.
fn undoes_ours(listed: bool, last_written: Option<Instant>, now: Instant) -> bool {
    !listed && last_written.is_some_and(|at| now.duration_since(at) < CONTENDED_WITHIN)
}

/// One state of the configuration the watch saw.
struct Seen {
    webhooks: Vec<MutatingWebhook>,
    /// From a list (the first, or a re-list), not a change event.
    listed: bool,
}

fn entries(api: Api<MutatingWebhookConfiguration>, name: &str) -> impl Stream<Item = Seen> + Send + 'static {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut log = ErrorLog::new(ERROR_LINE_EVERY);
    watcher(api, config).default_backoff().filter_map(move |event| {
        let seen = match event {
            Ok(watcher::Event::Apply(c)) => Some(Seen {
                webhooks: c.webhooks.unwrap_or_default(),
                listed: false,
            }),
            Ok(watcher::Event::InitApply(c)) => Some(Seen {
                webhooks: c.webhooks.unwrap_or_default(),
                listed: true,
            }),
            Ok(_) => None,
            Err(e) => {
                if let ErrorLineAction::Log { suppressed } = log.failed_with(Instant::now(), &watch_error::key(&e)) {
                    tracing::warn!(
                        error = %e,
                        suppressed,
                        "defaulting webhook watch failed; its matchCondition is still checked every minute (at most one line a minute per distinct error)"
                    );
                }
                None
            }
        };
        std::future::ready(seen)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a change event within [`CONTENDED_WITHIN`] of our write counts
    /// as an undo: never a listed state, never one long after.
    #[test]
    fn a_listed_state_is_never_an_undo() {
        let written = Instant::now();
        let soon = written + Duration::from_millis(50);
        assert!(undoes_ours(false, Some(written), soon));
        assert!(
            !undoes_ours(true, Some(written), soon),
            "the first list, answered after our patch"
        );
        assert!(!undoes_ours(false, None, soon), "nothing written yet");
        assert!(
            !undoes_ours(false, Some(written), written + CONTENDED_WITHIN),
            "long after"
        );
    }
}
