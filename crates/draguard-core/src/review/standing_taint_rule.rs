//! A DeviceTaintRule that stands, judged again as its reach changes: a
//! NoExecute rule admitted while it reached no device evicts every pod
//! whose claim is allocated on a device it picks once slices and
//! allocations appear, and the write-time caps never saw those pods.
//!
//! Pure: the door (`controllers::standing_taint_rules` in `serve`) counts
//! the reach from its caches and acts on the answer (Event, metric, and
//! with `onExceed: Pause` the effect set to None). The caps are those of
//! the write (`taint_rule_caps`), of the policies that govern
//! cluster-scoped objects. A standing rule has no requester, so no
//! exemption applies: `draguard.dev/acknowledge-evictions` with the exact
//! count is how an admin keeps a rule past the caps on purpose.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::UserInfo;

pub use super::taint_rule_caps::ACKNOWLEDGE_EVICTIONS;
use super::taint_rule_caps::Evictions;
use crate::impact::ImpactCounts;
use crate::kubernetes::KubeVersion;
use crate::objects::dra::DeviceTaintRuleSpec;
use crate::policy::PolicySet;
use crate::policy::applicable::Applicable;
use crate::policy::model::OnExceed;

/// Set by `onExceed: Pause` on the rule it paused: when, and why.
pub const PAUSED: &str = "draguard.dev/paused";

/// The `resource.k8s.io` version `serve` watches DeviceTaintRules in, for
/// the Kubernetes release whose rules are in force: the newest one that
/// release serves (v1alpha3 since 1.33, v1beta2 since 1.36, v1 since 1.37:
/// kubernetes pkg/registry/resource/devicetaintrule/strategy.go at
/// 1acfb8e8, which serves all three; SPEC-k8s-rules.md §1.6).
pub fn api_version(version: KubeVersion) -> &'static str {
    if version >= KubeVersion::V1_37 { "v1" } else { "v1beta2" }
}

/// What a standing rule reaches, and the caps it passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandingReach {
    /// Pods the rule evicts (NoExecute) or keeps from being scheduled
    /// again (NoSchedule).
    pub pods: usize,
    /// The namespaces of those pods.
    pub namespaces: usize,
    /// Each policy whose caps the rule passes, in policy order; empty
    /// within the caps, and for NoSchedule (it evicts nothing).
    pub exceeded: Vec<CapsExceeded>,
}

/// One policy's caps, passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapsExceeded {
    pub policy: String,
    pub on_exceed: OnExceed,
    /// What goes past which cap, with the numbers and the way past it.
    pub message: String,
}

impl StandingReach {
    /// The first passed policy that asks for the rule to be paused.
    pub fn pause(&self) -> Option<&CapsExceeded> {
        self.exceeded.iter().find(|e| e.on_exceed == OnExceed::Pause)
    }

    /// With `onExceed: Pause` passed: the merge patch that pauses the rule
    /// (effect None, the upstream dry run: the rule is kept and still
    /// tells what it would evict), with the [`PAUSED`] annotation saying
    /// when and why. It carries the rule's resourceVersion, so that the
    /// apiserver refuses it (409) if the rule changed since it was judged.
    pub fn pause_patch(&self, resource_version: &str, now: &str) -> Option<serde_json::Value> {
        let pause = self.pause()?;
        let note = format!(
            "{now}: reach {} pods in {} namespaces passed the caps of toleration policy {:?}: {}",
            self.pods, self.namespaces, pause.policy, pause.message
        );
        Some(serde_json::json!({
            "metadata": {"resourceVersion": resource_version, "annotations": {PAUSED: note}},
            "spec": {"taint": {"effect": "None"}}
        }))
    }

    /// One line for an Event and a log.
    pub fn summary(&self, rule: &str) -> String {
        let messages: Vec<String> = self
            .exceeded
            .iter()
            .map(|e| format!("toleration policy {:?}: {}", e.policy, e.message))
            .collect();
        format!(
            "DeviceTaintRule {rule} now reaches {} pods in {} namespaces, past its caps: {}",
            self.pods,
            self.namespaces,
            messages.join("; ")
        )
    }
}

/// Whether a standing rule the effect of which is NoExecute or NoSchedule
/// passes the caps of `policies`, given what it reaches now. `None` for
/// other effects (None is the dry run; it evicts nothing).
pub fn judge(
    policies: &PolicySet,
    annotations: Option<&BTreeMap<String, String>>,
    rule: &DeviceTaintRuleSpec,
    impact: &ImpactCounts,
) -> Option<StandingReach> {
    let reached = match rule.taint.effect.as_str() {
        "NoExecute" => &impact.evicted,
        "NoSchedule" => &impact.unschedulable,
        _ => return None,
    };
    let mut reach = StandingReach {
        pods: reached.values().sum(),
        namespaces: reached.len(),
        exceeded: Vec::new(),
    };
    let evicted = Evictions::of(impact);
    if rule.taint.effect != "NoExecute" || evicted.acknowledged(annotations) {
        return Some(reach);
    }
    // Cluster-scoped, with no requester: the policies that restrict no
    // namespace, as for the write (`Applicable`).
    let applicable = Applicable::new(policies, "", false, &UserInfo::default(), || None);
    reach.exceeded = applicable
        .selected()
        .filter_map(|policy| {
            let caps = &policy.spec.taint_rules;
            Some(CapsExceeded {
                policy: policy.metadata.name.clone(),
                on_exceed: caps.on_exceed,
                message: evicted.past(caps)?,
            })
        })
        .collect();
    Some(reach)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::impact::Outcome;
    use crate::objects::dra::DeviceTaint;
    use crate::policy::load::parse;

    const POLICIES: &str = "---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: blast-radius}
spec: {taintRules: {maxEvictedPods: 1}}
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: breaker}
spec: {taintRules: {maxAffectedNamespaces: 1, onExceed: Pause}}
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: ml-only}
spec: {namespaces: {names: [ml]}, taintRules: {maxEvictedPods: 0, onExceed: Pause}}
";

    fn policies() -> PolicySet {
        PolicySet {
            policies: parse("p.yaml", POLICIES).expect("valid"),
            ..Default::default()
        }
    }

    fn rule(effect: &str) -> DeviceTaintRuleSpec {
        DeviceTaintRuleSpec {
            device_selector: None,
            taint: DeviceTaint {
                key: "example.com/maintenance".into(),
                value: String::new(),
                effect: effect.into(),
                time_added: None,
            },
        }
    }

    /// `pods` evicted (or kept from scheduling) as `(namespace, pod)`.
    fn impact(effect: &str, pods: &[(&str, &str)]) -> ImpactCounts {
        let mut counts = ImpactCounts::new(effect);
        for (ns, pod) in pods {
            let outcome = if effect == "NoSchedule" {
                Outcome::Unschedulable
            } else {
                Outcome::Evicted { after_seconds: 0 }
            };
            counts.add_pod(ns, pod, outcome);
        }
        counts
    }

    #[test]
    fn watched_in_the_newest_version_the_release_serves() {
        assert_eq!(api_version(KubeVersion::V1_36), "v1beta2");
        assert_eq!(api_version(KubeVersion::V1_37), "v1");
        assert_eq!(api_version(KubeVersion::V1_38), "v1");
    }

    #[test]
    fn within_the_caps_nothing_is_exceeded_and_the_reach_is_counted() {
        let reach = judge(
            &policies(),
            None,
            &rule("NoExecute"),
            &impact("NoExecute", &[("ml", "a")]),
        );
        assert_eq!(
            reach,
            Some(StandingReach {
                pods: 1,
                namespaces: 1,
                exceeded: vec![]
            })
        );
    }

    #[test]
    fn past_the_caps_each_cluster_wide_policy_says_what_and_which_pauses() {
        let pods = [("ml", "a"), ("ml", "b"), ("batch", "c")];
        let reach = judge(&policies(), None, &rule("NoExecute"), &impact("NoExecute", &pods)).expect("judged");
        assert_eq!((reach.pods, reach.namespaces), (3, 2));
        assert_eq!(
            reach.exceeded,
            vec![
                CapsExceeded {
                    policy: "blast-radius".into(),
                    on_exceed: OnExceed::Warn,
                    message: "the rule would evict 3 pods, more than taintRules.maxEvictedPods (1); to go past \
                              this cap on purpose, annotate the rule draguard.dev/acknowledge-evictions: \"3\""
                        .into(),
                },
                CapsExceeded {
                    policy: "breaker".into(),
                    on_exceed: OnExceed::Pause,
                    message: "the rule would evict pods in 2 namespaces (batch, ml), more than \
                              taintRules.maxAffectedNamespaces (1); to go past this cap on purpose, annotate the \
                              rule draguard.dev/acknowledge-evictions: \"3\""
                        .into(),
                },
            ],
            "ml-only selects namespaces, so it does not govern a cluster-scoped rule"
        );
        assert_eq!(reach.pause().map(|e| e.policy.as_str()), Some("breaker"));
        assert_eq!(
            reach.pause_patch("42", "2026-11-26T23:00:00Z"),
            Some(serde_json::json!({
                "metadata": {"resourceVersion": "42", "annotations": {"draguard.dev/paused":
                    "2026-11-26T23:00:00Z: reach 3 pods in 2 namespaces passed the caps of toleration policy \"breaker\": \
                     the rule would evict pods in 2 namespaces (batch, ml), more than taintRules.maxAffectedNamespaces \
                     (1); to go past this cap on purpose, annotate the rule draguard.dev/acknowledge-evictions: \"3\""}},
                "spec": {"taint": {"effect": "None"}}
            }))
        );
        assert_eq!(
            reach.summary("gpu-maintenance"),
            "DeviceTaintRule gpu-maintenance now reaches 3 pods in 2 namespaces, past its caps: toleration policy \
             \"blast-radius\": the rule would evict 3 pods, more than taintRules.maxEvictedPods (1); to go past this \
             cap on purpose, annotate the rule draguard.dev/acknowledge-evictions: \"3\"; toleration policy \
             \"breaker\": the rule would evict pods in 2 namespaces (batch, ml), more than \
             taintRules.maxAffectedNamespaces (1); to go past this cap on purpose, annotate the rule \
             draguard.dev/acknowledge-evictions: \"3\""
        );
    }

    #[test]
    fn an_acknowledged_count_holds_only_while_the_reach_stays_at_it() {
        let pods = [("ml", "a"), ("ml", "b")];
        let ack = |n: &str| BTreeMap::from([("draguard.dev/acknowledge-evictions".to_owned(), n.to_owned())]);
        let acknowledged = judge(
            &policies(),
            Some(&ack("2")),
            &rule("NoExecute"),
            &impact("NoExecute", &pods),
        );
        assert_eq!(acknowledged.map(|r| r.exceeded.len()), Some(0));
        let grown = judge(
            &policies(),
            Some(&ack("1")),
            &rule("NoExecute"),
            &impact("NoExecute", &pods),
        );
        assert_eq!(
            grown.map(|r| r.exceeded.into_iter().map(|e| e.policy).collect::<Vec<_>>()),
            Some(vec!["blast-radius".to_owned()])
        );
    }

    #[test]
    fn no_schedule_is_counted_but_evicts_nothing_and_none_is_not_standing() {
        let pods = [("ml", "a"), ("batch", "b")];
        let reach = judge(&policies(), None, &rule("NoSchedule"), &impact("NoSchedule", &pods));
        assert_eq!(
            reach,
            Some(StandingReach {
                pods: 2,
                namespaces: 2,
                exceeded: vec![]
            })
        );
        assert_eq!(judge(&policies(), None, &rule("None"), &impact("None", &pods)), None);
    }
}
