//! `draguard_taint_rule_reach{rule, kind}`: what each standing
//! DeviceTaintRule reaches now, set by `controllers::standing_taint_rules`
//! and read by `/metrics` at scrape time.
//!
//! Series exist only for standing rules the check tracks: a rule deleted,
//! set to effect None or past the tracking cap has none, so the series
//! number stays at two per tracked rule (at most
//! `cluster::taint_rules::MAX_RULES`, about 100 bytes each).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Pods and namespaces one rule reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reach {
    pub pods: u64,
    pub namespaces: u64,
}

/// The reach of every tracked rule, by name; cloned handles share it.
#[derive(Debug, Clone, Default)]
pub struct TaintRuleReach(Arc<Mutex<BTreeMap<String, Reach>>>);

impl TaintRuleReach {
    pub fn set(&self, rule: &str, reach: Reach) {
        let mut rules = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match rules.get_mut(rule) {
            Some(kept) => *kept = reach,
            None => {
                rules.insert(rule.to_owned(), reach);
            }
        }
    }

    /// Keeps the series of the rules `keep` accepts, drops the others.
    pub fn retain(&self, mut keep: impl FnMut(&str) -> bool) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|rule, _| keep(rule));
    }

    /// Every series, by rule name.
    pub fn snapshot(&self) -> Vec<(String, Reach)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(rule, reach)| (rule.clone(), *reach))
            .collect()
    }
}
