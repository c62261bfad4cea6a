//! The AdmissionReview v1 envelope: reading a review body, answering it.
//! Shared by the HTTPS server and `draguard review`, so both give the same
//! bytes for the same input. The verdict is rendered here, at the edge:
//! the core's [`Decision`] becomes a Kubernetes `Status`.

use base64::Engine as _;
use kube::core::TypeMeta;
use kube::core::admission::AdmissionResponse;
use kube::core::response::{Status, StatusCause, StatusDetails, StatusSummary};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::field::FieldError;
use crate::objects::ObjectJson;
use crate::policy::enforce::Violation;
use crate::review::{Context, Decision, Denial, Envelope, ObjectRef, Phase, Request, ReviewError, review};

/// A body that is not an AdmissionReview at all: answered with HTTP 400.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EnvelopeError {
    #[error("request body is not JSON: {0}")]
    NotJson(String),
    #[error("request body is not an AdmissionReview: {0}")]
    NotAdmissionReview(String),
}

/// A review body that has a uid to answer to.
pub struct Incoming {
    types: TypeMeta,
    uid: String,
    /// The decoded request, or why it could not be decoded.
    request: Result<Request, ReviewError>,
}

/// The AdmissionReview as the fast path reads it: straight from the bytes,
/// the objects kept as raw JSON text for their kind to decode.
#[derive(Deserialize)]
struct WireReview {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    request: WireRequest,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireRequest {
    uid: String,
    kind: kube::core::GroupVersionKind,
    resource: kube::core::GroupVersionResource,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: kube::core::admission::Operation,
    #[serde(default)]
    user_info: k8s_openapi::api::authentication::v1::UserInfo,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    object: Option<Box<RawValue>>,
    #[serde(default)]
    old_object: Option<Box<RawValue>>,
}

/// JSON `null` is no object at all.
fn raw_object(raw: Option<Box<RawValue>>) -> Option<ObjectJson> {
    raw.filter(|r| r.get() != "null").map(ObjectJson::Raw)
}

impl Incoming {
    /// Reads the body in one pass into the envelope and raw objects. A
    /// body the fast path refuses is read again as a tree, uid first, so
    /// that a request whose envelope cannot be decoded still gets an answer
    /// (and the same message as ever) instead of a failed call.
    pub fn parse(body: &[u8]) -> Result<Self, EnvelopeError> {
        match serde_json::from_slice::<WireReview>(body) {
            Ok(wire)
                if wire.kind == "AdmissionReview"
                    && is_review_version(&wire.api_version)
                    && !wire.request.uid.is_empty() =>
            {
                let r = wire.request;
                let envelope = Envelope {
                    uid: r.uid.clone(),
                    kind: r.kind,
                    resource: r.resource,
                    sub_resource: r.sub_resource,
                    name: r.name,
                    namespace: r.namespace,
                    operation: r.operation,
                    user_info: r.user_info,
                    dry_run: r.dry_run,
                };
                Ok(Incoming {
                    types: TypeMeta {
                        api_version: wire.api_version,
                        kind: wire.kind,
                    },
                    uid: r.uid,
                    request: Ok(Request {
                        envelope,
                        object: raw_object(r.object),
                        old_object: raw_object(r.old_object),
                    }),
                })
            }
            _ => Self::parse_tree(body),
        }
    }

    /// The careful path: every check in order, each with its own message.
    fn parse_tree(body: &[u8]) -> Result<Self, EnvelopeError> {
        let mut raw: Value = serde_json::from_slice(body).map_err(|e| EnvelopeError::NotJson(e.to_string()))?;
        let types = envelope_types(&raw)?;
        let Some(request) = raw.get_mut("request").and_then(Value::as_object_mut) else {
            return Err(EnvelopeError::NotAdmissionReview("it has no request".into()));
        };
        let uid = match request.get("uid") {
            Some(Value::String(uid)) if !uid.is_empty() => uid.clone(),
            _ => return Err(EnvelopeError::NotAdmissionReview("request.uid is missing".into())),
        };
        let object = request.remove("object").filter(|v| !v.is_null()).map(ObjectJson::Tree);
        let old_object = request
            .remove("oldObject")
            .filter(|v| !v.is_null())
            .map(ObjectJson::Tree);
        let request = serde_json::from_value::<Envelope>(Value::Object(std::mem::take(request)))
            .map_err(|e| ReviewError::Envelope(format!("cannot decode the AdmissionReview request: {e}")))
            .map(|envelope| Request {
                envelope,
                object,
                old_object,
            });
        Ok(Incoming { types, uid, request })
    }

    pub fn uid(&self) -> &str {
        &self.uid
    }

    pub fn request(&self) -> Option<&Request> {
        self.request.as_ref().ok()
    }

    /// Decides and renders the AdmissionReview response for this request.
    pub fn answer(&self, ctx: &Context<'_>) -> (Decision, Value) {
        let decision = match &self.request {
            Ok(req) => review(req, ctx),
            Err(e) => Decision::bad_request(e.clone()),
        };
        let body = render(&self.types, &self.uid, &decision, ctx.phase);
        (decision, body)
    }
}

fn is_review_version(api_version: &str) -> bool {
    matches!(api_version, "admission.k8s.io/v1" | "admission.k8s.io/v1beta1")
}

fn envelope_types(raw: &Value) -> Result<TypeMeta, EnvelopeError> {
    let Some(obj) = raw.as_object() else {
        return Err(EnvelopeError::NotAdmissionReview("it is not a JSON object".into()));
    };
    let text = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    if kind != "AdmissionReview" {
        return Err(EnvelopeError::NotAdmissionReview(format!(
            "kind is {kind:?}, expected \"AdmissionReview\""
        )));
    }
    if !is_review_version(api_version) {
        return Err(EnvelopeError::NotAdmissionReview(format!(
            "apiVersion is {api_version:?}, expected \"admission.k8s.io/v1\""
        )));
    }
    Ok(TypeMeta {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
    })
}

/// Renders a decision as the AdmissionReview the apiserver expects. Only
/// `/mutate` answers carry a patch ([`Phase::Both`] renders the verdict on
/// the mutated object, as `/validate` would see it); the patch is sent as a
/// base64 string, as the AdmissionReview API specifies.
pub fn render(types: &TypeMeta, uid: &str, decision: &Decision, phase: Phase) -> Value {
    let mut response = AdmissionResponse::invalid("");
    response.types = types.clone();
    response.uid = uid.to_owned();
    response.allowed = decision.allowed;
    response.result = decision.denial.as_ref().map(status).unwrap_or_default();
    if !decision.warnings.is_empty() {
        response.warnings = Some(decision.warning_texts());
    }
    if !decision.audit.is_empty() {
        // The apiserver prefixes the key with the webhook's name.
        response
            .audit_annotations
            .insert("policy-audit".to_owned(), decision.audit.join("; "));
    }
    let wants_patch = phase == Phase::Mutate && decision.allowed && !decision.patch.is_empty();
    if wants_patch {
        response = match response.with_patch(json_patch::Patch(decision.patch.clone())) {
            Ok(r) => r,
            Err(e) => {
                // Cannot happen for JSON values; refuse loudly rather than
                // admit an object without its mutation.
                let mut r = AdmissionResponse::invalid(format!("cannot encode the patch: {e}"));
                r.types = types.clone();
                r.uid = uid.to_owned();
                r
            }
        };
    }
    let mut review = serde_json::to_value(response.into_review()).unwrap_or(Value::Null);
    encode_patch_base64(&mut review);
    review
}

/// kube-rs serializes `response.patch` as an array of numbers; the API says
/// base64 (kube-rs issue #1781).
fn encode_patch_base64(review: &mut Value) {
    let Some(patch) = review.pointer_mut("/response/patch") else {
        return;
    };
    if let Value::Array(bytes) = patch {
        let raw: Vec<u8> = bytes
            .iter()
            .filter_map(Value::as_u64)
            .filter_map(|b| u8::try_from(b).ok())
            .collect();
        *patch = Value::String(base64::engine::general_purpose::STANDARD.encode(raw));
    }
}

/// The Kubernetes `Status` of a denial, as the apiserver would build it.
pub fn status(denial: &Denial) -> Status {
    match denial {
        Denial::Invalid { object, errors } => invalid(object, errors),
        Denial::Forbidden {
            object,
            resource,
            violations,
        } => forbidden(object, resource, violations),
        Denial::BadRequest(e) => Status {
            status: Some(StatusSummary::Failure),
            code: 400,
            message: e.to_string(),
            reason: "BadRequest".to_owned(),
            details: None,
            metadata: None,
        },
    }
}

/// `apierrors.NewInvalid`: HTTP 422, reason Invalid, every error a cause,
/// the message the aggregate of the distinct errors.
fn invalid(object: &ObjectRef, errs: &[FieldError]) -> Status {
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
        message: format!("{} is invalid: {}", object.describe(), aggregate),
        reason: "Invalid".to_owned(),
        details: Some(StatusDetails {
            name: object.name.clone(),
            group: object.group.clone(),
            kind: object.kind.clone(),
            uid: String::new(),
            causes,
            retry_after_seconds: 0,
        }),
        metadata: None,
    }
}

/// `apierrors.NewForbidden`: HTTP 403, reason Forbidden, one cause per
/// refused toleration.
fn forbidden(object: &ObjectRef, resource: &kube::core::GroupVersionResource, violations: &[Violation]) -> Status {
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
            crate::field::go_quote(&object.name),
            messages.join("; ")
        ),
        reason: "Forbidden".to_owned(),
        details: Some(StatusDetails {
            name: object.name.clone(),
            group: object.group.clone(),
            kind: resource.resource.clone(),
            uid: String::new(),
            causes,
            retry_after_seconds: 0,
        }),
        metadata: None,
    }
}
