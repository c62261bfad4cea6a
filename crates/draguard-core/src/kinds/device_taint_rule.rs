//! DeviceTaintRule: an admin's taint on the devices a selector picks.
//! A selector that picks every device, or none given, is allowed with a
//! warning that says what it does in the Kubernetes version in force. What
//! the rule would do to the devices and claims the cluster view knows is
//! the review's `taint_rule_impact` stage, computed once with the caps.

use json_patch::PatchOperation;
use serde_json::Value;

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::Path;
use crate::objects::dra::DeviceTaintRuleSpec;
use crate::objects::{DecodeError, ObjectJson, Whole};
use crate::rules;
use crate::verdict::Warning;

pub const ROW: KindRow = KindRow::new(
    "resource.k8s.io",
    "DeviceTaintRule",
    &["v1", "v1beta2", "v1alpha3"],
    "devicetaintrules",
);

pub struct DeviceTaintRuleKind;

impl AdmittedKind for DeviceTaintRuleKind {
    type View = Whole<DeviceTaintRuleSpec>;

    fn decode(object: &ObjectJson, _: Routed) -> Result<Self::View, DecodeError> {
        object.decode()
    }

    fn validate(new: &Self::View, old: Option<&Self::View>, facts: &Facts<'_>) -> RuleVerdict {
        let mut errors = shared::validate_metadata(&new.metadata, old.map(|o| &o.metadata), false);
        let spec_path = Path::new("spec");
        errors.extend(rules::devicetaintrule::validate_device_taint_rule(
            &new.spec,
            old.map(|o| &o.spec),
            &spec_path,
        ));
        let warnings: Vec<Warning> =
            rules::devicetaintrule::device_taint_rule_warnings(&new.spec, facts.target.version)
                .into_iter()
                .map(|w| Warning::at(spec_path.child("deviceSelector"), w))
                .collect();
        RuleVerdict { errors, warnings }
    }

    fn taint_rule(view: &Self::View) -> Option<&DeviceTaintRuleSpec> {
        Some(&view.spec)
    }

    fn declarative_paths(_: Routed) -> Option<fn(&Path) -> Path> {
        Some(Path::clone)
    }

    fn stamps(object: &Value, old: Option<&Value>, _: Routed, now: &str) -> Vec<PatchOperation> {
        crate::mutate::time_added::rule_taint(object, old, &["spec", "taint"], now)
            .into_iter()
            .collect()
    }
}
