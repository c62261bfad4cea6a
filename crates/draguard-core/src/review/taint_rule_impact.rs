//! What a DeviceTaintRule write would do, computed once from the cluster
//! view: a warning that summarises it, and the `taintRules` caps of the
//! applying policies (how many pods it may evict, in how many namespaces,
//! none in the protected ones, and NoExecute only after a dry run with
//! effect None). A denial names the numbers and the way past them.
//!
//! The impact is counted under a cap on computations at once
//! (`cluster::impact_permits`). When every slot stays busy, the write
//! hears so: with no caps to check it is admitted with a warning that the
//! summary was not computed; a NoExecute rule under eviction caps is
//! refused with "try again", as the caps are the policy's own promise and
//! a rule that may evict every pod must not pass them unchecked. (The
//! webhook entry for DeviceTaintRules fails closed for the same reason.)

use super::taint_rule_caps::Evictions;
use super::{Context, ReviewSubject};
use crate::field::Path;
use crate::kinds::{AdmittedKind, ObjectView};
use crate::objects::dra::DeviceTaintRuleSpec;
use crate::policy::applicable::Applicable;
use crate::policy::model::TolerationPolicy;
use crate::verdict::Violation;
use crate::verdict::Warning;
use crate::view::TaintRuleImpact;

pub fn taint_rule_impact<K: AdmittedKind>(
    subject: &ReviewSubject<'_, K>,
    applicable: &Applicable<'_>,
    ctx: &Context<'_>,
) -> (Vec<Violation>, Vec<Warning>) {
    let Some(rule) = K::taint_rule(&subject.view) else {
        return (Vec::new(), Vec::new());
    };
    let impact = crate::view::taint_rule_impact(ctx.cluster, rule, ctx.target.version);
    let mut warnings: Vec<Warning> = match &impact {
        // The counts, then who: the first pods and claims per namespace.
        TaintRuleImpact::Known(impact) => std::iter::once(format!("impact: {}", impact.summary()))
            .chain(impact.names())
            .map(Warning::new)
            .collect(),
        TaintRuleImpact::Busy { slots } => vec![Warning::new(format!(
            "impact: not computed: all {slots} impact computations were busy; write again for the summary"
        ))],
        TaintRuleImpact::Unknown => Vec::new(),
    };
    let capping: Vec<&TolerationPolicy> = applicable
        .selected()
        .filter(|p| !p.spec.taint_rules.is_empty())
        .collect();
    if capping.is_empty() {
        return (Vec::new(), warnings);
    }
    let old = subject.old.as_ref().and_then(|o| K::taint_rule(o));
    let mut violations = Vec::new();
    for policy in &capping {
        if policy.spec.taint_rules.require_dry_run_first
            && let Some(message) = dry_run_missing(rule, old)
        {
            violations.push(violation(
                policy,
                Path::new("spec").child("taint").child("effect"),
                message,
            ));
        }
    }
    // The eviction caps need the impact; NoSchedule and None evict nothing.
    if rule.taint.effect != "NoExecute" {
        return (violations, warnings);
    }
    let impact = match impact {
        TaintRuleImpact::Known(impact) => impact,
        TaintRuleImpact::Unknown => {
            let names: Vec<&str> = capping.iter().map(|p| p.metadata.name.as_str()).collect();
            warnings.push(Warning::new(format!(
                "taintRules caps of {} not checked: the devices and allocated claims are unknown here",
                names.join(", ")
            )));
            return (violations, warnings);
        }
        TaintRuleImpact::Busy { .. } => {
            for policy in &capping {
                violations.push(violation(
                    policy,
                    Path::new("spec"),
                    "the eviction caps need this rule's impact, and every impact computation stayed busy; try again in a moment".to_owned(),
                ));
            }
            return (violations, warnings);
        }
    };
    let evicted = Evictions::of(&impact);
    if evicted.acknowledged(subject.view.metadata().annotations.as_ref()) {
        return (violations, warnings);
    }
    for policy in &capping {
        if let Some(message) = evicted.past(&policy.spec.taint_rules) {
            violations.push(violation(policy, Path::new("spec"), message));
        }
    }
    (violations, warnings)
}

fn violation(policy: &TolerationPolicy, field: Path, message: String) -> Violation {
    Violation {
        concept: crate::verdict::Concept::TaintRuleCap,
        policy: policy.metadata.name.clone(),
        mode: policy.spec.mode,
        field: Some(field),
        message: format!("toleration policy {:?}: {message}", policy.metadata.name),
    }
}

/// `requireDryRunFirst`: a NoExecute rule must have been this rule with
/// effect None, the same selector and the same taint key.
fn dry_run_missing(rule: &DeviceTaintRuleSpec, old: Option<&DeviceTaintRuleSpec>) -> Option<String> {
    if rule.taint.effect != "NoExecute" {
        return None;
    }
    let tried = old.is_some_and(|old| {
        old.taint.effect == "None" && old.device_selector == rule.device_selector && old.taint.key == rule.taint.key
    });
    (!tried).then(|| {
        "NoExecute needs a dry run first: create the rule with effect None, read what it would evict, then change the effect"
            .to_owned()
    })
}
