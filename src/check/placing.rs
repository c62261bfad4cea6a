//! Verdicts on built kustomizations moved to where the mistake is: the
//! source file and the field's line in it (the object's, if a patch
//! changed it: [`super::origin`]), and one
//! finding for one source object however many overlays build it.
//!
//! A verdict on a built object with findings is held until every verdict
//! is made: the same findings (severity, field, reason, message) on the
//! same source object are one verdict, whose findings name every overlay
//! that gave them. Overlays that change the object so that the findings
//! differ give distinct verdicts. Only verdicts with findings are held
//! (a few, in a repository CI passes); the others go on at once. At most
//! [`HELD_MAX`] are held: past that, a verdict no held one matches goes
//! on at once, naming its one overlay, so that memory stays flat however
//! many objects a build's mistakes touch.
//!
//! A base built alone because the overlays over it did not build
//! ([`super::bases_alone`]) is named so in its findings ("built by the
//! kustomization base alone, as its overlay o did not build"), placed or
//! not: the overlay itself was not checked.

use std::collections::HashMap;

use super::origin::{Place, Placements, SourceObject};
use super::{ObjectReport, Sink};

/// The most verdicts held for merging (each a few KiB: about 10 MiB).
pub const HELD_MAX: usize = 4096;

pub struct Placing<'a> {
    inner: &'a mut dyn Sink,
    /// The placements of each built source, by source index.
    by_source: HashMap<usize, Placements>,
    /// Source names: the inputs', then the files placed into.
    names: Vec<String>,
    first_extra: usize,
    held: Vec<(ObjectReport, Vec<String>, Vec<String>)>,
    index: HashMap<String, usize>,
}

impl<'a> Placing<'a> {
    /// `names`: the sources judged, by index; `placements`: each build's.
    pub fn new(inner: &'a mut dyn Sink, names: &[String], placements: Vec<Placements>) -> Self {
        let by_name: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
        let by_source = placements
            .into_iter()
            .filter_map(|p| Some((*by_name.get(p.overlay.as_str())?, p)))
            .collect();
        Placing {
            inner,
            by_source,
            names: names.to_vec(),
            first_extra: names.len(),
            held: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// The names of the files verdicts were placed into, beyond the
    /// inputs' (their indexes follow the inputs').
    pub fn finish(mut self) -> Vec<String> {
        for (verdict, overlays, patched_in) in std::mem::take(&mut self.held) {
            self.inner.take(naming(verdict, &overlays, &patched_in));
        }
        self.names.split_off(self.first_extra)
    }

    fn name_index(&mut self, file: &str) -> usize {
        match self.names[self.first_extra..].iter().position(|n| n == file) {
            Some(i) => self.first_extra + i,
            None => {
                self.names.push(file.to_owned());
                self.names.len() - 1
            }
        }
    }
}

/// How findings name the build that gave them: the overlay, or a base
/// built alone in place of the overlays that did not build.
fn built_by(placements: &Placements) -> String {
    match placements.instead_of.as_slice() {
        [] => placements.overlay.clone(),
        [one] => format!("{} alone, as its overlay {one} did not build", placements.overlay),
        many => format!(
            "{} alone, as its overlays {} did not build",
            placements.overlay,
            many.join(", ")
        ),
    }
}

/// `verdict` with each finding naming the overlays that built its object
/// and the kustomization files that patched it.
fn naming(mut verdict: ObjectReport, overlays: &[String], patched_in: &[String]) -> ObjectReport {
    let through = match overlays {
        [one] => format!("built by the kustomization {one}"),
        many => format!("built by the kustomizations {}", many.join(", ")),
    };
    let patched = match patched_in {
        [] => String::new(),
        files => format!("; patched in {}", files.join(", ")),
    };
    for finding in &mut verdict.findings {
        finding.message = format!("{} ({through}{patched})", finding.message);
    }
    verdict
}

impl Sink for Placing<'_> {
    fn take(&mut self, mut verdict: ObjectReport) {
        let Some(placements) = self.by_source.get(&verdict.source) else {
            self.inner.take(verdict);
            return;
        };
        let overlay = built_by(placements);
        let alone = !placements.instead_of.is_empty();
        let Some(placed) = placements.at(verdict.position.line).cloned() else {
            // Not placed (built without origin marks): at the build's line.
            if alone {
                for finding in &mut verdict.findings {
                    finding.message = format!("{} (built by the kustomization {overlay})", finding.message);
                }
            }
            self.inner.take(verdict);
            return;
        };
        let (file, line) = match &placed.at {
            Place::File { file, line } => (file.clone(), *line),
            Place::Unplaced(why) => {
                // Left at the build's line, saying why.
                for finding in &mut verdict.findings {
                    finding.message = if alone {
                        format!(
                            "{} (built by the kustomization {overlay}; at the output of its build: {why})",
                            finding.message
                        )
                    } else {
                        format!("{} (at the output of the kustomization build: {why})", finding.message)
                    };
                }
                self.inner.take(verdict);
                return;
            }
        };
        verdict.source = self.name_index(&file);
        verdict.position = crate::yaml::Position { line, column: 1 };
        // Each finding at its field in the source file, where the mistake
        // is written; a patched object's field may have been written by
        // the patch, or moved by it: at the object.
        let source = (placed.patched_in.is_empty() && verdict.findings.iter().any(|f| f.field.is_some()))
            .then(|| SourceObject::read(&file, line))
            .flatten();
        for finding in &mut verdict.findings {
            finding.position = source
                .as_ref()
                .zip(finding.field.as_deref())
                .and_then(|(source, field)| {
                    source.locate(&super::manifest_path(
                        &verdict.id.kind,
                        &crate::field::Path::parse(field),
                    ))
                })
                .unwrap_or(verdict.position);
        }
        if verdict.findings.is_empty() {
            self.inner.take(verdict);
            return;
        }
        let key = serde_json::to_string(&(
            &file,
            line,
            &verdict.id.kind,
            verdict
                .findings
                .iter()
                .map(|f| (&f.severity, &f.field, &f.reason, &f.message))
                .collect::<Vec<_>>(),
        ))
        .unwrap_or_default();
        match self.index.get(&key) {
            Some(&i) => {
                let (_, overlays, patched_in) = &mut self.held[i];
                if !overlays.contains(&overlay) {
                    overlays.push(overlay);
                }
                for p in placed.patched_in {
                    if !patched_in.contains(&p) {
                        patched_in.push(p);
                    }
                }
            }
            None if self.held.len() >= HELD_MAX => {
                self.inner.take(naming(verdict, &[overlay], &placed.patched_in));
            }
            None => {
                self.index.insert(key, self.held.len());
                self.held.push((verdict, vec![overlay], placed.patched_in));
            }
        }
    }
}
