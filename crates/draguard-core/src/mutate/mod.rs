//! Pure mutations, each an RFC 6902 operation on exactly the field it
//! changes, computed against the object as it was sent (so fields unknown
//! to draguard are never touched).

pub mod time_added;

use json_patch::{AddOperation, PatchOperation, ReplaceOperation, jsonptr::PointerBuf};
use serde_json::{Map, Value};

/// Sets the field at `tokens` (plain JSON-pointer tokens: field names, or
/// indices of existing list items) to `value`, as one operation, when the
/// object's shape takes it; `None` when it does not.
///
/// - The field is present: `replace`.
/// - It is absent from an object: `add`.
/// - A field on the way is absent or null: `add` (or `replace` the null)
///   of that field, as the objects that lead to `value` — Kubernetes reads
///   a null object as an empty one.
/// - Something on the way is a list item that is not there, or a value
///   that is neither object nor list (`spec: []` on the way to
///   `spec.tolerations`, a taint `"x"` on the way to its `timeAdded`):
///   nothing, because no operation on that shape applies, or would mean
///   what it says.
pub fn set(object: &Value, tokens: &[&str], value: Value) -> Option<PatchOperation> {
    let mut here = object;
    for (depth, token) in tokens.iter().enumerate() {
        let last = depth + 1 == tokens.len();
        let path = || PointerBuf::from_tokens(tokens[..=depth].iter().copied());
        let next = match here {
            Value::Object(map) => map.get(*token),
            // A list item is written only where it is, and a null item
            // stays as it is: it is the item, not a field of one.
            Value::Array(items) => match list_index(token).and_then(|i| items.get(i)) {
                Some(Value::Null) if !last => return None,
                Some(item) => Some(item),
                None => return None,
            },
            _ => return None,
        };
        match next {
            Some(_) if last => return Some(PatchOperation::Replace(ReplaceOperation { path: path(), value })),
            Some(Value::Null) => {
                return Some(PatchOperation::Replace(ReplaceOperation {
                    path: path(),
                    value: nested(&tokens[depth + 1..], value),
                }));
            }
            Some(found) => here = found,
            None => {
                return Some(PatchOperation::Add(AddOperation {
                    path: path(),
                    value: nested(&tokens[depth + 1..], value),
                }));
            }
        }
    }
    // No tokens: the whole object is never replaced.
    None
}

/// The value at `tokens` (field names and list indices), if it is there.
pub fn at<'v>(object: &'v Value, tokens: &[&str]) -> Option<&'v Value> {
    PointerBuf::from_tokens(tokens.iter().copied()).resolve(object).ok()
}

/// Appends `value` to the list at `tokens`, only when it is a list.
pub fn append(object: &Value, tokens: &[&str], value: Value) -> Option<PatchOperation> {
    if !at(object, tokens).is_some_and(Value::is_array) {
        return None;
    }
    Some(PatchOperation::Add(AddOperation {
        path: PointerBuf::from_tokens(tokens.iter().copied().chain(["-"])),
        value,
    }))
}

/// `value` inside the objects named by `tokens`: `{"a": {"b": value}}`.
fn nested(tokens: &[&str], value: Value) -> Value {
    tokens.iter().rev().fold(value, |inner, token| {
        let mut map = Map::new();
        map.insert((*token).to_owned(), inner);
        Value::Object(map)
    })
}

/// A list index as RFC 6901 writes one: digits, no leading zero.
fn list_index(token: &str) -> Option<usize> {
    if token.len() > 1 && token.starts_with('0') {
        return None;
    }
    token
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| token.parse().ok())
        .flatten()
}

/// Applying draguard's own patch to the object it was computed on failed.
/// The operations were built against that very object, so this is a bug in
/// a mutation, not a fault of the user's input; the request is refused
/// rather than judged on an object the apiserver would not store.
#[derive(Debug, thiserror::Error)]
#[error("cannot apply draguard's own patch: {0}")]
pub struct PatchError(#[source] json_patch::PatchError);

impl PatchError {
    /// What json-patch said, without this error's own preamble.
    pub fn cause(&self) -> &json_patch::PatchError {
        &self.0
    }
}

/// Applies `ops` to a copy of `object`: the object `/validate` will see.
pub fn apply(object: &Value, ops: &[PatchOperation]) -> Result<Value, PatchError> {
    let mut patched = object.clone();
    json_patch::patch(&mut patched, ops).map_err(PatchError)?;
    Ok(patched)
}

#[cfg(test)]
mod tests {
    use json_patch::{RemoveOperation, TestOperation};
    use serde_json::json;

    use super::*;

    fn ops_json(ops: &[Option<PatchOperation>]) -> Value {
        serde_json::to_value(ops).expect("serializable")
    }

    #[test]
    fn apply_sets_and_appends() {
        let object = json!({"spec": {"a": 1, "list": [], "gone": null}});
        let ops: Vec<PatchOperation> = [
            set(&object, &["spec", "a"], json!(2)),
            set(&object, &["spec", "b"], json!(3)),
            set(&object, &["spec", "gone", "x"], json!(4)),
            set(&object, &["status", "deep", "x"], json!(5)),
            append(&object, &["spec", "list"], json!("x")),
        ]
        .into_iter()
        .map(|op| op.expect("the shape takes it"))
        .collect();
        assert_eq!(
            serde_json::to_value(&ops).expect("json"),
            json!([
                {"op": "replace", "path": "/spec/a", "value": 2},
                {"op": "add", "path": "/spec/b", "value": 3},
                {"op": "replace", "path": "/spec/gone", "value": {"x": 4}},
                {"op": "add", "path": "/status", "value": {"deep": {"x": 5}}},
                {"op": "add", "path": "/spec/list/-", "value": "x"}
            ])
        );
        assert_eq!(
            apply(&object, &ops).expect("applies"),
            json!({"spec": {"a": 2, "b": 3, "list": ["x"], "gone": {"x": 4}}, "status": {"deep": {"x": 5}}})
        );
    }

    /// Nothing is written into a shape that cannot take it: the Pod whose
    /// spec is a list, the taint that is a list or a string, a list item
    /// that is not there or is null, a list that is not a list.
    #[test]
    fn nothing_is_written_into_the_wrong_shape() {
        let now = json!("2026-11-21T10:00:00Z");
        let cases = [
            (json!({"spec": []}), &["spec", "tolerations"][..]),
            (json!({"spec": "x"}), &["spec", "tolerations"][..]),
            (json!({"spec": 1}), &["spec", "tolerations"][..]),
            (json!({"t": [["x"]]}), &["t", "0", "timeAdded"][..]),
            (json!({"t": ["x"]}), &["t", "0", "timeAdded"][..]),
            (json!({"t": [null]}), &["t", "0", "timeAdded"][..]),
            (json!({"t": []}), &["t", "0", "timeAdded"][..]),
            (json!({"t": [{}]}), &["t", "1", "timeAdded"][..]),
            (json!({"t": [{}]}), &["t", "01", "timeAdded"][..]),
            (json!({"t": [{}]}), &["t", "-", "timeAdded"][..]),
            (json!(["x"]), &["spec"][..]),
            (json!({"spec": {}}), &[][..]),
        ];
        for (object, tokens) in cases {
            assert_eq!(set(&object, tokens, now.clone()), None, "{object} {tokens:?}");
        }
        for list in [json!({"l": {}}), json!({"l": "x"}), json!({"l": null}), json!({})] {
            assert_eq!(append(&list, &["l"], now.clone()), None, "{list}");
        }
        // The same paths on the right shapes.
        let fine = json!({"t": [{"key": "k"}]});
        assert_eq!(
            ops_json(&[set(&fine, &["t", "0", "timeAdded"], now.clone())]),
            json!([{"op": "add", "path": "/t/0/timeAdded", "value": now}])
        );
    }

    #[test]
    fn patch_error_messages() {
        let object = json!({"spec": {"a": 1}});
        let remove_missing = PatchOperation::Remove(RemoveOperation {
            path: PointerBuf::from_tokens(["spec", "missing"]),
        });
        let test_differs = PatchOperation::Test(TestOperation {
            path: PointerBuf::from_tokens(["spec", "a"]),
            value: json!(2),
        });
        let cases = [
            (
                vec![remove_missing],
                "cannot apply draguard's own patch: operation '/0' failed at path '/spec/missing': path is invalid",
            ),
            (
                vec![set(&object, &["spec", "a"], json!(1)).expect("present"), test_differs],
                "cannot apply draguard's own patch: operation '/1' failed at path '/spec/a': value did not match",
            ),
        ];
        for (ops, message) in cases {
            let error = apply(&object, &ops).expect_err("the patch does not apply");
            assert_eq!(error.to_string(), message);
            assert!(
                std::error::Error::source(&error).is_some(),
                "the json-patch cause is kept"
            );
        }
    }
}
