//! Kubernetes field paths and field errors, rendered exactly as
//! `k8s.io/apimachinery/pkg/util/validation/field` renders them, so a cause
//! from draguard reads the same as a cause from the kube-apiserver.

use std::fmt::{self, Write as _};

/// A field path in Kubernetes notation: `spec.devices.requests[1].firstAvailable[0]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Path(String);

impl Path {
    pub fn new(root: &str) -> Self {
        Path(root.to_owned())
    }

    pub fn child(&self, name: &str) -> Self {
        let mut s = String::with_capacity(self.0.len() + name.len() + 1);
        s.push_str(&self.0);
        if !s.is_empty() {
            s.push('.');
        }
        s.push_str(name);
        Path(s)
    }

    pub fn index(&self, i: usize) -> Self {
        let mut s = self.0.clone();
        let _ = write!(s, "[{i}]");
        Path(s)
    }

    /// A map key, as in `metadata.labels[app]`.
    pub fn key(&self, k: &str) -> Self {
        Path(format!("{}[{}]", self.0, k))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The error types of `field.ErrorType`, with the cause reason each maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    NotFound,
    Required,
    Duplicate,
    Invalid,
    NotSupported,
    Forbidden,
    TooLong,
    TooMany,
}

impl ErrorType {
    /// `metav1.CauseType`, the `reason` of a status cause.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
        }
    }

    fn text(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
        }
    }
}

/// The offending value, rendered the way `field.Error.ErrorBody` renders it:
/// numbers and booleans with `%v`, strings with `%q`, anything else as JSON.
#[derive(Clone, Debug, PartialEq)]
pub enum BadValue {
    None,
    Null,
    Int(i64),
    Bool(bool),
    Str(String),
    /// Pre-rendered JSON (structs, lists, maps).
    Json(String),
}

impl From<&str> for BadValue {
    fn from(s: &str) -> Self {
        BadValue::Str(s.to_owned())
    }
}
impl From<String> for BadValue {
    fn from(s: String) -> Self {
        BadValue::Str(s)
    }
}
impl From<&String> for BadValue {
    fn from(s: &String) -> Self {
        BadValue::Str(s.clone())
    }
}
impl From<i64> for BadValue {
    fn from(v: i64) -> Self {
        BadValue::Int(v)
    }
}
impl From<usize> for BadValue {
    fn from(v: usize) -> Self {
        BadValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<bool> for BadValue {
    fn from(v: bool) -> Self {
        BadValue::Bool(v)
    }
}
impl From<&serde_json::Value> for BadValue {
    fn from(v: &serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => BadValue::Null,
            serde_json::Value::Bool(b) => BadValue::Bool(*b),
            serde_json::Value::String(s) => BadValue::Str(s.clone()),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => BadValue::Int(i),
                None => BadValue::Json(n.to_string()),
            },
            other => BadValue::Json(other.to_string()),
        }
    }
}

/// One validation error: `field.Error`.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub kind: ErrorType,
    pub field: Path,
    pub value: BadValue,
    pub detail: String,
}

impl FieldError {
    pub fn required(field: Path, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, BadValue::None, detail)
    }

    pub fn invalid(field: Path, value: impl Into<BadValue>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Invalid, field, value.into(), detail)
    }

    pub fn forbidden(field: Path, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, BadValue::None, detail)
    }

    pub fn duplicate(field: Path, value: impl Into<BadValue>) -> Self {
        Self::new(ErrorType::Duplicate, field, value.into(), "")
    }

    pub fn not_found(field: Path, value: impl Into<BadValue>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::NotFound, field, value.into(), detail)
    }

    /// `field.NotSupported`: the supported values are listed in the order given.
    pub fn not_supported(field: Path, value: impl Into<BadValue>, supported: &[&str]) -> Self {
        let mut detail = String::from("supported values: ");
        for (i, s) in supported.iter().enumerate() {
            if i > 0 {
                detail.push_str(", ");
            }
            detail.push_str(&go_quote(s));
        }
        Self::new(ErrorType::NotSupported, field, value.into(), detail)
    }

    /// `field.TooMany(path, actual, max)`.
    pub fn too_many(field: Path, actual: usize, max: usize) -> Self {
        let noun = if max == 1 { "item" } else { "items" };
        Self::new(
            ErrorType::TooMany,
            field,
            BadValue::from(actual),
            format!("must have at most {max} {noun}"),
        )
    }

    /// `field.TooLong(path, value, max)`: the value itself is never printed.
    pub fn too_long(field: Path, max: usize) -> Self {
        Self::new(
            ErrorType::TooLong,
            field,
            BadValue::None,
            format!("may not be more than {max} bytes"),
        )
    }

    fn new(kind: ErrorType, field: Path, value: BadValue, detail: impl Into<String>) -> Self {
        FieldError {
            kind,
            field,
            value,
            detail: detail.into(),
        }
    }

    /// `field.Error.ErrorBody()`: the message of a status cause.
    pub fn body(&self) -> String {
        let mut s = String::from(self.kind.text());
        let shows_value = !matches!(
            self.kind,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong
        );
        if shows_value {
            match &self.value {
                BadValue::None => {}
                BadValue::Null => s.push_str(": null"),
                BadValue::Int(v) => {
                    let _ = write!(s, ": {v}");
                }
                BadValue::Bool(v) => {
                    let _ = write!(s, ": {v}");
                }
                BadValue::Str(v) => {
                    s.push_str(": ");
                    s.push_str(&go_quote(v));
                }
                BadValue::Json(v) => {
                    s.push_str(": ");
                    s.push_str(v);
                }
            }
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

pub type ErrorList = Vec<FieldError>;

/// Go's `strconv.Quote` (`%q`): double quotes, Go escapes for control
/// characters, printable Unicode kept as is.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_in_kubernetes_notation() {
        let p = Path::new("spec")
            .child("devices")
            .child("requests")
            .index(1)
            .child("firstAvailable")
            .index(8);
        assert_eq!(p.as_str(), "spec.devices.requests[1].firstAvailable[8]");
        assert_eq!(
            Path::new("metadata").child("labels").key("a/b").as_str(),
            "metadata.labels[a/b]"
        );
    }

    #[test]
    fn bodies_match_apimachinery() {
        let p = Path::new("f");
        assert_eq!(FieldError::required(p.clone(), "").body(), "Required value");
        assert_eq!(
            FieldError::required(p.clone(), "name or generateName is required").body(),
            "Required value: name or generateName is required"
        );
        assert_eq!(
            FieldError::invalid(p.clone(), BadValue::Null, "x").body(),
            "Invalid value: null: x"
        );
        assert_eq!(
            FieldError::invalid(p.clone(), -1i64, "must be greater than zero").body(),
            "Invalid value: -1: must be greater than zero"
        );
        assert_eq!(
            FieldError::not_supported(p.clone(), "In", &["Equal", "Exists"]).body(),
            r#"Unsupported value: "In": supported values: "Equal", "Exists""#
        );
        assert_eq!(
            FieldError::too_many(p.clone(), 9, 8).body(),
            "Too many: 9: must have at most 8 items"
        );
        assert_eq!(
            FieldError::too_many(p.clone(), 2, 1).body(),
            "Too many: 2: must have at most 1 item"
        );
        assert_eq!(
            FieldError::too_long(p.clone(), 10240).body(),
            "Too long: may not be more than 10240 bytes"
        );
        assert_eq!(
            FieldError::duplicate(p.clone(), "foo").body(),
            r#"Duplicate value: "foo""#
        );
        assert_eq!(FieldError::forbidden(p, "nope").body(), "Forbidden: nope");
    }

    #[test]
    fn go_quote_escapes_like_strconv_quote() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\x01é\"");
    }
}
