//! The namespace label sets, cut into pairwise disjoint regions, each a
//! conjunction of label requirements (what one namespaceSelector can say)
//! and labelled with the selectors that hold on it: one selector entry per
//! region sends exactly the policies of its label, and no namespace
//! matches two entries.
//!
//! A requirement has an exact complement in one requirement (k8s.io/apimachinery
//! v0.36 pkg/labels/selector.go `Requirement.Matches`: `In` needs the key
//! with a listed value and `NotIn` passes an absent key, so `NotIn` is
//! `In`'s complement, `DoesNotExist` is `Exists`'), so `R AND NOT S`, for
//! `S = r1 AND … AND rk`, is the disjoint pieces `R AND NOT r1`,
//! `R AND r1 AND NOT r2`, …: each selector cuts every region it overlaps
//! into the part inside it and the parts outside, and what it selects
//! outside every region becomes regions of its own. Overlapping selectors
//! thus get an entry for their intersection and one for each remainder
//! (`team=ml`, `tier=restricted`: `team=ml,tier=restricted`,
//! `team=ml,tier notin (restricted)`, `tier=restricted,team notin (ml)`).
//!
//! Each key is constrained independently, so emptiness, disjointness and
//! inclusion are decided per key, exactly: a region said to be empty
//! matches no label set, and two regions said to be disjoint never match
//! one namespace.
//!
//! Past the bound of entries, regions are merged (their hull: what both
//! require, so that it covers both, with the labels of both, and every
//! region it then overlaps merged in too), the most specific hull first:
//! still disjoint and covering, but wider than the selectors of its
//! policies — the cost is in the namespaces of that hull only, and
//! [`widened`] names them.

use std::collections::{BTreeMap, BTreeSet};

use super::{Requirement, Requirements};
use crate::policy::model::SelectorOperator;

/// What a region asks of one label key: whether the key may be absent,
/// and which values it may have when present.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Constraint {
    absent: bool,
    values: Values,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Values {
    Only(BTreeSet<String>),
    Except(BTreeSet<String>),
}

impl Constraint {
    fn of(r: &Requirement) -> Constraint {
        let (absent, values) = match r.operator {
            SelectorOperator::In => (false, Values::Only(r.values.clone())),
            SelectorOperator::NotIn => (true, Values::Except(r.values.clone())),
            SelectorOperator::Exists => (false, Values::Except(BTreeSet::new())),
            SelectorOperator::DoesNotExist => (true, Values::Only(BTreeSet::new())),
        };
        Constraint { absent, values }
    }

    /// Holds for no label set: no value allowed, absence neither. Exact:
    /// past a finite exclusion, label values remain.
    fn is_empty(&self) -> bool {
        !self.absent && matches!(&self.values, Values::Only(v) if v.is_empty())
    }

    /// Holds for every label set: the key is not constrained.
    fn is_any(&self) -> bool {
        self.absent && matches!(&self.values, Values::Except(v) if v.is_empty())
    }

    /// Whether requirements can say it: all but "absent, or one of these
    /// values", which no single requirement nor conjunction of them is.
    fn expressible(&self) -> bool {
        !(self.absent && matches!(&self.values, Values::Only(v) if !v.is_empty()))
    }

    fn intersect(&self, other: &Constraint) -> Constraint {
        use Values::*;
        let values = match (&self.values, &other.values) {
            (Only(a), Only(b)) => Only(a.intersection(b).cloned().collect()),
            (Only(a), Except(b)) | (Except(b), Only(a)) => Only(a.difference(b).cloned().collect()),
            (Except(a), Except(b)) => Except(a.union(b).cloned().collect()),
        };
        Constraint {
            absent: self.absent && other.absent,
            values,
        }
    }

    fn union(&self, other: &Constraint) -> Constraint {
        use Values::*;
        let values = match (&self.values, &other.values) {
            (Only(a), Only(b)) => Only(a.union(b).cloned().collect()),
            (Only(a), Except(b)) | (Except(b), Only(a)) => Except(b.difference(a).cloned().collect()),
            (Except(a), Except(b)) => Except(a.intersection(b).cloned().collect()),
        };
        Constraint {
            absent: self.absent || other.absent,
            values,
        }
    }

    fn complement(&self) -> Constraint {
        let values = match &self.values {
            Values::Only(a) => Values::Except(a.clone()),
            Values::Except(b) => Values::Only(b.clone()),
        };
        Constraint {
            absent: !self.absent,
            values,
        }
    }

    /// Every label set it holds for, `other` holds for too.
    fn within(&self, other: &Constraint) -> bool {
        use Values::*;
        let values = match (&self.values, &other.values) {
            (Only(a), Only(b)) => a.is_subset(b),
            (Only(a), Except(b)) => a.is_disjoint(b),
            // Infinitely many values against finitely many.
            (Except(_), Only(_)) => false,
            (Except(a), Except(b)) => b.is_subset(a),
        };
        (!self.absent || other.absent) && values
    }

    /// As requirements on `key` (empty for an unconstrained key); `None`
    /// when not [`Self::expressible`].
    fn requirements(&self, key: &str) -> Option<Vec<Requirement>> {
        let requirement = |operator, values: &BTreeSet<String>| Requirement {
            key: key.to_owned(),
            operator,
            values: values.clone(),
        };
        let none = BTreeSet::new();
        Some(match (self.absent, &self.values) {
            (true, Values::Only(a)) if a.is_empty() => vec![requirement(SelectorOperator::DoesNotExist, &none)],
            (true, Values::Only(_)) => return None,
            (false, Values::Only(a)) => vec![requirement(SelectorOperator::In, a)],
            (true, Values::Except(b)) if b.is_empty() => Vec::new(),
            (true, Values::Except(b)) => vec![requirement(SelectorOperator::NotIn, b)],
            (false, Values::Except(b)) if b.is_empty() => vec![requirement(SelectorOperator::Exists, &none)],
            (false, Values::Except(b)) => vec![
                requirement(SelectorOperator::Exists, &none),
                requirement(SelectorOperator::NotIn, b),
            ],
        })
    }

    /// The same constraint as requirements whose complements are each one
    /// requirement: `Exists` and `NotIn` apart.
    fn atoms(&self) -> Vec<Constraint> {
        match (self.absent, &self.values) {
            (false, Values::Except(b)) if !b.is_empty() => vec![
                Constraint {
                    absent: false,
                    values: Values::Except(BTreeSet::new()),
                },
                Constraint {
                    absent: true,
                    values: Values::Except(b.clone()),
                },
            ],
            _ => vec![self.clone()],
        }
    }
}

/// A conjunction of label requirements: a constraint per key, every key
/// not listed unconstrained. Never holds an empty constraint (the region
/// would be empty: it is not made) nor an unconstrained one (dropped), so
/// equal regions compare equal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Region(BTreeMap<String, Constraint>);

impl Region {
    /// The label sets that satisfy `requirements`; `None` when none does.
    pub(super) fn of(requirements: &Requirements) -> Option<Region> {
        let mut region = Region(BTreeMap::new());
        for r in requirements {
            region = region.with(&r.key, &Constraint::of(r))?;
        }
        Some(region)
    }

    /// This region AND `c` on `key`; `None` when empty.
    fn with(&self, key: &str, c: &Constraint) -> Option<Region> {
        let mut out = self.clone();
        let joined = match self.0.get(key) {
            Some(mine) => mine.intersect(c),
            None => c.clone(),
        };
        if joined.is_empty() {
            return None;
        }
        if joined.is_any() {
            out.0.remove(key);
        } else {
            out.0.insert(key.to_owned(), joined);
        }
        Some(out)
    }

    /// Both; `None` when no label set is in both.
    pub(super) fn intersect(&self, other: &Region) -> Option<Region> {
        other
            .0
            .iter()
            .try_fold(self.clone(), |region, (k, c)| region.with(k, c))
    }

    pub(super) fn disjoint(&self, other: &Region) -> bool {
        self.intersect(other).is_none()
    }

    /// Every label set of this region is in `other`.
    pub(super) fn within(&self, other: &Region) -> bool {
        other.0.iter().all(|(k, theirs)| match self.0.get(k) {
            Some(mine) => mine.within(theirs),
            None => theirs.is_any(),
        })
    }

    /// This region AND NOT `other`, as disjoint regions: for `other`'s
    /// atoms a1…an, the pieces `self AND a1 … AND a(i-1) AND NOT ai`.
    pub(super) fn minus(&self, other: &Region) -> Vec<Region> {
        let mut pieces = Vec::new();
        let mut inside = self.clone();
        for (key, c) in &other.0 {
            for atom in c.atoms() {
                pieces.extend(inside.with(key, &atom.complement()));
                match inside.with(key, &atom) {
                    Some(next) => inside = next,
                    // `self` is outside `other`: done.
                    None => return pieces,
                }
            }
        }
        pieces
    }

    /// The most specific region holding both: on each key both constrain,
    /// the union of their constraints when expressible; every other key
    /// unconstrained.
    pub(super) fn hull(&self, other: &Region) -> Region {
        let mut out = BTreeMap::new();
        for (k, mine) in &self.0 {
            if let Some(theirs) = other.0.get(k) {
                let union = mine.union(theirs);
                if union.expressible() && !union.is_any() {
                    out.insert(k.clone(), union);
                }
            }
        }
        Region(out)
    }

    /// Exactly this region and `other`, when requirements can say it:
    /// both equal but on one key, whose union is expressible.
    fn exact_union(&self, other: &Region) -> Option<Region> {
        let keys: BTreeSet<&String> = self.0.keys().chain(other.0.keys()).collect();
        let mut differing = keys.into_iter().filter(|k| self.0.get(*k) != other.0.get(*k));
        let Some(key) = differing.next() else {
            return Some(self.clone());
        };
        if differing.next().is_some() {
            return None;
        }
        let (Some(mine), Some(theirs)) = (self.0.get(key), other.0.get(key)) else {
            // One side leaves the key free: the union is that side.
            return if self.0.contains_key(key) {
                Some(other.clone())
            } else {
                Some(self.clone())
            };
        };
        let union = mine.union(theirs);
        if !union.expressible() {
            return None;
        }
        let mut out = self.clone();
        if union.is_any() {
            out.0.remove(key);
        } else {
            out.0.insert(key.clone(), union);
        }
        Some(out)
    }

    /// As requirements, in a canonical order.
    pub(super) fn requirements(&self) -> Requirements {
        self.0
            .iter()
            // Every constraint kept is expressible: intersections of
            // requirements and expressible unions only.
            .flat_map(|(k, c)| c.requirements(k).unwrap_or_default())
            .collect()
    }

    /// How much it says: its number of requirements.
    fn specificity(&self) -> usize {
        self.requirements().len()
    }
}

/// A region and the selectors (their indices) that send to its entry.
pub(super) type Labelled = (Region, BTreeSet<usize>);

/// The most regions kept while cutting, before merging down to the bound:
/// what a selector of many requirements may cut into is bounded by it, and
/// so is the cost of choosing merges (its square, per merge).
const CUT_LIMIT: usize = 32;

/// Pairwise disjoint regions that cover every selector: each label set a
/// selector holds for is in exactly one region, whose label lists that
/// selector; at most `max` of them (`max` ≥ 1). Exact (every region
/// within each selector of its label, and outside every other) while the
/// cuts fit in `max`; past it, merged as the module says.
pub(super) fn partition(selectors: &[Region], max: usize) -> Vec<Labelled> {
    let mut regions: Vec<Labelled> = Vec::new();
    for (i, s) in selectors.iter().enumerate() {
        regions = cut(&regions, s, i).unwrap_or_else(|| insert_merged(std::mem::take(&mut regions), s, i));
        merge_exact(&mut regions);
        merge_down(&mut regions, max);
    }
    regions.sort();
    regions
}

/// `regions` cut by `selector` (index `i`): each region into its part
/// inside (labelled `i` too) and its pieces outside, and the selector's
/// own part outside every region. `None` past [`CUT_LIMIT`].
fn cut(regions: &[Labelled], selector: &Region, i: usize) -> Option<Vec<Labelled>> {
    let mut out = Vec::new();
    for (region, label) in regions {
        if let Some(inside) = region.intersect(selector) {
            let mut label = label.clone();
            label.insert(i);
            out.push((inside, label));
        }
        out.extend(region.minus(selector).into_iter().map(|r| (r, label.clone())));
        if out.len() > CUT_LIMIT {
            return None;
        }
    }
    let mut fresh = vec![selector.clone()];
    for (region, _) in regions {
        fresh = fresh.iter().flat_map(|f| f.minus(region)).collect();
        if out.len() + fresh.len() > CUT_LIMIT {
            return None;
        }
    }
    out.extend(fresh.into_iter().map(|r| (r, BTreeSet::from([i]))));
    Some(out)
}

/// The selector added as one region, merged with every region it
/// overlaps (see [`absorb`]).
fn insert_merged(mut regions: Vec<Labelled>, selector: &Region, i: usize) -> Vec<Labelled> {
    let merged = absorb(&mut regions, (selector.clone(), BTreeSet::from([i])));
    regions.push(merged);
    regions
}

/// `merged` grown by every region of `regions` it overlaps (removed from
/// there), until it overlaps none: its hull and their labels.
fn absorb(regions: &mut Vec<Labelled>, mut merged: Labelled) -> Labelled {
    while let Some(j) = regions.iter().position(|(r, _)| !r.disjoint(&merged.0)) {
        let (region, label) = regions.swap_remove(j);
        merged.0 = merged.0.hull(&region);
        merged.1.extend(label);
    }
    merged
}

/// Regions of one label that together are exactly one region, as one.
fn merge_exact(regions: &mut Vec<Labelled>) {
    'again: loop {
        for i in 0..regions.len() {
            for j in i + 1..regions.len() {
                if regions[i].1 != regions[j].1 {
                    continue;
                }
                if let Some(union) = regions[i].0.exact_union(&regions[j].0) {
                    regions.swap_remove(j);
                    regions[i].0 = union;
                    continue 'again;
                }
            }
        }
        return;
    }
}

/// Merges regions until at most `max` are left: each time the two whose
/// hull says the most (then whose labels grow least), with what it then
/// overlaps.
fn merge_down(regions: &mut Vec<Labelled>, max: usize) {
    while regions.len() > max.max(1) {
        let mut best: Option<((std::cmp::Reverse<usize>, usize), usize, usize)> = None;
        for i in 0..regions.len() {
            for j in i + 1..regions.len() {
                let hull = regions[i].0.hull(&regions[j].0);
                let grows = regions[i].1.symmetric_difference(&regions[j].1).count();
                let score = (std::cmp::Reverse(hull.specificity()), grows);
                if best.as_ref().is_none_or(|(b, _, _)| score < *b) {
                    best = Some((score, i, j));
                }
            }
        }
        let Some((_, i, j)) = best else { return };
        let second = regions.swap_remove(j);
        let first = regions.swap_remove(i);
        let merged = absorb(regions, (first.0.hull(&second.0), &first.1 | &second.1));
        regions.push(merged);
    }
}

/// The regions whose entry sends a selector's policies where that
/// selector does not hold: per region, the selectors it is not within.
pub(super) fn widened<'a>(regions: &'a [Labelled], selectors: &[Region]) -> Vec<(&'a Region, Vec<usize>)> {
    regions
        .iter()
        .filter_map(|(region, label)| {
            let wider: Vec<usize> = label
                .iter()
                .copied()
                .filter(|&i| selectors.get(i).is_none_or(|s| !region.within(s)))
                .collect();
            (!wider.is_empty()).then_some((region, wider))
        })
        .collect()
}

#[cfg(test)]
mod tests;
