//! ResourceClaim: the spec is immutable; a new claim is judged whole,
//! charged against quota, and its device tolerations meet the policies.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::{BadValue, Declared, FieldError, Path};
use crate::objects::{ClaimSpec, ClaimVersion, DecodeError, ObjectJson, Whole};
use crate::policy::apply::{self, TolerationList};
use crate::policy::enforce::TolerationTarget as PolicyTarget;
use crate::quota::{Charge, claim_charge};
use crate::rules;
use crate::view::ClusterView;

pub const ROW: KindRow = KindRow::new(
    "resource.k8s.io",
    "ResourceClaim",
    &["v1", "v1beta2", "v1beta1"],
    "resourceclaims",
)
.with_namespaced(true)
.with_charge(super::charge::<ClaimKind>);

pub struct ClaimKind;

/// A claim and the served version it came in (device tolerations are
/// located differently in v1beta1).
pub struct ClaimView {
    pub whole: Whole<ClaimSpec>,
    pub version: ClaimVersion,
}

/// The claim version of a routed request.
pub(super) fn claim_version(routed: Routed) -> Result<ClaimVersion, DecodeError> {
    ClaimVersion::parse(routed.version)
        .ok_or_else(|| DecodeError::new(format!("version {} carries no claims", routed.version)))
}

impl AdmittedKind for ClaimKind {
    type View = ClaimView;

    fn decode(object: &ObjectJson, routed: Routed) -> Result<ClaimView, DecodeError> {
        let version = claim_version(routed)?;
        Ok(ClaimView {
            whole: ClaimSpec::decode_claim(object, version)?,
            version,
        })
    }

    fn validate(new: &ClaimView, old: Option<&ClaimView>, facts: &Facts<'_>) -> RuleVerdict {
        let spec = &new.whole.spec;
        let mut errs = rules::meta::validate_object_meta(&new.whole.metadata, true, &Path::new("metadata"));
        match old {
            None => {
                errs.extend(rules::claim::validate_claim_spec(
                    spec,
                    new.version,
                    facts.target.version,
                    &Path::new("spec"),
                    facts.cel,
                ));
                errs.extend(admin_access(spec, facts));
                errs.extend(driver_configs(spec, None, &Path::new("spec"), facts));
            }
            Some(old) => {
                errs.extend(shared::validate_meta_update(&new.whole.metadata, &old.whole.metadata));
                // Hand-written validation prints the whole internal spec as
                // Go structures; declarative validation (`immutable`) no value.
                let changed = || {
                    let printed = BadValue::Json(crate::objects::go_json::claim_spec(spec));
                    FieldError::invalid(Path::new("spec"), printed, "field is immutable").declared_as(Declared::Null)
                };
                errs.extend(immutable_spec(
                    spec,
                    &old.whole.spec,
                    new.version,
                    facts,
                    &Path::new("spec"),
                    changed,
                ));
                errs.extend(driver_configs(spec, Some(&old.whole.spec), &Path::new("spec"), facts));
            }
        }
        errs.into()
    }

    fn toleration_lists(view: &ClaimView, _: Routed) -> Option<(PolicyTarget, Vec<TolerationList>)> {
        let lists = apply::claim_lists(&view.whole.spec, view.version, &["spec"]);
        Some((PolicyTarget::Device, lists))
    }

    fn claim_spec(view: &ClaimView) -> Option<(&ClaimSpec, Path)> {
        Some((&view.whole.spec, Path::new("spec")))
    }

    fn quota_charge(view: &ClaimView, _: &str, _: &dyn ClusterView) -> Option<Charge> {
        Some(claim_charge(&view.whole.spec, &view.whole.metadata))
    }

    fn declarative_paths(routed: Routed) -> Option<fn(&Path) -> Path> {
        Some(claim_paths(routed))
    }
}

/// Where declarative validation reports an error of a claim (or template)
/// served in `routed`'s version: v1beta1's requests are flat.
pub(super) fn claim_paths(routed: Routed) -> fn(&Path) -> Path {
    match ClaimVersion::parse(routed.version) {
        Some(ClaimVersion::V1beta1) => rules::declarative::flat_request_path,
        _ => Path::clone,
    }
}

/// `admin-access` needs a namespace labelled for it.
pub(super) fn admin_access(spec: &ClaimSpec, facts: &Facts<'_>) -> Vec<FieldError> {
    let labels = facts.cluster.namespace_labels(facts.namespace);
    rules::claim::validate_admin_access(spec, labels.as_ref())
}

/// The drivers' opaque configs of a claim spec at `spec_path`, by their
/// schemas; on UPDATE (`old`), a config already stored is not judged again.
pub(super) fn driver_configs(
    spec: &ClaimSpec,
    old: Option<&ClaimSpec>,
    spec_path: &Path,
    facts: &Facts<'_>,
) -> Vec<FieldError> {
    let configs = spec_path.child("devices").child("config");
    let old_configs = old.map(|o| o.devices.config.as_slice());
    let mut errs = rules::driver_config::judge_configs(&spec.devices.config, old_configs, &configs, facts.drivers);
    errs.extend(rules::driver_config::vfio_without_passthrough(
        &spec.devices.config,
        old_configs,
        &configs,
        facts.drivers,
    ));
    let admin = rules::driver_config::sharing_on_admin_access(spec, old, spec_path, &errs, facts.drivers);
    errs.extend(admin);
    errs
}

/// A claim spec is immutable. When it changed, the apiserver says so
/// (`changed`: the error it gives, whose value differs between claims and
/// templates); draguard also judges the new spec with enum ratcheting
/// against the old one, so the author learns everything that is wrong with
/// it at once.
pub(super) fn immutable_spec(
    spec: &ClaimSpec,
    old: &ClaimSpec,
    version: ClaimVersion,
    facts: &Facts<'_>,
    spec_path: &Path,
    changed: impl FnOnce() -> FieldError,
) -> Vec<FieldError> {
    if spec == old {
        return Vec::new();
    }
    let mut errs = vec![changed()];
    errs.extend(rules::claim::validate_claim_spec_update(
        spec,
        old,
        version,
        facts.target.version,
        spec_path,
        facts.cel,
    ));
    errs
}

impl super::ObjectView for ClaimView {
    fn metadata(&self) -> &ObjectMeta {
        &self.whole.metadata
    }
}
