//! The whole output for small policies, exactly; and the compiled
//! verdicts, evaluated as CEL, against `enforce::judge` itself.

use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::{Value, json};

use super::*;
use crate::policy::enforce::TolerationTarget;
use crate::policy::load::parse;
use crate::policy::model::Toleration;

fn set(yaml: &str) -> PolicySet {
    PolicySet {
        policies: parse("p.yaml", yaml).expect("valid policies"),
        ..Default::default()
    }
}

const ML: &str = "apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: ml}
spec:
  mode: Warn
  namespaces: {names: [ml]}
  exempt: {groups: [sre]}
  pods:
    allow: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]
  message: ask
";

#[test]
fn a_pod_allow_list_compiles_to_one_policy_and_binding() {
    let out = compile(&set(ML), &Options::default()).expect("compiles");
    let yaml = to_yaml(&out.objects).expect("yaml");
    let expected = include_str!("testdata/ml.yaml");
    assert_eq!(yaml, expected);
    assert_eq!(out.policies.len(), 1);
    assert_eq!(
        out.policies[0].compiled,
        vec!["draguard-ml-pods".to_owned(), "draguard-ml-workloads".to_owned()]
    );
}

#[test]
fn too_old_a_kubernetes_is_refused() {
    let options = Options {
        minor: 31,
        ..Options::default()
    };
    assert_eq!(
        compile(&set(ML), &options).err().map(|e| e.to_string()).as_deref(),
        Some("Kubernetes 1.31 is too old: compiled policies need 1.32 or later (two-variable CEL comprehensions)")
    );
}

#[test]
fn what_stays_is_explained() {
    let long = "n".repeat(240);
    let s = set(&format!(
        "apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {{name: {long}}}
spec: {{pods: {{deny: [{{key: k, operator: Exists}}]}}}}
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {{name: q}}
spec:
  quota: {{claims: 3}}
  devices:
    deny: [{{key: k, operator: Exists}}]
    defaults: [{{key: d, operator: Exists}}]
"
    ));
    let out = compile(&s, &Options::default()).expect("compiles");
    let text = explain(&out);
    assert!(text.starts_with(&format!(
        "{long} (p.yaml):
  compiled: nothing (no pods or devices allow/deny list)
  stays in the webhook: everything: the name \"{long}\" cannot name a ValidatingAdmissionPolicy (a DNS subdomain of at most 234 characters)
  stays in the webhook: large lists and workload warnings: "
    )), "{text}");
    assert!(text.contains(
        "q (p.yaml):
  compiled: draguard-q-devices
  stays in the webhook: devices.defaults: a default per toleration list of every request and subrequest, up to each list's 16, with a warning for each left out: not compiled yet
  stays in the webhook: quota: counting a namespace's claims and devices needs the other claims, which a policy never sees
"
    ), "{text}");
    assert_eq!(out.objects.len(), 2);
}

/// The policy's validation expression, evaluated as CEL on `object`,
/// created by `alice` in namespace `default` (labels `team: ml`).
fn admits(program: &Program, object: &Value, resource: &str) -> bool {
    admits_request(
        program,
        object,
        json!({"resource": {"resource": resource}, "operation": "CREATE", "namespace": "default",
               "userInfo": {"username": "alice", "groups": ["system:authenticated"]}}),
    )
}

fn program(expression: &str) -> Program {
    Program::compile(expression).unwrap_or_else(|e| panic!("{expression}: {e}"))
}

fn admits_request(program: &Program, object: &Value, request: Value) -> bool {
    let mut ctx = Context::default();
    // Every object the apiserver admits has its metadata.
    let mut object = object.clone();
    if let Some(o) = object.as_object_mut() {
        o.entry("metadata").or_insert_with(|| json!({"name": "x"}));
    }
    ctx.add_variable_from_value("object", kube_cel::cel::to_value(&object).expect("CEL value"));
    ctx.add_variable_from_value(
        "namespaceObject",
        kube_cel::cel::to_value(json!({"metadata": {"name": request["namespace"], "labels": {"team": "ml"}}}))
            .expect("CEL value"),
    );
    ctx.add_variable_from_value("request", kube_cel::cel::to_value(&request).expect("CEL value"));
    // The drivers' configs' errors: none (`driver_configs_are_judge_configs`
    // judges them).
    ctx.add_variable_from_value(
        "variables",
        kube_cel::cel::to_value(json!({"configErrors": []})).expect("CEL value"),
    );
    match program.execute(&ctx) {
        Ok(CelValue::Bool(b)) => b,
        other => panic!("the expression does not give a bool: {other:?}"),
    }
}

fn tolerations() -> Vec<Toleration> {
    let keys = [
        "",
        "k",
        "dedicated",
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ];
    let ops = ["", "Equal", "Exists"];
    let values = ["", "ml", "v"];
    let effects = ["", "NoSchedule", "NoExecute"];
    let seconds = [None, Some(-1), Some(0), Some(60), Some(300), Some(301)];
    let mut out = Vec::new();
    for k in keys {
        for o in ops {
            for v in values {
                for e in effects {
                    for s in seconds {
                        out.push(Toleration {
                            key: k.into(),
                            operator: o.into(),
                            value: v.into(),
                            effect: e.into(),
                            toleration_seconds: s,
                        });
                    }
                }
            }
        }
    }
    out
}

/// Every policy entry shape and toleration shape: the compiled Pod and
/// claim expressions admit exactly what `enforce::rejects` admits.
#[test]
fn compiled_verdicts_are_judge_s() {
    let entries = "[{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}, {key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 60}, {key: k, value: v}, {operator: Exists, effect: NoSchedule}]";
    let policies = set(&format!(
        "apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {{name: allow}}
spec: {{pods: {{allow: {entries}}}, devices: {{allow: {entries}}}}}
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {{name: deny}}
spec: {{pods: {{deny: {entries}}}, devices: {{deny: {entries}}}}}
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {{name: strict}}
spec: {{pods: {{allowPlatformDefaults: false, allow: [{{key: k, operator: Exists}}], deny: [{{key: k, value: v}}]}}}}
"
    ));
    let out = compile(&policies, &Options::default()).expect("compiles");
    let policy = |name: &str| -> &Value {
        out.objects
            .iter()
            .find(|o| o["kind"] == "ValidatingAdmissionPolicy" && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    let mut checked = 0;
    for loaded in &policies.policies {
        let p = &loaded.policy;
        for (target, name) in [
            (TolerationTarget::Pod, "pods"),
            (TolerationTarget::Pod, "workloads"),
            (TolerationTarget::Device, "devices"),
        ] {
            let Some(compiled) = out
                .objects
                .iter()
                .find(|o| o["metadata"]["name"] == format!("draguard-{}-{name}", p.metadata.name))
                .map(|_| policy(&format!("draguard-{}-{name}", p.metadata.name)))
            else {
                continue;
            };
            let programs: Vec<Program> = compiled["spec"]["validations"]
                .as_array()
                .into_iter()
                .flatten()
                // The tolerations' validations (the drivers' configs are
                // judged by `driver_configs_are_judge_configs`).
                .filter(|v| v["reason"] == "Forbidden")
                .map(|v| program(v["expression"].as_str().expect("expression")))
                .collect();
            for t in tolerations() {
                let mut as_json = serde_json::to_value(&t).expect("json");
                if let Some(o) = as_json.as_object_mut() {
                    o.retain(|_, v| v != "");
                }
                let want = !crate::policy::enforce::rejects(p, target, &t);
                let cases: Vec<(Value, &str, usize)> = match (target, name) {
                    (TolerationTarget::Pod, "pods") => vec![(json!({"spec": {"tolerations": [as_json]}}), "pods", 0)],
                    (TolerationTarget::Pod, _) => vec![
                        (
                            json!({"spec": {"template": {"spec": {"tolerations": [as_json]}}}}),
                            "deployments",
                            0,
                        ),
                        (
                            json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"tolerations": [as_json]}}}}}}),
                            "cronjobs",
                            1,
                        ),
                    ],
                    (TolerationTarget::Device, _) => vec![
                        (
                            json!({"spec": {"devices": {"requests": [{"exactly": {"tolerations": [as_json]}}]}}}),
                            "resourceclaims",
                            0,
                        ),
                        (
                            json!({"spec": {"devices": {"requests": [{"firstAvailable": [{}, {"tolerations": [as_json]}]}]}}}),
                            "resourceclaims",
                            0,
                        ),
                        (
                            json!({"spec": {"spec": {"devices": {"requests": [{"exactly": {}}, {"firstAvailable": [{"tolerations": [as_json]}]}]}}}}),
                            "resourceclaimtemplates",
                            // One validation judges claims and templates.
                            0,
                        ),
                    ],
                };
                for (object, resource, validation) in cases {
                    assert_eq!(
                        admits(&programs[validation], &object, resource),
                        want,
                        "{} {name} {t:?} in {object}",
                        p.metadata.name
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 3000, "{checked}");
}

/// `defaults::covered_by(d)`, evaluated as CEL over a Pod's toleration
/// `e`, is `covers(e, d)` for every pair of shapes.
#[test]
fn compiled_coverage_of_defaults_is_covers() {
    let shapes = tolerations();
    let defaults: Vec<&Toleration> = shapes.iter().step_by(7).collect();
    let mut checked = 0;
    for d in defaults {
        let program = Program::compile(&format!("object.exists(e, {})", defaults::covered_by(d))).expect("compiles");
        for e in &shapes {
            // Serialized from the model, so that `tolerationSeconds` is an
            // int, as the apiserver decodes it (a JSON number would be a
            // uint here, which CEL's == never equals an int).
            let mut ctx = Context::default();
            ctx.add_variable_from_value("object", kube_cel::cel::to_value([e]).expect("CEL value"));
            let got = matches!(program.execute(&ctx), Ok(CelValue::Bool(true)));
            assert_eq!(got, crate::policy::cover::covers(e, d), "{e:?} covers {d:?}");
            checked += 1;
        }
    }
    assert!(checked > 10_000, "{checked}");
}

/// The writes a compiled policy judges are stated at the head of each
/// validation, not as matchConditions: a kubelet's, an exempt
/// requester's and one in a namespace the globs leave out are admitted
/// whatever they tolerate; the same write by anyone else is refused.
#[test]
fn guards_head_every_validation() {
    let out = compile(
        &set("apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: g}
spec:
  namespaces: {names: [ml-*], exclude: [ml-sandbox, ml-x?]}
  exempt: {groups: [sre]}
  pods: {deny: [{key: k, operator: Exists}]}
  devices: {deny: [{key: k, operator: Exists}]}
"),
        &Options::default(),
    )
    .expect("compiles");
    let policy = |name: &str| -> &Value {
        out.objects
            .iter()
            .find(|o| o["kind"] == "ValidatingAdmissionPolicy" && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    for name in ["draguard-g-pods", "draguard-g-devices"] {
        assert!(policy(name)["spec"].get("matchConditions").is_none(), "{name}");
    }
    let pod = json!({"metadata": {"name": "p"}, "spec": {"tolerations": [{"key": "k", "operator": "Exists"}]}});
    let claim = json!({"metadata": {"name": "c"}, "spec": {"devices": {"requests": [{"exactly": {"tolerations": [{"key": "k", "operator": "Exists"}]}}]}}});
    let request = |resource: &str, namespace: &str, user: &str, groups: &[&str]| {
        json!({"resource": {"resource": resource}, "operation": "CREATE", "namespace": namespace,
               "userInfo": {"username": user, "groups": groups}})
    };
    for (name, object, resource) in [
        ("draguard-g-pods", &pod, "pods"),
        ("draguard-g-devices", &claim, "resourceclaims"),
    ] {
        let tolerations = policy(name)["spec"]["validations"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["reason"] == "Forbidden"))
            .expect("a tolerations validation");
        let p = program(tolerations["expression"].as_str().expect("expression"));
        let admitted = |namespace: &str, user: &str, groups: &[&str]| {
            admits_request(&p, object, request(resource, namespace, user, groups))
        };
        assert!(!admitted("ml-a", "alice", &["dev"]), "{name}: judged");
        assert!(admitted("ml-a", "bob", &["sre"]), "{name}: exempt group");
        assert!(admitted("ml-xy", "alice", &["dev"]), "{name}: excluded by glob");
        assert!(admitted("default", "alice", &["dev"]), "{name}: not selected");
        assert!(
            admitted("ml-a", "system:node:n1", &["system:nodes"]),
            "{name}: a kubelet's write"
        );
    }
    // Plain excluded names are the binding's: the apiserver never runs
    // the policy there.
    let binding = out
        .objects
        .iter()
        .find(|o| o["kind"] == "ValidatingAdmissionPolicyBinding" && o["metadata"]["name"] == "draguard-g-pods")
        .expect("binding");
    assert_eq!(
        binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][2],
        json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["ml-sandbox"]})
    );
}

/// A user's DriverConfigSchema using every structural keyword and a rule.
fn user_schema() -> Value {
    json!({
        "type": "object",
        "required": ["slots"],
        "properties": {
            "slots": {"type": "integer", "minimum": 1, "maximum": 8},
            "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0},
            "mode": {"type": "string", "enum": ["fast", "safe"]},
            "name": {"type": "string", "maxLength": 5, "minLength": 2},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "flag": {"type": "boolean"}
        },
        "x-kubernetes-validations": [{
            "rule": "!has(self.mode) || self.mode != 'fast' || self.slots <= 4",
            "fieldPath": ".slots",
            "messageExpression": "'fast mode takes at most 4 slots, not ' + string(self.slots)"
        }]
    })
}

fn drivers_with_user_schema() -> crate::rules::driver_config::DriverSchemas {
    let mut drivers = crate::rules::driver_config::DriverSchemas::default();
    let schema = crate::rules::driver_config::ConfigSchema::compile(user_schema()).expect("the schema compiles");
    drivers.insert(
        "fpga.example.com",
        "fpga.example.com/v1",
        "Bitstream",
        std::sync::Arc::new(schema),
    );
    drivers
}

#[test]
fn drivers_compile_unless_they_use_what_cel_cannot_say() {
    let drivers = driver_configs::compile(&drivers_with_user_schema());
    assert_eq!(
        drivers.compiled_names(),
        [
            "compute-domain.nvidia.com",
            "fpga.example.com",
            "gpu.amd.com",
            "gpu.example.com",
            "gpu.nvidia.com"
        ]
    );
    assert_eq!(drivers.left, []);
    // A gate declared off: only the webhook knows it.
    let mut gated = crate::rules::driver_config::DriverSchemas::default();
    gated.set_gate("compute-domain.nvidia.com", "Anything", false);
    assert!(
        driver_configs::compile(&gated)
            .left
            .iter()
            .any(|(d, why)| d == "compute-domain.nvidia.com" && why.starts_with("feature gates declared off"))
    );
}

/// The devices policy carries the configs' errors as a variable per list,
/// read by a validation that refuses as the webhook does (422, Invalid),
/// on CREATE only, before the tolerations; a Warn policy carries none.
/// Their verdicts and words are proven on the real apiserver
/// (tests/e2e_cluster/compiled.rs: kube-cel has neither `type()` nor
/// `transformList`).
#[test]
fn driver_configs_ride_in_the_enforce_devices_policy() {
    let yaml = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: d}\nspec: {devices: {deny: [{key: bad, operator: Exists}]}}\n---\napiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: w}\nspec: {mode: Warn, devices: {deny: [{key: bad, operator: Exists}]}}\n";
    let set = PolicySet {
        policies: parse("p.yaml", yaml).expect("valid policies"),
        drivers: drivers_with_user_schema(),
    };
    let out = compile(&set, &Options::default()).expect("compiles");
    let policy = |name: &str| {
        out.objects
            .iter()
            .find(|o| o["kind"] == "ValidatingAdmissionPolicy" && o["metadata"]["name"] == name)
            .expect("the devices policy")
    };
    let d = policy("draguard-d-devices");
    let names: Vec<&Value> = d["spec"]["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| &v["name"])
        .collect();
    // One set for claims and templates (each variable costs every write).
    // Per compiled driver, each quantity node's parses, the kinds' checks
    // too long to inline in the driver's (NVIDIA's longest, GpuConfig; the
    // shortest are inlined first), then
    // the driver's (apiVersion, kind, the kinds' checks or which variable
    // holds them); then the list's first errors in config order.
    let expected: Vec<Value> = [
        "configErrors0",
        "configErrors1",
        "configErrors2",
        "configErrors3",
        "configErrors4q0",
        "configErrors4q1",
        "configErrors4q2",
        "configErrors4q3",
        "configErrors4k0",
        "configErrors4",
        "configErrors",
    ]
    .into_iter()
    .map(Value::from)
    .collect();
    let names: Vec<Value> = names.into_iter().cloned().collect();
    assert_eq!(names, expected);
    // After the lists' limit, in the one Invalid validation of claims and
    // templates (`the_tolerations_limit_rides_first_...`); a claim without
    // a config list reads no variable.
    let invalid = &d["spec"]["validations"][0];
    assert_eq!(invalid["reason"], "Invalid");
    let guard = "(request.operation == 'CREATE') && (!request.userInfo.username.startsWith('system:node:')) && (request.operation == 'CREATE' || !(request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || request.userInfo.username == 'system:kube-controller-manager'))";
    let past = super::device_limit::past_the_limit(&["spec"]);
    let present = "(request.resource.resource == 'resourceclaims' ? (has(object.spec) && has(object.spec.devices) && has(object.spec.devices.config)) : (has(object.spec) && has(object.spec.spec) && has(object.spec.spec.devices) && has(object.spec.spec.devices.config)))";
    let none = format!("!{present} || size(variables.configErrors) == 0");
    assert!(
        invalid["expression"].as_str().is_some_and(|e| e.starts_with(&format!(
            "(request.resource.resource == 'resourceclaims' ? (!({guard}) || (!{past} && ({none}))) : (!("
        ))),
        "{invalid}"
    );
    // The first config error, shown as the apiserver shows a validation's
    // own message: a long or multi-line one falls back to the list's;
    // none, no message (and no error evaluating it).
    let path = "(request.resource.resource == 'resourceclaims' ? 'spec.devices.config' : 'spec.spec.devices.config')";
    assert!(
        invalid["messageExpression"].as_str().is_some_and(|m| m.contains(&format!(
            " : ({none} ? '' : [variables.configErrors[0].trim()].map(m, m == '' || size(bytes(m)) > 5120 || m.contains('\\n') ? {path} + ': a driver\\'s opaque parameters are invalid' : m)[0])) : ("
        ))),
        "{invalid}"
    );
    let variable = |name: &str| {
        d["spec"]["variables"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|v| v["name"] == name)
            .and_then(|v| v["expression"].as_str())
            .unwrap_or_else(|| panic!("{name}"))
    };
    let configs = "(request.resource.resource == 'resourceclaims' ? (has(object.spec) && has(object.spec.devices) && has(object.spec.devices.config) ? object.spec.devices.config : []) : (has(object.spec) && has(object.spec.spec) && has(object.spec.spec.devices) && has(object.spec.spec.devices.config) ? object.spec.spec.devices.config : []))";
    assert_eq!(
        variable("configErrors"),
        format!(
            "{configs}.transformList(i, c, has(c.opaque) && has(c.opaque.parameters) && type(c.opaque.parameters) == map, c.opaque.driver == 'compute-domain.nvidia.com' ? variables.configErrors0[i] : c.opaque.driver == 'fpga.example.com' ? variables.configErrors1[i] : c.opaque.driver == 'gpu.amd.com' ? variables.configErrors2[i] : c.opaque.driver == 'gpu.example.com' ? variables.configErrors3[i] : c.opaque.driver == 'gpu.nvidia.com' ? variables.configErrors4[i] : '').filter(e, e != '')"
        )
    );
    let nvidia = variable("configErrors4");
    assert!(
        nvidia.starts_with(&format!(
            "{configs}.transformMap(i, c, has(c.opaque) && has(c.opaque.parameters) && type(c.opaque.parameters) == map && c.opaque.driver == 'gpu.nvidia.com', [c.opaque.parameters].map(p, [{path} + '[' + string(i) + '].opaque.parameters'].map(at, "
        )),
        "{nvidia}"
    );
    // The GpuConfig's checks, read where the driver's kind is known; a
    // short kind's inlined there.
    assert!(
        nvidia.contains(" == 'GpuConfig') ? variables.configErrors4k0[i] : "),
        "{nvidia}"
    );
    assert!(!nvidia.contains("variables.configErrors4k1[i]"), "{nvidia}");
    assert!(!nvidia.contains("variables.configErrors4k2[i]"), "{nvidia}");
    assert!(
        variable("configErrors4k0").starts_with(&format!(
            "{configs}.transformMap(i, c, has(c.opaque) && has(c.opaque.parameters) && type(c.opaque.parameters) == map && c.opaque.driver == 'gpu.nvidia.com' && [c.opaque.parameters].exists(p, (('apiVersion' in p) && type(p['apiVersion']) == string ? p['apiVersion'] : '') == 'resource.nvidia.com/v1beta1' && (('kind' in p) && type(p['kind']) == string ? p['kind'] : '') == 'GpuConfig'), "
        )),
        "{}",
        variable("configErrors4k0")
    );
    // Each under the budget, and under cel-go's size limit.
    for v in d["spec"]["variables"].as_array().into_iter().flatten() {
        let expression = v["expression"].as_str().unwrap_or_default();
        assert!(expression.len() < 30_000, "{}: {}", v["name"], expression.len());
    }
    assert_eq!(d["spec"]["validations"][1]["reason"], "Forbidden");
    assert_eq!(d["spec"]["validations"].as_array().map(Vec::len), Some(2));
    let w = policy("draguard-w-devices");
    assert!(w["spec"].get("variables").is_none());
    assert!(
        w["spec"]["validations"]
            .as_array()
            .is_some_and(|v| v.iter().all(|v| v["reason"] == "Forbidden"))
    );
}

/// One schema node's checks, exactly: the type, then the bound, in the
/// webhook's words (`structural.rs`).
#[test]
fn a_bounded_integer_compiles_to_the_webhooks_words() {
    let mut drivers = crate::rules::driver_config::DriverSchemas::default();
    let schema = crate::rules::driver_config::ConfigSchema::compile(
        json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 8}}}),
    )
    .expect("compiles");
    drivers.insert("n.example.com", "n.example.com/v1", "N", std::sync::Arc::new(schema));
    let compiled = driver_configs::compile(&drivers);
    let first = compiled.first_error("n.example.com").expect("compiled");
    let n = "p['n']";
    for part in [
        format!(
            "type({n}) == int || type({n}) == uint || (type({n}) == double && {n} > -9.2e18 && {n} < 9.2e18 && double(int({n})) == {n})"
        ),
        format!(
            "at + '.n' + ': Invalid value: \"' + (type({n}) == map ? 'object' : type({n}) == list ? 'array' : type({n}) == string ? 'string' : type({n}) == bool ? 'boolean' : type({n}) == double ? 'number' : 'integer') + '\": must be of type integer'"
        ),
        format!("double({n}) > 8.0"),
        "': should be less than or equal to 8'".to_owned(),
        "at + '.kind: Invalid value: ' + ".to_owned(),
        "'.apiVersion: Required value: Object \\'apiVersion\\' is missing'".to_owned(),
    ] {
        assert!(first.contains(&part), "{part}\nnot in\n{first}");
    }
}

/// A claim spec at `spec` whose one request's `exactly` list (or, with
/// `sub`, its second subrequest's) holds `n` tolerations.
fn claim_with(n: usize, sub: bool) -> Value {
    let list: Vec<Value> = (0..n)
        .map(|i| json!({"key": format!("k{i}"), "operator": "Exists"}))
        .collect();
    let request = if sub {
        json!({"name": "b", "firstAvailable": [{"name": "s1", "deviceClassName": "gpu"},
                                               {"name": "s2", "deviceClassName": "gpu", "tolerations": list}]})
    } else {
        json!({"name": "b", "exactly": {"deviceClassName": "gpu", "tolerations": list}})
    };
    json!({"devices": {"requests": [{"name": "a", "exactly": {"deviceClassName": "gpu"}}, request]}})
}

/// The limit of 16 tolerations per request list rides first in an
/// Enforce devices policy (before the configs and the tolerations), on
/// CREATE only, for claims and templates, whoever writes (no
/// exemptions), not a kubelet; a Warn policy carries none. The messages
/// (two-variable comprehensions, which kube-cel lacks) are proven on the
/// real apiserver (tests/e2e_cluster/compiled.rs).
#[test]
fn the_tolerations_limit_rides_first_in_the_enforce_devices_policy() {
    let yaml = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: d}\nspec: {exempt: {groups: [sre]}, devices: {deny: [{key: bad, operator: Exists}]}}\n---\napiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: w}\nspec: {mode: Warn, devices: {deny: [{key: bad, operator: Exists}]}}\n---\napiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: p}\nspec: {pods: {deny: [{key: bad, operator: Exists}]}}\n";
    let set = PolicySet {
        policies: parse("p.yaml", yaml).expect("valid policies"),
        drivers: drivers_with_user_schema(),
    };
    assert_eq!(
        set.policies
            .iter()
            .map(|l| objects::carries_claim_validation(&l.policy))
            .collect::<Vec<_>>(),
        [true, false, false]
    );
    let out = compile(&set, &Options::default()).expect("compiles");
    let policy = |name: &str| {
        out.objects
            .iter()
            .find(|o| o["kind"] == "ValidatingAdmissionPolicy" && o["metadata"]["name"] == name)
            .expect("the devices policy")
    };
    let d = policy("draguard-d-devices");
    let validations = d["spec"]["validations"].as_array().expect("validations");
    let reasons: Vec<&str> = validations.iter().filter_map(|v| v["reason"].as_str()).collect();
    // One Invalid validation (the limit, then the configs) and one
    // Forbidden (the tolerations), each for claims and templates.
    assert_eq!(reasons, ["Invalid", "Forbidden"]);
    let invalid = &validations[0];
    let guard = "(request.operation == 'CREATE') && (!request.userInfo.username.startsWith('system:node:')) && (request.operation == 'CREATE' || !(request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || request.userInfo.username == 'system:kube-controller-manager'))";
    let requests = "(has(object.spec) && has(object.spec.devices) && has(object.spec.devices.requests) ? object.spec.devices.requests : [])";
    let exactly = "(has(r.exactly) && has(r.exactly.tolerations) ? r.exactly.tolerations : [])";
    let subs = "(has(r.firstAvailable) ? r.firstAvailable : [])";
    let sub = "(has(s.tolerations) ? s.tolerations : [])";
    let over = format!("size({exactly}) > 16 || {subs}.exists(s, size({sub}) > 16)");
    let t_requests = "(has(object.spec) && has(object.spec.spec) && has(object.spec.spec.devices) && has(object.spec.spec.devices.requests) ? object.spec.spec.devices.requests : [])";
    let present = "(request.resource.resource == 'resourceclaims' ? (has(object.spec) && has(object.spec.devices) && has(object.spec.devices.config)) : (has(object.spec) && has(object.spec.spec) && has(object.spec.spec.devices) && has(object.spec.spec.devices.config)))";
    let configs_ok = format!("!{present} || size(variables.configErrors) == 0");
    assert_eq!(
        invalid["expression"],
        format!(
            "(request.resource.resource == 'resourceclaims' ? (!({}) || (!{requests}.exists(r, {over}) && ({configs_ok}))) : (!({}) || (!{t_requests}.exists(r, {over}) && ({configs_ok}))))",
            guard, guard
        )
    );
    let limit_message = format!(
        "{requests}.transformList(i, r, {over}, size({exactly}) > 16 ? 'spec.devices.requests[' + string(i) + '].exactly.tolerations' + ': Too many: ' + string(size({exactly})) + ': must have at most 16 items' : {subs}.transformList(k, s, size({sub}) > 16, 'spec.devices.requests[' + string(i) + '].firstAvailable[' + string(k) + '].tolerations' + ': Too many: ' + string(size({sub})) + ': must have at most 16 items')[0])[0]"
    );
    let message = invalid["messageExpression"].as_str().expect("a message");
    assert!(
        message.starts_with(&format!(
            "(request.resource.resource == 'resourceclaims' ? ({requests}.exists(r, {over}) ? {limit_message} : ({configs_ok} ? '' : [variables.configErrors[0].trim()]"
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            ") : ({t_requests}.exists(r, {over}) ? {t_requests}.transformList(i, r, "
        )) && message
            .contains("'spec.spec.devices.requests[' + string(i) + '].firstAvailable[' + string(k) + '].tolerations'"),
        "{message}"
    );

    // The verdicts, as CEL.
    // One program for both: the request's resource picks the spec read.
    let claims = program(invalid["expression"].as_str().expect("expression"));
    let templates = &claims;
    let request = |resource: &str, operation: &str, user: &str, groups: &[&str]| {
        json!({"resource": {"resource": resource}, "operation": operation, "namespace": "default",
               "userInfo": {"username": user, "groups": groups}})
    };
    let tenant = |resource: &str| request(resource, "CREATE", "alice", &["dev"]);
    for (n, sub, admitted) in [
        (0, false, true),
        (16, false, true),
        (17, false, false),
        (16, true, true),
        (17, true, false),
    ] {
        let claim = json!({"spec": claim_with(n, sub)});
        let template = json!({"spec": {"spec": claim_with(n, sub)}});
        assert_eq!(
            admits_request(&claims, &claim, tenant("resourceclaims")),
            admitted,
            "claim, {n} (subrequest: {sub})"
        );
        assert_eq!(
            admits_request(templates, &template, tenant("resourceclaimtemplates")),
            admitted,
            "template, {n} (subrequest: {sub})"
        );
        // The resource decides which spec is read: a claim's shape sent as
        // a template (and the reverse) has nothing where that resource's
        // requests are.
        assert!(admits_request(&claims, &claim, tenant("resourceclaimtemplates")));
        assert!(admits_request(templates, &template, tenant("resourceclaims")));
    }
    let past = json!({"spec": claim_with(17, true)});
    // An exempt group is not exempt from the limit.
    assert!(!admits_request(
        &claims,
        &past,
        request("resourceclaims", "CREATE", "bob", &["sre"])
    ));
    // An UPDATE (the spec is immutable) and a kubelet's write are not judged.
    assert!(admits_request(
        &claims,
        &past,
        request("resourceclaims", "UPDATE", "alice", &["dev"])
    ));
    assert!(admits_request(
        &claims,
        &past,
        request("resourceclaims", "CREATE", "system:node:n1", &["system:nodes"])
    ));

    // A new claim past the limit is the limit's alone: the tolerations'
    // validations (Enforce and Warn) do not walk it, as the webhook judges
    // no policy on an invalid object; an UPDATE's they judge.
    let mut refused = claim_with(17, true);
    refused["devices"]["requests"][1]["firstAvailable"][1]["tolerations"][3] =
        json!({"key": "bad", "operator": "Exists"});
    let mut refused_within = claim_with(16, true);
    refused_within["devices"]["requests"][1]["firstAvailable"][1]["tolerations"][3] =
        json!({"key": "bad", "operator": "Exists"});
    let w = policy("draguard-w-devices");
    for tolerations in [&validations[1], &w["spec"]["validations"][0]] {
        let p = program(tolerations["expression"].as_str().expect("expression"));
        let judged = |object: &Value, operation: &str| {
            !admits_request(
                &p,
                &json!({"spec": object}),
                request("resourceclaims", operation, "alice", &["dev"]),
            )
        };
        // Nor the message, which the apiserver evaluates on every write.
        let message = tolerations["messageExpression"].as_str().expect("a message");
        let walk = format!(
            "(request.resource.resource == 'resourceclaims' ? ((request.operation == 'CREATE' && {requests}.exists(r, {over})) ? '' : ("
        );
        assert!(message.starts_with(&walk), "{message}");
        assert!(!judged(&refused, "CREATE"), "{tolerations}");
        assert!(judged(&refused, "UPDATE"), "{tolerations}");
        assert!(judged(&refused_within, "CREATE"), "{tolerations}");
    }
    assert!(
        w["spec"]["validations"]
            .as_array()
            .is_some_and(|v| v.iter().all(|v| v["reason"] == "Forbidden"))
    );
}

/// The limit's text is the webhook's `FieldError` for a list past it.
#[test]
fn the_tolerations_limit_says_what_the_webhook_says() {
    let text = device_limit::too_many_text("'spec.devices.requests[3].exactly.tolerations'", "object.l");
    for n in [17, 40] {
        let mut ctx = Context::default();
        let list: Vec<Value> = (0..n).map(|_| json!({})).collect();
        ctx.add_variable_from_value(
            "object",
            kube_cel::cel::to_value(json!({"l": list})).expect("CEL value"),
        );
        let said = program(&text).execute(&ctx);
        let webhook = crate::rules::tolerations::validate_device_tolerations(
            &vec![crate::objects::claim::DeviceToleration::default(); n],
            None,
            &crate::field::Path::parse("spec.devices.requests[3].exactly.tolerations"),
        );
        assert_eq!(webhook.len(), 1);
        assert_eq!(
            said.ok(),
            Some(CelValue::String(webhook[0].to_string().into())),
            "{text}"
        );
    }
}

/// Where no devices part denies, `--explain` says the limit stays with the
/// webhook; an Enforce devices part carries it (and says nothing).
#[test]
fn explain_says_where_the_tolerations_limit_stays() {
    let yaml = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: d}\nspec: {devices: {deny: [{key: bad, operator: Exists}]}}\n---\napiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: w}\nspec: {mode: Warn, devices: {deny: [{key: bad, operator: Exists}]}}\n";
    let text = explain(&compile(&set(yaml), &Options::default()).expect("compiles"));
    let limit = "  stays in the webhook: device toleration limit: a claim's or template's request list of more than 16 tolerations (draguard's limit; the apiserver does not check it) is refused by a policy's devices part only when it has a devices allow or deny list and mode Enforce: the webhook refuses it whatever a policy's mode\n";
    let (d, w) = text.split_once("w (p.yaml):").expect("both policies");
    assert!(!d.contains("device toleration limit"), "{text}");
    assert!(w.contains(limit), "{text}");
}

/// A quantity: the type, then ParseQuantity's three errors in the
/// parser's order, each in the webhook's words, on the trimmed string;
/// a map's quantity at its key's path (`structural.rs`, `quantity.rs`;
/// their verdicts on the real apiserver: tests/e2e_cluster/compiled.rs).
#[test]
fn a_quantity_compiles_to_its_three_errors_in_the_parsers_order() {
    let mut drivers = crate::rules::driver_config::DriverSchemas::default();
    let quantity = json!({"x-kubernetes-int-or-string": true, "format": "quantity"});
    let schema = crate::rules::driver_config::ConfigSchema::compile(json!({"type": "object", "properties": {
        "q": quantity, "m": {"type": "object", "additionalProperties": quantity}}}))
    .expect("compiles");
    drivers.insert("q.example.com", "q.example.com/v1", "Q", std::sync::Arc::new(schema));
    let compiled = driver_configs::compile(&drivers);
    assert_eq!(compiled.left, []);
    let first = compiled.first_error("q.example.com").expect("compiled");
    let q = "p['q']";
    let shown = format!(
        "('\"' + {q}.replace('\\\\', '\\\\\\\\').replace('\"', '\\\\\"').replace('\\n', '\\\\n').replace('\\r', '\\\\r').replace('\\t', '\\\\t').replace('\\a', '\\\\a').replace('\\b', '\\\\b').replace('\\f', '\\\\f').replace('\\v', '\\\\v') + '\"')"
    );
    // The check reads the parse from the node's parses, by the config's
    // index (and a map's key): `m` is the kind's first quantity node, `q`
    // its second.
    let parsed = "variables.__quantity1__[i]";
    let bad = format!("type({q}) == string && {parsed} != 0");
    let text = format!(
        "at + '.q' + ': Invalid value: ' + {shown} + ['', ': quantities must match the regular expression \\'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$\\'', ': unable to parse quantity\\'s suffix', ': unable to parse numeric part of quantity'][{parsed}]"
    );
    // In the node's checks after its type's, on a present non-null value.
    let typed = format!(
        "(p != null && ('q' in p && ({q} != null && (!(type({q}) == string || type({q}) == int || type({q}) == uint))))) ? "
    );
    let checked = format!("(p != null && ('q' in p && ({q} != null && ({bad})))) ? ({text})");
    let (Some(t), Some(c)) = (first.find(&typed), first.find(&checked)) else {
        panic!("{first}");
    };
    assert!(t < c);
    // A map's quantity: its key in brackets, as `Path::key` renders it;
    // its parse read at the key each check binds (`k1` where the error is
    // named, `j1` where an earlier bad key is looked for).
    assert!(
        first.contains("at + '.m' + '[' + k1 + ']' + ': Invalid value: ' + ('\"' + x1.replace("),
        "{first}"
    );
    for key in ["k1", "j1"] {
        assert!(
            first.contains(&format!(
                "(x1 != null && (type(x1) == string && variables.__quantity0__[i][{key}] != 0))"
            )),
            "{key} in {first}"
        );
    }
    // The policy parses each node's strings once per config, in a variable
    // per node shaped like the parameters down to it.
    let at = driver_configs::ConfigList {
        list: "L",
        present: "P",
        path: "'spec.devices.config'",
    };
    let check = driver_configs::validation(&compiled, at, "v").expect("compiled");
    let variables = check.variables;
    let named = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .and_then(|v| v["expression"].as_str())
            .unwrap_or_else(|| panic!("{name} in {variables:?}"))
    };
    let n = compiled
        .compiled_names()
        .iter()
        .position(|d| *d == "q.example.com")
        .expect("compiled");
    let of_kind = "has(c.opaque) && has(c.opaque.parameters) && type(c.opaque.parameters) == map && c.opaque.driver == 'q.example.com' && [c.opaque.parameters].exists(p, (('apiVersion' in p) && type(p['apiVersion']) == string ? p['apiVersion'] : '') == 'q.example.com/v1' && (('kind' in p) && type(p['kind']) == string ? p['kind'] : '') == 'Q')";
    assert_eq!(
        named(&format!("v{n}q0")),
        format!(
            "L.transformMap(i, c, {of_kind}, [c.opaque.parameters].map(p, type(p) == map && 'm' in p ? [p['m']].map(y0, type(y0) == map ? y0.transformMap(z1, y1, type(y1) == string ? {} : 0) : dyn(0))[0] : dyn(0))[0])",
            super::quantity::error("y1")
        )
    );
    assert_eq!(
        named(&format!("v{n}q1")),
        format!(
            "L.transformMap(i, c, {of_kind}, [c.opaque.parameters].map(p, type(p) == map && 'q' in p ? [p['q']].map(y0, type(y0) == string ? {} : 0)[0] : dyn(0))[0])",
            super::quantity::error("y0")
        )
    );
    // The kind's checks, short, are inlined in the driver's variable.
    assert!(named(&format!("v{n}")).contains(&format!("variables.v{n}q0[i][j1] != 0")));
    assert!(
        variables.iter().all(|v| v["name"] != format!("v{n}k0")),
        "{variables:?}"
    );
    // No config list, or no error in it: no message, and no error either
    // (the apiserver evaluates the message on every write).
    assert_eq!(check.ok, "!P || size(variables.v) == 0");
    assert!(
        check
            .message
            .starts_with("!P || size(variables.v) == 0 ? '' : [variables.v[0].trim()]"),
        "{}",
        check.message
    );
    // The parse: the plain ones at once, then the scanner's shape, then
    // interpret's suffixes, then the fast and exact paths' bounds.
    let error = super::quantity::error("s");
    assert!(
        error.starts_with(
            "[s.trim()].map(qt, size(qt) <= 32 && qt.matches('^[+-]?[0-9]{1,18}(\\\\.[0-9]{0,9})?([numkMGTPE]|[KMGTPE]i)?$') ? 0 : qt == '' || !qt.matches('^[+-]?[0-9]*(\\\\.[0-9]*)?[eEinumkKMGTP]*[-+]?[0-9]*$') ? 1 : "
        ),
        "{error}"
    );
    for part in [
        // interpret: SI, binary, else an exponent within int64.
        "qx in {'': 0, 'n': -9, 'u': -6, 'm': -3, 'k': 3, 'M': 6, 'G': 9, 'T': 12, 'P': 15, 'E': 18} ? ",
        "size(r) < 19 || (size(r) == 19 && r <= (qx.contains('-') ? '9223372036854775808' : '9223372036854775807'))",
        "qe == 9000000001 ? 2 : (qe == 9000000000 ? (",
        // The binary fast path; a magnitude's digits past 2^(10j).
        "qp == 0 && qm <= 14 - 3 * qj ? false : ",
        "{'Ki': '9765625', 'Mi': '95367431640625', ",
        // The decimal fast path, then the exact one.
        "qm + qp <= 18 && qc >= -9 ? size(qd) > 0 && size(qd) + qc > 10000 : qa == '' || ",
        ") ? 3 : 0)",
    ] {
        assert!(error.contains(part), "{part}\nnot in\n{error}");
    }
}

/// A message names the first violation in the webhook's words, and is
/// `''`, not an error, on a write with none: the apiserver evaluates every
/// messageExpression on every write, and formats an error for each one
/// that fails (`messages::first_message`).
#[test]
fn a_message_is_empty_on_a_write_it_passes() {
    let policies = parse("p.yaml", ML).expect("valid policies");
    let p = &policies[0].policy;
    let evaluate = |texts: &str| {
        let mut ctx = Context::default();
        ctx.add_variable_from_value(
            "request",
            kube_cel::cel::to_value(json!({"namespace": "ml"})).expect("CEL value"),
        );
        program(&messages::first_message(p, TolerationTarget::Pod, texts)).execute(&ctx)
    };
    assert_eq!(
        evaluate("['spec.tolerations[1] (spot:NoSchedule) is not allowed', 'spec.tolerations[2] (b:*) is not allowed']"),
        Ok(CelValue::String(std::sync::Arc::new(
            "toleration policy \"ml\": spec.tolerations[1] (spot:NoSchedule) is not allowed; namespace \"ml\" may use only: dedicated=ml:NoSchedule: ask".to_owned()
        )))
    );
    assert_eq!(evaluate("[]"), Ok(CelValue::String(std::sync::Arc::new(String::new()))));
}
