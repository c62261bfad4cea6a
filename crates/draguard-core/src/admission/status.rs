//! The Kubernetes `Status` of a denial, built as the apiserver builds it:
//! the one place a [`Denial`] becomes text, causes and an HTTP code.

use kube_core::response::{Status, StatusCause, StatusDetails, StatusSummary};

use crate::field::FieldError;
use crate::verdict::Violation;
use crate::verdict::{Denial, ObjectRef};

/// The most causes a Status lists; the rest are counted in its message.
pub const MAX_CAUSES: usize = 100;
/// The longest message a Status carries, in bytes, before "… (N bytes
/// more)": a request with thousands of bad tolerations must not get a
/// multi-megabyte answer (and log line).
pub const MAX_MESSAGE_BYTES: usize = 32 << 10;
/// The longest message of one cause, in bytes.
pub const MAX_CAUSE_MESSAGE_BYTES: usize = 4 << 10;
/// The causes' messages and fields together, in bytes: past it the rest of
/// the causes are counted in the message, as past [`MAX_CAUSES`]. Without
/// it 100 causes of 4 KiB made a 400 KiB answer (issue 27, N10: 280 claim
/// selectors that fail to compile, each cause quoting its expression, made
/// a 283 KB one). The first cause is always listed.
pub const MAX_CAUSES_BYTES: usize = 32 << 10;

/// The Kubernetes `Status` of a denial, as the apiserver would build it,
/// bounded in size (see [`MAX_CAUSES`], [`MAX_CAUSES_BYTES`],
/// [`MAX_MESSAGE_BYTES`]). Built within its bounds from the start: a
/// request with 500,000 bad tolerations costs the text of the first few
/// hundred, not a cause and a message each (692 MB before, issue 27 N1).
pub fn status(denial: &Denial) -> Status {
    match denial {
        Denial::Invalid { object, errors } => invalid(object, errors),
        Denial::Forbidden {
            object,
            resource,
            violations,
        } => forbidden(object, resource, violations),
        Denial::BadRequest(e) => {
            let mut message = e.to_string();
            truncate(&mut message, MAX_MESSAGE_BYTES);
            Status {
                status: Some(StatusSummary::Failure),
                code: 400,
                message,
                reason: "BadRequest".to_owned(),
                details: None,
                metadata: None,
            }
        }
    }
}

/// The causes that fit [`MAX_CAUSES`] and [`MAX_CAUSES_BYTES`], each cut
/// at [`MAX_CAUSE_MESSAGE_BYTES`], and how many were left out. `causes`
/// renders one cause; it is called only for the causes kept.
fn bounded_causes<T>(items: &[T], cause: impl Fn(&T) -> StatusCause) -> (Vec<StatusCause>, usize) {
    let mut kept = Vec::new();
    let mut bytes = 0usize;
    for item in items.iter().take(MAX_CAUSES) {
        let mut c = cause(item);
        truncate(&mut c.message, MAX_CAUSE_MESSAGE_BYTES);
        bytes = bytes.saturating_add(c.message.len() + c.field.len());
        if bytes > MAX_CAUSES_BYTES && !kept.is_empty() {
            break;
        }
        kept.push(c);
    }
    let dropped = items.len() - kept.len();
    (kept, dropped)
}

/// `message` with the note a Status carries when causes were left out.
fn note_dropped(mut message: String, kept: usize, dropped: usize) -> String {
    if dropped > 0 {
        message.push_str(&format!(
            " (details list the first {kept} causes; {dropped} more omitted)"
        ));
    }
    message
}

/// `texts` joined by `separator` as the apiserver joins them, cut at
/// [`MAX_MESSAGE_BYTES`]. Only the texts that fit are rendered: past the
/// bound, the rest are counted ("… (N more errors)") rather than rendered
/// to be cut away. `distinct`: each text once, as `utilerrors.NewAggregate`
/// prints (`[a, b]`, or the one text alone).
fn bounded_join<T>(items: &[T], text: impl Fn(&T) -> String, separator: &str, distinct: bool) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut texts: Vec<String> = Vec::new();
    let mut bytes = 0usize;
    let mut unread = 0;
    for (i, item) in items.iter().enumerate() {
        let t = text(item);
        if distinct && seen.contains(&t) {
            continue;
        }
        if bytes > MAX_MESSAGE_BYTES {
            unread = items.len() - i;
            break;
        }
        bytes = bytes.saturating_add(t.len() + separator.len());
        if distinct {
            seen.insert(t.clone());
        }
        texts.push(t);
    }
    let mut joined = match (distinct, texts.as_slice()) {
        (true, [one]) if unread == 0 => one.clone(),
        (true, many) => format!("[{}]", many.join(separator)),
        (false, many) => many.join(separator),
    };
    if unread == 0 {
        truncate(&mut joined, MAX_MESSAGE_BYTES);
    } else {
        cut(&mut joined, MAX_MESSAGE_BYTES);
        joined.push_str(&format!("… ({unread} more errors)"));
    }
    joined
}

/// Cuts `text` to at most `max` bytes, on a character boundary, saying how
/// much was cut.
pub(super) fn truncate(text: &mut String, max: usize) {
    if text.len() <= max {
        return;
    }
    let before = cut(text, max);
    let more = before - text.len();
    text.push_str(&format!("… ({more} bytes more)"));
}

/// Cuts `text` to at most `max` bytes on a character boundary; its length
/// before.
fn cut(text: &mut String, max: usize) -> usize {
    let len = text.len();
    let mut at = max.min(len);
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    text.truncate(at);
    len
}

/// `apierrors.NewInvalid`: HTTP 422, reason Invalid, every error a cause,
/// the message the aggregate of the distinct errors.
fn invalid(object: &ObjectRef, errs: &[FieldError]) -> Status {
    let (causes, dropped) = bounded_causes(errs, |e| StatusCause {
        reason: e.kind.reason().to_owned(),
        message: e.body(),
        field: e.field.to_string(),
    });
    let aggregate = bounded_join(errs, ToString::to_string, ", ", true);
    let message = format!("{} is invalid: {}", object.describe(), aggregate);
    Status {
        status: Some(StatusSummary::Failure),
        code: 422,
        message: note_dropped(message, causes.len(), dropped),
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
fn forbidden(object: &ObjectRef, resource: &kube_core::GroupVersionResource, violations: &[Violation]) -> Status {
    let qualified = if resource.group.is_empty() {
        resource.resource.clone()
    } else {
        format!("{}.{}", resource.resource, resource.group)
    };
    let (causes, dropped) = bounded_causes(violations, |v| StatusCause {
        reason: "FieldValueForbidden".to_owned(),
        message: v.message.clone(),
        field: v.field.as_ref().map(ToString::to_string).unwrap_or_default(),
    });
    let messages = bounded_join(violations, |v| v.message.clone(), "; ", false);
    let message = format!(
        "{qualified} {} is forbidden: {messages}",
        crate::field::go_quote(&object.name),
    );
    Status {
        status: Some(StatusSummary::Failure),
        code: 403,
        message: note_dropped(message, causes.len(), dropped),
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
        // The distinct errors are rendered only until the message is full
        // (765 of them here); the other 9,235 are counted, not rendered.
        assert!(
            status
                .message
                .ends_with("… (9235 more errors) (details list the first 100 causes; 9900 more omitted)"),
            "{}",
            &status.message[status.message.len() - 120..]
        );
        let prefix = "ResourceClaim.resource.k8s.io \"c\" is invalid: ";
        assert_eq!(
            status.message.len(),
            prefix.len()
                + MAX_MESSAGE_BYTES
                + "… (9235 more errors) (details list the first 100 causes; 9900 more omitted)".len()
        );
        assert!(
            status
                .message
                .starts_with(&format!("{prefix}[spec.tolerations[0].key: Required value, "))
        );
    }

    /// Issue 27, N10: 280 selectors that fail to compile, each cause
    /// quoting its 1,000-byte expression. Before, the first 100 causes were
    /// listed whatever their size: about 285 KB of causes. Now the causes
    /// stop at 32 KiB: the first 11, of 2,853 and 2,854 bytes (31,384).
    #[test]
    fn causes_count_against_the_answer_bound() {
        let errors: Vec<FieldError> = (0..280)
            .map(|i| {
                let path = Path::new("spec")
                    .child("devices")
                    .child("requests")
                    .index(i / 32)
                    .child("exactly")
                    .child("selectors")
                    .index(i % 32)
                    .child("cel")
                    .child("expression");
                FieldError::invalid(path, format!("{i:04}{}", "[".repeat(996)), "x".repeat(1774))
            })
            .collect();
        let status = status(&Denial::Invalid {
            object: claim(),
            errors,
        });
        let causes = &status.details.as_ref().expect("details").causes;
        let bytes: Vec<usize> = causes.iter().map(|c| c.message.len() + c.field.len()).collect();
        assert_eq!(bytes.len(), 11, "{bytes:?}");
        assert!(bytes.iter().all(|b| (2853..=2854).contains(b)), "{bytes:?}");
        let total: usize = bytes.iter().sum();
        assert_eq!(total, 31_384);
        assert!(total <= MAX_CAUSES_BYTES);
        assert!(
            status
                .message
                .ends_with("(details list the first 11 causes; 269 more omitted)"),
            "{}",
            &status.message[status.message.len() - 80..]
        );
    }

    /// The first cause is listed even when it alone is over the causes'
    /// budget (it is cut at [`MAX_CAUSE_MESSAGE_BYTES`] anyway).
    #[test]
    fn the_first_cause_is_always_listed() {
        let errors = vec![FieldError::invalid(Path::new("spec"), "v", "d".repeat(40 << 10)); 2];
        let status = status(&Denial::Invalid {
            object: claim(),
            errors,
        });
        let causes = &status.details.as_ref().expect("details").causes;
        assert_eq!(causes.len(), 2, "two causes of about 4 KiB each fit");
        assert!(causes[0].message.ends_with(" bytes more)"));
        // Both errors are the same text: the message lists it once.
        assert!(
            status
                .message
                .starts_with("ResourceClaim.resource.k8s.io \"c\" is invalid: spec: Invalid value: \"v\": ddd")
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
