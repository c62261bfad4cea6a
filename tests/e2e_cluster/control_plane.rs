//! etcd, kube-apiserver and kube-controller-manager v1.36.2 on free
//! loopback ports in a temporary folder, with the flags of the shared test
//! bed (tools/apiserver/start.sh): every alpha and beta API and gate on,
//! Node and RBAC authorization, the default admission plugins plus
//! ResourceQuota and the admission webhooks, no endpoint reconciler (no
//! cluster network). No scheduler and no kubelet: Pods are stored, never
//! run.
//!
//! Dropping it kills the processes (controller manager first, etcd last)
//! and removes the folder, unless `E2E_KEEP=1` (then it prints where).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::env::Tools;
use crate::pki::Pki;
use crate::process::{Daemon, free_port};

/// The gates of the shared test bed; `E2E_FEATURE_GATES` replaces them.
const FEATURE_GATES: &str = "AllAlpha=true,AllBeta=true";

/// The controller manager's controllers: those a namespace's life needs
/// (service accounts and their tokens, namespace deletion, the root CA
/// ConfigMap, garbage collection, quota) and DRA's (claims from templates,
/// device-taint eviction). No Deployment controller: draguard's pods are
/// never made; draguard runs as a local process (draguard.rs).
const CONTROLLERS: &str = "serviceaccount-controller,serviceaccount-token-controller,namespace-controller,\
resourcequota-controller,garbage-collector-controller,resourceclaim-controller,device-taint-eviction-controller,\
clusterrole-aggregation-controller,root-ca-certificate-publisher-controller";

pub struct ControlPlane {
    // Dropped in this order: the controller manager, the apiserver, etcd.
    kcm: Daemon,
    apiserver: Daemon,
    etcd: Daemon,
    pub pki: Pki,
    pub port: u16,
    dir: Option<TempDir>,
    pub started_in: Duration,
}

impl ControlPlane {
    pub fn start(tools: &Tools) -> ControlPlane {
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("draguard-e2e-")
            .tempdir()
            .expect("temporary folder");
        let root = dir.path().to_owned();
        let port = free_port();
        let pki = Pki::create(&root.join("pki"), port);
        let gates = std::env::var("E2E_FEATURE_GATES").unwrap_or_else(|_| FEATURE_GATES.to_owned());

        let (client, peer) = (free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{client}");
        let mut etcd = Command::new(tools.k8s_bin.join("etcd"));
        etcd.arg(format!("--data-dir={}", root.join("etcd").display()))
            .arg(format!("--client-url={etcd_url}"))
            .arg(format!("--peer-url=http://127.0.0.1:{peer}"))
            .arg("--unsafe-no-fsync")
            // Its warnings log every slow-looking read, hiding what matters.
            .arg("--log-level=error");
        let mut etcd = Daemon::spawn("etcd", etcd, &root.join("etcd.log"));
        etcd.wait_until(Duration::from_secs(30), "healthy", || http_get_ok(client, "/health"));

        let p = |name: &str| pki.path(name).display().to_string();
        let mut apiserver = Command::new(tools.k8s_bin.join("kube-apiserver"));
        apiserver.args([
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            &format!("--secure-port={port}"),
            "--endpoint-reconciler-type=none",
            &format!("--etcd-servers={etcd_url}"),
            &format!("--tls-cert-file={}", p("apiserver.crt")),
            &format!("--tls-private-key-file={}", p("apiserver.key")),
            &format!("--client-ca-file={}", p("ca.crt")),
            &format!("--service-account-key-file={}", p("sa.pub")),
            &format!("--service-account-signing-key-file={}", p("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=Node,RBAC",
            "--runtime-config=api/all=true",
            &format!("--feature-gates={gates}"),
            "--enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultTolerationSeconds,\
             ResourceQuota,MutatingAdmissionPolicy,MutatingAdmissionWebhook,ValidatingAdmissionPolicy,\
             ValidatingAdmissionWebhook",
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
        ]);
        let mut apiserver = Daemon::spawn("kube-apiserver", apiserver, &root.join("kube-apiserver.log"));
        let admin = pki.kubeconfig_path("admin");
        apiserver.wait_until(Duration::from_secs(120), "ready (/readyz)", || {
            Command::new(tools.kubectl())
                .arg(format!("--kubeconfig={}", admin.display()))
                .args(["get", "--raw=/readyz", "--request-timeout=5s"])
                .output()
                .is_ok_and(|o| o.status.success())
        });

        let kcm_kubeconfig = pki.kubeconfig_path("kcm").display().to_string();
        let mut kcm = Command::new(tools.k8s_bin.join("kube-controller-manager"));
        kcm.args([
            &format!("--kubeconfig={kcm_kubeconfig}"),
            &format!("--authentication-kubeconfig={kcm_kubeconfig}"),
            &format!("--authorization-kubeconfig={kcm_kubeconfig}"),
            "--bind-address=127.0.0.1",
            &format!("--secure-port={}", free_port()),
            &format!("--service-account-private-key-file={}", p("sa.key")),
            &format!("--root-ca-file={}", p("ca.crt")),
            "--use-service-account-credentials=true",
            "--leader-elect=false",
            &format!("--controllers={CONTROLLERS}"),
            &format!("--feature-gates={gates}"),
            "--v=1",
        ]);
        let kcm = Daemon::spawn(
            "kube-controller-manager",
            kcm,
            &root.join("kube-controller-manager.log"),
        );
        ControlPlane {
            kcm,
            apiserver,
            etcd,
            pki,
            port,
            dir: Some(dir),
            started_in: started.elapsed(),
        }
    }

    /// The folder of logs, PKI and etcd's data.
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new("/"), |d| d.path())
    }

    pub fn server(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.pki.kubeconfig_path("admin")
    }

    /// The tail of each process's log (for a failure's report), with a
    /// word on those no longer running.
    pub fn log_tails(&mut self, lines: usize) -> String {
        let mut out = String::new();
        for daemon in [&mut self.etcd, &mut self.apiserver, &mut self.kcm] {
            let state = if daemon.running() { "running" } else { "EXITED" };
            out.push_str(&format!(
                "---- {} ({state}), last {lines} lines of {}\n{}\n",
                daemon.name,
                daemon.log.display(),
                daemon.tail(lines)
            ));
        }
        out
    }

    /// Whether every process still runs.
    pub fn healthy(&mut self) -> bool {
        self.etcd.running() && self.apiserver.running() && self.kcm.running()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.kcm.kill();
        self.apiserver.kill();
        self.etcd.kill();
        if let Some(dir) = self.dir.take()
            && std::env::var_os("E2E_KEEP").is_some()
        {
            eprintln!("e2e_cluster: kept {}", dir.keep().display());
        }
    }
}

/// `GET path` on a plain-HTTP loopback port answers 200.
pub fn http_get_ok(port: u16, path: &str) -> bool {
    http_get(port, path).is_some_and(|(status, _)| status == 200)
}

/// A plain-HTTP/1.1 GET on a loopback port: the status and the body, or
/// `None` when nothing answers within 2 s (etcd's /health, serve's
/// --metrics-listen).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let split = response.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let body = &response[split + 4..];
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        unchunk(body)
    } else {
        body.to_vec()
    };
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

/// A chunked body's data.
fn unchunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim(), 16).ok());
        let rest = &body[eol + 2..];
        match size {
            Some(size) if size > 0 && rest.len() >= size => {
                out.extend_from_slice(&rest[..size]);
                body = rest[size..].strip_prefix(b"\r\n").unwrap_or(&rest[size..]);
            }
            _ => break,
        }
    }
    out
}
