//! ResourceClaimTemplate: judged as the claims it stamps; its spec is
//! immutable, including the claims' metadata.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::claim::{admin_access, claim_version, driver_configs, immutable_spec};
use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::{BadValue, FieldError, Path};
use crate::objects::{ClaimSpec, ClaimVersion, DecodeError, ObjectJson, Whole};
use crate::policy::apply::{self, TolerationList};
use crate::policy::enforce::TolerationTarget as PolicyTarget;
use crate::quota::{Charge, charge};
use crate::rules;
use crate::view::ClusterView;

pub const ROW: KindRow = KindRow::new(
    "resource.k8s.io",
    "ResourceClaimTemplate",
    &["v1", "v1beta2", "v1beta1"],
    "resourceclaimtemplates",
)
.with_namespaced(true)
.with_charge(super::charge::<ClaimTemplateKind>);

pub struct ClaimTemplateKind;

/// The template's metadata, and the metadata and spec of its claims.
pub struct ClaimTemplateView {
    pub whole: Whole<Whole<ClaimSpec>>,
    pub version: ClaimVersion,
}

impl AdmittedKind for ClaimTemplateKind {
    type View = ClaimTemplateView;

    fn decode(object: &ObjectJson, routed: Routed) -> Result<ClaimTemplateView, DecodeError> {
        let version = claim_version(routed)?;
        Ok(ClaimTemplateView {
            whole: ClaimSpec::decode_template(object, version)?,
            version,
        })
    }

    fn validate(new: &ClaimTemplateView, old: Option<&ClaimTemplateView>, facts: &Facts<'_>) -> RuleVerdict {
        let (meta, template) = (&new.whole.metadata, &new.whole.spec);
        let spec_path = Path::new("spec");
        match old {
            Some(old) => {
                let old_template = &old.whole.spec;
                let mut errs = shared::validate_meta_update(meta, &old.whole.metadata);
                // The whole template spec is immutable; the 1.36 apiserver
                // prints it as Go structures.
                let changed = || {
                    let printed = BadValue::Json(crate::objects::go_json::claim_template_spec(
                        &template.metadata,
                        &template.spec,
                    ));
                    FieldError::invalid(spec_path.clone(), printed, "field is immutable")
                };
                if template.metadata != old_template.metadata && template.spec == old_template.spec {
                    errs.push(changed());
                }
                errs.extend(immutable_spec(
                    &template.spec,
                    &old_template.spec,
                    new.version,
                    facts,
                    &spec_path.child("spec"),
                    changed,
                ));
                errs.extend(driver_configs(
                    &template.spec,
                    Some(&old_template.spec),
                    &spec_path.child("spec"),
                    facts,
                ));
                errs.into()
            }
            None => {
                let mut errs = rules::meta::validate_object_meta(meta, true, &Path::new("metadata"));
                errs.extend(rules::meta::validate_labels_and_annotations(
                    &template.metadata,
                    &spec_path.child("metadata"),
                ));
                errs.extend(rules::claim::validate_claim_spec(
                    &template.spec,
                    new.version,
                    facts.target.version,
                    &spec_path.child("spec"),
                    facts.cel,
                ));
                errs.extend(admin_access(&template.spec, facts));
                errs.extend(driver_configs(&template.spec, None, &spec_path.child("spec"), facts));
                errs.into()
            }
        }
    }

    fn declarative_paths(routed: Routed) -> Option<fn(&Path) -> Path> {
        Some(super::claim::claim_paths(routed))
    }

    fn toleration_lists(view: &ClaimTemplateView, _: Routed) -> Option<(PolicyTarget, Vec<TolerationList>)> {
        let lists = apply::claim_lists(&view.whole.spec.spec, view.version, &["spec", "spec"]);
        Some((PolicyTarget::Device, lists))
    }

    fn claim_spec(view: &ClaimTemplateView) -> Option<(&ClaimSpec, Path)> {
        Some((&view.whole.spec.spec, Path::new("spec").child("spec")))
    }

    /// A webhook charges the claims themselves; `check` knows how many
    /// claims the template will stamp and charges it that many times.
    fn quota_charge(view: &ClaimTemplateView, namespace: &str, cluster: &dyn ClusterView) -> Option<Charge> {
        let name = view.whole.metadata.name.as_deref().unwrap_or("");
        match cluster.template_claims(namespace, name) {
            Some(n) if n > 0 => Some(charge(&view.whole.spec.spec).times(n)),
            _ => None,
        }
    }
}

impl super::ObjectView for ClaimTemplateView {
    fn metadata(&self) -> &ObjectMeta {
        &self.whole.metadata
    }
}
