//! The cross-field rules of a driver's schema: `x-kubernetes-validations`,
//! written as a CRD writes them (`rule`, `message` or `messageExpression`,
//! `fieldPath`, `reason`), so that built-in and user schemas share one
//! mechanism. kube-cel compiles a schema's rules once (the compiled schema
//! is cached with it, `schema.rs`); they run here, on the nodes that have
//! them, as the apiserver runs a custom resource's.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Value as CelValue};
use kube_cel::{CompilationResult, CompiledSchema, KubeCelExt as _, compile_schema};
use serde_json::Value;

use crate::field::{At, BadValue, FieldError, Path, Segment};

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
    ///
    /// The data is walked beside the compiled schema and only a node that
    /// has rules is turned into a CEL value, once: kube-cel's own walker
    /// converts every node's whole subtree, which cost a claim with one
    /// config three times its review. Transition rules (`oldSelf`) never
    /// run: a config is judged on its own, and an unchanged one not at all.
    pub fn judge(&self, parameters: &Value, base: &Path, errs: &mut Vec<FieldError>) {
        let Some(compiled) = &self.0 else {
            return;
        };
        BASE.with(|ctx| walk(compiled, parameters, &At::new(base), ctx, 0, errs));
    }
}

thread_local! {
    /// The CEL functions a CRD rule may call (Kubernetes' libraries),
    /// registered once per thread; each evaluation opens a scope over it.
    static BASE: Context<'static> = Context::default().with_all();
}

fn walk(
    compiled: &CompiledSchema,
    value: &Value,
    path: &At<'_>,
    ctx: &Context<'_>,
    depth: usize,
    errs: &mut Vec<FieldError>,
) {
    // The structural walk refused anything deeper before the rules run.
    if depth > super::structural::MAX_DEPTH || value.is_null() {
        return;
    }
    if !compiled.validations.is_empty() {
        let mut scope = ctx.new_inner_scope();
        scope.add_variable_from_value("self", cel_value(value));
        for rule in compiled.validations.iter().flatten() {
            if rule.is_transition_rule {
                continue;
            }
            match rule.program.execute(&scope) {
                Ok(CelValue::Bool(true)) => {}
                Ok(CelValue::Bool(false)) => errs.push(failed(rule, &scope, value, path)),
                Ok(_) => errs.push(FieldError::invalid(
                    path.path(),
                    BadValue::None,
                    format!("rule \"{}\" did not evaluate to bool", rule.rule.rule),
                )),
                Err(e) => errs.push(FieldError::invalid(
                    path.path(),
                    BadValue::None,
                    format!("rule \"{}\": evaluation error: {e}", rule.rule.rule),
                )),
            }
        }
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if let Some(c) = compiled.properties.get(key) {
                    walk(c, child, &path.name(key), ctx, depth + 1, errs);
                } else if let Some(c) = &compiled.additional_properties {
                    walk(c, child, &path.key(key), ctx, depth + 1, errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(c) = &compiled.items {
                for (i, child) in items.iter().enumerate() {
                    walk(c, child, &path.index(i), ctx, depth + 1, errs);
                }
            }
        }
        _ => {}
    }
}

/// A failed rule as a field error at its `fieldPath`: `reason` picks the
/// error type, as the apiserver's CRD validation does (`FieldValueInvalid`
/// by default, with the value the rule judged).
fn failed(rule: &CompilationResult, scope: &Context<'_>, value: &Value, path: &At<'_>) -> FieldError {
    let message = rule
        .message_program
        .as_ref()
        .and_then(|p| match p.execute(scope) {
            Ok(CelValue::String(s)) => Some(s.to_string()),
            _ => None,
        })
        .or_else(|| rule.rule.message.clone())
        .unwrap_or_else(|| format!("failed rule: {}", rule.rule.rule));
    let relative = Path::parse(rule.rule.field_path.as_deref().unwrap_or(""));
    let field = relative
        .segments()
        .iter()
        .fold(path.path(), |p, s| p.with_segment(s.clone()));
    match rule.rule.reason.as_deref() {
        Some("FieldValueForbidden") => FieldError::forbidden(field, message),
        Some("FieldValueRequired") => FieldError::required(field, message),
        _ => {
            let judged = value_at(value, relative.segments()).map_or(BadValue::None, BadValue::from);
            FieldError::invalid(field, judged, message)
        }
    }
}

/// JSON as CEL sees a CRD's data: integers as `int` (a `uint` only past
/// `i64`), other numbers as `double`.
fn cel_value(value: &Value) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => CelValue::Int(i),
            (None, Some(u)) => CelValue::UInt(u),
            _ => CelValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(cel_value).collect())),
        Value::Object(map) => {
            let entries: HashMap<Key, CelValue> =
                map.iter().map(|(k, v)| (Key::from(k.clone()), cel_value(v))).collect();
            CelValue::Map(Map::from(entries))
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

fn value_at<'v>(root: &'v Value, segments: &[Segment]) -> Option<&'v Value> {
    segments.iter().try_fold(root, |v, s| match s {
        Segment::Field(name) => v.get(name.as_ref()),
        Segment::Key(key) => v.get(key.as_str()),
        Segment::Index(i) => v.get(*i),
    })
}
