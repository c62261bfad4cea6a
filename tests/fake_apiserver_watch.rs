//! The fake API server's watched collections against kube-runtime's own
//! `watcher`: if these hold, a draguard test built on the fake sees the
//! list-then-watch behaviour of a real apiserver (paged lists, events,
//! 410 re-lists, slow lists).

mod support {
    pub mod fake_apiserver;
}

use std::collections::BTreeSet;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::WatchParams;
use kube::core::WatchEvent;
use kube::runtime::watcher::{self, Event};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};
use tokio::sync::mpsc::UnboundedReceiver;

const CLAIMS: &str = "resourceclaims";

fn claim(ns: &str, name: &str, count: u32) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count}}]}}})
}

async fn with_claims(claims: Vec<Value>) -> FakeApiServer {
    let mut objects = Objects::default();
    objects.lists.insert(CLAIMS.into(), claims);
    FakeApiServer::start(objects).await
}

type Events<K> = UnboundedReceiver<Result<Event<K>, watcher::Error>>;

/// Runs the watcher on its own task, as a reflector does, so that it moves
/// on (re-lists, re-watches) without the test polling it.
fn watch<K>(api: Api<K>, config: watcher::Config) -> Events<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher::watcher(api, config));
        while let Some(event) = stream.next().await {
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    rx
}

async fn next<K>(events: &mut Events<K>) -> Result<Event<K>, watcher::Error> {
    tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .expect("an event within 10 s")
        .expect("the watcher runs")
}

/// `Init`, the listed objects' names (`ns/name`), `InitDone`.
async fn initial_list<K: kube::Resource>(events: &mut Events<K>) -> BTreeSet<String> {
    assert!(matches!(next(events).await, Ok(Event::Init)), "a list starts with Init");
    let mut names = BTreeSet::new();
    loop {
        match next(events).await {
            Ok(Event::InitApply(object)) => {
                assert!(
                    object.meta().resource_version.is_some(),
                    "listed objects carry a resourceVersion"
                );
                let new = names.insert(full_name(&object));
                assert!(new, "listed twice: {}", full_name(&object));
            }
            Ok(Event::InitDone) => return names,
            other => panic!("in the initial list: {:?}", other.map(|e| kind_of(&e))),
        }
    }
}

fn full_name<K: kube::Resource>(object: &K) -> String {
    let meta = object.meta();
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or(""),
        meta.name.as_deref().unwrap_or("")
    )
}

fn kind_of<K>(event: &Event<K>) -> &'static str {
    match event {
        Event::Apply(_) => "Apply",
        Event::Delete(_) => "Delete",
        Event::Init => "Init",
        Event::InitApply(_) => "InitApply",
        Event::InitDone => "InitDone",
    }
}

fn count(claim: &ResourceClaim) -> Option<i64> {
    claim.spec.as_ref()?.devices.as_ref()?.requests.as_ref()?[0]
        .exactly
        .as_ref()?
        .count
}

async fn applied(events: &mut Events<ResourceClaim>) -> ResourceClaim {
    match next(events).await {
        Ok(Event::Apply(claim)) => claim,
        other => panic!("expected Apply, got {:?}", other.map(|e| kind_of(&e))),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_initial_list_comes_in_pages_of_500() {
    let claims: Vec<Value> = (0..1234)
        .map(|i| claim(&format!("ns-{}", i % 7), &format!("c-{i:04}"), 1))
        .collect();
    let want: BTreeSet<String> = claims
        .iter()
        .map(|c| {
            format!(
                "{}/{}",
                c["metadata"]["namespace"].as_str().unwrap(),
                c["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    let api = with_claims(claims).await;
    let mut events = watch(Api::<ResourceClaim>::all(api.client()), watcher::Config::default());
    assert_eq!(initial_list(&mut events).await, want);
    assert_eq!(api.list_requests(CLAIMS), 3, "500 + 500 + 234");
}

/// A LIST asked without `limit` gets everything at once; one with `limit`
/// gets a continue token until the last page, and every page the first
/// page's resourceVersion, which the watch then starts from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_keep_the_first_pages_resource_version() {
    let api = with_claims((0..5).map(|i| claim("ml", &format!("c{i}"), 1)).collect()).await;
    let claims = Api::<ResourceClaim>::all(api.client());
    let all = claims.list(&Default::default()).await.unwrap();
    assert_eq!(all.items.len(), 5);
    assert_eq!(all.metadata.continue_, None);

    let first = claims.list(&kube::api::ListParams::default().limit(2)).await.unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    // A change between pages: the watch from `rv` reports it.
    api.delete(CLAIMS, "ml", "c0");
    api.apply(CLAIMS, claim("ml", "c9", 1));
    let mut names: Vec<String> = first.items.iter().map(|c| c.name_any()).collect();
    let mut token = first.metadata.continue_.clone();
    while let Some(t) = token {
        let page = claims
            .list(&kube::api::ListParams::default().limit(2).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(page.metadata.resource_version.as_deref(), Some(rv.as_str()));
        names.extend(page.items.iter().map(|c| c.name_any()));
        token = page.metadata.continue_;
    }
    assert_eq!(
        names,
        ["c0", "c1", "c2", "c3", "c4", "c9"],
        "key order, no page skipped"
    );
    let replayed: Vec<String> = claims
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .try_filter_map(|e| async move {
            Ok(match e {
                WatchEvent::Deleted(c) => Some(format!("DELETED {}", c.name_any())),
                WatchEvent::Added(c) => Some(format!("ADDED {}", c.name_any())),
                // The one that ends the watch at its timeout.
                WatchEvent::Bookmark(_) => None,
                other => Some(format!("{other:?}")),
            })
        })
        .try_collect()
        .await
        .unwrap();
    assert_eq!(replayed, ["DELETED c0", "ADDED c9"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_and_deletes_arrive_as_events() {
    let api = with_claims(vec![claim("ml", "a", 1), claim("ml", "b", 1)]).await;
    let mut events = watch(Api::<ResourceClaim>::all(api.client()), watcher::Config::default());
    initial_list(&mut events).await;
    let listed_at = api.resource_version();

    api.apply(CLAIMS, claim("ml", "c", 2));
    let added = applied(&mut events).await;
    assert_eq!(added.name_any(), "c");
    let rv: u64 = added.resource_version().unwrap().parse().unwrap();
    assert!(rv > listed_at, "a change takes the next resourceVersion");

    api.apply(CLAIMS, claim("ml", "a", 5));
    let modified = applied(&mut events).await;
    assert_eq!((modified.name_any(), count(&modified)), ("a".into(), Some(5)));

    assert!(api.delete(CLAIMS, "ml", "b").is_some());
    match next(&mut events).await {
        Ok(Event::Delete(deleted)) => assert_eq!(deleted.name_any(), "b"),
        other => panic!("expected Delete, got {:?}", other.map(|e| kind_of(&e))),
    }
    assert_eq!(api.delete(CLAIMS, "ml", "b"), None, "gone already");
    assert_eq!(api.list_requests(CLAIMS), 1, "no re-list");
}

/// Changes made between the expiry and the re-list are not lost: the new
/// list has them, and none comes as an event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_watches_relist_the_current_state() {
    let api = with_claims(vec![claim("ml", "a", 1), claim("ml", "b", 1)]).await;
    let mut events = watch(Api::<ResourceClaim>::all(api.client()), watcher::Config::default());
    initial_list(&mut events).await;
    // The watch is open once a change comes through it.
    api.apply(CLAIMS, claim("ml", "c", 1));
    assert_eq!(applied(&mut events).await.name_any(), "c");

    // Held, so that the changes below happen before the re-list reads.
    api.hold_lists(CLAIMS);
    api.expire_watches(CLAIMS);
    match next(&mut events).await {
        Err(watcher::Error::WatchError(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        }
        other => panic!("expected the 410, got {:?}", other.map(|e| kind_of(&e))),
    }
    api.apply(CLAIMS, claim("ml", "d", 1));
    api.apply(CLAIMS, claim("ml", "b", 7));
    api.delete(CLAIMS, "ml", "a");
    api.release_lists(CLAIMS);
    let relisted = initial_list(&mut events).await;
    assert_eq!(relisted, BTreeSet::from(["ml/b".into(), "ml/c".into(), "ml/d".into()]));
    assert_eq!(api.list_requests(CLAIMS), 2);

    // Watching again from the re-list's resourceVersion: no second 410,
    // and the expired-time changes are not replayed.
    api.apply(CLAIMS, claim("ml", "e", 1));
    assert_eq!(applied(&mut events).await.name_any(), "e");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_before_the_expiry_gets_410() {
    let api = with_claims(vec![claim("ml", "a", 1)]).await;
    let claims = Api::<ResourceClaim>::all(api.client());
    let old = api.resource_version().to_string();
    api.expire_watches(CLAIMS);
    // With a timeout, so that a missing 410 fails instead of hanging.
    let events: Vec<WatchEvent<ResourceClaim>> = claims
        .watch(&WatchParams::default().timeout(5), &old)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    match events.as_slice() {
        [WatchEvent::Error(status)] => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
            assert!(
                status.message.starts_with("too old resource version"),
                "{}",
                status.message
            );
        }
        other => panic!("expected one 410 ERROR, got {other:?}"),
    }
    // A fresh list's resourceVersion is past the expiry.
    let rv = claims
        .list(&Default::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = claims
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .boxed();
    api.apply(CLAIMS, claim("ml", "b", 1));
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Added(c)) => assert_eq!(c.name_any(), "b"),
        other => panic!("expected ADDED b, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_lists_wait_for_release() {
    let api = with_claims(vec![claim("ml", "a", 1)]).await;
    api.hold_lists(CLAIMS);
    let mut events = watch(Api::<ResourceClaim>::all(api.client()), watcher::Config::default());
    assert!(matches!(next(&mut events).await, Ok(Event::Init)));
    while api.list_requests(CLAIMS) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waited = tokio::time::timeout(Duration::from_millis(300), events.recv()).await;
    assert!(waited.is_err(), "nothing while the list is held");
    api.release_lists(CLAIMS);
    match next(&mut events).await {
        Ok(Event::InitApply(c)) => assert_eq!(c.name_any(), "a"),
        other => panic!("expected InitApply, got {:?}", other.map(|e| kind_of(&e))),
    }
    assert!(matches!(next(&mut events).await, Ok(Event::InitDone)));
}

/// `timeoutSeconds` ends the watch normally, after a bookmark: the watcher
/// watches again from there, without a re-list, and misses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timed_out_watches_resume_without_a_relist() {
    let api = with_claims(vec![claim("ml", "a", 1)]).await;
    let config = watcher::Config::default().timeout(1);
    let mut events = watch(Api::<ResourceClaim>::all(api.client()), config);
    initial_list(&mut events).await;
    api.apply(CLAIMS, claim("ml", "b", 1));
    assert_eq!(applied(&mut events).await.name_any(), "b");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while api.watch_requests(CLAIMS) < 2 {
        assert!(tokio::time::Instant::now() < deadline, "the watcher watches again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    api.apply(CLAIMS, claim("ml", "c", 1));
    assert_eq!(applied(&mut events).await.name_any(), "c");
    assert_eq!(api.list_requests(CLAIMS), 1, "resumed, not re-listed");
}

/// The streaming-list strategy (`sendInitialEvents`): the objects come as
/// ADDED, then the bookmark that ends the initial events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_lists_send_initial_events() {
    let api = with_claims(vec![claim("ml", "a", 1), claim("web", "b", 1)]).await;
    let config = watcher::Config::default().streaming_lists();
    let mut events = watch(Api::<ResourceClaim>::all(api.client()), config);
    assert_eq!(
        initial_list(&mut events).await,
        BTreeSet::from(["ml/a".into(), "web/b".into()])
    );
    assert_eq!(api.list_requests(CLAIMS), 0);
    api.apply(CLAIMS, claim("ml", "c", 1));
    assert_eq!(applied(&mut events).await.name_any(), "c");
}

/// A namespaced watch sees its namespace's objects only; the other watched
/// collections work the same way (cluster-scoped Namespaces here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaced_and_cluster_scoped_collections() {
    let quota = |ns: &str, name: &str| {
        json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name, "namespace": ns},
            "spec": {"hard": {"count/resourceclaims.resource.k8s.io": "10"}}})
    };
    let mut objects = Objects::default();
    objects
        .lists
        .insert("resourcequotas".into(), vec![quota("ml", "q"), quota("web", "q")]);
    objects.lists.insert(
        "namespaces".into(),
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})],
    );
    let api = FakeApiServer::start(objects).await;

    let mut quotas = watch(
        Api::<ResourceQuota>::namespaced(api.client(), "ml"),
        watcher::Config::default(),
    );
    assert_eq!(initial_list(&mut quotas).await, BTreeSet::from(["ml/q".into()]));
    api.apply("resourcequotas", quota("web", "other"));
    api.apply("resourcequotas", quota("ml", "second"));
    match next(&mut quotas).await {
        Ok(Event::Apply(q)) => assert_eq!(full_name(&q), "ml/second", "web's change is not shown"),
        other => panic!("expected Apply, got {:?}", other.map(|e| kind_of(&e))),
    }

    let mut namespaces = watch(Api::<Namespace>::all(api.client()), watcher::Config::default());
    assert_eq!(initial_list(&mut namespaces).await, BTreeSet::from(["/ml".into()]));
    api.apply(
        "namespaces",
        json!({"metadata": {"name": "web", "labels": {"team": "web"}}}),
    );
    match next(&mut namespaces).await {
        Ok(Event::Apply(ns)) => {
            assert_eq!(ns.name_any(), "web");
            assert_eq!(ns.labels().get("team").map(String::as_str), Some("web"));
        }
        other => panic!("expected Apply, got {:?}", other.map(|e| kind_of(&e))),
    }
    assert!(api.delete("namespaces", "", "ml").is_some());
    assert!(matches!(next(&mut namespaces).await, Ok(Event::Delete(ns)) if ns.name_any() == "ml"));
}
