//! The policy loader on any text: `draguard::policy::load::parse_file`,
//! what `load_dir` runs on each file of `--policies`. Policies that load
//! are then used: they judge a few fixed requests (a Pod, a claim, a claim
//! template, in a selected namespace) in every phase, so a policy the
//! loader accepts can never make an answer break its invariants (a default
//! toleration that yields a patch that does not apply, say).
//!
//! Invariants: a rejected file has at least one error, each pointing
//! inside the text; every loaded policy passes the lint again and survives
//! a round trip through JSON unchanged; errors stay within the output
//! bound; the reviews under the loaded policies hold the review invariants.
#![no_main]

use draguard::policy::load::{lint, parse_file};
use draguard::policy::{PolicySet, TolerationPolicy};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = draguard_fuzz::yaml_lines(text);
    let parsed = match parse_file("fuzz.yaml", text) {
        Ok(parsed) => parsed,
        Err(errors) => {
            assert!(!errors.is_empty(), "a file refused without an error");
            let mut size = 0;
            for e in &errors {
                assert!(
                    e.position.line <= lines,
                    "an error at line {} of {lines}: {e}",
                    e.position.line
                );
                size += e.to_string().len();
            }
            draguard_fuzz::assert_bounded("the load errors", size, text.len());
            return;
        }
    };
    for loaded in &parsed.policies {
        let policy = &loaded.policy;
        assert_eq!(lint(policy), Vec::new(), "a loaded policy fails the lint");
        let Ok(value) = serde_json::to_value(policy) else {
            panic!("a loaded policy does not serialize: {policy:?}");
        };
        match draguard::objects::decode::<TolerationPolicy>(&value) {
            Ok(again) => assert_eq!(&again, policy, "a policy changes through JSON: {value}"),
            Err(e) => panic!("a loaded policy does not load again from its own JSON: {e:?}\n{value}"),
        }
    }
    if parsed.policies.is_empty() {
        return;
    }
    let set = PolicySet {
        policies: parsed.policies,
        ..PolicySet::default()
    };
    for body in requests() {
        draguard_fuzz::answer_all_phases(body, &set);
    }
});

/// A Pod, a claim and a claim template in namespace `ml`, each with a
/// toleration, made once.
fn requests() -> &'static [Vec<u8>] {
    static REQUESTS: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    REQUESTS.get_or_init(|| {
        let toleration = json!({"key": "example.com/gpu", "operator": "Exists", "effect": "NoSchedule"});
        let claim_spec = json!({"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com", "tolerations": [toleration]}}]}});
        let objects = [
            (("", "v1", "Pod", "pods"), json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ml"},
                "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": [toleration]}})),
            (("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims"), json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "c", "namespace": "ml"}, "spec": claim_spec})),
            (("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates"), json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t", "namespace": "ml"}, "spec": {"spec": claim_spec}})),
        ];
        objects
            .into_iter()
            .map(|((group, version, kind, plural), object)| {
                serde_json::to_vec(&json!({
                    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "request": {
                        "uid": "fuzz-policy", "operation": "CREATE", "namespace": "ml", "name": object["metadata"]["name"],
                        "kind": {"group": group, "version": version, "kind": kind},
                        "resource": {"group": group, "version": version, "resource": plural},
                        "userInfo": {"username": "alice"}, "object": object,
                    }
                }))
                .unwrap_or_default()
            })
            .collect()
    })
}
