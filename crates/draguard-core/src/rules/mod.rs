//! Pure validation. Every function takes typed views and a path and returns
//! the field errors the kube-apiserver would return, in its words.
//! Nothing here does IO or reads the clock.

pub mod capacity;
pub mod cel;
pub mod claim;
pub mod declarative;
pub mod device_class;
pub mod device_patch;
pub mod devicetaintrule;
pub mod disabled_fields;
pub mod driver_config;
pub mod meta;
pub mod names;
pub mod node_selector;
pub mod pod;
pub mod ratchet;
pub mod slice;
pub mod taints;
pub mod tolerations;
pub mod unverified;

use std::collections::HashSet;
use std::hash::Hash;

use crate::field::{At, BadValue, Declared, ErrorType, FieldError, Segment};

/// Up to this many items a set is checked for duplicates by comparing each
/// key with the ones before it: no hashing, no allocation. Every list the
/// apiserver validates as a set is short; longer ones are hashed.
const SCANNED_SET_MAX: usize = 16;

/// `validateSlice`: over `max` items yields only `TooMany` (the apiserver's
/// short-circuit against huge lists); otherwise validates each item.
pub fn validate_slice<'p, T>(
    items: &[T],
    max: usize,
    path: impl Into<At<'p>>,
    mut item: impl FnMut(&T, At<'_>) -> Vec<FieldError>,
) -> Vec<FieldError> {
    let path = path.into();
    if items.len() > max {
        return vec![FieldError::too_many(path, items.len(), max)];
    }
    let mut errs = Vec::new();
    for (i, it) in items.iter().enumerate() {
        errs.extend(item(it, path.index(i)));
    }
    errs
}

/// `validateSet`: `validateSlice`, then a `Duplicate` at the index of every
/// repeated key. Keys are usually borrowed (`|r| r.name.as_str()`).
pub fn validate_set<'i, 'p, T, K: Eq + Hash + Into<BadValue>>(
    items: &'i [T],
    max: usize,
    path: impl Into<At<'p>>,
    item: impl FnMut(&T, At<'_>) -> Vec<FieldError>,
    key: impl Fn(&'i T) -> K,
) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = validate_slice(items, max, path, item);
    if items.len() > max {
        return errs;
    }
    if items.len() <= SCANNED_SET_MAX {
        for (i, it) in items.iter().enumerate() {
            let k = key(it);
            if items[..i].iter().any(|earlier| key(earlier) == k) {
                errs.push(FieldError::duplicate(path.index(i), k));
            }
        }
        return errs;
    }
    let mut seen = HashSet::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        if !seen.insert(key(it)) {
            errs.push(FieldError::duplicate(path.index(i), key(it)));
        }
    }
    errs
}

/// Marks the errors a list raises itself (its `maxItems`, and the repeats
/// of a `unique` list), which declarative validation raises too: repeats of
/// a set in the same words, repeats of a keyed list with the whole item,
/// which `item` renders by index. Errors of the items are left as their
/// rules marked them.
pub fn declare_list<'p>(errs: &mut [FieldError], path: impl Into<At<'p>>, item: Option<&dyn Fn(usize) -> String>) {
    // The common case, a valid list: no path is built.
    if errs.is_empty() {
        return;
    }
    let path = path.into().path();
    for error in errs.iter_mut() {
        if error.field == path && error.kind == ErrorType::TooMany {
            error.declared = Some(Declared::Same);
        }
        if error.kind != ErrorType::Duplicate {
            continue;
        }
        let Some(Segment::Index(i)) = error.field.segments().last() else {
            continue;
        };
        let i = *i;
        if error.field != path.index(i) {
            continue;
        }
        error.declared = Some(match item {
            Some(render) => Declared::Item(render(i)),
            None => Declared::Same,
        });
    }
}

/// One `field.Invalid` per message of a format check; the path is built
/// only when there is a message.
pub fn invalid_each<'p>(path: impl Into<At<'p>>, value: &str, messages: Vec<String>) -> Vec<FieldError> {
    if messages.is_empty() {
        return Vec::new();
    }
    let path = path.into().path();
    messages
        .into_iter()
        .map(|m| FieldError::invalid(path.clone(), value, m))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;

    /// Sets are scanned up to 16 items and hashed beyond: both find the
    /// same duplicates, in index order.
    #[test]
    fn sets_report_every_repeat_at_its_index() {
        let names = |n: usize, repeats: &[(usize, usize)]| {
            let mut v: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
            for &(at, of) in repeats {
                v[at] = v[of].clone();
            }
            v
        };
        /// Item `.0` repeats the name of item `.1`.
        type Repeat = (usize, usize);
        // (items, repeats, duplicate indices)
        let cases: [(usize, &[Repeat], &[usize]); 6] = [
            (0, &[], &[]),
            (5, &[], &[]),
            (5, &[(3, 1)], &[3]),
            (16, &[(15, 0), (7, 0)], &[7, 15]),
            (17, &[(16, 0), (7, 0)], &[7, 16]),
            (40, &[(39, 2), (20, 2), (30, 25)], &[20, 30, 39]),
        ];
        let root = Path::new("l");
        for (n, repeats, want) in cases {
            let items = names(n, repeats);
            let errs = validate_set(&items, 64, &root, |_, _| Vec::new(), String::as_str);
            let got: Vec<String> = errs.iter().map(ToString::to_string).collect();
            let want: Vec<String> = want
                .iter()
                .map(|&i| format!("l[{i}]: Duplicate value: {:?}", items[i]))
                .collect();
            assert_eq!(got, want, "{n} items");
        }
    }

    #[test]
    fn items_are_judged_at_their_index_and_too_many_stops_there() {
        let items = ["a", "b", "c"];
        let at = |max: usize| {
            validate_slice(&items, max, &Path::new("l"), |s, p| {
                vec![FieldError::required(p.child("name"), *s)]
            })
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
        };
        assert_eq!(
            at(3),
            [
                "l[0].name: Required value: a",
                "l[1].name: Required value: b",
                "l[2].name: Required value: c"
            ]
        );
        assert_eq!(at(2), ["l: Too many: 3: must have at most 2 items"]);
    }
}
