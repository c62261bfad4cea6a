//! Quota across all subrequests (SPEC.md §7): what a claim costs, as the
//! kube quota evaluator counts it (pkg/quota/v1/evaluator/core/resource_claims.go),
//! and the limits it must fit in.

use std::collections::BTreeMap;
use std::fmt;

mod count;
pub mod desired;
pub mod extended;
pub mod ledger;

pub use extended::{DeviceClassFacts, QuotaKeys};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use count::parse_count;

use crate::objects::claim::{ALLOCATION_MODE_ALL, ALLOCATION_MODE_EXACT_COUNT, ClaimSpec};

/// `AllocationResultsMaxSize`: what `allocationMode: All` is charged, the worst case.
pub const ALL_DEVICES_CHARGE: u64 = 32;
/// The ResourceQuota name of the claim count.
pub const CLAIMS_RESOURCE: &str = "count/resourceclaims.resource.k8s.io";
/// `<class>` + this is the ResourceQuota name of a device class's devices.
pub const DEVICES_SUFFIX: &str = ".deviceclass.resource.k8s.io/devices";

/// What claims cost or use: a number of claims and devices per class.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Charge {
    pub claims: u64,
    pub devices: BTreeMap<String, u64>,
    /// Of `devices`, those of claims the scheduler made for a pod's
    /// extended resources: the pod pays for them on the extended-resource
    /// keys, so these are charged to `devices` only ([`extended`]).
    pub paid_by_pods: BTreeMap<String, u64>,
    /// For a ResourceClaimTemplate's charge in `check`: how many claims
    /// (one per Pod) it stamps, so a denial can show "1 per Pod × 8 Pods".
    pub stamped: Option<u64>,
}

impl Charge {
    /// Counts come from requests and manifests, so sums and products
    /// saturate: a plain `+` would panic in a debug build and wrap to a small
    /// count in a release build. A count stuck at `u64::MAX` is over every
    /// limit ([`excesses`]), which is the safe verdict.
    pub fn add(&mut self, other: &Charge) {
        self.claims = self.claims.saturating_add(other.claims);
        for (class, n) in &other.devices {
            add_devices(&mut self.devices, class, *n);
        }
        for (class, n) in &other.paid_by_pods {
            add_devices(&mut self.paid_by_pods, class, *n);
        }
    }

    /// This charge `n` times (a template stamping `n` claims), saturating.
    pub fn times(&self, n: u64) -> Charge {
        let times = |m: &BTreeMap<String, u64>| m.iter().map(|(c, d)| (c.clone(), d.saturating_mul(n))).collect();
        Charge {
            claims: self.claims.saturating_mul(n),
            devices: times(&self.devices),
            paid_by_pods: times(&self.paid_by_pods),
            stamped: Some(self.stamped.unwrap_or(1).saturating_mul(n)),
        }
    }

    /// This charge as the claim of a pod's extended resources
    /// ([`extended::paid_by_owning_pod`]).
    pub fn paid_by_pod(mut self) -> Charge {
        self.paid_by_pods = self.devices.clone();
        self
    }

    /// As ResourceQuota resource names and quantities: claims, devices per
    /// class, and the extended-resource keys `keys` puts in force.
    pub fn resources(&self, keys: &QuotaKeys) -> BTreeMap<String, u64> {
        let mut out: BTreeMap<String, u64> = self
            .devices
            .iter()
            .map(|(class, n)| (format!("{class}{DEVICES_SUFFIX}"), *n))
            .collect();
        out.insert(CLAIMS_RESOURCE.to_owned(), self.claims);
        let unpaid = self.devices.iter().map(|(class, n)| {
            let paid = self.paid_by_pods.get(class).copied().unwrap_or(0);
            (class.clone(), n.saturating_sub(paid))
        });
        out.extend(keys.charged(unpaid));
        out
    }
}

impl fmt::Display for Charge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} claim{}", self.claims, if self.claims == 1 { "" } else { "s" })?;
        for (class, n) in &self.devices {
            write!(f, ", {n} {class}")?;
        }
        Ok(())
    }
}

/// `n` more devices of `class`, saturating (see [`Charge::add`]).
fn add_devices(devices: &mut BTreeMap<String, u64>, class: &str, n: u64) {
    let total = devices.entry(class.to_owned()).or_default();
    *total = total.saturating_add(n);
}

/// Devices one request or subrequest asks for: its count, 32 for `All`,
/// nothing for a mode the evaluator does not know.
fn devices(mode: &str, count: i64) -> Option<u64> {
    match mode {
        // A negative count (validation denies it anyway) charges nothing,
        // as it always has; every i64 count >= 0 fits a u64.
        ALLOCATION_MODE_EXACT_COUNT => Some(u64::try_from(count).unwrap_or(0)),
        ALLOCATION_MODE_ALL => Some(ALL_DEVICES_CHARGE),
        _ => None,
    }
}

/// The charge of one claim: one claim; `exactly` charges its count; a
/// `firstAvailable` request charges, per device class, the largest count
/// among its subrequests of that class; requests add up. Admin access is
/// not exempt. Every subrequest counts, so a prioritized list never buys
/// more than quota allows.
pub fn charge(spec: &ClaimSpec) -> Charge {
    let mut total = Charge {
        claims: 1,
        ..Charge::default()
    };
    for request in &spec.devices.requests {
        if let Some(exactly) = &request.exactly {
            // An unknown mode still names the class, at 0 (`unknown-count-mode`).
            let n = devices(&exactly.allocation_mode, exactly.count).unwrap_or(0);
            add_devices(&mut total.devices, &exactly.device_class_name, n);
            continue;
        }
        let mut per_class: BTreeMap<&str, u64> = BTreeMap::new();
        for sub in &request.first_available {
            if let Some(n) = devices(&sub.allocation_mode, sub.count).filter(|n| *n > 0) {
                let slot = per_class.entry(&sub.device_class_name).or_default();
                *slot = (*slot).max(n);
            }
        }
        for (class, n) in per_class {
            add_devices(&mut total.devices, class, n);
        }
    }
    total
}

/// The charge of a claim: [`charge`] of its spec, paid by its pod on the
/// extended-resource keys when the scheduler made it for the pod's
/// extended resources ([`extended::paid_by_owning_pod`]).
pub fn claim_charge(spec: &ClaimSpec, meta: &ObjectMeta) -> Charge {
    let charged = charge(spec);
    if extended::paid_by_owning_pod(meta) {
        charged.paid_by_pod()
    } else {
        charged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ClaimVersion;
    use rstest::rstest;
    use serde_json::{Value, json};

    fn charged(requests: Value) -> BTreeMap<String, u64> {
        let spec = ClaimSpec::decode(&json!({"devices": {"requests": requests}}), ClaimVersion::V1).expect("spec");
        let c = charge(&spec);
        assert_eq!(c.claims, 1, "every claim counts once");
        c.devices
    }

    fn gpu(extra: Value) -> Value {
        let mut e = json!({"deviceClassName": "gpu"});
        if let (Some(e), Some(x)) = (e.as_object_mut(), extra.as_object()) {
            e.extend(x.clone());
        }
        e
    }

    fn expect(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    fn exactly(extra: Value) -> Value {
        json!([{"name": "r", "exactly": gpu(extra)}])
    }

    fn sub(name: &str, class: &str, extra: Value) -> Value {
        let mut s = json!({"name": name, "deviceClassName": class});
        if let (Some(s), Some(x)) = (s.as_object_mut(), extra.as_object()) {
            s.extend(x.clone());
        }
        s
    }

    /// The devices a claim's requests charge, per class: the cases of
    /// pkg/quota/v1/evaluator/core/resource_claims_test.go (kubernetes
    /// v1.36.0), where a prioritized list charges each class its worst case.
    #[rstest]
    #[case::simple(exactly(json!({})), &[("gpu", 1)])]
    #[case::many_requests(
        Value::Array((0..5).map(|i| json!({"name": format!("r{i}"), "exactly": gpu(json!({}))})).collect()),
        &[("gpu", 5)]
    )]
    #[case::count(exactly(json!({"count": 5})), &[("gpu", 5)])]
    #[case::all(exactly(json!({"allocationMode": "All"})), &[("gpu", 32)])]
    #[case::unknown_count_mode(exactly(json!({"allocationMode": "Future"})), &[("gpu", 0)])]
    #[case::admin_access_is_not_exempt(exactly(json!({"adminAccess": true, "count": 2})), &[("gpu", 2)])]
    #[case::prioritized_list(json!([{"name": "r", "firstAvailable": [sub("a", "gpu", json!({}))]}]), &[("gpu", 1)])]
    #[case::the_largest_subrequest_not_the_first(
        json!([{"name": "r", "firstAvailable": [sub("a", "gpu", json!({"count": 2})), sub("b", "gpu", json!({}))]}]),
        &[("gpu", 2)]
    )]
    #[case::every_class_its_worst_case(
        json!([{"name": "r", "firstAvailable": [sub("a", "gpu", json!({})), sub("b", "tpu", json!({"allocationMode": "All"}))]}]),
        &[("gpu", 1), ("tpu", 32)]
    )]
    #[case::prioritized_list_allocation_mode_all(
        json!([{"name": "r", "firstAvailable": [sub("a", "gpu", json!({})), sub("b", "gpu", json!({"allocationMode": "All"}))]}]),
        &[("gpu", 32)]
    )]
    #[case::prioritized_list_unknown_mode_adds_nothing(
        json!([{"name": "r", "firstAvailable": [sub("a", "gpu", json!({"allocationMode": "Future"}))]}]),
        &[]
    )]
    #[case::requests_add_up_across_kinds(
        json!([
            {"name": "e", "exactly": gpu(json!({"count": 3}))},
            {"name": "f", "firstAvailable": [sub("big", "gpu-large", json!({"count": 2})), sub("small", "gpu-small", json!({"count": 4}))]}
        ]),
        &[("gpu", 3), ("gpu-large", 2), ("gpu-small", 4)]
    )]
    fn devices_charged(#[case] requests: Value, #[case] want: &[(&str, u64)]) {
        assert_eq!(charged(requests), expect(want));
    }

    #[test]
    fn resources_and_multiples() {
        let c = Charge {
            claims: 1,
            devices: expect(&[("gpu-small", 4)]),
            ..Default::default()
        };
        assert_eq!(
            c.times(3).resources(&QuotaKeys::devices_only()),
            expect(&[
                ("count/resourceclaims.resource.k8s.io", 3),
                ("gpu-small.deviceclass.resource.k8s.io/devices", 12)
            ])
        );
        assert_eq!(c.times(3).to_string(), "3 claims, 12 gpu-small");
    }

    #[test]
    fn extended_resource_keys_leave_out_what_pods_pay() {
        let keys = QuotaKeys::extended(["gpu"], |_| DeviceClassFacts::Found {
            extended_resource_name: Some("example.com/gpu".into()),
        });
        let mut used = Charge {
            claims: 1,
            devices: expect(&[("gpu", 2)]),
            ..Default::default()
        };
        used.add(
            &Charge {
                claims: 1,
                devices: expect(&[("gpu", 3)]),
                ..Default::default()
            }
            .paid_by_pod(),
        );
        assert_eq!(
            used.resources(&keys),
            expect(&[
                ("count/resourceclaims.resource.k8s.io", 2),
                ("gpu.deviceclass.resource.k8s.io/devices", 5),
                ("requests.deviceclass.resource.kubernetes.io/gpu", 2),
                ("requests.example.com/gpu", 2),
            ]),
            "the pod's claim counts as a claim and as devices, not as its extended resource"
        );
        assert_eq!(used.times(2).resources(&keys)["requests.example.com/gpu"], 4);
    }

    const I64_MAX: i64 = i64::MAX;

    #[test]
    fn counts_from_input_saturate_instead_of_wrapping() {
        // Three times i64::MAX is past u64::MAX: wrapping would charge
        // 9223372036854775805, and a debug build would panic.
        let huge: Vec<Value> = (0..3)
            .map(|i| json!({"name": format!("r{i}"), "exactly": gpu(json!({"count": I64_MAX}))}))
            .collect();
        assert_eq!(charged(json!(huge)), expect(&[("gpu", u64::MAX)]));
        let mixed = json!([
            {"name": "e", "exactly": gpu(json!({"count": I64_MAX}))},
            {"name": "f", "firstAvailable": [sub("a", "gpu", json!({"count": I64_MAX})), sub("b", "gpu", json!({"count": 1}))]},
            {"name": "g", "firstAvailable": [sub("a", "gpu", json!({"allocationMode": "All"}))]}
        ]);
        assert_eq!(
            charged(mixed),
            expect(&[("gpu", u64::MAX)]),
            "2 x i64::MAX + 32 saturates too"
        );
    }

    #[test]
    fn sums_and_multiples_saturate() {
        let big = Charge {
            claims: 1,
            devices: expect(&[("gpu", u64::MAX - 1)]),
            ..Default::default()
        };
        let mut sum = big.clone();
        sum.add(&big);
        assert_eq!(sum.claims, 2);
        assert_eq!(sum.devices, expect(&[("gpu", u64::MAX)]));
        assert_eq!(
            big.times(u64::MAX).to_string(),
            "18446744073709551615 claims, 18446744073709551615 gpu"
        );
        let mut claims = big.times(u64::MAX);
        claims.add(&big);
        assert_eq!(claims.claims, u64::MAX, "the claim count saturates as well");
    }
}

/// Limits from one source (a policy's `quota`, or a ResourceQuota's
/// `spec.hard`), as ResourceQuota resource names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// `policy "ml-gpus"` or `ResourceQuota "gpu-quota"`.
    pub source: String,
    pub hard: BTreeMap<String, u64>,
}

impl Limits {
    pub fn from_policy(name: &str, quota: &crate::policy::model::Quota) -> Option<Limits> {
        let mut hard: BTreeMap<String, u64> = quota
            .devices
            .iter()
            .map(|(class, n)| (format!("{class}{DEVICES_SUFFIX}"), *n))
            .collect();
        if let Some(claims) = quota.claims {
            hard.insert(CLAIMS_RESOURCE.to_owned(), claims);
        }
        (!hard.is_empty()).then(|| Limits {
            source: format!("policy {name:?}"),
            hard,
        })
    }

    /// The claim-related entries of a ResourceQuota's `spec.hard` (claims,
    /// devices per class, extended resources); other resources and
    /// quantities that are not whole numbers are ignored.
    pub fn from_resource_quota(name: &str, hard: &BTreeMap<String, String>) -> Option<Limits> {
        let hard: BTreeMap<String, u64> = hard
            .iter()
            .filter(|(r, _)| {
                r.as_str() == CLAIMS_RESOURCE || r.ends_with(DEVICES_SUFFIX) || extended::is_extended_key(r)
            })
            .filter_map(|(r, q)| parse_count(q).map(|n| (r.clone(), n)))
            .collect();
        (!hard.is_empty()).then(|| Limits {
            source: format!("ResourceQuota {name:?}"),
            hard,
        })
    }
}

/// One limit a new claim would break.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excess {
    pub source: String,
    pub resource: String,
    pub limit: u64,
    pub used: u64,
    pub requested: u64,
    /// How many claims (one per Pod) the request stamps, for a template.
    pub stamped: Option<u64>,
}

impl fmt::Display for Excess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exceeded quota ({}): {}: limit {}, used {}, requested {}",
            self.source, self.resource, self.limit, self.used, self.requested
        )?;
        // A template's Pods each stamp a claim: show the product.
        match self.stamped {
            Some(pods) if pods > 1 && self.requested != u64::MAX && self.requested.is_multiple_of(pods) => {
                write!(f, " ({} per Pod × {pods} Pods)", self.requested / pods)
            }
            _ => Ok(()),
        }
    }
}

/// Every limit that `used + requested` would exceed, on the keys `keys`
/// puts in force. The sum saturates, and `u64::MAX` is where every count
/// saturates, so it means "at least this many": over any limit, even a
/// limit of `u64::MAX`.
pub fn excesses(limits: &Limits, used: &Charge, requested: &Charge, keys: &QuotaKeys) -> Vec<Excess> {
    let requested_stamped = requested.stamped;
    let (used, requested) = (used.resources(keys), requested.resources(keys));
    limits
        .hard
        .iter()
        .filter_map(|(resource, &limit)| {
            // A resource absent from a charge is 0 of it, not unknown.
            let asked = requested.get(resource).copied().unwrap_or(0);
            let have = used.get(resource).copied().unwrap_or(0);
            let total = have.saturating_add(asked);
            (asked > 0 && (total > limit || total == u64::MAX)).then(|| Excess {
                source: limits.source.clone(),
                resource: resource.clone(),
                limit,
                used: have,
                requested: asked,
                stamped: requested_stamped,
            })
        })
        .collect()
}

#[cfg(test)]
mod limit_tests {
    use super::*;

    #[test]
    fn resource_quota_entries() {
        let hard: BTreeMap<String, String> = [
            ("gpu.deviceclass.resource.k8s.io/devices", "8"),
            ("count/resourceclaims.resource.k8s.io", "1k"),
            ("requests.cpu", "4"),
            ("tpu.deviceclass.resource.k8s.io/devices", "1.5"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        let limits = Limits::from_resource_quota("q", &hard).expect("limits");
        assert_eq!(limits.source, "ResourceQuota \"q\"");
        assert_eq!(
            limits.hard,
            [
                ("count/resourceclaims.resource.k8s.io".to_owned(), 1000),
                ("gpu.deviceclass.resource.k8s.io/devices".to_owned(), 8)
            ]
            .into()
        );
    }

    #[test]
    fn six_of_eight_used() {
        let limits = Limits {
            source: "ResourceQuota \"q\"".into(),
            hard: [("gpu.deviceclass.resource.k8s.io/devices".to_owned(), 8)].into(),
        };
        let used = Charge {
            claims: 3,
            devices: [("gpu".to_owned(), 6)].into(),
            ..Default::default()
        };
        let three = Charge {
            claims: 1,
            devices: [("gpu".to_owned(), 3)].into(),
            ..Default::default()
        };
        let two = Charge {
            claims: 1,
            devices: [("gpu".to_owned(), 2)].into(),
            ..Default::default()
        };
        let over = excesses(&limits, &used, &three, &QuotaKeys::devices_only());
        assert_eq!(over.len(), 1);
        assert_eq!(
            over[0].to_string(),
            "exceeded quota (ResourceQuota \"q\"): gpu.deviceclass.resource.k8s.io/devices: limit 8, used 6, requested 3"
        );
        assert!(excesses(&limits, &used, &two, &QuotaKeys::devices_only()).is_empty());
    }

    fn gpus(n: u64) -> Charge {
        Charge {
            claims: 1,
            devices: [("gpu".to_owned(), n)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn used_plus_requested_saturates_and_is_over() {
        let limits = Limits {
            source: "ResourceQuota \"q\"".into(),
            hard: [("gpu.deviceclass.resource.k8s.io/devices".to_owned(), 8)].into(),
        };
        let over = excesses(&limits, &gpus(u64::MAX - 1), &gpus(3), &QuotaKeys::devices_only());
        assert_eq!(
            over.iter().map(ToString::to_string).collect::<Vec<_>>(),
            vec![
                "exceeded quota (ResourceQuota \"q\"): gpu.deviceclass.resource.k8s.io/devices: limit 8, used 18446744073709551614, requested 3"
            ]
        );
    }

    #[test]
    fn a_saturated_count_is_over_even_the_largest_limit() {
        let limits = Limits {
            source: "policy \"p\"".into(),
            hard: [("gpu.deviceclass.resource.k8s.io/devices".to_owned(), u64::MAX)].into(),
        };
        assert!(
            excesses(&limits, &gpus(u64::MAX - 2), &gpus(1), &QuotaKeys::devices_only()).is_empty(),
            "u64::MAX - 1 fits in u64::MAX"
        );
        let over = excesses(&limits, &gpus(u64::MAX - 1), &gpus(1), &QuotaKeys::devices_only());
        assert_eq!(
            over.iter().map(ToString::to_string).collect::<Vec<_>>(),
            vec![
                "exceeded quota (policy \"p\"): gpu.deviceclass.resource.k8s.io/devices: limit 18446744073709551615, used 18446744073709551614, requested 1"
            ],
            "u64::MAX is where counts saturate: it may stand for more"
        );
        assert_eq!(
            excesses(&limits, &Charge::default(), &gpus(u64::MAX), &QuotaKeys::devices_only()).len(),
            1
        );
    }
}
