//! The condition `serve --manage-webhook-certs` keeps on the validating
//! entries (src/controllers/validate_conditions.rs): a write reaches
//! `/validate` only when draguard's answer there can differ from the
//! apiserver's own, which runs the same rules anyway.
//!
//! Proved over every AdmissionRequest a real kube-apiserver v1.36.2 sent
//! (tests/fixtures/apiserver) and variants with tolerations and configs,
//! moved into namespaces that policies select by name, by label, by
//! nothing, for several policy sets: where the condition keeps a write
//! from `/validate`, draguard's own answer to it (after its own `/mutate`
//! patch, as the apiserver would send it) is a plain admission: no policy
//! denial, no warning, no audit annotation, no deliberate difference from
//! the apiserver's rules.

use std::collections::BTreeMap;

use draguard::controllers::validate_conditions::{Inputs, plan};
use draguard::policy::PolicySet;
use draguard::verdict::{Denial, Phase};
use serde_json::{Value, json};

use super::{
    apiserver_requests, apply_plan, overlay, reached_with_namespace, render, shipped_policies, with_managed_condition,
};

const MATCHING: Inputs = Inputs {
    toleration_restriction: false,
    rules_match_apiserver: true,
};

/// `docs` with the validating entries' managed condition for `policies`
/// (and the defaulting entry's, as `serve` writes both).
fn with_validate_condition(docs: Vec<Value>, policies: &PolicySet, inputs: Inputs) -> Vec<Value> {
    let mut docs = with_managed_condition(docs, policies);
    let desired = draguard::controllers::validate_conditions::condition(policies, inputs);
    apply_plan::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>(
        &mut docs,
        "ValidatingWebhookConfiguration",
        |typed| {
            plan(
                typed.webhooks.as_deref().unwrap_or_default(),
                "draguard",
                "draguard",
                &desired,
            )
        },
    );
    docs
}

/// Policies that judge what the shipped ones do not: a device allow list,
/// a quota, a pod deny list that reaches the DefaultTolerationSeconds
/// pair, an Audit-mode allow list without platform defaults, and a Warn
/// device deny list.
const JUDGING: &str = r#"
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: team-a-devices}
spec:
  namespaces: {names: [team-a]}
  devices:
    allow: [{key: gpu.example.com/shared, operator: Exists}]
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: quota-ns}
spec:
  namespaces: {names: [quota-ns]}
  quota:
    claims: 0
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: strict}
spec:
  namespaces: {names: [strict]}
  pods:
    deny: [{key: node.kubernetes.io/unreachable, operator: Exists}]
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: audited}
spec:
  mode: Audit
  namespaces:
    selector: {matchLabels: {audit: "yes"}}
  pods:
    allow: [{key: x, operator: Exists}]
    allowPlatformDefaults: false
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: research-warn}
spec:
  mode: Warn
  namespaces: {names: [research]}
  devices:
    deny: [{key: gpu.example.com/experimental, operator: Exists}]
"#;

fn judging_policies() -> PolicySet {
    let mut set = shipped_policies();
    set.policies
        .extend(draguard::policy::load::parse("judging.yaml", JUDGING).expect("valid policies"));
    set
}

/// The namespaces every write is moved into, with their labels.
const NAMESPACES: [(&str, &[(&str, &str)]); 9] = [
    ("default", &[]),
    ("ml", &[]),
    ("gpu-team", &[("team", "ml")]),
    ("research", &[]),
    ("team-a", &[]),
    ("quota-ns", &[]),
    ("strict", &[]),
    ("audit-me", &[("audit", "yes")]),
    ("ml-sandbox", &[("team", "ml")]),
];

/// Tolerations and configs to add to the recorded writes, so that every
/// reason to call is met somewhere.
fn variants(file: &str, request: &Value) -> Vec<(String, Value)> {
    let mut out = vec![(file.to_owned(), request.clone())];
    out.extend(plain(request).map(|r| (format!("{file} plain"), r)));
    let resource = request["resource"]["resource"].as_str().unwrap_or_default();
    let mut with = |what: &str, edit: &dyn Fn(&mut Value)| {
        let mut r = request.clone();
        edit(&mut r["object"]);
        out.push((format!("{file} +{what}"), r));
    };
    match resource {
        "pods" => {
            for (what, t) in [
                (
                    "dedicated=ml",
                    json!({"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}),
                ),
                (
                    "drain",
                    json!({"key": "maintenance.example.com/drain", "operator": "Exists"}),
                ),
                ("x", json!({"key": "x", "operator": "Exists"})),
            ] {
                with(what, &|o| push(&mut o["spec"]["tolerations"], t.clone()));
            }
        }
        "resourceclaims" | "resourceclaimtemplates" => {
            let template = resource == "resourceclaimtemplates";
            let request_tolerations = |o: &mut Value, t: Value, n: usize| {
                let spec = if template {
                    &mut o["spec"]["spec"]
                } else {
                    &mut o["spec"]
                };
                let Some(requests) = spec["devices"]["requests"].as_array_mut() else {
                    return;
                };
                for r in requests {
                    let list = if r.get("exactly").is_some() {
                        &mut r["exactly"]["tolerations"]
                    } else if r.get("firstAvailable").is_some() {
                        &mut r["firstAvailable"][0]["tolerations"]
                    } else {
                        &mut r["tolerations"]
                    };
                    for _ in 0..n {
                        push(list, t.clone());
                    }
                }
            };
            let experimental =
                json!({"key": "gpu.example.com/experimental", "operator": "Exists", "effect": "NoSchedule"});
            with("experimental", &|o| request_tolerations(o, experimental.clone(), 1));
            let maintenance =
                json!({"key": "gpu.example.com/maintenance", "operator": "Exists", "effect": "NoSchedule"});
            with("maintenance", &|o| request_tolerations(o, maintenance.clone(), 1));
            let own = json!({"key": "own", "operator": "Exists", "effect": "NoSchedule"});
            with("17 tolerations", &|o| request_tolerations(o, own.clone(), 17));
        }
        _ => {}
    }
    out
}

fn push(list: &mut Value, item: Value) {
    if !list.is_array() {
        *list = json!([]);
    }
    if let Some(list) = list.as_array_mut() {
        list.push(item);
    }
}

/// draguard's `/mutate` then `/validate` on `request` in a namespace with
/// `labels`: the request as `/validate` gets it, and whether draguard's
/// answer there differs from a plain admission in anything the apiserver
/// would not say itself.
fn draguard_changes(request: &Value, policies: &PolicySet, labels: &[(&str, &str)]) -> (Value, Option<String>) {
    let ns = request["namespace"].as_str().unwrap_or_default();
    let view = draguard::view::StaticView::default().with_namespace(ns, labels);
    let engine = draguard::review::Engine::new(policies, &view, Default::default());
    let now = "2026-11-21T10:00:00Z".parse().expect("time");
    let answer = |request: &Value, phase| {
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
        let incoming =
            draguard::admission::Incoming::parse(&serde_json::to_vec(&review).expect("JSON")).expect("review");
        incoming.answer(&engine.context(now, phase, None)).0
    };
    let mut request = request.clone();
    let mutation = answer(&request, Phase::Mutate);
    if !mutation.patch.is_empty() {
        let patch = json_patch::Patch(mutation.patch);
        json_patch::patch(&mut request["object"], &patch).expect("draguard's patch applies");
    }
    let d = answer(&request, Phase::Validate);
    let change = match &d.denial {
        Some(Denial::Invalid { errors, .. }) => errors
            .iter()
            .find(|e| e.to_string().contains("tolerations: Too many"))
            .map(|e| format!("the deliberate limit: {e}")),
        Some(other) => Some(format!("denied: {other:?}")),
        None if !d.warnings.is_empty() => Some(format!("warnings: {:?}", d.warnings)),
        None if !d.audit.is_empty() => Some(format!("audit: {:?}", d.audit)),
        None => None,
    };
    (request, change)
}

/// How many validating entries the request reaches.
fn validate_calls(docs: &[Value], request: &Value, labels: &[(&str, &str)]) -> usize {
    let ns = request["namespace"].as_str().unwrap_or_default();
    let mut all: BTreeMap<&str, &str> = labels.iter().copied().collect();
    all.insert("kubernetes.io/metadata.name", ns);
    let stored = json!({"metadata": {"name": ns, "labels": all}});
    reached_with_namespace(docs, request, &stored)
        .iter()
        .filter(|(c, _)| c["kind"] == "ValidatingWebhookConfiguration")
        .count()
}

/// Every write whose outcome draguard can change still reaches
/// `/validate`; of the rest, most do not.
#[test]
fn validate_is_called_only_when_draguard_can_change_the_outcome() {
    let Some(docs) = render(&overlay("base")) else {
        return;
    };
    let judged = [
        "pods",
        "resourceclaims",
        "resourceclaimtemplates",
        "resourceslices",
        "nodes",
    ];
    let requests: Vec<(String, Value)> = apiserver_requests()
        .into_iter()
        .filter(|(_, _, r)| judged.contains(&r["resource"]["resource"].as_str().unwrap_or_default()))
        .flat_map(|(file, _, r)| variants(&file, &r))
        .collect();
    let mut table = Vec::new();
    for (name, policies) in [
        ("policies/", shipped_policies()),
        ("policies/ + judging", judging_policies()),
    ] {
        let managed = with_validate_condition(docs.clone(), &policies, MATCHING);
        let (mut before, mut after, mut changed, mut writes) = (0, 0, 0, 0);
        for (ns, labels) in NAMESPACES {
            for (file, request) in &requests {
                let mut request = request.clone();
                if request["namespace"].as_str().is_some_and(|n| !n.is_empty()) {
                    request["namespace"] = json!(ns);
                    request["object"]["metadata"]["namespace"] = json!(ns);
                }
                let (request, change) = draguard_changes(&request, &policies, labels);
                let calls = validate_calls(&managed, &request, labels);
                if let Some(why) = &change {
                    assert_eq!(
                        calls, 1,
                        "{name}: {file} in {ns} is not sent, but draguard would say {why}"
                    );
                    changed += 1;
                }
                writes += 1;
                before += validate_calls(&docs, &request, labels);
                after += calls;
            }
        }
        assert!(
            changed > 0 && after < before,
            "{name}: {changed} changed, {before} -> {after}"
        );
        table.push(format!(
            "  {name}: {writes} writes, draguard changes {changed}; /validate calls {before} -> {after}"
        ));
    }
    eprintln!("{}", table.join("\n"));
}

/// Issue 40's floor, with the shipped policies: in a namespace no policy
/// selects for what it holds, a Pod CREATE without tolerations of its own
/// (the DefaultTolerationSeconds pair only) and a claim CREATE without
/// tolerations or configs reach no entry at all.
#[test]
fn a_plain_pod_or_claim_create_costs_no_call() {
    let Some(docs) = render(&overlay("base")) else {
        return;
    };
    let managed = with_validate_condition(docs, &shipped_policies(), MATCHING);
    let mut counted = 0;
    for (file, _, request) in apiserver_requests() {
        let Some(mut request) = plain(&request).filter(|r| r["operation"] == "CREATE") else {
            continue;
        };
        assert!(!request["object"]["spec"].to_string().contains("\"config\""), "{file}");
        request["namespace"] = json!("default");
        request["object"]["metadata"]["namespace"] = json!("default");
        let stored = json!({"metadata": {"name": "default", "labels": {"kubernetes.io/metadata.name": "default"}}});
        let reached = reached_with_namespace(&managed, &request, &stored);
        assert!(reached.is_empty(), "{file}: {:?}", super::names(&reached));
        counted += 1;
    }
    assert!(counted >= 10, "{counted} plain CREATEs");
}

/// Rules pinned to another version than the apiserver's send everything,
/// as before.
#[test]
fn rules_that_differ_from_the_apiserver_send_every_write() {
    let Some(docs) = render(&overlay("base")) else {
        return;
    };
    let differ = Inputs {
        rules_match_apiserver: false,
        ..MATCHING
    };
    let managed = with_validate_condition(docs.clone(), &shipped_policies(), differ);
    for (file, _, request) in apiserver_requests() {
        let before = validate_calls(&docs, &request, &[]);
        let after = validate_calls(&managed, &request, &[]);
        assert_eq!(before, after, "{file}");
    }
}

/// A recorded Pod or claim write without tolerations of its own (the
/// DefaultTolerationSeconds pair kept) and without configs: the recorded
/// writes all carry some.
fn plain(request: &Value) -> Option<Value> {
    let resource = request["resource"]["resource"].as_str();
    let mut request = request.clone();
    let o = &mut request["object"];
    match resource {
        Some("pods") => {
            if let Some(list) = o["spec"]["tolerations"].as_array_mut() {
                list.retain(|t| t["key"].as_str().is_some_and(|k| k.starts_with("node.kubernetes.io/")));
            }
        }
        Some("resourceclaims") => {
            let devices = &mut o["spec"]["devices"];
            if let Some(d) = devices.as_object_mut() {
                d.remove("config");
            }
            remove_everywhere(&mut devices["requests"], "tolerations");
        }
        _ => return None,
    }
    Some(request)
}

/// `value` without `key` in any object it holds.
fn remove_everywhere(value: &mut Value, key: &str) {
    match value {
        Value::Object(map) => {
            map.remove(key);
            map.values_mut().for_each(|v| remove_everywhere(v, key));
        }
        Value::Array(list) => list.iter_mut().for_each(|v| remove_everywhere(v, key)),
        _ => {}
    }
}

/// The figures issue 40 asks for: webhook calls (both configurations) for
/// the claim, template and Pod CREATEs a real apiserver sent, and the same
/// writes without tolerations or configs, before (the manifests alone)
/// and after both managed conditions, with the shipped policies.
/// `scripts/webhook-calls.sh` prints the table.
#[test]
fn recorded_creates_cost_fewer_calls() {
    let Some(docs) = render(&overlay("base")) else {
        return;
    };
    let policies = shipped_policies();
    let managed = with_validate_condition(docs.clone(), &policies, MATCHING);
    let creates = super::mutate_creates();
    let mut table = vec![format!(
        "{} recorded claim/template/Pod CREATEs, webhook calls before -> after both managed conditions (shipped policies):",
        creates.len()
    )];
    for (ns, labels) in [("default", &[][..]), ("ml", &[]), ("gpu-team", &[("team", "ml")])] {
        let mut all: BTreeMap<&str, &str> = labels.iter().copied().collect();
        all.insert("kubernetes.io/metadata.name", ns);
        let stored = json!({"metadata": {"name": ns, "labels": all}});
        for (what, plain_only) in [("as recorded", false), ("without tolerations or configs", true)] {
            let (mut before, mut after, mut writes) = (0, 0, 0);
            for (file, request) in &creates {
                let request = if plain_only {
                    match plain(request) {
                        Some(r) => r,
                        None => continue,
                    }
                } else {
                    request.clone()
                };
                let mut request = request;
                request["namespace"] = json!(ns);
                request["object"]["metadata"]["namespace"] = json!(ns);
                let (request, _) = draguard_changes(&request, &policies, labels);
                let b = reached_with_namespace(&docs, &request, &stored).len();
                let a = reached_with_namespace(&managed, &request, &stored).len();
                assert!(a <= b, "{file} in {ns}: {b} -> {a} calls");
                if plain_only && ns == "default" {
                    assert_eq!(a, 0, "{file} in default, {what}");
                }
                before += b;
                after += a;
                writes += 1;
            }
            table.push(format!(
                "  {ns:<9} {what:<32} {writes:>3} writes: {before:>3} -> {after:>3} calls"
            ));
        }
    }
    eprintln!("{}", table.join("\n"));
}
