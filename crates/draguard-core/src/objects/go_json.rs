//! Values printed as the kube-apiserver prints them in its messages: a
//! claim spec (or a template's) in the 1.36 "field is immutable" error, its
//! internal Go structure through `encoding/json` (internal.rs); a repeated
//! request or subrequest as declarative validation shows it, the versioned
//! Go type (versioned.rs). Serde shadows of the model give the shapes,
//! GoEscape (go_escape.rs) Go's string escapes.
//! Capacity quantities print as Go's `String()` does (`1536Mi` for `1.5Gi`).

mod go_escape;
mod internal;
mod versioned;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use super::ClaimVersion;
use super::claim::{CapacityRequirements, ClaimSpec, DeviceRequest, DeviceSubRequest, ExactDeviceRequest};
use go_escape::GoEscape;

/// `json.Marshal(resource.ResourceClaimSpec)`.
pub fn claim_spec(spec: &ClaimSpec) -> String {
    marshal(&internal::ClaimSpecGo::new(spec))
}

/// `json.Marshal(resource.ResourceClaimTemplateSpec)`: the embedded
/// `metav1.ObjectMeta` is tagged, so its fields come first in their JSON
/// names (empty ones left out, but never `creationTimestamp`, a struct),
/// then `Spec`. Only the metadata a template's claims may carry is printed.
pub fn claim_template_spec(metadata: &ObjectMeta, spec: &ClaimSpec) -> String {
    let map = |m: &Option<BTreeMap<String, String>>| m.as_ref().filter(|m| !m.is_empty()).cloned();
    marshal(&TemplateSpecGo {
        name: non_empty(&metadata.name),
        generate_name: non_empty(&metadata.generate_name),
        namespace: non_empty(&metadata.namespace),
        creation_timestamp: (),
        labels: map(&metadata.labels),
        annotations: map(&metadata.annotations),
        spec: internal::ClaimSpecGo::new(spec),
    })
}

fn non_empty(s: &Option<String>) -> Option<&str> {
    s.as_deref().filter(|v| !v.is_empty())
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TemplateSpecGo<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generate_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    /// A zero `metav1.Time` is a struct, which `omitempty` never omits;
    /// it prints as `null`.
    creation_timestamp: (),
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(rename = "Spec")]
    spec: internal::ClaimSpecGo<'a>,
}

/// A request as declarative validation shows a repeated one.
pub fn versioned_request(r: &DeviceRequest, version: ClaimVersion) -> String {
    match version {
        ClaimVersion::V1 | ClaimVersion::V1beta2 => marshal(&versioned::RequestV1::new(r)),
        ClaimVersion::V1beta1 => {
            let none = ExactDeviceRequest::default();
            marshal(&versioned::RequestV1beta1::new(r, r.exactly.as_ref().unwrap_or(&none)))
        }
    }
}

/// A subrequest as declarative validation shows a repeated one (the same
/// shape in every version).
pub fn versioned_subrequest(s: &DeviceSubRequest) -> String {
    marshal(&versioned::SubRequest::new(s))
}

/// The requested quantities by name, printed: a BTreeMap, so in sorted
/// order, as Go prints a map.
fn quantities(c: &CapacityRequirements) -> BTreeMap<String, String> {
    c.requests
        .iter()
        .map(|(name, quantity)| (name.clone(), quantity.to_string()))
        .collect()
}

/// `json.Marshal` of a shadow. The shadows hold only strings, integers,
/// booleans, JSON values and string-keyed maps, and a `Vec` takes every
/// write, so serializing cannot fail; were it to, the message shows no
/// value rather than the webhook panicking.
fn marshal(value: &impl Serialize) -> String {
    let mut out = Vec::new();
    let written = value.serialize(&mut serde_json::Serializer::with_formatter(&mut out, GoEscape));
    match written {
        Ok(()) => String::from_utf8_lossy(&out).into_owned(),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::claim::{
        CelDeviceSelector, DeviceClaim, DeviceClaimConfiguration, DeviceConstraint, DeviceSelector, DeviceToleration,
        OpaqueDeviceConfiguration,
    };

    /// The value a real kube-apiserver v1.36.2 printed for conformance
    /// case 080 (a claim whose class changed to `foo2`).
    #[test]
    fn a_defaulted_request_prints_as_the_apiserver_printed_it() {
        let spec = ClaimSpec {
            devices: DeviceClaim {
                requests: vec![DeviceRequest {
                    name: "foo".into(),
                    exactly: Some(ExactDeviceRequest {
                        device_class_name: "foo2".into(),
                        allocation_mode: "ExactCount".into(),
                        count: 1,
                        ..Default::default()
                    }),
                    first_available: Vec::new(),
                }],
                ..Default::default()
            },
        };
        assert_eq!(
            claim_spec(&spec),
            r#"{"Devices":{"Requests":[{"Name":"foo","Exactly":{"DeviceClassName":"foo2","Selectors":null,"AllocationMode":"ExactCount","Count":1,"AdminAccess":null,"Tolerations":null,"Capacity":null},"FirstAvailable":null}],"Constraints":null,"Config":null}}"#
        );
    }

    #[test]
    fn a_template_prints_its_metadata_first() {
        let metadata = ObjectMeta {
            labels: Some([("team".to_owned(), "ml".to_owned())].into()),
            ..Default::default()
        };
        assert_eq!(
            claim_template_spec(&metadata, &ClaimSpec::default()),
            r#"{"creationTimestamp":null,"labels":{"team":"ml"},"Spec":{"Devices":{"Requests":null,"Constraints":null,"Config":null}}}"#
        );
    }

    #[test]
    fn every_part_prints_in_go_order_with_go_escapes() {
        let spec = ClaimSpec {
            devices: DeviceClaim {
                requests: vec![DeviceRequest {
                    name: "gpu".into(),
                    exactly: None,
                    first_available: vec![DeviceSubRequest {
                        name: "big".into(),
                        device_class_name: "c".into(),
                        selectors: vec![DeviceSelector {
                            cel: Some(CelDeviceSelector {
                                expression: "a < b && \"x\"\n".into(),
                            }),
                        }],
                        allocation_mode: "All".into(),
                        count: 0,
                        tolerations: vec![DeviceToleration {
                            key: "k".into(),
                            operator: "Exists".into(),
                            toleration_seconds: Some(30),
                            ..Default::default()
                        }],
                        capacity: Some(CapacityRequirements {
                            requests: [("mem".to_owned(), "1.5Gi".parse().expect("quantity"))].into(),
                        }),
                    }],
                }],
                constraints: vec![DeviceConstraint {
                    requests: vec!["gpu".into()],
                    match_attribute: Some("d.example.com/x".into()),
                    distinct_attribute: None,
                }],
                config: vec![DeviceClaimConfiguration {
                    requests: Vec::new(),
                    opaque: Some(OpaqueDeviceConfiguration {
                        driver: "d.example.com".into(),
                        parameters: Some(serde_json::json!({"z": 1, "a": "<&>"}).into()),
                    }),
                }],
            },
        };
        assert_eq!(
            claim_spec(&spec),
            concat!(
                r#"{"Devices":{"Requests":[{"Name":"gpu","Exactly":null,"FirstAvailable":[{"Name":"big","DeviceClassName":"c","#,
                r#""Selectors":[{"CEL":{"Expression":"a \u003c b \u0026\u0026 \"x\"\n"}}],"AllocationMode":"All","Count":0,"#,
                r#""Tolerations":[{"Key":"k","Operator":"Exists","Value":"","Effect":"","TolerationSeconds":30}],"#,
                r#""Capacity":{"Requests":{"mem":"1536Mi"}}}]}],"#,
                r#""Constraints":[{"Requests":["gpu"],"MatchAttribute":"d.example.com/x","DistinctAttribute":null}],"#,
                r#""Config":[{"Requests":null,"Opaque":{"Driver":"d.example.com","Parameters":{"a":"\u003c\u0026\u003e","z":1}}}]}}"#
            )
        );
    }

    /// One request in each version's shape. The expected texts are what the
    /// hand-written printer this replaced wrote for the same request.
    #[test]
    fn a_request_prints_in_each_versions_shape() {
        let tolerations = |key: &str| {
            vec![DeviceToleration {
                key: key.into(),
                effect: "NoExecute".into(),
                toleration_seconds: Some(5),
                ..Default::default()
            }]
        };
        let request = DeviceRequest {
            name: "r<".into(),
            exactly: Some(ExactDeviceRequest {
                device_class_name: String::new(),
                selectors: vec![DeviceSelector { cel: None }],
                allocation_mode: "ExactCount".into(),
                count: 3,
                admin_access: Some(false),
                tolerations: tolerations("k"),
                capacity: Some(CapacityRequirements::default()),
            }),
            first_available: vec![DeviceSubRequest {
                name: "s".into(),
                device_class_name: "c".into(),
                count: 0,
                tolerations: tolerations("a"),
                ..Default::default()
            }],
        };
        let exact = r#""selectors":[{}],"allocationMode":"ExactCount","count":3,"adminAccess":false"#;
        let exact_tail = r#""tolerations":[{"key":"k","effect":"NoExecute","tolerationSeconds":5}],"capacity":{}"#;
        let sub = r#"{"name":"s","deviceClassName":"c","tolerations":[{"key":"a","effect":"NoExecute","tolerationSeconds":5}]}"#;
        let v1 = format!(
            r#"{{"name":"r\u003c","exactly":{{"deviceClassName":"",{exact},{exact_tail}}},"firstAvailable":[{sub}]}}"#
        );
        assert_eq!(versioned_request(&request, ClaimVersion::V1), v1);
        assert_eq!(versioned_request(&request, ClaimVersion::V1beta2), v1);
        assert_eq!(
            versioned_request(&request, ClaimVersion::V1beta1),
            format!(r#"{{"name":"r\u003c",{exact},"firstAvailable":[{sub}],{exact_tail}}}"#)
        );
        assert_eq!(versioned_subrequest(&request.first_available[0]), sub);
        let bare = DeviceRequest {
            name: "r".into(),
            ..Default::default()
        };
        assert_eq!(versioned_request(&bare, ClaimVersion::V1), r#"{"name":"r"}"#);
        assert_eq!(versioned_request(&bare, ClaimVersion::V1beta1), r#"{"name":"r"}"#);
    }
}
