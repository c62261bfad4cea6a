//! What of a policy stays in the webhook, and why (`policy compile
//! --explain`): everything a ValidatingAdmissionPolicy cannot judge from
//! the request alone, or that this compiler does not emit yet.

use crate::policy::TolerationPolicy;

/// One part of a policy the webhook keeps judging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remains {
    pub part: &'static str,
    pub why: String,
}

/// A DNS-1123 subdomain (what object names must be), at most `max` bytes.
pub fn is_subdomain(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The parts of `p` that stay in the webhook; `pod_defaults` when the
/// Pods' defaults are compiled (Kubernetes 1.36 and later).
pub fn remains(p: &TolerationPolicy, pod_defaults: bool, drivers: &super::driver_configs::Drivers) -> Vec<Remains> {
    let s = &p.spec;
    let mut out = Vec::new();
    let mut add = |part: &'static str, why: &str| {
        out.push(Remains {
            part,
            why: why.to_owned(),
        })
    };
    if !s.pods.defaults.is_empty() && !pod_defaults {
        add(
            "pods.defaults",
            "MutatingAdmissionPolicy (admissionregistration.k8s.io/v1) is served from Kubernetes 1.36",
        );
    }
    if !s.devices.defaults.is_empty() {
        add(
            "devices.defaults",
            "a default per toleration list of every request and subrequest, up to each list's 16, with a warning for each left out: not compiled yet",
        );
    }
    if s.quota.claims.is_some() || !s.quota.devices.is_empty() {
        add(
            "quota",
            "counting a namespace's claims and devices needs the other claims, which a policy never sees",
        );
    }
    if !s.sharing.is_empty() {
        add(
            "sharing",
            "drivers' opaque configs are decoded by driver schema (built-in and DriverConfigSchema) and quantities compared; not expressed in CEL",
        );
    }
    if !s.taint_rules.is_empty() {
        add(
            "taintRules",
            "a DeviceTaintRule's blast radius needs the ResourceSlices, claims and Pods it reaches, and a standing rule the clock",
        );
    }
    if s.patches.deny_priority_ties {
        add("patches", "a priority tie needs the other ResourceSlicePatches");
    }
    if s.namespace_guards.is_some() {
        add(
            "namespaceGuards",
            "Namespace label and annotation guards are not compiled yet (they judge Namespaces, not tolerations)",
        );
    }
    if !s.pods.allow.is_empty() || !s.pods.deny.is_empty() {
        add(
            "large lists and workload warnings",
            "Pods and pod templates with more than 128 tolerations, which the apiserver's CEL would take quadratic time over (policy::compile::objects::POD_TOLERATIONS_MAX); and the workloads entry's warnings on an UPDATE that leaves the pod template as it was (\"Warnings before breakage\")",
        );
    }
    let devices = !s.devices.allow.is_empty() || !s.devices.deny.is_empty();
    if !devices || !super::objects::carries_configs(p) {
        add(
            "driver configs",
            "drivers' opaque configs (spec.devices.config) are compiled into a policy's devices part only when it has a devices allow or deny list and mode Enforce: the webhook refuses a bad config whatever a policy's mode",
        );
        add(
            "device toleration limit",
            "a claim's or template's request list of more than 16 tolerations (draguard's limit; the apiserver does not check it) is refused by a policy's devices part only when it has a devices allow or deny list and mode Enforce: the webhook refuses it whatever a policy's mode",
        );
    } else {
        for (driver, why) in &drivers.left {
            add("driver configs", &format!("driver {driver}: {why}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains() {
        assert!(is_subdomain("dedicated-ml-nodes", 253));
        assert!(is_subdomain("a.b-c", 253));
        assert!(!is_subdomain("Upper", 253));
        assert!(!is_subdomain("-a", 253));
        assert!(!is_subdomain("a..b", 253));
        assert!(!is_subdomain("abc", 2));
    }
}
