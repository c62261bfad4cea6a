//! `draguard policy compile`: the toleration rules a policy states that
//! CEL can express, as admissionregistration.k8s.io/v1
//! ValidatingAdmissionPolicies and bindings the apiserver runs itself
//! (issue 40: a policy costs the apiserver ~0.3-0.7 ms there, a webhook
//! call ~1.5-2 ms). Each policy's Pod lists and device lists become one
//! policy each, judging exactly what `enforce::judge` judges, on the
//! writes draguard's validating entry is sent, in the namespaces it
//! selects, for the requesters it does not exempt; its mode becomes the
//! binding's action. An Enforce devices policy also carries the checks
//! the webhook makes on a new claim or template beyond the apiserver's:
//! the drivers' configs ([`driver_configs`]) and the limit of 16
//! tolerations a request list ([`device_limit`]); see
//! [`objects::carries_claim_validation`]. What cannot be compiled stays
//! in the webhook ([`remains`]).

pub mod cel;
pub mod defaults;
pub mod device_limit;
pub mod driver_configs;
pub mod messages;
pub mod objects;
pub mod predicate;
pub mod quantity;
pub mod remains;
pub mod selection;

use serde_json::Value;

use super::PolicySet;

/// The oldest Kubernetes the output runs on: admissionregistration.k8s.io/v1
/// ValidatingAdmissionPolicy is GA since 1.30, and the messages use
/// two-variable comprehensions (`transformList(i, t, ...)`), in the
/// apiserver's CEL base environment since 1.32 (kubernetes
/// staging/src/k8s.io/apiserver/pkg/cel/environment/base.go,
/// `ext.TwoVarComprehensions()` introduced at 1.32).
pub const MIN_MINOR: u64 = 32;

#[derive(Debug, Clone)]
pub struct Options {
    /// The Kubernetes minor version (1.x) the output is for.
    pub minor: u64,
    /// draguard's own namespace, which no compiled policy judges.
    pub draguard_namespace: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            minor: 36,
            draguard_namespace: "draguard".to_owned(),
        }
    }
}

/// One policy: the objects compiled from it and what stays in the webhook.
#[derive(Debug, Clone)]
pub struct CompiledPolicy {
    pub policy: String,
    pub file: String,
    /// The names of the compiled ValidatingAdmissionPolicies.
    pub compiled: Vec<String>,
    /// It has Pod defaults (compiled into [`defaults::NAME`] when
    /// [`Compiled::defaults_compiled`]).
    pub pod_defaults: bool,
    pub remains: Vec<remains::Remains>,
}

#[derive(Debug, Clone, Default)]
pub struct Compiled {
    /// Policies and bindings, in policy order (Pods, workloads, devices).
    pub objects: Vec<Value>,
    pub policies: Vec<CompiledPolicy>,
    /// Whether the Pods' defaults are compiled (a MutatingAdmissionPolicy).
    pub defaults_compiled: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    #[error(
        "Kubernetes 1.{0} is too old: compiled policies need 1.{MIN_MINOR} or later (two-variable CEL comprehensions)"
    )]
    TooOld(u64),
}

/// Compiles every policy of `set`.
pub fn compile(set: &PolicySet, options: &Options) -> Result<Compiled, CompileError> {
    if options.minor < MIN_MINOR {
        return Err(CompileError::TooOld(options.minor));
    }
    let mut out = Compiled::default();
    let drivers = driver_configs::compile(&set.drivers);
    for loaded in &set.policies {
        let p = &loaded.policy;
        let mut entry = CompiledPolicy {
            policy: p.metadata.name.clone(),
            file: loaded.file.clone(),
            compiled: Vec::new(),
            pod_defaults: !p.spec.pods.defaults.is_empty(),
            remains: remains::remains(p, options.minor >= defaults::MIN_MINOR, &drivers),
        };
        // "draguard-" + name + "-workloads" must be an object name.
        if !remains::is_subdomain(&p.metadata.name, objects::NAME_MAX) {
            entry.remains.insert(
                0,
                remains::Remains {
                    part: "everything",
                    why: format!(
                        "the name {:?} cannot name a ValidatingAdmissionPolicy (a DNS subdomain of at most {} characters)",
                        p.metadata.name,
                        objects::NAME_MAX
                    ),
                },
            );
            out.policies.push(entry);
            continue;
        }
        for part in objects::Part::ALL {
            if let Some([policy, binding]) = objects::policy_and_binding(p, part, &options.draguard_namespace, &drivers)
            {
                entry.compiled.push(objects::name(p, part));
                out.objects.push(policy);
                out.objects.push(binding);
            }
        }
        out.policies.push(entry);
    }
    // Pods' defaults: one MutatingAdmissionPolicy for every policy's
    // (GA in 1.36; before, they stay with the webhook).
    if options.minor >= defaults::MIN_MINOR
        && let Some([policy, binding]) = defaults::policy_and_binding(set, &options.draguard_namespace)
    {
        out.objects.push(policy);
        out.objects.push(binding);
        out.defaults_compiled = true;
    }
    Ok(out)
}

/// The objects as one multi-document YAML stream.
pub fn to_yaml(objects: &[Value]) -> Result<String, String> {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(o).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// `--explain`: per policy, what is compiled and what stays in the
/// webhook, and why.
pub fn explain(compiled: &Compiled) -> String {
    let mut out = String::new();
    for p in &compiled.policies {
        out.push_str(&format!("{} ({}):\n", p.policy, p.file));
        if p.compiled.is_empty() {
            out.push_str("  compiled: nothing (no pods or devices allow/deny list)\n");
        } else {
            out.push_str(&format!("  compiled: {}\n", p.compiled.join(", ")));
        }
        if p.pod_defaults && compiled.defaults_compiled {
            out.push_str(&format!("  compiled: pods.defaults, in {}\n", defaults::NAME));
        }
        for r in &p.remains {
            out.push_str(&format!("  stays in the webhook: {}: {}\n", r.part, r.why));
        }
    }
    out.push_str(DIFFERENCES);
    out
}

/// What differs from the webhook for every compiled policy.
pub const DIFFERENCES: &str = "\
Every compiled policy, compared with the webhook:
  - the message names the first refused toleration only (the webhook lists each, joined by \"; \"),
    after the apiserver's prefix \"ValidatingAdmissionPolicy 'NAME' with binding 'NAME' denied request: \"
    (a warning: \"Validation failed for ValidatingAdmissionPolicy 'NAME' with binding 'NAME': \");
    when several policies refuse a write, the apiserver reports one of them;
  - Audit records the failure in the audit event's annotations, not in draguard's log and metrics;
  - the Pods' defaults are one MutatingAdmissionPolicy for all policies: compile every policy at once;
  - the CEL runtime cost limit bounds the object: see docs/src/policies/compile.md.
";

#[cfg(test)]
mod tests;
