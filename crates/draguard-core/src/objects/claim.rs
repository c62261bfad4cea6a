//! The internal model of a ResourceClaim spec, as `pkg/apis/resource`
//! holds it after decoding: every served version (v1, v1beta2, v1beta1)
//! is converted into this one shape, and the apiserver's defaults are
//! applied, before any rule looks at it. Validation paths are internal
//! paths, exactly as the apiserver reports them for every version.

use serde::Deserialize;
use serde_json::Value;

use super::{DecodeError, ObjectJson, Whole, nullable};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClaimSpec {
    pub devices: DeviceClaim,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceClaim {
    pub requests: Vec<DeviceRequest>,
    pub constraints: Vec<DeviceConstraint>,
    pub config: Vec<DeviceClaimConfiguration>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceRequest {
    pub name: String,
    pub exactly: Option<ExactDeviceRequest>,
    pub first_available: Vec<DeviceSubRequest>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExactDeviceRequest {
    #[serde(deserialize_with = "nullable")]
    pub device_class_name: String,
    #[serde(deserialize_with = "nullable")]
    pub selectors: Vec<DeviceSelector>,
    #[serde(deserialize_with = "nullable")]
    pub allocation_mode: String,
    #[serde(deserialize_with = "nullable")]
    pub count: i64,
    pub admin_access: Option<bool>,
    #[serde(deserialize_with = "nullable")]
    pub tolerations: Vec<DeviceToleration>,
    pub capacity: Option<CapacityRequirements>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeviceSubRequest {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable")]
    pub device_class_name: String,
    #[serde(deserialize_with = "nullable")]
    pub selectors: Vec<DeviceSelector>,
    #[serde(deserialize_with = "nullable")]
    pub allocation_mode: String,
    #[serde(deserialize_with = "nullable")]
    pub count: i64,
    #[serde(deserialize_with = "nullable")]
    pub tolerations: Vec<DeviceToleration>,
    pub capacity: Option<CapacityRequirements>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CapacityRequirements {
    #[serde(deserialize_with = "nullable")]
    pub requests: std::collections::BTreeMap<String, k8s_quantity::Quantity>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeviceSelector {
    pub cel: Option<CelDeviceSelector>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CelDeviceSelector {
    #[serde(deserialize_with = "nullable")]
    pub expression: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeviceToleration {
    #[serde(deserialize_with = "nullable", skip_serializing_if = "String::is_empty")]
    pub key: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "String::is_empty")]
    pub operator: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "String::is_empty")]
    pub value: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "String::is_empty")]
    pub effect: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeviceConstraint {
    #[serde(deserialize_with = "nullable")]
    pub requests: Vec<String>,
    pub match_attribute: Option<String>,
    pub distinct_attribute: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeviceClaimConfiguration {
    #[serde(deserialize_with = "nullable")]
    pub requests: Vec<String>,
    pub opaque: Option<OpaqueDeviceConfiguration>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OpaqueDeviceConfiguration {
    #[serde(deserialize_with = "nullable")]
    pub driver: String,
    /// `runtime.RawExtension`: JSON `null` and absence both decode to nothing.
    pub parameters: Option<super::parameters::Parameters>,
}

/// The request shape of v1 and v1beta2: `exactly` or `firstAvailable`.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct StructuredRequest {
    #[serde(deserialize_with = "nullable")]
    name: String,
    exactly: Option<ExactDeviceRequest>,
    #[serde(deserialize_with = "nullable")]
    first_available: Vec<DeviceSubRequest>,
}

/// The flattened request shape of v1beta1.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct FlatRequest {
    #[serde(deserialize_with = "nullable")]
    name: String,
    #[serde(deserialize_with = "nullable")]
    device_class_name: String,
    selectors: Option<Vec<DeviceSelector>>,
    #[serde(deserialize_with = "nullable")]
    allocation_mode: String,
    #[serde(deserialize_with = "nullable")]
    count: i64,
    admin_access: Option<bool>,
    tolerations: Option<Vec<DeviceToleration>>,
    capacity: Option<CapacityRequirements>,
    #[serde(deserialize_with = "nullable")]
    first_available: Vec<DeviceSubRequest>,
}

#[derive(Deserialize, Default)]
#[serde(
    rename_all = "camelCase",
    default,
    bound(deserialize = "R: Deserialize<'de> + Default")
)]
struct WireDeviceClaim<R> {
    #[serde(deserialize_with = "nullable")]
    requests: Vec<R>,
    #[serde(deserialize_with = "nullable")]
    constraints: Vec<DeviceConstraint>,
    #[serde(deserialize_with = "nullable")]
    config: Vec<DeviceClaimConfiguration>,
}

#[derive(Deserialize, Default)]
#[serde(default, bound(deserialize = "R: Deserialize<'de> + Default"))]
struct WireClaimSpec<R> {
    #[serde(deserialize_with = "nullable")]
    devices: WireDeviceClaim<R>,
}

/// The served API versions of `resource.k8s.io` that carry claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimVersion {
    V1,
    V1beta2,
    V1beta1,
}

impl ClaimVersion {
    pub fn parse(version: &str) -> Option<Self> {
        match version {
            "v1" => Some(ClaimVersion::V1),
            "v1beta2" => Some(ClaimVersion::V1beta2),
            "v1beta1" => Some(ClaimVersion::V1beta1),
            _ => None,
        }
    }
}

impl ClaimSpec {
    /// Decodes a claim spec of the given version, converts it to the internal
    /// shape and applies the apiserver's defaults (`SetDefaults_*`).
    pub fn decode(spec: &Value, version: ClaimVersion) -> Result<Self, DecodeError> {
        Ok(match version {
            ClaimVersion::V1 | ClaimVersion::V1beta2 => Self::from_structured(super::decode(spec)?),
            ClaimVersion::V1beta1 => Self::from_flat(super::decode(spec)?),
        })
    }

    /// A ResourceClaim: its metadata and spec, decoded in one pass.
    pub fn decode_claim(json: &ObjectJson, version: ClaimVersion) -> Result<Whole<Self>, DecodeError> {
        Ok(match version {
            ClaimVersion::V1 | ClaimVersion::V1beta2 => {
                let w: Whole<WireClaimSpec<StructuredRequest>> = json.decode()?;
                Whole {
                    metadata: w.metadata,
                    spec: Self::from_structured(w.spec),
                }
            }
            ClaimVersion::V1beta1 => {
                let w: Whole<WireClaimSpec<FlatRequest>> = json.decode()?;
                Whole {
                    metadata: w.metadata,
                    spec: Self::from_flat(w.spec),
                }
            }
        })
    }

    /// A ResourceClaimTemplate: its metadata, and the metadata and spec of
    /// the claims it stamps, decoded in one pass.
    pub fn decode_template(json: &ObjectJson, version: ClaimVersion) -> Result<Whole<Whole<Self>>, DecodeError> {
        fn inner<R>(
            w: Whole<Whole<WireClaimSpec<R>>>,
            convert: fn(WireClaimSpec<R>) -> ClaimSpec,
        ) -> Whole<Whole<ClaimSpec>> {
            Whole {
                metadata: w.metadata,
                spec: Whole {
                    metadata: w.spec.metadata,
                    spec: convert(w.spec.spec),
                },
            }
        }
        Ok(match version {
            ClaimVersion::V1 | ClaimVersion::V1beta2 => inner(json.decode()?, Self::from_structured),
            ClaimVersion::V1beta1 => inner(json.decode()?, Self::from_flat),
        })
    }

    fn from_structured(wire: WireClaimSpec<StructuredRequest>) -> Self {
        let WireDeviceClaim {
            requests,
            constraints,
            config,
        } = wire.devices;
        let requests = requests
            .into_iter()
            .map(|r| DeviceRequest {
                name: r.name,
                exactly: r.exactly,
                first_available: r.first_available,
            })
            .collect();
        Self::defaulted(DeviceClaim {
            requests,
            constraints,
            config,
        })
    }

    fn from_flat(wire: WireClaimSpec<FlatRequest>) -> Self {
        let WireDeviceClaim {
            requests,
            constraints,
            config,
        } = wire.devices;
        Self::defaulted(DeviceClaim {
            requests: requests.into_iter().map(convert_v1beta1_request).collect(),
            constraints,
            config,
        })
    }

    fn defaulted(devices: DeviceClaim) -> Self {
        let mut spec = ClaimSpec { devices };
        spec.apply_defaults();
        spec
    }

    /// `SetDefaults_ExactDeviceRequest`, `SetDefaults_DeviceSubRequest` and the
    /// `+default="Equal"` of toleration operators.
    fn apply_defaults(&mut self) {
        for request in &mut self.devices.requests {
            if let Some(exactly) = &mut request.exactly {
                default_allocation(&mut exactly.allocation_mode, &mut exactly.count);
                default_tolerations(&mut exactly.tolerations);
            }
            for sub in &mut request.first_available {
                default_allocation(&mut sub.allocation_mode, &mut sub.count);
                default_tolerations(&mut sub.tolerations);
            }
        }
    }

    /// Every toleration list of the claim with the path it lives at:
    /// `exactly.tolerations` and each `firstAvailable[j].tolerations`.
    pub fn toleration_lists(&self) -> Vec<(TolerationPlace, &[DeviceToleration])> {
        let mut lists = Vec::new();
        for (i, request) in self.devices.requests.iter().enumerate() {
            if let Some(exactly) = &request.exactly {
                lists.push((TolerationPlace::Exactly { request: i }, exactly.tolerations.as_slice()));
            }
            for (j, sub) in request.first_available.iter().enumerate() {
                lists.push((TolerationPlace::Sub { request: i, sub: j }, sub.tolerations.as_slice()));
            }
        }
        lists
    }
}

/// Where a toleration list lives inside a claim spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TolerationPlace {
    Exactly { request: usize },
    Sub { request: usize, sub: usize },
}

pub const ALLOCATION_MODE_EXACT_COUNT: &str = "ExactCount";
pub const ALLOCATION_MODE_ALL: &str = "All";

fn default_allocation(mode: &mut String, count: &mut i64) {
    if mode.is_empty() {
        *mode = ALLOCATION_MODE_EXACT_COUNT.to_owned();
    }
    if mode == ALLOCATION_MODE_EXACT_COUNT && *count == 0 {
        *count = 1;
    }
}

fn default_tolerations(tolerations: &mut [DeviceToleration]) {
    for t in tolerations {
        if t.operator.is_empty() {
            t.operator = "Equal".to_owned();
        }
    }
}

/// v1beta1 `Convert_v1beta1_DeviceRequest_To_resource_DeviceRequest`: any main
/// request field makes an `exactly`, even beside `firstAvailable`
/// (`hasAnyMainRequestFieldsSet`). `SetDefaults_DeviceRequest` runs before the
/// conversion and only when `deviceClassName` is set.
fn convert_v1beta1_request(mut r: FlatRequest) -> DeviceRequest {
    if !r.device_class_name.is_empty() {
        default_allocation(&mut r.allocation_mode, &mut r.count);
    }
    let main_fields_set = !r.device_class_name.is_empty()
        || r.selectors.is_some()
        || !r.allocation_mode.is_empty()
        || r.count != 0
        || r.admin_access.is_some()
        || r.tolerations.is_some()
        || r.capacity.is_some();
    let exactly = main_fields_set.then(|| ExactDeviceRequest {
        device_class_name: r.device_class_name,
        selectors: r.selectors.unwrap_or_default(),
        allocation_mode: r.allocation_mode,
        count: r.count,
        admin_access: r.admin_access,
        tolerations: r.tolerations.unwrap_or_default(),
        capacity: r.capacity,
    });
    DeviceRequest {
        name: r.name,
        exactly,
        first_available: r.first_available,
    }
}
