//! The structural part of a driver's schema: the subset of OpenAPI v3 a
//! CRD version's `openAPIV3Schema` uses for the shape of its data. Types,
//! properties (closed unless `additionalProperties` opens them: the
//! drivers decode strictly), required fields, enums, numeric bounds,
//! string lengths, and quantities. What JSON Schema cannot say (which
//! field may sit beside which strategy) is CEL (`cel.rs`).
//!
//! Errors are worded the way the drivers' decoders fail: an unknown key
//! is apimachinery's strict decoding error (the serializer of
//! `pkg/runtime/serializer/json/json.go` with `Strict: true`), in the words
//! dra-driver-nvidia-gpu's own bats test expects at 95932046
//! (tests/bats/test_cd_misc.bats:128, `strict decoding error: unknown field
//! "unexpectedField"`), at the key's own path; a malformed quantity is
//! `resource.ParseQuantity`'s `ErrFormatWrong` (apimachinery
//! `pkg/api/resource/quantity.go`, as crates/k8s-quantity ports it).

use serde_json::{Map, Value};

use crate::field::{At, BadValue, FieldError, Path};

/// How deep a schema (and so the data it judges) is walked. A CRD's schema
/// nests far less; the bound keeps a user schema from recursing without end.
pub const MAX_DEPTH: usize = 32;

/// Judges `value` at `path` against `schema`. `root`: the parameters object
/// itself, whose `apiVersion` and `kind` are the decoder's, not the type's
/// (`metav1.TypeMeta`, inlined in every config type).
///
/// The walk carries an [`At`], not a `Path`: a path is built only for an
/// error, so a valid config costs no allocation for the places it passes
/// (building one per node was a third of a config's cost).
pub fn judge(schema: &Value, value: &Value, path: &Path, root: bool, errs: &mut Vec<FieldError>) {
    walk(schema, value, &At::new(path), root, 0, errs);
}

fn walk(schema: &Value, value: &Value, path: &At<'_>, root: bool, depth: usize, errs: &mut Vec<FieldError>) {
    if depth > MAX_DEPTH {
        errs.push(FieldError::invalid(
            path.path(),
            BadValue::None,
            format!("nested more than {MAX_DEPTH} levels deep"),
        ));
        return;
    }
    let Some(schema) = schema.as_object() else {
        return;
    };
    // `encoding/json` leaves a pointer or map nil for a JSON null: an
    // optional field that is null is as good as absent.
    if value.is_null() {
        return;
    }
    if !type_matches(schema, value, path, errs) {
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let supported: Vec<String> = allowed.iter().map(enum_text).collect();
        let supported: Vec<&str> = supported.iter().map(String::as_str).collect();
        errs.push(FieldError::not_supported(path.path(), value, &supported));
    }
    match value {
        Value::Object(map) => object(schema, map, path, root, depth, errs),
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    walk(item, v, &path.index(i), false, depth + 1, errs);
                }
            }
            bound_len(schema, items.len(), "maxItems", "minItems", "items", path, value, errs);
        }
        Value::Number(n) => number(schema, n, path, value, errs),
        Value::String(s) => {
            bound_len(
                schema,
                s.chars().count(),
                "maxLength",
                "minLength",
                "characters",
                path,
                value,
                errs,
            );
            if is_quantity(schema)
                && let Err(e) = k8s_quantity::Quantity::parse(s.trim())
            {
                errs.push(FieldError::invalid(path.path(), value, e.to_string()));
            }
        }
        _ => {}
    }
}

/// `x-kubernetes-int-or-string` with `format: quantity`: a
/// `resource.Quantity`, which decodes from a number or a string.
fn is_quantity(schema: &Map<String, Value>) -> bool {
    schema.get("format").and_then(Value::as_str) == Some("quantity")
}

fn enum_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether `value` has the schema's type; when not, the error is pushed.
fn type_matches(schema: &Map<String, Value>, value: &Value, path: &At<'_>, errs: &mut Vec<FieldError>) -> bool {
    let int_or_string = schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true);
    let expected = schema.get("type").and_then(Value::as_str);
    let ok = match (expected, value) {
        _ if int_or_string => value.is_string() || value.as_i64().is_some() || value.as_u64().is_some(),
        (None, _) => true,
        (Some("object"), Value::Object(_))
        | (Some("array"), Value::Array(_))
        | (Some("string"), Value::String(_))
        | (Some("boolean"), Value::Bool(_))
        | (Some("number"), Value::Number(_)) => true,
        (Some("integer"), Value::Number(n)) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    };
    if !ok {
        let wanted = if int_or_string {
            "integer or string"
        } else {
            expected.unwrap_or("")
        };
        errs.push(FieldError::invalid(
            path.path(),
            BadValue::Str(json_type(value).to_owned()),
            format!("must be of type {wanted}"),
        ));
    }
    ok
}

/// The JSON type's name, as OpenAPI validation reports a mismatch.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn object(
    schema: &Map<String, Value>,
    map: &Map<String, Value>,
    path: &At<'_>,
    root: bool,
    depth: usize,
    errs: &mut Vec<FieldError>,
) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties");
    for (key, v) in map {
        if root && (key == "apiVersion" || key == "kind") {
            continue;
        }
        let child = path.name(key);
        match (properties.and_then(|p| p.get(key)), additional) {
            (Some(s), _) => walk(s, v, &child, false, depth + 1, errs),
            (None, Some(s @ Value::Object(_))) => walk(s, v, &path.key(key), false, depth + 1, errs),
            (None, Some(Value::Bool(true))) => {}
            // A map of anything (`x-kubernetes-preserve-unknown-fields`)
            // is open; every other object decodes into a Go struct, and
            // the strict decoder refuses a key the struct lacks.
            (None, _) if preserves_unknown(schema) => {}
            (None, _) => errs.push(FieldError::forbidden(
                child.path(),
                format!("strict decoding error: unknown field \"{key}\""),
            )),
        }
    }
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
        if let Some(name) = name.as_str()
            && map.get(name).is_none_or(Value::is_null)
        {
            errs.push(FieldError::required(path.name(name).path(), ""));
        }
    }
}

fn preserves_unknown(schema: &Map<String, Value>) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

fn number(
    schema: &Map<String, Value>,
    n: &serde_json::Number,
    path: &At<'_>,
    value: &Value,
    errs: &mut Vec<FieldError>,
) {
    let Some(x) = n.as_f64() else {
        return;
    };
    let exclusive = |k: &str| schema.get(k).and_then(Value::as_bool) == Some(true);
    if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
        let (bad, words) = if exclusive("exclusiveMinimum") {
            (x <= min, "greater than")
        } else {
            (x < min, "greater than or equal to")
        };
        if bad {
            errs.push(FieldError::invalid(
                path.path(),
                value,
                format!("should be {words} {}", number_text(min)),
            ));
        }
    }
    if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
        let (bad, words) = if exclusive("exclusiveMaximum") {
            (x >= max, "less than")
        } else {
            (x > max, "less than or equal to")
        };
        if bad {
            errs.push(FieldError::invalid(
                path.path(),
                value,
                format!("should be {words} {}", number_text(max)),
            ));
        }
    }
}

fn number_text(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        x.to_string()
    }
}

#[allow(clippy::too_many_arguments)]
fn bound_len(
    schema: &Map<String, Value>,
    len: usize,
    max_key: &str,
    min_key: &str,
    unit: &str,
    path: &At<'_>,
    value: &Value,
    errs: &mut Vec<FieldError>,
) {
    let get = |k: &str| {
        schema
            .get(k)
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
    };
    if let Some(max) = get(max_key)
        && len > max
    {
        errs.push(FieldError::invalid(
            path.path(),
            if value.is_string() {
                BadValue::from(value)
            } else {
                BadValue::None
            },
            format!("should have at most {max} {unit}"),
        ));
    }
    if let Some(min) = get(min_key)
        && len < min
    {
        errs.push(FieldError::invalid(
            path.path(),
            if value.is_string() {
                BadValue::from(value)
            } else {
                BadValue::None
            },
            format!("should have at least {min} {unit}"),
        ));
    }
}
