//! A rolling restart under load, modelled on what Kubernetes does, counting
//! every failed call.
//!
//! Two `draguard serve` processes stand for the old pod (127.0.0.1) and its
//! replacement (127.0.0.2), on the same port, behind one name. The client
//! is one pooled HTTP client, as the apiserver's is: its resolver stands
//! for the Service, so that, as with kube-proxy, a *new* connection goes to
//! the endpoint in force while a connection already open stays on its pod
//! whatever the endpoints say. The old pod is deleted under load: its
//! endpoint moves to the new pod after a propagation lag (the time an
//! endpoint removal takes to reach every apiserver and kube-proxy;
//! Kubernetes removes a terminating pod at once, and the old pod's /readyz
//! fails at once too, which a probe checks), and SIGTERM comes after the
//! preStop sleep, if any. No retries: a call that fails is counted.
//!
//! With the default shutdown delay no call fails; without one
//! (`--shutdown-delay=0s`, the old behaviour) calls fail. The figures are
//! printed on a `ROLLING-RESTART` line; `scripts/rolling-restart.sh` runs
//! this with the release build and more load, and also measures the old
//! manifest (a preStop sleep, then no delay). Settings (environment):
//! ROLLING_RESTART_WORKERS (concurrent callers, default 8),
//! ROLLING_RESTART_LOAD_SECONDS (load before SIGTERM, default 1),
//! ROLLING_RESTART_PROPAGATION_MS (endpoint lag, default 1000).

mod support {
    pub mod reviews;
}

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::reviews::valid_review;

const OLD: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
const NEW: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const SERVICE: &str = "draguard.test";

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The Service as the client sees it: where a new connection goes.
#[derive(Clone)]
struct Endpoints(Arc<AtomicBool>);

impl Endpoints {
    fn switch_to_new(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl reqwest::dns::Resolve for Endpoints {
    fn resolve(&self, _: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let ip = if self.0.load(Ordering::SeqCst) { NEW } else { OLD };
        // The port is the URL's.
        let addrs: reqwest::dns::Addrs = Box::new(std::iter::once(SocketAddr::new(IpAddr::V4(ip), 0)));
        Box::pin(async move { Ok(addrs) })
    }
}

/// A port free on both loopback addresses.
fn free_port() -> u16 {
    for _ in 0..20 {
        let Ok(first) = std::net::TcpListener::bind((OLD, 0)) else {
            continue;
        };
        let port = first.local_addr().expect("address").port();
        if std::net::TcpListener::bind((NEW, port)).is_ok() {
            return port;
        }
    }
    panic!("no port free on both 127.0.0.1 and 127.0.0.2");
}

fn serve(ip: Ipv4Addr, port: u16, certs: &Path, log: &Path, extra: &[&str]) -> Child {
    let log = std::fs::File::create(log).expect("log file");
    Command::new(env!("CARGO_BIN_EXE_draguard"))
        .args(["serve", "--no-cluster", "--listen", &format!("{ip}:{port}")])
        .arg("--certs-dir")
        .arg(certs)
        .args(["--san", SERVICE])
        .args(extra)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("draguard serve starts")
}

fn trusting(ca: &Path) -> reqwest::ClientBuilder {
    draguard::server::install_crypto_provider();
    let pem = std::fs::read(ca).expect("CA");
    reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&pem).expect("CA")])
        .timeout(Duration::from_secs(10))
}

/// A probe of one pod: a new connection each time, straight to its address.
async fn probe(ca: &Path, ip: Ipv4Addr, port: u16, path: &str) -> Option<reqwest::StatusCode> {
    let client = trusting(ca)
        .resolve(SERVICE, SocketAddr::new(IpAddr::V4(ip), port))
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(2))
        .build()
        .ok()?;
    let response = client
        .get(format!("https://{SERVICE}:{port}{path}"))
        .send()
        .await
        .ok()?;
    Some(response.status())
}

async fn wait_ready(ca: &Path, ip: Ipv4Addr, port: u16, child: &mut Child, log: &Path) {
    for _ in 0..200 {
        assert!(
            child.try_wait().expect("status").is_none(),
            "draguard serve on {ip} exited:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        if ca.exists() && probe(ca, ip, port, "/readyz").await == Some(reqwest::StatusCode::OK) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "draguard serve on {ip} not ready:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

fn review(uid: u64) -> Value {
    valid_review(&format!("uid-{uid}"))
}

#[derive(Debug, Default)]
struct Counts {
    requests: AtomicU64,
    failed: AtomicU64,
    /// Answered by the old pod after its SIGTERM.
    old_after_sigterm: AtomicU64,
}

/// What one rolling restart counted.
#[derive(Debug)]
struct Outcome {
    requests: u64,
    failed: u64,
    old_after_sigterm: u64,
    /// From SIGTERM to the old pod's first failed /readyz probe.
    readyz_failed_after: Duration,
    first_failures: Vec<String>,
    old_exit: std::process::ExitStatus,
}

/// Deletes the old pod under load, `old_flags` on its command line and
/// SIGTERM `pre_stop` after the deletion; `http2` picks the client's
/// protocol.
async fn rolling_restart(label: &str, old_flags: &[&str], pre_stop: Duration, http2: bool) -> Outcome {
    let workers = usize::try_from(setting("ROLLING_RESTART_WORKERS", 8)).unwrap_or(8);
    let load_before = Duration::from_secs(setting("ROLLING_RESTART_LOAD_SECONDS", 1));
    let propagation = Duration::from_millis(setting("ROLLING_RESTART_PROPAGATION_MS", 1000));
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    let ca = certs.join("ca.crt");
    let port = free_port();
    let (old_log, new_log) = (dir.path().join("old.log"), dir.path().join("new.log"));
    let mut old = serve(OLD, port, &certs, &old_log, old_flags);
    wait_ready(&ca, OLD, port, &mut old, &old_log).await;
    // Started second, so it reuses the CA the first one made.
    let mut new = serve(NEW, port, &certs, &new_log, &[]);
    wait_ready(&ca, NEW, port, &mut new, &new_log).await;

    let endpoints = Endpoints(Arc::new(AtomicBool::new(false)));
    let mut builder = trusting(&ca).dns_resolver(endpoints.clone());
    if !http2 {
        builder = builder.http1_only();
    }
    let client = builder.build().expect("client");
    let url = format!("https://{SERVICE}:{port}/validate?timeout=10s");
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let sigterm_sent = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let next_uid = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (client, url, counts, stop, sigterm_sent, failures, next_uid) = (
            client.clone(),
            url.clone(),
            counts.clone(),
            stop.clone(),
            sigterm_sent.clone(),
            failures.clone(),
            next_uid.clone(),
        );
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let uid = next_uid.fetch_add(1, Ordering::Relaxed) as u64;
                let after_sigterm = sigterm_sent.load(Ordering::SeqCst);
                counts.requests.fetch_add(1, Ordering::Relaxed);
                let failure = match client.post(&url).json(&review(uid)).send().await {
                    Ok(response) => {
                        let from = response.remote_addr().map(|a| a.ip());
                        let status = response.status();
                        match response.json::<Value>().await {
                            Ok(answer) if status == 200 && answer["response"]["uid"] == format!("uid-{uid}") => {
                                if after_sigterm && from == Some(IpAddr::V4(OLD)) {
                                    counts.old_after_sigterm.fetch_add(1, Ordering::Relaxed);
                                }
                                None
                            }
                            Ok(answer) => Some(format!("HTTP {status}: {answer}")),
                            Err(e) => Some(format!("HTTP {status}, unreadable body: {e}")),
                        }
                    }
                    Err(e) => Some(format!("{e:?}")),
                };
                if let Some(failure) = failure {
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    let mut failures = failures.lock().expect("lock");
                    if failures.len() < 5 {
                        failures.push(failure);
                    }
                }
            }
        }));
    }

    tokio::time::sleep(load_before).await;
    // The deletion: the endpoint leaves the Service after the lag.
    let deleted_at = Instant::now();
    let switch = {
        let endpoints = endpoints.clone();
        tokio::spawn(async move {
            tokio::time::sleep(propagation).await;
            endpoints.switch_to_new();
        })
    };
    tokio::time::sleep(pre_stop).await;
    let pid = rustix::process::Pid::from_raw(i32::try_from(old.id()).expect("pid")).expect("pid");
    sigterm_sent.store(true, Ordering::SeqCst);
    let sigterm_at = Instant::now();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    // A readiness probe of the old pod, a fresh connection every 100 ms.
    let readiness = {
        let ca = ca.clone();
        tokio::spawn(async move {
            while probe(&ca, OLD, port, "/readyz").await == Some(reqwest::StatusCode::OK) {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            sigterm_at.elapsed()
        })
    };
    let old_exit = loop {
        if let Some(status) = old.try_wait().expect("status") {
            break status;
        }
        assert!(
            sigterm_at.elapsed() < Duration::from_secs(60),
            "the old pod does not exit"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let exited_after = sigterm_at.elapsed();
    let readyz_failed_after = readiness.await.expect("probe");
    switch.await.expect("endpoint switch");
    // The replacement carries the load a while longer.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.expect("worker");
    }
    let _ = new.kill();
    let _ = new.wait();
    let outcome = Outcome {
        requests: counts.requests.load(Ordering::Relaxed),
        failed: counts.failed.load(Ordering::Relaxed),
        old_after_sigterm: counts.old_after_sigterm.load(Ordering::Relaxed),
        readyz_failed_after,
        first_failures: failures.lock().expect("lock").clone(),
        old_exit,
    };
    println!(
        "ROLLING-RESTART {label} protocol={} workers={workers} pre_stop={pre_stop:?} requests={} failed={} \
         answered_by_old_pod_after_sigterm={} endpoint_moved_after_deletion={propagation:?} \
         sigterm_after_deletion={:.2?} readyz_failed_after_sigterm={readyz_failed_after:.2?} \
         old_pod_exited_after_sigterm={exited_after:.2?}",
        if http2 { "h2" } else { "http/1.1" },
        outcome.requests,
        outcome.failed,
        outcome.old_after_sigterm,
        sigterm_at - deleted_at,
    );
    if !outcome.first_failures.is_empty() {
        println!("  first failures: {:#?}", outcome.first_failures);
    }
    let log = std::fs::read_to_string(&old_log).unwrap_or_default();
    assert!(log.contains("open-file limit"), "serve says what limit it got: {log}");
    assert!(log.contains("stopped accepting; draining in-flight requests"), "{log}");
    outcome
}

/// With the default shutdown delay the old pod keeps answering until the
/// endpoint has moved, and closes each keep-alive connection after its
/// next answer: not one call fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_default_shutdown_delay_no_call_fails_over_http1() {
    let outcome = rolling_restart("default-delay", &[], Duration::ZERO, false).await;
    assert_eq!(outcome.failed, 0, "{outcome:#?}");
    assert!(outcome.old_exit.success(), "{outcome:#?}");
    assert!(
        outcome.old_after_sigterm > 0,
        "the old pod answered calls still routed to it: {outcome:#?}"
    );
    assert!(outcome.readyz_failed_after < Duration::from_secs(1), "{outcome:#?}");
    assert!(outcome.requests > 100, "{outcome:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_default_shutdown_delay_no_call_fails_over_http2() {
    let outcome = rolling_restart("default-delay", &[], Duration::ZERO, true).await;
    assert_eq!(outcome.failed, 0, "{outcome:#?}");
    assert!(outcome.old_exit.success(), "{outcome:#?}");
    assert!(outcome.old_after_sigterm > 0, "{outcome:#?}");
}

/// Without a delay (the listener closes at SIGTERM) the calls routed to
/// the old pod before the endpoint moves fail: the model sees the
/// difference the delay makes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_shutdown_delay_calls_fail() {
    let outcome = rolling_restart("no-delay", &["--shutdown-delay=0s"], Duration::ZERO, false).await;
    assert!(outcome.failed > 0, "{outcome:#?}");
    assert!(outcome.old_exit.success(), "{outcome:#?}");
}

/// The old manifest: a preStop sleep longer than the endpoint lag, then
/// SIGTERM with no delay. New connections have moved by then, but
/// keep-alive connections opened before still carry calls to the old pod,
/// and its close races them. A measurement, for the script: how many fail
/// depends on timing, and may be none in a short run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: scripts/rolling-restart.sh runs it"]
async fn the_old_manifest_prestop_sleep_without_a_delay() {
    let pre_stop = Duration::from_secs(setting("ROLLING_RESTART_PRESTOP_SECONDS", 3));
    let outcome = rolling_restart("old-manifest", &["--shutdown-delay=0s"], pre_stop, false).await;
    assert!(outcome.old_exit.success(), "{outcome:#?}");
}
