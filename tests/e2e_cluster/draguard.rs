//! draguard in the cluster: registered as README installs it, served by a
//! local `draguard serve`.
//!
//! The Deployment's pods never run (no kubelet). What a pod would do, a
//! local process does: `serve` with the Deployment's own arguments (the
//! policies folder is the ConfigMap the Deployment mounts, written out;
//! the listen addresses are loopback ports), as the Deployment's
//! ServiceAccount (a token from `kubectl create token`), with
//! `POD_NAMESPACE` set as the Deployment's env sets it. With
//! `--manage-webhook-certs` it makes its Secret and fills caBundle itself.
//!
//! The apiserver reaches it through the Service, as in a cluster: with no
//! cluster network the Service becomes an `ExternalName` for `localhost`
//! and each entry's `clientConfig.service.port` the local port
//! ([`expose_on_localhost`]); the apiserver then dials `localhost:PORT`
//! and verifies the certificate for `draguard.NAMESPACE.svc`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::control_plane::http_get;
use crate::kubectl::Kubectl;
use crate::pki;
use crate::process::{Daemon, free_port};

/// The name of the Deployment, Service, ServiceAccount and webhook
/// configurations, in deploy/base and in the chart.
pub const NAME: &str = "draguard";

/// The two webhook configurations.
pub const CONFIGURATIONS: [&str; 2] = ["validatingwebhookconfiguration", "mutatingwebhookconfiguration"];

/// A namespace no entry exempts, for the readiness probe.
const PROBE_NAMESPACE: &str = "e2e-probe";

/// A claim the shipped policies admit: one device of a class, no
/// tolerations, no configs.
pub fn claim_yaml(namespace: &str, name: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: {name}, namespace: {namespace}}}\n\
         spec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {{deviceClassName: gpu.example.com}}\n"
    )
}

/// Turns the Service into an ExternalName for localhost, and points every
/// entry of both configurations that calls it at `port`.
pub fn expose_on_localhost(admin: &Kubectl, namespace: &str, port: u16) {
    let service = admin.get_json(&["service", NAME, "-n", namespace]);
    let mut patch = vec![
        json!({"op": "replace", "path": "/spec/type", "value": "ExternalName"}),
        json!({"op": "add", "path": "/spec/externalName", "value": "localhost"}),
    ];
    for field in [
        "clusterIP",
        "clusterIPs",
        "ipFamilies",
        "ipFamilyPolicy",
        "internalTrafficPolicy",
    ] {
        if service["spec"].get(field).is_some() {
            patch.push(json!({"op": "remove", "path": format!("/spec/{field}")}));
        }
    }
    admin.ok(&[
        "patch",
        "service",
        NAME,
        "-n",
        namespace,
        "--type=json",
        "-p",
        &Value::Array(patch).to_string(),
    ]);
    for kind in CONFIGURATIONS {
        let config = admin.get_json(&[kind, NAME]);
        let patch: Vec<Value> = entries(&config)
            .iter()
            .enumerate()
            .filter(|(_, e)| e["clientConfig"]["service"]["name"] == NAME)
            .map(|(i, _)| json!({"op": "replace", "path": format!("/webhooks/{i}/clientConfig/service/port"), "value": port}))
            .collect();
        assert!(!patch.is_empty(), "{kind} {NAME} has entries that call the Service");
        admin.ok(&[
            "patch",
            kind,
            NAME,
            "--type=json",
            "-p",
            &Value::Array(patch).to_string(),
        ]);
    }
}

/// The `webhooks` list of a configuration (empty when absent).
pub fn entries(config: &Value) -> Vec<Value> {
    config["webhooks"].as_array().cloned().unwrap_or_default()
}

/// serve's condition on its validating entries
/// (src/controllers/validate_conditions.rs).
pub const VALIDATE_CONDITION: &str = "draguard-can-change-outcome";

/// Waits until serve has stored [`VALIDATE_CONDITION`] on
/// `validate.draguard.dev`: from then on the apiserver sends it only what
/// draguard can judge beyond the apiserver's own rules.
pub fn wait_for_validate_condition(admin: &Kubectl) {
    let start = std::time::Instant::now();
    loop {
        let config = admin.get_json(&["validatingwebhookconfiguration", NAME]);
        let stored = entries(&config).iter().any(|e| {
            e["name"] == "validate.draguard.dev"
                && e["matchConditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["name"] == VALIDATE_CONDITION))
        });
        if stored {
            return;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "serve did not store {VALIDATE_CONDITION} on validate.draguard.dev in 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The namespaceSelector of serve's claims entry
/// (`claims.validate.draguard.dev`, src/controllers/claims_selector.rs),
/// as stored; null without the entry.
pub fn claims_entry_selector(admin: &Kubectl) -> serde_json::Value {
    let config = admin.get_json(&["validatingwebhookconfiguration", NAME]);
    entries(&config)
        .iter()
        .find(|e| e["name"] == "claims.validate.draguard.dev")
        .map(|e| e["namespaceSelector"].clone())
        .unwrap_or_default()
}

/// Waits until the claims entry's namespaceSelector holds `requirement`
/// (serve adds it once compiled policies are enforced), at most 60 s;
/// the selector as stored, or `Err` with it.
pub fn wait_for_claims_selector(
    admin: &Kubectl,
    requirement: &serde_json::Value,
) -> Result<serde_json::Value, serde_json::Value> {
    let start = std::time::Instant::now();
    loop {
        let selector = claims_entry_selector(admin);
        if selector["matchExpressions"]
            .as_array()
            .is_some_and(|e| e.contains(requirement))
        {
            return Ok(selector);
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            return Err(selector);
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

/// How to run serve, beyond the Deployment's arguments.
#[derive(Default, Clone)]
pub struct ServeOptions {
    /// A policies folder instead of the Deployment's ConfigMap.
    pub policies: Option<PathBuf>,
    /// More flags, after the Deployment's.
    pub extra_args: Vec<String>,
}

/// A running `draguard serve` for the install in `namespace`.
pub struct Serve {
    pub process: Daemon,
    pub namespace: String,
    /// Its HTTPS port (the entries' service port).
    pub port: u16,
    /// Its plain-HTTP `/metrics` port (the Deployment's `--metrics-listen`).
    pub metrics_port: u16,
    /// The arguments it was started with.
    pub args: Vec<String>,
}

impl Serve {
    /// Starts serve for the install in `namespace` on `port`, in folder
    /// `dir` (policies, kubeconfig, log), and waits until the apiserver's
    /// calls reach it ([`Serve::wait_ready`]).
    pub fn start(
        admin: &Kubectl,
        ca_pem: &str,
        server: &str,
        namespace: &str,
        port: u16,
        dir: &Path,
        options: &ServeOptions,
    ) -> Serve {
        std::fs::create_dir_all(dir).expect("serve folder");
        let deployment = admin.get_json(&["deployment", NAME, "-n", namespace]);
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let account = pod["serviceAccountName"].as_str().unwrap_or("default");
        let token = admin.ok(&["create", "token", account, "-n", namespace, "--duration=2h"]);
        let kubeconfig = dir.join("serve.kubeconfig");
        std::fs::write(&kubeconfig, pki::token_kubeconfig(server, ca_pem, token.trim())).expect("kubeconfig");

        let policies = match &options.policies {
            Some(folder) => folder.clone(),
            None => write_mounted_policies(admin, namespace, pod, &dir.join("policies")),
        };
        let metrics_port = free_port();
        let mut args: Vec<String> = Vec::new();
        let deployment_args: Vec<&str> = container["args"]
            .as_array()
            .expect("the container has args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(deployment_args.first(), Some(&"serve"), "{deployment_args:?}");
        for arg in &deployment_args[1..] {
            let (flag, _) = arg.split_once('=').unwrap_or((arg, ""));
            match flag {
                "--policies" => args.push(format!("--policies={}", policies.display())),
                "--metrics-listen" => args.push(format!("--metrics-listen=127.0.0.1:{metrics_port}")),
                "--listen" => {}
                _ => args.push((*arg).to_owned()),
            }
        }
        args.push(format!("--listen=127.0.0.1:{port}"));
        args.push(format!("--kubeconfig={}", kubeconfig.display()));
        args.extend(options.extra_args.iter().cloned());

        let mut command = Command::new(env!("CARGO_BIN_EXE_draguard"));
        command
            .arg("serve")
            .args(&args)
            .env_remove("RUST_LOG")
            .env_remove("KUBECONFIG");
        // The Deployment's env: POD_NAMESPACE from metadata.namespace.
        for var in container["env"].as_array().into_iter().flatten() {
            if let Some(name) = var["name"].as_str() {
                if var["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace" {
                    command.env(name, namespace);
                } else if let Some(value) = var["value"].as_str() {
                    command.env(name, value);
                }
            }
        }
        let log = dir.join("serve.log");
        let process = Daemon::spawn("draguard serve", command, &log);
        let mut serve = Serve {
            process,
            namespace: namespace.to_owned(),
            port,
            metrics_port,
            args,
        };
        serve.wait_ready(admin, Duration::from_secs(60));
        serve
    }

    /// Waits until every entry that calls the Service has a caBundle and a
    /// server-side dry run of a claim in a tenant namespace is admitted:
    /// the enforcing entry fails closed, so only an answer from serve
    /// admits it.
    pub fn wait_ready(&mut self, admin: &Kubectl, timeout: Duration) {
        if !admin.exists(&["namespace", PROBE_NAMESPACE]) {
            admin.ok(&["create", "namespace", PROBE_NAMESPACE]);
        }
        let claim = claim_yaml(PROBE_NAMESPACE, "probe");
        let start = Instant::now();
        loop {
            let waiting_for = if !self.process.running() {
                panic!("draguard serve exited:\n{}", self.process.tail(40));
            } else if !bundles_filled(admin) {
                "caBundle in every entry".to_owned()
            } else {
                let run = admin.run(&["create", "--dry-run=server", "-f", "-"], Some(&claim));
                if run.success {
                    return;
                }
                format!("a claim admitted ({})", run.stderr.trim())
            };
            if start.elapsed() > timeout {
                panic!(
                    "draguard serve not ready after {timeout:?}: waiting for {waiting_for}\n{}",
                    self.process.tail(40)
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// One scrape of its `/metrics` (empty when it does not answer).
    pub fn metrics(&self) -> String {
        http_get(self.metrics_port, "/metrics")
            .map(|(_, body)| body)
            .unwrap_or_default()
    }
}

/// Whether every entry of both configurations that calls the Service has
/// a caBundle.
fn bundles_filled(admin: &Kubectl) -> bool {
    CONFIGURATIONS.iter().all(|kind| {
        let config = admin.get_json(&[kind, NAME]);
        entries(&config)
            .iter()
            .filter(|e| e["clientConfig"]["service"]["name"] == NAME)
            .all(|e| e["clientConfig"]["caBundle"].as_str().is_some_and(|b| !b.is_empty()))
    })
}

/// Writes the ConfigMap the Deployment mounts as its policies volume into
/// `folder`, one file per key, as the kubelet would mount it.
fn write_mounted_policies(admin: &Kubectl, namespace: &str, pod: &Value, folder: &Path) -> PathBuf {
    let config_map = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|v| v["configMap"]["name"].as_str())
        .expect("the Deployment mounts a ConfigMap");
    let data = admin.get_json(&["configmap", config_map, "-n", namespace]);
    std::fs::create_dir_all(folder).expect("policies folder");
    for (key, text) in data["data"].as_object().into_iter().flatten() {
        std::fs::write(folder.join(key), text.as_str().unwrap_or_default()).expect("policy file");
    }
    folder.to_owned()
}
