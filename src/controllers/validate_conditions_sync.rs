//! Keeps [`super::validate_conditions`]' condition in draguard's
//! validating entries, and [`super::claims_selector`]'s namespaceSelector
//! on its claims entry, in step with the policies in force, the compiled
//! admission policies the apiserver enforces, and whether the rules in
//! force are the apiserver's own (`draguard_apiserver_mismatch`); the
//! loop, its watch and its retries are `routing_sync`'s.
//!
//! Failing is safe: until the condition is written, or while RBAC refuses
//! the patch, the manifest's own conditions stay, and every write they
//! send is judged as before. When the rules in force stop being the
//! apiserver's (an upgraded apiserver, a pinned `--kubernetes-version`),
//! the condition becomes `true` within a second of draguard learning it,
//! and one WARN line says why every write is sent again. A condition
//! written for older policies can be narrower than the new ones for at
//! most the time this takes to notice the reload.

use std::sync::atomic::{AtomicU8, Ordering};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::Client;
use serde_json::Value;

use super::admission_policies_sync::EnforcedPolicies;
use super::claims_selector::{self, Narrowing};
use super::routing_sync::{Routing, RoutingSync};
use super::validate_conditions::{CONDITION_NAME, Inputs, condition_with, plan};
use super::webhook_certs::CertSettings;
use crate::kubernetes::apiserver_report::Mismatch;
use crate::policy::compile::driver_configs;
use crate::policy::enforce::TolerationTarget;
use crate::policy::{PolicySet, TolerationPolicy};
use crate::policy_files::reload::PolicyStore;
use k8s_openapi::api::admissionregistration::v1::MatchCondition;

/// The names of the admission policies compiled from a policy's rules for
/// one kind of toleration: the routing leaves those rules out only when
/// every one of them is enforced.
pub type CompiledName = fn(&TolerationPolicy, TolerationTarget) -> Vec<String>;

/// The validating entries' routing.
pub struct ValidateRouting {
    settings: CertSettings,
    toleration_restriction: bool,
    mismatch: Mismatch,
    /// The compiled admission policies the apiserver enforces, when serve
    /// keeps or reads them (`admission_policies_sync`).
    compiled: Option<(EnforcedPolicies, CompiledName)>,
    /// What the last desired state was computed with (0: rules differ or
    /// unknown, 1: they match, 2: nothing computed yet), so that a change
    /// is logged once.
    said: AtomicU8,
}

/// What the validating entries are given.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidateDesired {
    /// The managed condition of every judged entry.
    pub condition: MatchCondition,
    /// What the claims entry's namespaceSelector adds to its validating
    /// entry's.
    pub claims: Narrowing,
}

impl Routing for ValidateRouting {
    type Config = ValidatingWebhookConfiguration;
    type Desired = ValidateDesired;

    const WHAT: &'static str =
        "the validating webhook entries' matchCondition and the claims entry's namespaceSelector";
    const MEANWHILE: &'static str = "the writes the manifest's conditions and selectors send still reach /validate";

    fn desired(&self, set: &PolicySet) -> Self::Desired {
        let rules_match_apiserver = self.mismatch.rules_match();
        let now = u8::from(rules_match_apiserver);
        if self.said.swap(now, Ordering::Relaxed) != now {
            if rules_match_apiserver {
                tracing::info!(
                    condition = CONDITION_NAME,
                    "the rules in force are the apiserver's own: /validate is sent only the writes draguard can judge beyond them"
                );
            } else {
                tracing::warn!(
                    condition = CONDITION_NAME,
                    "the rules in force differ from the apiserver's, or its version or feature gates are unknown (see draguard_apiserver_mismatch): every write the validating entries match is sent to /validate"
                );
            }
        }
        let inputs = Inputs {
            toleration_restriction: self.toleration_restriction,
            rules_match_apiserver,
        };
        match &self.compiled {
            None => ValidateDesired {
                condition: condition_with(set, inputs, &|_, _| false),
                claims: None,
            },
            Some((enforced, name)) => {
                let names = enforced.names();
                let compiled = |p: &TolerationPolicy, target| name(p, target).iter().all(|n| names.contains(n));
                // A driver left to the webhook leaves its configs there.
                let drivers_compiled = driver_configs::compile(&set.drivers).left.is_empty();
                ValidateDesired {
                    condition: condition_with(set, inputs, &compiled),
                    claims: claims_selector::narrowing(set, inputs, &compiled, drivers_compiled),
                }
            }
        }
    }

    fn inputs(&self) -> u64 {
        let generation = self.compiled.as_ref().map_or(0, |(e, _)| e.generation());
        u64::from(self.mismatch.rules_match()) | (generation << 1)
    }

    fn plan(&self, config: &ValidatingWebhookConfiguration, desired: &Self::Desired) -> Vec<Value> {
        let webhooks = config.webhooks.as_deref().unwrap_or_default();
        let (namespace, service) = (&self.settings.namespace, &self.settings.service);
        let mut ops = plan(webhooks, namespace, service, &desired.condition);
        ops.extend(claims_selector::plan(webhooks, namespace, service, &desired.claims));
        ops
    }

    fn written(&self, name: &str, desired: &Self::Desired) {
        let left_out = desired.claims.as_ref().map(|r| {
            r.iter()
                .map(|r| format!("{} {} {:?}", r.key, r.operator, r.values.as_deref().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(", ")
        });
        tracing::info!(
            name,
            condition = CONDITION_NAME,
            expression = desired.condition.expression.as_str(),
            claims_sent_only_where = left_out.as_deref().unwrap_or("every namespace the entry selects"),
            "matchCondition of the validating webhook entries and the claims entry's namespaceSelector set for the policies in force"
        );
    }
}

/// The controller for the validating entries.
pub type ValidateConditions = RoutingSync<ValidateRouting>;

impl RoutingSync<ValidateRouting> {
    pub fn new(
        client: Client,
        settings: CertSettings,
        policies: PolicyStore,
        toleration_restriction: bool,
        mismatch: Mismatch,
        compiled: Option<(EnforcedPolicies, CompiledName)>,
    ) -> Self {
        let name = settings.webhook_config.clone();
        let routing = ValidateRouting {
            settings,
            toleration_restriction,
            mismatch,
            compiled,
            said: AtomicU8::new(2),
        };
        RoutingSync::with_routing(client, &name, policies, routing)
    }
}
