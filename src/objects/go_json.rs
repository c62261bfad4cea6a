//! A claim spec (or a template's) as the kube-apiserver prints it in the
//! 1.36 "field is immutable" error: its internal Go structure through
//! `encoding/json`.
//! The internal types carry no JSON tags, so fields are named as in Go
//! (`Devices`, `DeviceClassName`), in declaration order, every field
//! present, nil pointers and slices `null`; strings escape `<`, `>` and `&`
//! as `encoding/json` does.
//!
//! What the typed model cannot tell apart is printed as the common case:
//! an empty list as `null` (absent, which is how clients send it), opaque
//! parameters with their keys sorted (Go keeps the client's bytes).
//! Capacity quantities print as Go's `String()` does (`1536Mi` for `1.5Gi`).

use std::fmt::Write as _;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::ClaimVersion;
use super::claim::{
    CapacityRequirements, ClaimSpec, DeviceClaimConfiguration, DeviceConstraint, DeviceRequest, DeviceSelector,
    DeviceSubRequest, DeviceToleration, ExactDeviceRequest,
};

/// `json.Marshal(resource.ResourceClaimSpec)`.
pub fn claim_spec(spec: &ClaimSpec) -> String {
    let mut out = String::new();
    write_claim_spec(&mut out, spec);
    out
}

/// `json.Marshal(resource.ResourceClaimTemplateSpec)`: the embedded
/// `metav1.ObjectMeta` is tagged, so its fields come first in their JSON
/// names (empty ones left out, but never `creationTimestamp`, a struct),
/// then `Spec`. Only the metadata a template's claims may carry is printed.
pub fn claim_template_spec(metadata: &ObjectMeta, spec: &ClaimSpec) -> String {
    let mut out = String::from("{");
    for (name, value) in [
        ("name", &metadata.name),
        ("generateName", &metadata.generate_name),
        ("namespace", &metadata.namespace),
    ] {
        if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
            string(&mut out, name);
            out.push(':');
            string(&mut out, value);
            out.push(',');
        }
    }
    out.push_str("\"creationTimestamp\":null");
    for (name, map) in [("labels", &metadata.labels), ("annotations", &metadata.annotations)] {
        if let Some(map) = map.as_ref().filter(|m| !m.is_empty()) {
            out.push(',');
            string(&mut out, name);
            out.push_str(":{");
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(&mut out, k);
                out.push(':');
                string(&mut out, v);
            }
            out.push('}');
        }
    }
    out.push_str(",\"Spec\":");
    write_claim_spec(&mut out, spec);
    out.push('}');
    out
}

/// A request as declarative validation shows a repeated one: the
/// versioned Go type through `encoding/json`, JSON names, declaration
/// order, empty optional fields left out. v1 and v1beta2 nest the device
/// fields under `exactly`; v1beta1 has them on the request.
pub fn versioned_request(r: &DeviceRequest, version: ClaimVersion) -> String {
    let mut out = String::from("{\"name\":");
    string(&mut out, &r.name);
    match version {
        ClaimVersion::V1 | ClaimVersion::V1beta2 => {
            if let Some(e) = &r.exactly {
                out.push_str(",\"exactly\":{\"deviceClassName\":");
                string(&mut out, &e.device_class_name);
                device_fields(&mut out, &e.selectors, &e.allocation_mode, e.count, e.admin_access);
                device_tail(&mut out, &e.tolerations, e.capacity.as_ref());
                out.push('}');
            }
            first_available(&mut out, &r.first_available);
        }
        ClaimVersion::V1beta1 => {
            let e = r.exactly.clone().unwrap_or_default();
            if !e.device_class_name.is_empty() {
                out.push_str(",\"deviceClassName\":");
                string(&mut out, &e.device_class_name);
            }
            device_fields(&mut out, &e.selectors, &e.allocation_mode, e.count, e.admin_access);
            first_available(&mut out, &r.first_available);
            device_tail(&mut out, &e.tolerations, e.capacity.as_ref());
        }
    }
    out.push('}');
    out
}

/// A subrequest as declarative validation shows a repeated one (the same
/// shape in every version).
pub fn versioned_subrequest(s: &DeviceSubRequest) -> String {
    let mut out = String::from("{\"name\":");
    string(&mut out, &s.name);
    out.push_str(",\"deviceClassName\":");
    string(&mut out, &s.device_class_name);
    device_fields(&mut out, &s.selectors, &s.allocation_mode, s.count, None);
    device_tail(&mut out, &s.tolerations, s.capacity.as_ref());
    out.push('}');
    out
}

fn first_available(out: &mut String, subs: &[DeviceSubRequest]) {
    if subs.is_empty() {
        return;
    }
    out.push_str(",\"firstAvailable\":[");
    for (i, s) in subs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&versioned_subrequest(s));
    }
    out.push(']');
}

/// `selectors`, `allocationMode`, `count`, `adminAccess`, each left out
/// when empty (`omitempty`).
fn device_fields(out: &mut String, selectors: &[DeviceSelector], mode: &str, count: i64, admin_access: Option<bool>) {
    if !selectors.is_empty() {
        out.push_str(",\"selectors\":[");
        for (i, s) in selectors.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match &s.cel {
                Some(cel) => {
                    out.push_str("{\"cel\":{\"expression\":");
                    string(out, &cel.expression);
                    out.push_str("}}");
                }
                None => out.push_str("{}"),
            }
        }
        out.push(']');
    }
    if !mode.is_empty() {
        out.push_str(",\"allocationMode\":");
        string(out, mode);
    }
    if count != 0 {
        let _ = write!(out, ",\"count\":{count}");
    }
    if let Some(admin) = admin_access {
        let _ = write!(out, ",\"adminAccess\":{admin}");
    }
}

/// `tolerations` and `capacity`, each left out when empty.
fn device_tail(out: &mut String, tolerations: &[DeviceToleration], capacity: Option<&CapacityRequirements>) {
    if !tolerations.is_empty() {
        out.push_str(",\"tolerations\":[");
        for (i, t) in tolerations.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let mut fields = Vec::new();
            for (name, value) in [
                ("key", &t.key),
                ("operator", &t.operator),
                ("value", &t.value),
                ("effect", &t.effect),
            ] {
                if !value.is_empty() {
                    let mut f = String::new();
                    string(&mut f, name);
                    f.push(':');
                    string(&mut f, value);
                    fields.push(f);
                }
            }
            if let Some(seconds) = t.toleration_seconds {
                fields.push(format!("\"tolerationSeconds\":{seconds}"));
            }
            out.push('{');
            out.push_str(&fields.join(","));
            out.push('}');
        }
        out.push(']');
    }
    if let Some(c) = capacity {
        out.push_str(",\"capacity\":{");
        if !c.requests.is_empty() {
            out.push_str("\"requests\":");
            quantities(out, c);
        }
        out.push('}');
    }
}

fn write_claim_spec(out: &mut String, spec: &ClaimSpec) {
    let d = &spec.devices;
    out.push_str("{\"Devices\":{\"Requests\":");
    list(out, &d.requests, request);
    out.push_str(",\"Constraints\":");
    list(out, &d.constraints, constraint);
    out.push_str(",\"Config\":");
    list(out, &d.config, config);
    out.push_str("}}");
}

fn request(out: &mut String, r: &DeviceRequest) {
    out.push_str("{\"Name\":");
    string(out, &r.name);
    out.push_str(",\"Exactly\":");
    match &r.exactly {
        Some(exactly) => exact(out, exactly),
        None => out.push_str("null"),
    }
    out.push_str(",\"FirstAvailable\":");
    list(out, &r.first_available, subrequest);
    out.push('}');
}

fn exact(out: &mut String, e: &ExactDeviceRequest) {
    out.push_str("{\"DeviceClassName\":");
    string(out, &e.device_class_name);
    out.push_str(",\"Selectors\":");
    list(out, &e.selectors, selector);
    out.push_str(",\"AllocationMode\":");
    string(out, &e.allocation_mode);
    let _ = write!(out, ",\"Count\":{},\"AdminAccess\":", e.count);
    match e.admin_access {
        Some(b) => {
            let _ = write!(out, "{b}");
        }
        None => out.push_str("null"),
    }
    out.push_str(",\"Tolerations\":");
    list(out, &e.tolerations, toleration);
    out.push_str(",\"Capacity\":");
    capacity(out, e.capacity.as_ref());
    out.push('}');
}

fn subrequest(out: &mut String, s: &DeviceSubRequest) {
    out.push_str("{\"Name\":");
    string(out, &s.name);
    out.push_str(",\"DeviceClassName\":");
    string(out, &s.device_class_name);
    out.push_str(",\"Selectors\":");
    list(out, &s.selectors, selector);
    out.push_str(",\"AllocationMode\":");
    string(out, &s.allocation_mode);
    let _ = write!(out, ",\"Count\":{}", s.count);
    out.push_str(",\"Tolerations\":");
    list(out, &s.tolerations, toleration);
    out.push_str(",\"Capacity\":");
    capacity(out, s.capacity.as_ref());
    out.push('}');
}

fn selector(out: &mut String, s: &DeviceSelector) {
    out.push_str("{\"CEL\":");
    match &s.cel {
        Some(cel) => {
            out.push_str("{\"Expression\":");
            string(out, &cel.expression);
            out.push('}');
        }
        None => out.push_str("null"),
    }
    out.push('}');
}

fn toleration(out: &mut String, t: &DeviceToleration) {
    out.push_str("{\"Key\":");
    string(out, &t.key);
    out.push_str(",\"Operator\":");
    string(out, &t.operator);
    out.push_str(",\"Value\":");
    string(out, &t.value);
    out.push_str(",\"Effect\":");
    string(out, &t.effect);
    out.push_str(",\"TolerationSeconds\":");
    match t.toleration_seconds {
        Some(s) => {
            let _ = write!(out, "{s}");
        }
        None => out.push_str("null"),
    }
    out.push('}');
}

fn capacity(out: &mut String, c: Option<&CapacityRequirements>) {
    let Some(c) = c else {
        out.push_str("null");
        return;
    };
    out.push_str("{\"Requests\":");
    if c.requests.is_empty() {
        out.push_str("null");
    } else {
        quantities(out, c);
    }
    out.push('}');
}

/// The requested quantities, by name: a BTreeMap, so in sorted order, as Go
/// prints a map.
fn quantities(out: &mut String, c: &CapacityRequirements) {
    out.push('{');
    for (i, (name, quantity)) in c.requests.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        string(out, name);
        out.push(':');
        string(out, &quantity.to_string());
    }
    out.push('}');
}

fn constraint(out: &mut String, c: &DeviceConstraint) {
    out.push_str("{\"Requests\":");
    list(out, &c.requests, |out, r| string(out, r));
    out.push_str(",\"MatchAttribute\":");
    optional_string(out, c.match_attribute.as_deref());
    out.push_str(",\"DistinctAttribute\":");
    optional_string(out, c.distinct_attribute.as_deref());
    out.push('}');
}

/// `DeviceConfiguration` is embedded, so its `Opaque` sits beside
/// `Requests`.
fn config(out: &mut String, c: &DeviceClaimConfiguration) {
    out.push_str("{\"Requests\":");
    list(out, &c.requests, |out, r| string(out, r));
    out.push_str(",\"Opaque\":");
    match &c.opaque {
        Some(opaque) => {
            out.push_str("{\"Driver\":");
            string(out, &opaque.driver);
            out.push_str(",\"Parameters\":");
            match &opaque.parameters {
                // RawExtension: the JSON itself, compacted and escaped.
                Some(parameters) => string_escaped_json(out, parameters),
                None => out.push_str("null"),
            }
            out.push('}');
        }
        None => out.push_str("null"),
    }
    out.push('}');
}

fn optional_string(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => string(out, s),
        None => out.push_str("null"),
    }
}

fn list<T>(out: &mut String, items: &[T], mut item: impl FnMut(&mut String, &T)) {
    if items.is_empty() {
        out.push_str("null");
        return;
    }
    out.push('[');
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        item(out, it);
    }
    out.push(']');
}

/// A JSON value re-encoded with `encoding/json`'s escaping.
fn string_escaped_json(out: &mut String, value: &Value) {
    match value {
        Value::String(s) => string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string_escaped_json(out, v);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(out, k);
                out.push(':');
                string_escaped_json(out, v);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// A string as `encoding/json` writes it: `"`, `\\`, `\n`, `\r`, `\t`
/// escaped by name, other control characters and `<`, `>`, `&`, U+2028,
/// U+2029 as `\u00XX`.
fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::claim::{CelDeviceSelector, DeviceClaim, OpaqueDeviceConfiguration};

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
                        parameters: Some(serde_json::json!({"z": 1, "a": "<&>"})),
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
}
