//! The verdicts `check` hands on, in input order, as they are made.
//!
//! Objects are judged a chunk at a time, and each chunk's verdicts go to
//! the [`Sink`] before the next is judged, so no verdict is held for the
//! whole input here: what the sink keeps is its choice (all of them for
//! [`super::check`], the findings and a spool for the command). A document
//! that is no Kubernetes object (a values file, `{}`) is counted per file,
//! and only the first of each file is handed on, for `--strict-inputs`'
//! warning. Half a million `---\n{}` documents cost a counter.

use std::collections::HashMap;

use super::{Judgement, NotKubernetes, ObjectReport};

/// How many documents are read, and objects judged (on every core), before
/// what they give is handed on: enough to keep every core busy, few enough
/// that a chunk's lists are a small, fixed part of the memory.
pub(super) const CHUNK: usize = 4096;

/// Where `check` puts each verdict, in input order, as it is made.
pub trait Sink {
    fn take(&mut self, verdict: ObjectReport);
}

/// Every verdict, held: what [`super::check`] returns.
impl Sink for Vec<ObjectReport> {
    fn take(&mut self, verdict: ObjectReport) {
        self.push(verdict);
    }
}

/// Verdicts on their way to the sink, and the non-objects counted.
pub(super) struct Verdicts<'s> {
    sink: &'s mut dyn Sink,
    /// Documents that are no Kubernetes objects, per source: counted while
    /// reading (`Object::not_kubernetes`, which is the review's own test),
    /// so the first of a file can say how many its file holds when it is
    /// handed on.
    not_kubernetes: HashMap<usize, usize>,
    /// Sources whose first non-object was seen.
    seen: std::collections::HashSet<usize>,
    strict_inputs: bool,
}

impl<'s> Verdicts<'s> {
    pub fn new(strict_inputs: bool, not_kubernetes: HashMap<usize, usize>, sink: &'s mut dyn Sink) -> Self {
        Verdicts {
            sink,
            not_kubernetes,
            seen: std::collections::HashSet::new(),
            strict_inputs,
        }
    }

    /// Hands on the next verdict, in input order. Under `--strict-inputs`
    /// the first non-object of each file says how many its file holds: one
    /// warning per file; otherwise non-objects are only counted.
    pub fn add(&mut self, mut verdict: ObjectReport) {
        if verdict.judgement == Judgement::NotKubernetes {
            if !self.strict_inputs || !self.seen.insert(verdict.source) {
                return;
            }
            let n = self.not_kubernetes.get(&verdict.source).copied().unwrap_or(1);
            if let Some(f) = verdict.findings.first_mut() {
                f.message = if n <= 1 {
                    "skipped: not a Kubernetes object (no apiVersion or kind)".into()
                } else {
                    format!(
                        "skipped: {n} documents or items of this file are not Kubernetes objects (no apiVersion or kind)"
                    )
                };
            }
        }
        self.sink.take(verdict);
    }

    /// The non-objects counted.
    pub fn finish(self) -> NotKubernetes {
        NotKubernetes {
            files: self.not_kubernetes.len(),
            documents: self.not_kubernetes.values().sum(),
        }
    }
}
