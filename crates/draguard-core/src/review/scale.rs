//! Warnings before breakage, for `kubectl scale`: a write of a workload's
//! `scale` subresource carries an `autoscaling/v1` Scale (its replicas
//! only), never the pod template. The server fetches the workload itself
//! (src/server/scale_workload.rs, the IO) and hands it here; the template
//! is then judged exactly as for an UPDATE of the workload that leaves its
//! template alone ([`super::standing_template`]), and the only outcome is a
//! warning: the write is always admitted.
//!
//! Only a scale-up by someone other than the control plane is worth a
//! warning: fewer replicas stamp no Pod, and the HorizontalPodAutoscaler
//! reads no warning. The webhook entry's matchConditions keep the others
//! away (deploy/base/webhooks.yaml `scale.validate.draguard.dev`); a
//! review that reaches draguard anyway is answered without a fetch.

use serde_json::Value;

use super::{Context, registry, standing_template};
use crate::kinds::KindRow;
use crate::kinds::workload::{DEPLOYMENT, REPLICA_SET, STATEFUL_SET, WorkloadKind};
use crate::objects::ObjectJson;
use crate::verdict::{Decision, Envelope, Request};
use kube_core::admission::Operation;
use kube_core::{GroupVersionKind, GroupVersionResource};

/// The workload kinds with a `scale` subresource that draguard judges:
/// kubernetes v1.36 pkg/registry/apps/{deployment,replicaset,statefulset}/
/// storage/storage.go (`ScaleREST`). DaemonSets, Jobs and CronJobs have
/// none. Custom workloads with a scale subresource are not judged by the
/// webhook at all (only `draguard check` reads them), so they have no
/// template to warn of here either.
pub(super) const SCALABLE: [&KindRow; 3] = [&DEPLOYMENT, &REPLICA_SET, &STATEFUL_SET];

/// The workload a `scale` write is about, when it is worth a fetch.
#[derive(Clone, Copy)]
pub struct ScaleTarget<'r> {
    pub row: &'static KindRow,
    /// The served version the apiserver named in `request.resource`.
    pub version: &'static str,
    pub namespace: &'r str,
    pub name: &'r str,
}

/// The workload to fetch for `req`: an UPDATE of the `scale` subresource
/// of a Deployment, ReplicaSet or StatefulSet that raises its replicas.
/// `None` for everything else, scale-downs included (no Pod is stamped),
/// and for names that are not DNS names (the apiserver sends none; a
/// request from elsewhere must not steer the fetch's URL).
pub fn scale_target(req: &Request) -> Option<ScaleTarget<'_>> {
    let env = &req.envelope;
    if env.operation != Operation::Update || env.sub_resource.as_deref() != Some("scale") {
        return None;
    }
    let resource = &env.resource;
    let row = SCALABLE
        .into_iter()
        .find(|r| r.group == resource.group && r.plural == resource.resource)?;
    let version = row.versions.iter().find(|v| **v == resource.version)?;
    let namespace = env.namespace.as_deref()?;
    if !is_dns_name(namespace) || !is_dns_name(&env.name) {
        return None;
    }
    let replicas = |object: Option<&ObjectJson>| -> Option<i64> {
        let tree = object?.tree().ok()?;
        // An absent count is zero, as Go decodes the Scale's int32.
        Some(tree.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0))
    };
    let (new, old) = (replicas(req.object.as_ref())?, replicas(req.old_object.as_ref())?);
    if new <= old {
        return None;
    }
    Some(ScaleTarget {
        row,
        version,
        namespace,
        name: &env.name,
    })
}

/// A DNS subdomain (RFC 1123, as `metadata.name` of these kinds and every
/// namespace name are), so that a name cannot steer the GET's URL.
fn is_dns_name(name: &str) -> bool {
    !name.is_empty() && crate::rules::names::dns1123_subdomain(name).is_empty()
}

/// The answer to a `scale` write, given the workload as stored: always
/// allowed, with the warning an UPDATE of the workload that leaves its
/// template alone would get (`new pods of this Deployment would be
/// denied: …`). No warning when the review is not a scale-up
/// ([`scale_target`]) or `workload` is not the object it names.
pub fn review_scale(req: &Request, workload: Value, ctx: &Context<'_>) -> Decision {
    let Some(target) = scale_target(req) else {
        return Decision::allow();
    };
    let row = target.row;
    let api_version = format!("{}/{}", row.group, target.version);
    let names_it = workload.get("apiVersion").and_then(Value::as_str) == Some(api_version.as_str())
        && workload.get("kind").and_then(Value::as_str) == Some(row.kind)
        && workload.pointer("/metadata/namespace").and_then(Value::as_str) == Some(target.namespace)
        && workload.pointer("/metadata/name").and_then(Value::as_str) == Some(target.name);
    let Some(routed) = registry::route(row.group, target.version, row.kind).filter(|_| names_it) else {
        return Decision::allow();
    };
    // The stored workload as if created now, as the UPDATE's warning
    // judges it: its template is what the new Pods get, and the replicas
    // the scale changes are not judged. Moved, not copied: a workload can
    // be megabytes (its charge: src/server/scale_workload.rs).
    let env = &req.envelope;
    let create = Request {
        envelope: Envelope {
            uid: env.uid.clone(),
            kind: GroupVersionKind::gvk(row.group, target.version, row.kind),
            resource: GroupVersionResource::gvr(row.group, target.version, row.plural),
            sub_resource: None,
            name: env.name.clone(),
            namespace: env.namespace.clone(),
            operation: Operation::Create,
            user_info: env.user_info.clone(),
            dry_run: env.dry_run,
        },
        object: Some(ObjectJson::Tree(workload)),
        old_object: None,
    };
    Decision {
        warnings: standing_template::warning_as_created::<WorkloadKind>(routed, &create, ctx)
            .into_iter()
            .collect(),
        ..Decision::allow()
    }
}

#[cfg(test)]
mod tests {
    use super::is_dns_name;

    #[test]
    fn only_dns_names_steer_a_fetch() {
        for good in ["ml", "team-a", "w.v1", "a", "0"] {
            assert!(is_dns_name(good), "{good}");
        }
        let long = "a".repeat(254);
        for bad in [
            "",
            "..",
            "../secrets",
            "a/b",
            "A",
            "-a",
            "a-",
            "a?b",
            "a%2f",
            long.as_str(),
        ] {
            assert!(!is_dns_name(bad), "{bad}");
        }
    }
}

// Whole reviews, Scale review and fetched workload to answer: tests/
// scale_subresource.rs of this crate.
