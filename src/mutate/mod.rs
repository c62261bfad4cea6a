//! Pure mutations, each an RFC 6902 operation on exactly the field it
//! changes, computed against the object as it was sent (so fields unknown
//! to draguard are never touched).

pub mod time_added;

use json_patch::{AddOperation, PatchOperation, ReplaceOperation, jsonptr::PointerBuf};
use serde_json::Value;

/// Sets the field at `pointer` (a JSON pointer of plain tokens) to `value`:
/// `replace` when it is present, `add` when it is not.
pub fn set(object: &Value, tokens: &[&str], value: Value) -> PatchOperation {
    let path = PointerBuf::from_tokens(tokens.iter().copied());
    if path.resolve(object).is_ok() {
        PatchOperation::Replace(ReplaceOperation { path, value })
    } else {
        PatchOperation::Add(AddOperation { path, value })
    }
}

/// Adds `value` at the pointer made of `tokens` (`-` appends to a list).
pub fn add(tokens: &[&str], value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation {
        path: PointerBuf::from_tokens(tokens.iter().copied()),
        value,
    })
}

/// Applying draguard's own patch to the object it was computed on failed.
/// The operations were built against that very object, so this is a bug in
/// a mutation, not a fault of the user's input; the request is refused
/// rather than judged on an object the apiserver would not store.
#[derive(Debug, thiserror::Error)]
#[error("cannot apply draguard's own patch: {0}")]
pub struct PatchError(#[source] json_patch::PatchError);

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

    #[test]
    fn apply_sets_and_adds() {
        let object = json!({"spec": {"a": 1}});
        let ops = [
            set(&object, &["spec", "a"], json!(2)),
            set(&object, &["spec", "b"], json!(3)),
            add(&["spec", "list"], json!([])),
            add(&["spec", "list", "-"], json!("x")),
        ];
        assert_eq!(
            apply(&object, &ops).expect("applies"),
            json!({"spec": {"a": 2, "b": 3, "list": ["x"]}})
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
                vec![add(&["spec", "a"], json!(1)), test_differs],
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
