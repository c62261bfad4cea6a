//! The selector entries, judged as the apiserver routes a write: rules,
//! namespaceSelector against the namespace's labels, then every
//! matchCondition as CEL with `namespaceObject` null (as the apiserver
//! binds it for a webhook), over a configuration the plan was applied to.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::{Value, json};

use super::*;
use crate::policy::Selection;
use crate::policy::load::parse;

const HEAD: &str = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\n";
const KUBELET: &str = "!request.userInfo.username.startsWith('system:node:')";

/// A policy: `(name, namespaces, kinds)` where kinds is "pods", "devices"
/// or "both" for the defaults it has, "none": no defaults, and it denies
/// the Pod default (`key: a`) of the others, or "refuses": device
/// defaults, and it denies that Pod default.
type Spec<'a> = (&'a str, &'a str, &'a str);

fn set(policies: &[Spec<'_>]) -> PolicySet {
    let yaml: Vec<String> = policies
        .iter()
        .map(|(name, namespaces, kinds)| {
            let pick = |wanted: bool, text: &'static str| if wanted { text } else { "" };
            let pods = pick(
                matches!(*kinds, "pods" | "both"),
                "  pods:\n    defaults: [{key: a, operator: Exists}]\n",
            );
            let devices = pick(
                matches!(*kinds, "devices" | "both" | "refuses"),
                "  devices:\n    defaults: [{key: b, operator: Exists}]\n",
            );
            let deny = pick(
                matches!(*kinds, "none" | "refuses"),
                "  pods:\n    deny: [{key: a, operator: Exists}]\n",
            );
            format!("{HEAD}metadata: {{name: {name}}}\nspec:\n  namespaces: {namespaces}\n{pods}{devices}{deny}")
        })
        .collect();
    PolicySet {
        policies: parse("p.yaml", &yaml.join("---\n")).expect("valid policies"),
        ..Default::default()
    }
}

/// deploy/base's MutatingWebhookConfiguration, reduced to what routing
/// reads, with someone else's entry first.
fn config() -> Value {
    json!({"metadata": {"name": "draguard"}, "webhooks": [
        {"name": "other.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
         "clientConfig": {"service": {"name": "other", "namespace": "other"}},
         "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
        {"name": "mutate.draguard.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
         "timeoutSeconds": 1, "failurePolicy": "Ignore",
         "clientConfig": {"service": {"name": "draguard", "namespace": "draguard", "path": "/mutate"}, "caBundle": "Q0E="},
         "namespaceSelector": {"matchExpressions": [
             {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "kube-node-lease", "draguard"]},
             {"key": "draguard.dev/ignore", "operator": "DoesNotExist"}]},
         "objectSelector": {},
         "matchConditions": [{"name": "not-a-kubelet", "expression": KUBELET}],
         "rules": [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"], "operations": ["CREATE"],
                    "resources": ["resourceclaims", "resourceclaimtemplates"]},
                   {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
        {"name": "admin.mutate.draguard.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
         "clientConfig": {"service": {"name": "draguard", "namespace": "draguard", "path": "/mutate"}},
         "rules": [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"], "operations": ["CREATE"],
                    "resources": ["resourceslices"]}]},
    ]})
}

fn entries(config: &Value) -> Vec<MutatingWebhook> {
    serde_json::from_value::<MutatingWebhookConfiguration>(config.clone())
        .expect("a configuration")
        .webhooks
        .unwrap_or_default()
}

/// `config` after the plan for `desired`, as the apiserver applies it.
fn applied(mut config: Value, desired: &Managed) -> Value {
    let ops = plan(&entries(&config), "draguard", "draguard", desired);
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops)).expect("a JSON patch");
    json_patch::patch(&mut config, &patch).expect("the patch applies");
    config
}

fn names(config: &Value) -> Vec<String> {
    entries(config).into_iter().map(|w| w.name).collect()
}

/// A LabelSelector as `k8s.io/apimachinery` pkg/labels evaluates it.
fn selects(selector: Option<&K8sSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(s) = selector else { return true };
    let by_labels = s.match_labels.iter().flatten().all(|(k, v)| labels.get(k) == Some(v));
    by_labels
        && s.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let value = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => value.is_some_and(|v| values.contains(v)),
                "NotIn" => value.is_none_or(|v| !values.contains(v)),
                "Exists" => value.is_some(),
                "DoesNotExist" => value.is_none(),
                other => panic!("operator {other}"),
            }
        })
}

fn sent(expression: &str, request: &Value) -> bool {
    thread_local! {
        // Compiled once per expression: the property test below evaluates
        // the same few thousands of times.
        static PROGRAMS: std::cell::RefCell<BTreeMap<String, std::rc::Rc<Program>>> = Default::default();
    }
    let program = PROGRAMS.with(|programs| {
        programs
            .borrow_mut()
            .entry(expression.to_owned())
            .or_insert_with(|| {
                std::rc::Rc::new(Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}")))
            })
            .clone()
    });
    let mut ctx = Context::default();
    for (name, value) in [
        ("request", request),
        ("object", &request["object"]),
        ("oldObject", &Value::Null),
        ("namespaceObject", &Value::Null),
    ] {
        ctx.add_variable_from_value(name, kube_cel::cel::to_value(value).expect("CEL value"));
    }
    match program.execute(&ctx) {
        Ok(CelValue::Bool(b)) => b,
        other => panic!("{expression}: {other:?}"),
    }
}

/// The draguard entries a CREATE of `resource` in `namespace` reaches.
fn reached(config: &Value, resource: &str, namespace: &str, labels: &[(&str, &str)]) -> Vec<String> {
    let group = if resource == "pods" { "" } else { "resource.k8s.io" };
    let request = json!({
        "operation": "CREATE", "namespace": namespace,
        "resource": {"group": group, "version": "v1", "resource": resource},
        "userInfo": {"username": "alice"},
        "object": {"metadata": {"name": "x", "namespace": namespace}, "spec": {}},
    });
    let mut labels: BTreeMap<String, String> = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    labels.insert(NAME_LABEL.to_owned(), namespace.to_owned());
    entries(config)
        .into_iter()
        .filter(|w| calls_service(w, "draguard", "draguard"))
        .filter(|w| {
            w.rules
                .iter()
                .flatten()
                .any(|r| r.resources.iter().flatten().any(|x| x == resource))
        })
        .filter(|w| selects(w.namespace_selector.as_ref(), &labels))
        .filter(|w| {
            w.match_conditions
                .iter()
                .flatten()
                .all(|c| sent(&c.expression, &request))
        })
        .map(|w| w.name)
        .collect()
}

/// Whether draguard would add a default: some policy with defaults for the
/// kind selects the namespace, which the manifest does not exempt, and one
/// of them no selecting policy refuses (core `enforce::defaults_for`).
fn defaulted(set: &PolicySet, resource: &str, namespace: &str, labels: &[(&str, &str)]) -> bool {
    use crate::policy::enforce::rejects;
    let mut map: BTreeMap<String, String> = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    // As the apiserver labels every namespace.
    map.insert(NAME_LABEL.to_owned(), namespace.to_owned());
    let exempt =
        ["kube-system", "kube-node-lease", "draguard"].contains(&namespace) || map.contains_key("draguard.dev/ignore");
    let (target, defaults): (_, fn(&TolerationPolicy) -> &Vec<_>) = if resource == "pods" {
        (TolerationTarget::Pod, |p| &p.spec.pods.defaults)
    } else {
        (TolerationTarget::Device, |p| &p.spec.devices.defaults)
    };
    let selecting: Vec<&TolerationPolicy> = set
        .policies
        .iter()
        .map(|l| &l.policy)
        .filter(|p| p.selects(namespace, Some(&map)) == Selection::Selected)
        .collect();
    !exempt
        && selecting.iter().filter(|p| p.spec.mode != Mode::Audit).any(|p| {
            defaults(p)
                .iter()
                .any(|d| !selecting.iter().any(|q| rejects(q, target, d)))
        })
}

type Namespace<'a> = (&'a str, &'a [(&'a str, &'a str)]);

const NAMESPACES: &[Namespace<'static>] = &[
    ("default", &[]),
    ("ml", &[]),
    ("ml", &[("team", "ml")]),
    ("ml-train", &[]),
    ("ml-sandbox", &[("team", "ml")]),
    ("gpu-team", &[("team", "ml")]),
    ("gpu-team", &[("team", "ml"), ("tier", "gpu")]),
    ("gpu-team", &[("team", "ml"), ("draguard.dev/ignore", "")]),
    ("research", &[("team", "research")]),
    ("research", &[("team", "research"), ("gpu", "true")]),
    ("farm", &[("gpu", "true")]),
    ("farm", &[("tier", "gpu")]),
    ("kube-system", &[("team", "ml")]),
    ("draguard", &[("team", "ml")]),
];

/// Every namespace of [`NAMESPACES`] and both kinds: a write reaches at
/// most one defaulting entry, and one where draguard adds a default.
/// Returns the writes that reached one without needing it.
fn assert_routes(set: &PolicySet, config: &Value) -> Vec<String> {
    let mut extra = Vec::new();
    for (ns, labels) in NAMESPACES {
        for resource in ["pods", "resourceclaims"] {
            let reached = reached(config, resource, ns, labels);
            let needed = defaulted(set, resource, ns, labels);
            assert!(reached.len() <= 1, "{resource} in {ns} {labels:?} reaches {reached:?}");
            assert!(
                !needed || reached.len() == 1,
                "{resource} in {ns} {labels:?} needs a default but reaches {reached:?}"
            );
            if !needed && !reached.is_empty() {
                extra.push(format!("{resource} in {ns} {labels:?}"));
            }
        }
    }
    extra
}

/// The shipped policies' shape: names, a glob, a `team=ml` selector and an
/// exclusion, with Pod defaults.
const SHIPPED: Spec<'static> = (
    "ml",
    "{names: [ml, ml-*], selector: {matchLabels: {team: ml}}, exclude: [ml-sandbox]}",
    "pods",
);

#[test]
fn a_label_selector_gets_an_entry_and_every_write_is_routed_exactly() {
    let policies = set(&[SHIPPED]);
    let desired = managed(&policies, false);
    assert_eq!(desired.selectors.len(), 1);
    assert_eq!(
        desired.selectors[0].requirements,
        vec![K8sRequirement {
            key: "team".into(),
            operator: "In".into(),
            values: Some(vec!["ml".into()])
        }]
    );
    assert_ne!(desired.split, desired.widened);
    assert!(
        !desired.split.expression.contains("namespaceObject"),
        "{}",
        desired.split.expression
    );

    let config = applied(config(), &desired);
    let name = format!("{}.selector.mutate.draguard.dev", desired.selectors[0].id);
    assert_eq!(
        names(&config),
        [
            "other.example.com",
            "mutate.draguard.dev",
            "admin.mutate.draguard.dev",
            name.as_str()
        ]
    );
    // Exact: no write reaches an entry it does not need.
    assert_eq!(assert_routes(&policies, &config), Vec::<String>::new());
    assert_eq!(reached(&config, "pods", "gpu-team", &[("team", "ml")]), [name.as_str()]);
    assert_eq!(
        reached(&config, "pods", "ml", &[("team", "ml")]),
        ["mutate.draguard.dev"]
    );
    assert!(reached(&config, "pods", "default", &[]).is_empty());
    assert!(reached(&config, "pods", "kube-system", &[("team", "ml")]).is_empty());

    // The entry is the defaulting entry's copy but for its name, selector
    // and managed condition.
    let made = &entries(&config)[3];
    let base = &entries(&config)[1];
    assert_eq!(made.client_config, base.client_config);
    assert_eq!(
        (
            made.timeout_seconds,
            &made.failure_policy,
            &made.rules,
            &made.object_selector
        ),
        (
            base.timeout_seconds,
            &base.failure_policy,
            &base.rules,
            &base.object_selector
        )
    );
    let conditions: Vec<&str> = made
        .match_conditions
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(conditions, ["not-a-kubelet", CONDITION_NAME]);
    let keys: Vec<(&str, &str)> = made
        .namespace_selector
        .iter()
        .flat_map(|s| s.match_expressions.iter().flatten())
        .map(|e| (e.key.as_str(), e.operator.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            ("kubernetes.io/metadata.name", "NotIn"),
            ("draguard.dev/ignore", "DoesNotExist"),
            ("team", "In")
        ]
    );

    // Applied again: nothing to do.
    assert!(plan(&entries(&config), "draguard", "draguard", &desired).is_empty());
}

#[test]
fn overlapping_selectors_are_cut_into_disjoint_exact_entries() {
    let cases: [(&[Spec<'_>], usize); 8] = [
        // Disjoint on one key: one entry each.
        (
            &[
                SHIPPED,
                ("research", "{selector: {matchLabels: {team: research}}}", "both"),
            ],
            2,
        ),
        // One implies the other: `team=ml,tier=gpu` for both, and
        // `team=ml,tier notin (gpu)` for the wider one.
        (
            &[
                SHIPPED,
                ("gpu", "{selector: {matchLabels: {team: ml, tier: gpu}}}", "devices"),
            ],
            2,
        ),
        // Both `In` on one key, overlapping values: one entry per value
        // set (`ai`, `ml`, `research`).
        (
            &[
                (
                    "first",
                    "{selector: {matchExpressions: [{key: team, operator: In, values: [ml, ai]}]}}",
                    "pods",
                ),
                (
                    "second",
                    "{selector: {matchExpressions: [{key: team, operator: In, values: [ml, research]}]}}",
                    "devices",
                ),
            ],
            3,
        ),
        // Two keys: both, each without the other.
        (
            &[SHIPPED, ("farm", "{selector: {matchLabels: {gpu: 'true'}}}", "devices")],
            3,
        ),
        // Exists and DoesNotExist of one key: disjoint.
        (
            &[
                (
                    "first",
                    "{selector: {matchExpressions: [{key: gpu, operator: Exists}]}}",
                    "pods",
                ),
                (
                    "second",
                    "{selector: {matchExpressions: [{key: gpu, operator: DoesNotExist}, {key: tier, operator: Exists}]}}",
                    "pods",
                ),
            ],
            2,
        ),
        // `gpu` exists overlapping `tier=gpu`: `gpu,tier in (gpu)`,
        // `gpu,tier notin (gpu)`, `!gpu,tier in (gpu)`.
        (
            &[
                (
                    "first",
                    "{selector: {matchExpressions: [{key: gpu, operator: Exists}]}}",
                    "pods",
                ),
                ("second", "{selector: {matchLabels: {tier: gpu}}}", "devices"),
            ],
            3,
        ),
        // Its only default refused in every namespace: never sent, no
        // entry.
        (&[SHIPPED, ("refuses", "{}", "none")], 0),
        // On the name label alone: exact in the condition, no entry.
        (
            &[(
                "byname",
                "{selector: {matchLabels: {kubernetes.io/metadata.name: farm}}}",
                "pods",
            )],
            0,
        ),
    ];
    for (policies, want) in cases {
        let policies = set(policies);
        let desired = managed(&policies, false);
        assert_eq!(desired.selectors.len(), want, "{:?}", desired.selectors);
        assert_eq!(desired.widenings, [], "exact");
        if want > 0 {
            assert_ne!(desired.split, desired.widened);
            assert!(
                !desired.split.expression.contains("namespaceObject"),
                "{}",
                desired.split.expression
            );
        }
        // No write reaches an entry it does not need.
        assert_eq!(
            assert_routes(&policies, &applied(config(), &desired)),
            Vec::<String>::new(),
            "{:?}",
            desired.selectors
        );
    }
}

/// The issue's case: the shipped policies' `team=ml` Pod default and a
/// second defaulting policy on `tier=restricted`. Before, their selectors
/// merged into nothing and the defaulting entry's condition widened to
/// `namespaceObject == null || …`, true at the webhook: every claim and
/// Pod CREATE in every tenant namespace reached `/mutate`.
#[test]
fn a_second_selector_on_another_key_keeps_tenant_writes_at_one_call() {
    let policies = set(&[
        SHIPPED,
        ("restricted", "{selector: {matchLabels: {tier: restricted}}}", "both"),
    ]);
    let desired = managed(&policies, false);
    assert_eq!(desired.widenings, []);
    let keys: Vec<Vec<(String, String)>> = desired
        .selectors
        .iter()
        .map(|s| {
            s.requirements
                .iter()
                .map(|r| {
                    (
                        r.key.clone(),
                        format!("{} {:?}", r.operator, r.values.as_deref().unwrap_or_default()),
                    )
                })
                .collect()
        })
        .collect();
    let req = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    let mut want = vec![
        vec![req("team", r#"In ["ml"]"#), req("tier", r#"In ["restricted"]"#)],
        vec![req("team", r#"In ["ml"]"#), req("tier", r#"NotIn ["restricted"]"#)],
        vec![req("team", r#"NotIn ["ml"]"#), req("tier", r#"In ["restricted"]"#)],
    ];
    let mut keys = keys;
    keys.sort();
    want.sort();
    assert_eq!(keys, want);
    assert!(!desired.split.expression.contains("namespaceObject"));

    let config = applied(config(), &desired);
    assert_eq!(assert_routes(&policies, &config), Vec::<String>::new());
    // A tenant namespace neither selects: no defaulting entry.
    for resource in ["pods", "resourceclaims"] {
        assert_eq!(reached(&config, resource, "default", &[]), Vec::<String>::new());
        assert_eq!(
            reached(&config, resource, "farm", &[("tier", "gpu")]),
            Vec::<String>::new()
        );
    }
    // Each selected namespace reaches one entry.
    let entry = |i: usize| format!("{}.selector.mutate.draguard.dev", desired.selectors[i].id);
    let by_labels = |labels: &[(&str, &str)]| reached(&config, "pods", "tenant", labels);
    let both = by_labels(&[("team", "ml"), ("tier", "restricted")]);
    let team = by_labels(&[("team", "ml")]);
    let tier = by_labels(&[("tier", "restricted"), ("team", "web")]);
    assert_eq!([both.len(), team.len(), tier.len()], [1, 1, 1]);
    let all = [&both[0], &team[0], &tier[0]];
    for i in 0..3 {
        assert!(all.contains(&&entry(i)), "{all:?}");
    }
}

/// A Pod in a region where a policy selecting it by label refuses every
/// Pod default reaches no entry: the refusal is sure there (issue 39's
/// known needless call, `team=ml,tier=restricted` in the end-to-end
/// suite's calls scenario).
#[test]
fn a_default_refused_by_a_label_selected_policy_costs_no_call_in_its_region() {
    let policies = set(&[
        ("restricted", "{selector: {matchLabels: {tier: restricted}}}", "pods"),
        (
            "ml-devices",
            "{selector: {matchLabels: {team: ml}}, exclude: [ml-open]}",
            "refuses",
        ),
    ]);
    let desired = managed(&policies, false);
    assert_eq!(desired.widenings, []);
    let config = applied(config(), &desired);
    assert_eq!(assert_routes(&policies, &config), Vec::<String>::new());
    let both = [("team", "ml"), ("tier", "restricted")];
    assert_eq!(reached(&config, "pods", "tenant", &both), Vec::<String>::new());
    assert_eq!(
        reached(&config, "resourceclaims", "tenant", &both).len(),
        1,
        "its device default"
    );
    // Where it excludes the namespace by name, the Pod default applies.
    assert_eq!(reached(&config, "pods", "ml-open", &both).len(), 1);
    assert_eq!(reached(&config, "pods", "tenant", &[("tier", "restricted")]).len(), 1);
}

#[test]
fn the_toleration_restriction_and_audit_policies_need_no_entry_for_pods() {
    // Every Pod CREATE goes to the defaulting entry with the flag on; the
    // claims of a selector policy still get an entry.
    let both = set(&[("ml", "{selector: {matchLabels: {team: ml}}}", "both")]);
    let desired = managed(&both, true);
    assert_eq!(desired.selectors.len(), 1);
    let config = applied(config(), &desired);
    assert_eq!(reached(&config, "pods", "default", &[]), ["mutate.draguard.dev"]);
    assert_eq!(
        reached(&config, "pods", "gpu-team", &[("team", "ml")]),
        ["mutate.draguard.dev"]
    );
    assert_eq!(
        reached(&config, "resourceclaims", "gpu-team", &[("team", "ml")]),
        [format!("{}.selector.mutate.draguard.dev", desired.selectors[0].id)]
    );
    assert!(reached(&config, "resourceclaims", "default", &[]).is_empty());
    assert!(
        managed(&set(&[("ml", "{selector: {matchLabels: {team: ml}}}", "pods")]), true)
            .selectors
            .is_empty()
    );
    let audit = set(&[SHIPPED]);
    let mut audit = audit;
    audit.policies[0].policy.spec.mode = Mode::Audit;
    assert!(managed(&audit, false).selectors.is_empty());
}

#[test]
fn past_the_cap_entries_merge_and_say_so_and_invalid_selectors_never_make_an_entry() {
    let teams = |n: usize| -> Vec<(String, String)> {
        (0..n)
            .map(|i| {
                (
                    format!("t{i}"),
                    format!("{{selector: {{matchLabels: {{team: t{i}}}}}}}"),
                )
            })
            .collect()
    };
    for n in [MAX_SELECTOR_ENTRIES, MAX_SELECTOR_ENTRIES + 1] {
        let owned = teams(n);
        let policies: Vec<Spec<'_>> = owned.iter().map(|(a, b)| (a.as_str(), b.as_str(), "pods")).collect();
        let policies = set(&policies);
        let desired = managed(&policies, false);
        assert_eq!(desired.selectors.len(), MAX_SELECTOR_ENTRIES, "{n} selectors");
        let config = applied(config(), &desired);
        assert_eq!(names(&config).len(), 3 + MAX_SELECTOR_ENTRIES);
        assert_routes(&policies, &config);
        if n == MAX_SELECTOR_ENTRIES {
            assert_eq!(desired.widenings, []);
            continue;
        }
        // Two teams share an entry, `team in (a,b)`: each policy is sent
        // in the other's namespaces, and nowhere else.
        assert_eq!(desired.widenings.len(), 1, "{:?}", desired.widenings);
        let w = &desired.widenings[0];
        assert_eq!(w.reason, MERGED);
        assert_eq!(w.policies.len(), 2);
        assert_eq!(w.namespaces, format!("team in ({},{})", w.policies[0], w.policies[1]));
        assert!(!desired.split.expression.contains("namespaceObject"));
        // A namespace of neither team reaches nothing.
        assert!(reached(&config, "pods", "default", &[("team", "other")]).is_empty());
    }
    // A label value the apiserver refuses in a namespaceSelector.
    let mut bad = set(&[SHIPPED]);
    if let Some(s) = bad.policies[0].policy.spec.namespaces.selector.as_mut() {
        s.match_labels.insert("team".into(), "not a value".into());
    }
    let desired = managed(&bad, false);
    assert!(desired.selectors.is_empty());
    assert_eq!(desired.split, desired.widened);
    assert_eq!(
        desired.widenings,
        [Widening {
            policies: vec!["ml".into()],
            namespaces: String::new(),
            reason: REFUSED
        }]
    );
}

#[test]
fn more_distinct_selectors_than_the_bound_widen_every_one_and_say_so() {
    let owned: Vec<(String, String)> = (0..=MAX_DISTINCT_SELECTORS)
        .map(|i| {
            (
                format!("t{i}"),
                format!("{{selector: {{matchLabels: {{team: t{i}}}}}}}"),
            )
        })
        .collect();
    let policies: Vec<Spec<'_>> = owned.iter().map(|(a, b)| (a.as_str(), b.as_str(), "pods")).collect();
    let desired = managed(&set(&policies), false);
    assert!(desired.selectors.is_empty());
    assert_eq!(desired.split, desired.widened);
    assert_eq!(desired.widenings.len(), 1);
    assert_eq!(desired.widenings[0].reason, TOO_MANY);
    assert_eq!(desired.widenings[0].policies.len(), MAX_DISTINCT_SELECTORS + 1);
    assert_eq!(desired.widenings[0].namespaces, "");
}

#[test]
fn entries_no_longer_needed_are_removed_and_others_are_never_touched() {
    let two = set(&[
        SHIPPED,
        ("research", "{selector: {matchLabels: {team: research}}}", "pods"),
    ]);
    let with_two = applied(config(), &managed(&two, false));
    assert_eq!(names(&with_two).len(), 5);
    // Someone else's entry, after ours.
    let mut with_two = with_two;
    with_two["webhooks"].as_array_mut().expect("webhooks").push(
        json!({"name": "late.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"service": {"name": "other", "namespace": "other"}}}),
    );

    // One policy left: the other entry goes, the rest stays as it was.
    let one = set(&[SHIPPED]);
    let desired = managed(&one, false);
    let after = applied(with_two.clone(), &desired);
    let id = &desired.selectors[0].id;
    assert_eq!(
        names(&after),
        [
            "other.example.com",
            "mutate.draguard.dev",
            "admin.mutate.draguard.dev",
            &format!("{id}.selector.mutate.draguard.dev"),
            "late.example.com"
        ]
    );
    assert_eq!(after["webhooks"][0], with_two["webhooks"][0]);
    assert_eq!(after["webhooks"][2], with_two["webhooks"][2]);
    assert_routes(&one, &after);

    // No policy with a selector: every entry we made goes.
    let names_only = set(&[("ml", "{names: [ml]}", "pods")]);
    let after = applied(after, &managed(&names_only, false));
    assert_eq!(
        names(&after),
        [
            "other.example.com",
            "mutate.draguard.dev",
            "admin.mutate.draguard.dev",
            "late.example.com"
        ]
    );

    // An entry named like ours that calls another service is not ours: it
    // is left alone, and since ours cannot take its name, the defaulting
    // entry keeps the widened condition instead.
    let mut taken = config();
    let clash = format!("{id}.selector.mutate.draguard.dev");
    taken["webhooks"][0]["name"] = json!(clash);
    let after = applied(taken.clone(), &desired);
    assert_eq!(after["webhooks"][0], taken["webhooks"][0]);
    assert_eq!(names(&after).len(), 3);
    let base = &entries(&after)[1];
    assert!(base.match_conditions.iter().flatten().any(|c| *c == desired.widened));
    assert_routes(&one, &after);
}

#[test]
fn a_defaulting_entry_full_of_conditions_gets_no_selector_entries() {
    let desired = managed(&set(&[SHIPPED]), false);
    let with_entry = applied(config(), &desired);
    assert_eq!(names(&with_entry).len(), 4);
    let mut full = with_entry;
    full["webhooks"][1]["matchConditions"] = Value::Array(
        (0..64)
            .map(|i| json!({"name": format!("c{i}"), "expression": "true"}))
            .collect(),
    );
    // Without our condition, it sends every CREATE: an entry beside it
    // would be a second call.
    let after = applied(full, &desired);
    assert_eq!(names(&after).len(), 3);
}

#[test]
fn a_copy_is_guarded_by_the_defaulting_entrys_client_config() {
    let desired = managed(&set(&[SHIPPED]), false);
    let ops = plan(&entries(&config()), "draguard", "draguard", &desired);
    assert!(ops.contains(&json!({"op": "test", "path": "/webhooks/1/clientConfig",
        "value": {"service": {"name": "draguard", "namespace": "draguard", "path": "/mutate"}, "caBundle": "Q0E="}})));
    // A caBundle rotated between the read and the patch fails the patch.
    let mut rotated = config();
    rotated["webhooks"][1]["clientConfig"]["caBundle"] = json!("TkVX");
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops)).expect("a JSON patch");
    assert!(json_patch::patch(&mut rotated, &patch).is_err());
    // And a rotation seen is copied into the entry.
    let with_entry = applied(config(), &desired);
    let mut rotated = with_entry.clone();
    rotated["webhooks"][1]["clientConfig"]["caBundle"] = json!("TkVX");
    let after = applied(rotated, &desired);
    assert_eq!(after["webhooks"][3]["clientConfig"]["caBundle"], "TkVX");
}

#[test]
fn entry_names_are_recognised_only_in_our_shape() {
    let desired = managed(&set(&[SHIPPED]), false);
    let id = &desired.selectors[0].id;
    assert_eq!(id.len(), 16);
    assert_eq!(
        selector_entry_base(&format!("{id}.selector.mutate.draguard.dev")),
        Some("mutate.draguard.dev")
    );
    for not_ours in [
        "mutate.draguard.dev",
        "0123456789ABCDEF.selector.mutate.draguard.dev",
        "0123456789abcde.selector.mutate.draguard.dev",
        "0123456789abcdef.selector.",
        "0123456789abcdef.other.mutate.draguard.dev",
    ] {
        assert_eq!(selector_entry_base(not_ours), None, "{not_ours}");
    }
    // Stable: replicas of different builds name `team=ml`'s entry alike
    // (FNV-1a over key, operator and values, pinned here).
    assert_eq!(id, "b50a0cd762a3cb0e");
}

/// A random requirement over keys `a`, `b`, `c` and values `x`, `y`.
fn requirement_yaml() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    (
        prop::sample::select(vec!["a", "b", "c"]),
        prop::sample::select(vec!["In", "NotIn", "Exists", "DoesNotExist"]),
        prop::sample::subsequence(vec!["x", "y"], 1..=2),
    )
        .prop_map(|(key, operator, values)| match operator {
            // Quoted: YAML 1.1 reads a bare `y` as true.
            "In" | "NotIn" => format!(
                "{{key: {key}, operator: {operator}, values: ['{}']}}",
                values.join("', '")
            ),
            _ => format!("{{key: {key}, operator: {operator}}}"),
        })
}

/// A random policy: a selector of one to three requirements, sometimes a
/// name or an exclusion, Pod or claim defaults or both.
fn policy_yaml() -> impl proptest::strategy::Strategy<Value = (String, &'static str)> {
    use proptest::prelude::*;
    (
        prop::collection::vec(requirement_yaml(), 1..=3),
        prop::sample::select(vec!["", ", names: [named]", ", exclude: [excluded]"]),
        prop::sample::select(vec!["pods", "devices", "both", "refuses"]),
    )
        .prop_map(|(requirements, extra, kinds)| {
            (
                format!(
                    "{{selector: {{matchExpressions: [{}]}}{extra}}}",
                    requirements.join(", ")
                ),
                kinds,
            )
        })
}

/// A namespace's labels as the apiserver keeps them: with its name.
fn with_name(ns: &str, labels: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut map: BTreeMap<String, String> = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    map.insert(NAME_LABEL.to_owned(), ns.to_owned());
    map
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

    /// Random label-selector policies, every namespace of keys `a`, `b`,
    /// `c` each absent, `x`, `y` or `w`, by three names: a write reaches
    /// at most one defaulting entry, one wherever a default applies, and
    /// none that adds nothing unless a widening says where.
    #[test]
    fn every_namespace_reaches_at_most_one_entry_covering_its_policies(
        specs in proptest::collection::vec(policy_yaml(), 1..=4),
    ) {
        let names: Vec<String> = (0..specs.len()).map(|i| format!("p{i}")).collect();
        let policies: Vec<Spec<'_>> = specs
            .iter()
            .zip(&names)
            .map(|((namespaces, kinds), name)| (name.as_str(), namespaces.as_str(), *kinds))
            .collect();
        let policies = set(&policies);
        let desired = managed(&policies, false);
        let config = applied(config(), &desired);
        let mut label_sets: Vec<Vec<(&str, &str)>> = vec![Vec::new()];
        for key in ["a", "b", "c"] {
            label_sets = label_sets
                .into_iter()
                .flat_map(|set| {
                    let mut out = vec![set.clone()];
                    for value in ["x", "y", "w"] {
                        let mut with = set.clone();
                        with.push((key, value));
                        out.push(with);
                    }
                    out
                })
                .collect();
        }
        for labels in &label_sets {
            for ns in ["tenant", "named", "excluded"] {
                for resource in ["pods", "resourceclaims"] {
                    let reached = reached(&config, resource, ns, labels);
                    let needed = defaulted(&policies, resource, ns, labels);
                    proptest::prop_assert!(reached.len() <= 1, "{resource} in {ns} {labels:?} reaches {reached:?}");
                    proptest::prop_assert!(
                        !needed || reached.len() == 1,
                        "{resource} in {ns} {labels:?} needs a default, reaches {reached:?}"
                    );
                    // Past the bound an entry may send more than needed;
                    // then a widening says so. The other needless call is
                    // the documented one: a Pod whose default a policy
                    // refuses that selects the namespace by label outside
                    // a region its selector holds on (the refusal is
                    // counted where it is sure: `unblocked`).
                    let refused_by_label = resource == "pods"
                        && policies.policies.iter().zip(&specs).any(|(l, (_, kinds))| {
                            *kinds == "refuses" && l.policy.selects(ns, Some(&with_name(ns, labels))) == Selection::Selected
                        });
                    if !needed && !reached.is_empty() && !refused_by_label {
                        proptest::prop_assert!(
                            !desired.widenings.is_empty(),
                            "{resource} in {ns} {labels:?} reaches {reached:?} silently"
                        );
                    }
                }
            }
        }
    }
}
