//! Rules every kind's validation shares: metadata on CREATE, name and
//! namespace immutability on UPDATE, and the immutable-field error.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::field::{FieldError, Path};
use crate::rules;

/// Metadata: full validation on CREATE, immutable name/namespace on UPDATE.
pub fn validate_metadata(meta: &ObjectMeta, old: Option<&ObjectMeta>, namespaced: bool) -> Vec<FieldError> {
    match old {
        None => rules::meta::validate_object_meta(meta, namespaced, &Path::new("metadata")),
        Some(old) => validate_meta_update(meta, old),
    }
}

/// `ValidateObjectMetaUpdate`: name and namespace never change.
pub fn validate_meta_update(new: &ObjectMeta, old: &ObjectMeta) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let path = Path::new("metadata");
    for (name, new, old) in [
        ("name", &new.name, &old.name),
        ("namespace", &new.namespace, &old.namespace),
    ] {
        let new = new.as_deref().unwrap_or("");
        if new != old.as_deref().unwrap_or("") {
            errs.push(FieldError::invalid(path.child(name), new, "field is immutable"));
        }
    }
    errs
}
