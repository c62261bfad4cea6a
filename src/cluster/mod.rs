//! The live cluster: watched caches of what verdicts read, slimmed and
//! indexed, behind the core's `view::ClusterView` (`live::LiveView`), and
//! the apiserver's own version and gates. The judgement reads the cluster
//! only through that trait, so none of this is in its import graph.

pub mod apiserver;
pub mod audited_kinds;
pub mod devices;
pub(crate) mod error_log;
pub mod impact_permits;
pub mod index;
pub mod indexes;
pub mod live;
pub mod paged_list;
pub mod slim;
pub mod taint_rules;
pub(crate) mod watch_error;
