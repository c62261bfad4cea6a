//! Remembered compile verdicts, by expression text.
//!
//! Claims stamped from one template repeat their selectors, and a compile
//! is a trip to the compiler pool. Only verdicts on the expression itself
//! are kept (it compiles, or it does not and why): a compile that could not
//! run says nothing about the expression and is never remembered. The memo
//! is bounded by the bytes of its keys and values together, and keeps no
//! entry bigger than [`ENTRY_MAX`] bytes, so that a flood of long distinct
//! expressions costs a bounded amount of memory.

use std::collections::HashMap;

/// The memo holds at most this many bytes of expressions and details.
pub const MEMO_MAX_BYTES: usize = 4 << 20;
/// An entry (expression, detail and bookkeeping) bigger than this is not
/// kept: real selectors are short, and a long one is cheap to compile again
/// next to what a review of it costs anyway.
pub const ENTRY_MAX: usize = 4 << 10;
/// What a map entry costs besides its text: two `String` headers, the
/// verdict's tag, the hash table's slot.
const ENTRY_OVERHEAD: usize = 64;

/// The verdict on an expression: `None` when it compiles, else the detail
/// of its `field.Invalid`.
pub type Verdict = Option<String>;

#[derive(Default)]
pub struct Memo {
    entries: HashMap<String, Verdict>,
    bytes: usize,
}

impl Memo {
    pub fn get(&self, expression: &str) -> Option<&Verdict> {
        self.entries.get(expression)
    }

    /// Keeps `verdict` unless it is too big; when the memo is full it
    /// starts over (a simple bound: selectors in use come back at once).
    pub fn remember(&mut self, expression: &str, verdict: Verdict) {
        let cost = cost(expression, &verdict);
        if cost > ENTRY_MAX {
            return;
        }
        if self.entries.contains_key(expression) {
            // Two reviews compiled it at once; the first kept it.
            return;
        }
        if self.bytes + cost > MEMO_MAX_BYTES {
            self.entries.clear();
            self.bytes = 0;
        }
        self.bytes += cost;
        self.entries.insert(expression.to_owned(), verdict);
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

fn cost(expression: &str, verdict: &Verdict) -> usize {
    expression.len() + verdict.as_ref().map_or(0, String::len) + ENTRY_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_count_and_big_entries_are_not_kept() {
        let mut memo = Memo::default();
        let detail = "compilation failed: ERROR: <input>:1:5: ...";
        memo.remember("device.driver == 'a'", None);
        memo.remember("x ==", Some(detail.into()));
        assert_eq!(memo.len(), 2);
        assert_eq!(memo.bytes(), 20 + 4 + detail.len() + 2 * ENTRY_OVERHEAD);
        assert_eq!(memo.get("device.driver == 'a'"), Some(&None));

        let long_expression = "1".repeat(ENTRY_MAX);
        memo.remember(&long_expression, None);
        memo.remember("short ==", Some("e".repeat(ENTRY_MAX)));
        assert_eq!(memo.len(), 2, "neither long entry is kept");
        assert_eq!(memo.get("short =="), None);
    }

    /// However many distinct expressions come, the memo stays within its
    /// bytes: when the next entry would not fit, it starts over.
    #[test]
    fn the_memo_stays_within_its_bytes() {
        let mut memo = Memo::default();
        let detail = Some("d".repeat(1000));
        for i in 0..20_000 {
            let expression = format!("{i:0>2000}");
            memo.remember(&expression, detail.clone());
            assert!(memo.bytes() <= MEMO_MAX_BYTES, "{i}: {}", memo.bytes());
        }
        let entry = 2000 + 1000 + ENTRY_OVERHEAD;
        assert_eq!(memo.len(), 20_000 % (MEMO_MAX_BYTES / entry));
    }
}
