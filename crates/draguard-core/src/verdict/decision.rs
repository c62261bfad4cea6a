//! The verdict as data: allowed or not, the field errors or policy
//! violations behind a denial, the patch, the warnings. The doors render
//! it: `admission/status.rs` into a Kubernetes `Status`, `check` into findings.

use kube_core::GroupVersionResource;

use super::{Concept, Mode, ReviewError, Violation};
use crate::field::{FieldError, Path};

/// The verdict on one request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    pub allowed: bool,
    /// Why the request was denied; `None` when allowed.
    pub denial: Option<Denial>,
    pub patch: Vec<json_patch::PatchOperation>,
    pub warnings: Vec<Warning>,
    /// What Audit-mode policies would have denied: logged, counted, and
    /// sent as audit annotations.
    pub audit: Vec<String>,
    /// A failure of draguard's own that `/mutate` answered by allowing
    /// without a patch, so that `failurePolicy` never fires for our bug.
    pub internal_error: Option<ReviewError>,
}

/// Why a request was denied.
#[derive(Debug, Clone, PartialEq)]
pub enum Denial {
    /// The object breaks the apiserver's rules (HTTP 422).
    Invalid { object: ObjectRef, errors: Vec<FieldError> },
    /// A policy refuses it (HTTP 403).
    Forbidden {
        object: ObjectRef,
        resource: GroupVersionResource,
        violations: Vec<Violation>,
    },
    /// It could not be judged (HTTP 400).
    BadRequest(ReviewError),
}

/// A warning for the requester, with the field it is about when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    pub field: Option<Path>,
    pub message: String,
    /// The rule a Warn-mode violation broke, or the one a warning stands
    /// for where the same finding can also be denied (a priority tie);
    /// `None` for the API's own warnings.
    pub concept: Option<Concept>,
    /// The toleration policy a Warn-mode violation or a guard belongs to;
    /// `None` for the API's own warnings. Reports name it (a PolicyReport
    /// result's `policy`, `draguard_audit_findings{policy}`).
    pub policy: Option<String>,
}

impl Warning {
    pub fn new(message: impl Into<String>) -> Self {
        Warning {
            field: None,
            message: message.into(),
            concept: None,
            policy: None,
        }
    }

    pub fn at(field: Path, message: impl Into<String>) -> Self {
        Warning {
            field: Some(field),
            message: message.into(),
            concept: None,
            policy: None,
        }
    }
}

/// The object a verdict is about: `ResourceClaim.resource.k8s.io "name"`.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectRef {
    pub group: String,
    pub kind: String,
    pub name: String,
}

impl ObjectRef {
    /// `schema.GroupKind.String()` and the quoted name, as apiserver
    /// messages name an object.
    pub fn describe(&self) -> String {
        let quoted = crate::field::go_quote(&self.name);
        if self.group.is_empty() {
            format!("{} {quoted}", self.kind)
        } else {
            format!("{}.{} {quoted}", self.kind, self.group)
        }
    }
}

impl Decision {
    pub fn allow() -> Self {
        Decision {
            allowed: true,
            ..Default::default()
        }
    }

    pub fn deny(denial: Denial) -> Self {
        Decision {
            allowed: false,
            denial: Some(denial),
            ..Default::default()
        }
    }

    pub fn bad_request(error: ReviewError) -> Self {
        Decision::deny(Denial::BadRequest(error))
    }

    /// The review stopped at its deadline: no verdict.
    pub fn deadline_passed() -> Self {
        Decision::bad_request(ReviewError::DeadlinePassed)
    }

    /// Whether the review stopped at its deadline instead of deciding.
    pub fn missed_deadline(&self) -> bool {
        matches!(self.denial, Some(Denial::BadRequest(ReviewError::DeadlinePassed)))
    }

    /// The field path of every cause, in order, in Kubernetes notation.
    pub fn cause_fields(&self) -> Vec<String> {
        match &self.denial {
            Some(Denial::Invalid { errors, .. }) => errors.iter().map(|e| e.field.to_string()).collect(),
            Some(Denial::Forbidden { violations, .. }) => violations
                .iter()
                .map(|v| v.field.as_ref().map(ToString::to_string).unwrap_or_default())
                .collect(),
            Some(Denial::BadRequest(_)) | None => Vec::new(),
        }
    }

    /// How many causes the denial has (without rendering their paths).
    pub fn cause_count(&self) -> usize {
        match &self.denial {
            Some(Denial::Invalid { errors, .. }) => errors.len(),
            Some(Denial::Forbidden { violations, .. }) => violations.len(),
            Some(Denial::BadRequest(_)) | None => 0,
        }
    }

    /// The warnings as the apiserver passes them on: text only.
    pub fn warning_texts(&self) -> Vec<String> {
        self.warnings.iter().map(|w| w.message.clone()).collect()
    }
}

impl Decision {
    /// The verdict on a valid object: Enforce violations deny (403), Warn
    /// ones warn, Audit ones are recorded.
    pub fn judged(
        object: ObjectRef,
        resource: &GroupVersionResource,
        patch: Vec<json_patch::PatchOperation>,
        mut warnings: Vec<Warning>,
        violations: Vec<Violation>,
    ) -> Decision {
        let mut audit = Vec::new();
        let mut denials = Vec::new();
        for v in violations {
            match v.mode {
                Mode::Warn => warnings.push(Warning {
                    field: v.field,
                    message: v.message,
                    concept: Some(v.concept),
                    policy: Some(v.policy),
                }),
                Mode::Audit => audit.push(v.message),
                Mode::Enforce => denials.push(v),
            }
        }
        if denials.is_empty() {
            return Decision {
                allowed: true,
                patch,
                warnings,
                audit,
                ..Default::default()
            };
        }
        Decision {
            warnings,
            audit,
            ..Decision::deny(Denial::Forbidden {
                object,
                resource: resource.clone(),
                violations: denials,
            })
        }
    }
}
