//! Every patch draguard emits applies to the object it was computed for
//! (issue 16). Checked on every AdmissionReview of the conformance corpus,
//! the real apiserver's fixtures and the examples, and by proptest on
//! variants of them whose shapes are broken at random places: values
//! replaced by lists, strings, numbers, null or objects; fields removed or
//! added; tolerations and taints appended; CREATE and UPDATE; with no
//! policies, the example policies, or policies that add defaults, and with
//! PodTolerationRestriction on or off.
//!
//! For each request:
//! - `/mutate` either admits it, with a patch that applies (as sent,
//!   base64 and all) and with no failure of its own, or refuses it with a
//!   400 that `/validate` and `check` give too;
//! - the patched object still decodes, and `/validate` judges it as
//!   `check` (mutate, then validate) judges the request.
//!
//! `PROPTEST_CASES` changes the number of generated cases (default 512).

use std::path::Path;
use std::sync::OnceLock;

use base64::Engine as _;
use draguard::admission::Incoming;
use draguard::policy::PolicySet;
use draguard::policy::toleration_restriction::TolerationRestrictionConfig;
use draguard::review::Engine;
use draguard::verdict::{Decision, Denial, Phase};
use draguard::view::StaticView;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

/// Adds a Pod toleration and a device toleration everywhere, so that every
/// Pod and claim gets a patch to apply.
const DEFAULTS: &str = "\
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: defaults-everywhere}
spec:
  pods:
    defaults: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
  devices:
    defaults: [{key: example.com/maintenance, operator: Exists, effect: NoSchedule}]
";

/// The namespaces a variant is moved to: the example policies select `ml`
/// by name and `team-a` by label; PodTolerationRestriction adds a default
/// toleration in both.
const NAMESPACES: &[&str] = &["ml", "team-a", "kube-system", "default"];

struct World {
    seeds: Vec<(String, Value)>,
    policy_sets: Vec<(&'static str, PolicySet)>,
    cluster: StaticView,
    restriction: TolerationRestrictionConfig,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let examples = draguard::policy_files::load::load_dir(&root.join("policies"))
            .expect("the example policies load")
            .set;
        let defaults = PolicySet {
            policies: draguard::policy::load::parse("defaults.yaml", DEFAULTS).expect("a valid policy"),
            ..Default::default()
        };
        let mut cluster = StaticView::default()
            .with_namespace("ml", &[])
            .with_namespace("team-a", &[("team", "ml")])
            .with_namespace("kube-system", &[])
            .with_namespace("default", &[]);
        for ns in NAMESPACES {
            cluster.annotations.insert(
                (*ns).to_owned(),
                [(
                    "scheduler.alpha.kubernetes.io/defaultTolerations".to_owned(),
                    r#"[{"key": "ns-default", "operator": "Exists", "effect": "NoSchedule"}]"#.to_owned(),
                )]
                .into(),
            );
        }
        World {
            seeds: seeds(root),
            policy_sets: vec![
                ("no policies", PolicySet::default()),
                ("example policies", examples),
                ("defaults everywhere", defaults),
            ],
            cluster,
            restriction: TolerationRestrictionConfig::default(),
        }
    })
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("readable")).expect("JSON")
}

fn json_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("a folder")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && !p.ends_with("index.json"))
        .collect();
    files.sort();
    files
}

/// Every AdmissionReview of the corpus, the fixtures and the examples, and
/// a few of kinds and versions they lack.
fn seeds(root: &Path) -> Vec<(String, Value)> {
    let mut seeds = Vec::new();
    for file in json_files(&root.join("tests/conformance")) {
        seeds.push((file.display().to_string(), read_json(&file)["review"].clone()));
    }
    for dir in ["tests/fixtures/apiserver", "examples"] {
        for file in json_files(&root.join(dir)) {
            seeds.push((file.display().to_string(), read_json(&file)));
        }
    }
    for (name, kind, namespace, object) in extra_objects() {
        seeds.push((name.to_owned(), admission_review(kind, namespace, object)));
    }
    assert!(seeds.len() > 200, "the corpus went missing: {} seeds", seeds.len());
    seeds
}

fn admission_review(kind: (&str, &str, &str, &str), namespace: Option<&str>, object: Value) -> Value {
    let (group, version, kind, plural) = kind;
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-extra",
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": plural},
        "name": object["metadata"]["name"], "namespace": namespace, "operation": "CREATE",
        "userInfo": {"username": "alice"}, "object": object}})
}

type Extra = (
    &'static str,
    (&'static str, &'static str, &'static str, &'static str),
    Option<&'static str>,
    Value,
);

fn extra_objects() -> Vec<Extra> {
    let tolerations = json!([{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]);
    let pod_spec = json!({"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
                          "tolerations": tolerations});
    vec![
        (
            "extra: Pod with tolerations",
            ("", "v1", "Pod", "pods"),
            Some("ml"),
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": pod_spec}),
        ),
        (
            "extra: Deployment",
            ("apps", "v1", "Deployment", "deployments"),
            Some("ml"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml"},
                   "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                            "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_spec}}}),
        ),
        (
            "extra: v1beta1 ResourceSlice with basic taints",
            ("resource.k8s.io", "v1beta1", "ResourceSlice", "resourceslices"),
            None,
            json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice", "metadata": {"name": "s"},
                   "spec": {"driver": "gpu.example.com", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                            "nodeName": "n1",
                            "devices": [{"name": "d0", "basic": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}]}}),
        ),
        (
            "extra: ResourceSlicePatch with taints",
            ("draguard.dev", "v1alpha1", "ResourceSlicePatch", "resourceslicepatches"),
            None,
            json!({"apiVersion": "draguard.dev/v1alpha1", "kind": "ResourceSlicePatch", "metadata": {"name": "rsp"},
                   "spec": {"devices": {"filter": {"driver": "gpu.example.com"},
                                        "taints": [{"key": "example.com/maintenance", "effect": "NoSchedule"}]}}}),
        ),
        (
            "extra: v1beta1 ResourceClaim with tolerations",
            ("resource.k8s.io", "v1beta1", "ResourceClaim", "resourceclaims"),
            Some("ml"),
            json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
                   "metadata": {"name": "c", "namespace": "ml"},
                   "spec": {"devices": {"requests": [
                       {"name": "a", "deviceClassName": "gpu", "tolerations": [{"key": "k", "operator": "Exists"}]},
                       {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "gpu"}]}]}}}),
        ),
        (
            "extra: v1 ResourceClaimTemplate",
            (
                "resource.k8s.io",
                "v1",
                "ResourceClaimTemplate",
                "resourceclaimtemplates",
            ),
            Some("team-a"),
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                   "metadata": {"name": "t", "namespace": "team-a"},
                   "spec": {"spec": {"devices": {"requests": [
                       {"name": "a", "exactly": {"deviceClassName": "gpu"}},
                       {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "gpu", "tolerations": []}]}]}}}}),
        ),
    ]
}

/// One way of asking: which policies, and whether PodTolerationRestriction
/// is on.
#[derive(Debug, Clone, Copy)]
struct Setting {
    policies: usize,
    restriction: bool,
}

/// The settings that can make a difference to a request: policies and
/// PodTolerationRestriction to a Pod, policies to a claim, none to the
/// other kinds (which get no defaults), asked once.
fn settings_for(review: &Value) -> Vec<Setting> {
    let restrictions: &[bool] = match review.pointer("/request/kind/kind").and_then(Value::as_str) {
        Some("Pod") => &[false, true],
        Some("ResourceClaim" | "ResourceClaimTemplate") => &[false],
        _ => {
            return vec![Setting {
                policies: 1,
                restriction: true,
            }];
        }
    };
    (0..3)
        .flat_map(|policies| {
            restrictions
                .iter()
                .map(move |&restriction| Setting { policies, restriction })
        })
        .collect()
}

fn decide(world: &World, setting: Setting, body: &[u8], phase: Phase) -> Result<(Decision, Value), String> {
    let incoming = Incoming::parse(body).map_err(|e| format!("not an AdmissionReview: {e}"))?;
    let ctx = Engine::new(
        &world.policy_sets[setting.policies].1,
        &world.cluster,
        Default::default(),
    )
    .with_toleration_restriction(setting.restriction.then_some(&world.restriction))
    .context("2026-11-21T10:00:00Z".parse().expect("time"), phase, None);
    Ok(incoming.answer(&ctx))
}

fn body_of(review: &Value) -> Result<Vec<u8>, String> {
    serde_json::to_vec(review).map_err(|e| e.to_string())
}

/// The JSON patch of a `/mutate` answer, as the apiserver would read it.
fn wire_patch(answer: &Value) -> Result<Option<json_patch::Patch>, String> {
    let Some(encoded) = answer.pointer("/response/patch") else {
        return Ok(None);
    };
    let encoded = encoded.as_str().ok_or("patch is not a string")?;
    if answer.pointer("/response/patchType") != Some(&json!("JSONPatch")) {
        return Err(format!("patchType: {:?}", answer.pointer("/response/patchType")));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map(Some).map_err(|e| e.to_string())
}

fn is_bad_request(decision: &Decision) -> bool {
    matches!(decision.denial, Some(Denial::BadRequest(_)))
}

/// The invariants of one request under one setting; whether `/mutate`
/// patched it.
fn holds(world: &World, setting: Setting, review: &Value) -> Result<bool, String> {
    let body = body_of(review)?;
    let (mutated, answer) = decide(world, setting, &body, Phase::Mutate)?;
    let (validated, _) = decide(world, setting, &body, Phase::Validate)?;
    let (both, _) = decide(world, setting, &body, Phase::Both)?;
    if !mutated.allowed {
        // Only what does not decode is refused by /mutate, and then by
        // every door alike.
        if !is_bad_request(&mutated) {
            return Err(format!("/mutate denied other than 400: {:?}", mutated.denial));
        }
        if validated.denial != mutated.denial || both.denial != mutated.denial {
            return Err(format!(
                "the doors disagree on a 400: mutate {:?}, validate {:?}, both {:?}",
                mutated.denial, validated.denial, both.denial
            ));
        }
        return Ok(false);
    }
    if let Some(e) = &mutated.internal_error {
        return Err(format!("/mutate could not compute its patch: {e}"));
    }
    if is_bad_request(&both) {
        return Err(format!("/mutate admitted what check refuses as 400: {:?}", both.denial));
    }
    let Some(patch) = wire_patch(&answer)? else {
        // Nothing patched: `/validate` judged this very object above.
        return if validated.denial == both.denial {
            Ok(false)
        } else {
            Err(format!(
                "/validate says {:?}, check says {:?}",
                validated.denial, both.denial
            ))
        };
    };
    let mut patched = review.pointer("/request/object").cloned().unwrap_or(Value::Null);
    json_patch::patch(&mut patched, &patch).map_err(|e| format!("the patch does not apply: {e}; patch {patch:?}"))?;
    let mut after = review.clone();
    after["request"]["object"] = patched;
    let (judged, _) = decide(world, setting, &body_of(&after)?, Phase::Validate)?;
    if is_bad_request(&judged) {
        return Err(format!("the patched object does not decode: {:?}", judged.denial));
    }
    if judged.allowed != both.allowed || judged.denial != both.denial {
        return Err(format!(
            "/validate on the patched object says {:?}, check says {:?}",
            judged.denial, both.denial
        ));
    }
    Ok(true)
}

#[test]
fn every_patch_of_the_corpus_applies() {
    let world = world();
    let mut failures = Vec::new();
    let mut patched = 0;
    for (name, review) in &world.seeds {
        for setting in settings_for(review) {
            match holds(world, setting, review) {
                Ok(was_patched) => patched += usize::from(was_patched),
                Err(e) => failures.push(format!(
                    "{name} ({} {setting:?}): {e}",
                    world.policy_sets[setting.policies].0
                )),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // The corpus must exercise patches, not only pass through.
    eprintln!("{patched} answers carried a patch that applied");
    assert!(patched >= 200, "only {patched} answers carried a patch");
}

/// One change to an object.
#[derive(Debug, Clone)]
enum Edit {
    /// Replace the value at the n-th path (see [`pick`]).
    Replace(usize, Value),
    /// Remove the value at the n-th path.
    Remove(usize),
    /// Insert a field into the n-th object.
    Insert(usize, &'static str, Value),
    /// Append to the n-th list.
    Append(usize, Value),
}

/// A value of some shape, weighted towards the shapes the mutations write
/// into and the lists they append to.
fn shape() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-3i64..300).prop_map(Value::from),
        prop::sample::select(vec!["x", "", "NoSchedule", "Exists", "2026-01-01T00:00:00Z", "gpu"])
            .prop_map(Value::from),
    ];
    let leaf = prop_oneof![
        3 => scalar,
        2 => toleration(),
        1 => Just(json!({})),
        1 => Just(json!([])),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop::sample::select(vec!["key", "spec", "taints", "tolerations", "x"]),
                    inner
                ),
                0..3
            )
            .prop_map(|fields| Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

/// A toleration or a taint, valid or not.
fn toleration() -> impl Strategy<Value = Value> {
    let pick = |values: Vec<&'static str>| prop::option::of(prop::sample::select(values));
    (
        pick(vec!["dedicated", "example.com/maintenance", "k", ""]),
        pick(vec!["Exists", "Equal", "Bogus"]),
        pick(vec!["ml", "v"]),
        pick(vec!["NoSchedule", "NoExecute", "None", "PreferNoSchedule"]),
        prop::option::of(prop_oneof![
            Just(json!(60)),
            Just(json!("2026-01-01T00:00:00Z")),
            Just(Value::Null)
        ]),
    )
        .prop_map(|(key, operator, value, effect, extra)| {
            let mut object = serde_json::Map::new();
            for (field, v) in [
                ("key", key),
                ("operator", operator),
                ("value", value),
                ("effect", effect),
            ] {
                if let Some(v) = v {
                    object.insert(field.to_owned(), Value::from(v));
                }
            }
            if let Some(extra) = extra {
                let field = if extra.is_string() {
                    "timeAdded"
                } else {
                    "tolerationSeconds"
                };
                object.insert(field.to_owned(), extra);
            }
            Value::Object(object)
        })
}

fn edit() -> impl Strategy<Value = Edit> {
    let key = prop::sample::select(vec![
        "tolerations",
        "taints",
        "timeAdded",
        "spec",
        "exactly",
        "basic",
        "devices",
        "requests",
        "firstAvailable",
        "taint",
    ]);
    prop_oneof![
        3 => (any::<usize>(), shape()).prop_map(|(n, v)| Edit::Replace(n, v)),
        2 => any::<usize>().prop_map(Edit::Remove),
        2 => (any::<usize>(), key, shape()).prop_map(|(n, k, v)| Edit::Insert(n, k, v)),
        3 => (any::<usize>(), prop_oneof![2 => toleration(), 1 => shape()]).prop_map(|(n, v)| Edit::Append(n, v)),
    ]
}

/// Every place in `value` as JSON-pointer tokens, the root excluded.
fn places(value: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let children: Vec<(String, &Value)> = match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
        _ => return,
    };
    for (token, child) in children {
        at.push(token);
        out.push(at.clone());
        places(child, at, out);
        at.pop();
    }
}

fn pointer(tokens: &[String]) -> String {
    tokens
        .iter()
        .map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1")))
        .collect()
}

/// The fields the mutations read and write, and the lists whose items
/// they write into: half of the edits land on one of these.
const FOCUS: &[&str] = &[
    "spec",
    "template",
    "tolerations",
    "taints",
    "taint",
    "timeAdded",
    "devices",
    "requests",
    "exactly",
    "firstAvailable",
    "basic",
];

fn focused(path: &[String]) -> bool {
    let named = |t: Option<&String>| t.is_some_and(|t| FOCUS.contains(&t.as_str()));
    named(path.last()) || (path.len() > 1 && named(path.get(path.len() - 2)))
}

/// The n-th of `paths`: an even n picks among the focused ones (when there
/// are any), an odd n among all.
fn pick(paths: &[Vec<String>], n: usize) -> Option<&Vec<String>> {
    let chosen: Vec<&Vec<String>> = if n.is_multiple_of(2) && paths.iter().any(|p| focused(p)) {
        paths.iter().filter(|p| focused(p)).collect()
    } else {
        paths.iter().collect()
    };
    (!chosen.is_empty()).then(|| chosen[(n / 2) % chosen.len()])
}

fn apply_edit(object: &mut Value, edit: &Edit) {
    let mut all = Vec::new();
    places(object, &mut Vec::new(), &mut all);
    let of_kind = |want: fn(&Value) -> bool| -> Vec<Vec<String>> {
        let mut found: Vec<Vec<String>> = all
            .iter()
            .filter(|p| object.pointer(&pointer(p)).is_some_and(want))
            .cloned()
            .collect();
        if want(object) {
            found.push(Vec::new());
        }
        found
    };
    match edit {
        Edit::Replace(n, value) => {
            if let Some(slot) = pick(&all, *n).and_then(|p| object.pointer_mut(&pointer(p))) {
                *slot = value.clone();
            }
        }
        Edit::Remove(n) => {
            let Some((last, parent)) = pick(&all, *n).and_then(|p| p.split_last()) else {
                return;
            };
            match object.pointer_mut(&pointer(parent)) {
                Some(Value::Object(map)) => {
                    map.remove(last);
                }
                Some(Value::Array(items)) => {
                    if let Ok(i) = last.parse::<usize>() {
                        items.remove(i);
                    }
                }
                _ => {}
            }
        }
        Edit::Insert(n, key, value) => {
            let objects = of_kind(Value::is_object);
            if let Some(Value::Object(map)) = pick(&objects, *n).and_then(|p| object.pointer_mut(&pointer(p))) {
                map.insert((*key).to_owned(), value.clone());
            }
        }
        Edit::Append(n, value) => {
            let lists = of_kind(Value::is_array);
            if let Some(Value::Array(items)) = pick(&lists, *n).and_then(|p| object.pointer_mut(&pointer(p))) {
                items.push(value.clone());
            }
        }
    }
}

/// A variant of a seed: its object edited, maybe moved to another
/// namespace, maybe asked as the other operation.
#[derive(Debug, Clone)]
struct Variant {
    seed: usize,
    edits: Vec<Edit>,
    namespace: Option<&'static str>,
    /// CREATE (no oldObject), UPDATE of the seed's object, or UPDATE of
    /// the seed's own oldObject.
    operation: u8,
    setting: Setting,
}

fn variant(seeds: usize) -> impl Strategy<Value = Variant> {
    // Weighted towards what gets patched: a CREATE, with defaults to add.
    (
        0..seeds,
        prop::collection::vec(edit(), 1..3),
        prop::option::of(prop::sample::select(NAMESPACES.to_vec())),
        prop_oneof![3 => Just(0u8), 1 => Just(1u8), 1 => Just(2u8)],
        prop_oneof![1 => Just(0usize), 1 => Just(1usize), 3 => Just(2usize)],
        any::<bool>(),
    )
        .prop_map(|(seed, edits, namespace, operation, policies, restriction)| Variant {
            seed,
            edits,
            namespace,
            operation,
            setting: Setting { policies, restriction },
        })
}

fn build(world: &World, v: &Variant) -> Value {
    let mut review = world.seeds[v.seed].1.clone();
    let original = review["request"]["object"].clone();
    let request = &mut review["request"];
    if let (Some(ns), true) = (v.namespace, request["namespace"].is_string()) {
        request["namespace"] = json!(ns);
        if let Some(meta) = request["object"].get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("namespace".into(), json!(ns));
        }
    }
    for edit in &v.edits {
        apply_edit(&mut request["object"], edit);
    }
    let request = request.as_object_mut().expect("a request");
    match v.operation {
        0 => {
            request.insert("operation".into(), json!("CREATE"));
            request.remove("oldObject");
        }
        1 => {
            request.insert("operation".into(), json!("UPDATE"));
            request.insert("oldObject".into(), original);
        }
        _ => {
            if !request.get("oldObject").is_some_and(Value::is_object) {
                request.insert("oldObject".into(), original);
            }
            request.insert("operation".into(), json!("UPDATE"));
        }
    }
    review
}

#[test]
fn every_patch_of_a_broken_variant_applies() {
    let world = world();
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(512);
    let mut runner = TestRunner::new(Config {
        cases,
        // A failure prints its minimal variant; nothing is written into the
        // repository.
        failure_persistence: None,
        ..Config::default()
    });
    let patched = std::sync::atomic::AtomicUsize::new(0);
    let result = runner.run(&variant(world.seeds.len()), |v| {
        let review = build(world, &v);
        let was_patched = holds(world, v.setting, &review).map_err(|e| {
            TestCaseError::fail(format!(
                "{} ({}): {e}\nobject: {}",
                world.seeds[v.seed].0, world.policy_sets[v.setting.policies].0, review["request"]["object"]
            ))
        })?;
        patched.fetch_add(usize::from(was_patched), std::sync::atomic::Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let patched = patched.into_inner();
    eprintln!("{patched} of {cases} variants carried a patch that applied");
    // Broken shapes must not crowd out the patches under test.
    assert!(
        patched * 8 >= cases as usize,
        "only {patched} of {cases} variants were patched"
    );
}
