//! The verdicts of configs already judged, so that a config seen before
//! costs a hash and a comparison of its text instead of its schema's walk
//! and CEL rules. Workloads stamp out the same few configs over and over (every
//! claim of a template, every replica's claim), so nearly every config a
//! webhook sees is one it has judged.
//!
//! A verdict depends only on the driver, the parameters and the schema set
//! (schemas and declared gates): the memo belongs to one [`DriverSchemas`]
//! and a changed set starts an empty one (`registry.rs`), so a reload never
//! serves a verdict of the old schemas. Errors are kept relative to the
//! `parameters` field and placed under the caller's path on the way out,
//! so the same config at `config[0]` of a claim and `config[3]` of a
//! template shares one entry. Failures are kept too: a client retrying a
//! bad config is as repetitive as a good one.
//!
//! Keyed by the parameters' JSON text ([`Parameters::text`]), not their
//! tree: hashing and comparing the text is a pass over a few hundred bytes,
//! where the tree's hash and comparison walked every node and string. The
//! same text always decodes to the same tree, so a kept verdict is right
//! for it; the same tree written differently (key order: the apiserver
//! compacts a RawExtension but keeps its client's order) is only judged
//! again and kept once more. Claims a template stamps carry one text.
//!
//! Bounded twice, entries and bytes (the parameters' text, at most the
//! apiserver's 10 KiB each, and the errors'), oldest out first. Sizing
//! rule: at most [`MAX_BYTES`] of texts and errors plus [`MAX_ENTRIES`]
//! entries' fixed part (under 200 bytes each: the driver's name, at most
//! 63 bytes, the map's and the queue's slots, the allocations' headers), so
//! under 1.25 MiB whatever the traffic and the cluster's size. A config
//! over the byte budget on its own is judged every time.
//!
//! [`Parameters::text`]: crate::objects::parameters::Parameters::text
//!
//! [`DriverSchemas`]: super::DriverSchemas

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use crate::field::{FieldError, Path};
use crate::objects::parameters::Parameters;

/// How many configs' verdicts are kept.
pub const MAX_ENTRIES: usize = 1024;
/// How many bytes the kept verdicts may hold: the parameters' text and the
/// errors' size, so the memo stays near 1 MiB of the 256 Mi the deployment
/// gets.
pub const MAX_BYTES: usize = 1 << 20;

/// Verdicts by (driver, parameters), for one schema set.
#[derive(Default)]
pub struct Verdicts {
    /// Random keys per memo: a client cannot aim collisions at it (and a
    /// collision only costs a judgement, since a hit compares the config).
    hasher: RandomState,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<u64, Entry>,
    /// Keys in insertion order, for eviction.
    order: VecDeque<u64>,
    bytes: usize,
}

struct Entry {
    driver: Box<str>,
    /// The parameters' JSON text.
    text: Box<str>,
    /// The errors, at paths relative to the `parameters` field.
    errors: Arc<[FieldError]>,
    /// The text's length and the errors' size.
    bytes: usize,
}

impl std::fmt::Debug for Verdicts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verdicts").finish_non_exhaustive()
    }
}

impl Verdicts {
    /// The verdict on `parameters` of `driver` at `at` (built only when
    /// there are errors to place), from the memo, or `judge`d (at the empty
    /// path) and kept.
    pub fn judge(
        &self,
        driver: &str,
        parameters: &Parameters,
        at: impl FnOnce() -> Path,
        judge: impl FnOnce() -> Vec<FieldError>,
    ) -> Vec<FieldError> {
        let text = parameters.text();
        let key = self.key(driver, text);
        let kept = self
            .lock()
            .entries
            .get(&key)
            .and_then(|e| (*e.driver == *driver && *e.text == *text).then(|| Arc::clone(&e.errors)));
        let errors = match kept {
            Some(errors) => errors,
            None => {
                // Judged outside the lock: two threads may judge the same
                // new config at once, and the second insert replaces the
                // first with the same verdict.
                let errors: Arc<[FieldError]> = judge().into();
                // The verdict counts too: 10 KiB of unknown keys is a
                // thousand errors, each larger than its key.
                let bytes = text.len() + errors.iter().map(error_size).sum::<usize>();
                if bytes <= MAX_BYTES {
                    self.lock().insert(
                        key,
                        Entry {
                            driver: driver.into(),
                            text: text.into(),
                            errors: Arc::clone(&errors),
                            bytes,
                        },
                    );
                }
                errors
            }
        };
        if errors.is_empty() {
            return Vec::new();
        }
        let at = at();
        errors.iter().map(|e| placed(e, &at)).collect()
    }

    /// How many verdicts are kept (for tests of the bounds).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn key(&self, driver: &str, text: &str) -> u64 {
        let mut h = self.hasher.build_hasher();
        driver.hash(&mut h);
        text.hash(&mut h);
        h.finish()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the map half-updated
        // in a way that matters: every entry is whole, and a missing one is
        // only a miss.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    fn insert(&mut self, key: u64, entry: Entry) {
        if let Some(old) = self.entries.remove(&key) {
            self.bytes -= old.bytes;
            self.order.retain(|k| *k != key);
        }
        while self.entries.len() >= MAX_ENTRIES || self.bytes + entry.bytes > MAX_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(old) = self.entries.remove(&oldest) {
                self.bytes -= old.bytes;
            }
        }
        self.bytes += entry.bytes;
        self.order.push_back(key);
        self.entries.insert(key, entry);
    }
}

/// About what a kept error occupies: its message, its bad value's text
/// and its path's segments, and the struct around them.
fn error_size(error: &FieldError) -> usize {
    let value = match &error.value {
        crate::field::BadValue::Str(s) | crate::field::BadValue::Json(s) => s.len(),
        _ => 16,
    };
    std::mem::size_of::<FieldError>() + error.detail.len() + value + 32 * error.field.segments().len()
}

/// `error`, kept at a path relative to `parameters`, at its place under
/// `at`.
fn placed(error: &FieldError, at: &Path) -> FieldError {
    let mut e = error.clone();
    e.field = error
        .field
        .segments()
        .iter()
        .fold(at.clone(), |p, s| p.with_segment(s.clone()));
    e
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn judged(memo: &Verdicts, parameters: &Value, at: &str, calls: &mut usize) -> Vec<String> {
        let parameters = Parameters::from(parameters.clone());
        memo.judge(
            "d.example.com",
            &parameters,
            || Path::parse(at),
            || {
                *calls += 1;
                if parameters.get("bad").is_some() {
                    vec![FieldError::forbidden(Path::parse("bad"), "no")]
                } else {
                    Vec::new()
                }
            },
        )
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    #[test]
    fn a_repeated_config_is_judged_once_and_placed_where_it_is() {
        let memo = Verdicts::default();
        let mut calls = 0;
        let bad = json!({"bad": 1});
        assert_eq!(
            judged(&memo, &bad, "spec.devices.config[0].opaque.parameters", &mut calls),
            ["spec.devices.config[0].opaque.parameters.bad: Forbidden: no"]
        );
        assert_eq!(
            judged(&memo, &bad, "spec.spec.devices.config[3].opaque.parameters", &mut calls),
            ["spec.spec.devices.config[3].opaque.parameters.bad: Forbidden: no"]
        );
        assert_eq!(calls, 1);
        assert!(judged(&memo, &json!({"good": 1}), "p", &mut calls).is_empty());
        assert_eq!(calls, 2);
        assert_eq!(memo.len(), 2);
    }

    #[test]
    fn the_entries_are_bounded_oldest_out_first() {
        let memo = Verdicts::default();
        let mut calls = 0;
        for i in 0..MAX_ENTRIES + 10 {
            judged(&memo, &json!({"n": i}), "p", &mut calls);
        }
        assert_eq!(memo.len(), MAX_ENTRIES);
        // The newest is kept, the first ones went.
        judged(&memo, &json!({"n": MAX_ENTRIES + 9}), "p", &mut calls);
        assert_eq!(calls, MAX_ENTRIES + 10);
        judged(&memo, &json!({"n": 0}), "p", &mut calls);
        assert_eq!(calls, MAX_ENTRIES + 11);
    }

    #[test]
    fn the_errors_count_in_the_bytes() {
        let memo = Verdicts::default();
        let bad = Parameters::from(json!({"bad": 1}));
        let bytes = bad.text().len();
        memo.judge(
            "d.example.com",
            &bad,
            || Path::new(""),
            || {
                (0..100)
                    .map(|i| FieldError::forbidden(Path::parse(&format!("bad{i}")), "x".repeat(100)))
                    .collect()
            },
        );
        let inner = memo.lock();
        assert!(inner.bytes > bytes + 100 * 100, "{}", inner.bytes);
    }

    #[test]
    fn the_bytes_are_bounded() {
        let memo = Verdicts::default();
        let mut calls = 0;
        // 200 configs of about 8 KiB: far more bytes than the budget.
        for i in 0..200 {
            judged(&memo, &json!({"n": i, "pad": "x".repeat(8 << 10)}), "p", &mut calls);
        }
        let inner = memo.lock();
        // Within the budget, and full: no more evicted than needed.
        assert!(inner.bytes <= MAX_BYTES, "{}", inner.bytes);
        assert!(inner.bytes + (8 << 10) + 32 > MAX_BYTES, "{}", inner.bytes);
        assert_eq!(inner.order.len(), inner.entries.len());
        assert_eq!(inner.bytes, inner.entries.values().map(|e| e.bytes).sum::<usize>());
    }
}
