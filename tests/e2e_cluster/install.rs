//! Installing and uninstalling draguard as README documents it:
//! `helm install` (the command README's Deploy section gives, run as
//! written) and `helm uninstall`, then `kubectl apply -k deploy/base`; the
//! webhook entries each stores, once serve has managed them, are the same.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Outcome;
use crate::cluster::{Cluster, Install, NAMESPACE, ROOT};
use crate::draguard::{self, CONFIGURATIONS, NAME, ServeOptions};

/// What may remain in the release namespace after `helm uninstall`: the
/// namespace itself (made by `--create-namespace`, which Helm never
/// deletes), and objects no chart made: those the controllers put in every
/// namespace, and what serve writes at run time (its certificate Secret,
/// the Leases of its singleton duties, Events).
const LEFT_BY_DESIGN: &[&str] = &[
    "serviceaccount/default",
    "configmap/kube-root-ca.crt",
    "secret/draguard-tls",
    "lease.coordination.k8s.io/",
    "event/",
    "event.events.k8s.io/",
];

/// The first line of a README shell block that starts with `prefix`,
/// without its comment, as words.
fn readme_command(prefix: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).expect("README.md");
    let mut in_shell = false;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_shell = line == "```sh";
            continue;
        }
        let command = line.split(" #").next().unwrap_or_default().trim();
        if in_shell && command.starts_with(prefix) {
            return command.split_whitespace().map(str::to_owned).collect();
        }
    }
    panic!("README.md documents no `{prefix}` in a sh block");
}

/// README's Helm install: the `helm install draguard charts/draguard ...`
/// line of a shell block.
fn readme_helm_install() -> Vec<String> {
    readme_command("helm install draguard charts/draguard")
}

pub fn helm(cluster: &mut Cluster) -> Outcome {
    if cluster.tools.helm.is_none() {
        return Outcome::Skipped(
            "helm is not on PATH (PATH=\"$(bash scripts/ensure-renderers.sh):$PATH\" finds one)".to_owned(),
        );
    }
    assert_eq!(
        cluster.install, None,
        "install::helm needs a cluster without draguard (it runs first)"
    );
    let command = readme_helm_install();
    assert_eq!(command[0], "helm");
    let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
    let install = cluster.helm(&args).expect("helm");
    assert!(
        install.success,
        "README's `{}` failed:\n{}{}",
        command.join(" "),
        install.stdout,
        install.stderr
    );
    cluster.install = Some(Install::Helm);
    let manifest = cluster
        .helm(&["get", "manifest", "draguard", "-n", NAMESPACE])
        .expect("helm");
    assert!(manifest.success, "{}", manifest.stderr);

    draguard::expose_on_localhost(&cluster.admin, NAMESPACE, cluster.draguard_port);
    cluster.start_serve(&ServeOptions::default());
    cluster.helm_entries = Some(settled_entries(cluster));
    // The pods would go with the release.
    cluster.stop_serve();

    let uninstall = cluster.helm(&["uninstall", "draguard", "-n", NAMESPACE]).expect("helm");
    assert!(
        uninstall.success,
        "helm uninstall draguard -n {NAMESPACE} failed:\n{}{}",
        uninstall.stdout, uninstall.stderr
    );
    cluster.install = None;

    // Every object of the release is gone (a CRD's finalizer takes a moment).
    let start = Instant::now();
    loop {
        let left = cluster.admin.ok_with(
            &["get", "-f", "-", "--ignore-not-found", "-o", "name"],
            Some(&manifest.stdout),
        );
        if left.trim().is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "left by helm uninstall:\n{left}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Nothing of draguard anywhere: no object of any kind carries its label.
    let kinds = cluster.admin.ok(&["api-resources", "--verbs=list", "-o", "name"]);
    let kinds = kinds.split_whitespace().collect::<Vec<_>>().join(",");
    let labelled = cluster.admin.ok(&[
        "get",
        &kinds,
        "-A",
        "-l",
        "app.kubernetes.io/part-of=draguard",
        "-o",
        "name",
        "--ignore-not-found",
    ]);
    assert!(
        labelled.trim().is_empty(),
        "labelled part-of=draguard after uninstall:\n{labelled}"
    );
    for kind in CONFIGURATIONS {
        assert!(!cluster.admin.exists(&[kind, NAME]), "{kind} {NAME} after uninstall");
    }
    // The namespace stays: --create-namespace makes it outside the release.
    assert!(
        cluster.admin.exists(&["namespace", NAMESPACE]),
        "namespace {NAMESPACE} is not the release's: helm uninstall leaves it"
    );
    // What remains in it was made by no chart.
    let namespaced = cluster
        .admin
        .ok(&["api-resources", "--verbs=list", "--namespaced=true", "-o", "name"]);
    let namespaced = namespaced.split_whitespace().collect::<Vec<_>>().join(",");
    let remaining = cluster
        .admin
        .ok(&["get", &namespaced, "-n", NAMESPACE, "-o", "name", "--ignore-not-found"]);
    let unexpected: Vec<&str> = remaining
        .lines()
        .filter(|o| !LEFT_BY_DESIGN.iter().any(|allowed| o.starts_with(allowed)))
        .collect();
    assert!(
        unexpected.is_empty(),
        "left in namespace {NAMESPACE} after uninstall: {unexpected:?}"
    );
    println!(
        "    helm uninstall left: namespace/{NAMESPACE} (made by --create-namespace), and in it {}",
        remaining.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    Outcome::Passed
}

pub fn kustomize(cluster: &mut Cluster) -> Outcome {
    // What README tells a reader to run is what install_base runs.
    assert_eq!(
        readme_command("kubectl apply -k"),
        ["kubectl", "apply", "-k", "deploy/base"]
    );
    let run = cluster.install_base();
    assert!(
        run.success,
        "kubectl apply -k deploy/base:\n{}{}",
        run.stdout, run.stderr
    );
    for object in [
        "validatingwebhookconfiguration.admissionregistration.k8s.io/draguard",
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/draguard",
        "deployment.apps/draguard",
        "namespace/draguard",
    ] {
        assert!(run.stdout.contains(object), "{object} applied:\n{}", run.stdout);
    }
    cluster.start_serve(&ServeOptions::default());
    let entries = settled_entries(cluster);
    let Some(helm) = &cluster.helm_entries else {
        return Outcome::Skipped(
            "no Helm install's entries to compare with (install::helm did not run, or failed before storing them)"
                .to_owned(),
        );
    };
    let mut diffs = Vec::new();
    differences(helm, &entries, "", &mut diffs);
    assert!(
        diffs.is_empty(),
        "the stored entries differ (Helm, then kustomize):\n{}",
        diffs.join("\n")
    );
    Outcome::Passed
}

/// Both configurations' `webhooks` as stored, without caBundle (each
/// install's serve made its own CA), read until two reads a second apart
/// agree: serve writes its conditions and selector entries after the
/// caBundle.
fn settled_entries(cluster: &Cluster) -> Value {
    let read = || {
        let mut all = serde_json::Map::new();
        for kind in CONFIGURATIONS {
            let config = cluster.admin.get_json(&[kind, NAME]);
            let mut entries = draguard::entries(&config);
            for entry in &mut entries {
                if let Some(client) = entry["clientConfig"].as_object_mut() {
                    client.remove("caBundle");
                }
            }
            all.insert(kind.to_owned(), json!(entries));
        }
        Value::Object(all)
    };
    let start = Instant::now();
    let mut last = read();
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = read();
        if now == last {
            return now;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "the entries keep changing");
        last = now;
    }
}

/// Where `b` differs from `a`, by JSON pointer.
fn differences(a: &Value, b: &Value, at: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let at = format!("{at}/{key}");
                match (x.get(key), y.get(key)) {
                    (Some(p), Some(q)) => differences(p, q, &at, out),
                    (p, q) => out.push(format!("{at}: {p:?} / {q:?}")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differences(p, q, &format!("{at}/{i}"), out);
            }
        }
        (x, y) if x != y => out.push(format!("{at}: {x} / {y}")),
        _ => {}
    }
}
