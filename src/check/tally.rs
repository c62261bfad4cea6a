//! What a report counts over every object: the summary, the exit code and
//! the formats' headers read it, whether the objects are held or spooled.

use std::collections::HashMap;

use super::{Judgement, ObjectReport, Severity};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub objects: usize,
    /// Objects denied; not those that could not be judged at all.
    pub denied: usize,
    pub warnings: usize,
    /// Objects that could not be judged (a known kind in an unknown
    /// version): unusable input.
    pub unusable: usize,
    /// The objects not judged, by kind.
    pub skipped: HashMap<String, usize>,
}

impl Tally {
    pub fn of<'o>(objects: impl IntoIterator<Item = &'o ObjectReport>) -> Self {
        let mut tally = Tally::default();
        for object in objects {
            tally.add(object);
        }
        tally
    }

    pub fn add(&mut self, object: &ObjectReport) {
        self.objects += 1;
        if !object.allowed && object.judgement != Judgement::Unusable {
            self.denied += 1;
        }
        self.warnings += object
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .count();
        match &object.judgement {
            Judgement::Unusable => self.unusable += 1,
            Judgement::Skipped { .. } => {
                // A kind's name is copied once, not once an object.
                match self.skipped.get_mut(object.id.kind.as_str()) {
                    Some(n) => *n += 1,
                    None => {
                        self.skipped.insert(object.id.kind.clone(), 1);
                    }
                }
            }
            _ => {}
        }
    }

    /// The objects not judged, counted by kind, most first (then by name).
    pub fn skipped_by_kind(&self) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = self.skipped.iter().map(|(k, n)| (k.clone(), *n)).collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        counts
    }
}
