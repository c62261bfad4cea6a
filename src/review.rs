//! THE core: one pure function decides every admission question.
//!
//! `review(&Request, &Context) -> Decision` does no IO and reads no clock:
//! time and cluster facts come in through the [`Context`]. The HTTPS server,
//! `draguard review` and `draguard check` are thin doors into it.

use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};
use kube::core::response::{Status, StatusCause, StatusDetails, StatusSummary};
use serde_json::Value;

use crate::cluster::ClusterView;
use crate::field::{FieldError, Path};
use crate::objects::dra::{DeviceTaintRuleSpec, SliceSpec};
use crate::objects::patch::PatchSpec;
use crate::objects::pod::{PodSpecView, node_taints};
use crate::objects::workload::Workload;
use crate::objects::{ClaimSpec, ClaimVersion, DecodeError, Kind, meta::object_meta};
use crate::policy::PolicySet;
use crate::policy::Selection;
use crate::policy::apply::{self, Asker, TolerationList};
use crate::policy::enforce::{Outcome, Target as PolicyTarget, Violation};
use crate::policy::model::Mode;
use crate::policy::ptr::{self, PtrConfig};
use crate::quota::{Charge, Limits, charge, excesses};
use crate::rules;
use k8s_openapi::api::authentication::v1::UserInfo;

/// What the apiserver sent, split so the object stays raw JSON: rules read
/// typed views decoded from it, patches are computed against it, and fields
/// unknown to draguard are never lost.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request envelope with `object` and `oldObject` taken out.
    pub envelope: AdmissionRequest<DynamicObject>,
    pub object: Option<Value>,
    pub old_object: Option<Value>,
}

/// Which half of admission is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// `/mutate`: compute patches, never deny for validation reasons.
    Mutate,
    /// `/validate`: judge the object as it is.
    Validate,
    /// `check` and `review --mutate`: mutate, then validate the result.
    Both,
}

/// Everything the core may know besides the request itself.
pub struct Context<'a> {
    pub now: jiff::Timestamp,
    pub cluster: &'a dyn ClusterView,
    pub policies: &'a PolicySet,
    /// PodTolerationRestriction compatibility, when enabled: the plugin's
    /// cluster configuration (namespace annotations come from `cluster`).
    pub ptr: Option<&'a PtrConfig>,
    pub phase: Phase,
}

/// The verdict: allowed or not, why, what to patch, what to warn about.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    pub allowed: bool,
    pub status: Option<Status>,
    pub patch: Vec<json_patch::PatchOperation>,
    pub warnings: Vec<String>,
    /// What Audit-mode policies would have denied: logged, counted, and
    /// sent as audit annotations.
    pub audit: Vec<String>,
}

impl Decision {
    pub fn allow() -> Self {
        Decision {
            allowed: true,
            ..Default::default()
        }
    }

    fn deny(status: Status) -> Self {
        Decision {
            allowed: false,
            status: Some(status),
            ..Default::default()
        }
    }

    /// The field path of every cause, in order.
    pub fn cause_fields(&self) -> Vec<&str> {
        self.status
            .as_ref()
            .and_then(|s| s.details.as_ref())
            .map(|d| d.causes.iter().map(|c| c.field.as_str()).collect())
            .unwrap_or_default()
    }
}

/// Decides one admission request.
pub fn review(req: &Request, ctx: &Context<'_>) -> Decision {
    let env = &req.envelope;
    if matches!(env.operation, Operation::Delete | Operation::Connect) || env.sub_resource.is_some() {
        return Decision::allow();
    }
    let Some(kind) = Kind::route(&env.kind.group, &env.kind.version, &env.kind.kind) else {
        return Decision::allow();
    };
    let Some(object) = req.object.as_ref() else {
        return Decision::deny(bad_request(format!(
            "{} {} request carries no object",
            env.kind.kind,
            operation_name(&env.operation)
        )));
    };
    let old = match (&req.old_object, &env.operation) {
        (Some(old), Operation::Update) => Some(old),
        (None, Operation::Update) => {
            return Decision::deny(bad_request(format!(
                "{} UPDATE request carries no oldObject",
                env.kind.kind
            )));
        }
        _ => None,
    };
    if let Kind::Workload(w) = kind
        && !w.template_to_judge(object, old)
    {
        return Decision::allow();
    }
    let namespace = env.namespace.as_deref().unwrap_or("");
    // `/validate` judges the object as it will be stored: the apiserver has
    // applied `/mutate`'s patch already, or chose to go on without it.
    let mut patch = Vec::new();
    if ctx.phase != Phase::Validate {
        patch = mutations(kind, object, old, ctx);
    }
    if env.operation == Operation::Create && ctx.phase != Phase::Validate {
        match create_defaults(kind, object, namespace, &env.user_info, ctx) {
            Ok(ops) => patch.extend(ops),
            // An object that does not decode gets no defaults; /validate says why.
            Err(_) if ctx.phase == Phase::Mutate => {}
            Err(e) => return Decision::deny(bad_request(e)),
        }
    }
    if ctx.phase == Phase::Mutate {
        return Decision {
            patch,
            ..Decision::allow()
        };
    }
    // `/validate` sees the object after mutation, and so do `check` and `review`.
    let mutated;
    let judged = if patch.is_empty() {
        object
    } else {
        match crate::mutate::apply(object, &patch) {
            Ok(v) => {
                mutated = v;
                &mutated
            }
            Err(e) => return Decision::deny(bad_request(e.to_string())),
        }
    };
    let target = Target::new(env, judged);
    match validate(kind, judged, old, namespace, ctx) {
        Ok(v) if v.errors.is_empty() => {
            let mut decision = Decision {
                patch,
                warnings: v.warnings,
                ..Decision::allow()
            };
            match policy_verdict(kind, judged, namespace, &env.user_info, ctx) {
                Ok(mut outcome) => {
                    if let Some(v) = ptr_verdict(kind, judged, namespace, ctx) {
                        outcome.violations.insert(0, v);
                    }
                    if kind == Kind::ResourceSlicePatch {
                        let (violations, warnings) = patch_ties(judged, ctx);
                        outcome.violations.extend(violations);
                        decision.warnings.extend(warnings);
                    }
                    if env.operation == Operation::Create {
                        match quota_verdict(kind, judged, namespace, &env.user_info, ctx) {
                            Ok((violations, warnings)) => {
                                outcome.violations.extend(violations);
                                decision.warnings.extend(warnings);
                            }
                            Err(e) => return Decision::deny(bad_request(e.message)),
                        }
                    }
                    apply_outcome(&mut decision, &outcome, &target, env);
                }
                Err(e) => return Decision::deny(bad_request(e.message)),
            }
            decision
        }
        Ok(v) => Decision {
            warnings: v.warnings,
            ..Decision::deny(target.invalid(&v.errors))
        },
        Err(e) => Decision::deny(bad_request(format!(
            "{} could not be decoded: {}",
            target.describe(),
            e.message
        ))),
    }
}

/// The mutations for this object (SPEC.md §5), against the object as sent.
fn mutations(kind: Kind, object: &Value, old: Option<&Value>, ctx: &Context<'_>) -> Vec<json_patch::PatchOperation> {
    let now = crate::mutate::time_added::format_now(ctx.now);
    match kind {
        Kind::ResourceSlice { v1beta1 } => crate::mutate::time_added::resource_slice(object, v1beta1, &now),
        Kind::DeviceTaintRule => crate::mutate::time_added::rule_taint(object, old, &["spec", "taint"], &now)
            .into_iter()
            .collect(),
        Kind::ResourceSlicePatch => crate::mutate::time_added::patch_taints(object, old, &now),
        _ => Vec::new(),
    }
}

/// The toleration lists policies judge, and who asks, for kinds policies
/// govern (Pods: node tolerations; claims and templates: device ones).
fn policy_lists(kind: Kind, object: &Value) -> Result<Option<(PolicyTarget, Vec<TolerationList>)>, DecodeError> {
    if let Some(tokens) = kind.pod_spec_tokens() {
        let spec = PodSpecView::decode(at(object, tokens))?;
        return Ok(Some((PolicyTarget::Pod, apply::pod_lists(&spec, tokens))));
    }
    Ok(match kind {
        Kind::ResourceClaim(v) => {
            let spec = ClaimSpec::decode(field(object, "spec"), v)?;
            Some((PolicyTarget::Device, apply::claim_lists(&spec, v, &["spec"])))
        }
        Kind::ResourceClaimTemplate(v) => {
            let spec = ClaimSpec::decode(field(field(object, "spec"), "spec"), v)?;
            Some((PolicyTarget::Device, apply::claim_lists(&spec, v, &["spec", "spec"])))
        }
        _ => None,
    })
}

/// Tolerations added on CREATE: PodTolerationRestriction's merge (when
/// enabled) first, as the in-tree plugin runs before webhooks, then the
/// defaults of the policies, computed on the merged object.
fn create_defaults(
    kind: Kind,
    object: &Value,
    namespace: &str,
    user: &UserInfo,
    ctx: &Context<'_>,
) -> Result<Vec<json_patch::PatchOperation>, String> {
    // A workload's Pods get their defaults when they are created; its
    // template is judged as written, in `check` as in the live webhook.
    if matches!(kind, Kind::Workload(_)) {
        return Ok(Vec::new());
    }
    let mut ops = ptr_merge(kind, object, namespace, ctx)?;
    let merged;
    let current = if ops.is_empty() {
        object
    } else {
        merged = crate::mutate::apply(object, &ops).map_err(|e| e.to_string())?;
        &merged
    };
    ops.extend(policy_defaults(kind, current, namespace, user, ctx).map_err(|e| e.message)?);
    Ok(ops)
}

fn ptr_merge(
    kind: Kind,
    object: &Value,
    namespace: &str,
    ctx: &Context<'_>,
) -> Result<Vec<json_patch::PatchOperation>, String> {
    let (Some(config), Kind::Pod) = (ctx.ptr, kind) else {
        return Ok(Vec::new());
    };
    let spec = PodSpecView::decode(field(object, "spec")).map_err(|e| e.message)?;
    let lists = apply::pod_lists(&spec, &["spec"]);
    let tolerations = lists.first().map(|l| l.tolerations.as_slice()).unwrap_or_default();
    let annotations = ctx.cluster.namespace_annotations(namespace);
    let Some(merged) = ptr::admit(&spec, tolerations, annotations.as_ref(), config).map_err(|e| e.to_string())? else {
        return Ok(Vec::new());
    };
    let values: Vec<Value> = merged.iter().filter_map(|t| serde_json::to_value(t).ok()).collect();
    Ok(vec![crate::mutate::set(
        object,
        &["spec", "tolerations"],
        Value::Array(values),
    )])
}

/// What a new claim (or, in `check`, a template times the claims it will
/// stamp) costs; `None` for everything quota does not count.
pub fn quota_charge(
    kind: Kind,
    object: &Value,
    namespace: &str,
    cluster: &dyn ClusterView,
) -> Result<Option<Charge>, DecodeError> {
    Ok(match kind {
        Kind::ResourceClaim(v) => Some(charge(&ClaimSpec::decode(field(object, "spec"), v)?)),
        Kind::ResourceClaimTemplate(v) => {
            let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
            match cluster.template_claims(namespace, name) {
                Some(n) if n > 0 => Some(charge(&ClaimSpec::decode(field(field(object, "spec"), "spec"), v)?).times(n)),
                _ => None,
            }
        }
        _ => None,
    })
}

/// Quota (SPEC.md §7): usage plus this charge must fit every limit of
/// the policies selecting the namespace and of its ResourceQuotas.
fn quota_verdict(
    kind: Kind,
    object: &Value,
    namespace: &str,
    user: &UserInfo,
    ctx: &Context<'_>,
) -> Result<(Vec<Violation>, Vec<String>), DecodeError> {
    if !matches!(kind, Kind::ResourceClaim(_) | Kind::ResourceClaimTemplate(_)) {
        return Ok((Vec::new(), Vec::new()));
    }
    let sources = quota_limits(namespace, user, ctx);
    // Most namespaces have no limits: then the claim is not even decoded again.
    if sources.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let Some(requested) = quota_charge(kind, object, namespace, ctx.cluster)? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let mut warnings = Vec::new();
    let used = ctx.cluster.quota_usage(namespace).unwrap_or_else(|| {
        warnings.push(format!(
            "quota: the usage of namespace {namespace:?} is unknown (no cluster); only this claim's charge ({requested}) was checked against the limits"
        ));
        Charge::default()
    });
    let mut violations = Vec::new();
    for (limits, mode, message, unknown) in sources {
        for excess in excesses(&limits, &used, &requested) {
            let caveat = if unknown {
                format!(" (if the policy applies: the labels of namespace {namespace:?} are unknown)")
            } else {
                String::new()
            };
            let text = format!("{excess}{caveat}");
            violations.push(Violation {
                policy: limits.source.clone(),
                mode,
                field: None,
                message: if message.is_empty() {
                    text
                } else {
                    format!("{text}: {message}")
                },
            });
        }
    }
    Ok((violations, warnings))
}

/// Every quota limit on the namespace: the `quota` of each selecting
/// policy (with its mode, message, and whether selection was a guess) and
/// each ResourceQuota.
fn quota_limits(namespace: &str, user: &UserInfo, ctx: &Context<'_>) -> Vec<(Limits, Mode, String, bool)> {
    let mut sources = Vec::new();
    let mut labels = None;
    for l in &ctx.policies.policies {
        let p = &l.policy;
        let Some(limits) = Limits::from_policy(&p.metadata.name, &p.spec.quota) else {
            continue;
        };
        let labels = labels.get_or_insert_with(|| ctx.cluster.namespace_labels(namespace));
        let selection = p.selects(namespace, labels.as_ref());
        if p.exempts(user) || selection == Selection::NotSelected {
            continue;
        }
        sources.push((
            limits,
            p.spec.mode,
            p.spec.message.clone(),
            selection == Selection::Unknown,
        ));
    }
    for limits in ctx.cluster.resource_quotas(namespace) {
        sources.push((limits, Mode::Enforce, String::new(), false));
    }
    sources
}

/// Priority ties with the known patches: warnings, or denials where a
/// policy sets `patches.denyPriorityTies`.
fn patch_ties(object: &Value, ctx: &Context<'_>) -> (Vec<Violation>, Vec<String>) {
    let Ok(spec) = PatchSpec::decode(field(object, "spec")) else {
        return (Vec::new(), Vec::new());
    };
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    let ties = rules::device_patch::priority_ties(name, &spec.devices, &ctx.cluster.slice_patches());
    let deny = ctx
        .policies
        .policies
        .iter()
        .find(|l| l.policy.spec.patches.deny_priority_ties);
    match deny {
        None => (Vec::new(), ties),
        Some(l) => {
            let violations = ties
                .into_iter()
                .map(|message| Violation {
                    policy: l.policy.metadata.name.clone(),
                    mode: l.policy.spec.mode,
                    field: Some(Path::new("spec").child("devices").child("priority")),
                    message: format!(
                        "toleration policy {:?} denies priority ties: {message}",
                        l.policy.metadata.name
                    ),
                })
                .collect();
            (violations, Vec::new())
        }
    }
}

/// PodTolerationRestriction's whitelist (when enabled), as a violation.
fn ptr_verdict(kind: Kind, object: &Value, namespace: &str, ctx: &Context<'_>) -> Option<Violation> {
    let (Some(config), Some(tokens)) = (ctx.ptr, kind.pod_spec_tokens()) else {
        return None;
    };
    let spec = PodSpecView::decode(at(object, tokens)).ok()?;
    let lists = apply::pod_lists(&spec, tokens);
    let tolerations = lists.first().map(|l| l.tolerations.as_slice()).unwrap_or_default();
    let annotations = ctx.cluster.namespace_annotations(namespace);
    ptr::verify(tolerations, annotations.as_ref(), config)
        .err()
        .map(|e| Violation {
            policy: "PodTolerationRestriction".into(),
            mode: Mode::Enforce,
            field: None,
            message: e.to_string(),
        })
}

/// Runs `f` on the object's toleration lists and who asks, when policies
/// are loaded and the kind has tolerations they govern.
fn with_policy_subject<T: Default>(
    kind: Kind,
    object: &Value,
    namespace: &str,
    user: &UserInfo,
    ctx: &Context<'_>,
    f: impl FnOnce(&Asker<'_>, &[TolerationList]) -> T,
) -> Result<T, DecodeError> {
    if ctx.policies.is_empty() {
        return Ok(T::default());
    }
    let Some((target, lists)) = policy_lists(kind, object)? else {
        return Ok(T::default());
    };
    let labels = ctx.cluster.namespace_labels(namespace);
    let asker = Asker {
        namespace,
        labels: labels.as_ref(),
        user,
        target,
    };
    Ok(f(&asker, &lists))
}

/// Default tolerations of the policies selecting the namespace (CREATE).
fn policy_defaults(
    kind: Kind,
    object: &Value,
    namespace: &str,
    user: &UserInfo,
    ctx: &Context<'_>,
) -> Result<Vec<json_patch::PatchOperation>, DecodeError> {
    with_policy_subject(kind, object, namespace, user, ctx, |asker, lists| {
        apply::default_patches(ctx.policies, asker, lists, object)
    })
}

fn policy_verdict(
    kind: Kind,
    object: &Value,
    namespace: &str,
    user: &UserInfo,
    ctx: &Context<'_>,
) -> Result<Outcome, DecodeError> {
    with_policy_subject(kind, object, namespace, user, ctx, |asker, lists| {
        apply::evaluate(ctx.policies, asker, lists)
    })
}

/// Enforce violations deny (403), Warn ones warn, Audit ones are recorded.
fn apply_outcome(decision: &mut Decision, outcome: &Outcome, target: &Target, env: &AdmissionRequest<DynamicObject>) {
    decision
        .warnings
        .extend(outcome.in_mode(Mode::Warn).map(|v| v.message.clone()));
    decision
        .audit
        .extend(outcome.in_mode(Mode::Audit).map(|v| v.message.clone()));
    let denials: Vec<&Violation> = outcome.in_mode(Mode::Enforce).collect();
    if !denials.is_empty() {
        decision.allowed = false;
        decision.patch.clear();
        decision.status = Some(target.forbidden(&denials, &env.resource));
    }
}

/// What validation found: errors deny, warnings are passed on.
#[derive(Default)]
struct Verdict {
    errors: Vec<FieldError>,
    warnings: Vec<String>,
}

impl From<Vec<FieldError>> for Verdict {
    fn from(errors: Vec<FieldError>) -> Self {
        Verdict {
            errors,
            warnings: Vec::new(),
        }
    }
}

fn validate(
    kind: Kind,
    object: &Value,
    old: Option<&Value>,
    namespace: &str,
    ctx: &Context<'_>,
) -> Result<Verdict, DecodeError> {
    match kind {
        Kind::ResourceClaim(version) => validate_claim(object, old, version, namespace, ctx).map(Verdict::from),
        Kind::ResourceClaimTemplate(version) => {
            validate_template(object, old, version, namespace, ctx).map(Verdict::from)
        }
        Kind::ResourceSlice { .. } => validate_resource_slice(object, old).map(Verdict::from),
        Kind::DeviceTaintRule => validate_device_taint_rule(object, old),
        Kind::ResourceSlicePatch => validate_slice_patch(object, old).map(Verdict::from),
        Kind::Pod => validate_pod(object, old).map(Verdict::from),
        Kind::Node => validate_node(object, old).map(Verdict::from),
        Kind::Workload(w) => validate_workload(object, old, w).map(Verdict::from),
    }
}

/// Metadata: full validation on CREATE, immutable name/namespace on UPDATE.
fn validate_metadata(object: &Value, old: Option<&Value>, namespaced: bool) -> Result<Vec<FieldError>, DecodeError> {
    match old {
        None => Ok(rules::meta::validate_object_meta(
            &object_meta(object)?,
            namespaced,
            &Path::new("metadata"),
        )),
        Some(old) => validate_meta_update(object, old),
    }
}

fn decode_old<T>(
    old: Option<&Value>,
    decode: impl Fn(&Value) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    old.map(|o| decode(o).map_err(|e| DecodeError::new(format!("oldObject: {}", e.message))))
        .transpose()
}

fn validate_claim(
    object: &Value,
    old: Option<&Value>,
    version: ClaimVersion,
    namespace: &str,
    ctx: &Context<'_>,
) -> Result<Vec<FieldError>, DecodeError> {
    let decode = |o: &Value| ClaimSpec::decode(field(o, "spec"), version);
    let spec = decode(object)?;
    let mut errs = rules::meta::validate_object_meta(&object_meta(object)?, true, &Path::new("metadata"));
    match decode_old(old, decode)? {
        None => {
            errs.extend(rules::claim::validate_claim_spec(&spec, &Path::new("spec")));
            errs.extend(admin_access(&spec, namespace, ctx));
        }
        Some(old_spec) => {
            if let Some(old) = old {
                errs.extend(validate_meta_update(object, old)?);
            }
            errs.extend(immutable_spec(&spec, &old_spec, object, &["spec"], &Path::new("spec")));
        }
    }
    Ok(errs)
}

fn validate_template(
    object: &Value,
    old: Option<&Value>,
    version: ClaimVersion,
    namespace: &str,
    ctx: &Context<'_>,
) -> Result<Vec<FieldError>, DecodeError> {
    let decode = |o: &Value| ClaimSpec::decode(field(field(o, "spec"), "spec"), version);
    let spec = decode(object)?;
    let template_spec = field(object, "spec");
    match (old, decode_old(old, decode)?) {
        (Some(old), Some(old_spec)) => {
            let mut errs = validate_meta_update(object, old)?;
            let template_meta_changed = object_meta(template_spec)? != object_meta(field(old, "spec"))?;
            if template_meta_changed && spec == old_spec {
                errs.push(immutable(object, &["spec"], &Path::new("spec")));
            }
            errs.extend(immutable_spec(
                &spec,
                &old_spec,
                object,
                &["spec"],
                &Path::new("spec").child("spec"),
            ));
            Ok(errs)
        }
        _ => {
            let mut errs = rules::meta::validate_object_meta(&object_meta(object)?, true, &Path::new("metadata"));
            let spec_path = Path::new("spec");
            errs.extend(rules::meta::validate_labels_and_annotations(
                &object_meta(template_spec)?,
                &spec_path.child("metadata"),
            ));
            errs.extend(rules::claim::validate_claim_spec(&spec, &spec_path.child("spec")));
            errs.extend(admin_access(&spec, namespace, ctx));
            Ok(errs)
        }
    }
}

/// A claim spec is immutable. When it changed, the apiserver says so; draguard
/// also judges the new spec with enum ratcheting against the old one, so the
/// author learns everything that is wrong with it at once.
fn immutable_spec(
    spec: &ClaimSpec,
    old: &ClaimSpec,
    object: &Value,
    tokens: &[&str],
    spec_path: &Path,
) -> Vec<FieldError> {
    if spec == old {
        return Vec::new();
    }
    let mut errs = vec![immutable(object, tokens, &Path::new("spec"))];
    errs.extend(rules::claim::validate_claim_spec_update(spec, old, spec_path));
    errs
}

/// The common shape of a judgement: decode the spec view of the object (and
/// of the stored object), judge the metadata, then apply `rules`.
fn judge<T>(
    object: &Value,
    old: Option<&Value>,
    namespaced: bool,
    decode: impl Fn(&Value) -> Result<T, DecodeError>,
    rules: impl FnOnce(&T, Option<&T>) -> Vec<FieldError>,
) -> Result<Vec<FieldError>, DecodeError> {
    let view = decode(object)?;
    let old_view = decode_old(old, decode)?;
    let mut errs = validate_metadata(object, old, namespaced)?;
    errs.extend(rules(&view, old_view.as_ref()));
    Ok(errs)
}

fn validate_resource_slice(object: &Value, old: Option<&Value>) -> Result<Vec<FieldError>, DecodeError> {
    let decode = |o: &Value| SliceSpec::decode(field(o, "spec"));
    judge(object, old, false, decode, |spec, old| {
        rules::slice::validate_slice_spec(spec, old, &Path::new("spec"))
    })
}

fn validate_device_taint_rule(object: &Value, old: Option<&Value>) -> Result<Verdict, DecodeError> {
    let decode = |o: &Value| DeviceTaintRuleSpec::decode(field(o, "spec"));
    let mut warnings = Vec::new();
    let errors = judge(object, old, false, decode, |spec, old| {
        warnings = rules::devicetaintrule::device_taint_rule_warnings(spec);
        rules::devicetaintrule::validate_device_taint_rule(spec, old, &Path::new("spec"))
    })?;
    Ok(Verdict { errors, warnings })
}

fn validate_slice_patch(object: &Value, old: Option<&Value>) -> Result<Vec<FieldError>, DecodeError> {
    let decode = |o: &Value| PatchSpec::decode(field(o, "spec"));
    judge(object, old, false, decode, |spec, old| {
        rules::device_patch::validate_patch_spec(spec, old, &Path::new("spec"))
    })
}

fn validate_pod(object: &Value, old: Option<&Value>) -> Result<Vec<FieldError>, DecodeError> {
    let decode = |o: &Value| PodSpecView::decode(field(o, "spec"));
    judge(object, old, true, decode, |spec, old| {
        rules::pod::validate_pod_spec(spec, old, &Path::new("spec"))
    })
}

/// A workload's pod template gets the Pod's rules, except that a template
/// may change freely: its Pods are replaced, not updated.
fn validate_workload(object: &Value, old: Option<&Value>, w: Workload) -> Result<Vec<FieldError>, DecodeError> {
    let decode = |o: &Value| PodSpecView::decode(w.pod_spec(o));
    judge(object, old, true, decode, |spec, old| {
        rules::pod::validate_pod_template_spec(spec, old, &w.pod_spec_path())
    })
}

/// Node taints are reported under `metadata` (ValidateNode passes the
/// metadata path down).
fn validate_node(object: &Value, old: Option<&Value>) -> Result<Vec<FieldError>, DecodeError> {
    let decode = |o: &Value| node_taints(field(o, "spec"));
    judge(object, old, false, decode, |taints, old| {
        let path = Path::new("metadata").child("taints");
        rules::taints::validate_node_taints(taints, old.map(Vec::as_slice), &path)
    })
}

fn admin_access(spec: &ClaimSpec, namespace: &str, ctx: &Context<'_>) -> Vec<FieldError> {
    let labels = ctx.cluster.namespace_labels(namespace);
    rules::claim::validate_admin_access(spec, labels.as_ref())
}

/// `ValidateObjectMetaUpdate`: name and namespace never change.
fn validate_meta_update(object: &Value, old: &Value) -> Result<Vec<FieldError>, DecodeError> {
    let new_meta = object_meta(object)?;
    let old_meta = object_meta(old)?;
    let mut errs = Vec::new();
    let path = Path::new("metadata");
    for (name, new, old) in [
        ("name", &new_meta.name, &old_meta.name),
        ("namespace", &new_meta.namespace, &old_meta.namespace),
    ] {
        let new = new.as_deref().unwrap_or("");
        if new != old.as_deref().unwrap_or("") {
            errs.push(FieldError::invalid(path.child(name), new, "field is immutable"));
        }
    }
    Ok(errs)
}

/// `ValidateImmutableField`: the value shown is the new one, as JSON.
fn immutable(object: &Value, tokens: &[&str], path: &Path) -> FieldError {
    let value = tokens.iter().fold(object, |v, t| field(v, t));
    FieldError::invalid(path.clone(), crate::field::BadValue::from(value), "field is immutable")
}

static NULL: Value = Value::Null;

fn field<'a>(object: &'a Value, name: &str) -> &'a Value {
    object.get(name).unwrap_or(&NULL)
}

/// The value at pointer tokens, or null.
fn at<'a>(object: &'a Value, tokens: &[&str]) -> &'a Value {
    tokens.iter().try_fold(object, |v, t| v.get(t)).unwrap_or(&NULL)
}

/// The operation as the AdmissionReview spells it.
pub fn operation_name(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// The object a verdict is about: `ResourceClaim.resource.k8s.io "name"`.
struct Target {
    group: String,
    kind: String,
    name: String,
}

impl Target {
    fn new(env: &AdmissionRequest<DynamicObject>, object: &Value) -> Self {
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or(&env.name)
            .to_owned();
        Target {
            group: env.kind.group.clone(),
            kind: env.kind.kind.clone(),
            name,
        }
    }

    /// `schema.GroupKind.String()`.
    fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// `apierrors.NewForbidden`: HTTP 403, reason Forbidden, one cause per
    /// refused toleration.
    fn forbidden(&self, violations: &[&Violation], resource: &kube::core::GroupVersionResource) -> Status {
        let qualified = if resource.group.is_empty() {
            resource.resource.clone()
        } else {
            format!("{}.{}", resource.resource, resource.group)
        };
        let causes = violations
            .iter()
            .map(|v| StatusCause {
                reason: "FieldValueForbidden".to_owned(),
                message: v.message.clone(),
                field: v.field.as_ref().map(ToString::to_string).unwrap_or_default(),
            })
            .collect();
        let messages: Vec<&str> = violations.iter().map(|v| v.message.as_str()).collect();
        Status {
            status: Some(StatusSummary::Failure),
            code: 403,
            message: format!(
                "{qualified} {} is forbidden: {}",
                crate::field::go_quote(&self.name),
                messages.join("; ")
            ),
            reason: "Forbidden".to_owned(),
            details: Some(StatusDetails {
                name: self.name.clone(),
                group: self.group.clone(),
                kind: resource.resource.clone(),
                uid: String::new(),
                causes,
                retry_after_seconds: 0,
            }),
            metadata: None,
        }
    }

    fn describe(&self) -> String {
        format!("{} {}", self.qualified_kind(), crate::field::go_quote(&self.name))
    }

    /// `apierrors.NewInvalid`: HTTP 422, reason Invalid, every error a cause,
    /// the message the aggregate of the distinct errors.
    fn invalid(&self, errs: &[FieldError]) -> Status {
        let causes = errs
            .iter()
            .map(|e| StatusCause {
                reason: e.kind.reason().to_owned(),
                message: e.body(),
                field: e.field.to_string(),
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        let distinct: Vec<String> = errs
            .iter()
            .map(ToString::to_string)
            .filter(|m| seen.insert(m.clone()))
            .collect();
        let aggregate = match distinct.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        Status {
            status: Some(StatusSummary::Failure),
            code: 422,
            message: format!("{} is invalid: {}", self.describe(), aggregate),
            reason: "Invalid".to_owned(),
            details: Some(StatusDetails {
                name: self.name.clone(),
                group: self.group.clone(),
                kind: self.kind.clone(),
                uid: String::new(),
                causes,
                retry_after_seconds: 0,
            }),
            metadata: None,
        }
    }
}

fn bad_request(message: String) -> Status {
    Status {
        status: Some(StatusSummary::Failure),
        code: 400,
        message,
        reason: "BadRequest".to_owned(),
        details: None,
        metadata: None,
    }
}
