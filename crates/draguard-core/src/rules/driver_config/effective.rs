//! The effective configuration of each request of a claim: the configs of
//! its device class first, then the claim's own that name it (or name no
//! request), each in list order. That is the order the allocator records
//! them in the allocation result (class configs with `source: FromClass`
//! before claim configs, kubernetes v1.34
//! staging/src/k8s.io/dynamic-resource-allocation/structured/allocator.go)
//! and the order the drivers apply them, a later config overriding an
//! earlier one (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/device_state.go
//! `getConfigResultsMap` at 95932046). `draguard explain --claims` shows it.

use serde::Serialize;
use serde_json::Value;

use crate::objects::ClaimSpec;
use crate::objects::claim::DeviceClaimConfiguration;

/// One config as a request gets it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// Where it comes from: `DeviceClass/<name> spec.config[i]`, or the
    /// claim's `spec.devices.config[i]`.
    pub source: String,
    pub driver: String,
    pub parameters: Value,
}

/// The configs one request (or one `firstAvailable` alternative,
/// `main/sub`) gets, in the order the driver applies them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestConfigs {
    pub request: String,
    pub device_class: String,
    /// False when the class was not given: its configs are unknown.
    pub class_known: bool,
    pub configs: Vec<Applied>,
}

/// Every request's effective configs. `class_configs`: a class's configs
/// by name, `None` for a class not given. `spec_path`: where the claim's
/// configs are (`spec.devices.config`, or `spec.spec.devices.config` in a
/// template).
pub fn effective(
    spec: &ClaimSpec,
    spec_path: &str,
    class_configs: &dyn Fn(&str) -> Option<Vec<DeviceClaimConfiguration>>,
) -> Vec<RequestConfigs> {
    let mut out = Vec::new();
    for request in &spec.devices.requests {
        let mut alternatives: Vec<(String, &str)> = Vec::new();
        match &request.exactly {
            Some(e) => alternatives.push((request.name.clone(), &e.device_class_name)),
            None => {
                for sub in &request.first_available {
                    alternatives.push((format!("{}/{}", request.name, sub.name), &sub.device_class_name));
                }
            }
        }
        for (name, class) in alternatives {
            let from_class = class_configs(class);
            let mut configs: Vec<Applied> = from_class
                .iter()
                .flatten()
                .enumerate()
                .filter_map(|(i, c)| applied(c, format!("DeviceClass/{class} spec.config[{i}]")))
                .collect();
            for (i, c) in spec.devices.config.iter().enumerate() {
                let names_it = c.requests.is_empty() || c.requests.iter().any(|r| *r == request.name || *r == name);
                if names_it && let Some(a) = applied(c, format!("{spec_path}.devices.config[{i}]")) {
                    configs.push(a);
                }
            }
            out.push(RequestConfigs {
                request: name,
                device_class: class.to_owned(),
                class_known: from_class.is_some(),
                configs,
            });
        }
    }
    out
}

fn applied(c: &DeviceClaimConfiguration, source: String) -> Option<Applied> {
    let opaque = c.opaque.as_ref()?;
    Some(Applied {
        source,
        driver: opaque.driver.clone(),
        parameters: opaque.parameters.as_deref().cloned().unwrap_or(Value::Null),
    })
}

/// The text `explain --claims` prints for one claim.
pub fn render(object: &str, requests: &[RequestConfigs]) -> String {
    let mut out = format!("{object}\n");
    for r in requests {
        let unknown = if r.class_known {
            ""
        } else {
            ", not given: its configs are unknown"
        };
        out.push_str(&format!(
            "  request {} (class {}{unknown}):\n",
            r.request, r.device_class
        ));
        if r.configs.is_empty() {
            out.push_str("    no config\n");
        }
        for (i, c) in r.configs.iter().enumerate() {
            out.push_str(&format!(
                "    {}. {} ({}): {}\n",
                i + 1,
                c.source,
                c.driver,
                c.parameters
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::objects::{ClaimVersion, ObjectJson};

    #[test]
    fn class_configs_come_first_then_the_claims_that_name_the_request() {
        let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
        "spec": {"devices": {
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
                {"name": "nic", "firstAvailable": [{"name": "fast", "deviceClassName": "nic.example.com"}]}
            ],
            "config": [
                {"opaque": {"driver": "gpu.nvidia.com", "parameters": {"all": true}}},
                {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {"gpu": true}}},
                {"requests": ["nic/fast"], "opaque": {"driver": "nic.example.com", "parameters": {"fast": true}}}
            ]}}});
        let spec = ClaimSpec::decode_claim(&ObjectJson::Tree(claim), ClaimVersion::V1)
            .expect("claim")
            .spec;
        let class = |name: &str| {
            (name == "gpu.nvidia.com").then(|| {
                vec![DeviceClaimConfiguration {
                    requests: Vec::new(),
                    opaque: Some(crate::objects::claim::OpaqueDeviceConfiguration {
                        driver: "gpu.nvidia.com".into(),
                        parameters: Some(json!({"class": true}).into()),
                    }),
                }]
            })
        };
        let text = render("ResourceClaim/c", &effective(&spec, "spec", &class));
        assert_eq!(
            text,
            "ResourceClaim/c
  request gpu (class gpu.nvidia.com):
    1. DeviceClass/gpu.nvidia.com spec.config[0] (gpu.nvidia.com): {\"class\":true}
    2. spec.devices.config[0] (gpu.nvidia.com): {\"all\":true}
    3. spec.devices.config[1] (gpu.nvidia.com): {\"gpu\":true}
  request nic/fast (class nic.example.com, not given: its configs are unknown):
    1. spec.devices.config[0] (gpu.nvidia.com): {\"all\":true}
    2. spec.devices.config[2] (nic.example.com): {\"fast\":true}
"
        );
    }
}
