//! A policy's `sharing` rules on the drivers' configs of a claim (or of the
//! claims a template stamps): which sharing strategy each driver and class
//! may use, bounds on MPS settings, and no sharing settings on an
//! adminAccess request. The settings are read where NVIDIA's and the
//! example driver's configs put them (`parameters.sharing.strategy`,
//! `parameters.sharing.mpsConfig`); a config without them is not judged.
//! Violations follow the policy's mode, like its toleration rules.

use serde_json::Value;

use super::applicable::Applicable;
use super::model::{SharingAllow, SharingRules};
use super::{Selection, TolerationPolicy};
use crate::field::Path;
use crate::objects::ClaimSpec;
use crate::objects::claim::DeviceClaimConfiguration;
use crate::verdict::{Concept, Violation};

/// The strategies the drivers draguard knows define.
const STRATEGIES: [&str; 3] = ["TimeSlicing", "MPS", "SpacePartitioning"];

/// Lint of a policy's sharing rules: (field path, message).
pub fn lint(rules: &SharingRules) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, a) in rules.allow.iter().enumerate() {
        if a.driver.is_empty() {
            out.push((
                format!("spec.sharing.allow[{i}].driver"),
                "a driver name is required".into(),
            ));
        }
        for (j, s) in a.strategies.iter().enumerate() {
            if !STRATEGIES.contains(&s.as_str()) {
                out.push((
                    format!("spec.sharing.allow[{i}].strategies[{j}]"),
                    format!(
                        "unknown sharing strategy {s:?}: the drivers define {}",
                        STRATEGIES.join(", ")
                    ),
                ));
            }
        }
    }
    if let Some(p) = rules.mps.max_active_thread_percentage
        && !(0..=100).contains(&p)
    {
        out.push((
            "spec.sharing.mps.maxActiveThreadPercentage".into(),
            format!("{p} is not a percentage (0 to 100)"),
        ));
    }
    if let Some(q) = &rules.mps.max_pinned_device_memory
        && let Err(e) = k8s_quantity::Quantity::parse(q)
    {
        out.push(("spec.sharing.mps.maxPinnedDeviceMemory".into(), format!("{q:?}: {e}")));
    }
    out
}

/// What the applying policies say about the configs of `spec` (at
/// `spec_path`, `spec` of a claim or `spec.spec` of a template).
pub fn evaluate(applicable: &Applicable<'_>, spec: &ClaimSpec, spec_path: &Path) -> Vec<Violation> {
    let mut out = Vec::new();
    let governing: Vec<_> = applicable
        .policies
        .iter()
        .filter(|(p, _)| !p.spec.sharing.is_empty())
        .collect();
    if governing.is_empty() {
        return out;
    }
    let configs = spec_path.child("devices").child("config");
    for (i, config) in spec.devices.config.iter().enumerate() {
        let Some(opaque) = &config.opaque else { continue };
        let Some(sharing) = opaque
            .parameters
            .as_ref()
            .and_then(|p| p.get("sharing"))
            .filter(|s| s.is_object())
        else {
            continue;
        };
        let at = configs.index(i).child("opaque").child("parameters").child("sharing");
        let targets = targets(spec, config);
        for (p, selection) in &governing {
            let found = judge(&p.spec.sharing, &opaque.driver, sharing, &targets, &at);
            out.extend(
                found
                    .into_iter()
                    .map(|(field, why)| violation(p, selection, applicable.namespace, field, why)),
            );
        }
    }
    out
}

/// A request a config applies to: its device classes and whether it asks
/// for admin access.
struct Target {
    classes: Vec<String>,
    admin: bool,
}

/// The requests `config` applies to: those it names (`main` or
/// `main/sub`), every request when it names none.
fn targets(spec: &ClaimSpec, config: &DeviceClaimConfiguration) -> Vec<Target> {
    let named =
        |name: &str| config.requests.is_empty() || config.requests.iter().any(|r| r.split('/').next() == Some(name));
    spec.devices
        .requests
        .iter()
        .filter(|r| named(&r.name))
        .map(|r| match &r.exactly {
            Some(e) => Target {
                classes: vec![e.device_class_name.clone()],
                admin: e.admin_access == Some(true),
            },
            None => Target {
                classes: r
                    .first_available
                    .iter()
                    .filter(|s| {
                        config.requests.is_empty()
                            || config
                                .requests
                                .iter()
                                .any(|q| q == &r.name || *q == format!("{}/{}", r.name, s.name))
                    })
                    .map(|s| s.device_class_name.clone())
                    .collect(),
                admin: false,
            },
        })
        .collect()
}

/// Why one config's `sharing` breaks `rules`: (field, reason).
fn judge(rules: &SharingRules, driver: &str, sharing: &Value, targets: &[Target], at: &Path) -> Vec<(Path, String)> {
    let mut out = Vec::new();
    if rules.deny_on_admin_access && targets.iter().any(|t| t.admin) {
        out.push((
            at.clone(),
            "sharing settings on an adminAccess request are denied: they would replace the device owner's".to_owned(),
        ));
    }
    let strategy = sharing.get("strategy").and_then(Value::as_str).unwrap_or("");
    let entries: Vec<&SharingAllow> = rules.allow.iter().filter(|a| a.driver == driver).collect();
    if !entries.is_empty() && !strategy.is_empty() {
        for class in targets.iter().flat_map(|t| &t.classes) {
            let allowed: Vec<&str> = entries
                .iter()
                .filter(|a| a.device_classes.is_empty() || a.device_classes.contains(class))
                .flat_map(|a| a.strategies.iter().map(String::as_str))
                .collect();
            if !allowed.contains(&strategy) {
                let may = if allowed.is_empty() {
                    "none".to_owned()
                } else {
                    allowed.join(", ")
                };
                out.push((
                    at.child("strategy"),
                    format!("sharing strategy {strategy} is not allowed for {driver} devices of class {class:?} (allowed: {may})"),
                ));
                break;
            }
        }
    }
    if let Some(mps) = sharing.get("mpsConfig").filter(|m| m.is_object()) {
        let mps_at = at.child("mpsConfig");
        if let (Some(max), Some(p)) = (
            rules.mps.max_active_thread_percentage,
            mps.get("defaultActiveThreadPercentage").and_then(Value::as_i64),
        ) && p > max
        {
            out.push((
                mps_at.child("defaultActiveThreadPercentage"),
                format!("MPS active thread percentage {p} is more than the {max} allowed"),
            ));
        }
        if let Some(max) = rules.mps.max_pinned_device_memory.as_deref()
            && let Ok(limit) = k8s_quantity::Quantity::parse(max)
        {
            let mut over = |value: &Value, field: Path| {
                let text = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => return,
                };
                if let Ok(q) = k8s_quantity::Quantity::parse(text.trim())
                    && q.cmp(&limit) == std::cmp::Ordering::Greater
                {
                    out.push((
                        field,
                        format!("MPS pinned device memory {text} is more than the {max} allowed"),
                    ));
                }
            };
            if let Some(v) = mps.get("defaultPinnedDeviceMemoryLimit") {
                over(v, mps_at.child("defaultPinnedDeviceMemoryLimit"));
            }
            if let Some(per) = mps.get("defaultPerDevicePinnedMemoryLimit").and_then(Value::as_object) {
                let per_at = mps_at.child("defaultPerDevicePinnedMemoryLimit");
                for (device, v) in per {
                    over(v, per_at.key(device));
                }
            }
        }
    }
    out
}

fn violation(p: &TolerationPolicy, selection: &Selection, namespace: &str, field: Path, why: String) -> Violation {
    let caveat = if *selection == Selection::Unknown {
        format!(" (if it applies: the labels of namespace {namespace:?} are unknown)")
    } else {
        String::new()
    };
    let mut message = format!("toleration policy {:?}{caveat}: {field}: {why}", p.metadata.name);
    if !p.spec.message.is_empty() {
        message = format!("{message}: {}", p.spec.message);
    }
    Violation {
        policy: p.metadata.name.clone(),
        mode: p.spec.mode,
        concept: Concept::DeviceSharing,
        field: Some(field),
        message,
    }
}
