//! What the scenarios share: the control plane, kubectl as its
//! identities, helm, and draguard (which install is in place, and its
//! serve process). Scenarios leave it as they need it next: a scenario
//! that needs draguard installed and answering calls
//! [`Cluster::ensure_base_serving`], which installs deploy/base and
//! (re)starts serve only when that is not already so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::control_plane::ControlPlane;
use crate::draguard::{self, Serve, ServeOptions};
use crate::env::Tools;
use crate::kubectl::{Kubectl, Run};

/// The project folder (README.md, deploy/, charts/).
pub const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// draguard's namespace, in deploy/base and in README's Helm install.
pub const NAMESPACE: &str = "draguard";

/// A user that is not in system:masters, bound to cluster-admin: what
/// every tenant and operator write is made as, so that only draguard's
/// entries (not RBAC, not the system:masters exemption) decide.
pub const OPERATOR: &str = "e2e-operator";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Install {
    /// `kubectl apply -k deploy/base`.
    Kustomize,
    /// README's `helm install`.
    Helm,
}

pub struct Cluster {
    // Dropped first: serve, then the control plane.
    pub serve: Option<Serve>,
    pub control_plane: ControlPlane,
    pub tools: Tools,
    /// The administrator (group system:masters).
    pub admin: Kubectl,
    /// Which install of draguard is in place.
    pub install: Option<Install>,
    /// The HTTPS port serve listens on, and the entries' service port.
    pub draguard_port: u16,
    /// The webhook entries the Helm install stored, once serve managed them
    /// (install::helm records them for install::kustomize to compare).
    pub helm_entries: Option<Value>,
    serve_runs: usize,
}

impl Cluster {
    pub fn start(tools: Tools) -> Cluster {
        let control_plane = ControlPlane::start(&tools);
        let admin = Kubectl::new(&tools.kubectl(), &control_plane.admin_kubeconfig());
        let cluster = Cluster {
            serve: None,
            admin,
            install: None,
            draguard_port: crate::process::free_port(),
            helm_entries: None,
            serve_runs: 0,
            control_plane,
            tools,
        };
        cluster.admin.apply(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {OPERATOR}}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\n\
             subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {OPERATOR}}}]\n"
        ));
        cluster
    }

    /// kubectl as [`OPERATOR`] (cluster-admin, not system:masters).
    pub fn operator(&self) -> Kubectl {
        self.admin.impersonating(OPERATOR, &[])
    }

    /// kubectl as the kubelet of [`crate::pki::NODE`]: its own client
    /// certificate (`system:node:NAME`, group `system:nodes`).
    pub fn kubelet(&self) -> Kubectl {
        Kubectl::new(
            &self.tools.kubectl(),
            &self.control_plane.pki.kubeconfig_path("kubelet"),
        )
    }

    /// A path under the control plane's temporary folder.
    pub fn scratch(&self, name: &str) -> PathBuf {
        self.control_plane.dir().join(name)
    }

    /// Runs helm (from PATH) with `args` in the project folder, against
    /// this cluster; None when helm is not on PATH.
    pub fn helm(&self, args: &[&str]) -> Option<Run> {
        let helm = self.tools.helm.as_ref()?;
        let home = self.scratch("helm");
        let start = Instant::now();
        let out = Command::new(helm)
            .args(args)
            .current_dir(ROOT)
            .env("KUBECONFIG", self.control_plane.admin_kubeconfig())
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .output()
            .expect("helm runs");
        Some(Run {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            wall: start.elapsed(),
        })
    }

    /// `kubectl apply -k deploy/base`, as README documents it, then the
    /// Service and entries pointed at serve's local port.
    pub fn install_base(&mut self) -> Run {
        let base = Path::new(ROOT).join("deploy/base");
        let run = self.admin.run(&["apply", "-k", &base.display().to_string()], None);
        if run.success {
            self.install = Some(Install::Kustomize);
            draguard::expose_on_localhost(&self.admin, NAMESPACE, self.draguard_port);
        }
        run
    }

    /// Starts serve for the install in [`NAMESPACE`] (stopping one that
    /// runs), and waits until the apiserver's calls reach it.
    pub fn start_serve(&mut self, options: &ServeOptions) -> &mut Serve {
        self.stop_serve();
        self.serve_runs += 1;
        let dir = self.scratch(&format!("serve-{}", self.serve_runs));
        let serve = Serve::start(
            &self.admin,
            &self.control_plane.pki.ca_pem,
            &self.control_plane.server(),
            NAMESPACE,
            self.draguard_port,
            &dir,
            options,
        );
        self.serve.insert(serve)
    }

    /// Kills serve if it runs (SIGKILL: a stopped one too).
    pub fn stop_serve(&mut self) {
        if let Some(mut serve) = self.serve.take() {
            serve.process.kill();
        }
    }

    /// deploy/base installed and serve answering, with the Deployment's
    /// own policies: installs and starts only what is missing.
    pub fn ensure_base_serving(&mut self) -> &mut Serve {
        if self.install != Some(Install::Kustomize) {
            let run = self.install_base();
            assert!(
                run.success,
                "kubectl apply -k deploy/base:\n{}{}",
                run.stdout, run.stderr
            );
        }
        let alive = self.serve.as_mut().is_some_and(|s| s.process.running());
        if !alive {
            self.start_serve(&ServeOptions::default());
        }
        self.serve.as_mut().expect("serving")
    }

    /// Waits until `kubectl get args` finds the object (a controller makes
    /// it: a namespace's default ServiceAccount).
    pub fn wait_for(&self, args: &[&str], timeout: Duration) {
        let start = Instant::now();
        while !self.admin.exists(args) {
            assert!(start.elapsed() < timeout, "{args:?} not there after {timeout:?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The tails of every process's log, for a failure's report.
    pub fn log_tails(&mut self, lines: usize) -> String {
        let mut out = self.control_plane.log_tails(lines);
        if let Some(serve) = self.serve.as_mut() {
            let state = if serve.process.running() { "running" } else { "EXITED" };
            out.push_str(&format!(
                "---- draguard serve ({state}), last {lines} lines of {}\n{}\n",
                serve.process.log.display(),
                serve.process.tail(lines)
            ));
        }
        out
    }
}
