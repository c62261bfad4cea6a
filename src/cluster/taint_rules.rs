//! The DeviceTaintRules that stand: those whose effect is NoExecute or
//! NoSchedule, reduced from their watch to what the standing check reads
//! (`controllers::standing_taint_rules`). A rule with effect None (the
//! dry run, or one draguard paused) is not standing, and is dropped.
//!
//! Bounded: at most [`MAX_RULES`] rules are kept, about 1 KiB each (a
//! selector of three names, a taint, one annotation), so 1 MiB at the cap.
//! Rules are an admin's tool and a cluster holds a handful; past the cap a
//! new rule is counted in [`TaintRuleIndex::untracked`] and not checked.

use std::collections::BTreeMap;

use super::index::WatchIndex;
use super::slim::SlimObject;
use crate::objects::dra::DeviceTaintRuleSpec;
use crate::review::standing_taint_rule::ACKNOWLEDGE_EVICTIONS;

/// Standing rules tracked at most.
pub const MAX_RULES: usize = 1_000;

/// One standing rule, as the check reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct StandingRule {
    pub uid: Option<String>,
    /// The version the check was computed for; a new one means the rule
    /// changed.
    pub resource_version: Option<String>,
    /// Only `draguard.dev/acknowledge-evictions`, when set: the one
    /// annotation the caps read.
    pub annotations: BTreeMap<String, String>,
    pub spec: DeviceTaintRuleSpec,
}

#[derive(Default)]
pub struct TaintRuleIndex {
    pub by_name: BTreeMap<String, StandingRule>,
    /// Rules past [`MAX_RULES`] that arrived while the index was full.
    pub untracked: usize,
}

/// Whether a rule with this effect stands (evicts or keeps pods away).
pub fn stands(effect: &str) -> bool {
    matches!(effect, "NoExecute" | "NoSchedule")
}

impl WatchIndex for TaintRuleIndex {
    type Object = SlimObject;

    fn apply(&mut self, rule: &SlimObject) {
        let name = rule.metadata.name.clone().unwrap_or_default();
        // A spec that does not decode was not admitted by any apiserver
        // draguard knows; it is not judged, as in a review.
        let spec = rule
            .data
            .get("spec")
            .and_then(|spec| DeviceTaintRuleSpec::decode(spec).ok())
            .filter(|spec| stands(&spec.taint.effect));
        let Some(spec) = spec else {
            self.by_name.remove(&name);
            return;
        };
        if !self.by_name.contains_key(&name) && self.by_name.len() >= MAX_RULES {
            self.untracked += 1;
            return;
        }
        let annotations = rule
            .metadata
            .annotations
            .iter()
            .flatten()
            .filter(|(k, _)| k.as_str() == ACKNOWLEDGE_EVICTIONS)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.by_name.insert(
            name,
            StandingRule {
                uid: rule.metadata.uid.clone(),
                resource_version: rule.metadata.resource_version.clone(),
                annotations,
                spec,
            },
        );
    }

    fn delete(&mut self, rule: &SlimObject) {
        self.by_name.remove(rule.metadata.name.as_deref().unwrap_or_default());
    }

    fn objects(&self) -> usize {
        self.by_name.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(name: &str, effect: &str, rv: &str) -> SlimObject {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": rv,
                "annotations": {"draguard.dev/acknowledge-evictions": "2", "note": "not kept"},
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"deviceSelector": {"driver": "gpu.example.com"},
                "taint": {"key": "example.com/maintenance", "effect": effect}}
        }))
        .expect("a rule")
    }

    #[test]
    fn standing_rules_are_kept_and_dry_runs_and_deleted_ones_dropped() {
        let mut index = TaintRuleIndex::default();
        index.apply(&rule("evicts", "NoExecute", "1"));
        index.apply(&rule("blocks", "NoSchedule", "2"));
        index.apply(&rule("dry-run", "None", "3"));
        assert_eq!(index.by_name.keys().collect::<Vec<_>>(), ["blocks", "evicts"]);
        let evicts = &index.by_name["evicts"];
        assert_eq!(evicts.uid.as_deref(), Some("uid-evicts"));
        assert_eq!(evicts.resource_version.as_deref(), Some("1"));
        assert_eq!(
            evicts.annotations,
            BTreeMap::from([(ACKNOWLEDGE_EVICTIONS.to_owned(), "2".to_owned())]),
            "only the annotation the caps read"
        );
        assert_eq!(evicts.spec.taint.effect, "NoExecute");
        // Paused: its effect became None.
        index.apply(&rule("evicts", "None", "4"));
        index.delete(&rule("blocks", "NoSchedule", "2"));
        assert!(index.by_name.is_empty());
    }

    #[test]
    fn past_the_cap_new_rules_are_counted_not_kept() {
        let mut index = TaintRuleIndex::default();
        for i in 0..MAX_RULES {
            index.apply(&rule(&format!("r{i}"), "NoExecute", "1"));
        }
        index.apply(&rule("one-too-many", "NoExecute", "1"));
        assert_eq!((index.objects(), index.untracked), (MAX_RULES, 1));
        index.apply(&rule("r0", "NoSchedule", "2"));
        assert_eq!(
            index.by_name["r0"].spec.taint.effect, "NoSchedule",
            "a kept rule still changes"
        );
    }
}
