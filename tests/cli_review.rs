//! `draguard review`: the server's answer from the command line.

mod support {
    pub mod cli;
}

use std::process::Output;

use serde_json::Value;

use support::cli::draguard;

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

#[test]
fn denied_review_prints_the_causes_and_exits_1() {
    let out = draguard(&["review", "examples/review-claim-denied.json"], None);
    assert_eq!(out.status.code(), Some(1));
    let review = stdout_json(&out);
    assert_eq!(review["kind"], "AdmissionReview");
    assert_eq!(review["response"]["uid"], "7f0a3b6e-2a51-4c57-9a83-0f1d6c1b2a01");
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(review["response"]["status"]["code"], 422);
    let causes = review["response"]["status"]["details"]["causes"]
        .as_array()
        .expect("causes");
    assert_eq!(causes.len(), 1);
    assert_eq!(
        causes[0]["field"],
        "spec.devices.requests[0].firstAvailable[0].tolerations[0].effect"
    );
    assert_eq!(causes[0]["reason"], "FieldValueNotSupported");
}

#[test]
fn allowed_review_from_stdin_exits_0() {
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/review-claim-allowed.json"
    ))
    .expect("example");
    for args in [&["review", "-"][..], &["review", "--mutate"][..]] {
        let out = draguard(args, Some(&body));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let review = stdout_json(&out);
        assert_eq!(review["response"]["allowed"], true);
        assert!(
            review["response"].get("patch").is_none(),
            "nothing to patch on this claim"
        );
    }
}

#[test]
fn unusable_input_exits_2_with_a_reason() {
    let out = draguard(&["review", "-"], Some(b"{\"kind\": \"Pod\"}"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not an AdmissionReview"), "{stderr}");
    let out = draguard(&["review", "does/not/exist.json"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read does/not/exist.json"));
}
