//! The `taintRules` eviction caps, read the same way for a DeviceTaintRule
//! being written (`taint_rule_impact`) and for one that stands while its
//! reach grows (`standing_taint_rule`): the sentences name the numbers,
//! and the acknowledge annotation lets an admin go past them on purpose.

use std::collections::BTreeMap;

use crate::impact::ImpactCounts;
use crate::policy::glob_match;
use crate::policy::model::TaintRuleCaps;

/// With the exact count of pods the rule evicts, goes past the eviction caps.
pub const ACKNOWLEDGE_EVICTIONS: &str = "draguard.dev/acknowledge-evictions";

/// The pods a rule evicts, per namespace.
pub(crate) struct Evictions<'i> {
    pub(crate) pods: usize,
    pub(crate) namespaces: &'i BTreeMap<String, usize>,
}

impl<'i> Evictions<'i> {
    pub(crate) fn of(impact: &'i ImpactCounts) -> Self {
        Evictions {
            pods: impact.evicted_pods(),
            namespaces: &impact.evicted,
        }
    }

    /// The rule's annotations acknowledge exactly this many evictions: a
    /// count that has since grown is not acknowledged any more.
    pub(crate) fn acknowledged(&self, annotations: Option<&BTreeMap<String, String>>) -> bool {
        annotations
            .and_then(|a| a.get(ACKNOWLEDGE_EVICTIONS))
            .and_then(|v| v.trim().parse::<usize>().ok())
            == Some(self.pods)
    }

    /// What goes past `caps`, as one message with the numbers and the way
    /// past them; `None` within the caps.
    pub(crate) fn past(&self, caps: &TaintRuleCaps) -> Option<String> {
        let over = self.over(caps);
        (!over.is_empty()).then(|| {
            format!(
                "{}; to go past {} on purpose, annotate the rule {ACKNOWLEDGE_EVICTIONS}: \"{}\"",
                over.join("; "),
                if over.len() == 1 { "this cap" } else { "these caps" },
                self.pods
            )
        })
    }

    /// What goes past `caps`, each as a sentence with the numbers.
    fn over(&self, caps: &TaintRuleCaps) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(max) = caps.max_evicted_pods
            && self.pods as u64 > max
        {
            out.push(format!(
                "the rule would evict {} pods, more than taintRules.maxEvictedPods ({max})",
                self.pods
            ));
        }
        if let Some(max) = caps.max_affected_namespaces
            && self.namespaces.len() as u64 > max
        {
            out.push(format!(
                "the rule would evict pods in {} namespaces ({}), more than taintRules.maxAffectedNamespaces ({max})",
                self.namespaces.len(),
                listed(self.namespaces.keys().cloned())
            ));
        }
        let protected: Vec<String> = self
            .namespaces
            .iter()
            .filter(|(ns, _)| caps.protected_namespaces.iter().any(|g| glob_match(g, ns)))
            .map(|(ns, n)| format!("{ns}: {n}"))
            .collect();
        if !protected.is_empty() {
            out.push(format!(
                "the rule would evict pods in protected namespaces ({})",
                listed(protected.into_iter())
            ));
        }
        out
    }
}

/// The names a message lists: at most [`LISTED_MAX`], then how many more.
/// The message goes into a denial, an Event and the `draguard.dev/paused`
/// annotation, and a rule reaching thousands of namespaces must not pass
/// the apiserver's 256 KiB annotation limit (the pause would be refused
/// exactly when the reach is widest).
fn listed(names: impl ExactSizeIterator<Item = String>) -> String {
    let total = names.len();
    let mut text = names.take(LISTED_MAX).collect::<Vec<_>>().join(", ");
    if total > LISTED_MAX {
        text.push_str(&format!(" and {} more", total - LISTED_MAX));
    }
    text
}

/// How many namespaces a message names.
const LISTED_MAX: usize = 10;

#[cfg(test)]
mod tests {
    use super::listed;

    #[test]
    fn a_message_names_ten_namespaces_and_counts_the_rest() {
        let names = |n: usize| (0..n).map(|i| format!("ns-{i:04}"));
        assert_eq!(listed(names(2)), "ns-0000, ns-0001");
        assert_eq!(listed(names(10)).matches(", ").count(), 9);
        let many = listed(names(5000));
        assert_eq!(
            many,
            "ns-0000, ns-0001, ns-0002, ns-0003, ns-0004, ns-0005, ns-0006, ns-0007, ns-0008, ns-0009 and 4990 more"
        );
    }
}
