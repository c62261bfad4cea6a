//! The managed matchCondition is never narrower than the truth: for every
//! policy set (the shipped policies/, the examples, and sets covering each
//! selector form), every claim, claim template and Pod a real kube-apiserver
//! sent (tests/fixtures/apiserver), and a set of namespaces, the condition
//! is true whenever draguard's own `/mutate` answer would carry a patch;
//! and with the selector entries beside it (deploy/base's
//! MutatingWebhookConfiguration after the plan `serve` writes), such a
//! write reaches exactly one defaulting entry, and no write reaches two.

use std::collections::BTreeMap;
use std::path::Path;

use draguard::controllers::mutate_conditions::expression;
use draguard::controllers::mutate_selector_entries::{managed, plan};
use draguard::policy::PolicySet;
use draguard::policy::load::parse;
use draguard::policy::toleration_restriction::{DEFAULT_TOLERATIONS, TolerationRestrictionConfig};
use draguard::policy_files::load::load_dir;
use draguard::review::Engine;
use draguard::verdict::Phase;
use draguard::view::StaticView;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhook, MutatingWebhookConfiguration};
use kube_cel::cel::{Context as CelContext, Program, Value as CelValue};
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Policy sets with defaults for Pods and devices behind each selector
/// form, besides the shipped and example ones.
const SETS: &[&str] = &[
    "metadata: {name: gpu}
spec:
  namespaces: {selector: {matchExpressions: [{key: gpu, operator: Exists}, {key: frozen, operator: DoesNotExist}]}}
  devices: {defaults: [{key: gpu.example.com/maintenance, operator: Exists, effect: NoSchedule}]}
  pods: {defaults: [{key: gpu, operator: Exists, effect: NoSchedule}]}",
    "metadata: {name: tiers}
spec:
  mode: Warn
  namespaces: {selector: {matchExpressions: [{key: tier, operator: In, values: [gold]}, {key: team, operator: NotIn, values: [web]}]}}
  devices: {defaults: [{key: tier, operator: Equal, value: gold, effect: NoSchedule}]}",
    "metadata: {name: everywhere-but}
spec:
  namespaces: {exclude: [\"ml-*\", kube-system]}
  pods: {defaults: [{key: everywhere, operator: Exists}]}",
    "metadata: {name: by-name-label}
spec:
  namespaces: {selector: {matchLabels: {team: ml}, matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [ml-sandbox, ops]}]}}
  devices: {defaults: [{key: named, operator: Exists}]}
  pods: {defaults: [{key: named, operator: Exists}]}",
    "metadata: {name: name-label-in}
spec:
  namespaces: {selector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [research, web]}]}}
  pods: {defaults: [{key: named, operator: Exists}]}",
    "metadata: {name: audit-only}
spec:
  mode: Audit
  devices: {defaults: [{key: audit, operator: Exists}]}
  pods: {defaults: [{key: audit, operator: Exists}]}",
];

fn policy_sets() -> Vec<(String, PolicySet)> {
    let mut sets = vec![(
        "policies/".to_owned(),
        load_dir(&Path::new(ROOT).join("policies"))
            .expect("shipped policies")
            .set,
    )];
    let examples = Path::new(ROOT).join("examples/policy-test");
    if let Ok(loaded) = load_dir(&examples) {
        sets.push(("examples/policy-test/".to_owned(), loaded.set));
    }
    for yaml in SETS {
        let text = format!("apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\n{yaml}\n");
        let policies = parse("set.yaml", &text).unwrap_or_else(|e| panic!("{yaml}: {e:?}"));
        sets.push((
            policies[0].policy.metadata.name.clone(),
            PolicySet {
                policies,
                ..Default::default()
            },
        ));
    }
    // All of them at once (overlapping selectors, merged or widened), and
    // two disjoint selectors (an entry each).
    let mut every = PolicySet::default();
    for (_, set) in &sets[sets.len() - SETS.len()..] {
        every.policies.extend(set.policies.iter().cloned());
    }
    sets.push(("all the sets above".to_owned(), every));
    let teams = "apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: ml}
spec:
  namespaces: {selector: {matchLabels: {team: ml}}, exclude: [ml-sandbox]}
  pods: {defaults: [{key: ml, operator: Exists}]}
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: web}
spec:
  namespaces: {selector: {matchLabels: {team: web}}}
  devices: {defaults: [{key: web, operator: Exists}]}
  pods: {defaults: [{key: web, operator: Exists}]}";
    sets.push((
        "team=ml and team=web".to_owned(),
        PolicySet {
            policies: parse("teams.yaml", teams).expect("valid policies"),
            ..Default::default()
        },
    ));
    sets
}

/// (name, labels, annotations)
type Namespace = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [(&'static str, &'static str)],
);

const NAMESPACES: &[Namespace] = &[
    ("default", &[], &[]),
    ("ml", &[], &[]),
    ("ml-train", &[("team", "ml")], &[]),
    ("ml-sandbox", &[("team", "ml")], &[]),
    ("ops", &[("team", "ml")], &[]),
    ("research", &[("gpu", ""), ("tier", "gold")], &[]),
    ("frozen", &[("gpu", "a100"), ("frozen", "yes")], &[]),
    ("web", &[("tier", "gold"), ("team", "web")], &[]),
    (
        "restricted",
        &[],
        &[(DEFAULT_TOLERATIONS, r#"[{"key": "r", "operator": "Exists"}]"#)],
    ),
];

/// The claim, template and Pod requests the apiserver sent to `/mutate`,
/// CREATEs and UPDATEs.
fn requests() -> Vec<(String, Value)> {
    let dir = Path::new(ROOT).join("tests/fixtures/apiserver");
    let index: Value = serde_json::from_slice(&std::fs::read(dir.join("index.json")).expect("index")).expect("JSON");
    index
        .as_array()
        .expect("index")
        .iter()
        .filter_map(|e| {
            let file = e["file"].as_str()?;
            let kinds = ["pod-", "resourceclaim-", "resourceclaimtemplate-"];
            if !kinds.iter().any(|k| file.starts_with(k)) || !e["webhook"].as_str()?.starts_with("/mutate") {
                return None;
            }
            let review: Value = serde_json::from_slice(&std::fs::read(dir.join(file)).ok()?).ok()?;
            Some((file.to_owned(), review["request"].clone()))
        })
        .collect()
}

fn in_namespace(request: &Value, ns: &str) -> Value {
    let mut request = request.clone();
    request["namespace"] = json!(ns);
    for object in ["object", "oldObject"] {
        if request[object].is_object() {
            request[object]["metadata"]["namespace"] = json!(ns);
        }
    }
    request
}

fn sent(expression: &str, request: &Value, namespace_object: &Value) -> bool {
    let program = Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
    let mut ctx = CelContext::default();
    let variables = [
        ("request", request),
        ("object", &request["object"]),
        ("oldObject", &request["oldObject"]),
        ("namespaceObject", namespace_object),
    ];
    for (name, value) in variables {
        ctx.add_variable_from_value(name, kube_cel::cel::to_value(value).expect("CEL value"));
    }
    match program.execute(&ctx) {
        Ok(CelValue::Bool(b)) => b,
        other => panic!("{expression}: {other:?}"),
    }
}

/// draguard's own `/mutate` answer: how many patch operations.
fn patch_len(
    request: &Value,
    view: &StaticView,
    policies: &PolicySet,
    restriction: Option<&TolerationRestrictionConfig>,
) -> usize {
    let ctx = Engine::new(policies, view, Default::default())
        .with_toleration_restriction(restriction)
        .context("2026-11-21T10:00:00Z".parse().expect("time"), Phase::Mutate, None);
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    let incoming = draguard::admission::Incoming::parse(&serde_json::to_vec(&review).expect("JSON")).expect("review");
    incoming.answer(&ctx).0.patch.len()
}

/// The cluster of [`NAMESPACES`]: their labels (with the name label the
/// apiserver sets) and annotations.
fn namespaces_view() -> StaticView {
    let mut view = StaticView::default();
    for (name, labels, annotations) in NAMESPACES {
        let mut all: Vec<(&str, &str)> = labels.to_vec();
        all.push(("kubernetes.io/metadata.name", name));
        view = view.with_namespace(name, &all);
        let annotations: BTreeMap<String, String> = annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        view.annotations.insert((*name).to_owned(), annotations);
    }
    view
}

#[test]
fn the_condition_sends_every_write_draguard_would_patch() {
    let view = namespaces_view();
    let restriction = TolerationRestrictionConfig::default();
    let requests = requests();
    assert!(requests.len() >= 30, "fixtures: {}", requests.len());
    let (mut patched, mut skipped) = (0, 0);
    // Pod CREATEs skipped as the apiserver evaluates the condition (no
    // namespaceObject) although a policy in force has Pod defaults: the
    // namespace's name alone rules them out.
    let mut pods_skipped_blind = 0;
    for (set_name, set) in policy_sets() {
        let pod_defaults = set
            .policies
            .iter()
            .any(|l| l.policy.spec.mode != draguard::verdict::Mode::Audit && !l.policy.spec.pods.defaults.is_empty());
        for restricted in [None, Some(&restriction)] {
            let condition = expression(&set, restricted.is_some());
            for (name, labels, annotations) in NAMESPACES {
                let mut labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
                labels.insert("kubernetes.io/metadata.name", name);
                let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
                let namespace_object =
                    json!({"metadata": {"name": name, "labels": labels, "annotations": annotations}});
                for (file, request) in &requests {
                    let request = in_namespace(request, name);
                    let patch = patch_len(&request, &view, &set, restricted);
                    let is_sent = sent(&condition, &request, &namespace_object);
                    // As a real apiserver evaluates a webhook's
                    // matchConditions: without the namespace.
                    let sent_blind = sent(&condition, &request, &Value::Null);
                    assert!(
                        patch == 0 || sent_blind,
                        "{set_name}: {file} in {name} is patched, but not sent without namespaceObject: {condition}"
                    );
                    assert!(
                        patch == 0 || is_sent,
                        "{set_name} (toleration restriction {}): {file} in {name} gets {patch} patch operations, but is not sent: {condition}",
                        restricted.is_some()
                    );
                    patched += usize::from(patch > 0);
                    skipped += usize::from(!is_sent);
                    let pod_create = file.starts_with("pod-") && request["operation"] == "CREATE";
                    pods_skipped_blind += usize::from(pod_defaults && pod_create && !sent_blind);
                }
            }
        }
    }
    // Neither side is empty: the check above is not vacuous, and the
    // condition does skip writes.
    assert!(patched > 100, "patched {patched}");
    assert!(skipped > 100, "skipped {skipped}");
    assert!(
        pods_skipped_blind > 10,
        "Pod CREATEs skipped by name: {pods_skipped_blind}"
    );
    eprintln!("Pod CREATEs skipped by the namespace's name alone: {pods_skipped_blind}");
}

/// deploy/base's MutatingWebhookConfiguration, as shipped.
fn shipped_config() -> Value {
    let text = std::fs::read_to_string(Path::new(ROOT).join("deploy/base/webhooks.yaml")).expect("webhooks.yaml");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("YAML");
    docs.into_iter()
        .find(|d| d["kind"] == "MutatingWebhookConfiguration")
        .expect("the MutatingWebhookConfiguration")
}

/// The configuration once `serve` has written the managed state for
/// `set`: the plan, applied as the apiserver applies a JSON patch.
fn managed_entries(config: &Value, set: &PolicySet, restricted: bool) -> (Vec<MutatingWebhook>, usize) {
    let entries = |config: &Value| {
        serde_json::from_value::<MutatingWebhookConfiguration>(config.clone())
            .expect("configuration")
            .webhooks
            .unwrap_or_default()
    };
    let desired = managed(set, restricted);
    let ops = plan(&entries(config), "draguard", "draguard", &desired);
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops)).expect("patch");
    let mut config = config.clone();
    json_patch::patch(&mut config, &patch).expect("the plan applies");
    (entries(&config), desired.selectors.len())
}

/// A namespaceSelector as k8s.io/apimachinery pkg/labels evaluates it.
fn selector_matches(
    selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    labels: &BTreeMap<&str, &str>,
) -> bool {
    let Some(s) = selector else { return true };
    s.match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k.as_str()) == Some(&v.as_str()))
        && s.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let value = labels.get(e.key.as_str());
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
                "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                other => panic!("operator {other}"),
            }
        })
}

/// The defaulting entries (draguard's /mutate for claims, templates, Pods)
/// a request reaches: rules, namespaceSelector, matchConditions without
/// namespaceObject.
fn defaulting_entries_reached<'a>(
    entries: &'a [MutatingWebhook],
    request: &Value,
    labels: &BTreeMap<&str, &str>,
) -> Vec<&'a str> {
    let field = |name: &str| request["resource"][name].as_str().unwrap_or_default().to_owned();
    let (group, resource) = (field("group"), field("resource"));
    let operation = request["operation"].as_str().unwrap_or_default();
    let has = |list: &Option<Vec<String>>, value: &str| list.iter().flatten().any(|x| x == value || x == "*");
    entries
        .iter()
        .filter(|w| {
            w.client_config
                .service
                .as_ref()
                .is_some_and(|s| s.path.as_deref() == Some("/mutate"))
        })
        .filter(|w| {
            w.rules
                .iter()
                .flatten()
                .any(|r| has(&r.api_groups, &group) && has(&r.resources, &resource) && has(&r.operations, operation))
        })
        .filter(|w| selector_matches(w.namespace_selector.as_ref(), labels))
        .filter(|w| {
            w.match_conditions
                .iter()
                .flatten()
                .all(|c| sent(&c.expression, request, &Value::Null))
        })
        .map(|w| w.name.as_str())
        .collect()
}

#[test]
fn with_the_selector_entries_a_patched_write_reaches_one_defaulting_entry_and_none_reaches_two() {
    let view = namespaces_view();
    let restriction = TolerationRestrictionConfig::default();
    let config = shipped_config();
    let requests = requests();
    let (mut patched, mut unneeded, mut skipped, mut entries_made) = (0, 0, 0, 0);
    for (set_name, set) in policy_sets() {
        for restricted in [None, Some(&restriction)] {
            let (entries, selectors) = managed_entries(&config, &set, restricted.is_some());
            entries_made += selectors;
            for (name, labels, _) in NAMESPACES {
                let mut labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
                labels.insert("kubernetes.io/metadata.name", name);
                for (file, request) in &requests {
                    let request = in_namespace(request, name);
                    let patch = patch_len(&request, &view, &set, restricted);
                    let reached = defaulting_entries_reached(&entries, &request, &labels);
                    assert!(reached.len() <= 1, "{set_name}: {file} in {name} reaches {reached:?}");
                    assert!(
                        patch == 0 || reached.len() == 1,
                        "{set_name} (toleration restriction {}): {file} in {name} gets {patch} patch operations, but reaches no defaulting entry",
                        restricted.is_some()
                    );
                    patched += usize::from(patch > 0);
                    unneeded += usize::from(patch == 0 && !reached.is_empty());
                    skipped += usize::from(reached.is_empty());
                }
            }
        }
    }
    // Not vacuous: entries were made, writes patched and writes skipped.
    assert!(entries_made >= 4, "selector entries made: {entries_made}");
    assert!(patched > 100, "patched {patched}");
    assert!(skipped > 100, "skipped {skipped}");
    eprintln!("sent to /mutate without a patch to answer: {unneeded}");
}

/// The issue's case (#39, bug 2): the shipped policies (`team=ml`'s Pod
/// default) and one more defaulting policy selecting `tier=restricted`.
/// Their selectors once merged into nothing, and the defaulting entry's
/// condition widened to `namespaceObject == null || …`, which is true at
/// the webhook: every claim and Pod CREATE in every tenant namespace cost
/// two calls. Now a namespace neither selects costs one call per write
/// (the validating entry's), and one each selects reaches exactly one
/// defaulting entry where a default applies.
#[test]
fn a_second_label_selector_on_another_key_costs_other_namespaces_no_call() {
    let mut set = load_dir(&Path::new(ROOT).join("policies"))
        .expect("shipped policies")
        .set;
    let restricted = "apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: restricted-tier}
spec:
  namespaces: {selector: {matchLabels: {tier: restricted}}}
  pods: {defaults: [{key: restricted, operator: Exists, effect: NoSchedule}]}
  devices: {defaults: [{key: restricted, operator: Exists, effect: NoSchedule}]}";
    set.policies
        .extend(parse("restricted.yaml", restricted).expect("valid policy"));
    let (entries, _) = managed_entries(&shipped_config(), &set, false);
    let requests = requests();
    let creates = requests.iter().filter(|(_, r)| r["operation"] == "CREATE").count();
    assert!(creates >= 20, "CREATEs: {creates}");
    let namespaces: [(&str, &[(&str, &str)]); 6] = [
        ("tenant", &[]),
        ("tenant", &[("tier", "gold")]),
        ("tenant", &[("team", "web")]),
        ("tenant", &[("tier", "restricted")]),
        ("tenant", &[("team", "ml"), ("tier", "restricted")]),
        ("ml-train", &[("team", "ml")]),
    ];
    let mut calls_per_namespace = Vec::new();
    for (name, labels) in namespaces {
        let mut all: Vec<(&str, &str)> = labels.to_vec();
        all.push(("kubernetes.io/metadata.name", name));
        let view = StaticView::default().with_namespace(name, &all);
        let labels: BTreeMap<&str, &str> = all.into_iter().collect();
        let mut calls = 0;
        for (file, request) in &requests {
            let request = in_namespace(request, name);
            let patch = patch_len(&request, &view, &set, None);
            let reached = defaulting_entries_reached(&entries, &request, &labels);
            assert!(reached.len() <= 1, "{file} in {name} {labels:?} reaches {reached:?}");
            assert!(
                patch == 0 || reached.len() == 1,
                "{file} in {name} {labels:?} is patched but reaches no defaulting entry"
            );
            // The validating entry, and the defaulting entries reached.
            calls += 1 + reached.len();
        }
        calls_per_namespace.push(calls);
    }
    let writes = requests.len();
    // Neither selector: one call per write.
    assert_eq!(
        calls_per_namespace[..3],
        [writes, writes, writes],
        "{calls_per_namespace:?}"
    );
    let pod_creates = requests
        .iter()
        .filter(|(file, r)| file.starts_with("pod-") && r["operation"] == "CREATE")
        .count();
    // Selected: each CREATE of a kind a policy defaults reaches one
    // defaulting entry (every fixture Pod and claim gets the default).
    assert_eq!(calls_per_namespace[3], writes + creates, "{calls_per_namespace:?}");
    // Both selectors: the claims get the tier default; a Pod gets none
    // (dedicated-ml-nodes, whose `team=ml` selector holds on the whole
    // region, allows only its own toleration, which
    // dedicated-ml-nodes-are-ml-only refuses outside `ml`, `ml-*`), and
    // is not sent.
    assert_eq!(
        calls_per_namespace[4],
        writes + creates - pod_creates,
        "{calls_per_namespace:?}"
    );
    // `ml-train`, by name: its Pods only (the shipped policy defaults no
    // claim).
    assert_eq!(calls_per_namespace[5], writes + pod_creates, "{calls_per_namespace:?}");
}
