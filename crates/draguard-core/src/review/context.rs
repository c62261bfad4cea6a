//! What the core may know besides the request itself: the time, the
//! cluster, the policies, the phase, the deadline, the target release and
//! the CEL compiler. Built by `crate::review::Engine` only.
//! It names the policies and the cluster, so it sits above them, in review,
//! while the request it accompanies is vocabulary (`verdict`).

use std::time::Instant;

use crate::kubernetes::Target;
use crate::policy::PolicySet;
use crate::policy::toleration_restriction::TolerationRestrictionConfig;
use crate::rules::cel::CelCompiler;
use crate::verdict::Phase;
use crate::view::ClusterView;

/// Everything the core may know besides the request itself.
pub struct Context<'a> {
    pub now: jiff::Timestamp,
    pub cluster: &'a dyn ClusterView,
    pub policies: &'a PolicySet,
    /// PodTolerationRestriction compatibility, when enabled: the plugin's
    /// cluster configuration (namespace annotations come from `cluster`).
    pub toleration_restriction: Option<&'a TolerationRestrictionConfig>,
    pub phase: Phase,
    /// When the server stops waiting for this review (the apiserver's
    /// `?timeout=`): past it the review stops between stages and between
    /// CEL compiles, its answer no longer read. `None` (the CLI): it runs
    /// to the end.
    pub deadline: Option<Instant>,
    /// The Kubernetes release whose rules judge the object: its version
    /// and feature gates.
    pub target: Target,
    /// What compiles the object's CEL selectors.
    pub cel: &'a dyn CelCompiler,
}

impl Context<'_> {
    /// Whether the deadline has passed. The one clock the core reads: a
    /// monotonic one, and only to stop work nobody waits for.
    pub fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
}
