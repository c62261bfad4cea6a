//! `draguard explain`: each device as the scheduler would see it after all
//! ResourceSlicePatches (KEP-5027; SPEC.md §6). Every patch filter is
//! evaluated on every device — names, DeviceClass selectors, CEL selectors
//! in the DRA environment — then attributes and capacity are merged per
//! name by priority, then the older `creationTimestamp`, then the name.
//! Filters see the device as its slice publishes it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kube_cel::KubeCelExt as _;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::{Value, json};

use crate::objects::dra::SliceSpec;
use crate::objects::patch::{NullableAttribute, PatchSpec};

/// A device as its slice publishes it, names fully qualified.
#[derive(Debug, Clone)]
pub struct Device {
    pub driver: String,
    pub pool: String,
    pub name: String,
    pub attributes: BTreeMap<String, Value>,
    pub capacity: BTreeMap<String, Value>,
    pub taints: Vec<Value>,
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

/// Qualifies a slice attribute name with the driver when it has no domain.
fn qualify(driver: &str, name: &str) -> String {
    if name.contains('/') {
        name.to_owned()
    } else {
        format!("{driver}/{name}")
    }
}

/// The devices of ResourceSlice objects (any served version).
pub fn devices_of(slices: &[Value]) -> Vec<Device> {
    let mut out = Vec::new();
    for slice in slices {
        let Ok(spec) = SliceSpec::decode(slice.get("spec").unwrap_or(&Value::Null)) else {
            continue;
        };
        let raw_devices = slice.pointer("/spec/devices").and_then(Value::as_array);
        for (i, d) in spec.devices().iter().enumerate() {
            let raw = raw_devices.and_then(|l| l.get(i)).map(|r| r.get("basic").unwrap_or(r));
            let section = |field: &str| -> BTreeMap<String, Value> {
                raw.and_then(|r| r.get(field))
                    .and_then(Value::as_object)
                    .map(|m| m.iter().map(|(k, v)| (qualify(&spec.driver, k), v.clone())).collect())
                    .unwrap_or_default()
            };
            out.push(Device {
                driver: spec.driver.clone(),
                pool: spec.pool.name.clone(),
                name: d.name.clone(),
                attributes: section("attributes"),
                capacity: section("capacity"),
                taints: raw
                    .and_then(|r| r.get("taints"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
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

/// The CEL environment of one device.
struct Evaluator {
    base: Context<'static>,
    programs: HashMap<String, Result<Program, String>>,
}

impl Evaluator {
    fn new() -> Self {
        Evaluator {
            base: Context::default().with_all(),
            programs: HashMap::new(),
        }
    }

    /// A quantity or semver value as kube-cel's own types, made by running
    /// `quantity(s)` / `semver(s)` (their Rust types are private).
    fn typed(&self, function: &str, s: &str) -> CelValue {
        let program = Program::compile(&format!("{function}(s)"));
        let mut ctx = self.base.new_inner_scope();
        ctx.add_variable_from_value("s", s.to_owned());
        match program.map(|p| p.execute(&ctx)) {
            Ok(Ok(v)) => v,
            _ => CelValue::String(Arc::new(s.to_owned())),
        }
    }

    fn attribute(&self, v: &Value) -> CelValue {
        if let Some(i) = v.get("int").and_then(Value::as_i64) {
            CelValue::Int(i)
        } else if let Some(b) = v.get("bool").and_then(Value::as_bool) {
            CelValue::Bool(b)
        } else if let Some(s) = v.get("string").and_then(Value::as_str) {
            CelValue::String(Arc::new(s.to_owned()))
        } else if let Some(s) = v.get("version").and_then(Value::as_str) {
            self.typed("semver", s)
        } else {
            CelValue::Null
        }
    }

    /// `device` as the DRA CEL environment declares it.
    fn device_value(&self, d: &Device) -> CelValue {
        let nest = |entries: &BTreeMap<String, Value>, convert: &dyn Fn(&Value) -> CelValue| {
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
        };
        let quantity = |v: &Value| match v.get("value") {
            Some(Value::String(s)) => self.typed("quantity", s),
            Some(Value::Number(n)) => self.typed("quantity", &n.to_string()),
            _ => CelValue::Null,
        };
        let mut device: HashMap<Key, CelValue> = HashMap::new();
        device.insert(
            Key::from("driver".to_owned()),
            CelValue::String(Arc::new(d.driver.clone())),
        );
        device.insert(
            Key::from("attributes".to_owned()),
            nest(&d.attributes, &|v| self.attribute(v)),
        );
        device.insert(Key::from("capacity".to_owned()), nest(&d.capacity, &quantity));
        device.insert(Key::from("allowMultipleAllocations".to_owned()), CelValue::Bool(false));
        CelValue::Map(Map::from(device))
    }

    /// `Ok(true/false)`, or why the expression could not be evaluated.
    fn eval(&mut self, expression: &str, device: &CelValue) -> Result<bool, String> {
        let program = self.programs.entry(expression.to_owned()).or_insert_with(|| {
            crate::rules::cel::compile(expression)
                .map_err(|crate::rules::cel::CompileError::Invalid(e)| e)
                .and_then(|()| Program::compile(expression).map_err(|e| e.to_string()))
        });
        let program = program.as_ref().map_err(Clone::clone)?;
        let mut ctx = self.base.new_inner_scope();
        ctx.add_variable_from_value("device", device.clone());
        match program.execute(&ctx) {
            Ok(CelValue::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("evaluates to {other:?}, not a bool")),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Whether `patch` applies to `device`; `Err` says why it could not tell
/// (then it does not apply).
fn applies(
    patch: &Patch,
    d: &Device,
    classes: Option<&[Class]>,
    cel: &mut Evaluator,
    device: &CelValue,
) -> Result<bool, String> {
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
            return Err(format!(
                "its filter names DeviceClass {class:?}; give --classes to evaluate it"
            ));
        };
        let Some(c) = classes.iter().find(|c| &c.name == class) else {
            return Err(format!("its DeviceClass {class:?} is not among the given classes"));
        };
        for s in &c.selectors {
            match cel.eval(s, device) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => return Err(format!("a selector of DeviceClass {class:?} fails on this device: {e}")),
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
            Err(e) => return Err(format!("its selector fails on this device: {e}")),
        }
    }
    Ok(true)
}

fn attribute_json(a: &NullableAttribute) -> Value {
    serde_json::to_value(a).unwrap_or(Value::Null)
}

/// Explains every device (or the one named `driver/pool/device`).
pub fn explain(devices: &[Device], patches: &[Patch], classes: Option<&[Class]>, only: Option<&str>) -> Value {
    let mut ordered = patches.to_vec();
    precedence(&mut ordered);
    let mut cel = Evaluator::new();
    let mut out = Vec::new();
    for d in devices {
        let id = format!("{}/{}/{}", d.driver, d.pool, d.name);
        if only.is_some_and(|o| o != id) {
            continue;
        }
        let device = cel.device_value(d);
        let mut notes = Vec::new();
        let mut applying = Vec::new();
        for p in &ordered {
            match applies(p, d, classes, &mut cel, &device) {
                Ok(true) => applying.push(p),
                Ok(false) => {}
                Err(why) => notes.push(format!("patch {:?} does not apply: {why}", p.name)),
            }
        }
        let mut attributes: BTreeMap<String, Value> = d
            .attributes
            .iter()
            .map(|(k, v)| (k.clone(), json!({"value": v, "source": "slice"})))
            .collect();
        let mut capacity: BTreeMap<String, Value> = d
            .capacity
            .iter()
            .map(|(k, v)| (k.clone(), json!({"value": v, "source": "slice"})))
            .collect();
        let mut decided: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut decided_capacity: std::collections::HashSet<String> = std::collections::HashSet::new();
        let mut taints: Vec<Value> = d
            .taints
            .iter()
            .map(|t| json!({"taint": t, "source": "slice"}))
            .collect();
        for p in &applying {
            for (name, value) in &p.spec.devices.attributes {
                if !decided.insert(name.clone()) {
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
                    attributes.insert(name.clone(), json!({"value": attribute_json(value), "source": p.name}));
                }
            }
            for (name, value) in &p.spec.devices.capacity {
                if !decided_capacity.insert(name.clone()) {
                    notes.push(format!(
                        "patch {:?} also sets capacity {name}, but a patch of higher precedence won",
                        p.name
                    ));
                    continue;
                }
                capacity.insert(name.clone(), json!({"value": value, "source": p.name}));
            }
            for t in &p.spec.devices.taints {
                let mut taint = json!({"key": t.key, "effect": t.effect});
                if !t.value.is_empty() {
                    taint["value"] = json!(t.value);
                }
                taints.push(json!({"taint": taint, "source": p.name}));
            }
        }
        out.push(json!({
            "driver": d.driver, "pool": d.pool, "device": d.name,
            "attributes": attributes, "capacity": capacity, "taints": taints, "notes": notes,
        }));
    }
    json!({"devices": out})
}

/// A table per device, for people.
pub fn render_text(explained: &Value) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for d in explained["devices"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "{}/{}/{}",
            text(&d["driver"]),
            text(&d["pool"]),
            text(&d["device"])
        );
        for (section, title) in [("attributes", "ATTRIBUTE"), ("capacity", "CAPACITY")] {
            let Some(map) = d[section].as_object().filter(|m| !m.is_empty()) else {
                continue;
            };
            let _ = writeln!(out, "  {title:<40} {:<24} SOURCE", "VALUE");
            for (name, entry) in map {
                let value = entry["value"]
                    .as_object()
                    .and_then(|m| m.values().next())
                    .map_or_else(String::new, show);
                let _ = writeln!(out, "  {name:<40} {value:<24} {}", text(&entry["source"]));
            }
        }
        for t in d["taints"].as_array().into_iter().flatten() {
            let taint = &t["taint"];
            let value = taint
                .get("value")
                .and_then(Value::as_str)
                .map(|v| format!("={v}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "  taint {}{value}:{} (from {})",
                text(&taint["key"]),
                text(&taint["effect"]),
                text(&t["source"])
            );
        }
        for n in d["notes"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "  note: {}", text(n));
        }
        out.push('\n');
    }
    out
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn show(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_owned)
}

#[cfg(test)]
mod tests {
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

    fn run(patches: Vec<Value>) -> Value {
        explain(&devices_of(&[slice()]), &patches_of(&patches), None, None)
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
        let out = explain(&devices_of(&[slice()]), &patches, Some(&classes), None);
        assert_eq!(out["devices"][0]["taints"], json!([]));
        assert_eq!(
            out["devices"][1]["taints"],
            json!([{"taint": {"key": "example.com/drain", "effect": "NoExecute"}, "source": "drain"}])
        );
        let unknown = explain(
            &devices_of(&[slice()]),
            &patches,
            None,
            Some("gpu.example.com/node-1/gpu-1"),
        );
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
}
