//! The Engine: what judges every review, in one value. It holds the
//! policies, the cluster view, the target release, PodTolerationRestriction's
//! configuration and the CEL compiler, and builds the [`Context`] of each
//! review from them, for every door alike: the server, `check`, `review`,
//! `policy test`, tests, benches and fuzz.

use std::time::Instant;

use super::Context;
use crate::kubernetes::Target;
use crate::policy::PolicySet;
use crate::policy::toleration_restriction::TolerationRestrictionConfig;
use crate::rules::cel::{self, CelCompiler};
use crate::verdict::Phase;
use crate::view::{ClusterView, NoCluster};

/// What judges a review, borrowed for as long as the reviews it judges.
#[derive(Clone, Copy)]
pub struct Engine<'a> {
    pub policies: &'a PolicySet,
    pub cluster: &'a dyn ClusterView,
    pub target: Target,
    /// PodTolerationRestriction compatibility, when enabled.
    pub toleration_restriction: Option<&'a TolerationRestrictionConfig>,
    pub cel: &'a dyn CelCompiler,
}

impl<'a> Engine<'a> {
    /// `policies` over `cluster` for `target`, without PodTolerationRestriction,
    /// compiling on the process's CEL compiler pool on the calling thread.
    pub fn new(policies: &'a PolicySet, cluster: &'a dyn ClusterView, target: Target) -> Self {
        Engine {
            policies,
            cluster,
            target,
            toleration_restriction: None,
            cel: cel::shared(),
        }
    }

    /// `policies` with no cluster, for the default target.
    pub fn without_cluster(policies: &'a PolicySet) -> Self {
        Self::new(policies, &NoCluster, Target::default())
    }

    pub fn with_toleration_restriction(self, config: Option<&'a TolerationRestrictionConfig>) -> Self {
        Engine {
            toleration_restriction: config,
            ..self
        }
    }

    pub fn with_cel(self, cel: &'a dyn CelCompiler) -> Self {
        Engine { cel, ..self }
    }

    /// The context of one review at `now`, in `phase`, that stops at
    /// `deadline` (`None`: runs to the end, as the CLI does).
    pub fn context(&self, now: jiff::Timestamp, phase: Phase, deadline: Option<Instant>) -> Context<'a> {
        Context {
            now,
            cluster: self.cluster,
            policies: self.policies,
            toleration_restriction: self.toleration_restriction,
            phase,
            deadline,
            target: self.target,
            cel: self.cel,
        }
    }
}
