//! DeviceClass: judged as the apiserver judges it (`rules::device_class`:
//! metadata, selectors, configs, the extended resource name), then for its
//! drivers' opaque configs (`spec.config[i]`), which every claim of the
//! class gets before its own and which no driver's webhook checks.

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::{FieldError, Path, Segment};
use crate::objects::device_class::DeviceClassSpec;
use crate::objects::{DecodeError, ObjectJson, Whole};
use crate::rules;
use crate::rules::device_class::Judged;

pub const ROW: KindRow = KindRow::new(
    "resource.k8s.io",
    "DeviceClass",
    &["v1", "v1beta2", "v1beta1"],
    "deviceclasses",
);

pub struct DeviceClassKind;

impl AdmittedKind for DeviceClassKind {
    type View = Whole<DeviceClassSpec>;

    fn decode(object: &ObjectJson, _: Routed) -> Result<Self::View, DecodeError> {
        object.decode()
    }

    /// The apiserver's causes first, in its order (declarative ones last
    /// where it enforces them), then the drivers' findings, which only a
    /// class the apiserver admits would meet. On UPDATE a config the class
    /// already had is not judged again by its driver's schema, so a schema
    /// that became stricter never blocks an unrelated edit.
    fn validate(new: &Self::View, old: Option<&Self::View>, facts: &Facts<'_>) -> RuleVerdict {
        let mut errs = apiserver_errors(new, old, facts);
        errs.extend(rules::driver_config::judge_configs(
            &new.spec.config,
            old.map(|o| o.spec.config.as_slice()),
            &Path::new("spec").child("config"),
            facts.drivers,
        ));
        errs.into()
    }
}

/// What kube-apiserver says of the class. The strategy
/// (pkg/registry/resource/deviceclass/strategy.go) validates an UPDATE with
/// `ValidateDeviceClass(new)` and then `ValidateDeviceClassUpdate(new, old)`,
/// which judges the metadata again; both halves are kept, repeats included,
/// as the apiserver lists them. Declarative validation is applied here
/// rather than by the review, so that its errors come after the
/// apiserver's other errors and before the drivers' findings.
fn apiserver_errors(
    new: &Whole<DeviceClassSpec>,
    old: Option<&Whole<DeviceClassSpec>>,
    facts: &Facts<'_>,
) -> Vec<FieldError> {
    let judged = Judged {
        declarative: facts.target.declarative_validation(),
        cel: facts.cel,
    };
    let metadata = Path::new("metadata");
    let spec = Path::new("spec");
    let meta = || rules::meta::validate_object_meta_long_name(&new.metadata, false, &metadata);
    let mut errs = meta();
    match old {
        None => errs.extend(rules::device_class::validate_device_class_spec(
            &new.spec, &spec, judged,
        )),
        Some(old) => {
            let (as_created, against_old) =
                rules::device_class::validate_device_class_update(&new.spec, &old.spec, &spec, judged);
            errs.extend(as_created);
            errs.extend(meta());
            errs.extend(shared::validate_meta_update(&new.metadata, &old.metadata));
            errs.extend(against_old);
        }
    }
    if judged.declarative {
        // Declarative validation runs once a request, not once a half:
        // each of its errors is listed once. On UPDATE it says nothing of
        // a field left as stored (the generated validators return early
        // when the value equals the old one), and the hand-written errors
        // it covers are dropped all the same (k8s.io/apiserver
        // pkg/registry/rest/validate.go, `filterHandwrittenErrors`).
        let mut seen = std::collections::HashSet::new();
        errs.retain(|e| {
            e.declared.is_none() || (old.is_none_or(|old| changed(&e.field, new, old)) && seen.insert(e.to_string()))
        });
        rules::declarative::enforce(errs, Path::clone)
    } else {
        rules::declarative::forget(&mut errs);
        errs
    }
}

/// Whether the top-level field `field` lies in differs from the stored
/// class (the granularity of the declarative tags of a DeviceClass).
fn changed(field: &Path, new: &Whole<DeviceClassSpec>, old: &Whole<DeviceClassSpec>) -> bool {
    let names: Vec<&str> = field
        .segments()
        .iter()
        .take(2)
        .filter_map(|s| match s {
            Segment::Field(name) => Some(name.as_ref()),
            _ => None,
        })
        .collect();
    match names.as_slice() {
        ["metadata", "name"] => new.metadata.name != old.metadata.name,
        ["spec", "selectors"] => new.spec.selectors != old.spec.selectors,
        ["spec", "config"] => new.spec.config != old.spec.config,
        ["spec", "extendedResourceName"] => new.spec.extended_resource_name != old.spec.extended_resource_name,
        _ => true,
    }
}
