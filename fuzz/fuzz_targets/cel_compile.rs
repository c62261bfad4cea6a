//! CEL selector compilation on any text: `validate_expression`, what the
//! claim rules run on each `selectors[k].cel.expression`.
//!
//! Invariants: an expression over the 10 KiB limit gets exactly one
//! "Too long" error and is never compiled; below it, `validate_expression`
//! fails exactly when `compile` does (memoized) and when `compile_program`
//! does (not memoized), with the same message; an expression yields at
//! most one error; and the error is bounded: issue 16 asks that the
//! 10.6 KB deep-`[` selector get "a denial under 64 KB", so the whole
//! field error, message and echoed value, stays under 64 KiB.
#![no_main]

use draguard::field::Path;
use draguard::rules::cel::{
    CEL_SELECTOR_EXPRESSION_MAX_LENGTH, CompileBudget, CompileError, compile, compile_program, validate_expression,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(expression) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("spec")
        .child("selectors")
        .index(0)
        .child("cel")
        .child("expression");
    // A fresh budget per expression, as each review gets its own.
    let errors = validate_expression(expression, &path, &CompileBudget::default());
    assert!(errors.len() <= 1, "{} errors for one expression", errors.len());
    for e in &errors {
        let size = e.to_string().len();
        assert!(
            size <= draguard_fuzz::OUTPUT_BASE,
            "a {size}-byte error for a {}-byte expression",
            expression.len()
        );
    }
    if expression.len() > CEL_SELECTOR_EXPRESSION_MAX_LENGTH {
        assert_eq!(errors.len(), 1, "an over-long expression was accepted");
        return;
    }
    let memoized = compile(expression);
    let fresh = compile_program(expression).map(drop);
    assert_eq!(memoized, fresh, "the memo disagrees with a fresh compile");
    match (&memoized, errors.first()) {
        (Ok(()), None) => {}
        (Err(CompileError::Invalid(detail)), Some(e)) => {
            assert!(e.to_string().contains(detail.as_str()), "{e} does not carry {detail}");
        }
        (compiled, error) => panic!("compile says {compiled:?}, validate_expression says {error:?}"),
    }
});
