//! What a write pays for an admission webhook on this apiserver: a
//! measurement, not a test (`scripts/apiserver-latency.sh` runs it; the
//! suite's scenario list does not hold it, so CI never times anything).
//!
//! Seven setups, each a namespace the others' admission does not reach, so
//! that the same server-side dry-run create of a ResourceClaim meets
//! exactly one of:
//! - `none`: no webhook and no policy (labelled `draguard.dev/ignore`);
//! - `noop`: the no-op webhook (`tools/noop-webhook`: TLS, parse, echo the
//!   uid, allow), registered as draguard is, through a Service, so the
//!   apiserver dials it and verifies `noop.<ns>.svc` the same way: the
//!   floor for any webhook;
//! - `vap`: a hand-written ValidatingAdmissionPolicy of the rule the
//!   shipped gpu-device-taints states (no device toleration of
//!   `gpu.example.com/degraded`), judging a claim with another toleration;
//! - `vap-words`: the same rule hand-written with what the webhook (and so
//!   the compiled policy) does beyond it: the limit of 16 tolerations a
//!   list refused first, as Invalid, and messages that name what is
//!   refused (`messageExpression`, which the apiserver evaluates on every
//!   write): what the compiled policy's work costs written by hand;
//! - `draguard`: deploy/base's entries and `serve`, a claim without
//!   tolerations in a namespace no policy selects: it holds nothing
//!   draguard judges beyond the apiserver, so serve's routing
//!   (`draguard-can-change-outcome`) sends it nowhere: no call, only the
//!   entries' matchConditions;
//! - `judged`: a claim with an opaque driver config, which stays in the
//!   webhook: one call to `/validate`;
//! - `compiled`: the `vap` setup's claim, judged by what `serve
//!   --manage-admission-policies` compiled of gpu-device-taints (serve runs
//!   on that one policy here): no call and no matchConditions pass (the
//!   claims entry's namespaceSelector leaves its namespace out), the
//!   apiserver's CEL alone.
//!
//! The creates are sequential and interleaved (each round takes the
//! setups in a rotated order), so that a machine's load drifts over all
//! alike, and timed in-process with kube's client (kubectl's `-v=6`
//! log counts whole milliseconds, coarser than the differences measured).
//! Each run prints every setup's median and p99, and the median added over
//! `none`.
//!
//! After the runs, each setup's creates again, alone, with the apiserver's
//! `/metrics` diffed around them (`latency_metrics.rs`): per write, the
//! time of each admission plugin, each webhook entry's matchConditions
//! pass and call, as the apiserver measured them.
//!
//! `E2E_LATENCY_ROUNDS` (default 200) creates per setup per run, after 20
//! rounds of warm-up; `E2E_LATENCY_RUNS` (default 3) runs;
//! `E2E_LATENCY_METRICS_WRITES` (default: the rounds) creates per setup for
//! the metrics; `E2E_NOOP_WEBHOOK` the no-op webhook's binary (the script
//! builds it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::Outcome;
use crate::cluster::Cluster;
use crate::process::{Daemon, free_port};

const NONE: &str = "latency-none";
const NOOP: &str = "latency-noop";
const VAP: &str = "latency-vap";
const VAP_WORDS: &str = "latency-vap-words";
const DRAGUARD: &str = "latency-draguard";
const JUDGED: &str = "latency-judged";
const COMPILED: &str = "latency-compiled";
/// The shipped gpu-device-taints (policies/gpu-devices.yaml), alone, but
/// for the `draguard` and `judged` setups' namespaces: there the cost is
/// draguard's routing (the claims entry's matchConditions) and its call.
/// The namespaces it covers are left out of the claims entry's
/// namespaceSelector (src/controllers/claims_selector.rs), so the
/// `compiled` setup pays no entry of draguard's at all.
const DEVICE_POLICY: &str = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\n\
    metadata: {name: gpu-device-taints}\nspec:\n  namespaces:\n    exclude: [kube-system, latency-draguard, latency-judged]\n  devices:\n\
    \x20   deny:\n    - {key: gpu.example.com/degraded, operator: Exists}\n  message: degraded GPUs are never scheduled to\n";
const NOOP_CONFIGURATION: &str = "e2e-latency-noop";
const VAP_NAME: &str = "e2e-latency";
const VAP_WORDS_NAME: &str = "e2e-latency-words";
const WARM_UP_ROUNDS: usize = 20;

/// The measurement's entry in the runner, when `E2E_LATENCY` is set.
pub const SCENARIO: (&str, crate::Scenario) = ("latency::measure", measure);

/// Whether this run measures latency instead of running the suite.
pub fn requested() -> bool {
    std::env::var_os("E2E_LATENCY").is_some_and(|v| v != "0")
}

fn env_count(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("{name}={v}: not a count")),
        Err(_) => default,
    }
}

pub fn measure(cluster: &mut Cluster) -> Outcome {
    let rounds = env_count("E2E_LATENCY_ROUNDS", 200);
    let runs = env_count("E2E_LATENCY_RUNS", 3);
    let noop_binary = PathBuf::from(
        std::env::var_os("E2E_NOOP_WEBHOOK")
            .expect("E2E_NOOP_WEBHOOK names the no-op webhook's binary (scripts/apiserver-latency.sh builds it)"),
    );

    cluster.ensure_base_serving();
    let admin = cluster.admin.clone();
    for namespace in [NONE, NOOP, VAP, VAP_WORDS] {
        admin.apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}, labels: {{draguard.dev/ignore: \"true\"}}}}\n"
        ));
    }
    for namespace in [DRAGUARD, JUDGED, COMPILED] {
        admin.apply(&format!(
            "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {namespace}}}\n"
        ));
    }
    // serve on gpu-device-taints alone, applying what it compiles to.
    admin.ok(&[
        "apply",
        "-n",
        "draguard",
        "-f",
        &format!(
            "{}/deploy/components/admission-policies/rbac.yaml",
            crate::cluster::ROOT
        ),
    ]);
    let folder = cluster.scratch("latency-policies");
    std::fs::create_dir_all(&folder).expect("policies folder");
    std::fs::write(folder.join("gpu-device-taints.yaml"), DEVICE_POLICY).expect("the policy");
    cluster.start_serve(&crate::draguard::ServeOptions {
        policies: Some(folder),
        extra_args: vec!["--manage-admission-policies".to_owned()],
    });
    // Until serve's condition is stored, every claim is sent.
    crate::draguard::wait_for_validate_condition(&admin);

    let _noop = start_noop(cluster, &noop_binary);
    register_vap(cluster);
    wait_until_compiled(cluster);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for kube's client");
    let client = runtime.block_on(client(cluster));
    let setups = [NONE, NOOP, VAP, VAP_WORDS, DRAGUARD, JUDGED, COMPILED];
    let apis: Vec<Api<ResourceClaim>> = setups.iter().map(|ns| Api::namespaced(client.clone(), ns)).collect();
    let claim: ResourceClaim = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "latency"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}
    }))
    .expect("a claim");
    let with = |exactly: Value, devices: Value| -> ResourceClaim {
        let mut request = json!({"deviceClassName": "gpu.example.com"});
        if let (Some(r), Some(more)) = (request.as_object_mut(), exactly.as_object()) {
            r.extend(more.clone());
        }
        let mut claim = json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "latency"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}
        });
        if let (Some(d), Some(more)) = (claim["spec"]["devices"].as_object_mut(), devices.as_object()) {
            d.extend(more.clone());
        }
        serde_json::from_value(claim).expect("a claim")
    };
    let tolerating = with(TOLERATION.clone(), json!({}));
    let configured = with(json!({}), CONFIG.clone());
    let claims: Vec<&ResourceClaim> = setups
        .iter()
        .map(|s| match *s {
            VAP | VAP_WORDS | COMPILED => &tolerating,
            JUDGED => &configured,
            _ => &claim,
        })
        .collect();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let create = |setup: usize| -> Duration {
        let start = Instant::now();
        let result = runtime.block_on(apis[setup].create(&dry_run, claims[setup]));
        let took = start.elapsed();
        if let Err(e) = result {
            panic!("dry-run create in {}: {e}", setups[setup]);
        }
        took
    };

    for round in 0..WARM_UP_ROUNDS {
        for i in 0..setups.len() {
            create((i + round) % setups.len());
        }
    }

    println!(
        "\nadded apiserver latency per write: sequential server-side dry-run creates of a ResourceClaim, \
         the {} setups interleaved, {rounds} per setup per run",
        setups.len()
    );
    for run in 1..=runs {
        let calls_before = draguard_calls(cluster);
        let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(rounds); setups.len()];
        for round in 0..rounds {
            for i in 0..setups.len() {
                let setup = (i + round) % setups.len();
                times[setup].push(create(setup));
            }
        }
        let calls = (draguard_calls(cluster) - calls_before) / rounds as f64;
        let floor = median(&mut times[0]);
        println!("run {run} of {runs}");
        println!(
            "  {:<10} {:>10} {:>10} {:>14}",
            "setup", "median", "p99", "added median"
        );
        for (setup, samples) in setups.iter().zip(times.iter_mut()) {
            let m = median(samples);
            let p99 = percentile(samples, 0.99);
            let added = m.as_secs_f64() - floor.as_secs_f64();
            let note = if *setup == JUDGED {
                format!("   ({calls:.2} draguard calls per write, all setups)")
            } else {
                String::new()
            };
            println!(
                "  {:<10} {:>7.2} ms {:>7.2} ms {:>+11.2} ms{note}",
                setup.trim_start_matches("latency-"),
                ms(m),
                ms(p99),
                added * 1e3
            );
        }
    }
    println!();

    // Where the time goes, by the apiserver's own histograms: each setup
    // alone, so every series that moves is that setup's.
    let writes = env_count("E2E_LATENCY_METRICS_WRITES", rounds);
    println!("admission time per write by the apiserver's /metrics, {writes} creates per setup");
    let scrape = || crate::latency_metrics::read(&admin.ok(&["get", "--raw", "/metrics"]));
    for (setup, name) in setups.iter().enumerate() {
        let before = scrape();
        for _ in 0..writes {
            create(setup);
        }
        crate::latency_metrics::print(name.trim_start_matches("latency-"), writes, &before, &scrape());
    }
    println!();

    admin.ok(&[
        "delete",
        "validatingwebhookconfiguration",
        NOOP_CONFIGURATION,
        "--ignore-not-found",
    ]);
    for name in [VAP_NAME, VAP_WORDS_NAME] {
        for kind in ["validatingadmissionpolicybinding", "validatingadmissionpolicy"] {
            admin.ok(&["delete", kind, name, "--ignore-not-found"]);
        }
    }
    cluster.stop_serve();
    for kind in ["validatingadmissionpolicybinding", "validatingadmissionpolicy"] {
        admin.ok(&["delete", kind, "-l", "app.kubernetes.io/managed-by=draguard"]);
    }
    Outcome::Passed
}

/// A kube client as the administrator, from its kubeconfig.
async fn client(cluster: &Cluster) -> kube::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kubeconfig =
        kube::config::Kubeconfig::read_from(cluster.control_plane.admin_kubeconfig()).expect("admin kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .expect("admin client config");
    kube::Client::try_from(config).expect("admin client")
}

/// Starts the no-op webhook and registers it through a Service of its
/// namespace turned into an ExternalName for localhost, as the harness
/// registers draguard. The entry first names a port nothing listens on
/// and must refuse, then the webhook's and must admit: only then is it
/// known that the apiserver calls the webhook.
fn start_noop(cluster: &Cluster, binary: &Path) -> Daemon {
    let admin = &cluster.admin;
    let port = free_port();
    let cert = cluster.scratch("noop-webhook.crt");
    admin.apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: noop, namespace: {NOOP}}}\n\
         spec: {{type: ExternalName, externalName: localhost}}\n"
    ));
    let mut command = Command::new(binary);
    command
        .arg(format!("127.0.0.1:{port}"))
        .arg(&cert)
        .arg(format!("noop.{NOOP}.svc"));
    let mut noop = Daemon::spawn("noop-webhook", command, &cluster.scratch("noop-webhook.log"));
    noop.wait_until(Duration::from_secs(10), "the no-op webhook's certificate", || {
        std::fs::metadata(&cert).is_ok_and(|m| m.len() > 0)
    });
    let pem = std::fs::read(&cert).expect("the no-op webhook's certificate");
    let bundle = base64::engine::general_purpose::STANDARD.encode(&pem);
    let claim = crate::draguard::claim_yaml(NOOP, "probe");
    for (entry_port, admitted, what) in [
        (
            free_port(),
            false,
            "the no-op entry in force (refused: nothing listens on its port)",
        ),
        (port, true, "the no-op entry calling the webhook (admitted)"),
    ] {
        admin.apply(&noop_configuration(entry_port, &bundle).to_string());
        wait_for_answer(cluster, &claim, admitted, what);
    }
    noop
}

fn noop_configuration(port: u16, bundle: &str) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": NOOP_CONFIGURATION},
        "webhooks": [{
            "name": "noop.latency.e2e.draguard.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "timeoutSeconds": 2,
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NOOP}},
            "clientConfig": {
                "service": {"name": "noop", "namespace": NOOP, "path": "/validate", "port": port},
                "caBundle": bundle,
            },
            "rules": [{
                "apiGroups": ["resource.k8s.io"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": ["resourceclaims"], "scope": "Namespaced",
            }],
        }],
    })
}

/// A device toleration no policy here denies.
static TOLERATION: std::sync::LazyLock<Value> =
    std::sync::LazyLock::new(|| json!({"tolerations": [{"key": "e2e.draguard.dev/latency", "operator": "Exists"}]}));
/// An opaque driver config, which only the webhook judges.
static CONFIG: std::sync::LazyLock<Value> = std::sync::LazyLock::new(
    || json!({"config": [{"requests": ["gpu"], "opaque": {"driver": "gpu.example.com", "parameters": {"apiVersion": "v1", "kind": "Config"}}}]}),
);

/// A claim in `namespace` with a toleration of `key`.
fn tolerating_yaml(namespace: &str, key: &str) -> String {
    format!(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {{name: probe, namespace: {namespace}}}\n\
         spec:\n  devices:\n    requests:\n    - name: gpu\n      exactly: {{deviceClassName: gpu.example.com, tolerations: [{{key: {key}, operator: Exists}}]}}\n"
    )
}

/// The hand-written policies' list of every request's and subrequest's
/// tolerations.
const LISTS: &str = "  variables:\n  - name: lists\n    expression: >-\n\
    \x20     !has(object.spec.devices) || !has(object.spec.devices.requests) ? [] :\n\
    \x20     object.spec.devices.requests.map(r, has(r.exactly) && has(r.exactly.tolerations) ? [r.exactly.tolerations] : []) +\n\
    \x20     object.spec.devices.requests.map(r, has(r.firstAvailable) ? r.firstAvailable.map(s, has(s.tolerations) ? s.tolerations : []) : [])\n";

/// A hand-written ValidatingAdmissionPolicy of gpu-device-taints' rule (no
/// request or subrequest tolerates `gpu.example.com/degraded`), with a
/// fixed message.
const VAP_VALIDATIONS: &str = "  validations:\n  - expression: >-\n\
    \x20     !variables.lists.exists(l, l.exists(ts, ts.exists(t, has(t.key) && t.key == 'gpu.example.com/degraded')))\n\
    \x20   message: degraded GPUs are never scheduled to\n";

/// The same rule with the webhook's duties beyond it: a new claim's list
/// past 16 tolerations refused first, as Invalid, and each refusal's
/// message naming what it refuses.
const VAP_WORDS_VALIDATIONS: &str = "  validations:\n  - expression: >-\n\
    \x20     request.operation != 'CREATE' || !variables.lists.exists(l, l.exists(ts, size(ts) > 16))\n\
    \x20   messageExpression: >-\n\
    \x20     'spec.devices.requests: ' + string(size(variables.lists.filter(l, l.exists(ts, size(ts) > 16)))) + ' requests list more than 16 tolerations'\n\
    \x20   reason: Invalid\n\
    \x20 - expression: >-\n\
    \x20     !variables.lists.exists(l, l.exists(ts, ts.exists(t, has(t.key) && t.key == 'gpu.example.com/degraded')))\n\
    \x20   messageExpression: >-\n\
    \x20     'degraded GPUs are never scheduled to; namespace ' + request.namespace + ' tolerates them in ' +\n\
    \x20     string(size(variables.lists.filter(l, l.exists(ts, ts.exists(t, has(t.key) && t.key == 'gpu.example.com/degraded'))))) + ' requests'\n\
    \x20   reason: Forbidden\n";

/// Registers the hand-written policies, each bound to its namespace, in
/// force once a claim it refuses is refused.
fn register_vap(cluster: &Cluster) {
    for (name, namespace, validations) in [
        (VAP_NAME, VAP, VAP_VALIDATIONS),
        (VAP_WORDS_NAME, VAP_WORDS, VAP_WORDS_VALIDATIONS),
    ] {
        register_hand_written(cluster, name, namespace, validations);
    }
}

fn register_hand_written(cluster: &Cluster, name: &str, namespace: &str, validations: &str) {
    let admin = &cluster.admin;
    admin.apply(&format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: {name}}}\n\
         spec:\n  failurePolicy: Fail\n  matchConstraints:\n    resourceRules:\n\
         \x20   - apiGroups: [resource.k8s.io]\n      apiVersions: [\"*\"]\n      operations: [CREATE, UPDATE]\n      resources: [resourceclaims]\n\
         {LISTS}{validations}\
         ---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: {name}}}\n\
         spec:\n  policyName: {name}\n  validationActions: [Deny]\n  matchResources:\n\
         \x20   namespaceSelector: {{matchLabels: {{kubernetes.io/metadata.name: {namespace}}}}}\n"
    ));
    let refused = tolerating_yaml(namespace, "gpu.example.com/degraded");
    wait_for_answer(cluster, &refused, false, "the ValidatingAdmissionPolicy in force");
    wait_for_answer(
        cluster,
        &tolerating_yaml(namespace, "e2e.draguard.dev/latency"),
        true,
        "its other claims admitted",
    );
}

/// Waits until the compiled policy refuses what gpu-device-taints refuses
/// and serve's routing no longer sends the `compiled` setup's claim.
fn wait_until_compiled(cluster: &mut Cluster) {
    wait_for_answer(
        cluster,
        &tolerating_yaml(COMPILED, "gpu.example.com/degraded"),
        false,
        "the compiled policy in force",
    );
    let start = Instant::now();
    loop {
        let before = draguard_calls(cluster);
        wait_for_answer(
            cluster,
            &tolerating_yaml(COMPILED, "e2e.draguard.dev/latency"),
            true,
            "admitted",
        );
        if draguard_calls(cluster) == before {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the compiled setup's claim still reaches draguard after 60 s"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Not even the claims entry's conditions: its namespaceSelector leaves
    // the compiled setup's namespace out.
    let sent_only = json!({"key": "kubernetes.io/metadata.name", "operator": "In",
        "values": ["kube-system", DRAGUARD, JUDGED]});
    if let Err(selector) = crate::draguard::wait_for_claims_selector(&cluster.admin, &sent_only) {
        panic!("the claims entry still selects the compiled setup's namespace after 60 s: {selector}");
    }
}

/// Waits until a server-side dry run of `yaml` is admitted or refused.
fn wait_for_answer(cluster: &Cluster, yaml: &str, admitted: bool, what: &str) {
    let start = Instant::now();
    loop {
        let run = cluster
            .admin
            .run(&["create", "--dry-run=server", "-f", "-"], Some(yaml));
        if run.success == admitted {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "waiting for {what}: {}{}",
            run.stdout,
            run.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every call draguard has answered, from its `/metrics`.
fn draguard_calls(cluster: &mut Cluster) -> f64 {
    let metrics = cluster.ensure_base_serving().metrics();
    metrics
        .lines()
        .filter(|l| l.starts_with("draguard_admission_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn median(samples: &mut [Duration]) -> Duration {
    percentile(samples, 0.5)
}

/// The nearest-rank percentile `q` (0 < q <= 1).
fn percentile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort_unstable();
    let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    samples[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
