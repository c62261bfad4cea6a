//! Where an object keeps its pod specs: the one owner of that question,
//! which `check`, `audit` (through `check`) and the webhook's kind table
//! all come to.
//!
//! - Kinds draguard reviews natively (Pod, Deployment, Job, ...) say it
//!   themselves: their row in [`crate::review::registry`] knows its pod
//!   spec and how many Pods it runs at once.
//! - Custom workloads (a JobSet, a RayCluster, a `--pod-template` row) are
//!   described by a [`table`] row: the path language and the rows; the
//!   built-in rows are in [`builtin`].
//! - A kind nobody described is searched for pod specs by their shape
//!   ([`by_shape`]).
//!
//! Pod specs and toleration lists found in a custom workload are judged as
//! objects of their own: [`crate::kinds::embedded_template`] and
//! [`crate::kinds::embedded_tolerations`] are those kinds. What a caller
//! says about a pod spec that was not found (a warning, a note) is the
//! caller's own (`check` keeps it in `src/check/workloads.rs`).

pub mod builtin;
pub mod by_shape;
pub mod table;

use serde_json::Value;

use table::TemplateKind;

/// The pod specs of an object of `group`/`version`/`kind`, each with how
/// many Pods it runs at once: a natively reviewed kind's through its
/// registry row, any other kind's through the rows of `table` for it. A
/// kind no row describes gives none: the search by shape ([`by_shape`])
/// is asked separately, by whoever judges such a kind.
pub fn pod_specs_of<'v>(
    table: &[TemplateKind],
    group: &str,
    version: &str,
    kind: &str,
    object: &'v Value,
) -> Vec<(&'v Value, u64)> {
    match crate::review::registry::route(group, version, kind) {
        Some(routed) => routed
            .row
            .pod_spec_of(object)
            .map(|spec| (spec, routed.row.pods_at_once(object)))
            .into_iter()
            .collect(),
        None => table::pod_specs(table, group, kind, object)
            .into_iter()
            .map(|f| (f.spec, f.replicas))
            .collect(),
    }
}
