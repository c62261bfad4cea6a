//! DeviceClass: judged for its drivers' opaque configs (`spec.config[i]`),
//! which every claim of the class gets before its own and which no
//! driver's webhook checks. The apiserver's own DeviceClass rules
//! (selectors, config count and size) are not reproduced here yet; the
//! class's metadata is.

use serde::Deserialize;

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::Path;
use crate::objects::claim::DeviceClaimConfiguration;
use crate::objects::{DecodeError, ObjectJson, Whole, nullable};
use crate::rules;

pub const ROW: KindRow = KindRow::new(
    "resource.k8s.io",
    "DeviceClass",
    &["v1", "v1beta2", "v1beta1"],
    "deviceclasses",
);

pub struct DeviceClassKind;

/// The part of a class's spec draguard judges. A class config has no
/// `requests` (it applies to every request of the class); the field is
/// read with the claims' type, where it stays empty.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeviceClassSpec {
    #[serde(deserialize_with = "nullable")]
    pub config: Vec<DeviceClaimConfiguration>,
}

impl AdmittedKind for DeviceClassKind {
    type View = Whole<DeviceClassSpec>;

    fn decode(object: &ObjectJson, _: Routed) -> Result<Self::View, DecodeError> {
        object.decode()
    }

    /// On UPDATE a config the class already had is not judged again, so a
    /// schema that became stricter never blocks an unrelated edit.
    fn validate(new: &Self::View, old: Option<&Self::View>, facts: &Facts<'_>) -> RuleVerdict {
        let mut errs = shared::validate_metadata(&new.metadata, old.map(|o| &o.metadata), false);
        errs.extend(rules::driver_config::judge_configs(
            &new.spec.config,
            old.map(|o| o.spec.config.as_slice()),
            &Path::new("spec").child("config"),
            facts.drivers,
        ));
        errs.into()
    }
}
