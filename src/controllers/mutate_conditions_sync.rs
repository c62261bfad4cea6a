//! Keeps [`super::mutate_conditions`]' condition in draguard's defaulting
//! webhook entry, and the selector entries of
//! [`super::mutate_selector_entries`] beside it, in step with the policies
//! in force (the loop, its watch and its retries: `routing_sync`).
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

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::Client;
use serde_json::Value;

use super::mutate_conditions::CONDITION_NAME;
use super::mutate_selector_entries::{Managed, managed, plan};
use super::routing_sync::{Routing, RoutingSync};
use super::routing_widened::RoutingWidened;
use super::webhook_certs::CertSettings;
use crate::policy::PolicySet;
use crate::policy_files::reload::PolicyStore;

/// The defaulting entry's routing.
pub struct MutateRouting {
    settings: CertSettings,
    toleration_restriction: bool,
    widened: RoutingWidened,
}

impl Routing for MutateRouting {
    type Config = MutatingWebhookConfiguration;
    type Desired = Managed;

    const WHAT: &'static str = "the defaulting webhook's matchCondition, rules and selector entries";
    const MEANWHILE: &'static str = "every claim, template and Pod CREATE is still sent to /mutate";

    /// The managed state for `set`; its widenings are recorded (and
    /// logged when they changed).
    fn desired(&self, set: &PolicySet) -> Managed {
        let desired = managed(set, self.toleration_restriction);
        self.widened.set(&desired.widenings);
        desired
    }

    fn plan(&self, config: &MutatingWebhookConfiguration, desired: &Managed) -> Vec<Value> {
        let webhooks = config.webhooks.as_deref().unwrap_or_default();
        plan(webhooks, &self.settings.namespace, &self.settings.service, desired)
    }

    fn written(&self, name: &str, desired: &Managed) {
        tracing::info!(
            name,
            condition = CONDITION_NAME,
            expression = desired.split.expression.as_str(),
            selector_entries = desired.selectors.len(),
            // Kinds no policy defaults: their rules are out of the entry
            // (`mutate_rules`), so the apiserver does not even evaluate
            // the condition for them.
            rules_parked_pods = desired.parked.pods,
            rules_parked_claims = desired.parked.claims,
            "matchCondition, rules and selector entries of the defaulting webhook set for the policies in force"
        );
    }
}

/// The controller for the defaulting entry.
pub type MutateConditions = RoutingSync<MutateRouting>;

impl RoutingSync<MutateRouting> {
    pub fn new(client: Client, settings: CertSettings, policies: PolicyStore, toleration_restriction: bool) -> Self {
        let name = settings.webhook_config.clone();
        let routing = MutateRouting {
            settings,
            toleration_restriction,
            widened: RoutingWidened::default(),
        };
        RoutingSync::with_routing(client, &name, policies, routing)
    }

    /// Where the routing of the policies in force is wider than their
    /// selectors: for `/metrics`.
    pub fn routing(&self) -> RoutingWidened {
        self.routing_ref().widened.clone()
    }
}
