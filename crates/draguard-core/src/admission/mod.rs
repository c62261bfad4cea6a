//! The AdmissionReview v1 envelope: reading a review body, answering it.
//! Shared by the HTTPS server and `draguard review`, so both give the same
//! answer for the same input. The verdict is rendered here, at the edge:
//! the core's [`Decision`] becomes a Kubernetes `Status` ([`status`]) inside
//! an [`AdmissionAnswer`].

mod answer;
mod status;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

pub use answer::AdmissionAnswer;
pub use status::status;

use crate::objects::ObjectJson;
use crate::review::{Context, review};
use crate::verdict::{Decision, Envelope, Request, ReviewError};

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
    /// The review's own `apiVersion`, answered in kind.
    api_version: String,
    kind: String,
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
    kind: kube_core::GroupVersionKind,
    resource: kube_core::GroupVersionResource,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    operation: kube_core::admission::Operation,
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
        // UTF-8 checked once for the whole body: serde_json then reads it
        // as text (`from_str`), which is `from_slice` without checking each
        // string and raw object again (~5k instructions of a claim's 2.6 KB
        // review). A body that is not UTF-8 is read as it always was, for
        // the same error.
        let wire = match std::str::from_utf8(body) {
            Ok(text) => serde_json::from_str::<WireReview>(text),
            Err(_) => serde_json::from_slice::<WireReview>(body),
        };
        match wire {
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
                    api_version: wire.api_version,
                    kind: wire.kind,
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
        let (api_version, kind) = envelope_types(&raw)?;
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
        Ok(Incoming {
            api_version,
            kind,
            uid,
            request,
        })
    }

    pub fn uid(&self) -> &str {
        &self.uid
    }

    pub fn request(&self) -> Option<&Request> {
        self.request.as_ref().ok()
    }

    /// The core's verdict on this request.
    pub fn decide(&self, ctx: &Context<'_>) -> Decision {
        match &self.request {
            Ok(req) => review(req, ctx),
            Err(e) => Decision::bad_request(e.clone()),
        }
    }

    /// The verdict on a `scale` write, given the workload it scales as
    /// stored (fetched by the server): allowed, with the warning of the
    /// Pods it would stamp ([`crate::review::scale`]).
    pub fn decide_scale(&self, ctx: &Context<'_>, workload: Value) -> Decision {
        match &self.request {
            Ok(req) => crate::review::scale::review_scale(req, workload, ctx),
            Err(e) => Decision::bad_request(e.clone()),
        }
    }

    /// The AdmissionReview response that carries `decision` back.
    pub fn answer_with<'a>(&'a self, decision: &'a Decision, ctx: &Context<'_>) -> AdmissionAnswer<'a> {
        AdmissionAnswer::new(&self.api_version, &self.kind, &self.uid, decision, ctx.phase)
    }

    /// Decides, and renders the response as a JSON tree (for callers that
    /// read it back; the server sends [`Self::answer_with`]'s bytes).
    pub fn answer(&self, ctx: &Context<'_>) -> (Decision, Value) {
        let decision = self.decide(ctx);
        // Serializing strings, bools and a kube `Status` into a tree cannot
        // fail; `Null` would only ever show a bug.
        let body = self.answer_with(&decision, ctx).to_value().unwrap_or(Value::Null);
        (decision, body)
    }
}

fn is_review_version(api_version: &str) -> bool {
    matches!(api_version, "admission.k8s.io/v1" | "admission.k8s.io/v1beta1")
}

fn envelope_types(raw: &Value) -> Result<(String, String), EnvelopeError> {
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
    Ok((api_version.to_owned(), kind.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(object: &str) -> String {
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u-\u00e9","kind":{{"group":"","version":"v1","kind":"Pod"}},"resource":{{"group":"","version":"v1","resource":"pods"}},"operation":"CREATE","object":{object}}}}}"#
        )
    }

    /// What `parse` relies on: of a UTF-8 body, serde_json's text reader
    /// reads what its byte reader reads, and fails where it fails, with the
    /// same message (escapes, lone surrogates, control characters).
    #[test]
    fn text_and_bytes_read_alike() {
        let objects = [
            r#"{"metadata":{"name":"é-\u00e9-\ud83d\ude00"}}"#,
            r#"{"metadata":{"name":"\ud800"}}"#,
            r#"{"metadata":{"name":"\udc00x"}}"#,
            "{\"metadata\":{\"name\":\"a\u{1}b\"}}",
            r#"{"metadata":{"name":"\x"}}"#,
            r#"{"metadata":{"name":"a"}"#,
            "null",
        ];
        for object in objects {
            let body = review(object);
            let summary = |r: Result<WireReview, serde_json::Error>| match r {
                Ok(w) => Ok((w.request.uid, w.request.object.map(|o| o.get().to_owned()))),
                Err(e) => Err(e.to_string()),
            };
            let bytes = summary(serde_json::from_slice::<WireReview>(body.as_bytes()));
            let text = summary(serde_json::from_str::<WireReview>(&body));
            assert_eq!(text, bytes, "{object}");
        }
    }

    /// A body that is not UTF-8 gets the byte reader's answer, as before.
    #[test]
    fn a_body_that_is_not_utf8_is_read_as_bytes() {
        let mut body = review(r#"{"metadata":{"name":"XX"}}"#).into_bytes();
        let at = body.windows(2).position(|w| w == b"XX").expect("marker");
        body[at] = 0xff;
        let Err(error) = Incoming::parse(&body) else {
            panic!("not UTF-8, yet parsed")
        };
        assert!(error.to_string().contains("invalid unicode code point"), "{error}");
    }
}
