//! The Kubernetes `Status` of a denial, built as the apiserver builds it:
//! the one place a [`Denial`] becomes text, causes and an HTTP code.

use kube::core::response::{Status, StatusCause, StatusDetails, StatusSummary};

use crate::field::FieldError;
use crate::policy::enforce::Violation;
use crate::review::{Denial, ObjectRef};

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
