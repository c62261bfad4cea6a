//! ResourceSlice: what a driver publishes about its devices. Every taint
//! gets its `timeAdded` stamped on each write.

use json_patch::PatchOperation;
use serde_json::Value;

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::Path;
use crate::objects::dra::SliceSpec;
use crate::objects::{DecodeError, ObjectJson, Whole};
use crate::rules;

pub const ROW: KindRow = KindRow::new(
    "resource.k8s.io",
    "ResourceSlice",
    &["v1", "v1beta2", "v1beta1"],
    "resourceslices",
);

pub struct ResourceSliceKind;

impl AdmittedKind for ResourceSliceKind {
    type View = Whole<SliceSpec>;

    fn decode(object: &ObjectJson, _: Routed) -> Result<Self::View, DecodeError> {
        let whole: Whole<SliceSpec> = object.decode()?;
        Ok(Whole {
            metadata: whole.metadata,
            spec: SliceSpec::flattened(whole.spec),
        })
    }

    fn validate(new: &Self::View, old: Option<&Self::View>, facts: &Facts<'_>) -> RuleVerdict {
        let mut errs = shared::validate_metadata(&new.metadata, old.map(|o| &o.metadata), false);
        // The fields a gate that is off adds are dropped before the
        // apiserver validates (its strategy's `dropDisabledFields`).
        let spec = rules::disabled_fields::resource_slice(&new.spec, old.map(|o| &o.spec), &facts.target);
        errs.extend(rules::slice::validate_slice_spec(
            &spec,
            old.map(|o| &o.spec),
            facts.target,
            &Path::new("spec"),
        ));
        errs.into()
    }

    /// Declarative validation walks the versioned object: v1beta1's device
    /// fields sit under `basic`.
    fn declarative_paths(routed: Routed) -> Option<fn(&Path) -> Path> {
        Some(if routed.version == "v1beta1" {
            rules::declarative::basic_device_path
        } else {
            Path::clone
        })
    }

    fn decode_defaults(view: &mut Self::View, now: &str) {
        view.spec.default_time_added(now);
    }

    /// v1beta1 nests each device's fields under `basic`.
    fn stamps(object: &Value, _: Option<&Value>, routed: Routed, now: &str) -> Vec<PatchOperation> {
        crate::mutate::time_added::resource_slice(object, routed.version == "v1beta1", now)
    }
}
