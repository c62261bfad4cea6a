//! Workload warnings as kubectl prints them (docs/src/policies/warnings.md): a Deployment, a StatefulSet and a ReplicaSet whose pod
//! template the shipped policies deny now (it tolerates `dedicated=ml`
//! outside the ML namespaces: dedicated-ml-nodes-are-ml-only) are written
//! as an operator would. Every write that can stamp a Pod (a scale-up by
//! `kubectl scale` or by a patch of `spec.replicas`, a rollout, a
//! `kubectl apply` of a changed manifest, a label) is admitted with
//! draguard's warning on kubectl's stderr, at one call; no scale-down
//! warns, however it is made (`kubectl scale`, a patch, `kubectl apply` of
//! fewer replicas), and a scale-down costs no call at all (the workloads
//! entry's matchCondition, the scale entry's `a-scale-up`).
//!
//! The workloads are created while serve is down (the workloads entry
//! fails open), as a policy tightened after they were applied would leave
//! them. `kubectl scale`'s warning needs serve to GET the workload with
//! the Deployment's ServiceAccount token (ClusterRole draguard-workloads).

use crate::Outcome;
use crate::admission_calls::Scrape;
use crate::cluster::Cluster;
use crate::draguard::ServeOptions;

const NAMESPACE: &str = "e2e-warnings";
/// The policy that denies the templates, named in the warning.
const POLICY: &str = "dedicated-ml-nodes-are-ml-only";

#[derive(Clone, Copy)]
enum Workload {
    Deployment,
    StatefulSet,
    ReplicaSet,
}

impl Workload {
    fn kind(self) -> &'static str {
        match self {
            Workload::Deployment => "Deployment",
            Workload::StatefulSet => "StatefulSet",
            Workload::ReplicaSet => "ReplicaSet",
        }
    }

    fn resource(self) -> &'static str {
        match self {
            Workload::Deployment => "deployment",
            Workload::StatefulSet => "statefulset",
            Workload::ReplicaSet => "replicaset",
        }
    }

    fn name(self) -> String {
        format!("warn-{}", self.resource())
    }

    /// The manifest an operator applies: `replicas`, and `min_ready`
    /// (minReadySeconds 5) for "a changed manifest".
    fn manifest(self, replicas: u32, min_ready: bool) -> String {
        let name = self.name();
        let service = match self {
            Workload::StatefulSet => format!("  serviceName: {name}\n"),
            _ => String::new(),
        };
        let min_ready = if min_ready { "  minReadySeconds: 5\n" } else { "" };
        format!(
            "apiVersion: apps/v1\nkind: {}\nmetadata: {{name: {name}, namespace: {NAMESPACE}}}\nspec:\n  replicas: {replicas}\n\
             {min_ready}{service}  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n\
             \x20   spec:\n      tolerations: [{{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}}]\n\
             \x20     containers: [{{name: c, image: registry.k8s.io/pause:3.10}}]\n",
            self.kind()
        )
    }
}

/// One write and what it should get.
struct Step {
    what: &'static str,
    args: Vec<String>,
    stdin: Option<String>,
    warns: bool,
}

fn steps(w: Workload) -> Vec<Step> {
    let target = format!("{}/{}", w.resource(), w.name());
    let args = |a: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = a.iter().map(|s| (*s).to_owned()).collect();
        all.extend(["-n".to_owned(), NAMESPACE.to_owned()]);
        all
    };
    let replicas = |n: u32| format!("{{\"spec\":{{\"replicas\":{n}}}}}");
    let step = |what, args, stdin, warns| Step {
        what,
        args,
        stdin,
        warns,
    };
    let apply = ["apply", "-f", "-"];
    let mut all = vec![
        step(
            "scale-up, kubectl scale 1 -> 2",
            args(&["scale", &target, "--replicas=2"]),
            None,
            true,
        ),
        step(
            "scale-up, kubectl patch spec.replicas 2 -> 3",
            args(&["patch", &target, "--type=merge", "-p", &replicas(3)]),
            None,
            true,
        ),
        step(
            "rollout, a template annotation (patch)",
            args(&[
                "patch",
                &target,
                "--type=merge",
                "-p",
                "{\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"e2e.draguard.dev/rollout\":\"1\"}}}}}",
            ]),
            None,
            true,
        ),
    ];
    if !matches!(w, Workload::ReplicaSet) {
        all.push(step(
            "rollout, kubectl rollout restart",
            args(&["rollout", "restart", &target]),
            None,
            true,
        ));
    }
    all.extend([
        step(
            "kubectl apply, a changed manifest (minReadySeconds)",
            args(&apply),
            Some(w.manifest(3, true)),
            true,
        ),
        step("kubectl label", args(&["label", &target, "e2e=warned"]), None, true),
        step(
            "scale-down, kubectl scale 3 -> 2",
            args(&["scale", &target, "--replicas=2"]),
            None,
            false,
        ),
        step(
            "scale-down, kubectl patch spec.replicas 2 -> 1",
            args(&["patch", &target, "--type=merge", "-p", &replicas(1)]),
            None,
            false,
        ),
        step(
            "scale-down, kubectl apply of fewer replicas 1 -> 0",
            args(&apply),
            Some(w.manifest(0, true)),
            false,
        ),
    ]);
    all
}

pub fn workloads(cluster: &mut Cluster) -> Outcome {
    cluster.ensure_base_serving();
    let admin = cluster.admin.clone();
    let operator = cluster.operator();
    if !admin.exists(&["namespace", NAMESPACE]) {
        admin.ok(&["create", "namespace", NAMESPACE]);
    }
    let workloads = [Workload::Deployment, Workload::StatefulSet, Workload::ReplicaSet];

    // Applied while serve is down: admitted, as before a policy change.
    cluster.stop_serve();
    for w in workloads {
        operator.ok_with(&["apply", "-f", "-"], Some(&w.manifest(1, false)));
    }
    let serve = cluster.start_serve(&ServeOptions::default());
    // The denial the warnings should carry, as a create gets it now.
    let denied = operator.run(
        &["create", "--dry-run=server", "-f", "-"],
        Some(
            &Workload::Deployment
                .manifest(1, false)
                .replace("warn-deployment", "warn-denied"),
        ),
    );
    assert!(
        !denied.success && denied.stderr.contains(POLICY),
        "the template is not denied by {POLICY} as this scenario expects:\n{}",
        denied.stderr
    );

    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for w in workloads {
        for step in steps(w) {
            let args: Vec<&str> = step.args.iter().map(String::as_str).collect();
            let before = Scrape::of(serve);
            let run = operator.run(&args, step.stdin.as_deref());
            let after = Scrape::of(serve);
            // A Scale is no kind draguard judges: its reviews are counted
            // as `other` (docs/src/reference/metrics.md).
            let calls = after.since(&before, &[w.kind(), "other"]);
            let warnings: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with("Warning:")).collect();
            let expected_warning = format!("Warning: new pods of this {} would be denied", w.kind());
            let warned = warnings
                .iter()
                .any(|l| l.starts_with(&expected_warning) && l.contains(POLICY));
            let expected_calls = u64::from(step.warns);
            let ok = run.success
                && warned == step.warns
                && warnings.len() == usize::from(step.warns)
                && calls.total() == expected_calls;
            rows.push(format!(
                "    {:<12} {:<52} {:<7} {:<5} {}{}",
                w.kind(),
                step.what,
                if run.success { "ok" } else { "FAILED" },
                if warned { "warns" } else { "-" },
                calls,
                if ok { "" } else { "  <-- FAILED" }
            ));
            if !ok {
                failures.push(format!(
                    "{} {}: exit {}, warned {warned} (expected {}), {calls} calls (expected {expected_calls}; counted since: {}):\n{}{}",
                    w.kind(),
                    step.what,
                    if run.success { "ok" } else { "failed" },
                    step.warns,
                    after.since_all(&before),
                    run.stdout,
                    run.stderr
                ));
            }
        }
    }
    let fetched = fetches(&cluster.serve.as_ref().expect("serving").metrics());
    println!(
        "    workload writes as {} ({NAMESPACE}), template denied by {POLICY}:",
        crate::cluster::OPERATOR
    );
    for row in &rows {
        println!("{row}");
    }
    println!("    draguard_scale_workload_fetches_total: {fetched}");
    // kubectl scale up, once per workload: three GETs with serve's token.
    if !fetched.contains("fetched=3") {
        failures.push(format!("scale-ups' workload GETs: {fetched}, expected fetched=3"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Outcome::Passed
}

/// `draguard_scale_workload_fetches_total` by result, as `result=N ...`.
fn fetches(metrics: &str) -> String {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("draguard_scale_workload_fetches_total{result=\""))
        .filter_map(|l| l.split_once("\"} "))
        .map(|(result, n)| format!("{result}={}", n.trim()))
        .collect::<Vec<_>>()
        .join(" ")
}
