//! `draguard serve`: the HTTPS admission webhook.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use k8s_quantity::Quantity;

use super::compiled_policies;
use crate::cluster::apiserver::{self, Apiserver, Recheck};
use crate::cluster::live::LiveView;
use crate::controllers::admission_policies_sync::Ownership;
use crate::controllers::background_audit::round::RoundSettings;
use crate::controllers::background_audit::{AuditSettings, BackgroundAudit};
use crate::controllers::lease;
use crate::controllers::lease_gauge::LeaseGauge;
use crate::controllers::mutate_conditions_sync::MutateConditions;
use crate::controllers::standing_taint_rules::{self, Settings as StandingSettings, StandingTaintRules};
use crate::controllers::validate_conditions_sync::ValidateConditions;
use crate::controllers::webhook_certs::{CertSettings, SERVICE_ACCOUNT_NAMESPACE, WebhookCerts, default_namespace};
use crate::kubernetes::apiserver_report::Mismatch;
use crate::policy::toleration_restriction::TolerationRestrictionConfigError;
use crate::server::limits::{
    DEFAULT_BODY_TIMEOUT, DEFAULT_FIRST_REQUEST_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_REVIEWS,
    DEFAULT_REVIEW_MEMORY,
};
use crate::server::{
    self, DEFAULT_MAX_BODY, DEFAULT_SHUTDOWN_DELAY, DEFAULT_SHUTDOWN_TIMEOUT, ManagedCert, ServerConfig, ServerError,
    ServerLimits, TlsSource,
};

/// Why `draguard serve` exits with 2: it could not start (or, rarer, the
/// server task died; that is reported the same way).
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// Binding, TLS, the policy folder, or the server task.
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error(transparent)]
    TolerationRestrictionConfig(#[from] TolerationRestrictionConfigError),
    /// `--kubeconfig` names a file that cannot be used: asked for
    /// explicitly, so it is an error, not a fallback to no cluster.
    #[error("cannot use kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        path: PathBuf,
        source: kube::config::KubeconfigError,
    },
    #[error("cannot create the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// `--kubernetes-version` or `--feature-gates` name no usable rules.
    #[error(transparent)]
    Target(#[from] super::target::TargetError),
    /// A flag that works on the cluster, without one.
    #[error("{flag} needs a cluster (a kubeconfig or the in-cluster service account)")]
    NeedsCluster { flag: &'static str },
    #[error("{0}")]
    Audit(String),
}

impl StartupError {
    /// What to print. Policy errors are a list: all of it. Others may come
    /// with a source excerpt (a kubeconfig's YAML errors): the first line
    /// says what is wrong.
    fn summary(&self) -> String {
        let text = self.to_string();
        match self {
            StartupError::Server(ServerError::Policies(_)) => text,
            _ => text.lines().next().unwrap_or_default().to_owned(),
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address and port to serve HTTPS on.
    #[arg(long, default_value = "0.0.0.0:8443", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Also serve `GET /metrics` over plain HTTP on this address (e.g.
    /// `0.0.0.0:9090`), for Prometheus to scrape without TLS. The HTTPS
    /// `/metrics` stays.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<SocketAddr>,
    /// PEM certificate (chain) to serve; reloaded when the file changes.
    #[arg(long, requires = "tls_key", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Without --tls-cert: folder where a development CA and certificate are
    /// generated, and reused on the next start.
    #[arg(long, default_value = "certs", value_name = "DIR")]
    pub certs_dir: PathBuf,
    /// Extra DNS name or IP address for the generated certificate (repeatable),
    /// e.g. `draguard.draguard.svc` (the Service of deploy/base).
    #[arg(long = "san", value_name = "NAME", conflicts_with = "tls_cert")]
    pub sans: Vec<String>,
    /// Largest request body accepted, in bytes; suffixes Ki, Mi, Gi (and
    /// k, M, G) are understood.
    #[arg(long, default_value = "3Mi", value_parser = parse_size, value_name = "BYTES")]
    pub max_body: usize,
    /// Folder of toleration policies (or one policy file): loaded at start (a missing folder or a
    /// broken file stops the start), then watched; edits apply within
    /// seconds, broken edits are logged and the last good policies stay.
    /// Without it no policy applies, and the log says so.
    #[arg(long, value_name = "DIR")]
    pub policies: Option<PathBuf>,
    /// Start, and reload, even when the --policies folder holds no policy
    /// (by default that stops the start and a reload is rejected: an empty
    /// folder is usually a mount gone wrong).
    #[arg(long, requires = "policies")]
    pub allow_no_policies: bool,
    /// Do not look for a cluster: judge with the request alone.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub no_cluster: bool,
    /// Kubeconfig to watch the cluster with (default: $KUBECONFIG,
    /// ~/.kube/config, then the in-cluster service account).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub toleration_restriction: super::TolerationRestrictionArgs,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
    /// Keep a ResourceQuota `draguard-<policy>` with the policy's quota in
    /// every namespace a policy selects, so the apiserver's own (atomic)
    /// quota admission enforces it under any concurrency. Needs a cluster;
    /// touches only the ResourceQuotas it created.
    #[arg(long, conflicts_with = "no_cluster")]
    pub sync_quotas: bool,
    /// Keep the webhook CA and serving certificate in a Secret (created if
    /// absent, renewed before expiry, shared by all replicas), serve it from
    /// memory and put the CA into caBundle of the webhook configurations'
    /// entries that call --webhook-service. Needs a cluster.
    #[arg(long, conflicts_with_all = ["tls_cert", "no_cluster", "sans"])]
    pub manage_webhook_certs: bool,
    /// Apply what `draguard policy compile` makes of the policies in force
    /// (ValidatingAdmissionPolicies and bindings, server-side apply, field
    /// manager draguard), keep them in step with policy reloads, and delete
    /// the ones no policy makes any more; with --manage-webhook-certs the
    /// validating entries then stop sending what the apiserver enforces
    /// itself. Needs a cluster, and rights on those kinds
    /// (deploy/components/admission-policies).
    #[arg(long, conflicts_with = "no_cluster")]
    pub manage_admission_policies: bool,
    /// The objects `draguard policy compile` prints are applied by someone
    /// else (a GitOps tool): read them, and, with --manage-webhook-certs,
    /// stop sending to the webhook what those the apiserver holds as
    /// compiled from the policies in force judge. Needs a cluster.
    #[arg(long, conflicts_with_all = ["no_cluster", "manage_admission_policies"])]
    pub compiled_policies_applied: bool,
    /// With --manage-webhook-certs: the Secret holding the CA and certificate.
    #[arg(
        long,
        default_value = "draguard-tls",
        value_name = "NAME",
        requires = "manage_webhook_certs"
    )]
    pub webhook_secret: String,
    /// With --manage-webhook-certs: namespace of the Secret and the Service
    /// (default: $POD_NAMESPACE, else the service account's namespace, else
    /// `draguard`).
    // No `requires`: clap counts $POD_NAMESPACE as given, and pods set it
    // whether or not they manage certificates.
    #[arg(long, env = "POD_NAMESPACE", value_name = "NS")]
    pub webhook_namespace: Option<String>,
    /// With --manage-webhook-certs: the Service the apiserver calls; the
    /// certificate is valid for SVC, SVC.NS, SVC.NS.svc and
    /// SVC.NS.svc.cluster.local.
    #[arg(
        long,
        default_value = "draguard",
        value_name = "NAME",
        requires = "manage_webhook_certs"
    )]
    pub webhook_service: String,
    /// With --manage-webhook-certs: name of both the
    /// MutatingWebhookConfiguration and the ValidatingWebhookConfiguration.
    #[arg(
        long,
        default_value = "draguard",
        value_name = "NAME",
        requires = "manage_webhook_certs"
    )]
    pub webhook_config: String,
    /// Audit what already runs every DURATION (`1h`, `30m`): judge every
    /// existing object as `draguard audit --cluster` does, write a
    /// PolicyReport per namespace with findings and a ClusterPolicyReport,
    /// export `draguard_audit_findings`; at once after a policy change too.
    /// Only the replica holding the Lease `draguard-audit` audits. Needs a
    /// cluster and the RBAC of deploy/components/audit. Off by default.
    #[arg(long, value_parser = parse_interval, value_name = "DURATION", conflicts_with = "no_cluster")]
    pub audit_interval: Option<Duration>,
    /// With --audit-interval: the JSON one part of a round may hold (the
    /// cluster-scoped objects with every ResourceClaim, or one namespace's
    /// objects); a larger part is not judged, and the round says so.
    #[arg(long, default_value = "16Mi", value_parser = parse_size, value_name = "BYTES", requires = "audit_interval")]
    pub audit_part_size: usize,
    /// Log output format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Open connections at most; at the cap the listener stops accepting
    /// until one closes. Default: 128 below the open-file limit (which
    /// serve raises to its hard limit at start), at most 4096.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// Reviews (/validate, /mutate) in progress at once, body reading
    /// included; beyond it the answer is 503 with Retry-After. /healthz and
    /// /readyz are never behind it.
    #[arg(long, default_value_t = DEFAULT_MAX_REVIEWS, value_name = "N", value_parser = parse_count)]
    pub max_concurrent_reviews: usize,
    /// Bytes the reviews in progress may hold together, from the first
    /// byte of their body to their written answer, each charged 16 KiB, 4
    /// bytes per body byte, 256 per JSON element and 448 per object; beyond
    /// it the answer is 503 with Retry-After. Never below the charge of an element-free
    /// body of --max-body bytes. (--body-memory is its former name.)
    #[arg(long, alias = "body-memory", default_value = "96Mi", value_parser = parse_size, value_name = "BYTES")]
    pub review_memory: usize,
    /// A connection that sends no request this long after its TLS
    /// handshake is closed.
    #[arg(long, default_value = "10s", value_parser = parse_timeout, value_name = "DURATION")]
    pub first_request_timeout: Duration,
    /// A keep-alive connection (HTTP/1.1, or HTTP/2 without open streams)
    /// with no request this long is closed. Keep it above the apiserver's
    /// 90 s idle close, so the client closes first.
    #[arg(long, default_value = "120s", value_parser = parse_timeout, value_name = "DURATION")]
    pub idle_timeout: Duration,
    /// A request body must arrive whole within this, else HTTP 408 and the
    /// connection is closed.
    #[arg(long, default_value = "10s", value_parser = parse_timeout, value_name = "DURATION")]
    pub body_timeout: Duration,
    /// On SIGTERM: keep accepting and answering this long with /readyz
    /// failing, while the endpoint removal reaches the apiservers and
    /// kube-proxy; HTTP/1.1 answers close their connection meanwhile.
    #[arg(long, default_value = "5s", value_parser = parse_delay, value_name = "DURATION")]
    pub shutdown_delay: Duration,
    /// Then: stop accepting, and give in-flight requests this long to
    /// finish.
    #[arg(long, default_value = "20s", value_parser = parse_timeout, value_name = "DURATION")]
    pub shutdown_timeout: Duration,
}

impl ServeArgs {
    /// The connection and review bounds the flags ask for.
    fn limits(&self) -> ServerLimits {
        ServerLimits {
            max_connections: self.max_connections.map(|n| n as usize),
            first_request_timeout: self.first_request_timeout,
            idle_timeout: self.idle_timeout,
            body_timeout: self.body_timeout,
            max_reviews: self.max_concurrent_reviews,
            review_memory: self.review_memory,
        }
    }
}

/// Exit 0 after a clean shutdown, 2 when the server cannot start.
pub fn run(args: ServeArgs) -> ExitCode {
    // First, while this is the only thread (mimalloc's setters are not
    // thread-safe); why: src/allocator.rs.
    crate::allocator::purge_freed_memory_promptly();
    let json = args.log_format == LogFormat::Json;
    crate::logging::init_logging(json);
    tracing::info!(
        purge_delay_ms = crate::allocator::purge_delay_ms(),
        "allocator: freed memory goes back to the OS after purge_delay_ms (MIMALLOC_PURGE_DELAY overrides)"
    );
    raise_fd_limit();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return startup_failed(json, &StartupError::Runtime(e)),
    };
    let result = runtime.block_on(serve(args));
    // A review stuck past its deadline must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => startup_failed(json, &error),
    }
}

fn startup_failed(json: bool, error: &StartupError) -> ExitCode {
    let message = error.summary();
    if json {
        tracing::error!(error = message, "draguard serve cannot start");
    } else {
        eprintln!("draguard serve: {message}");
    }
    ExitCode::from(2)
}

async fn serve(args: ServeArgs) -> Result<(), StartupError> {
    server::install_crypto_provider();
    let managed = if args.manage_webhook_certs {
        Some(ManagedCert::new()?)
    } else {
        None
    };
    let tls = match &managed {
        Some(cert) => TlsSource::Managed(cert.clone()),
        None => tls_source(&args),
    };
    let mut config = ServerConfig::new(args.listen, tls.clone());
    match &args.policies {
        Some(dir) => config = config.with_policies(dir.clone()),
        None => tracing::warn!("no --policies folder named: no toleration policy applies"),
    }
    config.max_body = args.max_body;
    config.limits = args.limits();
    config.shutdown_delay = args.shutdown_delay;
    config.shutdown_timeout = args.shutdown_timeout;
    config.allow_no_policies = args.allow_no_policies;
    config.metrics_listen = args.metrics_listen;
    config.toleration_restriction = args.toleration_restriction.load()?.map(std::sync::Arc::new);
    let cluster = live_view(&args).await?;
    if let Some((view, client)) = &cluster {
        config = config.with_live_view(view.clone());
        // A scale-up's workload is read when it is reviewed, not cached.
        config.scale_workloads = Some(server::ScaleWorkloads::new(client.clone()));
    }
    config.target = rules_in_force(
        &args,
        cluster.as_ref().map(|(_, client)| client),
        &config.apiserver_mismatch,
    )
    .await?;
    // The compiled admission policies, applied or only read.
    let ownership = match (args.manage_admission_policies, args.compiled_policies_applied) {
        (true, _) => Some(Ownership::Managed),
        (false, true) => Some(Ownership::External),
        (false, false) => None,
    };
    let admission_policies = match (ownership, &cluster) {
        (Some(ownership), Some((_, client))) => Some(compiled_policies::controller(
            client.clone(),
            config.policies.clone(),
            config.target.version,
            &own_namespace(&args),
            ownership,
        )),
        (Some(_), None) => {
            return Err(StartupError::NeedsCluster {
                flag: "--manage-admission-policies",
            });
        }
        (None, _) => None,
    };
    let cert_manager = match (managed, &cluster) {
        (Some(cert), Some((_, client))) => {
            let settings = webhook_cert_settings(&args);
            tracing::info!(
                secret = %format!("{}/{}", settings.namespace, settings.secret),
                service = %settings.service,
                webhook_config = %settings.webhook_config,
                "managing the webhook certificate and caBundle"
            );
            // The same rights keep the defaulting entry's matchCondition
            // in step with the policies: /mutate is called only where a
            // default can apply.
            let conditions = MutateConditions::new(
                client.clone(),
                settings.clone(),
                config.policies.clone(),
                config.toleration_restriction.is_some(),
            );
            // Where that routing still sends writes beyond the policies'
            // selectors.
            config.collectors.push(conditions.routing().collector());
            // And the validating entries' condition: /validate is called
            // only where draguard can change the outcome.
            let validate_conditions = ValidateConditions::new(
                client.clone(),
                settings.clone(),
                config.policies.clone(),
                config.toleration_restriction.is_some(),
                config.apiserver_mismatch.clone(),
                admission_policies
                    .as_ref()
                    .map(|a| (a.enforced(), compiled_policies::COMPILED_NAMES)),
            );
            let manager = WebhookCerts::new(client.clone(), settings, cert);
            let certs_ready = manager.readiness();
            let cluster_ready = config.ready.clone();
            config.ready = std::sync::Arc::new(move || {
                cluster_ready()?;
                // Not ready while some caBundle does not trust the served
                // certificate: the apiserver cannot call this replica then.
                certs_ready.check()
            });
            Some((manager, conditions, validate_conditions))
        }
        (Some(_), None) => {
            return Err(StartupError::NeedsCluster {
                flag: "--manage-webhook-certs",
            });
        }
        (None, _) => None,
    };
    let policies = config.policies.clone();
    let audit = match (args.audit_interval, &cluster) {
        (None, _) => None,
        (Some(_), None) => {
            return Err(StartupError::NeedsCluster {
                flag: "--audit-interval",
            });
        }
        (Some(every), Some((_, client))) => {
            let audit = background_audit(&args, every, client.clone(), &config)?;
            config.collectors.push(audit.status().collector());
            Some(audit)
        }
    };
    let standing = cluster.as_ref().map(|(view, client)| {
        // One replica publishes the Events: the holder of this Lease.
        let holding = LeaseGauge::default();
        config
            .collectors
            .push(holding.collector(standing_taint_rules::LEADER_METRIC, standing_taint_rules::LEADER_HELP));
        let leader = lease::Leader::new(
            client.clone(),
            &own_namespace(&args),
            standing_taint_rules::LEASE_NAME,
            lease::identity(),
            lease::LeaseTimes::default(),
        );
        StandingTaintRules::start(
            client.clone(),
            view.clone(),
            policies.clone(),
            config.target.version,
            config.taint_rule_reach.clone(),
            StandingSettings::default(),
            leader,
            holding,
        )
    });
    let running = server::start(config).await?;
    if let Some(audit) = audit {
        tokio::spawn(audit.run());
    }
    // Set at SIGTERM, for the loops that give up a Lease on their way out.
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    if let Some(standing) = standing {
        // Standing DeviceTaintRules are judged again as their reach grows.
        let mut stopped = stopped.clone();
        tokio::spawn(standing.run(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        }));
    }
    if let Some((manager, conditions, validate_conditions)) = cert_manager {
        tokio::spawn(manager.run());
        tokio::spawn(conditions.run());
        tokio::spawn(validate_conditions.run());
    }
    if let Some(admission_policies) = admission_policies {
        tokio::spawn(admission_policies.run());
    }
    if args.sync_quotas {
        let Some((view, client)) = cluster else {
            return Err(StartupError::NeedsCluster { flag: "--sync-quotas" });
        };
        tracing::info!("keeping a draguard-<policy> ResourceQuota in every namespace a quota policy selects");
        tokio::spawn(draguard_sync(client, policies, view));
    }
    tracing::info!(listen = %running.local_addr(), %tls, max_body = args.max_body, "serving admission reviews");
    if let Some(addr) = running.metrics_addr() {
        tracing::info!(listen = %addr, "serving plain-HTTP /metrics");
    }
    let stop = running.shutdown_handle();
    tokio::spawn(async move {
        server::shutdown_signal().await;
        tracing::info!("shutdown requested");
        let _ = stopping.send(true);
        stop.shutdown();
    });
    running.wait().await?;
    tracing::info!("stopped");
    Ok(())
}

/// The Kubernetes rules to judge with: `--kubernetes-version`, else the
/// apiserver's own version (with the feature gates its `/metrics` reports),
/// else the newest. Logged, since every verdict depends on it. An apiserver
/// that does not answer `/version` in time leaves the newest rules, with a
/// warning that names the flag to pin them. Rules that differ from what the
/// apiserver runs get one WARN line naming both, and the gauge
/// `draguard_apiserver_mismatch`; the apiserver is asked again every 10
/// minutes, and every 30 s while it does not answer (`cluster::apiserver`).
async fn rules_in_force(
    args: &ServeArgs,
    client: Option<&kube::Client>,
    mismatch: &Mismatch,
) -> Result<crate::kubernetes::Target, StartupError> {
    let mut apiserver = client.map(|client| Apiserver::new(client.clone()));
    // Only rules that follow the apiserver wait for it; pinned ones are
    // compared with it in the background.
    let report = match (&mut apiserver, args.target.kubernetes_version) {
        (Some(apiserver), None) => Some(apiserver.read().await),
        _ => None,
    };
    if report.as_ref().is_some_and(|r| r.git_version.is_none()) {
        tracing::warn!("judging with the newest rules; pin them with --kubernetes-version");
    }
    let read = report.clone().unwrap_or_default();
    let (target, source) = args
        .target
        .resolve_with(read.git_version.as_deref(), read.gates.as_deref())?;
    let gates = target.gates.changed_from_defaults(target.version);
    for note in target.gates.not_modelled() {
        tracing::warn!(note = %note, "a feature gate adds fields draguard does not judge");
    }
    let gates_from = match (&source, &read.gates) {
        (super::target::VersionSource::Flag, _) | (_, None) => "the version's defaults and --feature-gates",
        (_, Some(_)) => "the apiserver's /metrics and --feature-gates",
    };
    if matches!(source, super::target::VersionSource::NearestToApiserver(_)) {
        tracing::warn!(kubernetes = %target.version, feature_gates = gates, %source, gates_from, "Kubernetes rules in force");
    } else {
        tracing::info!(kubernetes = %target.version, feature_gates = gates, %source, gates_from, "Kubernetes rules in force");
    }
    if let Some(apiserver) = apiserver {
        let follow = apiserver::follow(apiserver, target, mismatch.clone(), report, Recheck::default());
        tokio::spawn(follow);
    }
    Ok(target)
}

/// Raises the open-file limit to the hard limit, and says what it got: the
/// default connection cap is sized below it.
fn raise_fd_limit() {
    match server::raise_fd_limit() {
        Ok(limit) => tracing::info!(soft = limit.soft, hard = limit.hard, was = limit.was, "open-file limit"),
        Err(reason) => tracing::warn!(reason, "open-file limit left as it was"),
    }
}

/// draguard's own namespace: `--webhook-namespace` ($POD_NAMESPACE), else
/// the service account's, else `draguard`.
fn own_namespace(args: &ServeArgs) -> String {
    match &args.webhook_namespace {
        Some(ns) if !ns.trim().is_empty() => ns.trim().to_owned(),
        _ => {
            let file = std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE).ok();
            default_namespace(None, file.as_deref())
        }
    }
}

/// The background audit of `--audit-interval`, its Lease in draguard's
/// namespace.
fn background_audit(
    args: &ServeArgs,
    every: Duration,
    client: kube::Client,
    config: &ServerConfig,
) -> Result<BackgroundAudit, StartupError> {
    let settings = AuditSettings {
        every,
        namespace: own_namespace(args),
        identity: lease::identity(),
        lease: lease::LeaseTimes::default(),
        round: RoundSettings {
            part_bytes: args.audit_part_size,
            ..RoundSettings::default()
        },
    };
    BackgroundAudit::new(
        client,
        config.policies.clone(),
        config.toleration_restriction.clone(),
        config.target,
        settings,
    )
    .map_err(StartupError::Audit)
}

/// The `--webhook-*` flags, the namespace defaulted as documented.
fn webhook_cert_settings(args: &ServeArgs) -> CertSettings {
    let namespace = own_namespace(args);
    CertSettings::new(
        &args.webhook_secret,
        &namespace,
        &args.webhook_service,
        &args.webhook_config,
    )
}

fn tls_source(args: &ServeArgs) -> TlsSource {
    match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => TlsSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => TlsSource::Generate {
            dir: args.certs_dir.clone(),
            sans: args.sans.clone(),
        },
    }
}

/// The watched cluster caches, or `None` to run without a cluster.
async fn live_view(args: &ServeArgs) -> Result<Option<(LiveView, kube::Client)>, StartupError> {
    let Some(config) = cluster_config(args).await? else {
        return Ok(None);
    };
    tracing::info!(apiserver = %config.cluster_url, "watching the cluster");
    let client = kube::Client::try_from(config).map_err(StartupError::Client)?;
    Ok(Some((LiveView::start(client.clone()), client)))
}

async fn cluster_config(args: &ServeArgs) -> Result<Option<kube::Config>, StartupError> {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    if args.no_cluster {
        tracing::info!("--no-cluster: running without a cluster");
        return Ok(None);
    }
    if let Some(path) = &args.kubeconfig {
        // Asked for explicitly: a broken file is an error, not a fallback.
        let broken = |source| StartupError::Kubeconfig {
            path: path.clone(),
            source,
        };
        let kubeconfig = Kubeconfig::read_from(path).map_err(broken)?;
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(broken)?;
        return Ok(Some(config));
    }
    match kube::Config::infer().await {
        Ok(config) => Ok(Some(config)),
        Err(e) => {
            tracing::info!(reason = %e, "no kubeconfig or in-cluster config found; running without a cluster");
            Ok(None)
        }
    }
}

/// How often `--sync-quotas` reconciles (policy changes apply within this).
const SYNC_QUOTAS_EVERY: Duration = Duration::from_secs(30);

async fn draguard_sync(client: kube::Client, policies: crate::policy_files::reload::PolicyStore, view: LiveView) {
    crate::controllers::quota_sync::run(client, policies, view, SYNC_QUOTAS_EVERY).await;
}

/// `3145728`, `3Mi`, `512Ki`, `1G`: a byte count for `--max-body`,
/// `--review-memory` and check's `--max-file-size`. A quantity, narrower
/// than apimachinery's and with its own messages: whole digits that fit a
/// `usize`, then one of the suffixes the message names (`K` too, which
/// apimachinery does not know).
pub(super) fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits);
    if number.parse::<usize>().is_err() {
        return Err(format!("{text:?} is not a size (examples: 1048576, 512Ki, 3Mi)"));
    }
    // A binary suffix is applied here: Go caps a binary quantity at the
    // int64 maximum, and a size has always reached usize's.
    let (decimal, binary) = match suffix {
        "" => ("", 0),
        "Ki" => ("", 10),
        "Mi" => ("", 20),
        "Gi" => ("", 30),
        "k" | "K" => ("k", 0),
        "M" => ("M", 0),
        "G" => ("G", 0),
        _ => {
            return Err(format!("unknown size suffix {suffix:?} (use Ki, Mi, Gi, k, M or G)"));
        }
    };
    // Whole digits and a known suffix: only the size itself can fail.
    let size = Quantity::parse(&format!("{number}{decimal}"))
        .ok()
        .and_then(|q| q.as_u64().ok())
        .and_then(|n| n.checked_mul(1 << binary))
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| format!("{text:?} is too large"))?;
    if size == 0 {
        return Err("the size must be above zero".into());
    }
    Ok(size)
}

/// `10s`, `500ms`, `2m`: a Go-style duration, above zero.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    match parse_delay(text)? {
        d if d.is_zero() => Err("the timeout must be above zero".into()),
        d => Ok(d),
    }
}

/// `1h`: how often something recurs, above zero.
fn parse_interval(text: &str) -> Result<Duration, String> {
    match parse_delay(text)? {
        d if d.is_zero() => Err("the interval must be above zero".into()),
        d => Ok(d),
    }
}

/// `5s`, `0s`: a Go-style duration, zero allowed.
fn parse_delay(text: &str) -> Result<Duration, String> {
    server::duration::parse_go_duration(text.trim())
        .ok_or_else(|| format!("{text:?} is not a duration (examples: 10s, 500ms, 2m)"))
}

/// A count above zero.
fn parse_count(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) | Err(_) => Err(format!("{text:?} is not a count above zero")),
        Ok(n) => Ok(n),
    }
}

// The defaults above are spelled as text; keep them equal to the library's.
const _: () = assert!(DEFAULT_MAX_BODY == 3 << 20);
const _: () = assert!(DEFAULT_REVIEW_MEMORY == 96 << 20);
const _: () = assert!(DEFAULT_FIRST_REQUEST_TIMEOUT.as_secs() == 10);
const _: () = assert!(DEFAULT_IDLE_TIMEOUT.as_secs() == 120);
const _: () = assert!(DEFAULT_BODY_TIMEOUT.as_secs() == 10);
const _: () = assert!(DEFAULT_SHUTDOWN_DELAY.as_secs() == 5);
const _: () = assert!(DEFAULT_SHUTDOWN_TIMEOUT.as_secs() == 20);

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(args: &[&str]) -> Result<ServeArgs, clap::Error> {
        Wrapper::try_parse_from(std::iter::once("serve").chain(args.iter().copied())).map(|w| w.serve)
    }

    #[test]
    fn allow_no_policies_goes_with_a_policy_folder() {
        assert!(
            parse(&["--policies", "p", "--allow-no-policies"])
                .expect("valid")
                .allow_no_policies
        );
        assert!(!parse(&["--policies", "p"]).expect("valid").allow_no_policies);
        let alone = parse(&["--allow-no-policies"]).expect_err("needs --policies");
        assert_eq!(alone.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn startup_error_messages() {
        let policies = ServerError::Policies("a.yaml:1:7: unclosed bracket\nb.yaml:2:1: unknown field".into());
        let kubeconfig = || StartupError::Kubeconfig {
            path: "/k".into(),
            source: kube::config::KubeconfigError::ReadConfig(std::io::Error::other("gone"), "/k".into()),
        };
        let two_lines = StartupError::Runtime(std::io::Error::other("first\nsecond"));
        let cases = [
            (
                StartupError::Runtime(std::io::Error::other("no threads")),
                "cannot start the async runtime: no threads",
                "cannot start the async runtime: no threads",
            ),
            (
                StartupError::Server(policies),
                "invalid policies:\na.yaml:1:7: unclosed bracket\nb.yaml:2:1: unknown field",
                "invalid policies:\na.yaml:1:7: unclosed bracket\nb.yaml:2:1: unknown field",
            ),
            (
                StartupError::Server(ServerError::BadSan("a b".into())),
                "invalid --san \"a b\": it is neither an IP address nor a DNS name",
                "invalid --san \"a b\": it is neither an IP address nor a DNS name",
            ),
            (
                kubeconfig(),
                "cannot use kubeconfig /k: failed to read kubeconfig from '\"/k\"': gone",
                "cannot use kubeconfig /k: failed to read kubeconfig from '\"/k\"': gone",
            ),
            (
                StartupError::NeedsCluster { flag: "--sync-quotas" },
                "--sync-quotas needs a cluster (a kubeconfig or the in-cluster service account)",
                "--sync-quotas needs a cluster (a kubeconfig or the in-cluster service account)",
            ),
            (
                two_lines,
                "cannot start the async runtime: first\nsecond",
                "cannot start the async runtime: first",
            ),
        ];
        for (error, display, summary) in cases {
            assert_eq!(error.to_string(), display);
            assert_eq!(error.summary(), summary, "only policy errors keep every line");
        }
    }

    #[test]
    fn a_ptr_config_that_cannot_be_read_stops_the_start() {
        let args = parse(&["--pod-toleration-restriction-config", "/nonexistent/ptr.yaml"]).unwrap();
        let error = StartupError::from(args.toleration_restriction.load().expect_err("no such file"));
        assert!(
            error.summary().starts_with("/nonexistent/ptr.yaml: cannot read: "),
            "{error}"
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("3Mi"), Ok(3 << 20));
        assert_eq!(parse_size("512Ki"), Ok(512 << 10));
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("2k"), Ok(2000));
        assert!(parse_size("3MB").is_err());
        assert!(parse_size("Mi").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("99999999999999999999Gi").is_err());
    }

    /// Each message, and the inputs apimachinery would read otherwise.
    #[test]
    fn size_messages() {
        assert_eq!(parse_size(" 2K "), Ok(2000), "K, which apimachinery lacks");
        assert_eq!(parse_size("9999999999Gi"), Ok(9999999999 << 30), "past Go's int64 cap");
        assert_eq!(parse_size("18446744073709551615"), Ok(usize::MAX));
        assert_eq!(
            parse_size("16777215Ti").err(),
            Some(r#"unknown size suffix "Ti" (use Ki, Mi, Gi, k, M or G)"#.into())
        );
        assert_eq!(
            parse_size("1.5Mi").err(),
            Some(r#"unknown size suffix ".5Mi" (use Ki, Mi, Gi, k, M or G)"#.into())
        );
        assert_eq!(
            parse_size("1e3").err(),
            Some(r#"unknown size suffix "e3" (use Ki, Mi, Gi, k, M or G)"#.into())
        );
        assert_eq!(
            parse_size("+1Mi").err(),
            Some(r#""+1Mi" is not a size (examples: 1048576, 512Ki, 3Mi)"#.into())
        );
        assert_eq!(
            parse_size("Mi").err(),
            Some(r#""Mi" is not a size (examples: 1048576, 512Ki, 3Mi)"#.into())
        );
        assert_eq!(
            parse_size("99999999999999999999").err(),
            Some(r#""99999999999999999999" is not a size (examples: 1048576, 512Ki, 3Mi)"#.into())
        );
        assert_eq!(
            parse_size("18446744073709551615k").err(),
            Some(r#""18446744073709551615k" is too large"#.into())
        );
        assert_eq!(parse_size("0Gi").err(), Some("the size must be above zero".into()));
    }

    #[test]
    fn defaults() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.listen, "0.0.0.0:8443".parse().unwrap());
        assert_eq!(args.max_body, DEFAULT_MAX_BODY);
        assert_eq!(args.certs_dir, PathBuf::from("certs"));
        assert_eq!(args.policies, None, "no policy folder is picked up implicitly");
        assert_eq!(args.log_format, LogFormat::Text);
        assert_eq!(args.metrics_listen, None);
        assert_eq!(
            tls_source(&args),
            TlsSource::Generate {
                dir: "certs".into(),
                sans: vec![]
            }
        );
    }

    #[test]
    fn connection_review_and_shutdown_defaults() {
        let args = parse(&[]).unwrap();
        assert_eq!(
            args.limits(),
            ServerLimits {
                max_connections: None,
                first_request_timeout: Duration::from_secs(10),
                idle_timeout: Duration::from_secs(120),
                body_timeout: Duration::from_secs(10),
                max_reviews: 256,
                review_memory: 96 << 20,
            }
        );
        assert_eq!(
            args.limits(),
            ServerLimits::default(),
            "the flags and the library agree"
        );
        assert_eq!(args.shutdown_delay, Duration::from_secs(5));
        assert_eq!(args.shutdown_timeout, Duration::from_secs(20));
    }

    #[test]
    fn connection_review_and_shutdown_flags() {
        let args = parse(&[
            "--max-connections=900",
            "--max-concurrent-reviews=32",
            "--review-memory=16Mi",
            "--first-request-timeout=3s",
            "--idle-timeout=2m",
            "--body-timeout=500ms",
            "--shutdown-delay=0s",
            "--shutdown-timeout=45s",
        ])
        .unwrap();
        assert_eq!(
            args.limits(),
            ServerLimits {
                max_connections: Some(900),
                first_request_timeout: Duration::from_secs(3),
                idle_timeout: Duration::from_secs(120),
                body_timeout: Duration::from_millis(500),
                max_reviews: 32,
                review_memory: 16 << 20,
            }
        );
        assert_eq!(args.shutdown_delay, Duration::ZERO, "no delay is a choice");
        assert_eq!(args.shutdown_timeout, Duration::from_secs(45));
        let former = parse(&["--body-memory=16Mi"]).unwrap();
        assert_eq!(former.review_memory, 16 << 20, "--body-memory is still read");
        for bad in [
            "--max-connections=0",
            "--max-concurrent-reviews=0",
            "--review-memory=0",
            "--first-request-timeout=0s",
            "--idle-timeout=0",
            "--body-timeout=soon",
            "--shutdown-timeout=0s",
            "--shutdown-delay=5",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn cert_and_key_come_together() {
        assert!(parse(&["--tls-cert", "a.crt"]).is_err());
        assert!(parse(&["--tls-key", "a.key"]).is_err());
        let args = parse(&["--tls-cert", "a.crt", "--tls-key", "a.key"]).unwrap();
        assert_eq!(
            tls_source(&args),
            TlsSource::Files {
                cert: "a.crt".into(),
                key: "a.key".into()
            }
        );
    }

    #[test]
    fn flags() {
        let args = parse(&[
            "--san",
            "a.example",
            "--san",
            "10.0.0.1",
            "--max-body",
            "512Ki",
            "--log-format",
            "json",
            "--metrics-listen",
            "0.0.0.0:9090",
        ])
        .unwrap();
        assert_eq!(args.metrics_listen, Some("0.0.0.0:9090".parse().unwrap()));
        assert_eq!(args.sans, ["a.example", "10.0.0.1"]);
        assert_eq!(args.max_body, 512 << 10);
        assert_eq!(args.log_format, LogFormat::Json);
        assert!(parse(&["--no-cluster", "--kubeconfig", "k"]).is_err());
        assert!(parse(&["--listen", "nowhere"]).is_err());
    }

    #[test]
    fn the_background_audit_is_off_by_default_and_needs_a_cluster() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.audit_interval, None);
        let args = parse(&["--audit-interval", "30m", "--audit-part-size", "8Mi"]).unwrap();
        assert_eq!(args.audit_interval, Some(Duration::from_secs(1800)));
        assert_eq!(args.audit_part_size, 8 << 20);
        assert_eq!(parse(&["--audit-interval", "1h"]).unwrap().audit_part_size, 16 << 20);
        assert!(parse(&["--audit-interval", "1h", "--no-cluster"]).is_err());
        assert!(
            parse(&["--audit-part-size", "8Mi"]).is_err(),
            "only with --audit-interval"
        );
        assert_eq!(parse_interval("0s"), Err("the interval must be above zero".into()));
    }

    #[test]
    fn managed_webhook_certs() {
        let args = parse(&["--manage-webhook-certs", "--webhook-namespace", "sys"]).unwrap();
        assert!(args.manage_webhook_certs);
        assert_eq!(
            webhook_cert_settings(&args),
            CertSettings::new("draguard-tls", "sys", "draguard", "draguard")
        );
        let args = parse(&[
            "--manage-webhook-certs",
            "--webhook-secret=s",
            "--webhook-namespace=ns",
            "--webhook-service=svc",
            "--webhook-config=cfg",
        ])
        .unwrap();
        assert_eq!(webhook_cert_settings(&args), CertSettings::new("s", "ns", "svc", "cfg"));
        for conflicting in [
            &["--tls-cert", "a.crt", "--tls-key", "a.key"][..],
            &["--no-cluster"],
            &["--san", "x.example"],
        ] {
            let mut argv = vec!["--manage-webhook-certs"];
            argv.extend_from_slice(conflicting);
            assert!(parse(&argv).is_err(), "{argv:?}");
        }
        assert!(
            parse(&["--webhook-secret", "s"]).is_err(),
            "the --webhook-* flags only make sense with --manage-webhook-certs"
        );
    }
}
