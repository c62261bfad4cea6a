//! The internal Go types of `pkg/apis/resource` as `encoding/json` prints
//! them: they carry no JSON tags, so fields are named as in Go
//! (`Devices`, `DeviceClassName`), in declaration order, every field
//! present, nil pointers and slices `null`.
//!
//! What the typed model cannot tell apart is printed as the common case:
//! an empty list as `null` (absent, which is how clients send it), opaque
//! parameters with their keys sorted (Go keeps the client's bytes).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::objects::claim::{
    CapacityRequirements, ClaimSpec, DeviceClaimConfiguration, DeviceConstraint, DeviceRequest, DeviceSelector,
    DeviceSubRequest, DeviceToleration, ExactDeviceRequest,
};

/// A Go slice: `null` when empty (nil), else its items.
fn slice<'a, T, U>(items: &'a [T], shadow: impl Fn(&'a T) -> U) -> Option<Vec<U>> {
    (!items.is_empty()).then(|| items.iter().map(shadow).collect())
}

/// `resource.ResourceClaimSpec`.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
pub(super) struct ClaimSpecGo<'a> {
    devices: DeviceClaimGo<'a>,
}

impl<'a> ClaimSpecGo<'a> {
    pub(super) fn new(spec: &'a ClaimSpec) -> Self {
        let d = &spec.devices;
        ClaimSpecGo {
            devices: DeviceClaimGo {
                requests: slice(&d.requests, RequestGo::new),
                constraints: slice(&d.constraints, ConstraintGo::new),
                config: slice(&d.config, ConfigGo::new),
            },
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct DeviceClaimGo<'a> {
    requests: Option<Vec<RequestGo<'a>>>,
    constraints: Option<Vec<ConstraintGo<'a>>>,
    config: Option<Vec<ConfigGo<'a>>>,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct RequestGo<'a> {
    name: &'a str,
    exactly: Option<ExactGo<'a>>,
    first_available: Option<Vec<SubRequestGo<'a>>>,
}

impl<'a> RequestGo<'a> {
    fn new(r: &'a DeviceRequest) -> Self {
        RequestGo {
            name: &r.name,
            exactly: r.exactly.as_ref().map(ExactGo::new),
            first_available: slice(&r.first_available, SubRequestGo::new),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct ExactGo<'a> {
    device_class_name: &'a str,
    selectors: Option<Vec<SelectorGo<'a>>>,
    allocation_mode: &'a str,
    count: i64,
    admin_access: Option<bool>,
    tolerations: Option<Vec<TolerationGo<'a>>>,
    capacity: Option<CapacityGo>,
}

impl<'a> ExactGo<'a> {
    fn new(e: &'a ExactDeviceRequest) -> Self {
        ExactGo {
            device_class_name: &e.device_class_name,
            selectors: slice(&e.selectors, SelectorGo::new),
            allocation_mode: &e.allocation_mode,
            count: e.count,
            admin_access: e.admin_access,
            tolerations: slice(&e.tolerations, TolerationGo::new),
            capacity: e.capacity.as_ref().map(CapacityGo::new),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct SubRequestGo<'a> {
    name: &'a str,
    device_class_name: &'a str,
    selectors: Option<Vec<SelectorGo<'a>>>,
    allocation_mode: &'a str,
    count: i64,
    tolerations: Option<Vec<TolerationGo<'a>>>,
    capacity: Option<CapacityGo>,
}

impl<'a> SubRequestGo<'a> {
    fn new(s: &'a DeviceSubRequest) -> Self {
        SubRequestGo {
            name: &s.name,
            device_class_name: &s.device_class_name,
            selectors: slice(&s.selectors, SelectorGo::new),
            allocation_mode: &s.allocation_mode,
            count: s.count,
            tolerations: slice(&s.tolerations, TolerationGo::new),
            capacity: s.capacity.as_ref().map(CapacityGo::new),
        }
    }
}

#[derive(Serialize)]
struct SelectorGo<'a> {
    #[serde(rename = "CEL")]
    cel: Option<CelGo<'a>>,
}

impl<'a> SelectorGo<'a> {
    fn new(s: &'a DeviceSelector) -> Self {
        SelectorGo {
            cel: s.cel.as_ref().map(|cel| CelGo {
                expression: &cel.expression,
            }),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct CelGo<'a> {
    expression: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct TolerationGo<'a> {
    key: &'a str,
    operator: &'a str,
    value: &'a str,
    effect: &'a str,
    toleration_seconds: Option<i64>,
}

impl<'a> TolerationGo<'a> {
    fn new(t: &'a DeviceToleration) -> Self {
        TolerationGo {
            key: &t.key,
            operator: &t.operator,
            value: &t.value,
            effect: &t.effect,
            toleration_seconds: t.toleration_seconds,
        }
    }
}

/// `CapacityRequirements`: `Requests` is a Go map, nil when empty.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct CapacityGo {
    requests: Option<BTreeMap<String, String>>,
}

impl CapacityGo {
    fn new(c: &CapacityRequirements) -> Self {
        CapacityGo {
            requests: (!c.requests.is_empty()).then(|| super::quantities(c)),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct ConstraintGo<'a> {
    requests: Option<Vec<&'a str>>,
    match_attribute: Option<&'a str>,
    distinct_attribute: Option<&'a str>,
}

impl<'a> ConstraintGo<'a> {
    fn new(c: &'a DeviceConstraint) -> Self {
        ConstraintGo {
            requests: slice(&c.requests, String::as_str),
            match_attribute: c.match_attribute.as_deref(),
            distinct_attribute: c.distinct_attribute.as_deref(),
        }
    }
}

/// `DeviceClaimConfiguration`: the embedded `DeviceConfiguration` puts
/// its `Opaque` beside `Requests`.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct ConfigGo<'a> {
    requests: Option<Vec<&'a str>>,
    opaque: Option<OpaqueGo<'a>>,
}

impl<'a> ConfigGo<'a> {
    fn new(c: &'a DeviceClaimConfiguration) -> Self {
        ConfigGo {
            requests: slice(&c.requests, String::as_str),
            opaque: c.opaque.as_ref().map(|o| OpaqueGo {
                driver: &o.driver,
                parameters: o.parameters.as_deref(),
            }),
        }
    }
}

/// `Parameters` is a `runtime.RawExtension`: the JSON itself, compacted.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct OpaqueGo<'a> {
    driver: &'a str,
    parameters: Option<&'a Value>,
}
