//! The HTTPS admission server: rustls (ring) over hyper, axum routes into the
//! review core, certificate hot reload or generated development certificates,
//! Prometheus metrics, bounded connections and reviews, and a shutdown that
//! drains without refusing.
//!
//! [`start`] binds and returns at once with a [`RunningServer`]; the caller
//! decides when to stop it (`draguard serve` on SIGTERM or Ctrl-C, tests when
//! they are done).

mod activity;
mod answer_body;
mod cel_compiler;
pub mod certs;
mod connection;
mod connections;
mod drain;
pub(crate) mod duration;
pub mod fd_limit;
mod intake;
pub mod limits;
mod metrics;
#[cfg(target_os = "linux")]
mod process;
mod review_memory;
mod routes;
pub mod scale_workload;
pub mod taint_rule_reach;
mod tls;

pub use fd_limit::{FdLimit, raise_fd_limit};
pub use limits::ServerLimits;
pub use review_memory::review_charge;
pub use scale_workload::ScaleWorkloads;
pub use tls::ManagedCert;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::cluster::live::LiveView;
use crate::policy_files::load::load_dir;
use crate::policy_files::reload::{self, PolicyStore};
use crate::view::{ClusterView, NoCluster};

/// The apiserver caps an AdmissionReview at 3 MiB of object; the default
/// body limit matches it.
pub const DEFAULT_MAX_BODY: usize = 3 * 1024 * 1024;
/// How often certificate files are checked for changes.
pub const DEFAULT_RELOAD_EVERY: Duration = Duration::from_secs(10);
/// Policy edits apply within this long.
pub const DEFAULT_POLICY_RELOAD_EVERY: Duration = Duration::from_secs(2);
/// How long `draguard serve` keeps accepting and answering after SIGTERM,
/// with `/readyz` failing: the time the endpoint removal takes to reach the
/// apiservers and kube-proxy, usually a second or two.
pub const DEFAULT_SHUTDOWN_DELAY: Duration = Duration::from_secs(5);
/// How long in-flight requests get to finish once the listener has closed;
/// the apiserver's longest webhook timeout is 30 s, its default 10 s.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(20);

/// Where the serving certificate comes from.
#[derive(Debug, Clone)]
pub enum TlsSource {
    /// PEM files, reloaded when they change on disk.
    Files { cert: PathBuf, key: PathBuf },
    /// A development CA and certificate generated into (or reused from) `dir`,
    /// valid for `localhost`, `127.0.0.1` and `sans`.
    Generate { dir: PathBuf, sans: Vec<String> },
    /// Handed over in memory and swapped by whoever holds the other clones
    /// of the handle (`--manage-webhook-certs`).
    Managed(ManagedCert),
}

impl PartialEq for TlsSource {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (TlsSource::Files { cert, key }, TlsSource::Files { cert: c, key: k }) => cert == c && key == k,
            (TlsSource::Generate { dir, sans }, TlsSource::Generate { dir: d, sans: s }) => dir == d && sans == s,
            (TlsSource::Managed(a), TlsSource::Managed(b)) => a.same(b),
            _ => false,
        }
    }
}

impl Eq for TlsSource {}

impl fmt::Display for TlsSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsSource::Files { cert, key } => {
                write!(f, "files {} and {}", cert.display(), key.display())
            }
            TlsSource::Generate { dir, .. } => {
                write!(f, "development certificate in {}", dir.display())
            }
            TlsSource::Managed(_) => f.write_str("certificate managed in a Kubernetes Secret"),
        }
    }
}

/// Tells `/readyz` whether the server may take traffic, and if not, what it
/// waits for (the 503's text, so an operator sees which part is missing).
pub type ReadyCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Everything [`start`] needs.
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// When set: plain-HTTP `GET /metrics` on this address as well, for
    /// Prometheus to scrape without TLS.
    pub metrics_listen: Option<SocketAddr>,
    pub tls: TlsSource,
    /// Largest request body accepted; larger ones get HTTP 413.
    pub max_body: usize,
    pub cluster: Arc<dyn ClusterView>,
    pub ready: ReadyCheck,
    /// How often [`TlsSource::Files`] are checked for changes.
    pub reload_every: Duration,
    /// The policies in force; replaced on reload.
    pub policies: PolicyStore,
    /// When set: loaded at start (an error stops the start) and watched.
    pub policies_dir: Option<PathBuf>,
    /// How often the policy folder is checked for changes.
    pub policy_reload_every: Duration,
    /// Start, and reload, even when the policy folder holds no policies
    /// (else the start is an error and the reload rejected: an empty folder
    /// is usually a mount gone wrong).
    pub allow_no_policies: bool,
    /// PodTolerationRestriction compatibility, when enabled.
    pub toleration_restriction: Option<Arc<crate::policy::toleration_restriction::TolerationRestrictionConfig>>,
    /// How often the info-level summary of answered reviews is written
    /// (each review itself logs at debug).
    pub summary_every: Duration,
    /// Connection and review bounds.
    pub limits: ServerLimits,
    /// After [`ShutdownHandle::shutdown`]: how long to keep accepting and
    /// answering with `/readyz` failing, before the listener closes.
    /// [`ServerConfig::new`] sets zero (an embedded server has no endpoints
    /// to wait for); `draguard serve` defaults to [`DEFAULT_SHUTDOWN_DELAY`].
    pub shutdown_delay: Duration,
    /// Once the listener has closed: how long in-flight requests get.
    pub shutdown_timeout: Duration,
    /// The Kubernetes release whose rules judge every review.
    pub target: crate::kubernetes::Target,
    /// Whether those rules differ from what the apiserver runs, for
    /// `draguard_apiserver_mismatch` (set by `serve`).
    pub apiserver_mismatch: crate::kubernetes::apiserver_report::Mismatch,
    /// More state `/metrics` reads at scrape time, from the loops `serve`
    /// runs beside the server (the background audit); the server knows
    /// none of them.
    pub collectors: Vec<Box<dyn prometheus_client::collector::Collector>>,
    /// What standing DeviceTaintRules reach, for
    /// `draguard_taint_rule_reach` (set by `serve`'s standing check).
    pub taint_rule_reach: taint_rule_reach::TaintRuleReach,
    /// Reads the workload of a `scale` write, to warn of the Pods it would
    /// stamp (set by `serve` with a cluster; without one a scale is
    /// admitted silently).
    pub scale_workloads: Option<ScaleWorkloads>,
}

impl ServerConfig {
    /// No cluster (always ready), 3 MiB bodies, reload every 10 s.
    pub fn new(listen: SocketAddr, tls: TlsSource) -> Self {
        ServerConfig {
            listen,
            metrics_listen: None,
            tls,
            max_body: DEFAULT_MAX_BODY,
            cluster: Arc::new(NoCluster),
            ready: Arc::new(|| Ok(())),
            reload_every: DEFAULT_RELOAD_EVERY,
            policies: PolicyStore::default(),
            policies_dir: None,
            policy_reload_every: DEFAULT_POLICY_RELOAD_EVERY,
            allow_no_policies: false,
            toleration_restriction: None,
            summary_every: activity::DEFAULT_SUMMARY_EVERY,
            limits: ServerLimits::default(),
            shutdown_delay: Duration::ZERO,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            target: Default::default(),
            apiserver_mismatch: Default::default(),
            collectors: Vec::new(),
            taint_rule_reach: Default::default(),
            scale_workloads: None,
        }
    }

    /// Loads and watches the policy folder `dir`.
    pub fn with_policies(mut self, dir: PathBuf) -> Self {
        self.policies_dir = Some(dir);
        self
    }

    /// Judges with watched caches; ready once every one has its list (and
    /// not while one re-lists after lost events), so that no request is
    /// judged against a cache that is missing objects.
    pub fn with_live_view(mut self, view: LiveView) -> Self {
        let probe = view.clone();
        self.cluster = Arc::new(view);
        self.ready = Arc::new(move || probe.readiness());
        self
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("{}: {reason}", path.display())]
    BadCertificate { path: PathBuf, reason: String },
    #[error("invalid --san {0:?}: it is neither an IP address nor a DNS name")]
    BadSan(String),
    #[error("cannot generate the development certificate: {0}")]
    Generate(String),
    #[error("TLS setup failed: {0}")]
    Tls(String),
    #[error("the server task failed: {0}")]
    Crashed(String),
    #[error("invalid policies:\n{0}")]
    Policies(String),
}

/// Asks a running server to shut down: drain for the shutdown delay, then
/// stop accepting and finish in-flight requests. Cheap to clone.
#[derive(Clone)]
pub struct ShutdownHandle(Arc<watch::Sender<bool>>);

impl ShutdownHandle {
    pub fn shutdown(&self) {
        self.0.send_replace(true);
    }
}

/// A server that is accepting connections. Dropping it (and every
/// [`ShutdownHandle`]) stops the server as [`RunningServer::shutdown`] would.
pub struct RunningServer {
    local_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    ca_file: Option<PathBuf>,
    stop: ShutdownHandle,
    task: JoinHandle<()>,
}

impl RunningServer {
    /// The bound address (the real port when asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound plain-HTTP metrics address, when asked for one.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The CA that signed the generated certificate, for the webhook's caBundle.
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.stop.clone()
    }

    /// Fails `/readyz` and drains for the shutdown delay, then stops
    /// accepting and lets in-flight requests finish (within the shutdown
    /// timeout).
    pub fn shutdown(&self) {
        self.stop.shutdown();
    }

    /// Resolves once the server has stopped and drained.
    pub async fn wait(self) -> Result<(), ServerError> {
        // Keep the sender alive while waiting: dropping it would stop the server.
        let _stop = self.stop;
        self.task.await.map_err(|e| ServerError::Crashed(e.to_string()))
    }

    /// [`RunningServer::shutdown`], then [`RunningServer::wait`].
    pub async fn stop(self) -> Result<(), ServerError> {
        self.shutdown();
        self.wait().await
    }
}

/// Makes ring the process-wide rustls provider, for code (reqwest, kube)
/// that asks rustls for the default. Installing twice is not an error.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Binds, prepares TLS and starts serving in the background.
pub async fn start(mut config: ServerConfig) -> Result<RunningServer, ServerError> {
    install_crypto_provider();
    let prepared = prepare_tls(&config.tls)?;
    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServerError::Bind {
            addr: config.listen,
            source,
        })?;
    let local_addr = listener.local_addr().map_err(|source| ServerError::Bind {
        addr: config.listen,
        source,
    })?;
    // Bound before anything starts, so a busy metrics port is a startup
    // error like a busy HTTPS port.
    let (metrics_listener, metrics_addr) = match config.metrics_listen {
        Some(addr) => {
            let (listener, bound) = bind(addr).await?;
            (Some(listener), Some(bound))
        }
        None => (None, None),
    };
    // `stop_tx`: the shutdown request. `stop_rx`: the shutdown delay is
    // over (drain.rs); listeners, connections and background tasks stop.
    let (stop_tx, requested) = watch::channel(false);
    let (close_tx, stop_rx) = watch::channel(false);
    let draining = drain::Draining::default();
    tokio::spawn(drain::sequence(
        requested,
        draining.clone(),
        config.shutdown_delay,
        close_tx,
    ));
    if let Some(reloader) = prepared.reloader {
        tokio::spawn(reloader.run(config.reload_every, stop_rx.clone()));
    }
    if let Some(dir) = config.policies_dir.clone() {
        let folder = load_dir(&dir).map_err(|errors| {
            ServerError::Policies(errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))
        })?;
        if folder.set.policies.is_empty() && !config.allow_no_policies {
            // Most likely a mount that went wrong (an empty ConfigMap, a
            // wrong path inside it): starting would enforce nothing.
            return Err(ServerError::Policies(format!(
                "{}: the folder holds no policies; pass --allow-no-policies to start with none",
                dir.display()
            )));
        }
        reload::log_skipped(&folder.skipped);
        tracing::info!(dir = %dir.display(), policies = folder.set.policies.len(), "policies loaded");
        if let Some(note) = crate::policy::namespace_guards::webhook_note(&folder.set) {
            tracing::warn!("{note}");
        }
        config.policies.replace(folder.set);
        let (store, every, mut stop) = (config.policies.clone(), config.policy_reload_every, stop_rx.clone());
        let allow_no_policies = config.allow_no_policies;
        tokio::spawn(async move {
            tokio::select! {
                () = reload::watch(dir, store, every, allow_no_policies) => {}
                _ = stop.wait_for(|stopped| *stopped) => {}
            }
        });
    }
    // The metrics port's descriptors come out of the webhook's share, plus
    // one for a connection it is closing at its cap.
    let metrics_share = metrics_listener
        .as_ref()
        .map_or(0, |_| limits::METRICS_MAX_CONNECTIONS as u64 + 1);
    let max_connections = config.limits.max_connections.unwrap_or_else(|| {
        fd_limit::default_max_connections(fd_limit::soft_fd_limit().map(|soft| soft.saturating_sub(metrics_share)))
    });
    let open = Arc::new(connections::OpenConnections::new(max_connections));
    let intake = Arc::new(intake::Intake::new(&config.limits, config.max_body));
    let mut metrics = metrics::Metrics::new(config.target);
    metrics.watch_policies(config.policies.clone());
    metrics.watch_certificate(prepared.store);
    metrics.watch_caches(config.cluster.clone());
    metrics.watch_apiserver_mismatch(config.apiserver_mismatch.clone());
    for collector in std::mem::take(&mut config.collectors) {
        metrics.watch(collector);
    }
    metrics.watch_taint_rule_reach(config.taint_rule_reach.clone());
    let (reading_open, reading_intake, reading_memory) = (open.clone(), intake.clone(), intake.clone());
    metrics.watch_capacity(metrics::Capacity {
        connections: Box::new(move || reading_open.count()),
        reviews: Box::new(move || reading_intake.reviews_in_flight()),
        review_memory: Box::new(move || reading_memory.review_memory()),
    });
    let metrics = Arc::new(metrics);
    let activity = Arc::new(activity::Activity::default());
    tokio::spawn(activity::report(
        activity.clone(),
        config.summary_every,
        stop_rx.clone(),
    ));
    let state = routes::AppState {
        cluster: config.cluster,
        ready: config.ready,
        metrics: metrics.clone(),
        policies: config.policies,
        toleration_restriction: config.toleration_restriction,
        activity,
        intake,
        draining: draining.clone(),
        target: config.target,
        scale_workloads: config.scale_workloads,
    };
    let app = routes::router(state);
    let shared = Arc::new(connection::Shared {
        listener: connection::Listener::Webhook,
        acceptor: Some(TlsAcceptor::from(Arc::new(prepared.rustls))),
        app,
        http: http_builder(config.limits.idle_timeout),
        first_request_timeout: config.limits.first_request_timeout,
        idle_timeout: config.limits.idle_timeout,
        close_timeout: config.shutdown_timeout,
        draining: draining.clone(),
        metrics: metrics.clone(),
    });
    tracing::info!(
        max_connections,
        max_concurrent_reviews = config.limits.max_reviews,
        "connection and review caps"
    );
    let https = connections::accept_loop(listener, shared, open, stop_rx.clone(), config.shutdown_timeout);
    let task = match metrics_listener {
        Some(listener) => {
            // The webhook's silence timeouts, and a small cap of its own.
            let shared = Arc::new(connection::Shared {
                listener: connection::Listener::Metrics,
                acceptor: None,
                app: routes::metrics_router(metrics.clone()),
                http: http_builder(config.limits.idle_timeout),
                first_request_timeout: config.limits.first_request_timeout,
                idle_timeout: config.limits.idle_timeout,
                close_timeout: config.shutdown_timeout,
                draining,
                metrics,
            });
            let open = Arc::new(connections::OpenConnections::new(limits::METRICS_MAX_CONNECTIONS));
            let plain = connections::accept_loop(listener, shared, open, stop_rx, config.shutdown_timeout);
            // One task, so `wait` returns once both have stopped.
            tokio::spawn(async move {
                tokio::join!(https, plain);
            })
        }
        None => tokio::spawn(https),
    };
    Ok(RunningServer {
        local_addr,
        metrics_addr,
        ca_file: prepared.ca_file,
        stop: ShutdownHandle(Arc::new(stop_tx)),
        task,
    })
}

/// A listener and the address it got (the real port when asked for 0).
async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), ServerError> {
    let bind_error = |source| ServerError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    Ok((listener, bound))
}

/// Waits for SIGTERM (what the kubelet sends) or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = ctrl_c => {}
        () = sigterm() => {}
    }
}

#[cfg(unix)]
async fn sigterm() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            term.recv().await;
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM");
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(not(unix))]
async fn sigterm() {
    std::future::pending::<()>().await;
}

struct PreparedTls {
    rustls: rustls::ServerConfig,
    /// The certificate served, for the expiry metric.
    store: Arc<tls::CertStore>,
    ca_file: Option<PathBuf>,
    reloader: Option<tls::Reloader>,
}

fn prepare_tls(source: &TlsSource) -> Result<PreparedTls, ServerError> {
    match source {
        TlsSource::Files { cert, key } => {
            let (store, reloader) = tls::Reloader::load(cert, key)?;
            Ok(PreparedTls {
                rustls: tls::server_config(store.clone())?,
                store,
                ca_file: None,
                reloader: Some(reloader),
            })
        }
        TlsSource::Generate { dir, sans } => {
            let generated = certs::ensure_dev_certs(dir, sans)?;
            tracing::info!(
                reused = generated.reused,
                "development certificate ready; put this in the webhook caBundle: base64 -w0 {}",
                generated.ca_cert.display()
            );
            let store = tls::CertStore::load(&generated.cert, &generated.key)?;
            Ok(PreparedTls {
                rustls: tls::server_config(store.clone())?,
                store,
                ca_file: Some(generated.ca_cert),
                reloader: None,
            })
        }
        TlsSource::Managed(cert) => {
            // Swapped in place on renewal, expiry metric included.
            let store = cert.store();
            Ok(PreparedTls {
                rustls: tls::server_config(store.clone())?,
                store,
                ca_file: None,
                reloader: None,
            })
        }
    }
}

/// Resolves when shutdown is asked for, or when every sender is gone and
/// nobody could ask for it any more.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    drain::signalled(stop).await;
}

/// How much later than the idle timeout hyper's own header clock fires.
const HEADER_READ_BACKSTOP: Duration = Duration::from_secs(5);

/// HTTP/1.1 with keep-alive and HTTP/2, chosen by ALPN (or the h2 preface).
/// The connection itself closes silent connections (`connection.rs`);
/// hyper's own clocks here bound slow headers and vanished peers.
fn http_builder(idle_timeout: Duration) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .keep_alive(true)
        // hyper runs this clock from the end of one answer to the end of
        // the next request's headers. The connection's own idle and
        // first-request timeouts close silent connections first (and count
        // them); this is a backstop a little later. Left unset, hyper's
        // default would be 30 s, below the apiserver's 90 s idle close.
        .header_read_timeout(idle_timeout.saturating_add(HEADER_READ_BACKSTOP))
        // Headers and body in one buffer, so one write per response.
        .writev(false);
    builder
        .http2()
        .timer(TokioTimer::new())
        // Finds peers that vanished without closing (no FIN, no RST).
        .keep_alive_interval(Duration::from_secs(60))
        .keep_alive_timeout(Duration::from_secs(20));
    builder
}
