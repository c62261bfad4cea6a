//! A structure-aware mutator for JSON inputs: it parses the input, changes
//! the tree the way a hostile or careless client would (a value of another
//! type, a list repeated past a limit, a field from the Kubernetes
//! vocabulary, a subtree moved elsewhere, a kind or operation swapped), and
//! writes JSON again. Byte-level mutation of a 2 KB AdmissionReview almost
//! always yields text that is no longer JSON, which tests only the JSON
//! parser; mutating the tree keeps every input a review that reaches the
//! kind's rules, policies and patches.

use serde_json::{Value, json};

/// A small deterministic generator: libFuzzer hands the mutator a seed and
/// expects the same mutation from the same seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u32) -> Self {
        Rng(u64::from(seed) ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// splitmix64.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Field names of the objects draguard judges: setting one of them where
/// it is read reaches rules a random name never would.
const KEYS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "generateName",
    "labels",
    "annotations",
    "spec",
    "status",
    "devices",
    "requests",
    "exactly",
    "firstAvailable",
    "deviceClassName",
    "allocationMode",
    "count",
    "selectors",
    "cel",
    "expression",
    "tolerations",
    "taints",
    "key",
    "operator",
    "value",
    "effect",
    "tolerationSeconds",
    "timeAdded",
    "constraints",
    "matchAttribute",
    "config",
    "opaque",
    "driver",
    "parameters",
    "adminAccess",
    "capacity",
    "attributes",
    "pool",
    "generation",
    "resourceSliceCount",
    "nodeName",
    "nodeSelector",
    "allNodes",
    "perDeviceNodeSelection",
    "sharedCounters",
    "consumesCounters",
    "deviceSelector",
    "taint",
    "containers",
    "initContainers",
    "resources",
    "claims",
    "request",
    "resourceClaims",
    "resourceClaimName",
    "resourceClaimTemplateName",
    "template",
    "replicas",
    "parallelism",
    "priorityClassName",
    "uid",
    "operation",
    "object",
    "oldObject",
    "userInfo",
    "username",
    "groups",
    "dryRun",
    "subResource",
    "deviceTaints",
    "devicePatch",
    "filter",
    "priority",
    "bindsToNode",
    "bindingConditions",
    "nodeSelectorTerms",
    "matchExpressions",
    "values",
];

/// Values that sit on a limit, a type boundary, or in an enumeration.
fn scalar(rng: &mut Rng) -> Value {
    const STRINGS: &[&str] = &[
        "",
        "NoSchedule",
        "NoExecute",
        "None",
        "PreferNoSchedule",
        "Drain",
        "Exists",
        "Equal",
        "ExactCount",
        "All",
        "CREATE",
        "UPDATE",
        "DELETE",
        "CONNECT",
        "kube-system",
        "ml",
        "ml-train",
        "default",
        "draguard",
        "gpu.example.com",
        "example.com/maintenance",
        "nvidia.com/gpu",
        "a/b/c",
        "-",
        "UPPER",
        "x.y",
        "1",
        "0",
        "-1",
        "1.5",
        "1Gi",
        "2026-11-21T10:00:00Z",
        "not-a-time",
        "\u{0}",
        "\n\u{1b}[31m",
        "é",
        "device.driver == \"gpu.example.com\"",
        "device.attributes[\"a\"].b > 1",
        "[",
        "]",
        "{",
        "has(device.x)",
        "true",
        "1 +",
        "resource.k8s.io/v1",
        "resource.k8s.io/v1beta1",
        "resource.k8s.io/v1beta2",
        "v1",
        "apps/v1",
        "batch/v1",
        "draguard.dev/v1alpha1",
    ];
    match rng.below(6) {
        0 => json!(rng.pick(&[0i64, 1, -1, 2, 15, 16, 17, 31, 32, 33, 64, 65, 127, 128, 129, 256, 257])),
        1 => json!(rng.pick(&[i64::MAX, i64::MIN, u64::MAX as f64 as i64, 4_294_967_296])),
        2 => json!(rng.pick(&[0.5f64, -0.0, 1e300, 1.0])),
        3 => json!(rng.below(2) == 0),
        4 => Value::Null,
        _ => json!(rng.pick(STRINGS)),
    }
}

/// Small objects in the shapes draguard reads.
fn subtree(rng: &mut Rng) -> Value {
    match rng.below(9) {
        0 => json!({}),
        1 => json!([]),
        2 => json!({"key": "example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"}),
        3 => json!({"key": "k", "value": "v", "effect": "NoExecute", "tolerationSeconds": 5}),
        4 => json!({"cel": {"expression": "device.driver == \"gpu.example.com\""}}),
        5 => json!({"name": "r", "exactly": {"deviceClassName": "gpu", "count": 1}}),
        6 => json!({"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}),
        7 => json!({"key": "k", "effect": "None", "timeAdded": "2026-11-21T10:00:00Z"}),
        _ => scalar(rng),
    }
}

/// A string that crosses a length limit (253, 63, 10 KiB of CEL) or nests deeply.
fn long_string(rng: &mut Rng) -> Value {
    let n = *rng.pick(&[64usize, 254, 1025, 4097, 10 * 1024 + 1, 11_000]);
    match rng.below(3) {
        0 => json!("a".repeat(n)),
        1 => json!(format!("{}1{}", "[".repeat(n / 2), "]".repeat(n / 2))),
        _ => json!(format!("{}1{}", "(".repeat(n / 2), ")".repeat(n / 2))),
    }
}

/// JSON pointers to every node of `value`, the root first (at most `limit`).
fn pointers(value: &Value, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), value)];
    while let Some((path, v)) = stack.pop() {
        if out.len() >= limit {
            break;
        }
        match v {
            Value::Object(map) => {
                for (k, child) in map {
                    let token = k.replace('~', "~0").replace('/', "~1");
                    stack.push((format!("{path}/{token}"), child));
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    stack.push((format!("{path}/{i}"), child));
                }
            }
            _ => {}
        }
        out.push(path);
    }
    out
}

/// One structural change somewhere in `value`.
pub fn mutate(value: &mut Value, rng: &mut Rng) {
    let paths = pointers(value, 4096);
    let path = rng.pick(&paths).clone();
    let donor = value.pointer(rng.pick(&paths)).cloned().unwrap_or(Value::Null);
    if rng.below(8) == 0 {
        envelope(value, rng);
        return;
    }
    let Some(node) = value.pointer_mut(&path) else {
        return;
    };
    match rng.below(12) {
        0 => *node = scalar(rng),
        1 => *node = subtree(rng),
        2 => *node = long_string(rng),
        // A subtree from elsewhere in the same document.
        3 => *node = donor,
        4 => match node {
            Value::Object(map) if !map.is_empty() => {
                let key = map.keys().nth(rng.below(map.len())).cloned().unwrap_or_default();
                map.remove(&key);
            }
            Value::Array(items) if !items.is_empty() => {
                let i = rng.below(items.len());
                items.remove(i);
            }
            _ => *node = Value::Null,
        },
        5 | 6 => match node {
            Value::Object(map) => {
                let key = (*rng.pick(KEYS)).to_owned();
                let v = subtree(rng);
                map.insert(key, v);
            }
            // A list repeated past a limit (16 tolerations, 32 requests, ...).
            Value::Array(items) if !items.is_empty() => {
                let i = rng.below(items.len());
                let copies = *rng.pick(&[1usize, 2, 8, 16, 17, 33, 129, 300]);
                let item = items[i].clone();
                items.extend(std::iter::repeat_n(item, copies));
            }
            Value::Array(items) => items.push(subtree(rng)),
            other => *other = json!({ (*rng.pick(KEYS)): other.clone() }),
        },
        7 => *node = json!([node.clone()]),
        8 => *node = json!({ (*rng.pick(KEYS)): node.clone() }),
        9 => match node {
            Value::String(s) => {
                let cut = rng.below(s.len() + 1);
                let cut = (0..=cut).rev().find(|&c| s.is_char_boundary(c)).unwrap_or(0);
                let extra = scalar(rng);
                s.insert_str(cut, extra.as_str().unwrap_or("\""));
            }
            Value::Number(_) => *node = json!(node.to_string()),
            _ => *node = scalar(rng),
        },
        10 => {
            // A whole object kept, one of its fields renamed to a known key.
            if let Value::Object(map) = node
                && !map.is_empty()
            {
                let key = map.keys().nth(rng.below(map.len())).cloned().unwrap_or_default();
                if let Some(v) = map.remove(&key) {
                    map.insert((*rng.pick(KEYS)).to_owned(), v);
                }
            }
        }
        _ => {
            if let Value::Object(map) = node {
                let key = (*rng.pick(KEYS)).to_owned();
                map.insert(key, long_string(rng));
            } else {
                *node = long_string(rng);
            }
        }
    }
}

/// A change to what the request is: its kind, operation, namespace, user,
/// or which object is the old one.
fn envelope(value: &mut Value, rng: &mut Rng) {
    let Some(request) = value.get_mut("request").and_then(Value::as_object_mut) else {
        return;
    };
    match rng.below(5) {
        0 => {
            let row = &rng.pick(draguard::review::registry::KINDS).row;
            let version = *rng.pick(row.versions);
            request.insert(
                "kind".into(),
                json!({"group": row.group, "version": version, "kind": row.kind}),
            );
            request.insert(
                "resource".into(),
                json!({"group": row.group, "version": version, "resource": row.plural}),
            );
            if let Some(object) = request.get_mut("object").and_then(Value::as_object_mut) {
                let api_version = if row.group.is_empty() {
                    version.to_owned()
                } else {
                    format!("{}/{version}", row.group)
                };
                object.insert("apiVersion".into(), json!(api_version));
                object.insert("kind".into(), json!(row.kind));
            }
        }
        1 => {
            let op = *rng.pick(&["CREATE", "UPDATE", "DELETE", "CONNECT"]);
            request.insert("operation".into(), json!(op));
        }
        2 => {
            let ns = *rng.pick(&["kube-system", "ml", "ml-train", "default", "draguard", ""]);
            request.insert("namespace".into(), json!(ns));
            if let Some(meta) = request
                .get_mut("object")
                .and_then(|o| o.get_mut("metadata"))
                .and_then(Value::as_object_mut)
            {
                meta.insert("namespace".into(), json!(ns));
            }
        }
        3 => {
            let user = *rng.pick(&["system:serviceaccount:kube-system:x", "alice", "system:admin", ""]);
            let groups = *rng.pick(&["system:masters", "system:nodes", "ml-admins"]);
            request.insert("userInfo".into(), json!({"username": user, "groups": [groups]}));
        }
        _ => {
            // UPDATE of the object to itself, or with the two swapped.
            let object = request.get("object").cloned().unwrap_or(Value::Null);
            let old = request.insert("oldObject".into(), object);
            if rng.below(2) == 0
                && let Some(old) = old
            {
                request.insert("object".into(), old);
            }
            request.insert("operation".into(), json!("UPDATE"));
        }
    }
}

/// libFuzzer's custom mutator body: parse, apply one to three changes,
/// write back. Input that is not JSON (a seed of another kind, or the
/// rare byte-level step below) goes to libFuzzer's own mutator.
pub fn mutate_bytes(
    data: &mut [u8],
    size: usize,
    max_size: usize,
    seed: u32,
    fallback: impl FnOnce(&mut [u8], usize, usize) -> usize,
) -> usize {
    let mut rng = Rng::new(seed);
    // One step in 16 is byte-level, so that escapes and number syntax are
    // explored too.
    if rng.below(16) != 0
        && let Ok(value) = serde_json::from_slice::<Value>(&data[..size])
    {
        let mut value = crate::unwrap_case(value);
        for _ in 0..=rng.below(3) {
            mutate(&mut value, &mut rng);
        }
        if let Ok(bytes) = serde_json::to_vec(&value)
            && bytes.len() <= max_size
        {
            data[..bytes.len()].copy_from_slice(&bytes);
            return bytes.len();
        }
    }
    fallback(data, size, max_size)
}

/// libFuzzer's custom crossover: a random subtree of `b` grafted at a
/// random place of `a`.
pub fn crossover(a: &[u8], b: &[u8], out: &mut [u8], seed: u32) -> usize {
    let mut rng = Rng::new(seed);
    let (Ok(a), Ok(b)) = (serde_json::from_slice::<Value>(a), serde_json::from_slice::<Value>(b)) else {
        return 0;
    };
    let (mut a, b) = (crate::unwrap_case(a), crate::unwrap_case(b));
    let from = pointers(&b, 4096);
    let graft = b.pointer(rng.pick(&from)).cloned().unwrap_or(Value::Null);
    let to = pointers(&a, 4096);
    match a.pointer_mut(rng.pick(&to)) {
        Some(node) => *node = graft,
        None => return 0,
    }
    match serde_json::to_vec(&a) {
        Ok(bytes) if bytes.len() <= out.len() => {
            out[..bytes.len()].copy_from_slice(&bytes);
            bytes.len()
        }
        _ => 0,
    }
}
