// Shared by the test crates that run `draguard serve` as a process.
#![allow(dead_code)]

//! `draguard serve` as a child process against a kubeconfig, with JSON
//! logs on a pipe and plain-HTTP `/metrics` on a free port: the tests that
//! read what the process logs and exports while its watches run (or fail)
//! start it here, scrape it until what they wait for shows, and stop it
//! for its log.

use std::ffi::OsStr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tempfile::TempDir;

/// A port nothing listens on now (the listener is dropped at once).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("bound address").port()
}

/// A running `draguard serve`.
pub struct ServeProcess {
    /// Taken by [`ServeProcess::stop`]; killed on drop otherwise, so a
    /// failing test leaves no process behind.
    child: Option<Child>,
    /// `127.0.0.1:port` of its `--metrics-listen`.
    pub metrics: String,
    client: reqwest::Client,
    /// The kubeconfig and the generated certificates.
    _dir: TempDir,
}

/// What it logged, when stopped.
pub struct Stopped {
    pub stderr: String,
}

impl Stopped {
    /// Every line of the log as JSON; a line that is not JSON fails the
    /// test, as `--log-format json` promises one object per line.
    pub fn lines(&self) -> Vec<serde_json::Value> {
        self.stderr
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
            .collect()
    }
}

/// Starts `draguard serve` against the apiserver at `apiserver` (an
/// address for the kubeconfig: a fake one, or a port nothing serves), with
/// `extra` arguments after the common ones and `RUST_LOG` unset.
pub fn spawn<S: AsRef<OsStr>>(apiserver: impl std::fmt::Display, extra: &[S]) -> ServeProcess {
    start(apiserver, extra, Stdio::piped())
}

/// [`spawn`] with the log discarded, for a run too long for a pipe nobody
/// reads until the end (its buffer would fill and stall the process).
pub fn spawn_discarding_log<S: AsRef<OsStr>>(apiserver: impl std::fmt::Display, extra: &[S]) -> ServeProcess {
    start(apiserver, extra, Stdio::null())
}

fn start<S: AsRef<OsStr>>(apiserver: impl std::fmt::Display, extra: &[S], log: Stdio) -> ServeProcess {
    let dir = tempfile::tempdir().expect("temporary directory");
    let kubeconfig = dir.path().join("kubeconfig");
    super::kubeconfig::write(&kubeconfig, apiserver);
    let metrics = format!("127.0.0.1:{}", free_port());
    let child = Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--metrics-listen",
            &metrics,
        ])
        .args(extra)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--certs-dir")
        .arg(dir.path().join("certs"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("draguard runs");
    draguard::server::install_crypto_provider();
    ServeProcess {
        child: Some(child),
        metrics,
        client: reqwest::Client::new(),
        _dir: dir,
    }
}

impl ServeProcess {
    /// One scrape of `/metrics` (empty when it does not answer).
    pub async fn scrape(&self) -> String {
        let scrape = self
            .client
            .get(format!("http://{}/metrics", self.metrics))
            .timeout(Duration::from_secs(2));
        match scrape.send().await {
            Ok(response) => response.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Scrapes `/metrics` every 100 ms, at most `tries` times, until
    /// `done` holds for the text; returns the last text scraped (empty if
    /// none answered).
    pub async fn scrape_until(&self, tries: usize, mut done: impl FnMut(&str) -> bool) -> String {
        let mut text = String::new();
        for _ in 0..tries {
            tokio::time::sleep(Duration::from_millis(100)).await;
            text = self.scrape().await;
            if done(&text) {
                break;
            }
        }
        text
    }

    /// Asks the process to stop (SIGTERM, as the kubelet does), without
    /// waiting for it.
    pub fn terminate(&self) {
        let pid = self.child.as_ref().expect("running until stopped").id();
        let sent = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGTERM to {pid}");
    }

    /// Kills the process and returns its log.
    pub fn stop(mut self) -> Stopped {
        let mut child = self.child.take().expect("running until stopped");
        child.kill().expect("stop draguard");
        let out = child.wait_with_output().expect("draguard exits");
        Stopped {
            stderr: String::from_utf8(out.stderr).expect("the log is UTF-8"),
        }
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
