//! The review core on raw bytes: any body `POST /validate` or `/mutate`
//! may receive, answered in every phase by the functions the server uses,
//! with the example policies and no cluster. Invariants: see
//! `draguard_fuzz::answer_all_phases` (the answer serializes, echoes the
//! uid, admits or denies with a Status that agrees, carries a patch only on
//! `/mutate` and one that applies, and stays within the output bound).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    draguard_fuzz::answer_all_phases(body, draguard_fuzz::example_policies());
});
