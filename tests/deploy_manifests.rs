//! The shipped manifests cannot take a cluster down: every kustomization
//! under `deploy/` is rendered with `kubectl kustomize` and the webhook
//! configurations are judged by what they would do, not by how they are
//! spelled. Namespace selectors are evaluated against the namespaces that
//! must stay exempt, `matchConditions` are evaluated as CEL against the
//! requests of kubelets and the node lifecycle controller and against the
//! AdmissionRequests a real kube-apiserver sent (tests/fixtures/apiserver),
//! and every entry's failure policy, timeout and CA source is checked,
//! down to what a hung replica costs one write over every entry it reaches.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser as _;
use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// `kubectl kustomize DIR`, parsed. Without kubectl the tests cannot run;
/// CI installs it and fails loudly if it cannot.
fn render(dir: &Path) -> Option<Vec<Value>> {
    let out = match Command::new("kubectl").arg("kustomize").arg(dir).output() {
        Ok(out) => out,
        Err(e) if std::env::var_os("CI").is_some() => panic!("kubectl is needed to render deploy/: {e}"),
        Err(e) => {
            eprintln!("skipped: kubectl not found ({e})");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "kubectl kustomize {} failed:\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8 YAML");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("rendered YAML parses");
    Some(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// The base plus components, composed as a user's overlay would; written
/// under the repository because kustomize refuses absolute resource paths.
fn render_with_components(components: &[&str]) -> Option<Vec<Value>> {
    let scratch = Path::new(ROOT).join("target");
    std::fs::create_dir_all(&scratch).expect("target/");
    let dir = tempfile::Builder::new()
        .prefix("kustomize-")
        .tempdir_in(&scratch)
        .expect("tempdir");
    let list: Vec<String> = components
        .iter()
        .map(|c| format!("../../deploy/components/{c}"))
        .collect();
    let kustomization = json!({"resources": ["../../deploy/base"], "components": list});
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        serde_json::to_string(&kustomization).expect("JSON is YAML"),
    )
    .expect("write kustomization");
    render(dir.path())
}

fn overlay(name: &str) -> PathBuf {
    Path::new(ROOT).join("deploy").join(name)
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    docs.iter().find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

fn of_kind<'a>(docs: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
    docs.iter().filter(move |d| d["kind"] == kind)
}

fn deployment(docs: &[Value]) -> &Value {
    find(docs, "Deployment", "draguard").expect("the Deployment")
}

fn args(docs: &[Value]) -> Vec<&str> {
    deployment(docs)["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// The container's arguments are ones this binary accepts: a renamed or
/// removed flag breaks the test, not a rollout.
fn assert_args_parse(docs: &[Value]) {
    let args = args(docs);
    if let Err(e) = draguard::cli::Cli::try_parse_from(std::iter::once("draguard").chain(args.iter().copied())) {
        panic!("the Deployment's args {args:?} do not parse:\n{e}");
    }
}

/// Every webhook entry of both configurations, with the configuration.
fn webhooks(docs: &[Value]) -> Vec<(&Value, &Value)> {
    ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]
        .iter()
        .flat_map(|kind| of_kind(docs, kind))
        .flat_map(|config| {
            config["webhooks"]
                .as_array()
                .expect("webhooks")
                .iter()
                .map(move |w| (config, w))
        })
        .collect()
}

fn validating<'a>(docs: &'a [Value], name: &str) -> &'a Value {
    webhooks(docs)
        .into_iter()
        .find(|(c, w)| c["kind"] == "ValidatingWebhookConfiguration" && w["name"] == name)
        .map(|(_, w)| w)
        .unwrap_or_else(|| panic!("validating webhook {name}"))
}

fn resources(webhook: &Value) -> Vec<&str> {
    webhook["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .flat_map(|r| r["resources"].as_array().expect("resources"))
        .filter_map(Value::as_str)
        .collect()
}

fn namespaced(webhook: &Value) -> bool {
    webhook["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .any(|r| r["scope"] != "Cluster")
}

/// `metav1.LabelSelector` semantics, as the apiserver applies
/// namespaceSelector (absent selector: every namespace).
fn selects(selector: &Value, labels: &BTreeMap<&str, &str>) -> bool {
    if selector.is_null() {
        return true;
    }
    let match_labels = selector["matchLabels"].as_object().into_iter().flatten();
    let labels_ok = match_labels
        .into_iter()
        .all(|(k, v)| labels.get(k.as_str()).is_some_and(|l| Some(*l) == v.as_str()));
    let expressions = selector["matchExpressions"].as_array().into_iter().flatten();
    let expressions_ok = expressions.into_iter().all(|e| {
        let key = e["key"].as_str().expect("key");
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let value = labels.get(key);
        match e["operator"].as_str().expect("operator") {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            other => panic!("unknown selector operator {other}"),
        }
    });
    labels_ok && expressions_ok
}

/// The labels a namespace carries: its name (set by the apiserver since
/// 1.22) and any others given.
fn namespace<'a>(name: &'a str, more: &[(&'a str, &'a str)]) -> BTreeMap<&'a str, &'a str> {
    let mut labels: BTreeMap<&str, &str> = more.iter().copied().collect();
    labels.insert("kubernetes.io/metadata.name", name);
    labels
}

/// Whether the apiserver would call the webhook for an UPDATE by `user`:
/// every matchCondition must evaluate to true.
fn sent_for(webhook: &Value, user: &str) -> bool {
    sent_for_operation(webhook, user, "UPDATE")
}

fn sent_for_operation(webhook: &Value, user: &str, operation: &str) -> bool {
    let conditions = webhook["matchConditions"].as_array().into_iter().flatten();
    conditions.into_iter().all(|c| {
        let expression = c["expression"].as_str().expect("expression");
        let program = Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
        let mut ctx = Context::default();
        // A write of the entry's first resource that changes what draguard
        // judges (a toleration added), so that only the requester decides.
        let resource = resources(webhook)[0];
        let request = json!({
            "operation": operation,
            "resource": {"group": "", "version": "v1", "resource": resource},
            "userInfo": {"username": user, "groups": ["system:authenticated"]}
        });
        let object = json!({"metadata": {"name": "x"}, "spec": {"tolerations": [{"key": "example.com/gpu", "operator": "Exists"}]}});
        let old = if operation == "UPDATE" {
            json!({"metadata": {"name": "x"}, "spec": {}})
        } else {
            Value::Null
        };
        for (name, value) in [("request", &request), ("object", &object), ("oldObject", &old)] {
            ctx.add_variable_from_value(name, kube_cel::cel::to_value(value).expect("CEL value"));
        }
        match program.execute(&ctx) {
            Ok(CelValue::Bool(b)) => b,
            other => panic!("{expression} does not give a bool: {other:?}"),
        }
    })
}

const KUBELET: &str = "system:node:worker-1";
const SCALE: &str = "scale.validate.draguard.dev";
const NODE_CONTROLLER: &str = "system:serviceaccount:kube-system:node-controller";
const CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
const ADMIN: &str = "alice";

/// What must hold in every rendering, whoever provides the CA.
fn assert_fails_safe(docs: &[Value], expected_failure: &[(&str, &str)]) {
    assert_args_parse(docs);
    let all = webhooks(docs);
    assert!(all.len() >= 7, "every webhook entry is rendered: {}", all.len());
    let draguard_ns = deployment(docs)["metadata"]["namespace"].as_str().expect("namespace");
    let service = find(docs, "Service", "draguard").expect("the Service");
    for (config, w) in &all {
        let name = w["name"].as_str().expect("name");
        // A hung replica costs one write at most 3 s over every entry it
        // reaches: 1 s to mutate, 2 s to validate, no reinvocation
        // (`a_hung_replica_costs_a_write_at_most_3_s` adds them up).
        if config["kind"] == "MutatingWebhookConfiguration" {
            assert_eq!(w["timeoutSeconds"], 1, "{name}");
            assert_eq!(w["reinvocationPolicy"], "Never", "{name}: a reinvocation waits again");
            // A mutation is never worth a failed API call.
            assert_eq!(w["failurePolicy"], "Ignore", "{name}");
        } else if name == SCALE {
            // It only warns, and its read of the workload takes 500 ms at
            // most (src/server/scale_workload.rs).
            assert_eq!(w["timeoutSeconds"], 1, "{name}");
            assert_eq!(
                w["failurePolicy"], "Ignore",
                "{name}: a warning is never worth a failed scale"
            );
        } else {
            assert_eq!(w["timeoutSeconds"], 2, "{name}");
        }
        let client = &w["clientConfig"]["service"];
        assert_eq!(
            client["name"], service["metadata"]["name"],
            "{name} calls draguard's Service"
        );
        assert_eq!(client["namespace"], draguard_ns, "{name} calls draguard's namespace");
        let port = client["port"].as_u64().unwrap_or(443);
        assert!(
            service["spec"]["ports"]
                .as_array()
                .expect("ports")
                .iter()
                .any(|p| p["port"] == port),
            "{name}: the Service serves port {port}"
        );
        if namespaced(w) {
            let user = namespace("ml", &[]);
            assert!(
                selects(&w["namespaceSelector"], &user),
                "{name} judges tenant namespaces"
            );
            for exempt in ["kube-system", "kube-node-lease", draguard_ns] {
                assert!(
                    !selects(&w["namespaceSelector"], &namespace(exempt, &[])),
                    "{name} must never judge namespace {exempt}"
                );
            }
            let ignored = namespace("legacy", &[("draguard.dev/ignore", "true")]);
            assert!(
                !selects(&w["namespaceSelector"], &ignored),
                "{name} skips namespaces labelled draguard.dev/ignore"
            );
        }
        // Kubelets never wait on draguard for their own objects.
        if resources(w).iter().any(|r| matches!(*r, "pods" | "nodes")) {
            assert!(!sent_for(w, KUBELET), "{name} is not called for kubelets");
            assert!(sent_for(w, ADMIN), "{name} is called for users");
        }
    }
    // Controllers' updates (finalizers, owner references) never wait on
    // draguard; their creates and users' updates are judged.
    let enforcing = validating(docs, "validate.draguard.dev");
    const GARBAGE_COLLECTOR: &str = "system:serviceaccount:kube-system:generic-garbage-collector";
    for controller in [GARBAGE_COLLECTOR, CONTROLLER_MANAGER] {
        assert!(!sent_for(enforcing, controller), "{controller}'s updates are not sent");
        assert!(
            sent_for_operation(enforcing, controller, "CREATE"),
            "{controller}'s creates are judged"
        );
    }
    let nodes = validating(docs, "nodes.validate.draguard.dev");
    assert_eq!(resources(nodes), ["nodes"], "Nodes have an entry of their own");
    for controller in [NODE_CONTROLLER, CONTROLLER_MANAGER] {
        assert!(
            !sent_for(nodes, controller),
            "the node lifecycle controller ({controller}) taints nodes without draguard"
        );
    }
    assert_namespace_guards_fail_closed_only_on_their_keys(
        validating(docs, "namespaces.validate.draguard.dev"),
        draguard_ns,
    );
    assert_namespace_guards_fail_open_where_the_control_plane_writes(docs, draguard_ns);
    for (entry, policy) in expected_failure {
        assert_eq!(
            validating(docs, entry)["failurePolicy"],
            *policy,
            "failurePolicy of {entry}"
        );
    }
    // The draguard namespace carries the opt-out label too, so renaming it
    // in an overlay keeps it exempt.
    let ns = find(docs, "Namespace", draguard_ns).expect("the Namespace");
    assert_eq!(ns["metadata"]["labels"]["draguard.dev/ignore"], "true");
}

/// Whether the apiserver would call a Namespace webhook for a write of
/// `object` over `old` (null on CREATE) by an admin.
fn sent_for_namespace_write(webhook: &Value, object: &Value, old: &Value) -> bool {
    let conditions = webhook["matchConditions"].as_array().into_iter().flatten();
    conditions.into_iter().all(|c| {
        let expression = c["expression"].as_str().expect("expression");
        let program = Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
        let mut ctx = Context::default();
        let operation = if old.is_null() { "CREATE" } else { "UPDATE" };
        let request =
            json!({"operation": operation, "userInfo": {"username": ADMIN, "groups": ["system:authenticated"]}});
        for (name, value) in [("request", &request), ("object", object), ("oldObject", old)] {
            ctx.add_variable_from_value(name, kube_cel::cel::to_value(value).expect("CEL value"));
        }
        match program.execute(&ctx) {
            Ok(CelValue::Bool(b)) => b,
            other => panic!("{expression} does not give a bool: {other:?}"),
        }
    })
}

/// The Namespace entry fails closed, so it must be sent nothing but the
/// writes that touch a guarded key, and never the control plane's
/// namespaces; its selector cannot read a label the same write could add.
fn assert_namespace_guards_fail_closed_only_on_their_keys(w: &Value, draguard_ns: &str) {
    assert_eq!(resources(w), NAMESPACE_RESOURCES);
    assert_eq!(w["rules"][0]["operations"], json!(["CREATE", "UPDATE"]));
    let selector = &w["namespaceSelector"];
    for exempt in ["kube-system", "kube-node-lease", draguard_ns] {
        assert!(!selects(selector, &namespace(exempt, &[])), "{exempt} is never guarded");
    }
    let escaping = namespace("ml", &[("draguard.dev/ignore", "true")]);
    assert!(
        selects(selector, &escaping),
        "adding draguard.dev/ignore must not take a Namespace out of its own guard"
    );
    assert_guarded_keys_condition_is_generated(w);
    let ns =
        |labels: Value| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": labels}});
    let plain = ns(json!({"team": "a"}));
    let admin = ns(json!({"team": "a", "resource.kubernetes.io/admin-access": "true"}));
    assert!(
        !sent_for_namespace_write(w, &plain, &Value::Null),
        "a plain create never waits"
    );
    assert!(
        !sent_for_namespace_write(w, &ns(json!({"team": "b"})), &plain),
        "nor a plain update"
    );
    assert!(
        !sent_for_namespace_write(w, &admin, &admin),
        "nor one that keeps the guarded keys"
    );
    assert!(sent_for_namespace_write(w, &admin, &Value::Null));
    assert!(sent_for_namespace_write(w, &admin, &plain));
    assert!(
        sent_for_namespace_write(w, &plain, &admin),
        "removing the label is guarded too"
    );
}

/// What the Namespace entries are sent: the Namespace, and the
/// subresources that store its labels and annotations as sent.
const NAMESPACE_RESOURCES: [&str; 3] = ["namespaces", "namespaces/status", "namespaces/finalize"];

/// The entry's `changes-a-guarded-key` is the expression draguard
/// generates for its built-in keys (`policy lint` prints it with more).
fn assert_guarded_keys_condition_is_generated(w: &Value) {
    let shipped: Vec<&str> = w["matchConditions"]
        .as_array()
        .expect("matchConditions")
        .iter()
        .find(|c| c["name"] == "changes-a-guarded-key")
        .and_then(|c| c["expression"].as_str())
        .unwrap_or_else(|| panic!("{}: no changes-a-guarded-key", w["name"]))
        .split_whitespace()
        .collect();
    let generated = draguard::policy::namespace_guards::builtin_match_condition();
    assert_eq!(
        shipped,
        generated.split_whitespace().collect::<Vec<_>>(),
        "{}: the shipped matchCondition is the one draguard generates for its built-in keys",
        w["name"]
    );
}

/// The control plane's namespaces and system:masters are judged by an
/// entry of their own that fails open, with the same keys and resources,
/// and whose namespace list is the fail-closed entry's exemption.
fn assert_namespace_guards_fail_open_where_the_control_plane_writes(docs: &[Value], draguard_ns: &str) {
    let open = validating(docs, "namespaces-fail-open.validate.draguard.dev");
    assert_eq!(open["failurePolicy"], "Ignore");
    assert_eq!(resources(open), NAMESPACE_RESOURCES);
    assert!(open["namespaceSelector"].is_null(), "it exempts no namespace");
    assert_guarded_keys_condition_is_generated(open);
    let closed = validating(docs, "namespaces.validate.draguard.dev");
    let exempt = closed["namespaceSelector"]["matchExpressions"][0]["values"].clone();
    assert_eq!(exempt, json!(["kube-system", "kube-node-lease", draguard_ns]));
    let named = open["matchConditions"][0]["expression"].as_str().expect("expression");
    let list = exempt
        .as_array()
        .expect("values")
        .iter()
        .map(|v| format!("'{}'", v.as_str().expect("name")))
        .collect::<Vec<_>>()
        .join(", ");
    assert!(
        named.contains(&format!("object.metadata.name in [{list}]")),
        "the fail-open entry names the namespaces the fail-closed one exempts: {named}"
    );
}

/// The base's failure policies, entry by entry.
const BASE_FAILURE: &[(&str, &str)] = &[
    ("validate.draguard.dev", "Fail"),
    ("workloads.validate.draguard.dev", "Ignore"),
    ("admin.validate.draguard.dev", "Fail"),
    ("resourceslices.validate.draguard.dev", "Ignore"),
    ("nodes.validate.draguard.dev", "Ignore"),
    ("namespaces.validate.draguard.dev", "Fail"),
    ("namespaces-fail-open.validate.draguard.dev", "Ignore"),
    ("deviceclasses.validate.draguard.dev", "Ignore"),
];

fn ca_bundle_is_empty(w: &Value) -> bool {
    w["clientConfig"]["caBundle"].as_str().is_none_or(str::is_empty)
}

#[test]
fn base_fails_safe_and_fills_its_own_ca_bundle() {
    let Some(docs) = render(&overlay("base")) else { return };
    assert_fails_safe(&docs, BASE_FAILURE);
    assert!(
        args(&docs).contains(&"--manage-webhook-certs"),
        "no caBundle in the manifests: draguard must fill it"
    );
    for (_, w) in webhooks(&docs) {
        assert!(
            w["clientConfig"].get("caBundle").is_none(),
            "{}: no caBundle written in the manifests (an empty one fails every call, and GitOps would fight the manager)",
            w["name"]
        );
    }
    // --manage-webhook-certs may write exactly its Secret and caBundle.
    let role = find(&docs, "Role", "draguard-webhook-certs").expect("the Secret's Role");
    let named: Vec<&Value> = role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter(|r| r["verbs"] != json!(["create"]))
        .collect();
    assert!(
        named.iter().all(|r| r["resourceNames"] == json!(["draguard-tls"])),
        "{role}"
    );
    let cluster_role = find(&docs, "ClusterRole", "draguard-webhook-certs").expect("the caBundle ClusterRole");
    assert_eq!(cluster_role["rules"][0]["resourceNames"], json!(["draguard"]));
}

#[test]
fn base_is_read_only_and_highly_available() {
    let Some(docs) = render(&overlay("base")) else { return };
    let reader = find(&docs, "ClusterRole", "draguard").expect("the ClusterRole");
    for rule in reader["rules"].as_array().expect("rules") {
        assert_eq!(rule["verbs"], json!(["get", "list", "watch"]), "read-only: {rule}");
    }
    // The apiserver's version and feature gates, read and nothing else.
    let info = find(&docs, "ClusterRole", "draguard-apiserver-info").expect("the apiserver-info ClusterRole");
    assert_eq!(
        info["rules"],
        json!([{"nonResourceURLs": ["/metrics", "/version"], "verbs": ["get"]}])
    );
    let binding = find(&docs, "ClusterRoleBinding", "draguard-apiserver-info").expect("its binding");
    assert_eq!(binding["roleRef"]["name"], "draguard-apiserver-info");
    assert_eq!(binding["subjects"][0]["name"], "draguard");
    assert!(!args(&docs).contains(&"--sync-quotas"), "quota writes are opt-in");
    let d = deployment(&docs);
    let spec = &d["spec"]["template"]["spec"];
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(spec["priorityClassName"], "system-cluster-critical");
    let keys: Vec<&str> = spec["topologySpreadConstraints"]
        .as_array()
        .expect("spread")
        .iter()
        .filter_map(|c| c["topologyKey"].as_str())
        .collect();
    assert_eq!(keys, ["topology.kubernetes.io/zone", "kubernetes.io/hostname"]);
    let container = &spec["containers"][0];
    for probe in ["startupProbe", "readinessProbe", "livenessProbe"] {
        assert!(container[probe]["httpGet"]["path"].is_string(), "{probe}");
    }
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    // A rolling restart loses no call: the replica keeps answering while
    // its endpoint removal spreads (a preStop sleep, if any, then the
    // server's --shutdown-delay), and the grace period covers that wait
    // and the drain (--shutdown-timeout), with room to exit.
    let pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap_or(0);
    let container_args = args(&docs);
    let seconds = |flag: &str, default: u64| -> u64 {
        container_args
            .iter()
            .find_map(|a| a.strip_prefix(flag)?.strip_prefix('='))
            .map_or(default, |v| {
                v.strip_suffix('s')
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("{flag}={v}: write whole seconds"))
            })
    };
    let delay = seconds("--shutdown-delay", 5);
    let timeout = seconds("--shutdown-timeout", 20);
    let grace = spec["terminationGracePeriodSeconds"].as_u64().unwrap_or(30);
    assert!(
        pre_stop + delay >= 5,
        "preStop {pre_stop} s, --shutdown-delay {delay} s"
    );
    assert!(
        pre_stop + delay + timeout + 5 <= grace,
        "preStop {pre_stop} s + delay {delay} s + timeout {timeout} s + 5 s to exit > grace {grace} s"
    );
    assert_eq!(pre_stop, 0, "the server's shutdown delay replaces the preStop sleep");
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    let pdb = find(&docs, "PodDisruptionBudget", "draguard").expect("the PDB");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    // The policies are a required ConfigMap, generated from policies/.
    let volume = spec["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "policies")
        .expect("policies volume");
    assert!(volume["configMap"]["optional"].as_bool() != Some(true), "required");
    let config_map = volume["configMap"]["name"].as_str().expect("name");
    let data = &find(&docs, "ConfigMap", config_map).expect("the generated ConfigMap")["data"];
    let files: Vec<&String> = data.as_object().expect("data").keys().collect();
    assert_eq!(
        files,
        [
            "dedicated-nodes.yaml",
            "gpu-devices.yaml",
            "gpu-sharing.yaml",
            "maintenance.yaml"
        ]
    );
    assert!(args(&docs).contains(&"--policies=/etc/draguard/policies"));
}

#[test]
fn cert_manager_overlay_lets_the_injector_fill_the_ca_bundle() {
    let Some(docs) = render(&overlay("cert-manager")) else {
        return;
    };
    assert_fails_safe(&docs, BASE_FAILURE);
    let args = args(&docs);
    assert!(
        !args.contains(&"--manage-webhook-certs"),
        "one CA manager at a time: {args:?}"
    );
    assert!(args.contains(&"--tls-cert=/etc/draguard/tls/tls.crt"), "{args:?}");
    assert!(args.contains(&"--tls-key=/etc/draguard/tls/tls.key"), "{args:?}");
    let certificate = find(&docs, "Certificate", "draguard").expect("the Certificate");
    let ns = certificate["metadata"]["namespace"].as_str().expect("namespace");
    for (config, w) in webhooks(&docs) {
        assert!(ca_bundle_is_empty(w), "the injector owns caBundle");
        assert_eq!(
            config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            format!("{ns}/draguard"),
            "{}: an empty caBundle only where cert-manager fills it",
            w["name"]
        );
    }
    assert!(
        find(&docs, "Role", "draguard-webhook-certs").is_none(),
        "nothing to write"
    );
    assert!(
        find(&docs, "ClusterRole", "draguard-webhook-certs").is_none(),
        "nothing to write"
    );
}

#[test]
fn fail_closed_components_change_only_their_entry() {
    let Some(docs) = render_with_components(&["nodes-fail-closed"]) else {
        return;
    };
    let mut expected = BASE_FAILURE.to_vec();
    expected[4].1 = "Fail";
    assert_fails_safe(&docs, &expected);

    let Some(docs) = render_with_components(&["slices-fail-closed"]) else {
        return;
    };
    let mut expected = BASE_FAILURE.to_vec();
    expected[3].1 = "Fail";
    assert_fails_safe(&docs, &expected);
}

#[test]
fn sync_quotas_component_adds_the_flag_and_the_writes() {
    let Some(docs) = render_with_components(&["sync-quotas"]) else {
        return;
    };
    assert_fails_safe(&docs, BASE_FAILURE);
    assert!(args(&docs).contains(&"--sync-quotas"));
    let writer = find(&docs, "ClusterRole", "draguard-sync-quotas").expect("the writer role");
    assert_eq!(writer["rules"][0]["resources"], json!(["resourcequotas"]));
    let binding = find(&docs, "ClusterRoleBinding", "draguard-sync-quotas").expect("binding");
    assert_eq!(
        binding["subjects"][0]["namespace"],
        deployment(&docs)["metadata"]["namespace"]
    );
}

/// The admission-policies component adds the flag (which parses) and the
/// rights on the four admission policy kinds, bound to draguard's account.
#[test]
fn admission_policies_component_adds_the_flag_and_the_writes() {
    let Some(docs) = render_with_components(&["admission-policies"]) else {
        return;
    };
    assert_fails_safe(&docs, BASE_FAILURE);
    assert_args_parse(&docs);
    assert!(args(&docs).contains(&"--manage-admission-policies"));
    let writer = find(&docs, "ClusterRole", "draguard-admission-policies").expect("the writer role");
    assert_eq!(
        writer["rules"][0]["resources"],
        json!([
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
            "mutatingadmissionpolicies",
            "mutatingadmissionpolicybindings"
        ])
    );
    assert_eq!(
        writer["rules"][0]["verbs"],
        json!(["get", "list", "create", "patch", "delete"])
    );
    let binding = find(&docs, "ClusterRoleBinding", "draguard-admission-policies").expect("binding");
    assert_eq!(
        binding["subjects"][0]["namespace"],
        deployment(&docs)["metadata"]["namespace"]
    );
}

/// The audit component adds the flag, lets draguard list every kind an
/// audit reads (with base's reader role: kept in step with the kind
/// registry), write only PolicyReports, and hold its Lease in its own
/// namespace.
#[test]
fn audit_component_adds_the_flag_the_reads_and_the_report_writes() {
    let Some(docs) = render_with_components(&["audit"]) else {
        return;
    };
    assert_fails_safe(&docs, BASE_FAILURE);
    assert!(args(&docs).contains(&"--audit-interval=1h"), "{:?}", args(&docs));
    let namespace = deployment(&docs)["metadata"]["namespace"].clone();
    let lists = |group: &str, plural: &str| {
        ["draguard", "draguard-audit"].iter().any(|role| {
            find(&docs, "ClusterRole", role).expect("role")["rules"]
                .as_array()
                .expect("rules")
                .iter()
                .any(|r| {
                    let has =
                        |field: &str, want: &str| r[field].as_array().is_some_and(|l| l.iter().any(|v| v == want));
                    has("apiGroups", group) && has("resources", plural) && has("verbs", "list")
                })
        })
    };
    for audited in draguard::cluster::audited_kinds::audited() {
        let c = &audited.collection;
        // The tests' toy kind (the `toy-kind` feature) is in no cluster.
        if c.group == "toy.draguard.dev" {
            continue;
        }
        assert!(lists(c.group, c.plural), "{}/{} is not listed", c.group, c.plural);
    }
    let audit = find(&docs, "ClusterRole", "draguard-audit").expect("the audit role");
    let writes: Vec<&Value> = audit["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .filter(|r| {
            r["verbs"]
                .as_array()
                .expect("verbs")
                .iter()
                .any(|v| v != "list" && v != "get")
        })
        .collect();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0]["apiGroups"], json!(["wgpolicyk8s.io"]));
    assert_eq!(writes[0]["resources"], json!(["policyreports", "clusterpolicyreports"]));
    let lease = find(&docs, "Role", "draguard-audit-lease").expect("the lease role");
    assert_eq!(lease["metadata"]["namespace"], namespace);
    assert_eq!(lease["rules"][1]["resourceNames"], json!(["draguard-audit"]));
    for (kind, name) in [
        ("ClusterRoleBinding", "draguard-audit"),
        ("RoleBinding", "draguard-audit-lease"),
    ] {
        let binding = find(&docs, kind, name).expect("binding");
        assert_eq!(binding["subjects"][0]["namespace"], namespace);
    }
}

/// Standing DeviceTaintRules: the base may publish Events about them, and
/// hold the Lease that picks the one replica that does, and nothing else; patching a rule's effect (`onExceed: Pause`) comes only
/// with deploy/components/taint-rule-breaker.
#[test]
fn taint_rule_events_in_base_and_the_breaker_patch_only_in_its_component() {
    let Some(base) = render(&overlay("base")) else { return };
    let events = find(&base, "ClusterRole", "draguard-events").expect("the Events role");
    assert_eq!(
        events["rules"],
        json!([{"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}])
    );
    let binding = find(&base, "ClusterRoleBinding", "draguard-events").expect("its binding");
    assert_eq!(
        binding["subjects"][0]["namespace"],
        deployment(&base)["metadata"]["namespace"]
    );
    // Only the holder of the Lease draguard-taint-rules publishes them: the
    // Lease in draguard's namespace, and no other.
    let namespace = deployment(&base)["metadata"]["namespace"].clone();
    let lease = find(&base, "Role", "draguard-taint-rules-lease").expect("the Lease's Role");
    assert_eq!(lease["metadata"]["namespace"], namespace);
    assert_eq!(
        lease["rules"],
        json!([
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": [draguard::controllers::standing_taint_rules::LEASE_NAME], "verbs": ["get", "update"]}
        ])
    );
    // The Lease and the Events are written past draguard's own webhooks:
    // no entry intercepts them, so nothing waits on draguard to elect or
    // to say (kube-system's own Leases neither).
    for (_, webhook) in webhooks(&base) {
        for rule in webhook["rules"].as_array().expect("rules") {
            for group in rule["apiGroups"].as_array().expect("apiGroups") {
                assert!(
                    !["coordination.k8s.io", "events.k8s.io", "*"].contains(&group.as_str().unwrap_or("")),
                    "{} intercepts {group}",
                    webhook["name"]
                );
            }
        }
    }
    let binding = find(&base, "RoleBinding", "draguard-taint-rules-lease").expect("its binding");
    assert_eq!(binding["metadata"]["namespace"], namespace);
    assert_eq!(binding["roleRef"]["name"], "draguard-taint-rules-lease");
    assert_eq!(
        binding["subjects"][0],
        json!({"kind": "ServiceAccount", "name": "draguard", "namespace": namespace})
    );
    assert!(
        find(&base, "ClusterRole", "draguard-taint-rule-breaker").is_none(),
        "opt-in"
    );
    let Some(docs) = render_with_components(&["taint-rule-breaker"]) else {
        return;
    };
    assert_fails_safe(&docs, BASE_FAILURE);
    let breaker = find(&docs, "ClusterRole", "draguard-taint-rule-breaker").expect("the breaker role");
    assert_eq!(
        breaker["rules"],
        json!([{"apiGroups": ["resource.k8s.io"], "resources": ["devicetaintrules"], "verbs": ["patch"]}])
    );
    let binding = find(&docs, "ClusterRoleBinding", "draguard-taint-rule-breaker").expect("binding");
    assert_eq!(
        binding["subjects"][0]["namespace"],
        deployment(&docs)["metadata"]["namespace"]
    );
}

/// Every kustomization under deploy/ renders (components are composed in
/// the tests above).
#[test]
fn every_overlay_builds() {
    let deploy = Path::new(ROOT).join("deploy");
    let mut built = Vec::new();
    for entry in std::fs::read_dir(&deploy).expect("deploy/") {
        let dir = entry.expect("entry").path();
        if dir.join("kustomization.yaml").is_file() {
            let Some(docs) = render(&dir) else { return };
            assert!(!docs.is_empty(), "{} renders objects", dir.display());
            built.push(dir.file_name().expect("name").to_string_lossy().into_owned());
        }
    }
    built.sort();
    assert!(built.len() >= 2, "{built:?}");
    assert!(built.contains(&"base".to_owned()) && built.contains(&"cert-manager".to_owned()));
}

/// The webhook rules, the CRD and the RBAC name kinds the way the kind
/// registry declares them: every kind draguard judges is sent to it, and
/// nothing is sent (or read) that the registry does not know.
#[test]
fn manifests_agree_with_the_kind_registry() {
    use draguard::review::registry::rows;
    let Some(docs) = render(&overlay("base")) else { return };
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .expect("a list")
            .iter()
            .map(|s| s.as_str().expect("a string").to_owned())
            .collect()
    };
    let mut sent = Vec::new();
    for config in of_kind(&docs, "ValidatingWebhookConfiguration") {
        for w in config["webhooks"].as_array().expect("webhooks") {
            for rule in w["rules"].as_array().expect("rules") {
                let versions = strings(&rule["apiVersions"]);
                for group in strings(&rule["apiGroups"]) {
                    for resource in strings(&rule["resources"]) {
                        // A subresource is judged as its kind (the
                        // Namespace guards' status and finalize).
                        let resource = resource.split('/').next().unwrap_or_default().to_owned();
                        let row = rows()
                            .find(|r| r.group == group && r.plural == resource)
                            .unwrap_or_else(|| panic!("{}: {group}/{resource} is not in the registry", w["name"]));
                        for v in versions.iter().filter(|v| *v != "*") {
                            assert!(
                                row.versions.contains(&v.as_str()),
                                "{group}/{v} {resource}: not a version the registry knows"
                            );
                        }
                        sent.push((group.clone(), resource.clone(), versions.clone()));
                    }
                }
            }
        }
    }
    // The toy kind (on in tests through draguard-core's `toy-kind`
    // feature) proves the registry and is served by no manifest.
    for row in rows().filter(|r| r.group != draguard::kinds::toy::ROW.group) {
        for version in row.versions {
            assert!(
                sent.iter()
                    .any(|(g, r, vs)| g == row.group && r == row.plural && vs.iter().any(|v| v == "*" || v == version)),
                "{}/{version} {} is judged by draguard but no validating webhook sends it",
                row.group,
                row.plural
            );
        }
    }
    let crd = find(&docs, "CustomResourceDefinition", "resourceslicepatches.draguard.dev").expect("the CRD");
    let row = rows()
        .find(|r| r.group == "draguard.dev" && r.kind == "ResourceSlicePatch")
        .expect("the CRD's kind in the registry");
    assert_eq!(crd["spec"]["group"], row.group);
    assert_eq!(crd["spec"]["names"]["plural"], row.plural);
    assert_eq!(crd["spec"]["names"]["kind"], row.kind);
    assert_eq!(
        crd["spec"]["scope"],
        if row.namespaced { "Namespaced" } else { "Cluster" }
    );
    let served: Vec<&str> = crd["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .filter(|v| v["served"] == true)
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(served, row.versions);
    // What draguard watches of the DRA kinds it judges, it reads by their
    // plural (the core group also holds Namespaces and ResourceQuotas,
    // which draguard reads but does not judge). DeviceClasses are judged
    // (their drivers' configs) and read (their extended resource names are
    // quota keys); every DRA kind draguard reads is one it judges.
    const READ_NOT_JUDGED: [(&str, &str); 0] = [];
    let role = find(&docs, "ClusterRole", "draguard").expect("the ClusterRole");
    let mut read_not_judged = Vec::new();
    for rule in role["rules"].as_array().expect("rules") {
        for group in strings(&rule["apiGroups"]) {
            if group.is_empty() || !rows().any(|r| r.group == group) {
                continue;
            }
            for resource in strings(&rule["resources"]) {
                if READ_NOT_JUDGED.contains(&(group.as_str(), resource.as_str())) {
                    assert_eq!(strings(&rule["verbs"]), ["get", "list", "watch"]);
                    read_not_judged.push((group.clone(), resource));
                    continue;
                }
                assert!(
                    rows().any(|r| r.group == group && r.plural == resource),
                    "the ClusterRole reads {group}/{resource}, which the registry does not know"
                );
            }
        }
    }
    let want: Vec<(String, String)> = READ_NOT_JUDGED
        .iter()
        .map(|(g, r)| ((*g).to_owned(), (*r).to_owned()))
        .collect();
    assert_eq!(read_not_judged, want, "every watched cache may be read");
}

// ---------------------------------------------------------------------
// Which entries a write reaches, as the apiserver decides it: rules,
// namespaceSelector, then matchConditions evaluated as CEL with
// Kubernetes' variables (`request`, `object`, `oldObject`; `authorizer`
// is not used). Kubernetes evaluates matchConditions with object and
// oldObject as dynamic maps (null when absent) and an error as a failed
// call (kubernetes v1.36 staging/src/k8s.io/apiserver/pkg/admission/
// plugin/webhook/matchconditions/matcher.go): here an error fails the test.
// ---------------------------------------------------------------------

/// The variables a webhook matchCondition may read; `authorizer` needs
/// the apiserver, and none of draguard's conditions uses it.
const MATCH_CONDITION_VARIABLES: [&str; 3] = ["request", "object", "oldObject"];

/// Whether `rule` (a RuleWithOperations) matches the request.
fn rule_matches(rule: &Value, request: &Value) -> bool {
    let listed = |field: &str, want: &str| {
        rule[field]
            .as_array()
            .expect("a list")
            .iter()
            .any(|v| v == "*" || v == want)
    };
    let resource = &request["resource"];
    let name = match request["subResource"].as_str() {
        Some(sub) if !sub.is_empty() => format!("{}/{sub}", resource["resource"].as_str().expect("resource")),
        _ => resource["resource"].as_str().expect("resource").to_owned(),
    };
    // Namespace objects, and their subresources, are cluster-scoped whatever
    // the request's namespace says (admissionregistration/v1 Rule.scope).
    let namespaced =
        resource["resource"] != "namespaces" && request["namespace"].as_str().is_some_and(|n| !n.is_empty());
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Namespaced" => namespaced,
        "Cluster" => !namespaced,
        _ => true,
    };
    scope_ok
        && listed("apiGroups", resource["group"].as_str().unwrap_or(""))
        && listed("apiVersions", resource["version"].as_str().unwrap_or(""))
        && listed("operations", request["operation"].as_str().expect("operation"))
        && listed("resources", &name)
}

/// The labels the namespaceSelector is read against (kubernetes v1.36
/// staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/
/// namespace/matcher.go): a Namespace CREATE or UPDATE's own object, the
/// stored Namespace for its subresources, the request's namespace for a
/// namespaced object; `None` for other cluster-scoped objects, which every
/// selector matches.
fn selector_labels(request: &Value, stored: &Value) -> Option<BTreeMap<String, String>> {
    let of = |object: &Value| -> BTreeMap<String, String> {
        let mut labels: BTreeMap<String, String> = object["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect();
        if let Some(name) = object["metadata"]["name"].as_str() {
            labels.insert("kubernetes.io/metadata.name".into(), name.to_owned());
        }
        labels
    };
    let is_namespace = request["resource"]["resource"] == "namespaces";
    let sub = request["subResource"].as_str().is_some_and(|s| !s.is_empty());
    if is_namespace && !sub {
        return Some(of(&request["object"]));
    }
    if is_namespace {
        return Some(of(stored));
    }
    let namespace = request["namespace"].as_str().filter(|n| !n.is_empty())?;
    let mut labels = of(stored);
    labels.insert("kubernetes.io/metadata.name".into(), namespace.to_owned());
    Some(labels)
}

fn evaluate(expression: &str, request: &Value) -> bool {
    let program = Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"));
    // Only these are declared: a condition reading anything else (the
    // `authorizer`, a typo) fails to evaluate below.
    let mut ctx = Context::default();
    let variables = [request, &request["object"], &request["oldObject"]];
    for (name, value) in MATCH_CONDITION_VARIABLES.into_iter().zip(variables) {
        ctx.add_variable_from_value(name, kube_cel::cel::to_value(value).expect("CEL value"));
    }
    match program.execute(&ctx) {
        Ok(CelValue::Bool(b)) => b,
        other => panic!(
            "{expression} on {} {} by {}: {other:?}",
            request["operation"], request["resource"]["resource"], request["userInfo"]["username"]
        ),
    }
}

/// The entries (configuration kind, entry) the apiserver calls for
/// `request`; `stored` is the Namespace the selector reads where it reads
/// a stored one.
fn reached<'a>(docs: &'a [Value], request: &Value, stored: &Value) -> Vec<(&'a Value, &'a Value)> {
    let labels = selector_labels(request, stored);
    webhooks(docs)
        .into_iter()
        .filter(|(_, w)| {
            w["rules"]
                .as_array()
                .expect("rules")
                .iter()
                .any(|r| rule_matches(r, request))
        })
        .filter(|(_, w)| {
            let borrowed: Option<BTreeMap<&str, &str>> = labels
                .as_ref()
                .map(|l| l.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect());
            borrowed.is_none_or(|l| selects(&w["namespaceSelector"], &l))
        })
        .filter(|(_, w)| {
            w["matchConditions"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|c| evaluate(c["expression"].as_str().expect("expression"), request))
        })
        .collect()
}

fn names<'a>(entries: &[(&'a Value, &'a Value)]) -> Vec<&'a str> {
    entries.iter().filter_map(|(_, w)| w["name"].as_str()).collect()
}

/// The AdmissionRequests a real kube-apiserver v1.36.2 sent
/// (tests/fixtures/apiserver), with the endpoint each was sent to.
fn apiserver_requests() -> Vec<(String, String, Value)> {
    let dir = Path::new(ROOT).join("tests/fixtures/apiserver");
    let index: Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).expect("index.json")).expect("index JSON");
    index
        .as_array()
        .expect("index")
        .iter()
        .map(|entry| {
            let file = entry["file"].as_str().expect("file").to_owned();
            let review: Value =
                serde_json::from_slice(&std::fs::read(dir.join(&file)).expect("fixture")).expect("fixture JSON");
            let endpoint = entry["webhook"].as_str().expect("webhook").to_owned();
            (file, endpoint, review["request"].clone())
        })
        .collect()
}

/// The seconds a hung replica can cost `request`: every entry it reaches
/// waits its full timeout, a reinvoked one twice.
fn worst_wait(entries: &[(&Value, &Value)]) -> u64 {
    entries
        .iter()
        .map(|(_, w)| {
            let once = w["timeoutSeconds"].as_u64().unwrap_or(10);
            if w["reinvocationPolicy"] == "IfNeeded" {
                2 * once
            } else {
                once
            }
        })
        .sum()
}

/// draguard's own `/mutate` answer on `request`, with the shipped policies.
fn draguard_patches(request: &Value) -> usize {
    draguard_patches_with(request, &shipped_policies())
}

/// draguard's own `/mutate` answer on `request`: how many patch operations.
fn draguard_patches_with(request: &Value, policies: &draguard::policy::PolicySet) -> usize {
    draguard_patches_in(request, policies, &draguard::view::StaticView::default())
}

/// [`draguard_patches_with`], with the namespaces (and their labels) of `view`.
fn draguard_patches_in(
    request: &Value,
    policies: &draguard::policy::PolicySet,
    view: &draguard::view::StaticView,
) -> usize {
    use draguard::verdict::Phase;
    let ctx = draguard::review::Engine::new(policies, view, Default::default()).context(
        "2026-11-21T10:00:00Z".parse().expect("time"),
        Phase::Mutate,
        None,
    );
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
    let incoming = draguard::admission::Incoming::parse(&serde_json::to_vec(&review).expect("JSON")).expect("review");
    incoming.answer(&ctx).0.patch.len()
}

fn with_user(request: &Value, username: &str, groups: &[&str]) -> Value {
    let mut request = request.clone();
    request["userInfo"] = json!({"username": username, "groups": groups});
    request
}

/// A hung replica costs a write at most 3 s in all, and a write reaches
/// at most one validating entry and one mutating entry; one that needs no
/// mutation reaches no mutating entry (where the manifests can know it).
#[test]
fn a_hung_replica_costs_a_write_at_most_3_s() {
    let Some(docs) = render(&overlay("base")) else { return };
    let default_ns = json!({"metadata": {"name": "default"}});
    let mut reaches_one = Vec::new();
    for (file, endpoint, request) in apiserver_requests() {
        let reached = reached(&docs, &request, &default_ns);
        assert!(
            worst_wait(&reached) <= 3,
            "{file}: {:?} wait {} s",
            names(&reached),
            worst_wait(&reached)
        );
        let validating = reached
            .iter()
            .filter(|(c, _)| c["kind"] == "ValidatingWebhookConfiguration")
            .count();
        let mutating = reached.len() - validating;
        assert!(validating == 1 && mutating <= 1, "{file}: {:?}", names(&reached));
        // No stamp or default draguard would add is lost.
        if endpoint.starts_with("/mutate") && draguard_patches(&request) > 0 {
            assert_eq!(mutating, 1, "{file}: draguard would patch it, but it is not sent");
        }
        if reached.len() == 1 {
            reaches_one.push(file);
        }
    }
    // The apiserver stamps timeAdded itself before admission, so its
    // slices and taint rules never need draguard's /mutate.
    for kind in [
        "resourceslice-create-3",
        "resourceslice-update-1",
        "devicetaintrule-create-5",
    ] {
        assert!(
            reaches_one.iter().any(|f| f.starts_with(kind)),
            "{kind} reaches one entry: {reaches_one:?}"
        );
    }
}

/// The fixture by file name.
fn fixture(name: &str) -> Value {
    apiserver_requests()
        .into_iter()
        .find(|(file, _, _)| file == name)
        .map(|(_, _, request)| request)
        .unwrap_or_else(|| panic!("fixture {name}"))
}

/// A named change to a stored object.
type Edit = (&'static str, fn(&mut Value));

/// Pod UPDATEs wait on draguard only when they change what draguard
/// judges: a finalizer or label edit never does, a toleration change does.
#[test]
fn pod_updates_are_sent_only_when_what_draguard_judges_changes() {
    let Some(docs) = render(&overlay("base")) else { return };
    let ns = json!({"metadata": {"name": "default"}});
    // The apiserver's own request: a toleration added with a JSON patch.
    let added = fixture("pod-update-2.json");
    assert_ne!(
        added["object"]["spec"]["tolerations"],
        added["oldObject"]["spec"]["tolerations"]
    );
    let user = with_user(&added, "alice", &["system:authenticated"]);
    assert_eq!(names(&reached(&docs, &user, &ns)), ["validate.draguard.dev"]);

    let stored = added["oldObject"].clone();
    let edit = |change: fn(&mut Value)| {
        let mut request = user.clone();
        let mut object = stored.clone();
        change(&mut object);
        request["object"] = object;
        request["oldObject"] = stored.clone();
        request
    };
    let not_sent: [Edit; 5] = [
        ("a finalizer added", |o: &mut Value| {
            o["metadata"]["finalizers"] = json!(["example.com/hold"])
        }),
        ("a label changed", |o: &mut Value| {
            o["metadata"]["labels"]["app"] = json!("other")
        }),
        ("an annotation added", |o: &mut Value| {
            o["metadata"]["annotations"] = json!({"a": "b"})
        }),
        ("the image changed", |o: &mut Value| {
            o["spec"]["containers"][0]["image"] = json!("busybox:2")
        }),
        ("nothing changed", |_: &mut Value| {}),
    ];
    for (what, change) in &not_sent {
        assert_eq!(
            names(&reached(&docs, &edit(*change), &ns)),
            Vec::<&str>::new(),
            "{what}"
        );
    }
    // The finalizer removed (the controller releasing its hold).
    let mut held = stored.clone();
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let mut released = user.clone();
    released["oldObject"] = held;
    released["object"] = stored.clone();
    assert_eq!(
        names(&reached(&docs, &released, &ns)),
        Vec::<&str>::new(),
        "a finalizer removed"
    );

    let sent: [Edit; 5] = [
        ("a toleration's seconds changed", |o: &mut Value| {
            let tolerations = o["spec"]["tolerations"]
                .as_array_mut()
                .expect("the stored Pod's tolerations");
            tolerations[0]["tolerationSeconds"] = json!(7);
        }),
        ("the tolerations removed", |o: &mut Value| {
            o["spec"].as_object_mut().expect("spec").remove("tolerations");
        }),
        ("a topology spread added", |o: &mut Value| {
            o["spec"]["topologySpreadConstraints"] =
                json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]);
        }),
        ("a resource claim added", |o: &mut Value| {
            o["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": "gpu"}]);
        }),
        ("a container's claims changed", |o: &mut Value| {
            o["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}, {"name": "nic"}]);
        }),
    ];
    for (what, change) in &sent {
        assert_eq!(
            names(&reached(&docs, &edit(*change), &ns)),
            ["validate.draguard.dev"],
            "{what}"
        );
    }
    // A Pod CREATE is always judged, and mutated.
    let create = with_user(&fixture("pod-create-4.json"), "alice", &["system:authenticated"]);
    assert_eq!(
        names(&reached(&docs, &create, &ns)),
        ["validate.draguard.dev", "mutate.draguard.dev"]
    );
}

/// Taints draguard would stamp are sent to /mutate (its own answer says
/// which), and nothing else.
#[test]
fn device_taints_are_sent_to_mutate_only_when_draguard_would_stamp_them() {
    let Some(docs) = render(&overlay("base")) else { return };
    let none = Value::Null;
    let mutating = |request: &Value| -> bool {
        reached(&docs, request, &none)
            .iter()
            .any(|(c, _)| c["kind"] == "MutatingWebhookConfiguration")
    };
    let slice = fixture("resourceslice-create-3.json");
    assert!(
        !mutating(&slice) && draguard_patches(&slice) == 0,
        "stamped by the apiserver"
    );
    let mut untimed = slice.clone();
    untimed["object"]["spec"]["devices"][0]["taints"][0]
        .as_object_mut()
        .expect("a taint")
        .remove("timeAdded");
    assert!(
        mutating(&untimed) && draguard_patches(&untimed) == 1,
        "a taint without timeAdded"
    );

    let rule = fixture("devicetaintrule-update-1.json");
    assert_ne!(
        rule["object"]["spec"]["taint"]["effect"],
        rule["oldObject"]["spec"]["taint"]["effect"]
    );
    assert!(
        mutating(&rule) && draguard_patches(&rule) == 1,
        "an effect change renews timeAdded"
    );
    let mut relabelled = rule.clone();
    relabelled["object"]["spec"] = rule["oldObject"]["spec"].clone();
    relabelled["object"]["metadata"]["labels"] = json!({"team": "infra"});
    assert!(
        !mutating(&relabelled) && draguard_patches(&relabelled) == 0,
        "a label edit"
    );
    let mut untimed_rule = fixture("devicetaintrule-create-5.json");
    untimed_rule["object"]["spec"]["taint"]
        .as_object_mut()
        .expect("taint")
        .remove("timeAdded");
    assert!(mutating(&untimed_rule) && draguard_patches(&untimed_rule) == 1);
}

/// A Namespace write reaches exactly one Namespace entry when it touches a
/// guarded key: the fail-closed one for tenants, the fail-open one for the
/// control plane's namespaces and system:masters (so an administrator can
/// label namespaces while draguard is down); none otherwise.
#[test]
fn namespace_writes_reach_one_guard_and_masters_never_the_fail_closed_one() {
    let Some(docs) = render(&overlay("base")) else { return };
    let draguard_ns = deployment(&docs)["metadata"]["namespace"]
        .as_str()
        .expect("namespace")
        .to_owned();
    let ns = |name: &str, labels: Value| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}});
    let write = |user: &str, groups: &[&str], sub: Option<&str>, object: Value, old: Value| {
        json!({
            "uid": "u", "operation": if old.is_null() { "CREATE" } else { "UPDATE" },
            "kind": {"group": "", "version": "v1", "kind": "Namespace"},
            "resource": {"group": "", "version": "v1", "resource": "namespaces"},
            "subResource": sub,
            "name": object["metadata"]["name"],
            "namespace": if sub.is_some() { object["metadata"]["name"].clone() } else { Value::Null },
            "userInfo": {"username": user, "groups": groups},
            "object": object, "oldObject": old,
        })
    };
    const CLOSED: &str = "namespaces.validate.draguard.dev";
    const OPEN: &str = "namespaces-fail-open.validate.draguard.dev";
    let tenant = ["system:authenticated"];
    let masters = ["system:masters", "system:authenticated"];
    let ignored = json!({"draguard.dev/ignore": "true"});
    let plain = json!({"team": "a"});
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "a tenant creates an ignored namespace",
            write(
                "alice",
                &tenant,
                None,
                ns("calico-system", ignored.clone()),
                Value::Null,
            ),
            vec![CLOSED],
        ),
        (
            "an administrator does, while draguard is down",
            write(
                "kubernetes-admin",
                &masters,
                None,
                ns("calico-system", ignored.clone()),
                Value::Null,
            ),
            vec![OPEN],
        ),
        (
            "an administrator labels one",
            write(
                "kubernetes-admin",
                &masters,
                None,
                ns("calico-system", ignored.clone()),
                ns("calico-system", plain.clone()),
            ),
            vec![OPEN],
        ),
        (
            "a plain create",
            write("alice", &tenant, None, ns("ml", plain.clone()), Value::Null),
            vec![],
        ),
        (
            "admin access through status",
            write(
                "alice",
                &tenant,
                Some("status"),
                ns("ml", json!({"resource.kubernetes.io/admin-access": "true"})),
                ns("ml", plain.clone()),
            ),
            vec![CLOSED],
        ),
        (
            "admin access through finalize",
            write(
                "alice",
                &tenant,
                Some("finalize"),
                ns("ml", json!({"resource.kubernetes.io/admin-access": "true"})),
                ns("ml", plain.clone()),
            ),
            vec![CLOSED],
        ),
        (
            "the namespace controller finalizing",
            write(
                "system:serviceaccount:kube-system:namespace-controller",
                &tenant,
                Some("finalize"),
                ns("ml", plain.clone()),
                ns("ml", plain.clone()),
            ),
            vec![],
        ),
        (
            "kube-system relabelled by a tenant",
            write(
                "alice",
                &tenant,
                None,
                ns("kube-system", ignored.clone()),
                ns("kube-system", json!({})),
            ),
            vec![OPEN],
        ),
        (
            "kube-node-lease through status",
            write(
                "alice",
                &tenant,
                Some("status"),
                ns("kube-node-lease", ignored.clone()),
                ns("kube-node-lease", json!({})),
            ),
            vec![OPEN],
        ),
        (
            "draguard's own namespace losing its label",
            write(
                "alice",
                &tenant,
                None,
                ns(&draguard_ns, json!({})),
                ns(&draguard_ns, ignored.clone()),
            ),
            vec![OPEN],
        ),
    ];
    for (what, request, want) in cases {
        let stored = request["oldObject"].clone();
        let got = reached(&docs, &request, &stored);
        assert_eq!(names(&got), want, "{what}");
        assert!(worst_wait(&got) <= 3, "{what}");
    }
}

/// A workload UPDATE is sent when its pod template's spec changes, or when
/// a user changes its spec or labels (a scale: to warn of the Pods it
/// would stamp); a controller's annotation, or a controlled workload's
/// scale, never waits on draguard.
#[test]
fn workload_updates_are_sent_when_the_template_or_a_users_spec_or_labels_change() {
    let Some(docs) = render(&overlay("base")) else { return };
    let ns = json!({"metadata": {"name": "ml"}});
    let template = json!({"metadata": {"labels": {"app": "w"}}, "spec": {
        "containers": [{"name": "main", "image": "trainer:1"}],
        "tolerations": [{"key": "example.com/gpu", "operator": "Exists"}]}});
    let cases = [
        (
            "apps",
            "deployments",
            "Deployment",
            json!({"replicas": 2, "template": template}),
        ),
        (
            "batch",
            "cronjobs",
            "CronJob",
            json!({"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}}),
        ),
    ];
    for (group, plural, kind, spec) in cases {
        let object = json!({"apiVersion": format!("{group}/v1"), "kind": kind,
                            "metadata": {"name": "w", "namespace": "ml"}, "spec": spec});
        let write = |new: &Value, old: &Value| {
            json!({
                "uid": "u", "operation": if old.is_null() { "CREATE" } else { "UPDATE" },
                "kind": {"group": group, "version": "v1", "kind": kind},
                "resource": {"group": group, "version": "v1", "resource": plural},
                "name": "w", "namespace": "ml",
                "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
                "object": new, "oldObject": old,
            })
        };
        let sent = |new: &Value, old: &Value| names(&reached(&docs, &write(new, old), &ns));
        const WORKLOADS: &str = "workloads.validate.draguard.dev";
        assert_eq!(sent(&object, &Value::Null), [WORKLOADS], "{kind} CREATE");
        let mut annotated = object.clone();
        annotated["metadata"]["annotations"] = json!({"deployment.kubernetes.io/revision": "2"});
        assert_eq!(sent(&annotated, &object), Vec::<&str>::new(), "{kind}: an annotation");
        let mut scaled = annotated.clone();
        scaled["spec"]["parallelism"] = json!(5);
        assert_eq!(sent(&scaled, &object), [WORKLOADS], "{kind}: a scale");
        let mut labelled = object.clone();
        labelled["metadata"]["labels"] = json!({"tier": "batch"});
        assert_eq!(sent(&labelled, &object), [WORKLOADS], "{kind}: a label");
        // A CronJob's Job, a Deployment's ReplicaSet: scaled by controllers.
        let controlled = |mut o: Value| {
            o["metadata"]["ownerReferences"] =
                json!([{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u", "controller": true}]);
            o
        };
        assert_eq!(
            sent(&controlled(scaled.clone()), &controlled(object.clone())),
            Vec::<&str>::new(),
            "{kind}: a controlled workload's scale"
        );
        let mut tolerating = object.clone();
        let pointer = if kind == "CronJob" {
            "/spec/jobTemplate/spec/template/spec/tolerations"
        } else {
            "/spec/template/spec/tolerations"
        };
        *tolerating.pointer_mut(pointer).expect("tolerations") =
            json!([{"key": "example.com/tpu", "operator": "Exists"}]);
        assert_eq!(sent(&tolerating, &object), [WORKLOADS], "{kind}: a toleration changed");
    }
}

/// A scale-down of a Deployment, ReplicaSet or StatefulSet stamps no Pod
/// and gets no warning, however it is made (`kubectl apply` of fewer
/// replicas, a patch of `spec.replicas`, with a label too): it is not
/// sent. A rollout with fewer replicas, a scale-down with another field of
/// the spec, and a Job's lower parallelism are.
#[test]
fn workload_scale_downs_are_not_sent() {
    let Some(docs) = render(&overlay("base")) else { return };
    let ns = json!({"metadata": {"name": "ml"}});
    const WORKLOADS: &str = "workloads.validate.draguard.dev";
    let template = json!({"metadata": {"labels": {"app": "w"}}, "spec": {
        "containers": [{"name": "main", "image": "trainer:1"}]}});
    for (group, plural, kind, count) in [
        ("apps", "deployments", "Deployment", "replicas"),
        ("apps", "replicasets", "ReplicaSet", "replicas"),
        ("apps", "statefulsets", "StatefulSet", "replicas"),
        ("batch", "jobs", "Job", "parallelism"),
    ] {
        let at = |n: i64| {
            json!({"apiVersion": format!("{group}/v1"), "kind": kind,
                   "metadata": {"name": "w", "namespace": "ml", "labels": {"app": "w"}},
                   "spec": {count: n, "template": template, "selector": {"matchLabels": {"app": "w"}}}})
        };
        let sent = |new: &Value, old: &Value| {
            let request = json!({
                "uid": "u", "operation": "UPDATE",
                "kind": {"group": group, "version": "v1", "kind": kind},
                "resource": {"group": group, "version": "v1", "resource": plural},
                "name": "w", "namespace": "ml",
                "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
                "object": new, "oldObject": old,
            });
            names(&reached(&docs, &request, &ns))
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        let quiet = if kind == "Job" {
            vec![WORKLOADS.to_owned()]
        } else {
            Vec::new()
        };
        assert_eq!(sent(&at(1), &at(3)), quiet, "{kind}: 3 -> 1");
        assert_eq!(sent(&at(0), &at(1)), quiet, "{kind}: 1 -> 0");
        let mut labelled = at(1);
        labelled["metadata"]["labels"]["tier"] = json!("batch");
        assert_eq!(sent(&labelled, &at(3)), quiet, "{kind}: 3 -> 1 and a label");
        if count == "replicas" {
            let mut unset = at(1);
            unset["spec"].as_object_mut().map(|s| s.remove("replicas"));
            assert_eq!(sent(&unset, &at(2)), quiet, "{kind}: 2 -> unset (1)");
            assert_eq!(sent(&at(0), &unset), quiet, "{kind}: unset (1) -> 0");
        }
        assert_eq!(sent(&at(3), &at(1)), [WORKLOADS], "{kind}: 1 -> 3");
        assert_eq!(sent(&labelled, &at(1)), [WORKLOADS], "{kind}: a label");
        let mut restarted = at(1);
        restarted["spec"]["template"]["metadata"]["annotations"] =
            json!({"kubectl.kubernetes.io/restartedAt": "2026-11-28T09:00:00Z"});
        assert_eq!(sent(&restarted, &at(3)), [WORKLOADS], "{kind}: a rollout, 3 -> 1");
        let mut slower = at(1);
        slower["spec"]["minReadySeconds"] = json!(10);
        assert_eq!(sent(&slower, &at(3)), [WORKLOADS], "{kind}: 3 -> 1 and minReadySeconds");
        let mut dropped = at(3);
        dropped["spec"]["minReadySeconds"] = json!(10);
        assert_eq!(
            sent(&at(1), &dropped),
            [WORKLOADS],
            "{kind}: 3 -> 1, minReadySeconds removed"
        );
    }
}

/// A write of a workload's `scale` subresource (`kubectl scale`, the
/// HorizontalPodAutoscaler) reaches draguard only when a user scales up:
/// the HPA and every controller, and a scale-down, never wait on it. The
/// request is what an apiserver sends for the subresource (kubernetes
/// v1.36 staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/
/// request/admissionreview.go: `kind` is autoscaling/v1 Scale, `resource`
/// the workload's, `subResource` scale).
#[test]
fn scale_writes_reach_draguard_only_for_users_scale_ups() {
    let Some(docs) = render(&overlay("base")) else { return };
    let ns = json!({"metadata": {"name": "ml"}});
    let scale = |replicas: Option<i64>| {
        let mut spec = json!({});
        if let Some(n) = replicas {
            spec["replicas"] = json!(n);
        }
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "w", "namespace": "ml"}, "spec": spec, "status": {"replicas": 1}})
    };
    for plural in ["deployments", "replicasets", "statefulsets"] {
        let write = |user: &str, new: Option<i64>, old: Option<i64>| {
            json!({
                "uid": "u", "operation": "UPDATE",
                "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                "resource": {"group": "apps", "version": "v1", "resource": plural},
                "subResource": "scale",
                "requestKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                "name": "w", "namespace": "ml",
                "userInfo": {"username": user, "groups": ["system:authenticated"]},
                "object": scale(new), "oldObject": scale(old),
            })
        };
        let sent = |user: &str, new: Option<i64>, old: Option<i64>| {
            let reached = reached(&docs, &write(user, new, old), &ns);
            assert!(worst_wait(&reached) <= 1, "{plural}: {:?}", names(&reached));
            names(&reached).into_iter().map(str::to_owned).collect::<Vec<_>>()
        };
        assert_eq!(sent(ADMIN, Some(5), Some(1)), [SCALE], "{plural}: a user's scale-up");
        assert_eq!(sent(ADMIN, Some(3), None), [SCALE], "{plural}: up from zero (omitted)");
        for (new, old) in [(Some(1), Some(5)), (Some(3), Some(3)), (None, Some(2))] {
            assert!(sent(ADMIN, new, old).is_empty(), "{plural}: {old:?} -> {new:?}");
        }
        for controller in [
            "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
            CONTROLLER_MANAGER,
            "system:serviceaccount:kube-system:deployment-controller",
        ] {
            assert!(
                sent(controller, Some(5), Some(1)).is_empty(),
                "{plural}: {controller} scales without draguard"
            );
        }
    }
    // Subresources of kinds without a scale, and the workloads' own
    // writes, are not this entry's.
    let entry = validating(&docs, SCALE);
    assert_eq!(
        resources(entry),
        ["deployments/scale", "replicasets/scale", "statefulsets/scale"]
    );
    assert_eq!(entry["rules"][0]["operations"], json!(["UPDATE"]));
    // It reads each workload it is sent, and nothing more.
    let role = find(&docs, "ClusterRole", "draguard-workloads").expect("the workloads ClusterRole");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets"], "verbs": ["get"]}])
    );
    let binding = find(&docs, "ClusterRoleBinding", "draguard-workloads").expect("its binding");
    assert_eq!(binding["roleRef"]["name"], "draguard-workloads");
    assert_eq!(binding["subjects"][0]["name"], "draguard");
}

/// A claim or template CREATE costs one webhook call once draguard has
/// written its managed condition (src/controllers/mutate_conditions.rs)
/// into mutate.draguard.dev, where no policy in force has device
/// defaults: two before. With the shipped policies (Pod defaults in `ml`,
/// `ml-*` and `team=ml` namespaces; no device defaults), every claim and
/// template CREATE the apiserver sent reaches the validating entry alone;
/// a Pod reaches /mutate too only where a policy adds its defaults (`ml`
/// by name; `team=ml` namespaces through the selector entry draguard adds,
/// src/controllers/mutate_selector_entries.rs).
#[test]
fn a_create_no_policy_defaults_reaches_one_entry_with_the_managed_condition() {
    let Some(docs) = render(&overlay("base")) else {
        return;
    };
    let policies = shipped_policies();
    let creates = mutate_creates();
    assert!(creates.len() >= 30, "{}", creates.len());
    let before = create_calls(&docs, &creates, "default", &[], &policies);
    assert!(before.iter().all(|(_, n, _)| *n == 2), "before: {before:?}");
    let docs = with_managed_condition(docs, &policies);
    for ns in ["default", "ml"] {
        for (file, n, patches) in create_calls(&docs, &creates, ns, &[], &policies) {
            let want = if file.starts_with("pod-") && ns == "ml" { 2 } else { 1 };
            assert_eq!(n, want, "{file} in {ns}");
            assert!(
                patches == 0 || want == 2,
                "{file} in {ns}: {patches} patch operations, not sent"
            );
        }
    }
    let after = create_calls(&docs, &creates, "default", &[], &policies);
    eprintln!(
        "webhook calls for {} claim/template/Pod CREATEs in `default`: {} before, {} after",
        creates.len(),
        before.iter().map(|(_, n, _)| n).sum::<usize>(),
        after.iter().map(|(_, n, _)| n).sum::<usize>()
    );
}

/// The webhook calls the apiserver's claim, template and Pod CREATEs cost,
/// per namespace, without and with the managed condition and selector
/// entries, for the shipped policies and for the same policies selecting
/// by names only (no `team=ml` selector), and for the shipped policies
/// without the one that refuses the ML default outside `ml-*`: a CREATE
/// that needs no mutation costs one call, in every namespace, a labelled
/// one too (`gpu-team`, labelled team=ml, is selected by the label alone,
/// through the selector entry).
/// `scripts/webhook-calls.sh` prints the table.
#[test]
fn webhook_calls_per_create_by_namespace_and_policy_set() {
    let Some(docs) = render(&overlay("base")) else {
        return;
    };
    let shipped = shipped_policies();
    let mut by_name = shipped.clone();
    for loaded in &mut by_name.policies {
        loaded.policy.spec.namespaces.selector = None;
    }
    // Without the policy that refuses the ML default outside `ml` and
    // `ml-*`, a `team=ml` namespace by another name gets it.
    let mut label_defaults = shipped.clone();
    label_defaults
        .policies
        .retain(|l| l.policy.metadata.name != "dedicated-ml-nodes-are-ml-only");
    assert_eq!(label_defaults.policies.len() + 1, shipped.policies.len());
    let creates = mutate_creates();
    let pods = creates.iter().filter(|(f, _)| f.starts_with("pod-")).count();
    let n = creates.len();
    assert!(n >= 30 && pods > 0, "{n} CREATEs, {pods} Pods");
    let total = |calls: &[(String, usize, usize)]| calls.iter().map(|(_, n, _)| n).sum::<usize>();
    let mut table = vec![format!(
        "{n} claim/template/Pod CREATEs ({pods} Pods) the apiserver sent, webhook calls before -> after the managed condition and selector entries:"
    )];
    let team_ml: &[(&str, &str)] = &[("team", "ml")];
    for (name, policies, expected) in [
        (
            "policies/ (names, globs, a team=ml selector, ml-sandbox excluded)",
            &shipped,
            [
                ("default", &[][..], n),
                ("ml", &[], n + pods),
                ("ml-train", &[], n + pods),
                ("ml-sandbox", team_ml, n),
                // Selected by its label, but the ML default is refused
                // there (dedicated-ml-nodes-are-ml-only): nothing to add.
                ("gpu-team", team_ml, n),
            ],
        ),
        (
            "policies/ but dedicated-ml-nodes-are-ml-only",
            &label_defaults,
            [
                ("default", &[][..], n),
                ("ml", &[], n + pods),
                ("ml-train", &[], n + pods),
                ("ml-sandbox", team_ml, n),
                ("gpu-team", team_ml, n + pods),
            ],
        ),
        (
            "policies/ selecting by names and globs only",
            &by_name,
            [
                ("default", &[][..], n),
                ("ml", &[], n + pods),
                ("ml-train", &[], n + pods),
                ("ml-sandbox", team_ml, n),
                ("gpu-team", team_ml, n),
            ],
        ),
    ] {
        let managed = with_managed_condition(docs.clone(), policies);
        table.push(format!("  {name}:"));
        for (ns, labels, want) in expected {
            let before = create_calls(&docs, &creates, ns, labels, policies);
            let after = create_calls(&managed, &creates, ns, labels, policies);
            for (file, reached, patches) in &after {
                assert_eq!(
                    *reached,
                    1 + usize::from(*patches > 0),
                    "{name}: {file} in {ns} gets {patches} patch operations"
                );
            }
            assert_eq!(total(&before), 2 * n, "{name} in {ns}, before");
            assert_eq!(total(&after), want, "{name} in {ns}, after");
            let shown = if labels.is_empty() {
                ns.to_owned()
            } else {
                format!("{ns} (team=ml)")
            };
            table.push(format!("    {shown:<20} {} -> {}", total(&before), total(&after)));
        }
    }
    eprintln!("{}", table.join("\n"));
}

/// With the selector entries in place, a hung replica still costs a claim,
/// template or Pod CREATE at most 3 s: it reaches one validating entry
/// (2 s) and at most one mutating entry (1 s), in a namespace selected by
/// name, by label, by both, or by none.
#[test]
fn with_the_selector_entries_a_hung_replica_still_costs_a_create_at_most_3_s() {
    let Some(docs) = render(&overlay("base")) else {
        return;
    };
    let mut policies = shipped_policies();
    policies
        .policies
        .retain(|l| l.policy.metadata.name != "dedicated-ml-nodes-are-ml-only");
    let managed = with_managed_condition(docs, &policies);
    let selector_entries = webhooks(&managed)
        .into_iter()
        .filter(|(_, w)| {
            w["name"]
                .as_str()
                .is_some_and(|n| n.ends_with(".selector.mutate.draguard.dev"))
        })
        .count();
    assert_eq!(selector_entries, 1, "the team=ml selector's entry");
    let creates = mutate_creates();
    let namespaces: [(&str, &[(&str, &str)]); 4] = [
        ("default", &[]),
        ("ml", &[("team", "ml")]),
        ("gpu-team", &[("team", "ml")]),
        ("ml-sandbox", &[("team", "ml")]),
    ];
    for (ns, labels) in namespaces {
        let mut all: BTreeMap<&str, &str> = labels.iter().copied().collect();
        all.insert("kubernetes.io/metadata.name", ns);
        let stored = json!({"metadata": {"name": ns, "labels": all}});
        for (file, request) in &creates {
            let mut request = request.clone();
            request["namespace"] = json!(ns);
            request["object"]["metadata"]["namespace"] = json!(ns);
            let reached = reached_with_namespace(&managed, &request, &stored);
            let mutating = reached
                .iter()
                .filter(|(c, _)| c["kind"] == "MutatingWebhookConfiguration")
                .count();
            assert!(
                worst_wait(&reached) <= 3 && mutating <= 1,
                "{file} in {ns}: {:?} wait {} s",
                names(&reached),
                worst_wait(&reached)
            );
        }
    }
}

fn shipped_policies() -> draguard::policy::PolicySet {
    draguard::policy_files::load::load_dir(&Path::new(ROOT).join("policies"))
        .expect("the shipped policies")
        .set
}

/// The claim, template and Pod CREATEs the apiserver sent to /mutate.
fn mutate_creates() -> Vec<(String, Value)> {
    apiserver_requests()
        .into_iter()
        .filter(|(file, endpoint, request)| {
            endpoint.starts_with("/mutate")
                && request["operation"] == "CREATE"
                && ["pod-", "resourceclaim-", "resourceclaimtemplate-"]
                    .iter()
                    .any(|k| file.starts_with(k))
        })
        .map(|(file, _, request)| (file, request))
        .collect()
}

/// `docs` with what `serve --manage-webhook-certs` writes into the
/// MutatingWebhookConfiguration for `policies`: the condition of
/// mutate.draguard.dev and the selector entries beside it, the plan
/// applied as the apiserver applies a JSON patch.
fn with_managed_condition(mut docs: Vec<Value>, policies: &draguard::policy::PolicySet) -> Vec<Value> {
    use draguard::controllers::mutate_selector_entries::{managed, plan};
    let desired = managed(policies, false);
    apply_plan::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>(
        &mut docs,
        "MutatingWebhookConfiguration",
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

/// Applies to the configuration of `kind` in `docs` the JSON patch that
/// `plan` makes of it, as the apiserver applies serve's patch; the plan
/// must not be empty (the manifests hold no managed state).
fn apply_plan<C: serde::de::DeserializeOwned>(docs: &mut [Value], kind: &str, plan: impl FnOnce(&C) -> Vec<Value>) {
    let config = docs
        .iter_mut()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("the {kind}"));
    let typed: C = serde_json::from_value(config.clone()).unwrap_or_else(|e| panic!("a {kind}: {e}"));
    let ops = plan(&typed);
    assert!(!ops.is_empty(), "the manifests hold no managed state yet");
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops)).expect("a JSON patch");
    json_patch::patch(config, &patch).expect("the plan applies");
}

/// Each CREATE moved into `ns`, labelled `labels` (request and object, as
/// the apiserver sends it): the entries it reaches and the patch
/// operations draguard's `/mutate` would answer with `policies`.
fn create_calls(
    docs: &[Value],
    creates: &[(String, Value)],
    ns: &str,
    labels: &[(&str, &str)],
    policies: &draguard::policy::PolicySet,
) -> Vec<(String, usize, usize)> {
    let mut all: BTreeMap<&str, &str> = labels.iter().copied().collect();
    all.insert("kubernetes.io/metadata.name", ns);
    let view = draguard::view::StaticView::default()
        .with_namespace(ns, &all.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
    creates
        .iter()
        .map(|(file, request)| {
            let mut request = request.clone();
            request["namespace"] = json!(ns);
            request["object"]["metadata"]["namespace"] = json!(ns);
            let stored = json!({"metadata": {"name": ns, "labels": all}});
            let reached = reached_with_namespace(docs, &request, &stored);
            (
                file.clone(),
                reached.len(),
                draguard_patches_in(&request, policies, &view),
            )
        })
        .collect()
}

/// `expression` compiled, once per thread: the routing tests evaluate the
/// same few conditions over thousands of writes.
fn compiled(expression: &str) -> std::rc::Rc<Program> {
    thread_local! {
        static PROGRAMS: std::cell::RefCell<BTreeMap<String, std::rc::Rc<Program>>> = Default::default();
    }
    PROGRAMS.with_borrow_mut(|programs| {
        programs
            .entry(expression.to_owned())
            .or_insert_with(|| {
                std::rc::Rc::new(Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}")))
            })
            .clone()
    })
}

/// [`reached`], with `namespaceObject` declared as the apiserver declares
/// it for a webhook's matchConditions (the managed condition reads it).
fn reached_with_namespace<'a>(docs: &'a [Value], request: &Value, stored: &Value) -> Vec<(&'a Value, &'a Value)> {
    let labels = selector_labels(request, stored);
    let sent = |expression: &str| {
        let program = compiled(expression);
        let mut ctx = Context::default();
        // The apiserver binds no namespace for a webhook's matchConditions
        // (the managed condition's doc comment): null, as there.
        let variables = [request, &request["object"], &request["oldObject"], &Value::Null];
        for (name, value) in MATCH_CONDITION_VARIABLES
            .into_iter()
            .chain(["namespaceObject"])
            .zip(variables)
        {
            ctx.add_variable_from_value(name, kube_cel::cel::to_value(value).expect("CEL value"));
        }
        match program.execute(&ctx) {
            Ok(CelValue::Bool(b)) => b,
            other => panic!("{expression}: {other:?}"),
        }
    };
    webhooks(docs)
        .into_iter()
        .filter(|(_, w)| {
            w["rules"]
                .as_array()
                .expect("rules")
                .iter()
                .any(|r| rule_matches(r, request))
        })
        .filter(|(_, w)| {
            let borrowed: Option<BTreeMap<&str, &str>> = labels
                .as_ref()
                .map(|l| l.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect());
            borrowed.is_none_or(|l| selects(&w["namespaceSelector"], &l))
        })
        .filter(|(_, w)| {
            w["matchConditions"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|c| sent(c["expression"].as_str().expect("expression")))
        })
        .collect()
}

#[path = "deploy_manifests/validate_routing.rs"]
mod validate_routing;
