//! ResourceSlicePatch (KEP-5027): admins override what drivers publish.
//! Served by draguard's CRD, and understood as the KEP's
//! `resource.k8s.io/v1alpha3` for when Kubernetes serves it. A patch whose
//! priority ties with an overlapping one is warned about, or denied where
//! a policy says so.

use json_patch::PatchOperation;
use serde_json::Value;

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::Path;
use crate::objects::patch::PatchSpec;
use crate::objects::{DecodeError, ObjectJson, Whole};
use crate::rules;
use crate::view::ClusterView;

pub const ROW: KindRow = KindRow::new(
    "draguard.dev",
    "ResourceSlicePatch",
    &["v1alpha1"],
    "resourceslicepatches",
);

/// The same kind as KEP-5027 names it.
pub const ROW_KEP: KindRow = ROW.with_group("resource.k8s.io").with_versions(&["v1alpha3"]);

pub struct SlicePatchKind;

impl AdmittedKind for SlicePatchKind {
    type View = Whole<PatchSpec>;

    fn decode(object: &ObjectJson, _: Routed) -> Result<Self::View, DecodeError> {
        object.decode()
    }

    fn validate(new: &Self::View, old: Option<&Self::View>, facts: &Facts<'_>) -> RuleVerdict {
        let mut errs = shared::validate_metadata(&new.metadata, old.map(|o| &o.metadata), false);
        errs.extend(rules::device_patch::validate_patch_spec(
            &new.spec,
            old.map(|o| &o.spec),
            facts.target.version,
            &Path::new("spec"),
            facts.cel,
        ));
        errs.into()
    }

    fn stamps(object: &Value, old: Option<&Value>, _: Routed, now: &str) -> Vec<PatchOperation> {
        crate::mutate::time_added::patch_taints(object, old, now)
    }

    /// Read as ResourceSlice taints are: the KEP's `resource.k8s.io`
    /// version shares `DeviceTaint` and its defaults; draguard's CRD gets
    /// them from `/mutate`, and a stored patch written without them reads
    /// as now, as a stored slice's taint does.
    fn decode_defaults(view: &mut Self::View, now: &str) {
        view.spec
            .devices
            .taints
            .iter_mut()
            .for_each(|t| t.default_time_added(now));
    }

    fn priority_ties(view: &Self::View, cluster: &dyn ClusterView) -> Vec<String> {
        let name = view.metadata.name.as_deref().unwrap_or("");
        rules::device_patch::priority_ties(name, &view.spec.devices, &cluster.slice_patches())
    }
}
