//! Pure validation. Every function takes typed views and a path and returns
//! the field errors the kube-apiserver would return, in its words.
//! Nothing here does IO or reads the clock.

pub mod cel;
pub mod claim;
pub mod device_patch;
pub mod devicetaintrule;
pub mod meta;
pub mod names;
pub mod pod;
pub mod ratchet;
pub mod slice;
pub mod taints;
pub mod tolerations;

use std::collections::HashSet;
use std::hash::Hash;

use crate::field::{BadValue, FieldError, Path};

/// `validateSlice`: over `max` items yields only `TooMany` (the apiserver's
/// short-circuit against huge lists); otherwise validates each item.
pub fn validate_slice<T>(
    items: &[T],
    max: usize,
    path: &Path,
    mut item: impl FnMut(&T, &Path) -> Vec<FieldError>,
) -> Vec<FieldError> {
    if items.len() > max {
        return vec![FieldError::too_many(path.clone(), items.len(), max)];
    }
    let mut errs = Vec::new();
    for (i, it) in items.iter().enumerate() {
        errs.extend(item(it, &path.index(i)));
    }
    errs
}

/// `validateSet`: `validateSlice`, then a `Duplicate` at the index of every
/// repeated key.
pub fn validate_set<T, K: Eq + Hash + Clone + Into<BadValue>>(
    items: &[T],
    max: usize,
    path: &Path,
    item: impl FnMut(&T, &Path) -> Vec<FieldError>,
    key: impl Fn(&T) -> K,
) -> Vec<FieldError> {
    let mut errs = validate_slice(items, max, path, item);
    if items.len() > max {
        return errs;
    }
    let mut seen = HashSet::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        let k = key(it);
        if !seen.insert(k.clone()) {
            errs.push(FieldError::duplicate(path.index(i), k));
        }
    }
    errs
}

/// One `field.Invalid` per message of a format check.
pub fn invalid_each(path: &Path, value: &str, messages: Vec<String>) -> Vec<FieldError> {
    messages
        .into_iter()
        .map(|m| FieldError::invalid(path.clone(), value, m))
        .collect()
}
