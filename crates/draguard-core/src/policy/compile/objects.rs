//! The admissionregistration.k8s.io/v1 objects of one compiled policy
//! part: a ValidatingAdmissionPolicy judging the Pods' or the claims' and
//! templates' tolerations, and its binding (mode, namespaces).

use serde_json::{Value, json};

use super::messages;
use super::predicate::{self, Judgement};
use super::selection;
use crate::policy::TolerationPolicy;
use crate::policy::enforce::TolerationTarget;
use crate::verdict::Mode;

/// Labels every compiled object carries, so that `kubectl apply --prune
/// -l app.kubernetes.io/managed-by=draguard-policy-compile` removes the
/// ones of a policy that is gone.
pub const MANAGED_BY: &str = "draguard-policy-compile";

/// The most tolerations of a Pod a compiled policy judges; a Pod with
/// more is left to the webhook. The apiserver's CEL takes time quadratic in
/// the list's length (kube-apiserver v1.36.2, one deny-only and one
/// exemption policy, server-side dry runs: 5,000 tolerations added 0.56 s,
/// 10,000 2.3 s, 20,000 10.6 s, 50,000 timed out at 30 s), while a Pod's
/// list has no bound but the request's size (3 MiB: 140,000 tolerations).
/// Claims get none. The apiserver's validation caps a claim at 32 requests
/// of at most 8 subrequests but not a list (kube-apiserver v1.36.2 admits
/// one of 50,000 tolerations): draguard's limit of 16 a list is an Enforce
/// devices policy's to refuse on CREATE (`device_limit`), and the
/// tolerations' validations do not walk a new claim past it. Within the
/// limit the largest claim (4,096 tolerations) took about 0.2 s more with
/// three device policies compiled. An UPDATE's lists, stored unchanged (a
/// claim's spec is immutable), are walked: one past the limit was created
/// while draguard did not judge it.
pub const POD_TOLERATIONS_MAX: usize = 128;

/// `list.exists(t, rejected)`.
fn any_rejected(list: &str, j: &Judgement) -> String {
    format!("{list}.exists(t, {})", j.rejected)
}

/// The refused tolerations' texts in `list`, whose path up to `[` is the
/// CEL string expression `prefix`.
fn rejected_texts(list: &str, j: &Judgement, prefix: &str) -> String {
    format!(
        "{list}.transformList(j, t, {}, {})",
        j.rejected,
        messages::violation(j, prefix, "j")
    )
}

/// The first refused toleration's text in `list` (only evaluated when
/// there is one).
fn first_rejected(list: &str, j: &Judgement, prefix: &str) -> String {
    format!("{}[0]", rejected_texts(list, j, prefix))
}

/// `has(...)` of each step of `path` (dotted fields from `root`), and the
/// whole path.
fn steps_present(root: &str, path: &[&str]) -> (Vec<String>, String) {
    let mut guards = Vec::new();
    let mut at = root.to_owned();
    for step in path {
        at = format!("{at}.{step}");
        guards.push(format!("has({at})"));
    }
    (guards, at)
}

/// `path` (dotted fields from `root`) or `[]` when any step is absent.
pub(super) fn list_at(root: &str, path: &[&str]) -> String {
    let (guards, at) = steps_present(root, path);
    format!("({} ? {at} : [])", guards.join(" && "))
}

/// Whether `path` (dotted fields from `root`) is there.
fn present_at(root: &str, path: &[&str]) -> String {
    format!("({})", steps_present(root, path).0.join(" && "))
}

/// The request writes a claim (else a template, in a devices policy).
const IS_CLAIM: &str = "request.resource.resource == 'resourceclaims'";

/// A validation of the tolerations of the pod spec at `spec` (`["spec"]`
/// in a Pod, `["spec", "template", "spec"]` in a Deployment), for the
/// writes `guard` (a CEL condition) admits.
fn pod_spec_validation(p: &TolerationPolicy, j: &Judgement, spec: &[&str], guard: Option<&str>) -> Value {
    let mut path = spec.to_vec();
    path.push("tolerations");
    let list = list_at("object", &path);
    let prefix = super::cel::string(&format!("{}[", path.join(".")));
    let texts = rejected_texts(&list, j, &prefix);
    let unless_guarded = guard.map(|g| format!("!({g}) || ")).unwrap_or_default();
    json!({
        "expression": format!("{unless_guarded}!{}", any_rejected(&list, j)),
        "messageExpression": messages::first_message(p, TolerationTarget::Pod, &texts),
        "message": messages::fallback(p, TolerationTarget::Pod),
        "reason": "Forbidden",
    })
}

/// A validation of every `exactly` and `firstAvailable` toleration list of
/// the claim spec at `spec` (`["spec"]` in a claim, `["spec", "spec"]` in
/// a template), in `apply::claim_lists`'s order: request by request, the
/// `exactly` list, then each subrequest's. The apiserver converts v1beta1
/// and v1beta2 writes to v1 before a policy matching v1 with
/// `matchPolicy: Equivalent` sees them, and `apply::claim_lists` names a
/// v1beta1 request's list `exactly` too. Which resource is written is
/// [`claims_or_templates`]' to choose.
fn claim_validation(p: &TolerationPolicy, j: &Judgement, spec: &[&str]) -> Value {
    let mut requests_path: Vec<&str> = spec.to_vec();
    requests_path.extend(["devices", "requests"]);
    let requests = list_at("object", &requests_path);
    let exactly = list_at("r", &["exactly", "tolerations"]);
    let subs = list_at("r", &["firstAvailable"]);
    let sub = list_at("s", &["tolerations"]);
    let request_rejects = format!(
        "{} || {subs}.exists(s, {})",
        any_rejected(&exactly, j),
        any_rejected(&sub, j)
    );
    let base = format!("{}.devices.requests[", spec.join("."));
    let exactly_prefix = format!("{} + string(i) + '].exactly.tolerations['", super::cel::string(&base));
    let sub_prefix = format!(
        "{} + string(i) + '].firstAvailable[' + string(k) + '].tolerations['",
        super::cel::string(&base)
    );
    let first_of_request = format!(
        "{} ? {} : {subs}.transformList(k, s, {}, {})[0]",
        any_rejected(&exactly, j),
        first_rejected(&exactly, j, &exactly_prefix),
        any_rejected(&sub, j),
        first_rejected(&sub, j, &sub_prefix),
    );
    let firsts = format!("{requests}.transformList(i, r, {request_rejects}, {first_of_request})");
    // A new claim past the limit of 16 tolerations a list is the limit's
    // to refuse (`device_limit`, in every Enforce devices policy): the
    // webhook judges no policy on an invalid object, so no Warn policy
    // warns of it either; and its lists are not walked, by the expression
    // nor by the message, which the apiserver evaluates on every write,
    // passed or failed (k8s.io/apiserver v0.36
    // pkg/admission/plugin/policy/validating/validator.go `Validate`:
    // `messageFilter.ForInput` for all validations). kube-apiserver
    // v1.36.2, the shipped policies, a claim of one 20,000-toleration list:
    // 5 s more with both walking it, 2.6 s with the message alone, 0.45 s
    // with neither.
    let past_the_limit = format!(
        "(request.operation == 'CREATE' && {})",
        super::device_limit::past_the_limit(spec)
    );
    json!({
        "expression": format!("{past_the_limit} || !{requests}.exists(r, {request_rejects})"),
        "messageExpression": format!(
            "{past_the_limit} ? '' : ({})",
            messages::first_message(p, TolerationTarget::Device, &firsts)
        ),
        "message": messages::fallback(p, TolerationTarget::Device),
        "reason": "Forbidden",
    })
}

/// Whether a policy's devices part judges drivers' configs: only one that
/// denies, since the webhook denies a bad config whatever a policy's mode
/// (a Warn or Audit binding would only warn).
pub fn carries_configs(p: &TolerationPolicy) -> bool {
    p.spec.mode == Mode::Enforce
}

/// Whether `p` compiles to a devices policy that carries, on a claim's and
/// a template's CREATE in its namespaces, every check the webhook makes
/// there beyond the apiserver's and the policies': the compiled drivers'
/// configs (`Drivers::left` stay with the webhook) and the limit of 16
/// tolerations per request list: [`invalid_validation`].
/// An Enforce policy with a devices allow or deny list.
pub fn carries_claim_validation(p: &TolerationPolicy) -> bool {
    carries_configs(p) && predicate::judgement(p, TolerationTarget::Device).is_some()
}

/// The writes the webhook judges a new claim's or template's spec on (the
/// spec is immutable: see [`invalid_validation`]): a CREATE not from a
/// kubelet, in the policy's namespaces (`namespaces`, the part the
/// binding's selector cannot state). Which resource is written is
/// [`claims_or_templates`]' to choose.
fn claim_create_guard(namespaces: Option<&str>) -> String {
    let mut guard = vec!["request.operation == 'CREATE'".to_owned()];
    guard.extend(
        selection::webhook_conditions(false)
            .into_iter()
            .map(|(_, e)| e.to_owned()),
    );
    guard.extend(namespaces.map(str::to_owned));
    super::cel::all(&guard)
}

/// The one Invalid validation of a claim's and a template's CREATE
/// ([`claim_create_guard`]), and the variables it reads: first the limit
/// of 16 tolerations per request list (the webhook refuses a list past it
/// before the drivers' configs and the policies), then the drivers' config
/// checks of the config list. A claim's and a template's spec are
/// immutable (kubernetes pkg/apis/resource/validation/validation.go
/// `ValidateResourceClaimUpdate` and `ValidateResourceClaimTemplateUpdate`,
/// `ValidateImmutableField` on the spec; kube-apiserver v1.36.2 refuses a
/// changed config with `spec: Invalid value: ...: field is immutable`
/// before any policy runs), so an UPDATE that reaches a policy carries the
/// stored spec, which the webhook does not judge again: no ratcheting to
/// compile. In the policy's namespaces; not the policy's exemptions: they
/// exempt from tolerations, not from the object's validity.
///
/// One validation for both resources and both checks, not one each: the
/// apiserver evaluates every validation's expression and messageExpression
/// on every write, passed or failed (k8s.io/apiserver v0.36
/// pkg/admission/plugin/policy/validating/validator.go `Validate`), and on
/// kube-apiserver v1.36.2 six validations (limit, configs and tolerations,
/// each for claims and for templates) cost a plain claim's write about
/// 0.23 ms more of the ValidatingAdmissionPolicy plugin's time than these
/// two (issue 40).
fn invalid_validation(drivers: &super::driver_configs::Drivers, namespaces: Option<&str>) -> (Value, Vec<Value>) {
    const CLAIM: &[&str] = &["spec"];
    const TEMPLATE: &[&str] = &["spec", "spec"];
    let configs_path = |spec: &[&'static str]| [spec, &["devices", "config"]].concat();
    let (claim_path, template_path) = (configs_path(CLAIM), configs_path(TEMPLATE));
    // One set of variables for both resources: each costs every write.
    let by_resource = |claims: &str, templates: &str| format!("({IS_CLAIM} ? {claims} : {templates})");
    let list = by_resource(&list_at("object", &claim_path), &list_at("object", &template_path));
    let present = by_resource(
        &present_at("object", &claim_path),
        &present_at("object", &template_path),
    );
    let path = by_resource(
        &super::cel::string(&claim_path.join(".")),
        &super::cel::string(&template_path.join(".")),
    );
    let configs = super::driver_configs::validation(
        drivers,
        super::driver_configs::ConfigList {
            list: &list,
            present: &present,
            path: &path,
        },
        "configErrors",
    );
    let per_resource = |spec: &[&str]| {
        let guard = claim_create_guard(namespaces);
        let (past, limit_message) = super::device_limit::check(spec);
        let (expression, message) = match &configs {
            Some(configs) => (
                format!("!({guard}) || (!{past} && ({}))", configs.ok),
                format!("{past} ? {limit_message} : ({})", configs.message),
            ),
            None => (format!("!({guard}) || !{past}"), limit_message),
        };
        json!({"expression": expression, "messageExpression": message})
    };
    let claims = per_resource(CLAIM);
    let templates = per_resource(TEMPLATE);
    let mut validation = claims_or_templates(&claims, &templates);
    validation["message"] = Value::from("spec.devices: a request's tolerations or a driver's config are invalid");
    validation["reason"] = Value::from("Invalid");
    (validation, configs.map(|c| c.variables).unwrap_or_default())
}

/// One validation of a claim's (`claims`) or a template's (`templates`)
/// write: each's expression and messageExpression for its own resource.
/// In parentheses: a policy's guards are prepended with `||`, which binds
/// tighter than `?:`.
fn claims_or_templates(claims: &Value, templates: &Value) -> Value {
    let either = |field: &str| {
        format!(
            "({IS_CLAIM} ? ({}) : ({}))",
            claims[field].as_str().unwrap_or("true"),
            templates[field].as_str().unwrap_or("true")
        )
    };
    json!({"expression": either("expression"), "messageExpression": either("messageExpression")})
}

/// The binding's validationActions for a policy's mode.
pub fn actions(mode: Mode) -> &'static str {
    match mode {
        Mode::Enforce => "Deny",
        Mode::Warn => "Warn",
        Mode::Audit => "Audit",
    }
}

/// What one compiled policy judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Pods' `spec.tolerations`.
    Pods,
    /// The pod templates of Deployments, ReplicaSets, StatefulSets,
    /// DaemonSets, Jobs and CronJobs, as draguard's workloads entry.
    Workloads,
    /// Claims' and templates' device tolerations.
    Devices,
}

impl Part {
    pub const ALL: [Part; 3] = [Part::Pods, Part::Workloads, Part::Devices];

    pub fn target(self) -> TolerationTarget {
        match self {
            Part::Pods | Part::Workloads => TolerationTarget::Pod,
            Part::Devices => TolerationTarget::Device,
        }
    }

    pub fn suffix(self) -> &'static str {
        match self {
            Part::Pods => "pods",
            Part::Workloads => "workloads",
            Part::Devices => "devices",
        }
    }
}

/// The longest policy name whose parts can be named.
pub const NAME_MAX: usize = 253 - "draguard--workloads".len();

/// The name of a compiled part: `draguard-<policy>-pods|workloads|devices`.
pub fn name(p: &TolerationPolicy, part: Part) -> String {
    format!("draguard-{}-{}", p.metadata.name, part.suffix())
}

/// Where a workload's pod spec is: CronJobs' one level deeper.
const TEMPLATE_SPEC: &[&str] = &["spec", "template", "spec"];
const CRON_JOB_SPEC: &[&str] = &["spec", "jobTemplate", "spec", "template", "spec"];
const IS_CRON_JOB: &str = "request.resource.resource == 'cronjobs'";

/// The pod spec of the workload being written, in `object` or `oldObject`.
fn workload_pod_spec(root: &str) -> String {
    let at = |path: &[&str]| {
        let mut guards = Vec::new();
        let mut at = root.to_owned();
        for step in path {
            at = format!("{at}.{step}");
            guards.push(format!("has({at})"));
        }
        format!("({} ? {at} : {{}})", guards.join(" && "))
    };
    format!("({IS_CRON_JOB} ? {} : {})", at(CRON_JOB_SPEC), at(TEMPLATE_SPEC))
}

/// The writes a part judges, each a CEL condition: the webhook's own
/// routing (not a kubelet's, not a controller's UPDATE, ...), the Pod
/// tolerations cap, the namespaces the binding's selector cannot state,
/// and the requesters not exempt. All must hold.
fn guards(p: &TolerationPolicy, part: Part, namespaces: Option<String>) -> Vec<String> {
    let mut guards = Vec::new();
    match part {
        Part::Pods => guards.push(format!(
            "!has(object.spec.tolerations) || size(object.spec.tolerations) <= {POD_TOLERATIONS_MAX}"
        )),
        Part::Workloads => {
            let spec = workload_pod_spec("object");
            guards.push(format!(
                "!('tolerations' in {spec}) || size({spec}.tolerations) <= {POD_TOLERATIONS_MAX}"
            ));
        }
        Part::Devices => {}
    }
    if part == Part::Workloads {
        // `WorkloadKind::judged`: not a controlled workload (its owner was
        // judged, its Pods will be), and on an UPDATE only a changed pod
        // template (draguard's other warnings on such an UPDATE stay in the
        // webhook).
        guards.push(
            "!(has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, has(r.controller) && r.controller))"
                .to_owned(),
        );
        guards.push(format!(
            "request.operation == 'CREATE' || {} != {}",
            workload_pod_spec("object"),
            workload_pod_spec("oldObject")
        ));
    } else {
        guards.extend(
            selection::webhook_conditions(part == Part::Pods)
                .into_iter()
                .map(|(_, e)| e.to_owned()),
        );
    }
    guards.extend(namespaces);
    guards.extend(selection::not_exempt(&p.spec.exempt));
    guards
}

/// The policy and its binding for one part; `None` when the policy has
/// no toleration list for it.
///
/// The writes it judges are stated where the apiserver decides them
/// cheapest: namespaces by label in the binding's `namespaceSelector`,
/// and every other condition at the head of each validation
/// (`!(guards) || ...`), not as matchConditions. The apiserver evaluates
/// matchConditions in a CEL pass of their own, with its own activation of
/// `object`, `oldObject` and `request`: on kube-apiserver v1.36.2 that
/// pass alone cost about 0.4 ms a write (`scripts/apiserver-latency.sh`,
/// issue 40), more than the hand-written policy it was measured against.
pub fn policy_and_binding(
    p: &TolerationPolicy,
    part: Part,
    draguard_namespace: &str,
    drivers: &super::driver_configs::Drivers,
) -> Option<[Value; 2]> {
    let target = part.target();
    let j = predicate::judgement(p, target)?;
    let name = name(p, part);
    let namespaces = selection::split_namespaces(p);
    let (rules, mut validations) = match part {
        Part::Pods => (
            json!([{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                    "resources": ["pods"], "scope": "Namespaced"}]),
            vec![pod_spec_validation(p, &j, &["spec"], None)],
        ),
        Part::Workloads => (
            json!([
                {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["deployments", "replicasets", "statefulsets", "daemonsets"], "scope": "Namespaced"},
                {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["jobs", "cronjobs"], "scope": "Namespaced"},
            ]),
            vec![
                pod_spec_validation(p, &j, TEMPLATE_SPEC, Some(&format!("!({IS_CRON_JOB})"))),
                pod_spec_validation(p, &j, CRON_JOB_SPEC, Some(IS_CRON_JOB)),
            ],
        ),
        Part::Devices => (
            json!([{"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                    "resources": ["resourceclaims", "resourceclaimtemplates"], "scope": "Namespaced"}]),
            vec![{
                // One for both, as the Invalid one (`invalid_validation`).
                let claims = claim_validation(p, &j, &["spec"]);
                let templates = claim_validation(p, &j, &["spec", "spec"]);
                let mut both = claims_or_templates(&claims, &templates);
                both["message"] = claims["message"].clone();
                both["reason"] = claims["reason"].clone();
                both
            }],
        ),
    };
    let mut config_variables = Vec::new();
    // Never empty: every part judges only the writes its webhook entry is
    // sent (and `all` of none would be `true`, still sound).
    let judged = super::cel::all(&guards(p, part, namespaces.guard.clone()));
    for v in &mut validations {
        if let Some(e) = v.get_mut("expression")
            && let Some(text) = e.as_str()
        {
            *e = Value::String(format!("!({judged}) || {text}"));
        }
    }
    if part == Part::Devices && carries_configs(p) {
        // First: the webhook's first error is a request's
        // (`validate_claim_spec`), then the configs' (`driver_configs`),
        // then the policies'; the apiserver names a policy's first failed
        // validation.
        let (invalid, variables) = invalid_validation(drivers, namespaces.guard.as_deref());
        validations.insert(0, invalid);
        config_variables = variables;
    }
    let metadata = json!({
        "name": name,
        "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
        "annotations": {"draguard.dev/policy": p.metadata.name},
    });
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": metadata,
        "spec": {
            // As draguard's entries: the Pods' and claims' fail closed (a
            // policy skipped is no policy), the workloads' open (early
            // feedback: the Pods they stamp are judged).
            "failurePolicy": if part == Part::Workloads { "Ignore" } else { "Fail" },
            "matchConstraints": {"matchPolicy": "Equivalent", "resourceRules": rules},
            "validations": validations,
        },
    });
    let mut policy = policy;
    if !config_variables.is_empty() {
        policy["spec"]["variables"] = Value::Array(config_variables);
    }
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": metadata,
        "spec": {
            "policyName": name,
            "validationActions": [actions(p.spec.mode)],
            "matchResources": {"namespaceSelector": selection::binding_namespace_selector(
                draguard_namespace,
                &namespaces.requirements,
            )},
        },
    });
    Some([policy, binding])
}
