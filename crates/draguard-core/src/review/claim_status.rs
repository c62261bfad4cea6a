//! ResourceClaim `/status` UPDATEs: from Kubernetes 1.37 the apiserver
//! validates the tolerations copied into a new allocation's results
//! (`validateDeviceRequestAllocationResult`, kubernetes/api 3ed6485c7),
//! with the rules of spec tolerations and no limit on their number. Only
//! the write that sets an allocation is judged: once set, an allocation is
//! immutable, which the apiserver enforces before admission. 1.36 does not
//! validate them.

use serde::Deserialize;

use super::Context;
use crate::field::{FieldError, Path};
use crate::kinds::Routed;
use crate::kubernetes::KubeVersion;
use crate::objects::claim_status::{Allocation, ClaimStatus};
use crate::objects::{DecodeError, ObjectJson, nullable};
use crate::rules::tolerations::validate_device_toleration;
use crate::verdict::{Decision, Denial, ObjectRef, Phase, Request, ReviewError};

#[derive(Deserialize, Default)]
#[serde(default)]
struct ClaimWithStatus {
    #[serde(deserialize_with = "nullable")]
    metadata: Metadata,
    #[serde(deserialize_with = "nullable")]
    status: ClaimStatus,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Metadata {
    #[serde(deserialize_with = "nullable")]
    name: String,
}

fn decode(object: &ObjectJson) -> Result<ClaimWithStatus, DecodeError> {
    object.decode()
}

/// The review of a `/status` UPDATE of a ResourceClaim.
/// What does not decode is refused (400) in every phase and version, as
/// the main resource's pipeline refuses it.
pub fn review(_: Routed, req: &Request, ctx: &Context<'_>) -> Decision {
    let env = &req.envelope;
    let what = || format!("ResourceClaim.resource.k8s.io {:?}", env.name);
    let (Some(object), Some(old)) = (&req.object, &req.old_object) else {
        return Decision::bad_request(ReviewError::NoObject {
            kind: "ResourceClaim".to_owned(),
            operation: "UPDATE",
        });
    };
    let new = match decode(object) {
        Ok(new) => new,
        Err(source) => return Decision::bad_request(ReviewError::Undecodable { object: what(), source }),
    };
    let old = match decode(old) {
        Ok(old) => old,
        Err(source) => return Decision::bad_request(ReviewError::OldUndecodable { object: what(), source }),
    };
    // `/mutate` never judges; 1.36 does not look at result tolerations.
    if ctx.phase == Phase::Mutate || ctx.target.version < KubeVersion::V1_37 {
        return Decision::allow();
    }
    let (None, Some(allocation)) = (&old.status.allocation, &new.status.allocation) else {
        return Decision::allow();
    };
    let errors = result_tolerations(allocation);
    if errors.is_empty() {
        return Decision::allow();
    }
    let errors = if ctx.target.declarative_validation() {
        crate::rules::declarative::enforce(errors, Path::clone)
    } else {
        let mut errors = errors;
        crate::rules::declarative::forget(&mut errors);
        errors
    };
    let name = if new.metadata.name.is_empty() {
        env.name.clone()
    } else {
        new.metadata.name
    };
    Decision::deny(Denial::Invalid {
        object: ObjectRef {
            group: env.kind.group.clone(),
            kind: env.kind.kind.clone(),
            name,
        },
        errors,
    })
}

/// `status.allocation.devices.results[i].tolerations[k]`, each judged as a
/// new toleration.
fn result_tolerations(allocation: &Allocation) -> Vec<FieldError> {
    let results = Path::new("status")
        .child("allocation")
        .child("devices")
        .child("results");
    let mut errors = Vec::new();
    for (i, result) in allocation.devices.results.iter().enumerate() {
        let tolerations = results.index(i).child("tolerations");
        for (k, toleration) in result.tolerations.iter().enumerate() {
            errors.extend(validate_device_toleration(toleration, None, &tolerations.index(k)));
        }
    }
    errors
}
