//! The extended-resource quota keys of a claim (DRAExtendedResource: beta
//! and on in 1.36, GA in 1.37). Besides `<class>.deviceclass.resource.k8s.io/devices`,
//! the kube quota evaluator charges each class's devices to
//! - `requests.deviceclass.resource.kubernetes.io/<class>`, the class's
//!   implicit extended resource, when the DeviceClass exists, and
//! - `requests.<extendedResourceName>` when the DeviceClass names one
//!   (`spec.extendedResourceName`),
//!
//! so that one ResourceQuota caps a GPU whether a pod asks for it as an
//! extended resource or a claim asks for it by class
//! (pkg/quota/v1/evaluator/core/resource_claims.go, `addExtendedResourceQuota`
//! and `MatchingResources`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `requests.deviceclass.resource.kubernetes.io/` + class: the implicit key.
pub const IMPLICIT_PREFIX: &str = "requests.deviceclass.resource.kubernetes.io/";
/// `requests.` + an extended resource name: the explicit key.
pub const REQUESTS_PREFIX: &str = "requests.";
/// Marks the claim the scheduler creates for a pod's extended resources.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";

/// What a view knows of one device class, for its extended-resource keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceClassFacts {
    /// The view holds no DeviceClasses (no cluster; `check` given none):
    /// the class is taken to exist, with no extended resource name, so
    /// only its implicit key is charged.
    NotTracked,
    /// The view holds DeviceClasses and this one is not among them: the
    /// evaluator matches neither key of a class it does not know.
    Absent,
    Found {
        extended_resource_name: Option<String>,
    },
}

/// Which extended-resource keys a review charges: none with the gate off;
/// else what is known of each device class involved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuotaKeys {
    extended: Option<BTreeMap<String, DeviceClassFacts>>,
}

impl QuotaKeys {
    /// Devices and claims only: the DRAExtendedResource gate is off.
    pub fn devices_only() -> Self {
        QuotaKeys { extended: None }
    }

    /// The extended-resource keys of `classes`, each as `facts` tells.
    pub fn extended<'c>(classes: impl IntoIterator<Item = &'c str>, facts: impl Fn(&str) -> DeviceClassFacts) -> Self {
        let known = classes.into_iter().map(|c| (c.to_owned(), facts(c))).collect();
        QuotaKeys { extended: Some(known) }
    }

    /// The extended-resource keys that `devices` of each class are
    /// charged to. Two classes may name the same extended resource (while
    /// migrating from one to the other): their devices add up.
    pub(super) fn charged(&self, devices: impl Iterator<Item = (String, u64)>) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        let Some(classes) = &self.extended else {
            return out;
        };
        for (class, n) in devices.filter(|(_, n)| *n > 0) {
            let name = match classes.get(&class).unwrap_or(&DeviceClassFacts::NotTracked) {
                DeviceClassFacts::Absent => continue,
                DeviceClassFacts::NotTracked => None,
                DeviceClassFacts::Found { extended_resource_name } => extended_resource_name.as_deref(),
            };
            add(&mut out, format!("{IMPLICIT_PREFIX}{class}"), n);
            if let Some(name) = name {
                add(&mut out, format!("{REQUESTS_PREFIX}{name}"), n);
            }
        }
        out
    }
}

fn add(out: &mut BTreeMap<String, u64>, key: String, n: u64) {
    let total = out.entry(key).or_default();
    *total = total.saturating_add(n);
}

/// Whether a ResourceQuota `hard` key may be an extended-resource key of
/// claims: the implicit form, or `requests.` and a name outside the
/// `kubernetes.io` namespace that has a domain (`isExtendedResourceNameForQuota`).
/// Whether it limits a claim is then decided by the keys the claim is charged.
pub fn is_extended_key(resource: &str) -> bool {
    if resource.starts_with(IMPLICIT_PREFIX) {
        return true;
    }
    resource
        .strip_prefix(REQUESTS_PREFIX)
        .is_some_and(|name| name.contains('/') && !name.contains("kubernetes.io/"))
}

/// Whether `meta` is that of a claim the scheduler made for a pod's
/// extended resources (the annotation, and a Pod as controller). The pod
/// already pays for those resources on the `requests.*` keys, and the
/// evaluator charges the claim only what the pod does not. draguard keeps
/// no pods, so it charges such a claim nothing on those keys: the
/// apiserver's own quota still counts the rest.
pub fn paid_by_owning_pod(meta: &ObjectMeta) -> bool {
    let annotated = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM_ANNOTATION))
        .is_some_and(|v| v == "true");
    annotated
        && meta
            .owner_references
            .iter()
            .flatten()
            .any(|owner| owner.controller == Some(true) && owner.kind == "Pod" && owner.api_version == "v1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn devices(pairs: &[(&str, u64)]) -> impl Iterator<Item = (String, u64)> {
        pairs
            .iter()
            .map(|(c, n)| ((*c).to_owned(), *n))
            .collect::<Vec<_>>()
            .into_iter()
    }

    fn keys(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    fn classes(c: &str) -> DeviceClassFacts {
        match c {
            "gpu" => DeviceClassFacts::Found {
                extended_resource_name: Some("example.com/gpu".into()),
            },
            "gpu-next" => DeviceClassFacts::Found {
                extended_resource_name: Some("example.com/gpu".into()),
            },
            "nic" => DeviceClassFacts::Found {
                extended_resource_name: None,
            },
            "unlisted" => DeviceClassFacts::NotTracked,
            _ => DeviceClassFacts::Absent,
        }
    }

    #[test]
    fn gate_off_charges_no_extended_key() {
        assert_eq!(QuotaKeys::devices_only().charged(devices(&[("gpu", 2)])), keys(&[]));
    }

    #[test]
    fn each_class_by_what_is_known_of_it() {
        let all = ["gpu", "nic", "unlisted", "gone"];
        let k = QuotaKeys::extended(all, classes);
        assert_eq!(
            k.charged(devices(&[("gpu", 2), ("nic", 1), ("unlisted", 3), ("gone", 4)])),
            keys(&[
                ("requests.deviceclass.resource.kubernetes.io/gpu", 2),
                ("requests.deviceclass.resource.kubernetes.io/nic", 1),
                ("requests.deviceclass.resource.kubernetes.io/unlisted", 3),
                ("requests.example.com/gpu", 2),
            ]),
            "a class the view does not hold is charged nothing; one it does not track, its implicit key"
        );
    }

    #[test]
    fn zero_devices_are_not_charged_and_shared_names_add_up() {
        let k = QuotaKeys::extended(["gpu", "gpu-next"], classes);
        assert_eq!(
            k.charged(devices(&[("gpu", 2), ("gpu-next", 3)])),
            keys(&[
                ("requests.deviceclass.resource.kubernetes.io/gpu", 2),
                ("requests.deviceclass.resource.kubernetes.io/gpu-next", 3),
                ("requests.example.com/gpu", 5),
            ])
        );
        assert_eq!(
            k.charged(devices(&[("gpu", 0)])),
            keys(&[]),
            "an unknown allocation mode"
        );
    }

    #[test]
    fn extended_keys_in_a_resource_quota() {
        for (key, want) in [
            ("requests.deviceclass.resource.kubernetes.io/gpu", true),
            ("requests.example.com/gpu", true),
            ("requests.nvidia.com/gpu", true),
            ("requests.cpu", false),
            ("requests.memory", false),
            ("requests.hugepages-2Mi", false),
            ("requests.kubernetes.io/thing", false),
            ("requests.foo.kubernetes.io/thing", false),
            ("limits.example.com/gpu", false),
            ("example.com/gpu", false),
        ] {
            assert_eq!(is_extended_key(key), want, "{key}");
        }
    }

    fn meta(annotation: Option<&str>, owner: Option<(&str, &str, bool)>) -> ObjectMeta {
        ObjectMeta {
            annotations: annotation.map(|v| [(EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_owned(), v.to_owned())].into()),
            owner_references: owner.map(|(api_version, kind, controller)| {
                vec![OwnerReference {
                    api_version: api_version.into(),
                    kind: kind.into(),
                    name: "p".into(),
                    uid: "u".into(),
                    controller: Some(controller),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }
    }

    #[test]
    fn only_an_annotated_claim_controlled_by_a_pod_is_paid_by_it() {
        assert!(paid_by_owning_pod(&meta(Some("true"), Some(("v1", "Pod", true)))));
        assert!(!paid_by_owning_pod(&meta(Some("false"), Some(("v1", "Pod", true)))));
        assert!(
            !paid_by_owning_pod(&meta(None, Some(("v1", "Pod", true)))),
            "a template's claim"
        );
        assert!(
            !paid_by_owning_pod(&meta(Some("true"), Some(("v1", "Pod", false)))),
            "owner, not controller"
        );
        assert!(!paid_by_owning_pod(&meta(
            Some("true"),
            Some(("apps/v1", "ReplicaSet", true))
        )));
        assert!(!paid_by_owning_pod(&meta(Some("true"), None)));
    }
}
