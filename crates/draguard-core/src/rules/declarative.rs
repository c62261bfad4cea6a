//! Declarative validation, as the apiserver enforces it for the DRA types
//! from Kubernetes 1.37 on (`DeclarativeValidationBeta`, the DRA tags beta
//! since 1.37; k8s.io/apiserver `rest.ValidateDeclaratively`).
//!
//! Both validations run. A hand-written error that declarative validation
//! also reports (marked [`FieldError::declared`] where the rule raises it)
//! is dropped in favour of its declarative twin, and the declarative
//! errors are appended after every remaining hand-written error. They are
//! found by walking the *versioned* object depth first, in Go declaration
//! order, a list's `maxItems` and repeated keys before its items; they
//! carry the versioned object's paths (v1beta1's flat requests, `basic`
//! devices) and their own wording (a repeated item shown whole, an
//! immutable value as `null`). The hand-written errors left are
//! deduplicated by their text (`ErrorList.Filter`).
//!
//! In 1.36 the DRA tags were alpha: declarative validation ran in shadow
//! and the hand-written errors were the answer, unchanged.

use std::collections::HashSet;

use crate::field::{BadValue, Declared, ErrorType, FieldError, Path, Segment};

/// The errors as the apiserver returns them when declarative validation is
/// enforced: hand-written ones first (without repeats), then the
/// declarative ones in their order and words, at the paths `in_version`
/// gives them (the versioned object's).
pub fn enforce(errors: Vec<FieldError>, in_version: impl Fn(&Path) -> Path) -> Vec<FieldError> {
    if errors.iter().all(|e| e.declared.is_none()) && errors.len() < 2 {
        return errors;
    }
    let mut seen = HashSet::new();
    let mut handwritten = Vec::with_capacity(errors.len());
    let mut declarative = Vec::new();
    for mut error in errors {
        match error.declared.take() {
            None => {
                if seen.insert(error.to_string()) {
                    handwritten.push(error);
                }
            }
            Some(how) => {
                match how {
                    Declared::Same => {}
                    Declared::Item(json) => error.value = BadValue::Json(json),
                    Declared::Null => error.value = BadValue::Null,
                }
                error.field = in_version(&error.field);
                declarative.push(error);
            }
        }
    }
    // Stable: errors on one field keep the order the rule raised them in.
    // Each error's steps are worked out once, not per comparison.
    declarative.sort_by_cached_key(steps);
    handwritten.extend(declarative);
    handwritten
}

/// Drops the marks where declarative validation is not enforced (1.36, or
/// the gate off): the hand-written errors are the answer as they are.
pub fn forget(errors: &mut [FieldError]) {
    for error in errors {
        error.declared = None;
    }
}

/// One step of the walk, comparable in the order the walk meets them: fields by declaration order, list
/// items by index with a list's repeated-key errors (at `list[j]`) before
/// any item's own errors, map entries by key.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Field(usize, String),
    Repeated(usize),
    Item(usize),
    Key(String),
}

fn steps(error: &FieldError) -> Vec<Step> {
    // Normalised through the notation: a rule may name `a.b` in one segment.
    let path = Path::parse(&error.field.to_string());
    let segments = path.segments();
    let last = segments.len().saturating_sub(1);
    segments
        .iter()
        .enumerate()
        .map(|(i, segment)| match segment {
            Segment::Field(name) => Step::Field(declaration_rank(name), name.to_string()),
            Segment::Index(n) if i == last && error.kind == ErrorType::Duplicate => Step::Repeated(*n),
            Segment::Index(n) => Step::Item(*n),
            Segment::Key(k) => Step::Key(k.clone()),
        })
        .collect()
}

/// The fields of the DRA types that carry declarative tags, in the order
/// their structs declare them (k8s.io/api resource/v1 types.go). Field
/// names shared by several structs are in an order that fits each; names
/// not listed come last (no tag of theirs is enforced).
const DECLARATION_ORDER: &[&str] = &[
    "metadata",
    "spec",
    "status",
    "deviceSelector",
    "taint",
    "driver",
    "pool",
    "devices",
    "requests",
    "name",
    "basic",
    "exactly",
    "firstAvailable",
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "attributes",
    "tolerations",
    "capacity",
    "consumesCounters",
    "counterSet",
    "counters",
    "key",
    "operator",
    "value",
    "effect",
    "timeAdded",
    "tolerationSeconds",
    "taints",
    "bindingConditions",
    "bindingFailureConditions",
    "constraints",
    "matchAttribute",
    "distinctAttribute",
    "config",
    "opaque",
    "parameters",
    "sharedCounters",
    "allocation",
];

fn declaration_rank(name: &str) -> usize {
    DECLARATION_ORDER
        .iter()
        .position(|n| *n == name)
        .unwrap_or(DECLARATION_ORDER.len())
}

/// v1beta1 claims put the fields of `exactly` on the request itself:
/// `…devices.requests[i].exactly.x` is `…devices.requests[i].x` there.
pub fn flat_request_path(path: &Path) -> Path {
    let parsed = Path::parse(&path.to_string());
    let segments = parsed.segments();
    let mut out = Path::default();
    for (i, segment) in segments.iter().enumerate() {
        let is_exactly = matches!(segment, Segment::Field(f) if f == "exactly")
            && i >= 3
            && matches!(segments[i - 1], Segment::Index(_))
            && matches!(&segments[i - 2], Segment::Field(f) if f == "requests")
            && matches!(&segments[i - 3], Segment::Field(f) if f == "devices");
        if !is_exactly {
            out = out.with_segment(segment.clone());
        }
    }
    out
}

/// v1beta1 slices keep a device's fields, its name aside, under `basic`:
/// `spec.devices[i].taints` is `spec.devices[i].basic.taints` there.
pub fn basic_device_path(path: &Path) -> Path {
    let parsed = Path::parse(&path.to_string());
    let segments = parsed.segments();
    let mut out = Path::default();
    for (i, segment) in segments.iter().enumerate() {
        out = out.with_segment(segment.clone());
        let device_item = matches!(segment, Segment::Index(_))
            && i == 2
            && matches!(&segments[0], Segment::Field(f) if f == "spec")
            && matches!(&segments[1], Segment::Field(f) if f == "devices");
        let has_field_after = matches!(segments.get(i + 1), Some(Segment::Field(f)) if f != "name");
        if device_item && has_field_after {
            out = out.child("basic");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    /// Hand-written errors first, declarative ones after, in the walk's
    /// order: repeated keys of a list before its items' errors.
    #[test]
    fn declarative_errors_follow_the_hand_written_ones_in_walk_order() {
        let errors = vec![
            FieldError::not_supported(
                Path::parse("spec.devices.requests[0].exactly.tolerations[0].operator"),
                "In",
                &["Equal", "Exists"],
            )
            .declared(),
            FieldError::invalid(Path::parse("spec.devices.requests[1].name"), "Bad_Name", "bad name"),
            FieldError::duplicate(Path::parse("spec.devices.requests[2]"), "a")
                .declared_as(Declared::Item(r#"{"name":"a"}"#.into())),
            FieldError::too_many(Path::parse("spec.devices.constraints"), 33, 32).declared(),
        ];
        assert_eq!(
            rendered(&enforce(errors, Path::clone)),
            [
                "spec.devices.requests[1].name: Invalid value: \"Bad_Name\": bad name",
                r#"spec.devices.requests[2]: Duplicate value: {"name":"a"}"#,
                "spec.devices.requests[0].exactly.tolerations[0].operator: Unsupported value: \"In\": supported values: \"Equal\", \"Exists\"",
                "spec.devices.constraints: Too many: 33: must have at most 32 items",
            ]
        );
    }

    #[test]
    fn repeated_hand_written_errors_are_said_once_and_immutable_shows_null() {
        let errors = vec![
            FieldError::invalid(Path::parse("spec"), BadValue::Json("{}".into()), "field is immutable")
                .declared_as(Declared::Null),
            FieldError::required(Path::parse("a"), ""),
            FieldError::required(Path::parse("a"), ""),
        ];
        assert_eq!(
            rendered(&enforce(errors, Path::clone)),
            ["a: Required value", "spec: Invalid value: null: field is immutable"]
        );
    }

    /// Where declarative validation is not enforced the errors are the
    /// hand-written ones, marks and all forgotten: the same error compares
    /// equal whichever version judged it.
    #[test]
    fn without_enforcement_the_marks_are_forgotten() {
        let mut errors = vec![FieldError::required(Path::parse("spec.taint.effect"), "").declared()];
        forget(&mut errors);
        assert_eq!(errors, vec![FieldError::required(Path::parse("spec.taint.effect"), "")]);
        let enforced = enforce(
            vec![FieldError::required(Path::parse("spec.taint.effect"), "").declared()],
            Path::clone,
        );
        assert_eq!(enforced, errors);
    }

    #[test]
    fn v1beta1_paths() {
        let flat = |p: &str| flat_request_path(&Path::parse(p)).to_string();
        assert_eq!(
            flat("spec.devices.requests[0].exactly.tolerations[1].operator"),
            "spec.devices.requests[0].tolerations[1].operator"
        );
        assert_eq!(
            flat("spec.spec.devices.requests[3].exactly.allocationMode"),
            "spec.spec.devices.requests[3].allocationMode"
        );
        assert_eq!(
            flat("spec.devices.requests[0].firstAvailable[1].tolerations[0].effect"),
            "spec.devices.requests[0].firstAvailable[1].tolerations[0].effect"
        );
        let basic = |p: &str| basic_device_path(&Path::parse(p)).to_string();
        assert_eq!(
            basic("spec.devices[0].taints[2].effect"),
            "spec.devices[0].basic.taints[2].effect"
        );
        assert_eq!(basic("spec.devices[0].name"), "spec.devices[0].name");
        assert_eq!(basic("spec.devices[1]"), "spec.devices[1]");
        assert_eq!(basic("spec.sharedCounters[0].name"), "spec.sharedCounters[0].name");
    }
}
