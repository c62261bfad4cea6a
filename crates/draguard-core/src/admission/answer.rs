//! The AdmissionReview response, serialized straight from the decision.
//!
//! kube-rs's `AdmissionResponse` would do, but it holds an owned copy of
//! everything, serializes the patch as an array of numbers (kube-rs #1781)
//! and so needs a `serde_json::Value` round trip to fix. This struct borrows
//! from the decision and writes the wire form once, field for field what
//! `AdmissionResponse` writes (`status` is always present, `{}` when
//! allowed), with the patch as the base64 string the API specifies.

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine as _;
use kube_core::response::Status;
use serde::Serialize;

use super::status::{MAX_CAUSE_MESSAGE_BYTES, MAX_CAUSES, MAX_MESSAGE_BYTES, status, truncate};
use crate::verdict::{Decision, Phase};

/// `{"apiVersion", "kind", "response"}`: what a webhook answers.
#[derive(Debug, Serialize)]
pub struct AdmissionAnswer<'a> {
    #[serde(rename = "apiVersion")]
    api_version: &'a str,
    kind: &'a str,
    response: ResponseBody<'a>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseBody<'a> {
    uid: &'a str,
    allowed: bool,
    status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    audit_annotations: BTreeMap<&'static str, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<Cow<'a, str>>,
}

impl<'a> AdmissionAnswer<'a> {
    /// The answer to review `uid` (sent as `api_version`/`kind`). Only
    /// `/mutate` answers carry a patch; [`Phase::Both`] renders the verdict
    /// on the mutated object, as `/validate` would see it.
    pub fn new(api_version: &'a str, kind: &'a str, uid: &'a str, decision: &'a Decision, phase: Phase) -> Self {
        let wants_patch = phase == Phase::Mutate && decision.allowed && !decision.patch.is_empty();
        let patch = wants_patch.then(|| encode_patch(&decision.patch));
        let mut audit_annotations = BTreeMap::new();
        if !decision.audit.is_empty() {
            // The apiserver prefixes the key with the webhook's name.
            let mut audit = decision.audit.join("; ");
            truncate(&mut audit, MAX_MESSAGE_BYTES);
            audit_annotations.insert("policy-audit", audit);
        }
        AdmissionAnswer {
            api_version,
            kind,
            response: ResponseBody {
                uid,
                allowed: decision.allowed,
                status: decision.denial.as_ref().map(status).unwrap_or_default(),
                patch_type: patch.as_ref().map(|_| "JSONPatch"),
                patch,
                audit_annotations,
                warnings: bounded_warnings(decision),
            },
        }
    }

    /// The Status message (empty when allowed), as sent.
    pub fn status_message(&self) -> &str {
        &self.response.status.message
    }

    /// The bytes sent to the apiserver.
    pub fn to_vec(&self) -> Result<Vec<u8>, serde_json::Error> {
        // A typical answer is a few hundred bytes; one allocation covers it.
        let mut out = Vec::with_capacity(512);
        serde_json::to_writer(&mut out, self)?;
        Ok(out)
    }

    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::to_value(self)
    }
}

/// The warnings, bounded as a Status's causes are: at most [`MAX_CAUSES`],
/// then one saying how many more there were, each cut at
/// [`MAX_CAUSE_MESSAGE_BYTES`]. A request with thousands of warned-about
/// tolerations must not get a multi-megabyte answer; kubectl prints each.
fn bounded_warnings(decision: &Decision) -> Vec<Cow<'_, str>> {
    let mut warnings: Vec<Cow<'_, str>> = decision
        .warnings
        .iter()
        .take(MAX_CAUSES)
        .map(|w| {
            if w.message.len() <= MAX_CAUSE_MESSAGE_BYTES {
                Cow::Borrowed(w.message.as_str())
            } else {
                let mut cut = w.message.clone();
                truncate(&mut cut, MAX_CAUSE_MESSAGE_BYTES);
                Cow::Owned(cut)
            }
        })
        .collect();
    let more = decision.warnings.len().saturating_sub(MAX_CAUSES);
    if more > 0 {
        warnings.push(Cow::Owned(format!("… and {more} more warnings")));
    }
    warnings
}

/// RFC 6902 JSON, then base64. Serializing `PatchOperation`s into a
/// `Vec<u8>` cannot fail: they hold only strings and JSON values.
fn encode_patch(patch: &[json_patch::PatchOperation]) -> String {
    let json = serde_json::to_vec(patch).unwrap_or_else(|_| b"[]".to_vec());
    base64::engine::general_purpose::STANDARD.encode(json)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::verdict::{ReviewError, Warning};

    fn allowed() -> Decision {
        Decision::allow()
    }

    fn text(answer: &AdmissionAnswer<'_>) -> String {
        String::from_utf8(answer.to_vec().expect("serializable")).expect("utf-8")
    }

    #[test]
    fn an_allowed_answer_is_what_kube_rs_would_write() {
        let decision = allowed();
        let answer = AdmissionAnswer::new(
            "admission.k8s.io/v1",
            "AdmissionReview",
            "u-1",
            &decision,
            Phase::Validate,
        );
        assert_eq!(
            text(&answer),
            r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u-1","allowed":true,"status":{}}}"#
        );
    }

    #[test]
    fn the_patch_goes_out_as_base64_json_patch_on_mutate_only() {
        let mut decision = allowed();
        decision.patch = serde_json::from_value(json!([{"op": "add", "path": "/a", "value": 1}])).expect("patch");
        let mutate = AdmissionAnswer::new("admission.k8s.io/v1", "AdmissionReview", "u", &decision, Phase::Mutate)
            .to_value()
            .expect("value");
        let encoded = mutate["response"]["patch"].as_str().expect("a string");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64");
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&decoded).expect("json"),
            json!([{"op": "add", "path": "/a", "value": 1}])
        );
        assert_eq!(mutate["response"]["patchType"], "JSONPatch");
        for phase in [Phase::Validate, Phase::Both] {
            let other = AdmissionAnswer::new("admission.k8s.io/v1", "AdmissionReview", "u", &decision, phase)
                .to_value()
                .expect("value");
            assert_eq!(other["response"].get("patch"), None, "{phase:?}");
            assert_eq!(other["response"].get("patchType"), None, "{phase:?}");
        }
    }

    #[test]
    fn warnings_and_audit_are_bounded() {
        let mut decision = allowed();
        decision.warnings = (0..250).map(|i| Warning::new(format!("w{i}"))).collect();
        decision.warnings[0].message = "x".repeat(MAX_CAUSE_MESSAGE_BYTES + 10);
        decision.audit = vec!["a".repeat(MAX_MESSAGE_BYTES); 3];
        let value = AdmissionAnswer::new(
            "admission.k8s.io/v1",
            "AdmissionReview",
            "u",
            &decision,
            Phase::Validate,
        )
        .to_value()
        .expect("value");
        let warnings = value["response"]["warnings"].as_array().expect("warnings");
        assert_eq!(warnings.len(), MAX_CAUSES + 1);
        assert_eq!(warnings[1], "w1");
        assert_eq!(warnings[MAX_CAUSES], "… and 150 more warnings");
        let first = warnings[0].as_str().expect("text");
        assert!(first.ends_with("… (10 bytes more)"), "{}", &first[first.len() - 40..]);
        let audit = value["response"]["auditAnnotations"]["policy-audit"]
            .as_str()
            .expect("audit");
        assert!(audit.len() < MAX_MESSAGE_BYTES + 100, "{} bytes", audit.len());
    }

    #[test]
    fn warnings_audit_and_status_are_rendered() {
        let mut decision = Decision::bad_request(ReviewError::Envelope("no".into()));
        decision.warnings.push(Warning::new("heads up"));
        decision.audit = vec!["one".into(), "two".into()];
        let value = AdmissionAnswer::new(
            "admission.k8s.io/v1beta1",
            "AdmissionReview",
            "u",
            &decision,
            Phase::Mutate,
        )
        .to_value()
        .expect("value");
        assert_eq!(value["apiVersion"], "admission.k8s.io/v1beta1");
        assert_eq!(value["response"]["allowed"], false);
        assert_eq!(value["response"]["status"]["code"], 400);
        assert_eq!(value["response"]["status"]["reason"], "BadRequest");
        assert_eq!(value["response"]["warnings"], json!(["heads up"]));
        assert_eq!(
            value["response"]["auditAnnotations"],
            json!({"policy-audit": "one; two"})
        );
        assert_eq!(value["response"].get("patch"), None, "a denial carries no patch");
    }
}
