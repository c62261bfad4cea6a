//! `compiled::in_cluster` (issue 40): `serve --manage-admission-policies`
//! applies the compiled policies of the shipped ones, and once the
//! apiserver enforces them, the validating entries stop sending what they
//! judge. Then, as the apiserver routes:
//! - a claim whose device toleration a shipped policy denies is denied by
//!   the compiled policy, with draguard's words, at no webhook call;
//! - one whose toleration they admit costs no call either;
//! - with draguard killed, the compiled policies still deny what they
//!   deny, a plain claim is admitted, and only what stays in the webhook
//!   (a claim with an opaque driver config) fails, closed, as its entry's
//!   failurePolicy says;
//! - a policy removed from serve's folder takes its compiled objects with
//!   it;
//! - with only Enforce device policies in force (no sharing rules, no
//!   quota), the claims entry's namespaceSelector leaves out the namespaces
//!   they cover: a claim there, with a driver config or a denied
//!   toleration, reaches no entry of draguard's and is judged by the
//!   compiled policy alone, draguard up or down, while a namespace the
//!   policies exclude is still sent.

use std::time::{Duration, Instant};

use crate::Outcome;
use crate::admission_calls::Scrape;
use crate::cluster::{Cluster, ROOT};
use crate::draguard::{ServeOptions, wait_for_validate_condition};
use crate::kubectl::Kubectl;

const TENANT: &str = "e2e-compiled";
/// What the compiled gpu-device-taints says (its `message`).
const DENIED_WORDS: &str = "degraded GPUs are never scheduled to";
/// The compiled objects of the shipped gpu-device-taints.
const DEVICE_POLICY: &str = "draguard-gpu-device-taints-devices";

fn claim(name: &str, request_extra: &str, devices_extra: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {name}, namespace: {TENANT}}}\n\
         spec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {{deviceClassName: gpu.example.com{request_extra}}}\n{devices_extra}"
    )
}

const DEGRADED: &str = ", tolerations: [{key: gpu.example.com/degraded, operator: Exists}]";
const ADMITTED: &str = ", tolerations: [{key: e2e.draguard.dev/compiled, operator: Exists}]";
const CONFIG: &str = "    config:\n    - requests: [gpu]\n      opaque: {driver: gpu.example.com, parameters: {apiVersion: v1, kind: Config}}\n";

/// A server-side dry run: whether it was admitted, what it said, and how
/// long the apiserver took.
fn dry_run(kubectl: &Kubectl, yaml: &str) -> (bool, String, Duration) {
    let start = Instant::now();
    let run = kubectl.run(&["create", "--dry-run=server", "-f", "-"], Some(yaml));
    (run.success, format!("{}{}", run.stdout, run.stderr), start.elapsed())
}

pub fn in_cluster(cluster: &mut Cluster) -> Outcome {
    cluster.ensure_base_serving();
    let admin = cluster.admin.clone();
    let operator = cluster.operator();
    admin.ok(&[
        "apply",
        "-n",
        "draguard",
        "-f",
        &format!("{ROOT}/deploy/components/admission-policies/rbac.yaml"),
    ]);
    if !admin.exists(&["namespace", TENANT]) {
        admin.ok(&["create", "namespace", TENANT]);
    }
    let serve = cluster.start_serve(&ServeOptions {
        policies: None,
        extra_args: vec!["--manage-admission-policies".to_owned()],
    });
    let _ = serve;
    wait_for_validate_condition(&admin);
    let mut failures = Vec::new();
    let mut rows = Vec::new();

    // Applied, then enforced: the denial comes from the compiled policy
    // (which the apiserver runs before any validating webhook, so a denied
    // write says nothing of the routing), and a claim whose toleration the
    // policies admit no longer reaches draguard: the routing has narrowed.
    let start = Instant::now();
    let settled = loop {
        let (admitted, said, _) = dry_run(&operator, &claim("degraded", DEGRADED, ""));
        let before = Scrape::of(cluster.serve.as_ref().expect("serving"));
        let (passed, _, _) = dry_run(&operator, &claim("admitted", ADMITTED, ""));
        let calls = Scrape::of(cluster.serve.as_ref().expect("serving")).since(&before, &["ResourceClaim"]);
        if !admitted && said.contains("ValidatingAdmissionPolicy") && passed && calls.total() == 0 {
            break start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the compiled policies not enforced alone after 60 s: denied claim admitted {admitted} ({said}), admitted claim {calls}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    rows.push(format!(
        "compiled policies applied and the webhook's routing narrowed in {:.1} s",
        settled.as_secs_f64()
    ));
    let stored = admin.get_json(&["validatingadmissionpolicy", DEVICE_POLICY]);
    if stored["metadata"]["labels"]["app.kubernetes.io/managed-by"] != "draguard" {
        failures.push(format!(
            "{DEVICE_POLICY} is not labelled as draguard's: {}",
            stored["metadata"]
        ));
    }

    let serve = cluster.serve.as_ref().expect("serving");
    for (what, yaml, admit, words, calls_wanted) in [
        (
            "claim with a denied toleration",
            claim("degraded", DEGRADED, ""),
            false,
            Some(DENIED_WORDS),
            0,
        ),
        (
            "claim with an admitted toleration",
            claim("admitted", ADMITTED, ""),
            true,
            None,
            0,
        ),
        ("plain claim", claim("plain", "", ""), true, None, 0),
        (
            "claim with an opaque config",
            claim("config", "", CONFIG),
            true,
            None,
            1,
        ),
    ] {
        let before = Scrape::of(serve);
        let (admitted, said, took) = dry_run(&operator, &yaml);
        let calls = Scrape::of(serve).since(&before, &["ResourceClaim"]);
        rows.push(format!(
            "  up:   {what:<36} {:<9} {calls}, {} ms",
            if admitted { "admitted" } else { "denied" },
            took.as_millis()
        ));
        if admitted != admit || words.is_some_and(|w| !said.contains(w)) || calls.total() != calls_wanted {
            failures.push(format!(
                "draguard up, {what}: admitted {admitted} (want {admit}), {calls} (want {calls_wanted}): {said}"
            ));
        }
    }

    // draguard killed: what is compiled still holds.
    cluster.serve.as_mut().expect("serving").process.kill();
    for (what, yaml, admit, words) in [
        (
            "claim with a denied toleration",
            claim("degraded", DEGRADED, ""),
            false,
            Some(DENIED_WORDS),
        ),
        (
            "claim with an admitted toleration",
            claim("admitted", ADMITTED, ""),
            true,
            None,
        ),
        ("plain claim", claim("plain", "", ""), true, None),
        (
            "claim with an opaque config",
            claim("config", "", CONFIG),
            false,
            Some("failed calling webhook \"claims.validate.draguard.dev\""),
        ),
    ] {
        let (admitted, said, took) = dry_run(&operator, &yaml);
        rows.push(format!(
            "  down: {what:<36} {:<9} {} ms",
            if admitted { "admitted" } else { "denied" },
            took.as_millis()
        ));
        if admitted != admit || words.is_some_and(|w| !said.contains(w)) {
            failures.push(format!(
                "draguard killed, {what}: admitted {admitted} (want {admit}): {said}"
            ));
        }
    }

    // A policy gone from serve's folder takes its objects with it.
    let folder = cluster.scratch("in-cluster-policies");
    // A folder of its own: only the three files below.
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).expect("policies folder");
    for file in ["dedicated-nodes.yaml", "gpu-sharing.yaml", "maintenance.yaml"] {
        std::fs::copy(format!("{ROOT}/policies/{file}"), folder.join(file)).expect("copy a policy");
    }
    cluster.start_serve(&ServeOptions {
        policies: Some(folder),
        extra_args: vec!["--manage-admission-policies".to_owned()],
    });
    let start = Instant::now();
    while admin.exists(&["validatingadmissionpolicy", DEVICE_POLICY]) {
        if start.elapsed() > Duration::from_secs(30) {
            failures.push(format!("{DEVICE_POLICY} still there 30 s after its policy went"));
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    if !admin.exists(&["validatingadmissionpolicy", "draguard-dedicated-ml-nodes-pods"]) {
        failures.push("draguard-dedicated-ml-nodes-pods went with the other policy".to_owned());
    }

    claims_left_out(cluster, &mut rows, &mut failures);

    // The next scenarios run without compiled policies.
    cluster.stop_serve();
    for kind in [
        "validatingadmissionpolicybinding",
        "validatingadmissionpolicy",
        "mutatingadmissionpolicybinding",
        "mutatingadmissionpolicy",
    ] {
        admin.run(&["delete", kind, "-l", "app.kubernetes.io/managed-by=draguard"], None);
    }
    println!("    compiled policies in the cluster:");
    for row in &rows {
        println!("    {row}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Outcome::Passed
}

/// A namespace the device policy of [`claims_left_out`] excludes.
const SENT: &str = "e2e-compiled-sent";
/// Only Enforce device rules: the shipped gpu-device-taints, excluding
/// [`SENT`] as well.
const DEVICES_ONLY: &str = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\n\
    metadata: {name: gpu-device-taints}\nspec:\n  namespaces:\n    exclude: [kube-system, e2e-compiled-sent]\n\
    \x20 devices:\n    deny:\n    - {key: gpu.example.com/degraded, operator: Exists}\n\
    \x20 message: degraded GPUs are never scheduled to\n";
/// A config the example driver's schema refuses (an unknown kind).
const BAD_CONFIG: &str = "    config:\n    - requests: [gpu]\n      opaque: {driver: gpu.example.com, parameters: {apiVersion: gpu.resource.example.com/v1alpha1, kind: Nope}}\n";

fn claim_in(namespace: &str, name: &str, request_extra: &str, devices_extra: &str) -> String {
    claim(name, request_extra, devices_extra)
        .replace(&format!("namespace: {TENANT}"), &format!("namespace: {namespace}"))
}

fn claims_left_out(cluster: &mut Cluster, rows: &mut Vec<String>, failures: &mut Vec<String>) {
    let admin = cluster.admin.clone();
    let operator = cluster.operator();
    if !admin.exists(&["namespace", SENT]) {
        admin.ok(&["create", "namespace", SENT]);
    }
    let folder = cluster.scratch("devices-only-policies");
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).expect("policies folder");
    std::fs::write(folder.join("devices.yaml"), DEVICES_ONLY).expect("write the policy");
    cluster.start_serve(&ServeOptions {
        policies: Some(folder),
        extra_args: vec!["--manage-admission-policies".to_owned()],
    });
    // Everything but the exclusions is covered: only they are sent (and
    // kube-system is the validating entry's exemption already).
    let wanted =
        serde_json::json!({"key": "kubernetes.io/metadata.name", "operator": "In", "values": [SENT, "kube-system"]});
    let start = Instant::now();
    match crate::draguard::wait_for_claims_selector(&admin, &wanted) {
        Ok(selector) => rows.push(format!(
            "claims entry's namespaceSelector narrowed in {:.1} s: {selector}",
            start.elapsed().as_secs_f64()
        )),
        Err(selector) => {
            failures.push(format!(
                "the claims entry's namespaceSelector not narrowed after 60 s: {selector}"
            ));
            return;
        }
    }
    let serve = cluster.serve.as_ref().expect("serving");
    let cases = [
        (
            "covered: denied toleration",
            claim("degraded", DEGRADED, ""),
            false,
            Some(DENIED_WORDS),
            0,
        ),
        ("covered: good config", claim("config", "", CONFIG), true, None, 0),
        (
            "covered: bad config",
            claim("bad-config", "", BAD_CONFIG),
            false,
            Some("ValidatingAdmissionPolicy"),
            0,
        ),
        (
            "excluded: good config",
            claim_in(SENT, "config", "", CONFIG),
            true,
            None,
            1,
        ),
    ];
    for (what, yaml, admit, words, calls_wanted) in &cases {
        let before = Scrape::of(serve);
        let (admitted, said, _) = dry_run(&operator, yaml);
        let calls = Scrape::of(serve).since(&before, &["ResourceClaim"]);
        rows.push(format!(
            "  up:   {what:<36} {:<9} {calls}",
            if admitted { "admitted" } else { "denied" }
        ));
        if admitted != *admit || words.is_some_and(|w| !said.contains(w)) || calls.total() != *calls_wanted {
            failures.push(format!(
                "devices only, draguard up, {what}: admitted {admitted} (want {admit}), {calls} (want {calls_wanted}): {said}"
            ));
        }
    }
    // draguard killed: a covered namespace never notices; the excluded one
    // fails closed, as its entry says.
    cluster.serve.as_mut().expect("serving").process.kill();
    for (what, yaml, admit, words, _) in &cases {
        let (admit, words) = if what.starts_with("excluded") {
            (false, Some("failed calling webhook \"claims.validate.draguard.dev\""))
        } else {
            (*admit, *words)
        };
        let (admitted, said, _) = dry_run(&operator, yaml);
        rows.push(format!(
            "  down: {what:<36} {}",
            if admitted { "admitted" } else { "denied" }
        ));
        if admitted != admit || words.is_some_and(|w| !said.contains(w)) {
            failures.push(format!(
                "devices only, draguard killed, {what}: admitted {admitted} (want {admit}): {said}"
            ));
        }
    }
}
