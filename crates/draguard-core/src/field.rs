//! Kubernetes field paths and field errors, rendered exactly as
//! `k8s.io/apimachinery/pkg/util/validation/field` renders them, so a cause
//! from draguard reads the same as a cause from the kube-apiserver.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt::{self, Write as _};
use std::hash::{Hash, Hasher};

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Segment {
    /// A struct field, `.name`. Almost every field name is a literal in the
    /// rules, so it is borrowed when it can be.
    Field(Cow<'static, str>),
    /// A list item, `[3]`.
    Index(usize),
    /// A map key, `[app]`.
    Key(String),
}

/// A field path: a list of segments, rendered on demand in Kubernetes
/// notation (`spec.devices.requests[1].firstAvailable[0]`, `metadata.labels[app]`)
/// by `Display`, or as a JSON pointer by [`Path::to_json_pointer`]; a YAML
/// position is found by walking [`Path::segments`] (`crate::yaml::locate`).
///
/// Two paths are equal, hash alike and order by their Kubernetes notation,
/// as they did when a path was its text: the apiserver reports nothing
/// else, and `Path::new("a.b")` is the same field as `a` then `b`.
#[derive(Clone, Debug, Default)]
pub struct Path(Vec<Segment>);

impl Path {
    /// A path of one field, `root` (`spec`, `metadata`); the empty string is
    /// the empty path. `root` is one name: it is not parsed.
    pub fn new(root: &str) -> Self {
        if root.is_empty() {
            return Path(Vec::new());
        }
        Path(vec![Segment::Field(Cow::Owned(root.to_owned()))])
    }

    pub fn child(&self, name: &str) -> Self {
        self.with(Segment::Field(Cow::Owned(name.to_owned())))
    }

    pub fn index(&self, i: usize) -> Self {
        self.with(Segment::Index(i))
    }

    /// A map key, as in `metadata.labels[app]`.
    pub fn key(&self, k: &str) -> Self {
        self.with(Segment::Key(k.to_owned()))
    }

    /// The segments, root first.
    pub fn segments(&self) -> &[Segment] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The path as a JSON pointer (RFC 6901): `/spec/devices/requests/1`,
    /// with `~` and `/` in names and keys escaped as `~0` and `~1`. The empty
    /// path is the empty pointer, the whole document.
    pub fn to_json_pointer(&self) -> String {
        let mut out = String::new();
        for segment in &self.0 {
            out.push('/');
            match segment {
                Segment::Field(name) => push_pointer_token(&mut out, name),
                Segment::Key(key) => push_pointer_token(&mut out, key),
                Segment::Index(i) => {
                    let _ = write!(out, "{i}");
                }
            }
        }
        out
    }

    /// Reads Kubernetes notation back, for the places where a path arrives
    /// as text (a status cause, a warning, a decode error). Lossy where the
    /// notation is: a field name with a dot splits in two, and a bracketed
    /// key that is a number reads as an index.
    pub fn parse(text: &str) -> Path {
        let mut segments = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            if let Some(inner) = rest.strip_prefix('[') {
                let end = inner.find(']').unwrap_or(inner.len());
                let token = &inner[..end];
                segments.push(match token.parse::<usize>() {
                    Ok(i) => Segment::Index(i),
                    Err(_) => Segment::Key(token.to_owned()),
                });
                rest = inner.get(end + 1..).unwrap_or("");
            } else {
                let field = rest.strip_prefix('.').unwrap_or(rest);
                let end = field.find(['.', '[']).unwrap_or(field.len());
                if end > 0 {
                    segments.push(Segment::Field(Cow::Owned(field[..end].to_owned())));
                }
                rest = &field[end..];
            }
        }
        Path(segments)
    }

    /// The Kubernetes notation. Kept for callers written when a path was
    /// its text; new code renders with `Display` or walks [`Path::segments`].
    pub fn as_str(&self) -> String {
        self.to_string()
    }

    /// The path of these segments (where a walk of a JSON tree found a
    /// value).
    pub fn of_segments(segments: &[Segment]) -> Self {
        segments.iter().fold(Path::new(""), |p, s| p.with(s.clone()))
    }

    /// This path and one more segment.
    pub fn with_segment(&self, segment: Segment) -> Self {
        self.with(segment)
    }

    fn with(&self, segment: Segment) -> Self {
        let mut segments = Vec::with_capacity(self.0.len() + 1);
        segments.extend_from_slice(&self.0);
        segments.push(segment);
        Path(segments)
    }
}

fn push_pointer_token(out: &mut String, token: &str) {
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
}

/// Writes one segment in Kubernetes notation. `started` says whether
/// anything was written before: a field is separated by a dot only then,
/// so a path from `Path::new("")` renders like one from its first child.
fn write_segment(f: &mut impl fmt::Write, segment: &Segment, started: &mut bool) -> fmt::Result {
    match segment {
        Segment::Field(name) => {
            if *started {
                f.write_char('.')?;
            }
            f.write_str(name)?;
            *started |= !name.is_empty();
        }
        Segment::Index(i) => {
            write!(f, "[{i}]")?;
            *started = true;
        }
        Segment::Key(key) => {
            write!(f, "[{key}]")?;
            *started = true;
        }
    }
    Ok(())
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut started = false;
        for segment in &self.0 {
            write_segment(f, segment, &mut started)?;
        }
        Ok(())
    }
}

impl PartialEq for Path {
    fn eq(&self, other: &Self) -> bool {
        // Equal segments render alike; only differently built paths need
        // their text compared.
        self.0 == other.0 || self.to_string() == other.to_string()
    }
}

impl Eq for Path {}

impl Hash for Path {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.to_string().hash(state);
    }
}

impl PartialOrd for Path {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Path {
    fn cmp(&self, other: &Self) -> Ordering {
        if self.0 == other.0 {
            return Ordering::Equal;
        }
        self.to_string().cmp(&other.to_string())
    }
}

/// A place in an object that is not a [`Path`] yet: a path to start from
/// and the steps taken since, each borrowing the one before. Validation
/// walks a whole object this way and builds a `Path` only for an error, so
/// a valid object costs no allocation for paths.
///
/// Rules take `impl Into<At>`, so a caller may pass a `&Path` as before.
/// Each step borrows its parent, so a chain is built one `let` at a time
/// (`let r = p.field("requests"); let i = r.index(0);`) or inside one call's
/// arguments.
#[derive(Clone, Copy, Debug)]
pub struct At<'a>(Step<'a>);

#[derive(Clone, Copy, Debug)]
enum Step<'a> {
    Root(&'a Path),
    Field(&'a At<'a>, &'static str),
    /// A field whose name comes from the data (a schema's property).
    Name(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
    Key(&'a At<'a>, &'a str),
}

impl<'a> At<'a> {
    pub fn new(root: &'a Path) -> Self {
        At(Step::Root(root))
    }

    pub fn field(&'a self, name: &'static str) -> At<'a> {
        At(Step::Field(self, name))
    }

    /// A field named by the data walked (a property of a driver's
    /// schema); the name is copied only if a `Path` is built.
    pub fn name(&'a self, name: &'a str) -> At<'a> {
        At(Step::Name(self, name))
    }

    pub fn index(&'a self, i: usize) -> At<'a> {
        At(Step::Index(self, i))
    }

    /// A map key; it is copied only if a `Path` is built.
    pub fn key(&'a self, key: &'a str) -> At<'a> {
        At(Step::Key(self, key))
    }

    /// The path to here, built now.
    pub fn path(&self) -> Path {
        let mut segments = Vec::with_capacity(self.len());
        self.push_segments(&mut segments);
        Path(segments)
    }

    /// `self.path().child(name)`, built at once.
    pub fn child(&self, name: &'static str) -> Path {
        self.field(name).path()
    }

    fn len(&self) -> usize {
        match self.0 {
            Step::Root(p) => p.0.len(),
            Step::Field(parent, _) | Step::Name(parent, _) | Step::Index(parent, _) | Step::Key(parent, _) => {
                parent.len() + 1
            }
        }
    }

    fn push_segments(&self, out: &mut Vec<Segment>) {
        match self.0 {
            Step::Root(p) => out.extend_from_slice(&p.0),
            Step::Field(parent, name) => {
                parent.push_segments(out);
                out.push(Segment::Field(Cow::Borrowed(name)));
            }
            Step::Name(parent, name) => {
                parent.push_segments(out);
                out.push(Segment::Field(Cow::Owned(name.to_owned())));
            }
            Step::Index(parent, i) => {
                parent.push_segments(out);
                out.push(Segment::Index(i));
            }
            Step::Key(parent, key) => {
                parent.push_segments(out);
                out.push(Segment::Key(key.to_owned()));
            }
        }
    }
}

impl<'a> From<&'a Path> for At<'a> {
    fn from(path: &'a Path) -> Self {
        At::new(path)
    }
}

impl From<At<'_>> for Path {
    fn from(at: At<'_>) -> Self {
        at.path()
    }
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.path().fmt(f)
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
    Internal,
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
            ErrorType::Internal => "InternalError",
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
            ErrorType::Internal => "Internal error",
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
    /// Whether the apiserver's declarative validation reports this error
    /// too, and how: where it is enforced (Kubernetes 1.37), the
    /// hand-written error gives way to its declarative twin, which comes
    /// after every hand-written error (`rules::declarative`). `None`: only
    /// hand-written validation reports it.
    pub declared: Option<Declared>,
}

/// How declarative validation words an error it shares with hand-written
/// validation (the hand-written one is `MarkCoveredByDeclarative`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Declared {
    /// In the same words.
    Same,
    /// A repeated item of a keyed list: declarative validation shows the
    /// whole item (`encoding/json` of the versioned item), where
    /// hand-written validation shows its key.
    Item(String),
    /// `immutable`: the value is not shown (`null`).
    Null,
}

impl FieldError {
    pub fn required(field: impl Into<Path>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field.into(), BadValue::None, detail)
    }

    pub fn invalid(field: impl Into<Path>, value: impl Into<BadValue>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Invalid, field.into(), value.into(), detail)
    }

    pub fn forbidden(field: impl Into<Path>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field.into(), BadValue::None, detail)
    }

    pub fn duplicate(field: impl Into<Path>, value: impl Into<BadValue>) -> Self {
        Self::new(ErrorType::Duplicate, field.into(), value.into(), "")
    }

    pub fn not_found(field: impl Into<Path>, value: impl Into<BadValue>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::NotFound, field.into(), value.into(), detail)
    }

    /// `field.NotSupported`: the supported values are listed in the order given.
    pub fn not_supported(field: impl Into<Path>, value: impl Into<BadValue>, supported: &[&str]) -> Self {
        let mut detail = String::from("supported values: ");
        for (i, s) in supported.iter().enumerate() {
            if i > 0 {
                detail.push_str(", ");
            }
            detail.push_str(&go_quote(s));
        }
        Self::new(ErrorType::NotSupported, field.into(), value.into(), detail)
    }

    /// `field.InternalError`: something went wrong on the server's side,
    /// not with the value (which is never printed).
    pub fn internal(field: impl Into<Path>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Internal, field.into(), BadValue::None, detail)
    }

    /// `field.TooMany(path, actual, max)`.
    pub fn too_many(field: impl Into<Path>, actual: usize, max: usize) -> Self {
        let noun = if max == 1 { "item" } else { "items" };
        Self::new(
            ErrorType::TooMany,
            field.into(),
            BadValue::from(actual),
            format!("must have at most {max} {noun}"),
        )
    }

    /// `field.TooLong(path, value, max)`: the value itself is never printed.
    /// `field.TooLongCharacters`: declarative validation's `maxLength`,
    /// which counts characters, not bytes (apimachinery v0.36.0
    /// pkg/api/validate/limits.go).
    pub fn too_long_characters(field: impl Into<Path>, max: usize) -> Self {
        let unit = if max == 1 { "character" } else { "characters" };
        Self::new(
            ErrorType::TooLong,
            field.into(),
            BadValue::None,
            format!("may not be more than {max} {unit}"),
        )
    }

    pub fn too_long(field: impl Into<Path>, max: usize) -> Self {
        Self::new(
            ErrorType::TooLong,
            field.into(),
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
            declared: None,
        }
    }

    /// Declarative validation reports this error in the same words.
    pub fn declared(self) -> Self {
        self.declared_as(Declared::Same)
    }

    /// Declarative validation reports this error, worded as `how` says.
    pub fn declared_as(mut self, how: Declared) -> Self {
        self.declared = Some(how);
        self
    }

    /// `field.Error.ErrorBody()`: the message of a status cause.
    pub fn body(&self) -> String {
        let mut s = String::from(self.kind.text());
        let shows_value = !matches!(
            self.kind,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::Internal
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

    fn spec() -> Path {
        Path::new("spec")
    }

    #[test]
    fn paths_render_in_kubernetes_notation_and_as_json_pointers() {
        // (path, Kubernetes notation, JSON pointer)
        let cases: Vec<(Path, &str, &str)> = vec![
            (Path::new(""), "", ""),
            (spec(), "spec", "/spec"),
            (
                spec()
                    .child("devices")
                    .child("requests")
                    .index(1)
                    .child("firstAvailable")
                    .index(8),
                "spec.devices.requests[1].firstAvailable[8]",
                "/spec/devices/requests/1/firstAvailable/8",
            ),
            (
                Path::new("metadata").child("labels").key("a/b"),
                "metadata.labels[a/b]",
                "/metadata/labels/a~1b",
            ),
            (
                spec()
                    .child("devices")
                    .index(0)
                    .child("attributes")
                    .key("gpu.example.com/model")
                    .child("string"),
                "spec.devices[0].attributes[gpu.example.com/model].string",
                "/spec/devices/0/attributes/gpu.example.com~1model/string",
            ),
            (
                Path::new("metadata").child("annotations").key("x~y/z"),
                "metadata.annotations[x~y/z]",
                "/metadata/annotations/x~0y~1z",
            ),
            (
                Path::new("").child("spec").child("template"),
                "spec.template",
                "/spec/template",
            ),
            (Path::new("").index(2).child("key"), "[2].key", "/2/key"),
            (
                Path::new("metadata").child("taints").index(0),
                "metadata.taints[0]",
                "/metadata/taints/0",
            ),
        ];
        for (path, notation, pointer) in cases {
            assert_eq!(path.to_string(), notation);
            assert_eq!(path.to_json_pointer(), pointer, "{notation}");
        }
    }

    #[test]
    fn lazy_paths_build_the_same_paths() {
        let root = spec();
        let at = At::new(&root);
        let devices = at.field("devices");
        let requests = devices.field("requests");
        let first = requests.index(1);
        let attributes = first.field("attributes");
        // (built lazily, built eagerly)
        let cases: Vec<(Path, Path)> = vec![
            (at.path(), spec()),
            (first.path(), spec().child("devices").child("requests").index(1)),
            (
                first.child("name"),
                spec().child("devices").child("requests").index(1).child("name"),
            ),
            (
                attributes.key("a.b/c").path(),
                spec()
                    .child("devices")
                    .child("requests")
                    .index(1)
                    .child("attributes")
                    .key("a.b/c"),
            ),
            (At::from(&Path::new("")).field("x").path(), Path::new("x")),
        ];
        for (lazy, eager) in cases {
            assert_eq!(lazy.segments(), eager.segments());
            assert_eq!(lazy.to_string(), eager.to_string());
        }
        assert_eq!(first.to_string(), "spec.devices.requests[1]");
    }

    #[test]
    fn segments_are_the_steps_taken() {
        let p = spec().child("devices").index(3).key("k");
        assert_eq!(
            p.segments(),
            &[
                Segment::Field("spec".into()),
                Segment::Field("devices".into()),
                Segment::Index(3),
                Segment::Key("k".into()),
            ]
        );
        assert!(Path::new("").is_empty());
        assert!(!p.is_empty());
    }

    #[test]
    fn kubernetes_notation_parses_back() {
        // (text, segments)
        let cases: Vec<(&str, Vec<Segment>)> = vec![
            ("", vec![]),
            (
                "spec.devices.requests[1].firstAvailable[0]",
                vec![
                    Segment::Field("spec".into()),
                    Segment::Field("devices".into()),
                    Segment::Field("requests".into()),
                    Segment::Index(1),
                    Segment::Field("firstAvailable".into()),
                    Segment::Index(0),
                ],
            ),
            (
                "spec.devices[0].attributes[gpu.example.com/model].string",
                vec![
                    Segment::Field("spec".into()),
                    Segment::Field("devices".into()),
                    Segment::Index(0),
                    Segment::Field("attributes".into()),
                    Segment::Key("gpu.example.com/model".into()),
                    Segment::Field("string".into()),
                ],
            ),
            ("items[3]", vec![Segment::Field("items".into()), Segment::Index(3)]),
        ];
        for (text, segments) in cases {
            let p = Path::parse(text);
            assert_eq!(p.segments(), segments.as_slice(), "{text}");
            assert_eq!(p.to_string(), text, "renders back");
        }
    }

    #[test]
    fn paths_compare_by_their_notation() {
        let built = Path::new("a").child("b");
        let named = Path::new("a.b");
        assert_ne!(built.segments(), named.segments());
        assert_eq!(built, named, "the same text is the same field");
        let set: std::collections::HashSet<Path> = [built.clone(), named].into_iter().collect();
        assert_eq!(set.len(), 1);
        // Ordered as text: `[10]` before `[9]`, `b-x` before `b.c`.
        let mut paths = [
            Path::new("a").index(9),
            Path::new("a").index(10),
            Path::new("a").child("b").child("c"),
            Path::new("a").child("b-x"),
        ];
        paths.sort();
        let texts: Vec<String> = paths.iter().map(ToString::to_string).collect();
        assert_eq!(texts, ["a.b-x", "a.b.c", "a[10]", "a[9]"]);
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
