//! The watched collections (namespaces, resourceclaims, resourcequotas,
//! resourceslices, deviceclasses, resourceslicepatches, pods and the two
//! webhook configuration kinds) with the apiserver's list-then-watch contract, so
//! that kube-runtime's `watcher` behaves against the fake as against a
//! cluster:
//!
//! - one resourceVersion counter, as etcd's revision: every change takes
//!   the next number, stamps it on the object, and a LIST answers the
//!   current one;
//! - a LIST is paged by `limit` and `continue`; the continue token carries
//!   the first page's resourceVersion and the last key served, so pages stay
//!   key-ordered under concurrent changes, and the watch from that
//!   resourceVersion replays whatever the later pages missed;
//! - a WATCH from resourceVersion R replays the recorded changes after R,
//!   then streams new ones; without R (or R = "0") it first sends the
//!   current objects as ADDED; it ends normally after `timeoutSeconds`,
//!   with a BOOKMARK first when `allowWatchBookmarks` asks for one;
//! - [`Watched::expire`] plays an etcd compaction: open watches get an
//!   ERROR 410 Expired, and so does any watch from an older resourceVersion,
//!   so the client must re-list; changes made meanwhile reach it only
//!   through that list;
//! - [`Watched::hold`] makes LISTs wait until [`Watched::release`].
//!
//! A LIST always answers the latest state: its `resourceVersion` and
//! `resourceVersionMatch` are not looked at, which any "not older than"
//! request accepts. Label selectors are not implemented (draguard sends
//! none); of field selectors, only `metadata.name=<name>` is, which
//! draguard's watch of its webhook configurations sends (others are
//! ignored).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

/// A watched resource type, as the apiserver serves it.
pub struct Kind {
    pub plural: &'static str,
    pub api_version: &'static str,
    pub kind: &'static str,
}

const KIND_COUNT: usize = 10;

/// The watched collections; the plural is the key of `Objects::lists` that
/// seeds each one.
pub const KINDS: [Kind; KIND_COUNT] = [
    Kind {
        plural: "namespaces",
        api_version: "v1",
        kind: "Namespace",
    },
    Kind {
        plural: "resourceclaims",
        api_version: "resource.k8s.io/v1",
        kind: "ResourceClaim",
    },
    Kind {
        plural: "resourcequotas",
        api_version: "v1",
        kind: "ResourceQuota",
    },
    Kind {
        plural: "resourceslices",
        api_version: "resource.k8s.io/v1",
        kind: "ResourceSlice",
    },
    Kind {
        plural: "deviceclasses",
        api_version: "resource.k8s.io/v1",
        kind: "DeviceClass",
    },
    Kind {
        plural: "resourceslicepatches",
        api_version: "draguard.dev/v1alpha1",
        kind: "ResourceSlicePatch",
    },
    Kind {
        plural: "pods",
        api_version: "v1",
        kind: "Pod",
    },
    Kind {
        plural: "mutatingwebhookconfigurations",
        api_version: "admissionregistration.k8s.io/v1",
        kind: "MutatingWebhookConfiguration",
    },
    Kind {
        plural: "validatingwebhookconfigurations",
        api_version: "admissionregistration.k8s.io/v1",
        kind: "ValidatingWebhookConfiguration",
    },
    Kind {
        plural: "devicetaintrules",
        api_version: "resource.k8s.io/v1",
        kind: "DeviceTaintRule",
    },
];

/// Changes kept for watches to replay; older ones are compacted away, and a
/// watch that needs them gets 410 Gone, as from etcd.
const HISTORY: usize = 10_000;

/// `(namespace or "", name)`: the apiserver's key order, which pages follow.
type Key = (String, String);

/// One recorded change, serialized once for every watch that replays it.
struct Change {
    resource_version: u64,
    namespace: String,
    name: String,
    line: Bytes,
}

#[derive(Default)]
struct Collection {
    objects: BTreeMap<Key, Value>,
    history: VecDeque<Change>,
    /// Watches (and continue tokens) from a resourceVersion below this get
    /// 410 Gone: the changes after it are no longer all in `history`.
    floor: u64,
}

impl Collection {
    fn record(&mut self, resource_version: u64, (namespace, name): Key, line: Bytes) {
        self.history.push_back(Change {
            resource_version,
            namespace,
            name,
            line,
        });
        while self.history.len() > HISTORY {
            if let Some(dropped) = self.history.pop_front() {
                self.floor = dropped.resource_version;
            }
        }
    }
}

struct State {
    resource_version: u64,
    collections: [Collection; KIND_COUNT],
}

pub struct Watched {
    state: Mutex<State>,
    /// Set to the resourceVersion of each change or expiry of a collection:
    /// its open watches wake on it.
    changed: [watch::Sender<u64>; KIND_COUNT],
    /// `true` while LISTs of the collection are held.
    lists_held: [watch::Sender<bool>; KIND_COUNT],
    /// `true`: LISTs and WATCHes of the collection get 403, as RBAC answers.
    forbidden: [AtomicBool; KIND_COUNT],
    list_requests: [AtomicUsize; KIND_COUNT],
    watch_requests: [AtomicUsize; KIND_COUNT],
}

/// The index of a watched collection in [`KINDS`]; a test naming another
/// collection is a bug in the test.
fn index(plural: &str) -> usize {
    KINDS.iter().position(|k| k.plural == plural).unwrap_or_else(|| {
        let known: Vec<&str> = KINDS.iter().map(|k| k.plural).collect();
        panic!("{plural:?} is not a watched collection of the fake ({known:?})")
    })
}

fn key_of(object: &Value) -> Key {
    let field = |f: &str| object["metadata"][f].as_str().unwrap_or("").to_owned();
    (field("namespace"), field("name"))
}

fn resource_version_of(object: &Value) -> Option<u64> {
    object["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).expect("json");
    line.push(b'\n');
    Bytes::from(line)
}

fn bookmark_line(kind: &Kind, resource_version: u64, initial_events_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": resource_version.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    event_line(
        "BOOKMARK",
        &json!({"apiVersion": kind.api_version, "kind": kind.kind, "metadata": metadata}),
    )
}

/// The apiserver's Status for a failed request or an ERROR watch event.
fn status_body(code: StatusCode, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16()})
}

fn expired_line(from: u64, floor: u64) -> Bytes {
    let message = format!("too old resource version: {from} ({floor})");
    event_line("ERROR", &status_body(StatusCode::GONE, "Expired", &message))
}

fn failure(code: StatusCode, reason: &str, message: &str) -> Response {
    (code, axum::Json(status_body(code, reason, message))).into_response()
}

fn is_watch(query: &HashMap<String, String>) -> bool {
    query.get("watch").is_some_and(|w| w == "true" || w == "1")
}

/// The name of a `metadata.name=<name>` field selector (`==` too).
fn selected_name(query: &HashMap<String, String>) -> Option<String> {
    let selector = query.get("fieldSelector")?;
    let name = selector
        .strip_prefix("metadata.name==")
        .or_else(|| selector.strip_prefix("metadata.name="))?;
    Some(name.to_owned())
}

fn encode_continue(resource_version: u64, after: &Key) -> String {
    let token = json!([resource_version, after.0, after.1]).to_string();
    URL_SAFE_NO_PAD.encode(token)
}

fn decode_continue(token: &str) -> Option<(u64, Key)> {
    let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
    let (rv, ns, name): (u64, String, String) = serde_json::from_slice(&bytes).ok()?;
    Some((rv, (ns, name)))
}

impl Watched {
    /// Takes the watched collections out of `lists`. Objects keep the
    /// resourceVersion they were given (tests compare them); those without
    /// one get a fresh one. The counter starts above every given one.
    pub fn new(lists: &mut BTreeMap<String, Vec<Value>>) -> Watched {
        let seeds: Vec<Vec<Value>> = KINDS
            .iter()
            .map(|k| lists.remove(k.plural).unwrap_or_default())
            .collect();
        let mut resource_version = seeds
            .iter()
            .flatten()
            .filter_map(resource_version_of)
            .fold(100, u64::max);
        let mut collections: [Collection; KIND_COUNT] = Default::default();
        for ((collection, seed), kind) in collections.iter_mut().zip(seeds).zip(&KINDS) {
            for mut object in seed {
                if resource_version_of(&object).is_none() {
                    resource_version += 1;
                    object["metadata"]["resourceVersion"] = json!(resource_version.to_string());
                }
                fill_type(&mut object, kind);
                collection.objects.insert(key_of(&object), object);
            }
        }
        Watched {
            state: Mutex::new(State {
                resource_version,
                collections,
            }),
            changed: std::array::from_fn(|_| watch::channel(resource_version).0),
            lists_held: std::array::from_fn(|_| watch::channel(false).0),
            forbidden: Default::default(),
            list_requests: Default::default(),
            watch_requests: Default::default(),
        }
    }

    /// Creates or replaces the object (ADDED or MODIFIED to watches) with the
    /// next resourceVersion, and returns it as stored.
    pub fn apply(&self, plural: &str, mut object: Value) -> Value {
        let i = index(plural);
        fill_type(&mut object, &KINDS[i]);
        let key = key_of(&object);
        assert!(!key.1.is_empty(), "apply needs metadata.name: {object}");
        let mut state = self.state.lock().expect("lock");
        state.resource_version += 1;
        let rv = state.resource_version;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let collection = &mut state.collections[i];
        let kind = match collection.objects.insert(key.clone(), object.clone()) {
            Some(_) => "MODIFIED",
            None => "ADDED",
        };
        collection.record(rv, key, event_line(kind, &object));
        drop(state);
        self.changed[i].send_replace(rv);
        object
    }

    /// Removes the object (DELETED to watches, carrying the deletion's
    /// resourceVersion) and returns it; `None` when there is no such object.
    pub fn delete(&self, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let i = index(plural);
        let mut state = self.state.lock().expect("lock");
        let key = (namespace.to_owned(), name.to_owned());
        let mut object = state.collections[i].objects.remove(&key)?;
        state.resource_version += 1;
        let rv = state.resource_version;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        state.collections[i].record(rv, key, event_line("DELETED", &object));
        drop(state);
        self.changed[i].send_replace(rv);
        Some(object)
    }

    /// Compacts the collection's history away: open watches end with ERROR
    /// 410 Expired, and watches or continue tokens from any resourceVersion
    /// handed out so far get the same, until the client lists again.
    pub fn expire(&self, plural: &str) {
        let i = index(plural);
        let mut state = self.state.lock().expect("lock");
        // A step of its own, so that a re-list right away answers a newer
        // resourceVersion than every expired one, and its watch is served.
        state.resource_version += 1;
        let rv = state.resource_version;
        let collection = &mut state.collections[i];
        collection.history.clear();
        collection.floor = rv;
        drop(state);
        self.changed[i].send_replace(rv);
    }

    pub fn hold(&self, plural: &str) {
        self.lists_held[index(plural)].send_replace(true);
    }

    pub fn release(&self, plural: &str) {
        self.lists_held[index(plural)].send_replace(false);
    }

    pub fn forbid(&self, plural: &str) {
        self.forbidden[index(plural)].store(true, Ordering::SeqCst);
    }

    pub fn list_requests(&self, plural: &str) -> usize {
        self.list_requests[index(plural)].load(Ordering::SeqCst)
    }

    pub fn watch_requests(&self, plural: &str) -> usize {
        self.watch_requests[index(plural)].load(Ordering::SeqCst)
    }

    pub fn resource_version(&self) -> u64 {
        self.state.lock().expect("lock").resource_version
    }

    /// The collection's objects in key order.
    pub fn objects(&self, plural: &str) -> Vec<Value> {
        let state = self.state.lock().expect("lock");
        state.collections[index(plural)].objects.values().cloned().collect()
    }

    pub fn get(&self, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let state = self.state.lock().expect("lock");
        let key = (namespace.to_owned(), name.to_owned());
        state.collections[index(plural)].objects.get(&key).cloned()
    }

    /// GET on a collection path: a LIST, or a WATCH with `watch=true`;
    /// `namespace` narrows it to one namespace's objects.
    pub async fn serve(
        self: Arc<Self>,
        plural: &str,
        namespace: Option<String>,
        query: HashMap<String, String>,
    ) -> Response {
        let i = index(plural);
        if self.forbidden[i].load(Ordering::SeqCst) {
            // The message as kube-apiserver's RBAC authorizer writes it.
            let group = KINDS[i].api_version.rsplit_once('/').map(|(group, _)| group);
            let verb = if is_watch(&query) { "watch" } else { "list" };
            let message = format!(
                "{plural}{} is forbidden: User \"system:serviceaccount:draguard:draguard\" cannot {verb} resource \"{plural}\" in API group \"{}\" at the cluster scope",
                group.map(|g| format!(".{g}")).unwrap_or_default(),
                group.unwrap_or_default()
            );
            return failure(StatusCode::FORBIDDEN, "Forbidden", &message);
        }
        if is_watch(&query) {
            self.watch_requests[i].fetch_add(1, Ordering::SeqCst);
            return self.watch(i, namespace, &query);
        }
        self.list_requests[i].fetch_add(1, Ordering::SeqCst);
        let mut held = self.lists_held[i].subscribe();
        // The sender lives as long as `self`: this cannot fail.
        let _ = held.wait_for(|held| !*held).await;
        self.list(i, namespace.as_deref(), &query)
    }

    fn list(&self, i: usize, namespace: Option<&str>, query: &HashMap<String, String>) -> Response {
        let kind = &KINDS[i];
        let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
            None => usize::MAX,
            Some(Ok(0)) => usize::MAX,
            Some(Ok(n)) => n,
            Some(Err(_)) => return failure(StatusCode::BAD_REQUEST, "BadRequest", "limit is not a number"),
        };
        let state = self.state.lock().expect("lock");
        let collection = &state.collections[i];
        let (resource_version, start) = match query.get("continue").filter(|c| !c.is_empty()) {
            None => (
                state.resource_version,
                match namespace {
                    Some(ns) => Bound::Included((ns.to_owned(), String::new())),
                    None => Bound::Unbounded,
                },
            ),
            Some(token) => match decode_continue(token) {
                None => return failure(StatusCode::BAD_REQUEST, "BadRequest", "invalid continue token"),
                Some((rv, _)) if rv < collection.floor => {
                    return failure(
                        StatusCode::GONE,
                        "Expired",
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                    );
                }
                Some((rv, after)) => (rv, Bound::Excluded(after)),
            },
        };
        let name = selected_name(query);
        let mut matching = collection
            .objects
            .range((start, Bound::Unbounded))
            .take_while(|((ns, _), _)| namespace.is_none_or(|want| want == ns))
            .filter(|((_, n), _)| name.as_ref().is_none_or(|want| want == n));
        let page: Vec<(&Key, &Value)> = matching.by_ref().take(limit).collect();
        let mut metadata = json!({"resourceVersion": resource_version.to_string()});
        if let (Some(_), Some((last, _))) = (matching.next(), page.last()) {
            metadata["continue"] = json!(encode_continue(resource_version, last));
        }
        let items: Vec<&Value> = page.into_iter().map(|(_, v)| v).collect();
        let body = json!({"apiVersion": kind.api_version, "kind": format!("{}List", kind.kind),
            "metadata": metadata, "items": items});
        drop(state);
        axum::Json(body).into_response()
    }

    fn watch(self: Arc<Self>, i: usize, namespace: Option<String>, query: &HashMap<String, String>) -> Response {
        let kind = &KINDS[i];
        let from = match query.get("resourceVersion").map(String::as_str) {
            None | Some("") | Some("0") => None,
            Some(rv) => match rv.parse::<u64>() {
                Ok(rv) => Some(rv),
                Err(_) => return failure(StatusCode::BAD_REQUEST, "BadRequest", "resourceVersion is not a number"),
            },
        };
        let flag = |name: &str| query.get(name).is_some_and(|v| v == "true" || v == "1");
        let deadline = query
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .filter(|t| *t > 0)
            .map(|t| Instant::now() + std::time::Duration::from_secs(t));
        // Subscribed before reading the state: a change after the read
        // wakes the stream.
        let changed = self.changed[i].subscribe();
        let name = selected_name(query);
        let mut first = Vec::new();
        let mut done = false;
        let cursor = {
            let state = self.state.lock().expect("lock");
            let collection = &state.collections[i];
            match from {
                // No resourceVersion: the current objects first, as ADDED,
                // then (sendInitialEvents) a bookmark that says they are all.
                None => {
                    let wanted = |ns: &String, n: &String| {
                        namespace.as_ref().is_none_or(|want| want == ns) && name.as_ref().is_none_or(|want| want == n)
                    };
                    for ((ns, n), object) in &collection.objects {
                        if wanted(ns, n) {
                            first.extend_from_slice(&event_line("ADDED", object));
                        }
                    }
                    if flag("sendInitialEvents") {
                        first.extend_from_slice(&bookmark_line(kind, state.resource_version, true));
                    }
                    state.resource_version
                }
                Some(from) if from < collection.floor => {
                    first.extend_from_slice(&expired_line(from, collection.floor));
                    done = true;
                    from
                }
                Some(from) => from,
            }
        };
        let stream = WatchStream {
            watched: self,
            i,
            namespace,
            name,
            cursor,
            changed,
            deadline,
            bookmarks: flag("allowWatchBookmarks"),
            first: Some(Bytes::from(first)),
            done,
        };
        let body = futures::stream::unfold(stream, WatchStream::next);
        axum::http::Response::builder()
            .header("content-type", "application/json")
            .body(Body::from_stream(body))
            .expect("response")
    }
}

/// Sets apiVersion and kind when a test left them out: the apiserver always
/// sends them in watch events, and typed clients need them.
fn fill_type(object: &mut Value, kind: &Kind) {
    if object.get("apiVersion").is_none() {
        object["apiVersion"] = json!(kind.api_version);
    }
    if object.get("kind").is_none() {
        object["kind"] = json!(kind.kind);
    }
}

/// One open WATCH: replays the collection's changes after `cursor`.
struct WatchStream {
    watched: Arc<Watched>,
    i: usize,
    namespace: Option<String>,
    /// A `metadata.name` field selector's name.
    name: Option<String>,
    /// Every change up to this resourceVersion has been sent.
    cursor: u64,
    changed: watch::Receiver<u64>,
    deadline: Option<Instant>,
    bookmarks: bool,
    /// What the stream opens with (replayed changes, initial objects, or
    /// the 410), sent before waiting for anything.
    first: Option<Bytes>,
    done: bool,
}

impl WatchStream {
    async fn next(mut self) -> Option<(Result<Bytes, Infallible>, Self)> {
        if let Some(first) = self.first.take() {
            let mut first = first.to_vec();
            if !self.done {
                match self.drain() {
                    Ok((out, _)) => first.extend_from_slice(&out),
                    Err(expired) => {
                        first.extend_from_slice(&expired);
                        self.done = true;
                    }
                }
            }
            if !first.is_empty() {
                return Some((Ok(Bytes::from(first)), self));
            }
        }
        loop {
            if self.done {
                return None;
            }
            let timed_out = tokio::select! {
                woke = self.changed.changed() => woke.is_err(),
                () = sleep_until(self.deadline) => true,
            };
            let (mut out, now) = match self.drain() {
                Ok(drained) => drained,
                Err(expired) => {
                    self.done = true;
                    return Some((Ok(Bytes::from(expired)), self));
                }
            };
            if timed_out {
                // The apiserver ends a watch at timeoutSeconds; a bookmark
                // first lets the client resume from here, without a re-list.
                self.done = true;
                if self.bookmarks {
                    self.cursor = self.cursor.max(now);
                    out.extend_from_slice(&bookmark_line(&KINDS[self.i], self.cursor, false));
                }
            }
            if !out.is_empty() {
                return Some((Ok(Bytes::from(out)), self));
            }
        }
    }

    /// The recorded changes after the cursor (moving it past them) and the
    /// current resourceVersion, up to which nothing else happened to the
    /// collection; or the 410 line when some changes were compacted away.
    fn drain(&mut self) -> Result<(Vec<u8>, u64), Vec<u8>> {
        let state = self.watched.state.lock().expect("lock");
        let collection = &state.collections[self.i];
        if self.cursor < collection.floor {
            return Err(expired_line(self.cursor, collection.floor).to_vec());
        }
        let mut out = Vec::new();
        let start = collection
            .history
            .partition_point(|c| c.resource_version <= self.cursor);
        for change in collection.history.range(start..) {
            let named = self.name.as_ref().is_none_or(|n| *n == change.name);
            if named && self.namespace.as_ref().is_none_or(|ns| *ns == change.namespace) {
                out.extend_from_slice(&change.line);
            }
            self.cursor = change.resource_version;
        }
        Ok((out, state.resource_version))
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
