//! When a kustomization root does not build, the bases under it that
//! would build alone are built alone in its place, and its own resource
//! files are read as written: a root that needs a generated file
//! (gpu-operator's `config/manifests`, whose `config/manager` wants an
//! `.env` a make target writes) or a remote base the run cannot fetch
//! (kubeflow/trainer's `overlays/manager`, which pulls JobSet from GitHub)
//! would otherwise leave every object under it unchecked.
//!
//! Which folders and files, decided here from what the walk's
//! kustomizations name (no build in this file; [`super::render`] runs
//! them):
//! - a failed build is one kustomize refused (it said why); a build that
//!   timed out or printed too much is not taken apart, as its bases would
//!   most likely do the same;
//! - the bases of a failed build are the folders it names in `resources`,
//!   `bases` or `components` that hold a kustomization the walk found.
//!   Each is built alone at most once in the run, so the builds are
//!   bounded by the kustomizations of the walk; one that fails too has its
//!   own bases tried in turn;
//! - a base that a build which succeeded reaches (through its bases, at
//!   any depth) is judged there already and is not built again; of two
//!   bases of failed builds, one under the other, only the upper one is
//!   built (the lower one is tried only if the upper one fails);
//! - the files a failed build names in `resources` (plain manifests, not
//!   folders) are read as written, as they are when no kustomize is there,
//!   unless a build that succeeded names them too.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// One kustomization of the walk: what it builds on.
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// Its folder, as walked.
    pub dir: PathBuf,
    /// `kind: Component`: built alone through `components:`.
    pub component: bool,
    /// The folders it names in `resources`, `bases` and `components`
    /// (normalised).
    pub built_on: Vec<PathBuf>,
    /// The files it names in `resources` (normalised).
    pub resources: Vec<PathBuf>,
}

/// The walk's kustomizations, by folder (normalised), and the walked
/// files they name as resources (normalised, to the name as walked).
#[derive(Debug, Default)]
pub struct Graph {
    pub nodes: HashMap<PathBuf, Node>,
    pub files: HashMap<PathBuf, PathBuf>,
}

impl Graph {
    /// The kustomizations `from` builds on, at any depth, with `from`.
    fn reach<'a>(&self, from: impl IntoIterator<Item = &'a PathBuf>) -> HashSet<PathBuf> {
        let mut seen: HashSet<PathBuf> = HashSet::new();
        let mut stack: Vec<PathBuf> = from.into_iter().cloned().collect();
        while let Some(key) = stack.pop() {
            if !seen.insert(key.clone()) {
                continue;
            }
            if let Some(node) = self.nodes.get(&key) {
                stack.extend(node.built_on.iter().filter(|b| !seen.contains(*b)).cloned());
            }
        }
        seen
    }

    fn shown(&self, key: &Path) -> String {
        self.nodes
            .get(key)
            .map_or_else(|| key.display().to_string(), |n| n.dir.display().to_string())
    }
}

/// The builds of one run: which succeeded, which failed, and which bases
/// stand in for which failed builds.
#[derive(Debug, Default)]
pub struct Alone {
    /// Built, as roots or alone.
    built: HashSet<PathBuf>,
    /// Refused by kustomize: their bases are tried.
    refused: HashSet<PathBuf>,
    /// Not built for another reason (a timeout): not taken apart.
    unbuilt: HashSet<PathBuf>,
    /// Roots refused, in the order they were given.
    refused_roots: Vec<PathBuf>,
    /// Each base built alone (or tried), and the failed builds naming it.
    instead_of: HashMap<PathBuf, BTreeSet<PathBuf>>,
}

impl Alone {
    /// A root (or base) built.
    pub fn built(&mut self, key: PathBuf) {
        self.built.insert(key);
    }

    /// A build kustomize refused (`refused`), or that failed otherwise.
    pub fn failed(&mut self, key: PathBuf, refused: bool, root: bool) {
        if refused {
            if root {
                self.refused_roots.push(key.clone());
            }
            self.refused.insert(key);
        } else {
            self.unbuilt.insert(key);
        }
    }

    /// A base that a failed build's message shows fails by itself (the
    /// failure lies inside it, [`super::kustomize_failure::failed_inside`]):
    /// refused without a build of its own, as building it alone would
    /// reach the same failure.
    pub fn fails_alone(&mut self, key: &Path) {
        if !self.tried(key) {
            self.refused.insert(key.to_path_buf());
        }
    }

    fn tried(&self, key: &Path) -> bool {
        self.built.contains(key) || self.refused.contains(key) || self.unbuilt.contains(key)
    }

    /// The bases to build alone next, each with the failed builds it
    /// stands in for; none when there is nothing left to try.
    pub fn next(&mut self, graph: &Graph) -> Vec<PathBuf> {
        let covered = graph.reach(&self.built);
        let mut candidates: BTreeSet<PathBuf> = BTreeSet::new();
        let mut refused: Vec<&PathBuf> = self.refused.iter().collect();
        refused.sort();
        for parent in refused {
            let Some(node) = graph.nodes.get(parent) else { continue };
            for base in node.built_on.iter().filter(|b| graph.nodes.contains_key(*b)) {
                if covered.contains(base) && !self.built.contains(base) {
                    // Judged through a build that succeeded.
                    continue;
                }
                self.instead_of.entry(base.clone()).or_default().insert(parent.clone());
                if !self.tried(base) {
                    candidates.insert(base.clone());
                }
            }
        }
        // Only the upper of two bases one under the other.
        let below: HashMap<&PathBuf, HashSet<PathBuf>> = candidates.iter().map(|c| (c, graph.reach([c]))).collect();
        candidates
            .iter()
            .filter(|c| {
                !below.iter().any(|(other, under)| {
                    other != c && under.contains(*c) && !below.get(c).is_some_and(|mine| mine.contains(*other))
                })
            })
            .cloned()
            .collect()
    }

    /// The failed builds `base` was built alone in place of, as walked.
    pub fn instead_of(&self, graph: &Graph, base: &Path) -> Vec<String> {
        self.instead_of
            .get(base)
            .map(|parents| parents.iter().map(|p| graph.shown(p)).collect())
            .unwrap_or_default()
    }

    /// The files refused builds name as resources that no build that
    /// succeeded names (normalised, in order).
    pub fn raw_files(&self, graph: &Graph) -> Vec<PathBuf> {
        let covered: HashSet<&PathBuf> = graph
            .reach(&self.built)
            .iter()
            .filter_map(|k| graph.nodes.get(k))
            .flat_map(|n| &n.resources)
            .collect();
        let files: BTreeSet<PathBuf> = self
            .refused
            .iter()
            .filter_map(|k| graph.nodes.get(k))
            .flat_map(|n| &n.resources)
            .filter(|f| graph.files.contains_key(*f) && !covered.contains(f))
            .cloned()
            .collect();
        files.into_iter().collect()
    }

    /// One note for each refused root whose bases were built alone or
    /// whose files were read as written: its folder (as walked) and the
    /// message.
    pub fn notes(&self, graph: &Graph) -> Vec<(PathBuf, String)> {
        let raw: HashSet<PathBuf> = self.raw_files(graph).into_iter().collect();
        let mut out = Vec::new();
        for root in &self.refused_roots {
            let (mut alone, mut not_alone, mut elsewhere, mut read) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let mut seen: HashSet<&PathBuf> = HashSet::new();
            let mut stack = vec![root];
            while let Some(key) = stack.pop() {
                if !seen.insert(key) {
                    continue;
                }
                let Some(node) = graph.nodes.get(key) else { continue };
                for file in &node.resources {
                    if raw.contains(file)
                        && let Some(walked) = graph.files.get(file)
                    {
                        read.push(walked.display().to_string());
                    }
                }
                for base in node.built_on.iter().filter(|b| graph.nodes.contains_key(*b)) {
                    if seen.contains(base) {
                        continue;
                    }
                    let shown = graph.shown(base);
                    if self.refused.contains(base) {
                        not_alone.push(shown);
                        stack.push(base);
                    } else if self.unbuilt.contains(base) {
                        not_alone.push(shown);
                    } else if self.built.contains(base) && self.instead_of.contains_key(base) {
                        alone.push(shown);
                    } else {
                        elsewhere.push(shown);
                    }
                }
            }
            if alone.is_empty() && read.is_empty() {
                continue;
            }
            let mut parts = Vec::new();
            for (list, words) in [
                (&mut alone, "built alone"),
                (&mut not_alone, "not built alone either"),
                (&mut read, "read as written"),
                (&mut elsewhere, "judged through other builds"),
            ] {
                list.sort();
                list.dedup();
                if !list.is_empty() {
                    parts.push(format!("{words}: {}", list.join(", ")));
                }
            }
            out.push((
                graph.nodes.get(root).map_or_else(|| root.clone(), |n| n.dir.clone()),
                format!(
                    "kustomization not built, so what it builds on is checked without it ({}); its own patches, namespace and generators are not checked, and each finding from a base built alone says so",
                    parts.join("; ")
                ),
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(nodes: &[(&str, &[&str], &[&str])]) -> Graph {
        let mut g = Graph::default();
        for (dir, built_on, resources) in nodes {
            g.nodes.insert(
                PathBuf::from(dir),
                Node {
                    dir: PathBuf::from(format!("./{dir}")),
                    component: false,
                    built_on: built_on.iter().map(PathBuf::from).collect(),
                    resources: resources.iter().map(PathBuf::from).collect(),
                },
            );
            for r in *resources {
                g.files.insert(PathBuf::from(r), PathBuf::from(format!("./{r}")));
            }
        }
        g
    }

    /// gpu-operator's shape: manifests (refused) on default and samples;
    /// default (refused alone too) on manager (refused) and rbac; another
    /// root that builds uses rbac.
    #[test]
    fn bases_of_a_refused_root_are_tried_once_each_from_the_top() {
        let g = graph(&[
            ("manifests", &["default", "samples"], &[]),
            ("default", &["manager", "rbac"], &[]),
            ("manager", &[], &["manager/manager.yaml"]),
            ("rbac", &[], &["rbac/role.yaml"]),
            ("samples", &[], &["samples/cp.yaml"]),
            ("other", &["rbac"], &[]),
        ]);
        let mut alone = Alone::default();
        alone.failed("manifests".into(), true, true);
        alone.built("other".into());
        assert_eq!(alone.next(&g), [PathBuf::from("default"), PathBuf::from("samples")]);
        alone.failed("default".into(), true, false);
        alone.built("samples".into());
        // rbac is judged through `other`; manager is tried.
        assert_eq!(alone.next(&g), [PathBuf::from("manager")]);
        alone.failed("manager".into(), true, false);
        assert!(alone.next(&g).is_empty());
        assert_eq!(alone.raw_files(&g), [PathBuf::from("manager/manager.yaml")]);
        assert_eq!(alone.instead_of(&g, Path::new("samples")), ["./manifests"]);
        assert_eq!(
            alone.notes(&g),
            [(
                PathBuf::from("./manifests"),
                "kustomization not built, so what it builds on is checked without it (built alone: ./samples; not built alone either: ./default, ./manager; read as written: ./manager/manager.yaml; judged through other builds: ./rbac); its own patches, namespace and generators are not checked, and each finding from a base built alone says so".to_owned()
            )]
        );
    }

    /// Of two bases one under the other, the upper one is built; the lower
    /// one is judged there and never built alone.
    #[test]
    fn a_base_under_another_is_not_built_twice() {
        let g = graph(&[
            ("o", &["a", "b"], &["o/x.yaml"]),
            ("a", &["b"], &["o/x.yaml"]),
            ("b", &[], &[]),
        ]);
        let mut alone = Alone::default();
        alone.failed("o".into(), true, true);
        assert_eq!(alone.next(&g), [PathBuf::from("a")]);
        alone.built("a".into());
        assert!(alone.next(&g).is_empty());
        // a names o/x.yaml too, and was built: not read raw.
        assert!(alone.raw_files(&g).is_empty());
        // A timeout is not taken apart.
        let mut slow = Alone::default();
        slow.failed("o".into(), false, true);
        assert!(slow.next(&g).is_empty());
        assert!(slow.notes(&g).is_empty());
    }
}
