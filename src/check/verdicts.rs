//! The verdicts `check` keeps, gathered as they come.
//!
//! Objects are judged a chunk at a time, and each chunk's verdicts are
//! folded in before the next is judged, so what a verdict does not need is
//! never held for the whole input: a document that is no Kubernetes object
//! (a values file, `{}`) is counted per file, and only the first of each
//! file is kept, for `--strict-inputs`' warning. Half a million `---\n{}`
//! documents cost a counter, not half a million reports.

use std::collections::HashMap;

use super::{Judgement, NotKubernetes, ObjectReport};

/// How many documents are read, and objects judged (on every core), before
/// what they give is folded in: enough to keep every core busy, few enough
/// that a chunk's lists are a small, fixed part of the memory.
pub(super) const CHUNK: usize = 4096;

/// Verdicts by object number, and what was only counted.
#[derive(Default)]
pub(super) struct Verdicts {
    /// The verdicts kept, and their object numbers (one list each: the
    /// reports become the report's list as they are, without a copy).
    kept: Vec<ObjectReport>,
    numbers: Vec<usize>,
    /// Documents that are no Kubernetes objects, per source, in the order
    /// their files first had one.
    not_kubernetes: HashMap<usize, usize>,
    strict_inputs: bool,
}

impl Verdicts {
    pub fn new(strict_inputs: bool) -> Self {
        Verdicts {
            strict_inputs,
            ..Verdicts::default()
        }
    }

    /// Adds the verdict on object `n`. Verdicts of non-objects must come
    /// in input order (the first of each file is the one kept).
    pub fn add(&mut self, n: usize, verdict: ObjectReport) {
        if verdict.judgement == Judgement::NotKubernetes {
            let seen = self.not_kubernetes.entry(verdict.source).or_default();
            *seen += 1;
            if *seen > 1 || !self.strict_inputs {
                return;
            }
        }
        self.kept.push(verdict);
        self.numbers.push(n);
    }

    /// The verdicts in input order, and the non-objects counted. Under
    /// `--strict-inputs` the first non-object of each file says how many
    /// its file holds: one warning per file.
    pub fn finish(mut self) -> (Vec<ObjectReport>, NotKubernetes) {
        // Out of order only when quota charged some claims, judged last.
        if !self.numbers.is_sorted() {
            let mut order: Vec<usize> = (0..self.kept.len()).collect();
            order.sort_by_key(|&i| self.numbers.get(i).copied().unwrap_or(usize::MAX));
            let mut slots: Vec<Option<ObjectReport>> = self.kept.drain(..).map(Some).collect();
            self.kept = order.into_iter().filter_map(|i| slots.get_mut(i)?.take()).collect();
        }
        let counted = NotKubernetes {
            files: self.not_kubernetes.len(),
            documents: self.not_kubernetes.values().sum(),
        };
        for verdict in &mut self.kept {
            if verdict.judgement == Judgement::NotKubernetes
                && let (Some(n), Some(f)) = (self.not_kubernetes.get(&verdict.source), verdict.findings.first_mut())
            {
                f.message = if *n == 1 {
                    "skipped: not a Kubernetes object (no apiVersion or kind)".into()
                } else {
                    format!(
                        "skipped: {n} documents or items of this file are not Kubernetes objects (no apiVersion or kind)"
                    )
                };
            }
        }
        (self.kept, counted)
    }
}
