//! The defaulting webhook's managed matchCondition and selector entries
//! against a fake API server: written at start, put back after someone
//! removes them, rewritten after a policy reload, and — when RBAC refuses
//! the patch — left to the manifest's own conditions, so every CREATE
//! still reaches /mutate.

mod support {
    pub mod fake_apiserver;
    pub mod within;
}

use std::time::Duration;

use draguard::controllers::mutate_conditions::{CONDITION_NAME, expression};
use draguard::controllers::mutate_conditions_sync::MutateConditions;
use draguard::controllers::mutate_selector_entries::managed;
use draguard::controllers::webhook_certs::CertSettings;
use draguard::policy::PolicySet;
use draguard::policy::load::parse;
use draguard::policy_files::reload::PolicyStore;
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};
use support::within::within;

const KUBELET: &str = "!request.userInfo.username.startsWith('system:node:')";

fn policies(namespace: &str) -> PolicySet {
    let yaml = format!(
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: ml}}\nspec:\n  namespaces: {{names: [{namespace}]}}\n  pods:\n    defaults: [{{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}}]\n"
    );
    PolicySet {
        policies: parse("ml.yaml", &yaml).expect("valid policy"),
        ..Default::default()
    }
}

/// The MutatingWebhookConfiguration as deploy/base ships it: the
/// defaulting entry with its static condition, the stamping entry, and
/// someone else's entry calling another service.
fn objects() -> Objects {
    let service = |path: &str| json!({"service": {"name": "draguard", "namespace": "draguard", "path": path}});
    let mut objects = Objects::default();
    objects.lists.insert(
        "mutatingwebhookconfigurations".into(),
        vec![json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "draguard", "resourceVersion": "5"},
            "webhooks": [
                {"name": "other.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": {"service": {"name": "other", "namespace": "other"}},
                 "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
                {"name": "mutate.draguard.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": service("/mutate"),
                 "matchConditions": [{"name": "not-a-kubelet", "expression": KUBELET}],
                 "rules": [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"], "operations": ["CREATE"],
                            "resources": ["resourceclaims", "resourceclaimtemplates"]},
                           {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
                {"name": "admin.mutate.draguard.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": service("/mutate"),
                 "rules": [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"], "operations": ["CREATE"],
                            "resources": ["resourceslices"]}]},
            ]})],
    );
    objects
}

fn conditions(api: &FakeApiServer, i: usize) -> Value {
    let config = api
        .webhook_config("mutatingwebhookconfigurations", "draguard")
        .expect("config");
    config["webhooks"][i]["matchConditions"].clone()
}

fn with_ours(expression: &str) -> Value {
    json!([{"name": "not-a-kubelet", "expression": KUBELET}, {"name": CONDITION_NAME, "expression": expression}])
}

fn settings() -> CertSettings {
    CertSettings::new("draguard-tls", "draguard", "draguard", "draguard")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_condition_is_written_restored_and_follows_a_reload() {
    let api = FakeApiServer::start(objects()).await;
    let store = PolicyStore::new(policies("ml"));
    let controller = MutateConditions::new(api.client(), settings(), store.clone(), false);
    let task = tokio::spawn(controller.run());

    // At start: ours joins the static condition in the defaulting entry.
    let ml = expression(&policies("ml"), false);
    within(Duration::from_secs(5), || conditions(&api, 1) == with_ours(&ml))
        .await
        .unwrap_or_else(|| panic!("written at start: {}", conditions(&api, 1)));
    assert_eq!(conditions(&api, 0), Value::Null, "someone else's entry is untouched");
    assert_eq!(conditions(&api, 2), Value::Null, "the stamping entry is untouched");
    assert_eq!(api.writes_of("PATCH").len(), 1, "one write");

    // Edited away (a `kubectl apply` of the manifests): put back by the watch.
    let mut config = api
        .webhook_config("mutatingwebhookconfigurations", "draguard")
        .expect("config");
    config["webhooks"][1]["matchConditions"] = json!([{"name": "not-a-kubelet", "expression": KUBELET}]);
    api.apply("mutatingwebhookconfigurations", config);
    let took = within(Duration::from_secs(5), || conditions(&api, 1) == with_ours(&ml))
        .await
        .unwrap_or_else(|| panic!("restored: {}", conditions(&api, 1)));
    assert!(
        took < Duration::from_secs(2),
        "restored by the watch, not the minute's check: {took:?}"
    );

    // A reload to other policies: the expression follows.
    store.replace(policies("research"));
    let research = expression(&policies("research"), false);
    assert_ne!(research, ml);
    within(Duration::from_secs(5), || conditions(&api, 1) == with_ours(&research))
        .await
        .unwrap_or_else(|| panic!("follows the reload: {}", conditions(&api, 1)));
    assert_eq!(api.writes_of("PATCH").len(), 3, "one write per change, no loop");
    task.abort();
}

fn rules(api: &FakeApiServer, i: usize) -> Value {
    let config = api
        .webhook_config("mutatingwebhookconfigurations", "draguard")
        .expect("config");
    config["webhooks"][i]["rules"].clone()
}

/// A policy with device defaults (and no Pod defaults).
fn device_defaults() -> PolicySet {
    let yaml = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: gpus}\nspec:\n  namespaces: {names: [ml]}\n  devices:\n    defaults: [{key: gpu, operator: Exists}]\n";
    PolicySet {
        policies: parse("gpus.yaml", yaml).expect("valid policy"),
        ..Default::default()
    }
}

/// A kind no policy defaults leaves the defaulting entry's rules, so that
/// the apiserver does not evaluate the entry's conditions for it at all
/// (src/controllers/mutate_rules.rs), and comes back with a policy that
/// defaults it; with no defaults at all the entry keeps no rule, and is
/// still found by its condition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_of_kinds_no_policy_defaults_are_parked_and_come_back() {
    let api = FakeApiServer::start(objects()).await;
    let pods = json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]);
    let claims = json!({"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"], "operations": ["CREATE"],
        "resources": ["resourceclaims", "resourceclaimtemplates"], "scope": "Namespaced"});
    let store = PolicyStore::new(policies("ml"));
    let controller = MutateConditions::new(api.client(), settings(), store.clone(), false);
    let task = tokio::spawn(controller.run());

    // Pod defaults only: the claims rule is parked, the Pods rule stays.
    within(Duration::from_secs(5), || rules(&api, 1) == pods)
        .await
        .unwrap_or_else(|| panic!("claims parked at start: {}", rules(&api, 1)));
    assert_eq!(
        conditions(&api, 1),
        with_ours(&expression(&policies("ml"), false)),
        "the condition is written in the same patch"
    );
    assert_eq!(api.writes_of("PATCH").len(), 1, "one write");
    assert_eq!(
        rules(&api, 2)[0]["resources"],
        json!(["resourceslices"]),
        "the stamping entry is untouched"
    );

    // Device defaults only: claims back (as the manifest writes them),
    // Pods parked.
    store.replace(device_defaults());
    within(Duration::from_secs(5), || rules(&api, 1) == json!([claims]))
        .await
        .unwrap_or_else(|| panic!("claims back, Pods parked: {}", rules(&api, 1)));

    // No defaults at all: no rule left, and the entry is still ours.
    store.replace(PolicySet::default());
    within(Duration::from_secs(5), || rules(&api, 1) == json!([]))
        .await
        .unwrap_or_else(|| panic!("every rule parked: {}", rules(&api, 1)));
    store.replace(policies("ml"));
    let pods_back = json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}]);
    within(Duration::from_secs(5), || rules(&api, 1) == pods_back)
        .await
        .unwrap_or_else(|| panic!("Pods back from no rule: {}", rules(&api, 1)));
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_patch_leaves_the_static_conditions() {
    let mut objects = objects();
    objects.forbid_webhook_patches = true;
    let api = FakeApiServer::start(objects).await;
    let controller = MutateConditions::new(api.client(), settings(), PolicyStore::new(policies("ml")), false);
    let error = controller
        .ensure(&managed(&policies("ml"), false))
        .await
        .expect_err("RBAC refuses the patch");
    assert!(
        error
            .to_string()
            .starts_with("cannot patch MutatingWebhookConfiguration draguard: "),
        "{error}"
    );
    assert_eq!(
        api.refused_of("PATCH"),
        ["403 Forbidden mutatingwebhookconfigurations/draguard"]
    );
    // Every CREATE still reaches /mutate through the manifest's condition.
    assert_eq!(
        conditions(&api, 1),
        json!([{"name": "not-a-kubelet", "expression": KUBELET}])
    );
}

/// A policy that selects `team=ml` namespaces (and `ml` by name).
fn by_label() -> PolicySet {
    let yaml = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: ml}\nspec:\n  namespaces: {names: [ml], selector: {matchLabels: {team: ml}}}\n  pods:\n    defaults: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]\n";
    PolicySet {
        policies: parse("ml.yaml", yaml).expect("valid policy"),
        ..Default::default()
    }
}

fn names(api: &FakeApiServer) -> Vec<String> {
    let config = api
        .webhook_config("mutatingwebhookconfigurations", "draguard")
        .expect("config");
    config["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_entry_is_added_restored_after_an_apply_and_removed_after_a_reload() {
    let api = FakeApiServer::start(objects()).await;
    let store = PolicyStore::new(by_label());
    let controller = MutateConditions::new(api.client(), settings(), store.clone(), false);
    let task = tokio::spawn(controller.run());

    let desired = managed(&by_label(), false);
    assert_eq!(desired.selectors.len(), 1);
    let entry = format!("{}.selector.mutate.draguard.dev", desired.selectors[0].id);
    let shipped = ["other.example.com", "mutate.draguard.dev", "admin.mutate.draguard.dev"];
    let with_entry = [&shipped[..], &[entry.as_str()]].concat();
    within(Duration::from_secs(5), || names(&api) == with_entry)
        .await
        .unwrap_or_else(|| panic!("added at start: {:?}", names(&api)));
    // In the same write, the defaulting entry's condition leaves the
    // selector out, and the new entry sends it.
    assert_eq!(conditions(&api, 1), with_ours(&desired.split.expression));
    assert_eq!(
        conditions(&api, 3),
        with_ours(&desired.selectors[0].condition.expression)
    );
    let config = api
        .webhook_config("mutatingwebhookconfigurations", "draguard")
        .expect("config");
    assert_eq!(
        config["webhooks"][3]["namespaceSelector"],
        json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["ml"]}]})
    );
    assert_eq!(
        config["webhooks"][3]["clientConfig"],
        config["webhooks"][1]["clientConfig"]
    );
    assert_eq!(api.writes_of("PATCH").len(), 1, "one write");

    // A `kubectl replace` of the manifests, which do not list the entry:
    // put back, with the condition, by the watch.
    let mut replaced = config.clone();
    replaced["webhooks"].as_array_mut().expect("webhooks").truncate(3);
    replaced["webhooks"][1]["matchConditions"] = json!([{"name": "not-a-kubelet", "expression": KUBELET}]);
    api.apply("mutatingwebhookconfigurations", replaced);
    within(Duration::from_secs(5), || {
        names(&api) == with_entry && conditions(&api, 1) == with_ours(&desired.split.expression)
    })
    .await
    .unwrap_or_else(|| panic!("restored: {:?}", names(&api)));

    // A reload to a policy that selects by name only: the entry goes, and
    // the condition is exact without it.
    store.replace(policies("ml"));
    within(Duration::from_secs(5), || names(&api) == shipped)
        .await
        .unwrap_or_else(|| panic!("removed after the reload: {:?}", names(&api)));
    assert_eq!(conditions(&api, 1), with_ours(&expression(&policies("ml"), false)));
    assert_eq!(conditions(&api, 0), Value::Null, "someone else's entry is untouched");
    assert_eq!(api.writes_of("PATCH").len(), 3, "one write per change, no loop");
    task.abort();
}

/// Another writer that undoes every write of ours at once (a replica of
/// an older version during a rollout, with another condition): the two
/// trade a few patches, not one per watch round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_keeps_undoing_ours_is_answered_ever_more_slowly() {
    let api = FakeApiServer::start(objects()).await;
    let controller = MutateConditions::new(api.client(), settings(), PolicyStore::new(policies("ml")), false);
    let task = tokio::spawn(controller.run());
    let ml = expression(&policies("ml"), false);
    let theirs = with_ours("true");
    let started = std::time::Instant::now();
    let mut undone = 0;
    while started.elapsed() < Duration::from_secs(5) {
        if conditions(&api, 1) == with_ours(&ml) {
            let mut config = api
                .webhook_config("mutatingwebhookconfigurations", "draguard")
                .expect("config");
            config["webhooks"][1]["matchConditions"] = theirs.clone();
            api.apply("mutatingwebhookconfigurations", config);
            undone += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let patches = api.writes_of("PATCH").len();
    // At start, then at once, then after 1 s, 2 s: 4 or 5 in 5 s; a repair
    // per round trip would be hundreds.
    assert!((3..=6).contains(&patches), "{patches} patches, {undone} undone");
    // Still put back in the end.
    within(Duration::from_secs(10), || conditions(&api, 1) == with_ours(&ml))
        .await
        .unwrap_or_else(|| panic!("put back: {}", conditions(&api, 1)));
    task.abort();
}

/// Seventeen label selectors, one more than there may be entries: two
/// share an entry, and the metric says which policies pay and where.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_widened_past_the_entry_bound_is_exported() {
    let yaml: Vec<String> = (0..17)
        .map(|i| {
            format!(
                "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: t{i:02}}}\nspec:\n  namespaces: {{selector: {{matchLabels: {{team: t{i:02}}}}}}}\n  pods:\n    defaults: [{{key: t, operator: Exists}}]\n"
            )
        })
        .collect();
    let set = PolicySet {
        policies: parse("teams.yaml", &yaml.join("---\n")).expect("valid policies"),
        ..Default::default()
    };
    let api = FakeApiServer::start(objects()).await;
    let controller = MutateConditions::new(api.client(), settings(), PolicyStore::new(set), false);
    let routing = controller.routing();
    let render = || {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(routing.collector());
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        text
    };
    assert!(render().contains("\ndraguard_routing_widened_policies 0\n"));
    let task = tokio::spawn(controller.run());
    within(Duration::from_secs(5), || names(&api).len() == 3 + 16)
        .await
        .unwrap_or_else(|| panic!("16 entries: {:?}", names(&api)));
    let text = render();
    assert!(text.contains("\ndraguard_routing_widened_policies 2\n"), "{text}");
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("draguard_routing_widened{"))
        .collect();
    assert_eq!(series.len(), 2, "{text}");
    assert!(
        series.iter().all(|l| l.contains("namespaces=\"team in (t")),
        "{series:?}"
    );
    task.abort();
}
