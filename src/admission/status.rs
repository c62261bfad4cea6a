//! The Kubernetes `Status` of a denial, built as the apiserver builds it:
//! the one place a [`Denial`] becomes text, causes and an HTTP code.

use kube::core::response::{Status, StatusCause, StatusDetails, StatusSummary};

use crate::field::FieldError;
use crate::policy::enforce::Violation;
use crate::review::{Denial, ObjectRef};

/// The most causes a Status lists; the rest are counted in its message.
pub const MAX_CAUSES: usize = 100;
/// The longest message a Status carries, in bytes, before "… (N bytes
/// more)": a request with thousands of bad tolerations must not get a
/// multi-megabyte answer (and log line).
pub const MAX_MESSAGE_BYTES: usize = 32 << 10;
/// The longest message of one cause, in bytes.
pub const MAX_CAUSE_MESSAGE_BYTES: usize = 4 << 10;

/// The Kubernetes `Status` of a denial, as the apiserver would build it,
/// bounded in size (see [`MAX_CAUSES`], [`MAX_MESSAGE_BYTES`]).
pub fn status(denial: &Denial) -> Status {
    bounded(unbounded(denial))
}

fn unbounded(denial: &Denial) -> Status {
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

/// Caps the causes and the lengths of every message. Anything within the
/// bounds, which is every denial a real object gets, is left as it is.
fn bounded(mut status: Status) -> Status {
    let mut dropped = 0;
    if let Some(details) = &mut status.details {
        dropped = details.causes.len().saturating_sub(MAX_CAUSES);
        details.causes.truncate(MAX_CAUSES);
        for cause in &mut details.causes {
            truncate(&mut cause.message, MAX_CAUSE_MESSAGE_BYTES);
        }
    }
    truncate(&mut status.message, MAX_MESSAGE_BYTES);
    if dropped > 0 {
        status.message.push_str(&format!(
            " (details list the first {MAX_CAUSES} causes; {dropped} more omitted)"
        ));
    }
    status
}

/// Cuts `text` to at most `max` bytes, on a character boundary, saying how
/// much was cut.
pub(super) fn truncate(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let more = text.len() - cut;
    text.truncate(cut);
    text.push_str(&format!("… ({more} bytes more)"));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;

    fn claim() -> ObjectRef {
        ObjectRef {
            group: "resource.k8s.io".into(),
            kind: "ResourceClaim".into(),
            name: "c".into(),
        }
    }

    #[test]
    fn a_flood_of_errors_gets_a_bounded_status() {
        let errors: Vec<FieldError> = (0..10_000)
            .map(|i| FieldError::required(Path::new("spec").child("tolerations").index(i).child("key"), ""))
            .collect();
        let status = status(&Denial::Invalid {
            object: claim(),
            errors,
        });
        let causes = status.details.as_ref().map_or(0, |d| d.causes.len());
        assert_eq!(causes, MAX_CAUSES);
        assert!(
            status.message.len() < MAX_MESSAGE_BYTES + 200,
            "{} bytes",
            status.message.len()
        );
        assert!(
            status
                .message
                .ends_with(" bytes more) (details list the first 100 causes; 9900 more omitted)"),
            "{}",
            &status.message[status.message.len() - 120..]
        );
        assert!(
            status.message.starts_with(
                "ResourceClaim.resource.k8s.io \"c\" is invalid: [spec.tolerations[0].key: Required value"
            )
        );
    }

    #[test]
    fn long_texts_are_cut_on_a_character_boundary() {
        let mut text = "é".repeat(10);
        truncate(&mut text, 5);
        assert_eq!(text, "éé… (16 bytes more)");
        let mut short = "fine".to_owned();
        truncate(&mut short, 5);
        assert_eq!(short, "fine");
    }
}
