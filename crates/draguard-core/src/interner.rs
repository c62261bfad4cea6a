//! One copy of each repeated string in a cluster index.
//!
//! 5,000 nodes with 8 GPUs each repeat one driver name 40,000 times, each
//! node's pool name 8 times in the slices and again in every claim
//! allocated there, and a few device names (`gpu-0`…`gpu-7`) everywhere.
//! An index asks its interner for each such string and keeps the shared
//! `Arc<str>` it gets: 16 bytes per use instead of a heap copy.
//!
//! Strings nobody holds any more (a deleted node's pool, a deleted
//! namespace) are dropped by a sweep that runs when the set has doubled
//! since the last one, so the set stays within twice the strings in use,
//! at an amortized constant cost per new string.

use std::collections::HashSet;
use std::sync::Arc;

/// The size below which no sweep runs: a sweep of a small set frees little.
const FIRST_SWEEP_AT: usize = 1024;

#[derive(Debug, Clone)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
    sweep_at: usize,
}

impl Default for Interner {
    fn default() -> Self {
        Interner {
            strings: HashSet::new(),
            sweep_at: FIRST_SWEEP_AT,
        }
    }
}

impl Interner {
    /// The shared copy of `s`, made on first use.
    pub fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(shared) = self.strings.get(s) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(s);
        self.strings.insert(shared.clone());
        if self.strings.len() >= self.sweep_at {
            self.sweep();
        }
        shared
    }

    /// Drops the strings only the interner still holds.
    fn sweep(&mut self) {
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.sweep_at = (self.strings.len() * 2).max(FIRST_SWEEP_AT);
    }

    /// Distinct strings held (some may be unused until the next sweep).
    pub fn len(&self) -> usize {
        self.strings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.strings.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_one_copy() {
        let mut interner = Interner::default();
        let a = interner.intern("gpu.example.com");
        let b = interner.intern(&String::from("gpu.example.com"));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(interner.len(), 1);
        assert!(!Arc::ptr_eq(&a, &interner.intern("nic.example.com")));
    }

    #[test]
    fn strings_no_one_holds_are_swept_once_the_set_doubles() {
        let mut interner = Interner::default();
        let kept: Vec<Arc<str>> = (0..10).map(|i| interner.intern(&format!("kept-{i}"))).collect();
        for i in 0..FIRST_SWEEP_AT - 11 {
            interner.intern(&format!("dropped-{i}"));
        }
        assert_eq!(interner.len(), FIRST_SWEEP_AT - 1, "no sweep yet");
        let last = interner.intern("last");
        assert_eq!(interner.len(), 11, "only the held strings are left");
        assert!(Arc::ptr_eq(&kept[3], &interner.intern("kept-3")));
        assert!(Arc::ptr_eq(&last, &interner.intern("last")));
        assert_eq!(interner.sweep_at, FIRST_SWEEP_AT, "twice 11 is below the floor");
    }
}
