//! The partition, judged on every label set of a small universe (each of
//! three keys absent or one of four values, one of which no selector
//! names): at most one region matches, the one that matches lists every
//! selector that holds, and it lists no other unless [`widened`] says so.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

const KEYS: [&str; 3] = ["a", "b", "c"];
const VALUES: [&str; 4] = ["x", "y", "z", "w"];

/// k8s.io/apimachinery v0.36 pkg/labels/selector.go `Requirement.Matches`.
fn matches(requirements: &Requirements, labels: &BTreeMap<String, String>) -> bool {
    requirements.iter().all(|r| {
        let value = labels.get(&r.key);
        match r.operator {
            SelectorOperator::In => value.is_some_and(|v| r.values.contains(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !r.values.contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    })
}

fn label_sets() -> Vec<BTreeMap<String, String>> {
    let mut sets = vec![BTreeMap::new()];
    for key in KEYS {
        sets = sets
            .into_iter()
            .flat_map(|set| {
                let mut out = vec![set.clone()];
                for value in VALUES {
                    let mut with = set.clone();
                    with.insert(key.to_owned(), value.to_owned());
                    out.push(with);
                }
                out
            })
            .collect();
    }
    sets
}

fn requirement(key: &str, operator: SelectorOperator, values: &[&str]) -> Requirement {
    Requirement {
        key: key.to_owned(),
        operator,
        values: values.iter().map(|v| (*v).to_owned()).collect(),
    }
}

fn selector(requirements: &[Requirement]) -> Requirements {
    requirements.iter().cloned().collect()
}

/// Checks the partition of `selectors` at `max` on every label set;
/// returns how many regions it made and whether any is widened.
fn check(selectors: &[Requirements], max: usize) -> (usize, bool) {
    let regions: Vec<Region> = selectors
        .iter()
        .map(|s| Region::of(s).expect("a selector that can hold"))
        .collect();
    let parts = partition(&regions, max);
    assert!(parts.len() <= max.max(1), "{} regions past {max}", parts.len());
    let wider = widened(&parts, &regions);
    for labels in label_sets() {
        let holding: BTreeSet<usize> = selectors
            .iter()
            .enumerate()
            .filter(|(_, s)| matches(s, &labels))
            .map(|(i, _)| i)
            .collect();
        let matched: Vec<&Labelled> = parts
            .iter()
            .filter(|(r, _)| matches(&r.requirements(), &labels))
            .collect();
        assert!(matched.len() <= 1, "{labels:?} matches {matched:?}");
        match matched.first() {
            None => assert!(holding.is_empty(), "{labels:?}: {holding:?} hold, no region matches"),
            Some((region, label)) => {
                assert!(
                    holding.is_subset(label),
                    "{labels:?}: {holding:?} hold, region {region:?} sends {label:?}"
                );
                // Sent for a selector that does not hold: only in a
                // region said to be widened for it.
                for extra in label.difference(&holding) {
                    assert!(
                        wider.iter().any(|(r, w)| *r == region && w.contains(extra)),
                        "{labels:?}: region {region:?} sends {extra} silently"
                    );
                }
            }
        }
    }
    (parts.len(), !wider.is_empty())
}

#[test]
fn two_selectors_on_different_keys_get_three_exact_regions() {
    let team = selector(&[requirement("team", SelectorOperator::In, &["ml"])]);
    let tier = selector(&[requirement("tier", SelectorOperator::In, &["restricted"])]);
    let regions = [Region::of(&team).unwrap(), Region::of(&tier).unwrap()];
    let parts = partition(&regions, 16);
    let shown: Vec<(Requirements, BTreeSet<usize>)> =
        parts.iter().map(|(r, l)| (r.requirements(), l.clone())).collect();
    assert_eq!(
        shown,
        [
            (
                selector(&[
                    requirement("team", SelectorOperator::In, &["ml"]),
                    requirement("tier", SelectorOperator::In, &["restricted"])
                ]),
                BTreeSet::from([0, 1])
            ),
            (
                selector(&[
                    requirement("team", SelectorOperator::In, &["ml"]),
                    requirement("tier", SelectorOperator::NotIn, &["restricted"])
                ]),
                BTreeSet::from([0])
            ),
            (
                selector(&[
                    requirement("team", SelectorOperator::NotIn, &["ml"]),
                    requirement("tier", SelectorOperator::In, &["restricted"])
                ]),
                BTreeSet::from([1])
            ),
        ]
    );
    assert!(widened(&parts, &regions).is_empty());
}

#[test]
fn in_with_several_values_is_cut_by_value() {
    let first = selector(&[requirement("a", SelectorOperator::In, &["x", "y"])]);
    let second = selector(&[requirement("a", SelectorOperator::In, &["y", "z"])]);
    let regions = [Region::of(&first).unwrap(), Region::of(&second).unwrap()];
    let parts = partition(&regions, 16);
    let shown: Vec<(Requirements, BTreeSet<usize>)> =
        parts.iter().map(|(r, l)| (r.requirements(), l.clone())).collect();
    assert_eq!(
        shown,
        [
            (
                selector(&[requirement("a", SelectorOperator::In, &["x"])]),
                BTreeSet::from([0])
            ),
            (
                selector(&[requirement("a", SelectorOperator::In, &["y"])]),
                BTreeSet::from([0, 1])
            ),
            (
                selector(&[requirement("a", SelectorOperator::In, &["z"])]),
                BTreeSet::from([1])
            ),
        ]
    );
    assert_eq!(check(&[first, second], 16), (3, false));
}

#[test]
fn exists_and_does_not_exist_and_implied_selectors() {
    let exists = selector(&[requirement("a", SelectorOperator::Exists, &[])]);
    let absent_b = selector(&[
        requirement("a", SelectorOperator::DoesNotExist, &[]),
        requirement("b", SelectorOperator::Exists, &[]),
    ]);
    // Disjoint: an entry each, as they are.
    assert_eq!(check(&[exists.clone(), absent_b], 16), (2, false));
    // `a=x` implies `a` exists: its region, and `a` but not x.
    let ax = selector(&[requirement("a", SelectorOperator::In, &["x"])]);
    assert_eq!(check(&[exists.clone(), ax.clone()], 16), (2, false));
    // Two requirements, one implying the other's key: `a=x,b=y` inside
    // `a=x`.
    let axby = selector(&[
        requirement("a", SelectorOperator::In, &["x"]),
        requirement("b", SelectorOperator::In, &["y"]),
    ]);
    assert_eq!(check(&[ax, axby], 16), (2, false));
    // `a` exists but not x (two requirements on one key) against `a=x`
    // and `b` absent.
    let not_x = selector(&[
        requirement("a", SelectorOperator::Exists, &[]),
        requirement("a", SelectorOperator::NotIn, &["x"]),
    ]);
    let no_b = selector(&[requirement("b", SelectorOperator::DoesNotExist, &[])]);
    assert_eq!(check(&[not_x, no_b, exists], 16), (5, false));
}

#[test]
fn past_the_bound_regions_merge_and_say_so() {
    // Six selectors on six keys: 63 exact regions, far past 4.
    let keys = ["a", "b", "c", "d", "e", "f"];
    let selectors: Vec<Requirements> = keys
        .iter()
        .map(|k| selector(&[requirement(k, SelectorOperator::In, &["x"])]))
        .collect();
    let regions: Vec<Region> = selectors.iter().map(|s| Region::of(s).unwrap()).collect();
    let parts = partition(&regions, 4);
    assert!(parts.len() <= 4);
    assert!(!widened(&parts, &regions).is_empty());
    // Three of them fit in 7.
    assert_eq!(check(&selectors[..3], 7), (7, false));
    assert!(check(&selectors[..3], 6).1, "widened past 6");
}

fn requirement_strategy() -> impl Strategy<Value = Requirement> {
    let ops = prop_oneof![
        Just(SelectorOperator::In),
        Just(SelectorOperator::NotIn),
        Just(SelectorOperator::Exists),
        Just(SelectorOperator::DoesNotExist),
    ];
    (0..KEYS.len(), ops, proptest::sample::subsequence(&VALUES[..3], 1..=3)).prop_map(|(k, operator, values)| {
        let values = match operator {
            SelectorOperator::In | SelectorOperator::NotIn => values,
            SelectorOperator::Exists | SelectorOperator::DoesNotExist => Vec::new(),
        };
        requirement(KEYS[k], operator, &values)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Random selectors, every label set: at most one region, covering
    /// every selector that holds, and widened only where said.
    #[test]
    fn every_label_set_reaches_at_most_one_region_covering_its_selectors(
        selectors in proptest::collection::vec(proptest::collection::vec(requirement_strategy(), 1..=3), 1..=5),
        max in prop_oneof![Just(16usize), 1usize..6],
    ) {
        let selectors: Vec<Requirements> = selectors
            .iter()
            .map(|s| selector(s))
            // A selector no label set satisfies makes no entry upstream.
            .filter(|s| Region::of(s).is_some())
            .collect();
        check(&selectors, max);
    }
}
