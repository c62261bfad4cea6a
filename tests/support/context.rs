// Shared by the cluster test crates; each uses part of it.
#![allow(dead_code)]

//! The context the cluster tests judge in: `/validate` at a fixed time,
//! without a deadline.

use draguard::admission::Incoming;
use draguard::kubernetes::Target;
use draguard::policy::PolicySet;
use draguard::review::{Context, Engine};
use draguard::verdict::Phase;
use draguard::view::ClusterView;

pub fn validate<'a>(cluster: &'a dyn ClusterView, policies: &'a PolicySet, target: Target) -> Context<'a> {
    Engine::new(policies, cluster, target).context(
        "2026-11-21T10:00:00Z".parse().unwrap_or_default(),
        Phase::Validate,
        None,
    )
}

/// The verdict on the AdmissionReview `review` in `ctx`: allowed, or the
/// 403 denial's message.
pub fn verdict(ctx: &Context<'_>, review: &[u8]) -> Result<(), String> {
    let (decision, response) = Incoming::parse(review).expect("review").answer(ctx);
    if decision.allowed {
        return Ok(());
    }
    assert_eq!(response["response"]["status"]["code"], 403, "{response}");
    Err(response["response"]["status"]["message"]
        .as_str()
        .unwrap_or("")
        .to_owned())
}
