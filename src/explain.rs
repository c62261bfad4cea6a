//! `draguard explain`: each device as the scheduler would see it after all
//! ResourceSlicePatches (KEP-5027; SPEC.md §6). Every patch filter is
//! evaluated on every device — names, DeviceClass selectors, CEL selectors
//! in the DRA environment — then attributes and capacity are merged per
//! name by priority, then the older `creationTimestamp`, then the name.
//! Filters see the device as its slice publishes it.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use kube_cel::KubeCelExt as _;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, ExecutionError, Program, Value as CelValue};
use serde::Serialize;
use serde_json::Value;

use crate::impact::{DeviceId, Reader, reaches};
use crate::kubernetes::KubeVersion;
use crate::objects::dra::{DeviceAttribute, DeviceTaint, DeviceTaintRuleSpec, SliceSpec};
use crate::objects::patch::{NullableAttribute, PatchSpec};
use crate::rules::cel::{CompileError, Selector};

/// A device as its slice publishes it (the typed view, v1beta1 `basic`
/// folded in), attribute and capacity names fully qualified.
#[derive(Debug, Clone)]
pub struct PublishedDevice {
    pub driver: String,
    pub pool: String,
    pub name: String,
    pub attributes: BTreeMap<String, DeviceAttribute>,
    /// `{value: <quantity>}`, as the typed view keeps it.
    pub capacity: BTreeMap<String, Value>,
    pub taints: Vec<DeviceTaint>,
    /// `allowMultipleAllocations`, which selectors may read.
    pub allow_multiple_allocations: bool,
}

/// A patch with what orders it.
#[derive(Debug, Clone)]
pub struct Patch {
    pub name: String,
    pub created: String,
    pub spec: PatchSpec,
}

/// A DeviceClass's CEL selectors.
#[derive(Debug, Clone)]
pub struct Class {
    pub name: String,
    pub selectors: Vec<String>,
}

/// A DeviceTaintRule: its taint, and which devices it picks.
#[derive(Debug, Clone)]
pub struct TaintRule {
    pub name: String,
    pub spec: DeviceTaintRuleSpec,
}

/// What `explain` says about every device asked for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub devices: Vec<ExplainedDevice>,
    /// What applies to no device in particular: DeviceTaintRules whose
    /// reach depends on the Kubernetes version.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One device after all patches, with where each value comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExplainedDevice {
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// The attribute's JSON (`{string: a100}`), by qualified name.
    pub attributes: BTreeMap<String, Sourced>,
    /// The capacity's JSON (`{value: 40Gi}`), by qualified name.
    pub capacity: BTreeMap<String, Sourced>,
    pub taints: Vec<SourcedTaint>,
    /// Patches that do not apply and why, values removed, values a patch
    /// of higher precedence decided.
    pub notes: Vec<String>,
}

/// A value and where it comes from: `slice`, or the name of a patch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sourced {
    pub value: Value,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourcedTaint {
    pub taint: ExplainedTaint,
    pub source: String,
}

/// A taint as Kubernetes writes it: no empty `value`, no absent `timeAdded`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExplainedTaint {
    pub key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    pub effect: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
}

const FROM_SLICE: &str = "slice";

/// Why a CEL selector could not tell whether a device matches; the patch
/// then does not apply, and a note says why.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CelSelectorError {
    /// The expression does not compile in the DRA environment; the text is
    /// the apiserver's (`compilation failed: ...`).
    #[error("{}", .0.detail())]
    Compile(CompileError),
    #[error("evaluates to {0:?}, not a bool")]
    NotBool(CelValue),
    /// Evaluating failed on this device (a missing attribute, a type error).
    #[error("{0}")]
    Execution(#[source] ExecutionError),
}

/// Why a patch's filter could not be evaluated on a device (so the patch
/// does not apply to it).
#[derive(Debug, Clone, thiserror::Error)]
pub enum PatchFilterError {
    #[error("its filter names DeviceClass {0:?}; give --classes to evaluate it")]
    NoClasses(String),
    #[error("its DeviceClass {0:?} is not among the given classes")]
    UnknownClass(String),
    #[error("a selector of DeviceClass {class:?} fails on this device: {source}")]
    ClassSelector { class: String, source: CelSelectorError },
    #[error("its selector fails on this device: {0}")]
    Selector(#[source] CelSelectorError),
}

/// Qualifies a slice attribute name with the driver when it has no domain.
fn qualify(driver: &str, name: &str) -> String {
    if name.contains('/') {
        name.to_owned()
    } else {
        format!("{driver}/{name}")
    }
}

/// The devices of ResourceSlice objects (any served version); slices that
/// do not decode are left out.
pub fn devices_of(slices: &[Value]) -> Vec<PublishedDevice> {
    let mut out = Vec::new();
    for slice in slices {
        let Ok(spec) = SliceSpec::decode(slice.get("spec").unwrap_or(&Value::Null)) else {
            continue;
        };
        for d in spec.devices() {
            let qualified = |name: &String| qualify(&spec.driver, name);
            out.push(PublishedDevice {
                driver: spec.driver.clone(),
                pool: spec.pool.name.clone(),
                name: d.name.clone(),
                attributes: d.attributes.iter().map(|(k, v)| (qualified(k), v.clone())).collect(),
                capacity: d.capacity.iter().map(|(k, v)| (qualified(k), v.json.clone())).collect(),
                taints: d.taints.clone(),
                allow_multiple_allocations: d.allow_multiple_allocations == Some(true),
            });
        }
    }
    out
}
pub fn patches_of(objects: &[Value]) -> Vec<Patch> {
    objects
        .iter()
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some("ResourceSlicePatch"))
        .filter_map(|o| {
            Some(Patch {
                name: o.pointer("/metadata/name")?.as_str()?.to_owned(),
                created: o
                    .pointer("/metadata/creationTimestamp")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                spec: PatchSpec::decode(o.get("spec").unwrap_or(&Value::Null)).ok()?,
            })
        })
        .collect()
}

pub fn classes_of(objects: &[Value]) -> Vec<Class> {
    objects
        .iter()
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some("DeviceClass"))
        .filter_map(|o| {
            let selectors = o
                .pointer("/spec/selectors")
                .and_then(Value::as_array)
                .map(|l| {
                    l.iter()
                        .filter_map(|s| s.pointer("/cel/expression")?.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            Some(Class {
                name: o.pointer("/metadata/name")?.as_str()?.to_owned(),
                selectors,
            })
        })
        .collect()
}

/// Patches in the order they win: priority (high first), then the older
/// `creationTimestamp`, then the name.
pub fn precedence(patches: &mut [Patch]) {
    patches.sort_by(|a, b| {
        b.spec
            .devices
            .priority
            .cmp(&a.spec.devices.priority)
            .then_with(|| timestamp(&a.created).cmp(&timestamp(&b.created)))
            .then_with(|| a.name.cmp(&b.name))
    });
}

fn timestamp(s: &str) -> Option<jiff::Timestamp> {
    s.parse().ok()
}

/// Compiles a selector as the apiserver's DRA environment accepts it,
/// keeping the program to evaluate.
fn compile_selector(expression: &str) -> Result<Selector, CompileError> {
    crate::rules::cel::compile_program(expression)
}

/// Compiled selectors by expression text: each distinct selector is
/// compiled once however many devices and patches use it. Failures are
/// kept too, so that a broken selector is not compiled again for every
/// device.
#[derive(Default)]
struct Programs {
    compiled: HashMap<String, Result<Selector, CompileError>>,
    /// How many selectors were compiled, for the test that proves "once".
    #[cfg(test)]
    compilations: usize,
}

impl Programs {
    /// Compiles `expression` the first time it is seen.
    fn get(&mut self, expression: &str) -> Result<&Selector, CelSelectorError> {
        let compiled = match self.compiled.entry(expression.to_owned()) {
            Entry::Occupied(seen) => seen.into_mut(),
            Entry::Vacant(new) => {
                #[cfg(test)]
                {
                    self.compilations += 1;
                }
                new.insert(compile_selector(expression))
            }
        };
        compiled.as_ref().map_err(|e| CelSelectorError::Compile(e.clone()))
    }
}

/// CEL for one `explain` run: the DRA environment and its programs.
struct Evaluator {
    base: Context<'static>,
    programs: Programs,
    /// `quantity(s)` and `semver(s)`, which make kube-cel's own values
    /// (their Rust types are private); compiled once, not once a value.
    quantity: Option<Program>,
    semver: Option<Program>,
}

impl Evaluator {
    fn new() -> Self {
        Evaluator {
            base: Context::default().with_all(),
            programs: Programs::default(),
            quantity: Program::compile("quantity(s)").ok(),
            semver: Program::compile("semver(s)").ok(),
        }
    }

    /// `s` through `quantity(s)` / `semver(s)`; the plain string when that
    /// fails (an invalid quantity then compares as a string, as before).
    fn typed(&self, program: Option<&Program>, s: &str) -> CelValue {
        let mut ctx = self.base.new_inner_scope();
        ctx.add_variable_from_value("s", s.to_owned());
        match program.map(|p| p.execute(&ctx)) {
            Some(Ok(v)) => v,
            _ => CelValue::String(Arc::new(s.to_owned())),
        }
    }

    /// Single values only: list attributes are not in the CEL environment.
    fn attribute(&self, a: &DeviceAttribute) -> CelValue {
        if let Some(i) = a.int {
            CelValue::Int(i)
        } else if let Some(b) = a.bool {
            CelValue::Bool(b)
        } else if let Some(s) = &a.string {
            CelValue::String(Arc::new(s.clone()))
        } else if let Some(s) = &a.version {
            self.typed(self.semver.as_ref(), s)
        } else {
            CelValue::Null
        }
    }

    fn capacity(&self, v: &Value) -> CelValue {
        match v.get("value") {
            Some(Value::String(s)) => self.typed(self.quantity.as_ref(), s),
            Some(Value::Number(n)) => self.typed(self.quantity.as_ref(), &n.to_string()),
            _ => CelValue::Null,
        }
    }

    /// `device` as the DRA CEL environment declares it.
    fn device_value(&self, d: &PublishedDevice) -> CelValue {
        fn nest<T>(entries: &BTreeMap<String, T>, convert: impl Fn(&T) -> CelValue) -> CelValue {
            let mut domains: HashMap<String, HashMap<Key, CelValue>> = HashMap::new();
            for (qualified, v) in entries {
                let (domain, name) = qualified.rsplit_once('/').unwrap_or(("", qualified));
                domains
                    .entry(domain.to_owned())
                    .or_default()
                    .insert(Key::from(name.to_owned()), convert(v));
            }
            let map: HashMap<Key, CelValue> = domains
                .into_iter()
                .map(|(k, v)| (Key::from(k), CelValue::Map(Map::from(v))))
                .collect();
            CelValue::Map(Map::from(map))
        }
        let mut device: HashMap<Key, CelValue> = HashMap::new();
        device.insert(
            Key::from("driver".to_owned()),
            CelValue::String(Arc::new(d.driver.clone())),
        );
        device.insert(
            Key::from("attributes".to_owned()),
            nest(&d.attributes, |a| self.attribute(a)),
        );
        device.insert(
            Key::from("capacity".to_owned()),
            nest(&d.capacity, |v| self.capacity(v)),
        );
        device.insert(
            Key::from("allowMultipleAllocations".to_owned()),
            CelValue::Bool(d.allow_multiple_allocations),
        );
        CelValue::Map(Map::from(device))
    }

    /// Whether `expression` holds for `device`.
    fn eval(&mut self, expression: &str, device: &CelValue) -> Result<bool, CelSelectorError> {
        let program = self.programs.get(expression)?;
        let mut ctx = self.base.new_inner_scope();
        ctx.add_variable_from_value("device", device.clone());
        match program.execute(&ctx) {
            Ok(CelValue::Bool(b)) => Ok(b),
            Ok(other) => Err(CelSelectorError::NotBool(other)),
            Err(e) => Err(CelSelectorError::Execution(e)),
        }
    }
}

/// Whether `patch` applies to `d`; `Err` says why it could not tell (then
/// it does not apply).
fn applies(
    patch: &Patch,
    d: &PublishedDevice,
    classes: Option<&[Class]>,
    cel: &mut Evaluator,
    device: &CelValue,
) -> Result<bool, PatchFilterError> {
    let Some(f) = &patch.spec.devices.filter else {
        return Ok(true);
    };
    let names = [(&f.driver, &d.driver), (&f.pool, &d.pool), (&f.device, &d.name)];
    if names
        .iter()
        .any(|(want, have)| want.as_ref().is_some_and(|w| w != *have))
    {
        return Ok(false);
    }
    if let Some(class) = &f.device_class_name {
        let Some(classes) = classes else {
            return Err(PatchFilterError::NoClasses(class.clone()));
        };
        let Some(c) = classes.iter().find(|c| &c.name == class) else {
            return Err(PatchFilterError::UnknownClass(class.clone()));
        };
        for s in &c.selectors {
            match cel.eval(s, device) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(source) => {
                    return Err(PatchFilterError::ClassSelector {
                        class: class.clone(),
                        source,
                    });
                }
            }
        }
    }
    for s in &f.selectors {
        let Some(expr) = s.cel.as_ref().map(|c| c.expression.as_str()) else {
            continue;
        };
        match cel.eval(expr, device) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => return Err(PatchFilterError::Selector(e)),
        }
    }
    Ok(true)
}

/// A slice attribute as JSON: the fields it sets, as the slice wrote them.
fn slice_attribute_json(a: &DeviceAttribute) -> Value {
    let fields = [
        ("int", a.int.map(Value::from)),
        ("bool", a.bool.map(Value::from)),
        ("string", a.string.clone().map(Value::from)),
        ("version", a.version.clone().map(Value::from)),
        ("ints", a.ints.clone().map(Value::from)),
        ("bools", a.bools.clone().map(Value::from)),
        ("strings", a.strings.clone().map(Value::from)),
        ("versions", a.versions.clone().map(Value::from)),
    ];
    Value::Object(
        fields
            .into_iter()
            .filter_map(|(name, value)| Some((name.to_owned(), value?)))
            .collect(),
    )
}

fn patch_attribute_json(a: &NullableAttribute) -> Value {
    serde_json::to_value(a).unwrap_or(Value::Null)
}

impl ExplainedTaint {
    fn of_slice(t: &DeviceTaint) -> Self {
        ExplainedTaint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
            time_added: t.time_added.clone(),
        }
    }

    /// A rule's taint: its `timeAdded` as the apiserver stamped it.
    fn of_rule(t: &DeviceTaint) -> Self {
        ExplainedTaint::of_slice(t)
    }

    /// A patch's taint as it is added: the scheduler stamps no time here.
    fn of_patch(t: &DeviceTaint) -> Self {
        ExplainedTaint {
            time_added: None,
            ..ExplainedTaint::of_slice(t)
        }
    }
}

fn from_slice(value: Value) -> Sourced {
    Sourced {
        value,
        source: FROM_SLICE.to_owned(),
    }
}

/// Explains every device (or the one named `driver/pool/device`).
pub fn explain(
    devices: &[PublishedDevice],
    patches: &[Patch],
    classes: Option<&[Class]>,
    only: Option<&str>,
) -> Explanation {
    explain_with(&mut Evaluator::new(), devices, patches, classes, only)
}

/// [`explain`], with the taints of `rules` on the devices they pick under
/// the rules of `version`.
pub fn explain_with_rules(
    devices: &[PublishedDevice],
    patches: &[Patch],
    classes: Option<&[Class]>,
    rules: &[TaintRule],
    version: KubeVersion,
    only: Option<&str>,
) -> Explanation {
    let mut explained = explain_with(&mut Evaluator::new(), devices, patches, classes, only);
    for device in &mut explained.devices {
        for rule in rules {
            if picks(rule, device, version) {
                device.taints.push(SourcedTaint {
                    taint: ExplainedTaint::of_rule(&rule.spec.taint),
                    source: format!("DeviceTaintRule {}", rule.name),
                });
            }
        }
    }
    explained.notes = rules.iter().filter_map(|r| reach_note(r, version)).collect();
    explained
}

/// Whether `rule` taints `device` for the scheduler in `version`
/// ([`crate::impact::reach`]: a missing selector reached every device up
/// to 1.37.0 and none from 1.37.1 on).
fn picks(rule: &TaintRule, device: &ExplainedDevice, version: KubeVersion) -> bool {
    let id = DeviceId {
        driver: device.driver.as_str().into(),
        pool: device.pool.as_str().into(),
        device: device.device.as_str().into(),
    };
    reaches(rule.spec.device_selector.as_ref(), &id, version, Reader::Scheduler)
}

/// What a rule whose selector is missing or empty does in `version`.
fn reach_note(rule: &TaintRule, version: KubeVersion) -> Option<String> {
    let name = &rule.name;
    match &rule.spec.device_selector {
        Some(selector) if selector.matches_everything() => Some(format!(
            "DeviceTaintRule {name:?} has an empty deviceSelector: it taints every device"
        )),
        Some(_) => None,
        None if version < KubeVersion::V1_37 => Some(format!(
            "DeviceTaintRule {name:?} has no deviceSelector: Kubernetes {version} counts its taint on every device \
             for scheduling (eviction ignores it); from 1.37.1 on it taints no device"
        )),
        None => Some(format!(
            "DeviceTaintRule {name:?} has no deviceSelector: it taints no device from Kubernetes 1.37.1 on \
             (1.37.0 counted it on every device for scheduling)"
        )),
    }
}

fn explain_with(
    cel: &mut Evaluator,
    devices: &[PublishedDevice],
    patches: &[Patch],
    classes: Option<&[Class]>,
    only: Option<&str>,
) -> Explanation {
    let mut ordered = patches.to_vec();
    precedence(&mut ordered);
    let devices = devices
        .iter()
        .filter(|d| only.is_none_or(|o| o == format!("{}/{}/{}", d.driver, d.pool, d.name)))
        .map(|d| explain_device(cel, d, &ordered, classes))
        .collect();
    Explanation {
        devices,
        notes: Vec::new(),
    }
}

/// The DeviceTaintRules among `objects` (any served version).
pub fn taint_rules_of(objects: &[Value]) -> Vec<TaintRule> {
    objects
        .iter()
        .filter(|o| {
            o.get("kind").and_then(Value::as_str) == Some("DeviceTaintRule")
                && o.get("apiVersion")
                    .and_then(Value::as_str)
                    .is_some_and(|v| v.starts_with("resource.k8s.io/"))
        })
        .filter_map(|o| {
            let spec = DeviceTaintRuleSpec::decode(o.get("spec")?).ok()?;
            let name = o
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            Some(TaintRule { name, spec })
        })
        .collect()
}

/// One device after `ordered` (patches in precedence order).
fn explain_device(
    cel: &mut Evaluator,
    d: &PublishedDevice,
    ordered: &[Patch],
    classes: Option<&[Class]>,
) -> ExplainedDevice {
    let device = cel.device_value(d);
    let mut notes = Vec::new();
    let mut applying = Vec::new();
    for p in ordered {
        match applies(p, d, classes, cel, &device) {
            Ok(true) => applying.push(p),
            Ok(false) => {}
            Err(why) => notes.push(format!("patch {:?} does not apply: {why}", p.name)),
        }
    }
    let mut attributes: BTreeMap<String, Sourced> = d
        .attributes
        .iter()
        .map(|(k, a)| (k.clone(), from_slice(slice_attribute_json(a))))
        .collect();
    let mut capacity: BTreeMap<String, Sourced> = d
        .capacity
        .iter()
        .map(|(k, v)| (k.clone(), from_slice(v.clone())))
        .collect();
    let mut decided: HashSet<&str> = HashSet::new();
    let mut decided_capacity: HashSet<&str> = HashSet::new();
    let mut taints: Vec<SourcedTaint> = d
        .taints
        .iter()
        .map(|t| SourcedTaint {
            taint: ExplainedTaint::of_slice(t),
            source: FROM_SLICE.to_owned(),
        })
        .collect();
    for p in &applying {
        for (name, value) in &p.spec.devices.attributes {
            if !decided.insert(name) {
                notes.push(format!(
                    "patch {:?} also sets {name}, but a patch of higher precedence won",
                    p.name
                ));
                continue;
            }
            if value.null.is_some() {
                attributes.remove(name);
                notes.push(format!("{name} removed by patch {:?}", p.name));
            } else {
                attributes.insert(
                    name.clone(),
                    Sourced {
                        value: patch_attribute_json(value),
                        source: p.name.clone(),
                    },
                );
            }
        }
        for (name, value) in &p.spec.devices.capacity {
            if !decided_capacity.insert(name) {
                notes.push(format!(
                    "patch {:?} also sets capacity {name}, but a patch of higher precedence won",
                    p.name
                ));
                continue;
            }
            capacity.insert(
                name.clone(),
                Sourced {
                    value: value.clone(),
                    source: p.name.clone(),
                },
            );
        }
        for t in &p.spec.devices.taints {
            taints.push(SourcedTaint {
                taint: ExplainedTaint::of_patch(t),
                source: p.name.clone(),
            });
        }
    }
    ExplainedDevice {
        driver: d.driver.clone(),
        pool: d.pool.clone(),
        device: d.name.clone(),
        attributes,
        capacity,
        taints,
        notes,
    }
}

/// A table per device, for people.
pub fn render_text(explained: &Explanation) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for d in &explained.devices {
        let _ = writeln!(out, "{}/{}/{}", d.driver, d.pool, d.device);
        for (map, title) in [(&d.attributes, "ATTRIBUTE"), (&d.capacity, "CAPACITY")] {
            if map.is_empty() {
                continue;
            }
            let _ = writeln!(out, "  {title:<40} {:<24} SOURCE", "VALUE");
            for (name, entry) in map {
                let value = shown(&entry.value);
                let _ = writeln!(out, "  {name:<40} {value:<24} {}", entry.source);
            }
        }
        for t in &d.taints {
            let taint = &t.taint;
            let value = if taint.value.is_empty() {
                String::new()
            } else {
                format!("={}", taint.value)
            };
            let _ = writeln!(out, "  taint {}{value}:{} (from {})", taint.key, taint.effect, t.source);
        }
        for n in &d.notes {
            let _ = writeln!(out, "  note: {n}");
        }
        out.push('\n');
    }
    for n in &explained.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// An attribute's or capacity's one field (`{string: a100}`, `{value:
/// 40Gi}`), as text: strings bare, anything else as JSON.
fn shown(value: &Value) -> String {
    let Some(first) = value.as_object().and_then(|m| m.values().next()) else {
        return String::new();
    };
    first.as_str().map_or_else(|| first.to_string(), str::to_owned)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn slice() -> Value {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": "gpu.example.com", "pool": {"name": "node-1", "resourceSliceCount": 1}, "nodeName": "node-1",
            "devices": [
                {"name": "gpu-0", "attributes": {"model": {"string": "a100"}, "driverVersion": {"version": "1.2.3"}, "index": {"int": 0}},
                 "capacity": {"memory": {"value": "40Gi"}}},
                {"name": "gpu-1", "attributes": {"model": {"string": "h100"}, "index": {"int": 1}}, "capacity": {"memory": {"value": "80Gi"}}}
            ]}})
    }

    fn patch(name: &str, created: &str, devices: Value) -> Value {
        json!({"apiVersion": "draguard.dev/v1alpha1", "kind": "ResourceSlicePatch",
            "metadata": {"name": name, "creationTimestamp": created}, "spec": {"devices": devices}})
    }

    /// The explanation as `--output json` prints it.
    fn as_json(explained: &Explanation) -> Value {
        serde_json::to_value(explained).expect("serializable")
    }

    fn rule(name: &str, selector: Option<Value>, effect: &str) -> Value {
        let mut spec = json!({"taint": {"key": format!("example.com/{name}"), "effect": effect,
                                        "timeAdded": "2026-11-20T10:00:00Z"}});
        if let Some(selector) = selector {
            spec["deviceSelector"] = selector;
        }
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name}, "spec": spec})
    }

    /// The taint keys each device gets, and the notes, under `version`.
    fn tainted(rules: &[Value], version: KubeVersion) -> (Vec<(String, Vec<String>)>, Vec<String>) {
        let explained = explain_with_rules(
            &devices_of(&[slice()]),
            &[],
            None,
            &taint_rules_of(rules),
            version,
            None,
        );
        let devices = explained
            .devices
            .iter()
            .map(|d| {
                (
                    d.device.clone(),
                    d.taints
                        .iter()
                        .map(|t| format!("{} ({})", t.taint.key, t.source))
                        .collect(),
                )
            })
            .collect();
        (devices, explained.notes)
    }

    /// A missing selector: every device in 1.36, none in 1.37 (1.37.1);
    /// `{}`: every device in both; a selector: the devices it names.
    #[test]
    fn taint_rules_reach_devices_as_the_version_says() {
        let rules = [
            rule("missing", None, "NoSchedule"),
            rule("empty", Some(json!({})), "NoExecute"),
            rule(
                "one",
                Some(json!({"driver": "gpu.example.com", "device": "gpu-1"})),
                "None",
            ),
            rule("elsewhere", Some(json!({"pool": "node-2"})), "NoSchedule"),
        ];
        let (devices, notes) = tainted(&rules, KubeVersion::V1_36);
        assert_eq!(
            devices,
            vec![
                (
                    "gpu-0".to_owned(),
                    vec![
                        "example.com/missing (DeviceTaintRule missing)".to_owned(),
                        "example.com/empty (DeviceTaintRule empty)".to_owned()
                    ]
                ),
                (
                    "gpu-1".to_owned(),
                    vec![
                        "example.com/missing (DeviceTaintRule missing)".to_owned(),
                        "example.com/empty (DeviceTaintRule empty)".to_owned(),
                        "example.com/one (DeviceTaintRule one)".to_owned()
                    ]
                ),
            ]
        );
        assert_eq!(
            notes,
            vec![
                "DeviceTaintRule \"missing\" has no deviceSelector: Kubernetes 1.36 counts its taint on every device \
                 for scheduling (eviction ignores it); from 1.37.1 on it taints no device",
                "DeviceTaintRule \"empty\" has an empty deviceSelector: it taints every device",
            ]
        );
        let (devices, notes) = tainted(&rules, KubeVersion::V1_37);
        assert_eq!(
            devices,
            vec![
                (
                    "gpu-0".to_owned(),
                    vec!["example.com/empty (DeviceTaintRule empty)".to_owned()]
                ),
                (
                    "gpu-1".to_owned(),
                    vec![
                        "example.com/empty (DeviceTaintRule empty)".to_owned(),
                        "example.com/one (DeviceTaintRule one)".to_owned()
                    ]
                ),
            ]
        );
        assert_eq!(
            notes,
            vec![
                "DeviceTaintRule \"missing\" has no deviceSelector: it taints no device from Kubernetes 1.37.1 on \
                 (1.37.0 counted it on every device for scheduling)",
                "DeviceTaintRule \"empty\" has an empty deviceSelector: it taints every device",
            ]
        );
    }

    fn run(patches: Vec<Value>) -> Value {
        as_json(&explain(&devices_of(&[slice()]), &patches_of(&patches), None, None))
    }

    fn attr<'a>(out: &'a Value, device: usize, name: &str) -> &'a Value {
        &out["devices"][device]["attributes"][name]
    }

    #[test]
    fn unqualified_slice_attributes_take_the_driver_domain() {
        let out = run(vec![]);
        assert_eq!(
            attr(&out, 0, "gpu.example.com/model"),
            &json!({"value": {"string": "a100"}, "source": "slice"})
        );
        assert_eq!(
            out["devices"][0]["capacity"]["gpu.example.com/memory"],
            json!({"value": {"value": "40Gi"}, "source": "slice"})
        );
    }

    #[test]
    fn higher_priority_wins() {
        let out = run(vec![
            patch(
                "low",
                "2026-01-01T00:00:00Z",
                json!({"priority": 1, "attributes": {"gpu.example.com/model": {"string": "low"}}}),
            ),
            patch(
                "high",
                "2026-02-01T00:00:00Z",
                json!({"priority": 5, "attributes": {"gpu.example.com/model": {"string": "high"}}}),
            ),
        ]);
        assert_eq!(
            attr(&out, 0, "gpu.example.com/model"),
            &json!({"value": {"string": "high"}, "source": "high"})
        );
        assert!(out["devices"][0]["notes"].as_array().is_some_and(|n| n.contains(&json!(
            "patch \"low\" also sets gpu.example.com/model, but a patch of higher precedence won"
        ))));
    }

    #[test]
    fn equal_priority_the_older_wins_then_the_name() {
        let out = run(vec![
            patch(
                "b-newer",
                "2026-02-01T00:00:00Z",
                json!({"attributes": {"gpu.example.com/model": {"string": "newer"}}}),
            ),
            patch(
                "a-older",
                "2026-01-01T00:00:00Z",
                json!({"attributes": {"gpu.example.com/model": {"string": "older"}}}),
            ),
        ]);
        assert_eq!(attr(&out, 0, "gpu.example.com/model")["source"], "a-older");
        let same_time = run(vec![
            patch(
                "zed",
                "2026-01-01T00:00:00Z",
                json!({"attributes": {"gpu.example.com/model": {"string": "z"}}}),
            ),
            patch(
                "abe",
                "2026-01-01T00:00:00Z",
                json!({"attributes": {"gpu.example.com/model": {"string": "a"}}}),
            ),
        ]);
        assert_eq!(attr(&same_time, 0, "gpu.example.com/model")["source"], "abe");
    }

    #[test]
    fn null_removes_and_capacity_overrides() {
        let out = run(vec![patch(
            "fix",
            "2026-01-01T00:00:00Z",
            json!({
                "filter": {"device": "gpu-0"},
                "attributes": {"gpu.example.com/driverVersion": {"null": {}}},
                "capacity": {"gpu.example.com/memory": {"value": "38Gi"}}
            }),
        )]);
        assert_eq!(attr(&out, 0, "gpu.example.com/driverVersion"), &Value::Null);
        assert_eq!(
            out["devices"][0]["capacity"]["gpu.example.com/memory"],
            json!({"value": {"value": "38Gi"}, "source": "fix"})
        );
        assert_eq!(
            out["devices"][1]["capacity"]["gpu.example.com/memory"]["source"], "slice",
            "the filter names gpu-0 only"
        );
        assert!(
            out["devices"][0]["notes"]
                .as_array()
                .is_some_and(|n| n.contains(&json!("gpu.example.com/driverVersion removed by patch \"fix\"")))
        );
    }

    #[test]
    fn cel_filters_true_false_and_error() {
        let selector = |e: &str| json!({"filter": {"selectors": [{"cel": {"expression": e}}]}, "attributes": {"example.com/tag": {"string": "x"}}});
        let quantity = run(vec![patch(
            "big",
            "2026-01-01T00:00:00Z",
            selector("device.capacity[\"gpu.example.com\"].memory.compareTo(quantity(\"64Gi\")) >= 0"),
        )]);
        assert_eq!(
            attr(&quantity, 0, "example.com/tag"),
            &Value::Null,
            "40Gi is not >= 64Gi"
        );
        assert_eq!(attr(&quantity, 1, "example.com/tag")["source"], "big", "80Gi is");
        let semver = run(vec![patch(
            "new",
            "2026-01-01T00:00:00Z",
            selector("device.attributes[\"gpu.example.com\"].driverVersion.isGreaterThan(semver(\"1.0.0\"))"),
        )]);
        assert_eq!(attr(&semver, 0, "example.com/tag")["source"], "new");
        let failing = run(vec![patch(
            "other",
            "2026-01-01T00:00:00Z",
            selector("device.attributes[\"other.example.com\"].x == 1"),
        )]);
        assert_eq!(attr(&failing, 0, "example.com/tag"), &Value::Null);
        let note = failing["devices"][0]["notes"][0].as_str().unwrap_or("");
        assert!(
            note.starts_with("patch \"other\" does not apply: its selector fails on this device:"),
            "{note}"
        );
    }

    #[test]
    fn device_classes_and_taints() {
        let classes = vec![Class {
            name: "big-gpu".into(),
            selectors: vec!["device.attributes[\"gpu.example.com\"].model == \"h100\"".into()],
        }];
        let patches = patches_of(&[patch(
            "drain",
            "2026-01-01T00:00:00Z",
            json!({
                "filter": {"deviceClassName": "big-gpu"}, "taints": [{"key": "example.com/drain", "effect": "NoExecute"}]
            }),
        )]);
        let out = as_json(&explain(&devices_of(&[slice()]), &patches, Some(&classes), None));
        assert_eq!(out["devices"][0]["taints"], json!([]));
        assert_eq!(
            out["devices"][1]["taints"],
            json!([{"taint": {"key": "example.com/drain", "effect": "NoExecute"}, "source": "drain"}])
        );
        let unknown = as_json(&explain(
            &devices_of(&[slice()]),
            &patches,
            None,
            Some("gpu.example.com/node-1/gpu-1"),
        ));
        assert_eq!(
            unknown["devices"].as_array().map(Vec::len),
            Some(1),
            "--device picks one"
        );
        assert!(
            unknown["devices"][0]["notes"][0]
                .as_str()
                .unwrap_or("")
                .contains("give --classes")
        );
    }

    fn selector_patch(name: &str, expression: &str) -> Value {
        patch(
            name,
            "2026-01-01T00:00:00Z",
            json!({"filter": {"selectors": [{"cel": {"expression": expression}}]}}),
        )
    }

    #[test]
    fn each_distinct_expression_compiles_once() {
        let shared = r#"device.attributes["gpu.example.com"].index >= 0"#;
        let broken = "device.driver ==";
        let undeclared = "foo == 1";
        let classes = vec![Class {
            name: "gpus".into(),
            // A class selector that is also a patch's: still one program.
            selectors: vec![shared.into()],
        }];
        let mut objects = vec![
            selector_patch("a", shared),
            selector_patch("b", shared),
            selector_patch("c", broken),
            selector_patch("d", broken),
            selector_patch("e", undeclared),
        ];
        objects.push(patch(
            "f",
            "2026-01-01T00:00:00Z",
            json!({"filter": {"deviceClassName": "gpus"}}),
        ));
        let devices = devices_of(&[slice()]);
        assert_eq!(devices.len(), 2);
        let mut cel = Evaluator::new();
        let out = explain_with(&mut cel, &devices, &patches_of(&objects), Some(&classes), None);
        assert_eq!(
            cel.programs.compilations, 3,
            "three distinct expressions, evaluated for two devices by six patches"
        );
        assert_eq!(cel.programs.compiled.len(), 3);
        assert!(cel.programs.compiled[shared].is_ok());
        assert!(cel.programs.compiled[broken].is_err(), "failures are kept, not retried");
        // A second run on the same evaluator compiles nothing.
        let again = explain_with(&mut cel, &devices, &patches_of(&objects), Some(&classes), None);
        assert_eq!(cel.programs.compilations, 3);
        assert_eq!(again, out);
        assert_eq!(
            out.devices[1].notes.len(),
            3,
            "c, d and e do not apply: {:?}",
            out.devices[1].notes
        );
    }

    /// `compile_selector` keeps the program `rules::cel::compile` only
    /// checks; both must accept and refuse alike, with the same text.
    #[test]
    fn compiles_as_the_admission_rules_do() {
        let expressions = [
            r#"device.driver == "gpu.example.com""#,
            r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
            "device.driver ==",
            "foo.bar == 1 && baz == 2",
            "  ",
            &format!("{}true{}", "(".repeat(3000), ")".repeat(3000)),
        ];
        for expression in expressions {
            assert_eq!(
                compile_selector(expression).map(drop),
                crate::rules::cel::compile(expression),
                "{expression:.60}"
            );
        }
    }

    #[test]
    fn filter_error_messages() {
        let execution = match Program::compile("1 / 0").map(|p| p.execute(&Context::default())) {
            Ok(Err(e)) => e,
            other => panic!("expected a division error, got {other:?}"),
        };
        let compile = CelSelectorError::Compile(CompileError::Invalid("compilation failed: bad".into()));
        let cases = [
            (
                PatchFilterError::NoClasses("gpus".into()),
                r#"its filter names DeviceClass "gpus"; give --classes to evaluate it"#,
            ),
            (
                PatchFilterError::UnknownClass("gpus".into()),
                r#"its DeviceClass "gpus" is not among the given classes"#,
            ),
            (
                PatchFilterError::ClassSelector {
                    class: "gpus".into(),
                    source: CelSelectorError::NotBool(CelValue::Int(1)),
                },
                r#"a selector of DeviceClass "gpus" fails on this device: evaluates to Int(1), not a bool"#,
            ),
            (
                PatchFilterError::Selector(compile),
                "its selector fails on this device: compilation failed: bad",
            ),
            (
                PatchFilterError::Selector(CelSelectorError::Execution(execution)),
                "its selector fails on this device: Division by zero of Int(1)",
            ),
        ];
        for (error, message) in cases {
            assert_eq!(error.to_string(), message);
        }
    }

    #[test]
    fn selectors_read_allow_multiple_allocations() {
        let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "spec": {"driver": "nic.example.com", "pool": {"name": "node-2", "resourceSliceCount": 1},
            "devices": [{"name": "shared", "allowMultipleAllocations": true}, {"name": "single"}]}});
        let mut tag = selector_patch("shared-only", "device.allowMultipleAllocations");
        tag["spec"]["devices"]["attributes"] = json!({"example.com/shared": {"bool": true}});
        let out = as_json(&explain(&devices_of(&[slice]), &patches_of(&[tag]), None, None));
        assert_eq!(
            out["devices"][0]["attributes"]["example.com/shared"]["source"],
            "shared-only"
        );
        assert_eq!(out["devices"][1]["attributes"]["example.com/shared"], Value::Null);
    }

    #[test]
    fn v1beta1_devices_and_slice_taints_are_read_typed() {
        let slice = json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice",
        "spec": {"driver": "nic.example.com", "pool": {"name": "node-2", "resourceSliceCount": 1},
            "devices": [{"name": "nic-0", "basic": {
                "attributes": {"speed": {"int": 400}, "example.com/ports": {"ints": [1, 2]}},
                "capacity": {"lanes": {"value": 4}},
                "taints": [
                    {"key": "k", "value": "v", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"},
                    {"key": "other", "effect": "NoExecute"}
                ]}}]}});
        let quantity = selector_patch(
            "lanes",
            r#"device.capacity["nic.example.com"].lanes.compareTo(quantity("2")) > 0 && device.attributes["nic.example.com"].speed == 400"#,
        );
        let explained = explain(&devices_of(&[slice]), &patches_of(&[quantity]), None, None);
        let out = as_json(&explained);
        let device = &out["devices"][0];
        assert_eq!(device["device"], "nic-0");
        assert_eq!(device["notes"], json!([]), "the selector holds");
        assert_eq!(
            device["attributes"]["example.com/ports"],
            json!({"value": {"ints": [1, 2]}, "source": "slice"})
        );
        assert_eq!(
            device["taints"],
            json!([
                {"taint": {"key": "k", "value": "v", "effect": "NoSchedule", "timeAdded": "2026-01-01T00:00:00Z"}, "source": "slice"},
                {"taint": {"key": "other", "effect": "NoExecute"}, "source": "slice"}
            ])
        );
        assert_eq!(
            render_text(&explained),
            "nic.example.com/node-2/nic-0\n\
             \x20 ATTRIBUTE                                VALUE                    SOURCE\n\
             \x20 example.com/ports                        [1,2]                    slice\n\
             \x20 nic.example.com/speed                    400                      slice\n\
             \x20 CAPACITY                                 VALUE                    SOURCE\n\
             \x20 nic.example.com/lanes                    4                        slice\n\
             \x20 taint k=v:NoSchedule (from slice)\n\
             \x20 taint other:NoExecute (from slice)\n\n"
        );
    }
}
