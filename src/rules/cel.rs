//! Compile checks for DRA CEL selectors (`validateCELExpression`).
//!
//! Kubernetes compiles selectors with cel-go in the DRA environment, where
//! the only variable is `device`. The Rust `cel` parser (through kube-cel)
//! gives the same syntax errors in the same `ERROR: <input>:L:C: msg` form;
//! what it cannot do is type-check or estimate cost, so draguard checks
//! syntax and undeclared variables, and leaves the cost budget to the
//! apiserver (see README, "Known differences").

use kube_cel::cel::Program;

use crate::field::{FieldError, Path};

pub const CEL_SELECTOR_EXPRESSION_MAX_LENGTH: usize = 10 * 1024;

/// The variables the DRA CEL environment declares.
const DECLARED_VARIABLES: &[&str] = &["device"];

/// Validates one selector expression at `path` (`...selectors[k].cel.expression`).
pub fn validate_expression(expression: &str, path: &Path) -> Vec<FieldError> {
    if expression.len() > CEL_SELECTOR_EXPRESSION_MAX_LENGTH {
        return vec![FieldError::too_long(path.clone(), CEL_SELECTOR_EXPRESSION_MAX_LENGTH)];
    }
    match compile(expression) {
        Ok(()) => Vec::new(),
        Err(CompileError::Required) => vec![FieldError::required(path.clone(), "expression is required")],
        Err(CompileError::Invalid(detail)) => vec![FieldError::invalid(path.clone(), expression, detail)],
    }
}

#[derive(Debug, PartialEq)]
pub enum CompileError {
    Required,
    Invalid(String),
}

/// Parses `expression` and rejects references to undeclared variables.
pub fn compile(expression: &str) -> Result<(), CompileError> {
    if expression.trim().is_empty() {
        return Err(CompileError::Required);
    }
    // The parser is not expected to panic (it was fuzzed for it), but an
    // admission webhook must never lose a request to a parser bug.
    let parsed = std::panic::catch_unwind(|| Program::compile(expression))
        .map_err(|_| CompileError::Invalid("compilation failed: the CEL parser could not handle this expression".into()))?;
    let program = parsed.map_err(|e| CompileError::Invalid(format!("compilation failed: {e}")))?;
    let references = program.references();
    let mut undeclared: Vec<&str> = references
        .variables()
        .into_iter()
        .filter(|v| !DECLARED_VARIABLES.contains(v))
        .collect();
    undeclared.sort_unstable();
    if let Some(first) = undeclared.first() {
        return Err(CompileError::Invalid(format!(
            "compilation failed: ERROR: <input>: undeclared reference to '{first}' (in container '')"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_dra_selectors() {
        assert_eq!(compile(r#"device.driver == "gpu.example.com""#), Ok(()));
        assert_eq!(
            compile(r#"device.attributes["gpu.example.com"].model == "a100" && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#),
            Ok(())
        );
    }

    #[test]
    fn rejects_syntax_errors_with_position() {
        match compile("device.driver ==") {
            Err(CompileError::Invalid(msg)) => {
                assert!(msg.starts_with("compilation failed: ERROR: <input>:1:"), "{msg}")
            }
            other => panic!("expected a syntax error, got {other:?}"),
        }
    }

    #[test]
    fn rejects_undeclared_variables() {
        assert_eq!(
            compile("foo.bar == 1"),
            Err(CompileError::Invalid(
                "compilation failed: ERROR: <input>: undeclared reference to 'foo' (in container '')".into()
            ))
        );
    }

    #[test]
    fn empty_is_required() {
        assert_eq!(compile("  "), Err(CompileError::Required));
    }

    #[test]
    fn too_long_is_not_compiled() {
        let long = format!("device.driver == \"{}\"", "a".repeat(CEL_SELECTOR_EXPRESSION_MAX_LENGTH));
        let errs = validate_expression(&long, &Path::new("x"));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].body(), "Too long: may not be more than 10240 bytes");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!("{}true{}", "(".repeat(5000), ")".repeat(5000));
        assert!(matches!(compile(&deep[..]), Err(CompileError::Invalid(_))));
        let deep_lists = format!("{}1{}", "[".repeat(3000), "]".repeat(3000));
        assert!(matches!(compile(&deep_lists[..]), Err(CompileError::Invalid(_))));
    }
}
