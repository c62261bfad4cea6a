//! The versioned Go types of `resource.k8s.io` as `encoding/json` prints
//! them, as declarative validation shows a repeated request: JSON names,
//! declaration order, empty optional fields left out (`omitempty`). v1 and
//! v1beta2 nest the device fields under `exactly`; v1beta1 has them on the
//! request (with `firstAvailable` before `tolerations`, as it declares them).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::objects::claim::{
    CapacityRequirements, DeviceRequest, DeviceSelector, DeviceSubRequest, DeviceToleration, ExactDeviceRequest,
};

fn is_zero(n: &i64) -> bool {
    *n == 0
}

fn no_tolerations(items: &&[DeviceToleration]) -> bool {
    items.is_empty()
}

/// A v1 or v1beta2 `DeviceRequest`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RequestV1<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    exactly: Option<ExactV1<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    first_available: Vec<SubRequest<'a>>,
}

impl<'a> RequestV1<'a> {
    pub(super) fn new(r: &'a DeviceRequest) -> Self {
        RequestV1 {
            name: &r.name,
            exactly: r.exactly.as_ref().map(ExactV1::new),
            first_available: r.first_available.iter().map(SubRequest::new).collect(),
        }
    }
}

/// `ExactDeviceRequest`: `deviceClassName` is required, so always there.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ExactV1<'a> {
    device_class_name: &'a str,
    #[serde(flatten)]
    device: DeviceFields<'a>,
    #[serde(flatten)]
    tail: Tail<'a>,
}

impl<'a> ExactV1<'a> {
    fn new(e: &'a ExactDeviceRequest) -> Self {
        ExactV1 {
            device_class_name: &e.device_class_name,
            device: DeviceFields::new(&e.selectors, &e.allocation_mode, e.count, e.admin_access),
            tail: Tail::new(&e.tolerations, e.capacity.as_ref()),
        }
    }
}

/// A v1beta1 `DeviceRequest`: the device fields on the request itself.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RequestV1beta1<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    device_class_name: &'a str,
    #[serde(flatten)]
    device: DeviceFields<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    first_available: Vec<SubRequest<'a>>,
    #[serde(flatten)]
    tail: Tail<'a>,
}

impl<'a> RequestV1beta1<'a> {
    pub(super) fn new(r: &'a DeviceRequest, exactly: &'a ExactDeviceRequest) -> Self {
        RequestV1beta1 {
            name: &r.name,
            device_class_name: &exactly.device_class_name,
            device: DeviceFields::new(
                &exactly.selectors,
                &exactly.allocation_mode,
                exactly.count,
                exactly.admin_access,
            ),
            first_available: r.first_available.iter().map(SubRequest::new).collect(),
            tail: Tail::new(&exactly.tolerations, exactly.capacity.as_ref()),
        }
    }
}

/// `DeviceSubRequest`, the same shape in every version.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SubRequest<'a> {
    name: &'a str,
    device_class_name: &'a str,
    #[serde(flatten)]
    device: DeviceFields<'a>,
    #[serde(flatten)]
    tail: Tail<'a>,
}

impl<'a> SubRequest<'a> {
    pub(super) fn new(s: &'a DeviceSubRequest) -> Self {
        SubRequest {
            name: &s.name,
            device_class_name: &s.device_class_name,
            device: DeviceFields::new(&s.selectors, &s.allocation_mode, s.count, None),
            tail: Tail::new(&s.tolerations, s.capacity.as_ref()),
        }
    }
}

/// `selectors`, `allocationMode`, `count`, `adminAccess`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeviceFields<'a> {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    selectors: Vec<Selector<'a>>,
    #[serde(skip_serializing_if = "str::is_empty")]
    allocation_mode: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    admin_access: Option<bool>,
}

impl<'a> DeviceFields<'a> {
    fn new(selectors: &'a [DeviceSelector], allocation_mode: &'a str, count: i64, admin_access: Option<bool>) -> Self {
        DeviceFields {
            selectors: selectors.iter().map(Selector::new).collect(),
            allocation_mode,
            count,
            admin_access,
        }
    }
}

/// `tolerations` and `capacity`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tail<'a> {
    /// The model's own serialization is the versioned one.
    #[serde(skip_serializing_if = "no_tolerations")]
    tolerations: &'a [DeviceToleration],
    #[serde(skip_serializing_if = "Option::is_none")]
    capacity: Option<Capacity>,
}

impl<'a> Tail<'a> {
    fn new(tolerations: &'a [DeviceToleration], capacity: Option<&CapacityRequirements>) -> Self {
        Tail {
            tolerations,
            capacity: capacity.map(|c| Capacity {
                requests: (!c.requests.is_empty()).then(|| super::quantities(c)),
            }),
        }
    }
}

#[derive(Serialize)]
struct Capacity {
    #[serde(skip_serializing_if = "Option::is_none")]
    requests: Option<BTreeMap<String, String>>,
}

/// `{"cel":{"expression":...}}`, or `{}` for a selector without one.
#[derive(Serialize)]
struct Selector<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    cel: Option<Cel<'a>>,
}

impl<'a> Selector<'a> {
    fn new(s: &'a DeviceSelector) -> Self {
        Selector {
            cel: s.cel.as_ref().map(|cel| Cel {
                expression: &cel.expression,
            }),
        }
    }
}

#[derive(Serialize)]
struct Cel<'a> {
    expression: &'a str,
}
