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
use crate::objects::{ClaimSpec, DecodeError, Kind, meta::object_meta};
use crate::rules;

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
    pub phase: Phase,
}

/// The verdict: allowed or not, why, what to patch, what to warn about.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    pub allowed: bool,
    pub status: Option<Status>,
    pub patch: Vec<json_patch::PatchOperation>,
    pub warnings: Vec<String>,
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
    if ctx.phase == Phase::Mutate {
        // No mutation is defined for these kinds yet.
        return Decision::allow();
    }
    let target = Target::new(env, object);
    match validate(kind, req, object, ctx) {
        Ok(errs) if errs.is_empty() => Decision::allow(),
        Ok(errs) => Decision::deny(target.invalid(&errs)),
        Err(e) => Decision::deny(bad_request(format!(
            "{} could not be decoded: {}",
            target.describe(),
            e.message
        ))),
    }
}

fn validate(kind: Kind, req: &Request, object: &Value, ctx: &Context<'_>) -> Result<Vec<FieldError>, DecodeError> {
    let update = req.envelope.operation == Operation::Update;
    let old = match (&req.old_object, update) {
        (Some(old), true) => Some(old),
        (None, true) => return Err(DecodeError::new("UPDATE request carries no oldObject")),
        _ => None,
    };
    let namespace = req.envelope.namespace.as_deref().unwrap_or("");
    match kind {
        Kind::ResourceClaim(version) => {
            let spec = ClaimSpec::decode(field(object, "spec"), version)?;
            match old {
                None => validate_claim_create(object, &spec, namespace, ctx),
                Some(old) => {
                    let old_spec = ClaimSpec::decode(field(old, "spec"), version)
                        .map_err(|e| DecodeError::new(format!("oldObject: {}", e.message)))?;
                    let mut errs =
                        rules::meta::validate_object_meta(&object_meta(object)?, true, &Path::new("metadata"));
                    errs.extend(validate_meta_update(object, old)?);
                    errs.extend(immutable(spec != old_spec, object, "spec"));
                    Ok(errs)
                }
            }
        }
        Kind::ResourceClaimTemplate(version) => {
            let template_spec = field(object, "spec");
            let spec = ClaimSpec::decode(field(template_spec, "spec"), version)?;
            match old {
                None => {
                    let mut errs =
                        rules::meta::validate_object_meta(&object_meta(object)?, true, &Path::new("metadata"));
                    let spec_path = Path::new("spec");
                    errs.extend(rules::meta::validate_labels_and_annotations(
                        &object_meta(template_spec)?,
                        &spec_path.child("metadata"),
                    ));
                    let claim_path = spec_path.child("spec");
                    errs.extend(rules::claim::validate_claim_spec(&spec, &claim_path));
                    errs.extend(admin_access(&spec, namespace, ctx));
                    Ok(errs)
                }
                Some(old) => {
                    let old_template_spec = field(old, "spec");
                    let old_spec = ClaimSpec::decode(field(old_template_spec, "spec"), version)
                        .map_err(|e| DecodeError::new(format!("oldObject: {}", e.message)))?;
                    let changed = spec != old_spec || object_meta(template_spec)? != object_meta(old_template_spec)?;
                    let mut errs = validate_meta_update(object, old)?;
                    errs.extend(immutable(changed, object, "spec"));
                    Ok(errs)
                }
            }
        }
    }
}

fn validate_claim_create(
    object: &Value,
    spec: &ClaimSpec,
    namespace: &str,
    ctx: &Context<'_>,
) -> Result<Vec<FieldError>, DecodeError> {
    let mut errs = rules::meta::validate_object_meta(&object_meta(object)?, true, &Path::new("metadata"));
    let spec_path = Path::new("spec");
    errs.extend(rules::claim::validate_claim_spec(spec, &spec_path));
    errs.extend(admin_access(spec, namespace, ctx));
    Ok(errs)
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
fn immutable(changed: bool, object: &Value, name: &str) -> Option<FieldError> {
    changed.then(|| {
        FieldError::invalid(
            Path::new(name),
            crate::field::BadValue::from(field(object, name)),
            "field is immutable",
        )
    })
}

static NULL: Value = Value::Null;

fn field<'a>(object: &'a Value, name: &str) -> &'a Value {
    object.get(name).unwrap_or(&NULL)
}

fn operation_name(op: &Operation) -> &'static str {
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
