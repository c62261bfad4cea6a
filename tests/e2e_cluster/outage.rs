//! draguard down: killed (SIGKILL: its port refuses at once) and hung
//! (SIGSTOP: connections are accepted by the kernel and never answered,
//! so the apiserver waits each entry's timeoutSeconds). What the book and
//! deploy/base/webhooks.yaml promise keeps working does; what fails closed
//! is refused; and no write waits longer than the timeouts of the entries
//! it can reach, at most 3 s in all.
//!
//! Promised to keep working (docs/src/operating/outages.md, webhooks.yaml's header):
//! kube-system's writes, kubelets' (their Node, mirror Pods), controllers'
//! and users' finalizer removals (a Pod UPDATE that leaves what draguard
//! judges alone; the claim controller's claim updates), any write in a
//! namespace labelled draguard.dev/ignore, and system:masters creating
//! and labelling namespaces (docs/src/install/cluster.md, "Bootstrap order": the label a CNI's
//! namespace needs before draguard can run), and a tenant's claim or Pod
//! that draguard cannot judge beyond the apiserver's own rules (serve's
//! `draguard-can-change-outcome` condition does not send it). Fails
//! closed: a tenant's claim and Pod creates that a policy judges, and a
//! non-masters write of a guarded Namespace label.

use std::time::Duration;

use rustix::process::Signal;

use crate::Outcome;
use crate::cluster::Cluster;
use crate::kubectl::{Kubectl, Request};
use crate::pki::NODE;

/// The timeouts of the entries one write can reach add up to at most 3 s
/// (webhooks.yaml's header); the apiserver's own work on top of them is
/// allowed this much on a loaded 2-core machine.
const BUDGET: Duration = Duration::from_secs(3);
const SLACK: Duration = Duration::from_millis(500);

const TENANT: &str = "e2e-tenant";
const IGNORED: &str = "e2e-ignored";
/// A namespace the shipped policy dedicated-ml-nodes gives a default
/// toleration.
const DEFAULTED: &str = "ml";
const HOLD: &str = "e2e.draguard.dev/hold";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Down {
    Killed,
    Hung,
}

pub fn killed(cluster: &mut Cluster) -> Outcome {
    outage(cluster, Down::Killed)
}

pub fn hung(cluster: &mut Cluster) -> Outcome {
    outage(cluster, Down::Hung)
}

fn pod_yaml(namespace: &str, name: &str, extra_metadata: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {namespace}{extra_metadata}}}\n\
         spec:\n  containers: [{{name: c, image: registry.k8s.io/pause:3.10}}]\n{extra_spec}"
    )
}

/// Below the shortest entry timeout (1 s): a write that waited less was
/// not sent to draguard at all.
const NOT_SENT: Duration = Duration::from_millis(900);

/// One write made while draguard is down, and what it should get.
struct Write {
    what: String,
    admitted: bool,
    /// For a refused write: the entry named in the refusal.
    refused_by: Option<&'static str>,
    /// The longest any of its requests may take: [`NOT_SENT`] for a write
    /// no entry is sent, else the budget.
    limit: Duration,
}

struct Outcomes {
    rows: Vec<String>,
    failures: Vec<String>,
}

impl Outcomes {
    fn check(&mut self, kubectl: &Kubectl, write: Write, args: &[&str], stdin: Option<&str>) {
        let (run, requests) = kubectl.traced(args, stdin);
        let writes: Vec<&Request> = requests.iter().filter(|r| r.verb != "GET").collect();
        let slowest = writes.iter().map(|r| r.took).max().unwrap_or_default();
        let result = if run.success { "admitted" } else { "refused" };
        self.rows.push(format!(
            "    {:<62} {:<9} slowest write request {:>5} ms, kubectl {:>5} ms",
            write.what,
            result,
            slowest.as_millis(),
            run.wall.as_millis()
        ));
        if run.success != write.admitted {
            self.failures.push(format!(
                "{}: {result}, expected {}:\n{}{}",
                write.what,
                if write.admitted { "admitted" } else { "refused" },
                run.stdout,
                run.stderr
            ));
        }
        if let Some(entry) = write.refused_by
            && !run.success
            && !run.stderr.contains(&format!("failed calling webhook \"{entry}\""))
        {
            self.failures.push(format!(
                "{}: refused, but not by {entry} failing closed:\n{}",
                write.what, run.stderr
            ));
        }
        if writes.is_empty() {
            self.failures
                .push(format!("{}: kubectl made no write request: {requests:?}", write.what));
        }
        if slowest > write.limit {
            self.failures.push(format!(
                "{}: a write request waited {} ms (at most {} ms): {writes:?}",
                write.what,
                slowest.as_millis(),
                write.limit.as_millis()
            ));
        }
    }
}

fn outage(cluster: &mut Cluster, down: Down) -> Outcome {
    cluster.ensure_base_serving();
    let tag = match down {
        Down::Killed => "killed",
        Down::Hung => "hung",
    };
    let admin = cluster.admin.clone();
    let operator = cluster.operator();
    let kubelet = cluster.kubelet();
    let claim_controller = admin.impersonating("system:serviceaccount:kube-system:resource-claim-controller", &[]);

    // While draguard answers: the namespaces, and a Pod and a claim each
    // held by a finalizer, deleted (so that removing it lets them go).
    for namespace in [TENANT, IGNORED, DEFAULTED] {
        if !admin.exists(&["namespace", namespace]) {
            admin.ok(&["create", "namespace", namespace]);
        }
    }
    admin.ok(&["label", "namespace", IGNORED, "draguard.dev/ignore=true", "--overwrite"]);
    let bootstrap = format!("e2e-bootstrap-{tag}");
    admin.ok(&["create", "namespace", &bootstrap]);
    for namespace in ["kube-system", TENANT, IGNORED, DEFAULTED] {
        cluster.wait_for(&["serviceaccount", "default", "-n", namespace], Duration::from_secs(30));
    }
    let held = format!("held-{tag}");
    operator.ok_with(
        &["create", "-f", "-"],
        Some(&pod_yaml(TENANT, &held, &format!(", finalizers: [{HOLD}]"), "")),
    );
    let claim = crate::draguard::claim_yaml(TENANT, &held).replace(
        &format!("namespace: {TENANT}}}"),
        &format!("namespace: {TENANT}, finalizers: [{HOLD}]}}"),
    );
    operator.ok_with(&["create", "-f", "-"], Some(&claim));
    for kind in ["pod", "resourceclaim"] {
        operator.ok(&["delete", kind, &held, "-n", TENANT, "--wait=false"]);
    }

    // The routing serve keeps: a plain claim or Pod is not sent at all.
    crate::draguard::wait_for_validate_condition(&admin);
    let serve = cluster.serve.as_mut().expect("serving");
    match down {
        Down::Killed => serve.process.kill(),
        Down::Hung => serve.process.signal(Signal::STOP),
    }

    let mut out = Outcomes {
        rows: Vec::new(),
        failures: Vec::new(),
    };
    // Admitted, and never sent to draguard.
    let works = |what: &str| Write {
        what: what.to_owned(),
        admitted: true,
        refused_by: None,
        limit: NOT_SENT,
    };
    // Admitted, after an entry that fails open gave up.
    let fails_open = |what: &str| Write {
        limit: BUDGET + SLACK,
        ..works(what)
    };
    let refused = |what: &str, entry: &'static str| Write {
        what: what.to_owned(),
        admitted: false,
        refused_by: Some(entry),
        limit: BUDGET + SLACK,
    };
    let create = ["create", "-f", "-"];

    // kube-system, as a cluster-admin that is not system:masters.
    let system_pod = format!("e2e-{tag}");
    out.check(
        &operator,
        works("kube-system Pod create (operator)"),
        &create,
        Some(&pod_yaml("kube-system", &system_pod, "", "")),
    );
    out.check(
        &operator,
        works("kube-system Pod label (operator)"),
        &["label", "pod", &system_pod, "-n", "kube-system", "e2e=outage"],
        None,
    );
    // The kubelet: its Node (registered, then labelled and tainted) and a
    // mirror Pod in a tenant namespace.
    if !admin.exists(&["node", NODE]) {
        out.check(
            &kubelet,
            works("Node create (kubelet)"),
            &create,
            Some(&format!("apiVersion: v1\nkind: Node\nmetadata: {{name: {NODE}}}\n")),
        );
    }
    out.check(
        &kubelet,
        works("Node label and taint (kubelet)"),
        &[
            "patch",
            "node",
            NODE,
            "--type=merge",
            "-p",
            &format!(
                "{{\"metadata\":{{\"labels\":{{\"e2e-outage\":\"{tag}\"}}}},\
                 \"spec\":{{\"taints\":[{{\"key\":\"e2e-outage\",\"value\":\"{tag}\",\"effect\":\"NoSchedule\"}}]}}}}"
            ),
        ],
        None,
    );
    out.check(
        &kubelet,
        works("mirror Pod create in a tenant namespace (kubelet)"),
        &create,
        Some(&pod_yaml(
            TENANT,
            &format!("mirror-{tag}"),
            ", annotations: {kubernetes.io/config.mirror: e2e}",
            &format!("  nodeName: {NODE}\n"),
        )),
    );
    // Finalizer removals, which let the deleted objects go.
    let remove_finalizers = r#"[{"op":"remove","path":"/metadata/finalizers"}]"#;
    out.check(
        &operator,
        works("tenant Pod finalizer removal (operator)"),
        &[
            "patch",
            "pod",
            &held,
            "-n",
            TENANT,
            "--type=json",
            "-p",
            remove_finalizers,
        ],
        None,
    );
    out.check(
        &claim_controller,
        works("tenant claim finalizer removal (resource-claim-controller)"),
        &[
            "patch",
            "resourceclaim",
            &held,
            "-n",
            TENANT,
            "--type=json",
            "-p",
            remove_finalizers,
        ],
        None,
    );
    // A namespace labelled draguard.dev/ignore.
    out.check(
        &operator,
        works("Pod create in a draguard.dev/ignore namespace (operator)"),
        &create,
        Some(&pod_yaml(IGNORED, &format!("pod-{tag}"), "", "")),
    );
    out.check(
        &operator,
        works("claim create in a draguard.dev/ignore namespace (operator)"),
        &create,
        Some(&crate::draguard::claim_yaml(IGNORED, &format!("claim-{tag}"))),
    );
    // system:masters: namespaces, with draguard's ignore label.
    out.check(
        &admin,
        fails_open("labelled Namespace create (system:masters)"),
        &create,
        Some(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: e2e-masters-{tag}, labels: {{draguard.dev/ignore: \"true\"}}}}\n"
        )),
    );
    out.check(
        &admin,
        fails_open("Namespace label draguard.dev/ignore (system:masters)"),
        &["label", "namespace", &bootstrap, "draguard.dev/ignore=true"],
        None,
    );
    // A tenant's claim or Pod that draguard cannot judge beyond the
    // apiserver's own rules (no toleration of its own, no config) is not
    // sent: it never waits on draguard.
    out.check(
        &operator,
        works("tenant claim create, no tolerations or configs (operator)"),
        &create,
        Some(&crate::draguard::claim_yaml(TENANT, &format!("plain-{tag}"))),
    );
    out.check(
        &operator,
        works("tenant Pod create, no tolerations of its own (operator)"),
        &create,
        Some(&pod_yaml(TENANT, &format!("plain-{tag}"), "", "")),
    );
    // What fails closed: the writes a policy judges.
    let tolerating_claim = crate::draguard::claim_yaml(TENANT, &format!("refused-{tag}")).replace(
        "exactly: {deviceClassName: gpu.example.com}",
        "exactly: {deviceClassName: gpu.example.com, tolerations: [{key: gpu.example.com/degraded, operator: Exists}]}",
    );
    assert!(tolerating_claim.contains("tolerations"), "{tolerating_claim}");
    out.check(
        &operator,
        refused(
            "tenant claim create with a device toleration (operator)",
            "claims.validate.draguard.dev",
        ),
        &create,
        Some(&tolerating_claim),
    );
    out.check(
        &operator,
        refused(
            "tenant Pod create with a toleration (operator)",
            "validate.draguard.dev",
        ),
        &create,
        Some(&pod_yaml(
            TENANT,
            &format!("refused-{tag}"),
            "",
            "  tolerations: [{key: dedicated, operator: Equal, value: ml, effect: NoSchedule}]\n",
        )),
    );
    // A Pod in `ml`, whose policies add a default toleration: sent to the
    // defaulting entry (1 s, fails open), which leaves the default out;
    // what is left holds nothing draguard judges beyond the apiserver, so
    // it is not sent to the enforcing entry. A Pod without its default
    // only tolerates less: admitted.
    out.check(
        &operator,
        fails_open("tenant Pod create in ml (its default left out)"),
        &create,
        Some(&pod_yaml(DEFAULTED, &format!("plain-{tag}"), "", "")),
    );
    // The longest wait one write can meet: the defaulting entry (1 s),
    // then the enforcing one (2 s), for a Pod in `ml` with a toleration of
    // its own.
    out.check(
        &operator,
        refused(
            "tenant Pod create in ml with a toleration (defaulted, then judged)",
            "validate.draguard.dev",
        ),
        &create,
        Some(&pod_yaml(
            DEFAULTED,
            &format!("refused-{tag}"),
            "",
            "  tolerations: [{key: maintenance.example.com/drain, operator: Exists}]\n",
        )),
    );
    out.check(
        &operator,
        refused(
            "tenant Namespace label draguard.dev/ignore (operator)",
            "namespaces.validate.draguard.dev",
        ),
        &["label", "namespace", TENANT, "draguard.dev/ignore=true"],
        None,
    );

    // serve goes: the next scenario starts a fresh one.
    cluster.stop_serve();
    for kind in ["pod", "resourceclaim"] {
        if admin.exists(&[kind, &held, "-n", TENANT]) {
            out.failures
                .push(format!("{kind} {held} still there after its finalizer was removed"));
        }
    }
    println!("    draguard {tag}:");
    for row in &out.rows {
        println!("{row}");
    }
    assert!(out.failures.is_empty(), "{}", out.failures.join("\n"));
    Outcome::Passed
}
