//! Keeps what draguard manages in one of its webhook configurations (the
//! matchConditions that route writes, and the selector entries beside the
//! defaulting entry) in step with the policies in force and the other
//! inputs the routing depends on: at start, within a second of a policy
//! reload or an input's change, and within the watch's latency when
//! someone edits it away (a `kubectl apply` of the manifests, a GitOps
//! sync, a hand edit). Runs beside the caBundle controller (`webhook_certs`,
//! under `--manage-webhook-certs`), with the same rights: `get`, `list`,
//! `watch` and `patch` on the configurations named draguard
//! (deploy/base/rbac-webhook-certs.yaml).
//!
//! What is managed, and how it fails, is each [`Routing`]'s:
//! `mutate_conditions_sync` for the defaulting entry,
//! `validate_conditions_sync` for the validating entries. Failing is safe
//! for both: until the managed state is written, or while RBAC refuses the
//! patch, the manifest's own conditions stay, and the writes they send
//! are sent as before (more calls than needed, never a verdict lost).

use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt as _};
use kube::api::{Patch, PatchParams};
use kube::core::ClusterResourceScope;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::webhook_certs::backoff;
use crate::cluster::error_log::{ERROR_LINE_EVERY, ErrorLineAction, ErrorLog};
use crate::cluster::watch_error;
use crate::policy::PolicySet;
use crate::policy_files::reload::PolicyStore;

/// How often the inputs are compared with those last written: a pointer
/// comparison of the policies and [`Routing::inputs`], then a rebuild of
/// the desired state only when one changed.
const INPUTS_EVERY: Duration = Duration::from_secs(1);
/// The configuration is read again this often even when the watch says
/// nothing (a watch that is down or refused).
const RECHECK_EVERY: Duration = Duration::from_secs(60);
/// How many times one pass re-reads the configuration after a `test` op
/// failed (someone changed it between our read and our patch).
const RACE_RETRIES: usize = 3;
/// An edit that undoes ours this soon after we wrote is taken for another
/// writer that wants something else: above all a replica of an older
/// version during a rolling upgrade, which computes another state. The
/// first is repaired at once; each further one in a row waits twice as
/// long (1 s up to [`RECHECK_EVERY`]), so two versions trade a few patches
/// until the rollout ends, instead of one per watch round trip.
const CONTENDED_WITHIN: Duration = Duration::from_secs(10);

/// What one controller manages in one configuration.
pub trait Routing: Send + Sync + 'static {
    /// The configuration's type (both are cluster-scoped).
    type Config: Resource<DynamicType = (), Scope = ClusterResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static;
    /// The managed state, as computed from the inputs.
    type Desired: PartialEq + Send + Sync;

    /// What the logs call the managed state.
    const WHAT: &'static str;
    /// What still happens while it cannot be written.
    const MEANWHILE: &'static str;

    /// The managed state for the policies in force and the other inputs.
    fn desired(&self, set: &PolicySet) -> Self::Desired;
    /// A fingerprint of the inputs other than the policies: when it
    /// changes, the desired state is computed again.
    fn inputs(&self) -> u64 {
        0
    }
    /// JSON patch operations that put `desired` into `config`; empty when
    /// it holds it already.
    fn plan(&self, config: &Self::Config, desired: &Self::Desired) -> Vec<Value>;
    /// Logs what was written.
    fn written(&self, name: &str, desired: &Self::Desired);
}

/// Why the managed state could not be written; retried with a backoff.
#[derive(Debug, thiserror::Error)]
pub enum ConditionError {
    #[error("cannot {what} {kind} {name}: {source}")]
    Api {
        what: &'static str,
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("{kind} {name} changed under us {RACE_RETRIES} times in a row")]
    Contended { kind: &'static str, name: String },
}

impl ConditionError {
    /// RBAC refused: this will not fix itself.
    fn is_denied(&self) -> bool {
        matches!(self, ConditionError::Api { source: kube::Error::Api(s), .. } if s.code == 403)
    }
}

/// The controller: one per replica and configuration.
pub struct RoutingSync<R: Routing> {
    api: Api<R::Config>,
    name: String,
    policies: PolicyStore,
    routing: R,
}

impl<R: Routing> RoutingSync<R> {
    /// Keeps `routing`'s state in the configuration named `name`.
    pub fn with_routing(client: Client, name: &str, policies: PolicyStore, routing: R) -> Self {
        RoutingSync {
            api: Api::all(client),
            name: name.to_owned(),
            policies,
            routing,
        }
    }

    pub fn routing_ref(&self) -> &R {
        &self.routing
    }

    fn kind() -> &'static str {
        // Both configurations' kinds are static strings in k8s-openapi.
        match R::Config::kind(&()) {
            std::borrow::Cow::Borrowed(kind) => kind,
            std::borrow::Cow::Owned(_) => "webhook configuration",
        }
    }

    /// Reads the configuration and patches `desired` into it where it
    /// differs. `Ok(true)` when something was written.
    pub async fn ensure(&self, desired: &R::Desired) -> Result<bool, ConditionError> {
        let name = &self.name;
        let kind = Self::kind();
        let failed = |what| {
            move |source| ConditionError::Api {
                what,
                kind,
                name: name.clone(),
                source,
            }
        };
        for _ in 0..RACE_RETRIES {
            let Some(config) = self.api.get_opt(name).await.map_err(failed("read"))? else {
                tracing::debug!(name, kind, "no configuration to keep the routing in");
                return Ok(false);
            };
            let ops = self.routing.plan(&config, desired);
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
                    self.routing.written(name, desired);
                    return Ok(true);
                }
                // A `test` op failed: read it again.
                Err(kube::Error::Api(status)) if status.is_invalid() => {
                    tracing::debug!(
                        name,
                        kind,
                        "webhook configuration changed while we patched it; reading it again"
                    );
                }
                Err(e) => return Err(failed("patch")(e)),
            }
        }
        Err(ConditionError::Contended {
            kind,
            name: name.clone(),
        })
    }

    /// Runs forever: writes the state at start, after every policy reload
    /// or input change, when the watch sees it edited away, and at least
    /// every [`RECHECK_EVERY`]; after a failure, again after a backoff (1 s
    /// doubling to a minute). Failures are logged at most once a minute.
    pub async fn run(self) {
        let kind = Self::kind();
        let changes = configs::<R::Config>(self.api.clone(), &self.name);
        futures::pin_mut!(changes);
        let mut watching = true;
        let mut in_force = self.policies.current();
        let mut inputs = self.routing.inputs();
        let mut desired = self.routing.desired(&in_force);
        let mut due = true;
        let mut next_recheck = Instant::now() + RECHECK_EVERY;
        let mut retry_at: Option<Instant> = None;
        let mut failures: u32 = 0;
        let mut log = ErrorLog::new(ERROR_LINE_EVERY);
        let mut last_written: Option<Instant> = None;
        let mut contended: u32 = 0;
        let mut contention_log = ErrorLog::new(ERROR_LINE_EVERY);
        let mut tick = tokio::time::interval(INPUTS_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let now = self.policies.current();
                    let now_inputs = self.routing.inputs();
                    if !Arc::ptr_eq(&now, &in_force) || now_inputs != inputs {
                        in_force = now;
                        inputs = now_inputs;
                        let next = self.routing.desired(&in_force);
                        due |= next != desired;
                        desired = next;
                    }
                    due |= Instant::now() >= next_recheck;
                }
                seen = changes.next(), if watching => match seen {
                    Some(Seen { config, listed }) => {
                        if !self.routing.plan(&config, &desired).is_empty() {
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
                                        name = %self.name,
                                        kind,
                                        suppressed,
                                        retry_in = ?delay,
                                        "another writer keeps undoing {} (a replica of another draguard version during a rollout?); putting it back more slowly (at most one line a minute)",
                                        R::WHAT
                                    );
                                }
                            } else {
                                tracing::info!(name = %self.name, kind, "{} changed under us; putting it back", R::WHAT);
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
                        tracing::info!(failures = errors, kind, "{} written again", R::WHAT);
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
                                "cannot keep {}; this will not fix itself: grant get, list, watch and patch on {} named {} (deploy/base/rbac-webhook-certs.yaml). {} (at most one line a minute)",
                                R::WHAT,
                                kind,
                                self.name,
                                R::MEANWHILE
                            );
                        } else {
                            tracing::warn!(
                                error = %e,
                                suppressed,
                                retry_in = ?delay,
                                "cannot keep {}; {} meanwhile (at most one line a minute)",
                                R::WHAT,
                                R::MEANWHILE
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Whether a state the watch saw that differs from ours is another writer
/// undoing our last write: a change event soon after it. A listed state may
/// predate that write (the watch's first list can answer after the start's
/// patch), so it is checked, never taken for an undo.
fn undoes_ours(listed: bool, last_written: Option<Instant>, now: Instant) -> bool {
    !listed && last_written.is_some_and(|at| now.duration_since(at) < CONTENDED_WITHIN)
}

/// One state of the configuration the watch saw.
struct Seen<C> {
    config: C,
    /// From a list (the first, or a re-list), not a change event.
    listed: bool,
}

/// The configuration each time the watch sees it (narrowed by
/// `metadata.name`, which is what lets RBAC's `resourceNames` apply to a
/// watch: see `webhook_config_watch`). A deletion says nothing: there is
/// nothing to keep the routing in.
fn configs<C>(api: Api<C>, name: &str) -> impl Stream<Item = Seen<C>> + Send + 'static
where
    C: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut log = ErrorLog::new(ERROR_LINE_EVERY);
    watcher(api, config).default_backoff().filter_map(move |event| {
        let seen = match event {
            Ok(watcher::Event::Apply(config)) => Some(Seen { config, listed: false }),
            Ok(watcher::Event::InitApply(config)) => Some(Seen { config, listed: true }),
            Ok(_) => None,
            Err(e) => {
                if let ErrorLineAction::Log { suppressed } = log.failed_with(Instant::now(), &watch_error::key(&e)) {
                    tracing::warn!(
                        error = %e,
                        suppressed,
                        "webhook configuration watch failed; the routing draguard keeps there is still checked every minute (at most one line a minute per distinct error)"
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
