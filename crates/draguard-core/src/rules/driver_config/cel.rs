//! The cross-field rules of a driver's schema: `x-kubernetes-validations`,
//! written as a CRD writes them (`rule`, `message` or `messageExpression`,
//! `fieldPath`, `reason`), so that built-in and user schemas share one
//! mechanism. kube-cel compiles a schema's rules once (the compiled schema
//! is cached with it, `schema.rs`) and evaluates them as the apiserver
//! does for a custom resource.

use kube_cel::{CompiledSchema, ErrorKind, ValidationError, compile_schema};
use serde_json::Value;

use crate::field::{BadValue, FieldError, Path, Segment};

/// A schema's rules, compiled; `None` when the schema has none, so that a
/// config whose schema is structural only costs no CEL at all.
pub struct Rules(Option<CompiledSchema>);

impl Rules {
    /// Compiles every rule of `schema`; the compile errors, worded as
    /// kube-cel words them, are what `policy lint` reports for a user
    /// schema (a built-in schema's rules are compiled by a unit test).
    pub fn compile(schema: &Value) -> Result<Rules, Vec<String>> {
        if !has_rules(schema, 0) {
            return Ok(Rules(None));
        }
        let compiled = compile_schema(schema);
        if compiled.has_errors() {
            return Err(compiled.compilation_errors().iter().map(|e| e.to_string()).collect());
        }
        Ok(Rules(Some(compiled)))
    }

    /// The rules `parameters` breaks, at their paths under `base`.
    pub fn judge(&self, parameters: &Value, base: &Path, errs: &mut Vec<FieldError>) {
        let Some(compiled) = &self.0 else {
            return;
        };
        if let Err(failures) = kube_cel::validate_compiled(compiled, parameters, None) {
            errs.extend(failures.iter().map(|f| field_error(f, parameters, base)));
        }
    }
}

/// Whether any node of `schema` carries `x-kubernetes-validations`.
fn has_rules(schema: &Value, depth: usize) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    if depth > super::structural::MAX_DEPTH {
        return false;
    }
    if map.contains_key("x-kubernetes-validations") {
        return true;
    }
    let nested = |key: &str| map.get(key).is_some_and(|s| has_rules(s, depth + 1));
    nested("items")
        || nested("additionalProperties")
        || map
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.values().any(|s| has_rules(s, depth + 1)))
}

/// A failed rule as a field error: `reason` picks the error type, as the
/// apiserver's CRD validation does (`FieldValueInvalid` by default, with
/// the value the rule judged).
fn field_error(failure: &ValidationError, parameters: &Value, base: &Path) -> FieldError {
    let relative = Path::parse(&failure.field_path);
    let path = relative
        .segments()
        .iter()
        .fold(base.clone(), |p, s| p.with_segment(s.clone()));
    if failure.kind != ErrorKind::ValidationFailure {
        return FieldError::invalid(path, BadValue::None, failure.message.clone());
    }
    match failure.reason.as_deref() {
        Some("FieldValueForbidden") => FieldError::forbidden(path, failure.message.clone()),
        Some("FieldValueRequired") => FieldError::required(path, failure.message.clone()),
        _ => {
            let value = value_at(parameters, relative.segments()).map_or(BadValue::None, BadValue::from);
            FieldError::invalid(path, value, failure.message.clone())
        }
    }
}

fn value_at<'v>(root: &'v Value, segments: &[Segment]) -> Option<&'v Value> {
    segments.iter().try_fold(root, |v, s| match s {
        Segment::Field(name) => v.get(name.as_ref()),
        Segment::Key(key) => v.get(key.as_str()),
        Segment::Index(i) => v.get(*i),
    })
}
