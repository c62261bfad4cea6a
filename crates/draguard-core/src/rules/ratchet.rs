//! Enum ratcheting (SPEC.md §4), the one mechanism every enum check uses.
//!
//! Kubernetes adds enum values over time ("consumers must treat unknown
//! effects like None"; "validation must be prepared to allow unknown enums
//! in stored objects"). An object stored by a newer apiserver, or before a
//! value was removed, must stay updatable. So on UPDATE a value that is not
//! supported is still accepted when the old object holds the same value at
//! the same place; a new or changed value is judged like on CREATE.
//!
//! "The same place" is found by identity (a device by name, a taint by
//! key+effect, a request by name), by the caller, who passes the old value.

use crate::field::{At, FieldError};

/// Judges one enum value. `old` is the value stored at the same place in the
/// old object (`None` on CREATE or when the place is new).
pub fn check_enum<'p>(
    value: &str,
    old: Option<&str>,
    path: impl Into<At<'p>>,
    supported: &[&str],
) -> Option<FieldError> {
    if supported.contains(&value) || old == Some(value) {
        return None;
    }
    let path: At<'_> = path.into();
    Some(FieldError::not_supported(path, value, supported))
}

/// Like [`check_enum`] for a required enum: empty is `Required`, whatever
/// the old object says.
pub fn check_required_enum<'p>(
    value: &str,
    old: Option<&str>,
    path: impl Into<At<'p>>,
    supported: &[&str],
) -> Option<FieldError> {
    let path: At<'_> = path.into();
    if value.is_empty() {
        return Some(FieldError::required(path, ""));
    }
    check_enum(value, old, path, supported)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;

    const EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "None"];

    #[test]
    fn known_values_pass() {
        assert_eq!(check_enum("None", None, &Path::new("e"), EFFECTS), None);
    }

    #[test]
    fn unknown_value_on_create_is_rejected() {
        let err = check_enum("Bogus", None, &Path::new("e"), EFFECTS).expect("rejected");
        assert_eq!(
            err.to_string(),
            r#"e: Unsupported value: "Bogus": supported values: "NoExecute", "NoSchedule", "None""#
        );
    }

    #[test]
    fn unchanged_unknown_value_ratchets() {
        assert_eq!(check_enum("Future", Some("Future"), &Path::new("e"), EFFECTS), None);
    }

    #[test]
    fn changed_unknown_value_is_rejected() {
        assert!(check_enum("Bogus", Some("Future"), &Path::new("e"), EFFECTS).is_some());
    }

    #[test]
    fn empty_required_value() {
        let err = check_required_enum("", Some(""), &Path::new("e"), EFFECTS).expect("required");
        assert_eq!(err.to_string(), "e: Required value");
    }
}
