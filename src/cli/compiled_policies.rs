//! serve's compiled admission policies: `--manage-admission-policies`
//! applies what `draguard policy compile` makes of the policies in force;
//! `--compiled-policies-applied` only reads them (a GitOps tool applies
//! `compile`'s output). Either way, the validating entries stop sending
//! what the ones the apiserver enforces judge.

use std::sync::Arc;

use crate::controllers::admission_policies_sync::{AdmissionPolicies, Compile, Ownership};
use crate::controllers::validate_conditions_sync::CompiledName;
use crate::kubernetes::KubeVersion;
use crate::policy::compile::{self, objects::Part};
use crate::policy::enforce::TolerationTarget;
use crate::policy::{PolicySet, TolerationPolicy};
use crate::policy_files::reload::PolicyStore;

/// The controller for `ownership`, compiling for `version`, with draguard's
/// own namespace left out of every binding.
pub fn controller(
    client: kube::Client,
    policies: PolicyStore,
    version: KubeVersion,
    own_namespace: &str,
    ownership: Ownership,
) -> AdmissionPolicies {
    let options = compile::Options {
        minor: u64::from(version.minor()),
        draguard_namespace: own_namespace.to_owned(),
    };
    let compile: Compile = Arc::new(move |set: &PolicySet| match compile::compile(set, &options) {
        Ok(compiled) => compiled.objects,
        Err(e) => {
            tracing::warn!(error = %e, "no admission policies compiled; the webhook judges everything");
            Vec::new()
        }
    });
    AdmissionPolicies::new(client, policies, compile, ownership)
}

/// The admission policies that judge a policy's rules for one kind of
/// toleration: a Pod policy is compiled in two parts (Pods, and workloads'
/// pod templates, which the same webhook term sends), a device policy in
/// one.
pub const COMPILED_NAMES: CompiledName = compiled_names;

fn compiled_names(p: &TolerationPolicy, target: TolerationTarget) -> Vec<String> {
    match target {
        TolerationTarget::Pod => vec![
            compile::objects::name(p, Part::Pods),
            compile::objects::name(p, Part::Workloads),
        ],
        TolerationTarget::Device => vec![compile::objects::name(p, Part::Devices)],
    }
}
