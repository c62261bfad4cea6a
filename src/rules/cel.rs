//! Compile checks for DRA CEL selectors (`validateCELExpression`).
//!
//! Kubernetes compiles selectors with cel-go in the DRA environment, where
//! the only variable is `device`. The Rust `cel` parser (through kube-cel)
//! gives the same syntax errors in the same `ERROR: <input>:L:C: msg` form;
//! what it cannot do is type-check or estimate cost, so draguard checks
//! syntax and undeclared variables, and leaves the cost budget to the
//! apiserver (see README, "Known differences").

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use kube_cel::cel::Program;

use crate::field::{At, FieldError};

pub const CEL_SELECTOR_EXPRESSION_MAX_LENGTH: usize = 10 * 1024;

/// The variables the DRA CEL environment declares.
const DECLARED_VARIABLES: &[&str] = &["device"];

/// Validates one selector expression at `path` (`...selectors[k].cel.expression`).
pub fn validate_expression<'p>(expression: &str, path: impl Into<At<'p>>) -> Vec<FieldError> {
    let path: At<'_> = path.into();
    if expression.len() > CEL_SELECTOR_EXPRESSION_MAX_LENGTH {
        return vec![FieldError::too_long(path, CEL_SELECTOR_EXPRESSION_MAX_LENGTH)];
    }
    match compile(expression) {
        Ok(()) => Vec::new(),
        Err(CompileError::Invalid(detail)) => vec![FieldError::invalid(path, expression, detail)],
    }
}

/// Why an expression does not compile; the detail is the message of the
/// `field.Invalid` the apiserver returns (`compilation failed: ...`).
#[derive(Debug, Clone, PartialEq)]
pub enum CompileError {
    Invalid(String),
}

/// Stack for the compiling thread. The generated ANTLR parser recurses per
/// nesting level, with frames big enough that 20 levels overflow a 2 MiB
/// stack in a debug build; the parser stops at 96 levels by itself, and a
/// 64 MiB reservation (address space, not memory) covers that in any build.
const COMPILE_STACK: usize = 64 << 20;
/// The memo of compile results holds at most this many expression bytes.
const MEMO_MAX_BYTES: usize = 4 << 20;

/// Parses `expression` and rejects references to undeclared variables.
/// Results are memoized: claims stamped from one template repeat their
/// selectors, and a compile costs a thread.
pub fn compile(expression: &str) -> Result<(), CompileError> {
    if let Some(hit) = memo().lock().ok().and_then(|m| m.get(expression).cloned()) {
        return hit;
    }
    let result = off_the_async_worker(|| compile_on_big_stack(expression));
    if let Ok(mut m) = memo().lock() {
        if m.bytes + expression.len() > MEMO_MAX_BYTES {
            m.entries.clear();
            m.bytes = 0;
        }
        m.bytes += expression.len();
        m.entries.insert(expression.to_owned(), result.clone());
    }
    result
}

#[derive(Default)]
struct Memo {
    entries: HashMap<String, Result<(), CompileError>>,
    bytes: usize,
}

impl Memo {
    fn get(&self, expression: &str) -> Option<&Result<(), CompileError>> {
        self.entries.get(expression)
    }
}

fn memo() -> &'static Mutex<Memo> {
    static MEMO: OnceLock<Mutex<Memo>> = OnceLock::new();
    MEMO.get_or_init(Mutex::default)
}

/// The server reviews short requests inline on its async workers, and a
/// compile is the one step of a review that can take milliseconds. On a
/// worker of a multi-threaded tokio runtime it therefore hands the worker's
/// other tasks to another thread for its duration (`block_in_place`);
/// anywhere else (the CLI, tests, a `spawn_blocking` thread) it just runs.
fn off_the_async_worker<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(work),
        _ => work(),
    }
}

fn compile_on_big_stack(expression: &str) -> Result<(), CompileError> {
    compile_program(expression).map(drop)
}

/// Compiles `expression` on a thread with a stack big enough for the
/// parser, rejecting undeclared variables, and keeps the program (for
/// `explain`, which evaluates it). Not memoized: callers keep programs.
pub fn compile_program(expression: &str) -> Result<Program, CompileError> {
    let failed = || CompileError::Invalid("compilation failed: the CEL parser could not handle this expression".into());
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-compile".into())
            .stack_size(COMPILE_STACK)
            .spawn_scoped(scope, || parse_and_check(expression))
            .map_err(|_| failed())
            // A panic in the parser is a rejected expression, never a lost request.
            .and_then(|handle| handle.join().map_err(|_| failed()))
            .and_then(|r| r)
    })
}

fn parse_and_check(expression: &str) -> Result<Program, CompileError> {
    let program =
        Program::compile(expression).map_err(|e| CompileError::Invalid(format!("compilation failed: {e}")))?;
    let references = program.references();
    let mut undeclared: Vec<&str> = references
        .variables()
        .into_iter()
        .filter(|v| !DECLARED_VARIABLES.contains(v))
        .collect();
    undeclared.sort_unstable();
    match undeclared.first() {
        Some(first) => Err(CompileError::Invalid(format!(
            "compilation failed: ERROR: <input>: undeclared reference to '{first}' (in container '')"
        ))),
        None => Ok(program),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;

    /// Each place a review runs: an async worker of the server's runtime,
    /// its blocking pool, a single-threaded runtime, no runtime at all. An
    /// unseen expression compiles (and a bad one is rejected) in every one,
    /// without `block_in_place`'s panic outside a multi-threaded worker.
    #[test]
    fn compiles_wherever_a_review_runs() {
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .expect("runtime");
        let on_worker = multi.block_on(async {
            tokio::spawn(async { compile("device.driver == \"on-a-worker.example.com\"") })
                .await
                .expect("task")
        });
        assert_eq!(on_worker, Ok(()));
        let on_blocking_pool = multi.block_on(async {
            tokio::task::spawn_blocking(|| compile("device.driver == \"in-the-pool.example.com\""))
                .await
                .expect("task")
        });
        assert_eq!(on_blocking_pool, Ok(()));
        let single = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let on_single = single.block_on(async { compile("device.driver == ") });
        assert!(
            matches!(on_single, Err(CompileError::Invalid(ref m)) if m.starts_with("compilation failed: ERROR: <input>:1:18")),
            "{on_single:?}"
        );
        assert_eq!(compile("device.driver == \"no-runtime.example.com\""), Ok(()));
    }

    #[test]
    fn accepts_dra_selectors() {
        assert_eq!(compile(r#"device.driver == "gpu.example.com""#), Ok(()));
        assert_eq!(
            compile(
                r#"device.attributes["gpu.example.com"].model == "a100" && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#
            ),
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
    fn empty_is_a_syntax_error() {
        assert!(matches!(compile("  "), Err(CompileError::Invalid(m)) if m.starts_with("compilation failed: ")));
    }

    #[test]
    fn too_long_is_not_compiled() {
        let long = format!(
            "device.driver == \"{}\"",
            "a".repeat(CEL_SELECTOR_EXPRESSION_MAX_LENGTH)
        );
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
        // The debug build's parser panics on long ternary chains.
        let ternaries = format!("{}true", "true ? true : ".repeat(500));
        assert!(matches!(compile(&ternaries[..]), Err(CompileError::Invalid(_))));
    }
}
