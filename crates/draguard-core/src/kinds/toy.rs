//! A toy kind, compiled only for tests (the `toy-kind` feature): it proves
//! that a kind is added by one file and one line of
//! [`crate::review::registry::KINDS`], and is then routed, validated and
//! mapped by `check` with nothing else changed.

use serde::Deserialize;

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::{FieldError, Path};
use crate::objects::{DecodeError, ObjectJson, Whole};

pub const ROW: KindRow = KindRow::new("toy.draguard.dev", "Widget", &["v1"], "widgets").with_namespaced(true);

pub struct WidgetKind;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WidgetSpec {
    size: i64,
}

impl AdmittedKind for WidgetKind {
    type View = Whole<WidgetSpec>;

    fn decode(object: &ObjectJson, _: Routed) -> Result<Self::View, DecodeError> {
        object.decode()
    }

    fn validate(new: &Self::View, old: Option<&Self::View>, _: &Facts<'_>) -> RuleVerdict {
        let mut errs = shared::validate_metadata(&new.metadata, old.map(|o| &o.metadata), true);
        if new.spec.size < 0 {
            errs.push(FieldError::invalid(
                Path::new("spec").child("size"),
                new.spec.size,
                "must be greater than or equal to 0",
            ));
        }
        errs.into()
    }
}

// Its tests drive it through the webhook and `check`, the doors of the
// draguard package: tests/toy_kind.rs there.
