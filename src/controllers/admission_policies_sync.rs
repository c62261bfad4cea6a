//! `serve --manage-admission-policies`: applies what `draguard policy
//! compile` makes of the policies in force (server-side apply, field
//! manager `draguard`), deletes the ones of ours no policy makes any more,
//! and tells the validating entries' routing which compiled policies the
//! apiserver enforces, so that it stops sending what they judge.
//! `serve --compiled-policies-applied` does only the last part, for
//! objects a GitOps tool applies from `compile`'s output.
//!
//! A compiled policy leaves the webhook's routing only once its policy and
//! binding have been stored as desired for [`SETTLE`]: the apiserver
//! enforces an admission policy once its own informer has it, which takes
//! a moment after the write. Anything else (a refused write, a stale
//! object, a deleted binding) keeps it in the webhook: never narrower
//! than what runs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use super::admission_policies::{
    KINDS, MANAGED_BY, MANAGED_BY_LABEL, ObjectKey, enforced_policies, in_force, key, stale, stamped,
};
use crate::cluster::error_log::{ERROR_LINE_EVERY, ErrorLineAction, ErrorLog};
use crate::policy::PolicySet;
use crate::policy_files::reload::PolicyStore;

/// How long a compiled policy must have been stored as desired before the
/// webhook stops routing what it judges.
pub const SETTLE: Duration = Duration::from_secs(5);
/// How often the policies in force are compared with the last pass's.
const POLICY_EVERY: Duration = Duration::from_secs(1);
/// The objects are read (and, when managed, applied) again this often.
const RECHECK_EVERY: Duration = Duration::from_secs(30);
/// The field manager of serve's applies.
const FIELD_MANAGER: &str = "draguard";

/// The compiler: the admission policies and bindings for a policy set.
pub type Compile = Arc<dyn Fn(&PolicySet) -> Vec<Value> + Send + Sync>;

/// The names of the compiled ValidatingAdmissionPolicies the apiserver
/// enforces, with a generation that changes with them.
#[derive(Clone, Default)]
pub struct EnforcedPolicies(Arc<Mutex<(u64, BTreeSet<String>)>>);

impl EnforcedPolicies {
    pub fn generation(&self) -> u64 {
        self.0.lock().map_or(0, |g| g.0)
    }

    pub fn names(&self) -> BTreeSet<String> {
        self.0.lock().map(|g| g.1.clone()).unwrap_or_default()
    }

    fn set(&self, names: BTreeSet<String>) -> bool {
        let Ok(mut g) = self.0.lock() else {
            return false;
        };
        if g.1 == names {
            return false;
        }
        g.0 = g.0.wrapping_add(1);
        g.1 = names;
        true
    }
}

/// Whether serve applies the objects or only reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// `--manage-admission-policies`.
    Managed,
    /// `--compiled-policies-applied`: someone else applies them.
    External,
}

pub struct AdmissionPolicies {
    client: Client,
    policies: PolicyStore,
    compile: Compile,
    ownership: Ownership,
    enforced: EnforcedPolicies,
}

fn api_for(client: &Client, kind: &str) -> Option<Api<DynamicObject>> {
    let (_, plural) = KINDS.iter().find(|(k, _)| *k == kind)?;
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    Some(Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    ))
}

impl AdmissionPolicies {
    pub fn new(client: Client, policies: PolicyStore, compile: Compile, ownership: Ownership) -> Self {
        AdmissionPolicies {
            client,
            policies,
            compile,
            ownership,
            enforced: EnforcedPolicies::default(),
        }
    }

    /// What the validating entries' routing reads.
    pub fn enforced(&self) -> EnforcedPolicies {
        self.enforced.clone()
    }

    /// Applies `desired` and deletes our stale objects.
    async fn apply(&self, desired: &[Value]) -> Result<(), kube::Error> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for object in desired {
            let Some((kind, name)) = key(object) else { continue };
            let Some(api) = api_for(&self.client, &kind) else {
                continue;
            };
            api.patch(&name, &params, &Patch::Apply(object)).await?;
        }
        let owned = ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
        for (kind, _) in KINDS {
            let Some(api) = api_for(&self.client, kind) else {
                continue;
            };
            let listed: Vec<Value> = match api.list(&owned).await {
                Ok(list) => list
                    .items
                    .into_iter()
                    .filter_map(|o| serde_json::to_value(o).ok())
                    .map(|mut o| {
                        o["kind"] = Value::from(kind);
                        o
                    })
                    .collect(),
                // MutatingAdmissionPolicy is not served by every version.
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(e),
            };
            for (kind, name) in stale(desired, &listed) {
                tracing::info!(
                    kind,
                    name,
                    "deleting an admission policy no policy in force compiles to"
                );
                api.delete(&name, &DeleteParams::default()).await?;
            }
        }
        Ok(())
    }

    /// What the cluster holds under the desired objects' names.
    async fn found(&self, desired: &[Value]) -> Result<Vec<Value>, kube::Error> {
        let mut found = Vec::new();
        for object in desired {
            let Some((kind, name)) = key(object) else { continue };
            let Some(api) = api_for(&self.client, &kind) else {
                continue;
            };
            if let Some(stored) = api.get_opt(&name).await? {
                let mut stored = serde_json::to_value(stored).unwrap_or_default();
                stored["kind"] = Value::from(kind);
                found.push(stored);
            }
        }
        Ok(found)
    }

    /// Runs forever.
    pub async fn run(self) {
        let mut in_force_policies = self.policies.current();
        let mut desired = stamped((self.compile)(&in_force_policies));
        let mut next_pass = Instant::now();
        let mut stored_since: BTreeMap<ObjectKey, Instant> = BTreeMap::new();
        let mut log = ErrorLog::new(ERROR_LINE_EVERY);
        let mut tick = tokio::time::interval(POLICY_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now_policies = self.policies.current();
            if !Arc::ptr_eq(&now_policies, &in_force_policies) {
                in_force_policies = now_policies;
                desired = stamped((self.compile)(&in_force_policies));
                next_pass = Instant::now();
            }
            let settling =
                !stored_since.is_empty() && stored_since.values().any(|at| at.elapsed() < SETTLE + POLICY_EVERY);
            if Instant::now() < next_pass && !settling {
                continue;
            }
            let pass = async {
                if self.ownership == Ownership::Managed {
                    self.apply(&desired).await?;
                }
                self.found(&desired).await
            };
            match pass.await {
                Ok(found) => {
                    if let Some(errors) = log.succeeded() {
                        tracing::info!(failures = errors, "compiled admission policies read again");
                    }
                    let stored = in_force(&desired, &found);
                    stored_since.retain(|k, _| stored.contains(k));
                    for k in &stored {
                        stored_since.entry(k.clone()).or_insert_with(Instant::now);
                    }
                    let settled: BTreeSet<ObjectKey> = stored_since
                        .iter()
                        .filter(|(_, at)| at.elapsed() >= SETTLE)
                        .map(|(k, _)| k.clone())
                        .collect();
                    let names = enforced_policies(&desired, &settled);
                    if self.enforced.set(names.clone()) {
                        tracing::info!(
                            enforced = ?names,
                            "compiled admission policies the apiserver enforces; the validating entries no longer send what they judge"
                        );
                    }
                    next_pass = Instant::now() + RECHECK_EVERY;
                }
                Err(e) => {
                    // Whatever failed, nothing counts as enforced that was
                    // not read just now.
                    stored_since.clear();
                    if self.enforced.set(BTreeSet::new()) {
                        tracing::warn!(
                            "compiled admission policies unknown: the validating entries send everything they judge again"
                        );
                    }
                    if let ErrorLineAction::Log { suppressed } = log.failed(Instant::now()) {
                        tracing::warn!(
                            error = %e,
                            suppressed,
                            "cannot keep the compiled admission policies; the webhook judges what they would (at most one line a minute)"
                        );
                    }
                    next_pass = Instant::now() + Duration::from_secs(5);
                }
            }
        }
    }
}
