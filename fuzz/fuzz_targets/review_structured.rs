//! The review core on AdmissionReviews that stay AdmissionReviews: seeded
//! with `tests/conformance` (each case's `review`) and the reviews a real
//! apiserver sent (`tests/fixtures/apiserver`), and mutated as JSON trees
//! (`draguard_fuzz::json_mutator`), so every input reaches a kind's rules,
//! the policies and the patches.
//!
//! On top of the raw target's invariants, the three phases must agree:
//! - `check`/`review --mutate` (mutate, then validate) gives the verdict
//!   `/validate` gives on the object `/mutate`'s patch makes;
//! - `/mutate` is idempotent: on its own result it has nothing to add
//!   (the apiserver reinvokes webhooks, `reinvocationPolicy: IfNeeded`).
#![no_main]

use draguard_fuzz::{
    Answers, answer_all_phases, answer_all_phases_under, apply, example_policies, unwrap_case, with_object,
};
use libfuzzer_sys::{fuzz_crossover, fuzz_mutator, fuzz_target, fuzzer_mutate};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Ok(body) = serde_json::to_vec(&unwrap_case(value)) else {
        return;
    };
    let policies = example_policies();
    let Some(answers) = answer_all_phases(&body, policies) else {
        return;
    };
    phases_agree(&answers);
});

fn phases_agree(answers: &Answers) {
    let mutate = &answers.mutate.decision;
    // A /mutate that could not compute its patch admits without one, where
    // mutate-then-validate says why: they differ on purpose.
    if !answers.decoded || mutate.internal_error.is_some() {
        return;
    }
    let both = &answers.both.decision;
    if mutate.patch.is_empty() {
        assert_eq!(
            both.denial, answers.validate.decision.denial,
            "no patch, yet mutate-then-validate and /validate differ"
        );
        return;
    }
    let object = &answers.body["request"]["object"];
    let patched = match apply(object, &mutate.patch) {
        Ok(patched) => patched,
        Err(e) => panic!("/mutate's patch does not apply: {e}"),
    };
    let patched = with_object(&answers.body, patched);
    let Some(after) = answer_all_phases_under(&patched, example_policies(), answers.version) else {
        panic!("the patched review is no AdmissionReview");
    };
    assert!(
        after.mutate.decision.patch.is_empty(),
        "/mutate is not idempotent: on its own result it patches again: {:?}\nfirst patch: {:?}",
        after.mutate.decision.patch,
        mutate.patch
    );
    let validated = &after.validate.decision;
    assert_eq!(
        both.denial, validated.denial,
        "mutate-then-validate and /validate on the patched object differ"
    );
}

fuzz_mutator!(|data: &mut [u8], size: usize, max_size: usize, seed: u32| {
    draguard_fuzz::json_mutator::mutate_bytes(data, size, max_size, seed, fuzzer_mutate)
});

fuzz_crossover!(|a: &[u8], b: &[u8], out: &mut [u8], seed: u32| {
    draguard_fuzz::json_mutator::crossover(a, b, out, seed)
});
