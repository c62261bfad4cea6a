//! DeviceClass: judged as the apiserver judges it (`rules::device_class`:
//! metadata, selectors, configs, the extended resource name), then for its
//! drivers' opaque configs (`spec.config[i]`), which every claim of the
//! class gets before its own and which no driver's webhook checks.

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::field::{FieldError, Path, Segment};
use crate::kubernetes::KubeVersion;
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
        let spec = rules::disabled_fields::device_class(&new.spec, old.map(|o| &o.spec), &facts.target);
        let mut errs = apiserver_errors(new, &spec, old, facts);
        errs.extend(rules::driver_config::judge_configs(
            &new.spec.config,
            old.map(|o| o.spec.config.as_slice()),
            &Path::new("spec").child("config"),
            facts.drivers,
        ));
        errs.into()
    }
}

/// What kube-apiserver says of the class, judged as its validation sees
/// it: with the fields a gate that is off adds dropped first
/// (`rules::disabled_fields`).
///
/// CREATE is `ValidateDeviceClass`: metadata, then the spec. UPDATE
/// depends on the version:
/// - 1.36, as the real kube-apiserver v1.36.2 answers: the metadata as on
///   CREATE, `ValidateObjectMetaUpdate`, then the spec judged as if
///   created, each cause once. A class stored with an invalid name and
///   relabelled gets its name's cause once; one stored with a selector that
///   does not compile, or parameters over 10 KiB, is refused on any update
///   (nothing stored ratchets), and a changed bad selector is listed once.
/// - 1.37 on, from the code (no 1.37 apiserver has answered yet): the
///   strategy (pkg/registry/resource/deviceclass/strategy.go) runs
///   `ValidateDeviceClass(new)` and then `ValidateDeviceClassUpdate(new,
///   old)`, which judges the metadata again before `ValidateObjectMetaUpdate`
///   and the spec against the stored one; both halves are kept, repeats
///   included. Declarative validation is applied here rather than by the
///   review, so that its errors come after the apiserver's other errors and
///   before the drivers' findings.
///
/// Not mirrored: the metadata checks every UPDATE gets before the
/// strategy's (`rest.BeforeUpdate`'s `validateCommonFields`), which list a
/// bad label or annotation twice more (docs/src/versions/differences.md).
fn apiserver_errors(
    new: &Whole<DeviceClassSpec>,
    spec: &DeviceClassSpec,
    old: Option<&Whole<DeviceClassSpec>>,
    facts: &Facts<'_>,
) -> Vec<FieldError> {
    let judged = Judged {
        declarative: facts.target.declarative_validation(),
        cel: facts.cel,
    };
    let metadata = Path::new("metadata");
    let spec_path = Path::new("spec");
    let meta = || rules::meta::validate_object_meta_long_name(&new.metadata, false, &metadata);
    let mut errs = meta();
    match old {
        None => errs.extend(rules::device_class::validate_device_class_spec(
            spec, &spec_path, judged,
        )),
        Some(old) if facts.target.version == KubeVersion::V1_36 => {
            errs.extend(shared::validate_meta_update(&new.metadata, &old.metadata));
            errs.extend(rules::device_class::validate_device_class_spec(
                spec, &spec_path, judged,
            ));
        }
        Some(old) => {
            let (as_created, against_old) =
                rules::device_class::validate_device_class_update(spec, &old.spec, &spec_path, judged);
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
            e.declared.is_none()
                || (old.is_none_or(|old| changed(&e.field, &new.metadata, spec, old)) && seen.insert(e.to_string()))
        });
        rules::declarative::enforce(errs, Path::clone)
    } else {
        rules::declarative::forget(&mut errs);
        errs
    }
}

/// Whether the top-level field `field` lies in differs from the stored
/// class (the granularity of the declarative tags of a DeviceClass).
fn changed(field: &Path, metadata: &ObjectMeta, spec: &DeviceClassSpec, old: &Whole<DeviceClassSpec>) -> bool {
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
        ["metadata", "name"] => metadata.name != old.metadata.name,
        ["spec", "selectors"] => spec.selectors != old.spec.selectors,
        ["spec", "config"] => spec.config != old.spec.config,
        ["spec", "extendedResourceName"] => spec.extended_resource_name != old.spec.extended_resource_name,
        _ => true,
    }
}
