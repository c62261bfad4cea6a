//! Remembered compile verdicts, by a hash of the expression.
//!
//! Claims stamped from one template repeat their selectors, and a compile
//! is a trip to the compiler pool; a flood of one invalid 10 KiB selector
//! would otherwise be parsed again for every request (most of a second
//! each). Only verdicts on the expression itself are kept (it compiles, or
//! it does not and why): a compile that could not run says nothing about
//! the expression and is never remembered.
//!
//! An entry is the expression's length and a 128-bit keyed hash of it, and
//! the detail of the error (`None` when it compiles), so that it costs the
//! same small amount whatever the expression's length. The detail is what
//! the answer quotes; `summary` bounds it (a few hundred bytes), and one
//! past [`DETAIL_MAX`] is not kept at all (not cut: a remembered verdict
//! must read as the first did). Two independent SipHash keys drawn at
//! start make a collision, which would lend one expression another's
//! verdict, a 2^-128 chance per pair that no client can aim at.
//!
//! The memo is bounded by [`MEMO_MAX_BYTES`]: when the next entry does not
//! fit it starts over (selectors in use come back at once).

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};

/// The memo holds at most this many bytes of entries.
pub const MEMO_MAX_BYTES: usize = 4 << 20;
/// The longest detail kept. `summary` keeps a detail to one error with at
/// most 500 characters of message and 200 of source excerpt (4 bytes a
/// character at most), well within this.
pub const DETAIL_MAX: usize = 4 << 10;
/// What an entry costs besides its detail: the key (length and hash), the
/// detail's pointer and length, the hash table's slot and control byte,
/// rounded up.
pub const ENTRY_OVERHEAD: usize = 64;

/// The verdict on an expression: `None` when it compiles, else the detail
/// of its `field.Invalid`.
pub type Verdict = Option<Box<str>>;

#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    len: usize,
    hash: [u64; 2],
}

/// The table places a key by its first keyed hash as it is: drawn from a
/// key no client knows, it needs no second SipHash (~130 instructions a
/// lookup, three lookups a claim).
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash[0]);
    }
}

/// The hasher of [`Key`]s: the `u64` it is given.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    /// Not called for a [`Key`]; any other bytes are folded in.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
}

pub struct Memo {
    keys: [RandomState; 2],
    entries: HashMap<Key, Verdict, BuildHasherDefault<KeyHasher>>,
    bytes: usize,
}

impl Default for Memo {
    fn default() -> Self {
        Memo {
            keys: [RandomState::new(), RandomState::new()],
            entries: HashMap::default(),
            bytes: 0,
        }
    }
}

impl Memo {
    fn key(&self, expression: &str) -> Key {
        Key {
            len: expression.len(),
            hash: [self.keys[0].hash_one(expression), self.keys[1].hash_one(expression)],
        }
    }

    pub fn get(&self, expression: &str) -> Option<&Verdict> {
        self.entries.get(&self.key(expression))
    }

    /// Keeps `verdict` unless its detail is too long; when the memo is full
    /// it starts over.
    pub fn remember(&mut self, expression: &str, verdict: Verdict) {
        let detail = verdict.as_deref().map_or(0, str::len);
        if detail > DETAIL_MAX {
            return;
        }
        let key = self.key(expression);
        if self.entries.contains_key(&key) {
            // Two reviews compiled it at once; the first kept it.
            return;
        }
        let cost = ENTRY_OVERHEAD + detail;
        if self.bytes + cost > MEMO_MAX_BYTES {
            self.entries.clear();
            self.bytes = 0;
        }
        self.bytes += cost;
        self.entries.insert(key, verdict);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A 10 KiB expression costs what a short one does: its key is a hash.
    #[test]
    fn an_entry_costs_its_detail_not_its_expression() {
        let mut memo = Memo::default();
        let detail = "compilation failed: ERROR: <input>:1:5: ...";
        let long = "[".repeat(10 * 1024);
        memo.remember("device.driver == 'a'", None);
        memo.remember(&long, Some(detail.into()));
        assert_eq!(memo.len(), 2);
        assert_eq!(memo.bytes(), 2 * ENTRY_OVERHEAD + detail.len());
        assert_eq!(memo.get("device.driver == 'a'"), Some(&None));
        assert_eq!(memo.get(&long).and_then(|v| v.as_deref()), Some(detail));
        // Same length, one byte apart: not the same entry.
        assert_eq!(memo.get("device.driver == 'b'"), None);
        assert_eq!(memo.get(&long[1..]), None);
    }

    #[test]
    fn a_detail_past_its_bound_is_not_kept() {
        let mut memo = Memo::default();
        memo.remember("x ==", Some("e".repeat(DETAIL_MAX + 1).into()));
        assert_eq!(memo.get("x =="), None);
        memo.remember("x ==", Some("e".repeat(DETAIL_MAX).into()));
        assert!(memo.get("x ==").is_some());
    }

    /// However many distinct expressions come, the memo stays within its
    /// bytes: when the next entry would not fit, it starts over.
    #[test]
    fn the_memo_stays_within_its_bytes() {
        let mut memo = Memo::default();
        let detail: Verdict = Some("d".repeat(1000).into());
        for i in 0..20_000 {
            let expression = format!("{i:0>2000}");
            memo.remember(&expression, detail.clone());
            assert!(memo.bytes() <= MEMO_MAX_BYTES, "{i}: {}", memo.bytes());
        }
        let entry = 1000 + ENTRY_OVERHEAD;
        assert_eq!(memo.len(), 20_000 % (MEMO_MAX_BYTES / entry));
    }
}
