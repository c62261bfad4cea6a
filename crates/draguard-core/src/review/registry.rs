//! The registry: every kind draguard judges, each row bound to the pipeline
//! of its typed view (and to its `status` review where it has one).
//!
//! The rows are plain data in `kinds/`; this is the one place that knows
//! both a row and the review that runs it, so the kinds need not import
//! `review`. A new kind is its file in `kinds/` plus one line here.

use super::{Context, claim_status, pipeline};
use crate::kinds::{
    AdmittedKind, KindRow, Routed, claim, claim_template, device_class, device_taint_rule, embedded_template,
    embedded_tolerations, namespace, node, pod, resource_slice, slice_patch, workload,
};
use crate::verdict::{Decision, Request};

/// A review of one routed request.
pub type ReviewFn = fn(Routed, &Request, &Context<'_>) -> Decision;

/// A row and the reviews that judge it.
pub struct Registered {
    pub row: KindRow,
    /// The review pipeline, instantiated for the kind's typed view.
    review: ReviewFn,
    /// The review of an UPDATE of the `status` subresource, for kinds whose
    /// status the apiserver validates in a way draguard reproduces; other
    /// subresource writes are not judged (but for the namespace guards,
    /// [`AdmittedKind::NAMESPACE_GUARDS`]). deploy/ routes no other
    /// subresource: status is written by the control plane (the scheduler
    /// allocates claims), which must keep working while draguard is down.
    status: Option<ReviewFn>,
}

impl Registered {
    /// `row`, judged by the pipeline of `K`'s typed view.
    const fn of<K: AdmittedKind>(row: KindRow) -> Registered {
        Registered {
            row,
            review: pipeline::<K>,
            status: None,
        }
    }

    const fn with_status(self, status: ReviewFn) -> Registered {
        Registered {
            status: Some(status),
            ..self
        }
    }

    /// The review of a write of the object itself.
    pub fn review(&self, routed: Routed, req: &Request, ctx: &Context<'_>) -> Decision {
        (self.review)(routed, req, ctx)
    }

    /// The review of a `status` UPDATE, for kinds that have one.
    pub fn status(&self) -> Option<ReviewFn> {
        self.status
    }
}

/// Every kind draguard judges. Order matters only for readers.
pub static KINDS: &[Registered] = &[
    Registered::of::<claim::ClaimKind>(claim::ROW).with_status(claim_status::review),
    Registered::of::<claim_template::ClaimTemplateKind>(claim_template::ROW),
    Registered::of::<device_class::DeviceClassKind>(device_class::ROW),
    Registered::of::<resource_slice::ResourceSliceKind>(resource_slice::ROW),
    Registered::of::<device_taint_rule::DeviceTaintRuleKind>(device_taint_rule::ROW),
    Registered::of::<slice_patch::SlicePatchKind>(slice_patch::ROW),
    Registered::of::<slice_patch::SlicePatchKind>(slice_patch::ROW_KEP),
    Registered::of::<pod::PodKind>(pod::ROW),
    Registered::of::<node::NodeKind>(node::ROW),
    Registered::of::<namespace::NamespaceKind>(namespace::ROW),
    Registered::of::<workload::WorkloadKind>(workload::DEPLOYMENT),
    Registered::of::<workload::WorkloadKind>(workload::REPLICA_SET),
    Registered::of::<workload::WorkloadKind>(workload::STATEFUL_SET),
    Registered::of::<workload::WorkloadKind>(workload::DAEMON_SET),
    Registered::of::<workload::WorkloadKind>(workload::JOB),
    Registered::of::<workload::WorkloadKind>(workload::CRON_JOB),
    #[cfg(any(test, feature = "toy-kind"))]
    Registered::of::<crate::kinds::toy::WidgetKind>(crate::kinds::toy::ROW),
];

/// The kinds `check` judges inside a workload (a pod template, a toleration
/// list): never routed from the API, so not in [`KINDS`].
static EMBEDDED: &[Registered] = &[
    Registered::of::<embedded_template::EmbeddedTemplateKind>(embedded_template::ROW),
    Registered::of::<embedded_tolerations::EmbeddedTolerationsKind>(embedded_tolerations::ROW),
];

/// Every row routed from the API.
pub fn rows() -> impl Iterator<Item = &'static KindRow> {
    KINDS.iter().map(|r| &r.row)
}

/// The row and served version for a group/version/kind; `None` means
/// draguard has nothing to say about it (allowed, no patch).
pub fn route(group: &str, version: &str, kind: &str) -> Option<Routed> {
    registered(KINDS, group, version, kind).map(|(_, routed)| routed)
}

/// [`route`], with the reviews bound to the row.
pub fn registered(
    table: &'static [Registered],
    group: &str,
    version: &str,
    kind: &str,
) -> Option<(&'static Registered, Routed)> {
    let entry = table.iter().find(|r| r.row.group == group && r.row.kind == kind)?;
    let version = entry.row.versions.iter().find(|v| **v == version)?;
    Some((
        entry,
        Routed {
            row: &entry.row,
            version,
        },
    ))
}

/// The row of a kind by group and name, whatever the version.
pub fn find(group: &str, kind: &str) -> Option<&'static KindRow> {
    rows().find(|r| r.group == group && r.kind == kind)
}

/// Runs the pipeline bound to `routed`'s row (by group and kind: a row
/// and its variants, such as a cluster-scoped toleration list, share one
/// pipeline). A row the registry does not know is allowed.
pub fn review_routed(routed: Routed, req: &Request, ctx: &Context<'_>) -> Decision {
    let same = |r: &&Registered| r.row.group == routed.row.group && r.row.kind == routed.row.kind;
    match KINDS.iter().chain(EMBEDDED).find(same) {
        Some(entry) => entry.review(routed, req, ctx),
        None => Decision::allow(),
    }
}
