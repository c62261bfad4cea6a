//! The AdmissionReview v1 envelope: reading a review body, answering it.
//! Shared by the HTTPS server and `draguard review`, so both give the same
//! bytes for the same input.

use base64::Engine as _;
use kube::core::admission::{AdmissionResponse, AdmissionReview};
use kube::core::response::{Status, StatusSummary};
use kube::core::{DynamicObject, TypeMeta};
use serde_json::Value;

use crate::review::{Context, Decision, Phase, Request, review};

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
    request: Result<Request, String>,
}

impl Incoming {
    /// Reads the uid first, so that a request whose object cannot be decoded
    /// still gets an answer instead of a failed call.
    pub fn parse(body: &[u8]) -> Result<Self, EnvelopeError> {
        let mut raw: Value = serde_json::from_slice(body).map_err(|e| EnvelopeError::NotJson(e.to_string()))?;
        let types = envelope_types(&raw)?;
        let Some(request) = raw.get_mut("request").and_then(Value::as_object_mut) else {
            return Err(EnvelopeError::NotAdmissionReview("it has no request".into()));
        };
        let uid = match request.get("uid") {
            Some(Value::String(uid)) if !uid.is_empty() => uid.clone(),
            _ => return Err(EnvelopeError::NotAdmissionReview("request.uid is missing".into())),
        };
        let object = request.remove("object").filter(|v| !v.is_null());
        let old_object = request.remove("oldObject").filter(|v| !v.is_null());
        let request = serde_json::from_value::<AdmissionReview<DynamicObject>>(raw)
            .map_err(|e| format!("cannot decode the AdmissionReview request: {e}"))
            .and_then(|review| {
                review
                    .try_into()
                    .map_err(|_| "cannot decode the AdmissionReview request: it has no request".to_owned())
            })
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
            Err(message) => Decision {
                allowed: false,
                status: Some(Status {
                    status: Some(StatusSummary::Failure),
                    code: 400,
                    message: message.clone(),
                    reason: "BadRequest".into(),
                    details: None,
                    metadata: None,
                }),
                ..Decision::default()
            },
        };
        let body = render(&self.types, &self.uid, &decision, ctx.phase);
        (decision, body)
    }
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
    if !matches!(api_version, "admission.k8s.io/v1" | "admission.k8s.io/v1beta1") {
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
    response.result = decision.status.clone().unwrap_or_default();
    if !decision.warnings.is_empty() {
        response.warnings = Some(decision.warnings.clone());
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
