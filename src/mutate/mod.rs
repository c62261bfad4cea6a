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

/// Applies `ops` to a copy of `object`: the object `/validate` will see.
pub fn apply(object: &Value, ops: &[PatchOperation]) -> Result<Value, String> {
    let mut patched = object.clone();
    json_patch::patch(&mut patched, ops).map_err(|e| format!("cannot apply draguard's own patch: {e}"))?;
    Ok(patched)
}
