//! `draguard serve` against a (fake) cluster: a NoExecute DeviceTaintRule
//! admitted while it reached no device crosses its policy's eviction cap
//! once a slice and an allocated claim appear. The reach gauge follows,
//! one Warning Event names the numbers and the policy, and with
//! `onExceed: Pause` the rule's effect is patched to None. With two
//! replicas, only the holder of the Lease publishes, and its successor
//! does not repeat it.

mod support {
    pub mod fake_apiserver;
    pub mod kubeconfig;
    pub mod serve_process;
}

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};
use support::serve_process::{self, ServeProcess};

const RULE: &str = "gpu-maintenance";
const PODS: &str = r#"draguard_taint_rule_reach{rule="gpu-maintenance",kind="pods"}"#;
const NAMESPACES: &str = r#"draguard_taint_rule_reach{rule="gpu-maintenance",kind="namespaces"}"#;
/// A round is 5 s (`Settings::default`); a crossing shows within two.
const WITHIN: Duration = Duration::from_secs(20);

/// The ResourceSlice and the allocated ResourceClaim of
/// examples/audit/snapshot.yaml: two pods in `ml` on gpu.example.com.
fn slice_and_claim() -> Vec<(&'static str, Value)> {
    let text = std::fs::read_to_string("examples/audit/snapshot.yaml").expect("the snapshot");
    let list: Value = serde_saphyr::from_str(&text).expect("YAML");
    let mut found = Vec::new();
    for item in list["items"].as_array().into_iter().flatten() {
        match item["kind"].as_str() {
            Some("ResourceSlice") => found.push(("resourceslices", item.clone())),
            Some("ResourceClaim") => found.push(("resourceclaims", item.clone())),
            _ => {}
        }
    }
    assert_eq!(found.len(), 2, "one slice and one claim");
    found
}

/// A standing NoExecute rule on gpu.example.com's devices, as admitted
/// while the cluster had none.
fn rule() -> Value {
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
        "metadata": {"name": RULE, "uid": "uid-rule"},
        "spec": {"deviceSelector": {"driver": "gpu.example.com"},
            "taint": {"key": "example.com/maintenance", "effect": "NoExecute", "timeAdded": "2026-11-21T10:00:00Z"}}
    })
}

struct Serve {
    process: ServeProcess,
    /// The policy folder.
    _dir: tempfile::TempDir,
}

/// `draguard serve` with one policy capping evictions at one pod.
fn serve(fake: &FakeApiServer, on_exceed: Option<&str>) -> Serve {
    serve_logging(fake, on_exceed, false)
}

/// [`serve`], its log kept for [`ServeProcess::stop`] when `keep_log` (a
/// short run only: nobody reads the pipe until then).
fn serve_logging(fake: &FakeApiServer, on_exceed: Option<&str>, keep_log: bool) -> Serve {
    let dir = tempfile::tempdir().expect("a folder");
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).expect("policies folder");
    let on_exceed = on_exceed.map(|v| format!(", onExceed: {v}")).unwrap_or_default();
    std::fs::write(
        policies.join("blast-radius.yaml"),
        format!(
            "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: blast-radius}}\n\
             spec: {{taintRules: {{maxEvictedPods: 1{on_exceed}}}}}\n"
        ),
    )
    .expect("policy written");
    let policies = policies.to_string_lossy().into_owned();
    let args = ["--kubernetes-version", "1.37", "--policies", &policies];
    let process = if keep_log {
        serve_process::spawn(fake.addr, &args)
    } else {
        serve_process::spawn_discarding_log(fake.addr, &args)
    };
    Serve { process, _dir: dir }
}

impl Serve {
    async fn scrape(&self) -> String {
        self.process.scrape().await
    }

    /// The value of `series` once `wanted` accepts it, within `WITHIN`.
    async fn until(&self, series: &str, wanted: impl Fn(Option<f64>) -> bool) -> Option<f64> {
        self.until_within(series, WITHIN, wanted).await
    }

    /// The value of `series` once `wanted` accepts it, within `limit`.
    async fn until_within(&self, series: &str, limit: Duration, wanted: impl Fn(Option<f64>) -> bool) -> Option<f64> {
        let started = Instant::now();
        loop {
            let value = metric(&self.scrape().await, series);
            if wanted(value) || started.elapsed() > limit {
                return value;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn metric(scrape: &str, series: &str) -> Option<f64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// The Events the fake got about the rule, as `(method, reason, note)`.
fn events(fake: &FakeApiServer) -> Vec<(String, String, String)> {
    fake.events()
        .into_iter()
        .filter(|(_, _, e)| e["regarding"]["name"] == RULE)
        .map(|(method, ns, e)| {
            assert_eq!(ns, "default", "a cluster-scoped object's Events live in default");
            assert_eq!(e["regarding"]["kind"], "DeviceTaintRule");
            assert_eq!(e["regarding"]["apiVersion"], "resource.k8s.io/v1");
            assert_eq!(e["regarding"]["uid"], "uid-rule");
            assert_eq!(e["reportingController"], "draguard");
            (
                method,
                e["reason"].as_str().unwrap_or_default().to_owned(),
                e["note"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

async fn cluster_with_the_rule() -> FakeApiServer {
    let mut objects = Objects::default();
    objects.lists.insert("devicetaintrules".into(), vec![rule()]);
    FakeApiServer::start(objects).await
}

const EXCEEDS: &str = "DeviceTaintRule gpu-maintenance now reaches 2 pods in 1 namespaces, past its caps: toleration \
                       policy \"blast-radius\": the rule would evict 2 pods, more than taintRules.maxEvictedPods (1); \
                       to go past this cap on purpose, annotate the rule draguard.dev/acknowledge-evictions: \"2\"";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standing_rule_crossing_its_cap_gets_one_event_and_its_reach_gauge() {
    let fake = cluster_with_the_rule().await;
    let serve = serve(&fake, None);
    // Tracked, and within its cap: it reaches nothing yet.
    assert_eq!(serve.until(PODS, |v| v.is_some()).await, Some(0.0));
    assert_eq!(metric(&serve.scrape().await, NAMESPACES), Some(0.0));
    assert_eq!(events(&fake), vec![], "no Event within the caps");
    // A driver publishes its devices and a claim is allocated on them.
    for (collection, object) in slice_and_claim() {
        fake.apply(collection, object);
    }
    let crossed = Instant::now();
    assert_eq!(serve.until(PODS, |v| v == Some(2.0)).await, Some(2.0));
    assert_eq!(metric(&serve.scrape().await, NAMESPACES), Some(1.0));
    let started = Instant::now();
    while events(&fake).is_empty() && started.elapsed() < WITHIN {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(crossed.elapsed() < WITHIN, "within seconds: {:?}", crossed.elapsed());
    assert_eq!(
        events(&fake),
        vec![("POST".to_owned(), "ReachExceedsCaps".to_owned(), EXCEEDS.to_owned())]
    );
    let event = &fake.events()[0].2;
    assert_eq!(event["type"], "Warning");
    // The same state is not said again: a change elsewhere makes the next
    // rounds count the rule again, to the same answer.
    fake.apply(
        "namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}),
    );
    let mut claim = slice_and_claim()[1].1.clone();
    claim["metadata"]["labels"] = json!({"touched": "yes"});
    fake.apply("resourceclaims", claim);
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(events(&fake).len(), 1, "{:?}", events(&fake));
    assert_eq!(
        fake.writes_of("PATCH"),
        Vec::<String>::new(),
        "without onExceed: Pause the rule is left as it is"
    );
    // The claim released: back within the caps, said once.
    fake.delete("resourceclaims", "ml", "trainer");
    assert_eq!(serve.until(PODS, |v| v == Some(0.0)).await, Some(0.0));
    let started = Instant::now();
    while events(&fake).len() < 2 && started.elapsed() < WITHIN {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        events(&fake)[1..],
        [(
            "POST".to_owned(),
            "ReachWithinCaps".to_owned(),
            "DeviceTaintRule gpu-maintenance reaches 0 pods in 0 namespaces, within its caps again".to_owned()
        )]
    );
    assert_eq!(fake.events()[1].2["type"], "Normal");
    // The rule deleted: its series go.
    fake.delete("devicetaintrules", "", RULE);
    assert_eq!(serve.until(PODS, |v| v.is_none()).await, None);
    assert_eq!(metric(&serve.scrape().await, NAMESPACES), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_exceed_pause_sets_the_effect_to_none_and_says_why() {
    let fake = cluster_with_the_rule().await;
    let serve = serve(&fake, Some("Pause"));
    assert_eq!(serve.until(PODS, |v| v.is_some()).await, Some(0.0));
    let before = fake.watched_objects("devicetaintrules")[0]["metadata"]["resourceVersion"].clone();
    for (collection, object) in slice_and_claim() {
        fake.apply(collection, object);
    }
    let started = Instant::now();
    while fake.writes_of("PATCH").is_empty() && started.elapsed() < WITHIN {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let patches = fake.writes_of("PATCH");
    assert_eq!(patches.len(), 1, "{patches:?}");
    let body: Value = serde_json::from_str(
        patches[0]
            .strip_prefix("devicetaintrules/gpu-maintenance ")
            .expect("a patch of the rule"),
    )
    .expect("JSON");
    assert_eq!(
        body["metadata"]["resourceVersion"], before,
        "sent with the judged version"
    );
    assert_eq!(body["spec"], json!({"taint": {"effect": "None"}}));
    let stored = &fake.watched_objects("devicetaintrules")[0];
    assert_eq!(stored["spec"]["taint"]["effect"], "None");
    assert_eq!(
        stored["spec"]["taint"]["key"], "example.com/maintenance",
        "the rest is kept"
    );
    let why = stored["metadata"]["annotations"]["draguard.dev/paused"]
        .as_str()
        .expect("the annotation");
    let (when, reason) = why.split_once(": ").expect("a time first");
    assert!(when.parse::<jiff::Timestamp>().is_ok(), "{when}");
    assert_eq!(
        reason,
        "reach 2 pods in 1 namespaces passed the caps of toleration policy \"blast-radius\": the rule would evict 2 \
         pods, more than taintRules.maxEvictedPods (1); to go past this cap on purpose, annotate the rule \
         draguard.dev/acknowledge-evictions: \"2\""
    );
    // The Event of the crossing, then the one of the pause.
    let started = Instant::now();
    while events(&fake).len() < 2 && started.elapsed() < WITHIN {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        events(&fake),
        vec![
            ("POST".to_owned(), "ReachExceedsCaps".to_owned(), EXCEEDS.to_owned()),
            ("POST".to_owned(), "Paused".to_owned(), why.to_owned()),
        ]
    );
    // Paused, the rule no longer stands: no series, no second patch.
    assert_eq!(serve.until(PODS, |v| v.is_none()).await, None);
    assert_eq!(fake.writes_of("PATCH").len(), 1);
}

const LEADER: &str = "draguard_taint_rules_leader";
const LEASE: (&str, &str) = ("draguard", "draguard-taint-rules");

/// The `ReachExceedsCaps` and `ReachWithinCaps` Events, as `(method, reason)`.
fn reasons(fake: &FakeApiServer) -> Vec<(String, String)> {
    events(fake)
        .into_iter()
        .map(|(method, reason, _)| (method, reason))
        .collect()
}

fn post(reason: &str) -> (String, String) {
    ("POST".to_owned(), reason.to_owned())
}

/// Two replicas (deploy/base runs two) against one apiserver: only the
/// holder of the Lease draguard-taint-rules publishes, so a crossing is one
/// Event, not one per replica. Killed, the holder is replaced within the
/// lease duration (and a renewal); its successor reads from the Lease what
/// was said, does not say it again, and says what changes next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_publish_one_event_and_the_successor_does_not_repeat_it() {
    let fake = cluster_with_the_rule().await;
    let first = serve(&fake, None);
    assert_eq!(
        first.until(LEADER, |v| v == Some(1.0)).await,
        Some(1.0),
        "the only replica leads"
    );
    let holder = fake.lease(LEASE.0, LEASE.1).expect("the Lease")["spec"]["holderIdentity"].clone();
    let second = serve(&fake, None);
    assert_eq!(
        second.until(PODS, |v| v.is_some()).await,
        Some(0.0),
        "the second counts too"
    );
    assert_eq!(metric(&second.scrape().await, LEADER), Some(0.0), "but does not lead");

    for (collection, object) in slice_and_claim() {
        fake.apply(collection, object);
    }
    assert_eq!(first.until(PODS, |v| v == Some(2.0)).await, Some(2.0));
    assert_eq!(
        second.until(PODS, |v| v == Some(2.0)).await,
        Some(2.0),
        "each replica's own gauge"
    );
    let started = Instant::now();
    while events(&fake).is_empty() && started.elapsed() < WITHIN {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Two more rounds of both replicas: still the one Event.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(
        events(&fake),
        vec![("POST".to_owned(), "ReachExceedsCaps".to_owned(), EXCEEDS.to_owned())]
    );
    // What was said is in the Lease, by the rule's uid.
    let lease = fake.lease(LEASE.0, LEASE.1).expect("the Lease");
    assert_eq!(lease["spec"]["holderIdentity"], holder, "held by the first all along");
    let note: Value = serde_json::from_str(
        lease["metadata"]["annotations"]["draguard.dev/standing-taint-rules-said"]
            .as_str()
            .expect("the note"),
    )
    .expect("JSON");
    assert_eq!(
        note.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["uid-rule".to_owned()])
    );

    // The holder dies without a word (no release): the second takes over
    // once it has seen the Lease unchanged for 15 s.
    let killed = Instant::now();
    drop(first);
    assert_eq!(
        second
            .until_within(LEADER, Duration::from_secs(30), |v| v == Some(1.0))
            .await,
        Some(1.0)
    );
    let took = killed.elapsed();
    eprintln!("take-over after the holder was killed: {took:?}");
    assert!(
        took >= Duration::from_secs(13) && took < Duration::from_secs(22),
        "15 s of silence, seen by 2-s reads: {took:?}"
    );
    let lease = fake.lease(LEASE.0, LEASE.1).expect("the Lease");
    assert_ne!(lease["spec"]["holderIdentity"], holder);
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    // It judges the rule again at once against what was said: two rounds,
    // and no second ReachExceedsCaps.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(reasons(&fake), vec![post("ReachExceedsCaps")]);

    // It does say what changes: the claim released, within the caps, once.
    fake.delete("resourceclaims", "ml", "trainer");
    assert_eq!(second.until(PODS, |v| v == Some(0.0)).await, Some(0.0));
    let started = Instant::now();
    while events(&fake).len() < 2 && started.elapsed() < WITHIN {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(reasons(&fake), vec![post("ReachExceedsCaps"), post("ReachWithinCaps")]);
}

/// Without the Lease's Role (an upgrade that kept the old RBAC), no replica
/// publishes: the reach is counted and exported all the same, the gauge
/// says nobody leads, and the log says why once, not once per 2-s try.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_lease_role_nothing_is_published_and_the_log_says_it_once() {
    let fake = cluster_with_the_rule().await;
    fake.forbid_leases();
    let serve = serve_logging(&fake, Some("Pause"), true);
    assert_eq!(serve.until(PODS, |v| v.is_some()).await, Some(0.0));
    for (collection, object) in slice_and_claim() {
        fake.apply(collection, object);
    }
    assert_eq!(serve.until(PODS, |v| v == Some(2.0)).await, Some(2.0), "counted");
    // Two more rounds, five more tries for the Lease.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(metric(&serve.scrape().await, LEADER), Some(0.0));
    assert_eq!(events(&fake), vec![], "no Event without the Lease");
    assert_eq!(fake.writes_of("PATCH"), Vec::<String>::new(), "and no pause");
    let log = serve.process.stop();
    let lines = log.lines();
    // Besides the start's INFO line that names the Lease.
    let said: Vec<&Value> = lines
        .iter()
        .filter(|l| l["lease"] == "draguard-taint-rules" && l["level"] != "INFO")
        .collect();
    assert_eq!(said.len(), 1, "{}", log.stderr);
    assert_eq!(said[0]["level"], "WARN");
    assert_eq!(
        said[0]["message"],
        "cannot read or renew the Lease; this replica writes nothing the Lease guards until it holds it (at most \
         one line a minute; `suppressed` errors since the last)"
    );
    assert!(
        said[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot get resource \"leases\" in API group \"coordination.k8s.io\"")),
        "{}",
        said[0]
    );
}

/// A holder that is stopped (SIGTERM: a rolling update, a drain) gives the
/// Lease up with its note: another replica speaks within a renewal instead
/// of after 15 s of silence, and still does not repeat what was said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_holder_hands_the_lease_over_at_once() {
    let fake = cluster_with_the_rule().await;
    let first = serve(&fake, None);
    assert_eq!(first.until(LEADER, |v| v == Some(1.0)).await, Some(1.0));
    let second = serve(&fake, None);
    assert_eq!(second.until(PODS, |v| v.is_some()).await, Some(0.0));
    for (collection, object) in slice_and_claim() {
        fake.apply(collection, object);
    }
    let started = Instant::now();
    while events(&fake).is_empty() && started.elapsed() < WITHIN {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(reasons(&fake), vec![post("ReachExceedsCaps")]);
    // Let the holder note it in the Lease (the round's end).
    tokio::time::sleep(Duration::from_secs(1)).await;

    let stopped = Instant::now();
    first.process.terminate();
    assert_eq!(
        second
            .until_within(LEADER, Duration::from_secs(10), |v| v == Some(1.0))
            .await,
        Some(1.0)
    );
    let took = stopped.elapsed();
    eprintln!("take-over after the holder was stopped: {took:?}");
    assert!(
        took < Duration::from_secs(5),
        "a renewal (2 s), not a duration: {took:?}"
    );
    let lease = fake.lease(LEASE.0, LEASE.1).expect("the Lease");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    // Two rounds of the new holder: the note came through the release.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(reasons(&fake), vec![post("ReachExceedsCaps")]);
}
