// Shared by several test crates; each uses a part of it.
#![allow(dead_code)]

//! A fake Kubernetes API server on loopback, for kube-rs clients in tests.
//!
//! Namespaces, ResourceClaims, ResourceQuotas and ResourceSlicePatches are
//! watched collections (`watch.rs`): paged LISTs with resourceVersions,
//! WATCHes that stream the changes a test makes with [`FakeApiServer::apply`]
//! and [`FakeApiServer::delete`], expiry (410 Gone) to force a re-list, and
//! a gate to hold LISTs. ResourceQuotas can also be created, replaced and
//! deleted by the client (recorded, and seen by watches).
//!
//! Secrets can be read, created and replaced with the apiserver's rules:
//! a resourceVersion per write, 409 AlreadyExists on a second create, 409
//! Conflict on a replace carrying a stale resourceVersion, 404 NotFound,
//! each as the apiserver's Status body. Mutating and validating webhook
//! configurations are watched collections that can also be read and
//! JSON-patched (a failed `test` is a 422); a patch is a MODIFIED event.
//!
//! DeviceTaintRules are watched too, and can be merge-patched with the
//! apiserver's optimistic lock (a stale `metadata.resourceVersion` in the
//! patch is a 409). events.k8s.io Events can be created and patched; each
//! body is kept, in order, in [`Objects::events`].

mod reports;
mod watch;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRef, Path, Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use watch::Watched;

/// Objects by collection path (`/api/v1/namespaces`), and what clients wrote.
#[derive(Default)]
pub struct Objects {
    /// The objects to start with, by plural. The watched collections
    /// (`namespaces`, `resourceclaims`, `resourcequotas`, `resourceslices`,
    /// `deviceclasses`, `resourceslicepatches`, `pods`, and the two webhook
    /// configuration kinds) move out of here at start, into the watch
    /// store: change them with [`FakeApiServer::apply`] and
    /// [`FakeApiServer::delete`], not here.
    pub lists: BTreeMap<String, Vec<Value>>,
    pub writes: Vec<(String, String)>,
    /// Writes the fake refused, as `(method, "<status> <reason> <what>")`.
    pub refused: Vec<(String, String)>,
    /// Last resourceVersion handed out by a Secret or webhook write.
    pub resource_version: u64,
    /// When set, the first `n` Secret GETs (n = the barrier's size) wait for
    /// each other, so that racing clients all read before anyone writes.
    pub secret_get_barrier: Option<(Arc<tokio::sync::Barrier>, usize)>,
    /// When set, every webhook configuration PATCH is forbidden (403).
    pub forbid_webhook_patches: bool,
    /// `gitVersion` of `GET /version` (`v1.36.2`); unset, `/version` is a 404.
    pub git_version: Option<String>,
    /// The text of `GET /metrics`; unset, it is refused (403), as by an
    /// apiserver whose RBAC does not grant the non-resource URL.
    pub metrics_text: Option<String>,
    /// `GET /metrics` requests received.
    pub metrics_requests: usize,
    /// events.k8s.io/v1 Events written, as `(method, namespace, body)`:
    /// POST creates one, PATCH adds to its series.
    pub events: Vec<(String, String, Value)>,
    /// When set, every apps/v1 workload GET is forbidden (403), as by a
    /// ClusterRole without `get` on them.
    pub forbid_workload_gets: bool,
    /// apps/v1 workload GETs received, as `namespace/plural/name`.
    pub workload_gets: Vec<String>,
}

impl Objects {
    fn next_resource_version(&mut self) -> String {
        self.resource_version = self.resource_version.max(100) + 1;
        self.resource_version.to_string()
    }
}

pub type Shared = Arc<Mutex<Objects>>;

/// What the handlers share; each takes the part it needs.
#[derive(Clone)]
struct AppState {
    objects: Shared,
    watched: Arc<Watched>,
}

impl FromRef<AppState> for Shared {
    fn from_ref(state: &AppState) -> Shared {
        state.objects.clone()
    }
}

impl FromRef<AppState> for Arc<Watched> {
    fn from_ref(state: &AppState) -> Arc<Watched> {
        state.watched.clone()
    }
}

pub struct FakeApiServer {
    pub addr: SocketAddr,
    pub objects: Shared,
    watched: Arc<Watched>,
    /// PolicyReports and Leases (`reports.rs`).
    pub reports: reports::Shared,
}

impl FakeApiServer {
    pub async fn start(objects: Objects) -> FakeApiServer {
        let addr: SocketAddr = "127.0.0.1:0".parse().expect("addr");
        FakeApiServer::start_on(objects, addr).await.expect("bind")
    }

    /// Serves on `addr` (plain HTTP), for a fake that outlives a test.
    pub async fn start_on(mut objects: Objects, addr: SocketAddr) -> std::io::Result<FakeApiServer> {
        let watched = Arc::new(Watched::new(&mut objects.lists));
        let shared: Shared = Arc::new(Mutex::new(objects));
        let reports = reports::Shared::default();
        let state = AppState {
            objects: shared.clone(),
            watched: watched.clone(),
        };
        let app = Router::new()
            .route("/version", axum::routing::get(version))
            .route("/metrics", axum::routing::get(metrics))
            .route("/api/v1/namespaces", axum::routing::get(list_namespaces))
            .route("/api/v1/resourcequotas", axum::routing::get(list_all_quotas))
            .route("/api/v1/pods", axum::routing::get(list_pods))
            .route("/api/v1/namespaces/{ns}/pods", axum::routing::get(list_pods_in))
            .route(
                "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims",
                axum::routing::get(list_claims_in),
            )
            .route(
                "/apis/draguard.dev/v1alpha1/resourceslicepatches",
                axum::routing::get(list_patches),
            )
            .route(
                "/apis/resource.k8s.io/v1/resourceclaims",
                axum::routing::get(list_claims),
            )
            .route(
                "/apis/resource.k8s.io/v1/deviceclasses",
                axum::routing::get(list_device_classes),
            )
            .route(
                "/apis/resource.k8s.io/v1/resourceslices",
                axum::routing::get(list_slices),
            )
            .route(
                "/api/v1/namespaces/{ns}/resourcequotas",
                axum::routing::get(list_quotas).post(create_quota),
            )
            .route(
                "/api/v1/namespaces/{ns}/resourcequotas/{name}",
                axum::routing::get(get_quota).put(replace_quota).delete(delete_quota),
            )
            .route(
                "/apis/apps/v1/namespaces/{ns}/{plural}/{name}",
                axum::routing::get(get_workload),
            )
            .route("/api/v1/namespaces/{ns}/secrets", axum::routing::post(create_secret))
            .route(
                "/api/v1/namespaces/{ns}/secrets/{name}",
                axum::routing::get(get_secret).put(replace_secret),
            )
            .route(
                "/apis/resource.k8s.io/v1/devicetaintrules",
                axum::routing::get(list_taint_rules),
            )
            .route(
                "/apis/resource.k8s.io/v1/devicetaintrules/{name}",
                axum::routing::patch(merge_patch_taint_rule),
            )
            .route(
                "/apis/events.k8s.io/v1/namespaces/{ns}/events",
                axum::routing::post(create_event),
            )
            .route(
                "/apis/events.k8s.io/v1/namespaces/{ns}/events/{name}",
                axum::routing::patch(patch_event),
            )
            .route(
                "/apis/admissionregistration.k8s.io/v1/{plural}",
                axum::routing::get(list_webhook_configs),
            )
            .route(
                "/apis/admissionregistration.k8s.io/v1/{plural}/{name}",
                axum::routing::get(get_webhook_config).patch(patch_webhook_config),
            )
            .with_state(state)
            .merge(reports::routes(reports.clone()));
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeApiServer {
            addr,
            objects: shared,
            watched,
            reports,
        })
    }

    pub fn client(&self) -> kube::Client {
        let url: axum::http::Uri = format!("http://{}", self.addr).parse().expect("url");
        kube::Client::try_from(kube::Config::new(url)).expect("client")
    }

    /// Creates or replaces `object` in a watched collection (`"namespaces"`,
    /// `"resourceclaims"`, `"resourcequotas"`, `"resourceslices"`, `"deviceclasses"`,
    /// `"resourceslicepatches"`),
    /// keyed by its metadata namespace and name: ADDED or MODIFIED to open
    /// watches, with the next resourceVersion. Returns the object as stored.
    pub fn apply(&self, collection: &str, object: Value) -> Value {
        self.watched.apply(collection, object)
    }

    /// Deletes `namespace/name` (`""` for cluster-scoped kinds) from a
    /// watched collection: DELETED to open watches. Returns the object, or
    /// `None` when there was none.
    pub fn delete(&self, collection: &str, namespace: &str, name: &str) -> Option<Value> {
        self.watched.delete(collection, namespace, name)
    }

    /// Ends the collection's open watches with an ERROR event, 410 Expired,
    /// and answers the same to any later watch (or continue token) from a
    /// resourceVersion handed out before: clients must re-list. Changes made
    /// after this reach a client only through its re-list.
    pub fn expire_watches(&self, collection: &str) {
        self.watched.expire(collection);
    }

    /// Makes LISTs of the collection wait until [`FakeApiServer::release_lists`].
    pub fn hold_lists(&self, collection: &str) {
        self.watched.hold(collection);
    }

    /// Answers LISTs and WATCHes of the collection with 403 Forbidden, as
    /// when draguard's ClusterRole lacks them.
    pub fn forbid_lists(&self, collection: &str) {
        self.watched.forbid(collection);
    }

    pub fn release_lists(&self, collection: &str) {
        self.watched.release(collection);
    }

    /// LIST requests of the collection received so far (each page counts;
    /// held ones too).
    pub fn list_requests(&self, collection: &str) -> usize {
        self.watched.list_requests(collection)
    }

    /// WATCH requests of the collection received so far.
    pub fn watch_requests(&self, collection: &str) -> usize {
        self.watched.watch_requests(collection)
    }

    /// The watched collections' current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.watched.resource_version()
    }

    /// A watched collection's objects, in the apiserver's order.
    pub fn watched_objects(&self, collection: &str) -> Vec<Value> {
        self.watched.objects(collection)
    }

    /// The stored Secret `ns/name`.
    pub fn secret(&self, ns: &str, name: &str) -> Option<Value> {
        let objects = self.objects.lock().expect("lock");
        let i = find_in(&objects, "secrets", Some(ns), name)?;
        objects.lists.get("secrets").map(|l| l[i].clone())
    }

    /// The stored `mutatingwebhookconfigurations` or
    /// `validatingwebhookconfigurations` object `name`.
    pub fn webhook_config(&self, plural: &str, name: &str) -> Option<Value> {
        self.watched.get(plural, "", name)
    }

    /// Writes that succeeded, whose method is `method`.
    pub fn writes_of(&self, method: &str) -> Vec<String> {
        of_method(&self.objects.lock().expect("lock").writes, method)
    }

    /// Writes refused, whose method is `method`.
    pub fn refused_of(&self, method: &str) -> Vec<String> {
        of_method(&self.objects.lock().expect("lock").refused, method)
    }

    /// PolicyReport, ClusterPolicyReport and Lease writes, in order (see
    /// `reports.rs` for their form).
    pub fn report_writes(&self) -> Vec<String> {
        self.reports.lock().expect("reports").writes.clone()
    }

    /// The stored PolicyReport `ns/name`, or the ClusterPolicyReport
    /// `name` for `ns` `""`.
    pub fn report(&self, ns: &str, name: &str) -> Option<Value> {
        self.reports
            .lock()
            .expect("reports")
            .reports
            .get(&(ns.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Stores a report as if written before (a namespace's stale one).
    pub fn put_report(&self, ns: &str, report: Value) {
        let name = report["metadata"]["name"].as_str().unwrap_or("").to_owned();
        self.reports
            .lock()
            .expect("reports")
            .reports
            .insert((ns.to_owned(), name), report);
    }

    /// Refuses every Lease request with 403 from now on.
    pub fn forbid_leases(&self) {
        self.reports.lock().expect("lock").forbid_leases = true;
    }

    /// The stored Lease `ns/name`.
    pub fn lease(&self, ns: &str, name: &str) -> Option<Value> {
        self.reports
            .lock()
            .expect("reports")
            .leases
            .get(&(ns.to_owned(), name.to_owned()))
            .cloned()
    }

    pub fn quotas(&self) -> Vec<Value> {
        self.watched_objects("resourcequotas")
    }

    /// The Events written so far, as `(method, namespace, body)`.
    pub fn events(&self) -> Vec<(String, String, Value)> {
        self.objects.lock().expect("lock").events.clone()
    }
}

/// The `what` of the `(method, what)` records made with `method`.
fn of_method(records: &[(String, String)], method: &str) -> Vec<String> {
    records
        .iter()
        .filter(|(m, _)| m == method)
        .map(|(_, what)| what.clone())
        .collect()
}

type Params = Query<HashMap<String, String>>;

/// `GET /version` as a kube-apiserver answers it.
async fn version(State(s): State<Shared>) -> Response {
    let git_version = s.lock().expect("objects").git_version.clone();
    let Some(git_version) = git_version else {
        return (StatusCode::NOT_FOUND, "404 page not found").into_response();
    };
    let minor = git_version.split('.').nth(1).unwrap_or("").to_owned();
    axum::Json(json!({
        "major": "1",
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-07-22T00:00:00Z",
        "goVersion": "go1.26.3",
        "compiler": "gc",
        "platform": "linux/amd64",
    }))
    .into_response()
}

/// `GET /metrics`: the text set, or the apiserver's 403 for a non-resource
/// URL its RBAC does not grant.
async fn metrics(State(s): State<Shared>) -> Response {
    let text = {
        let mut objects = s.lock().expect("objects");
        objects.metrics_requests += 1;
        objects.metrics_text.clone()
    };
    match text {
        Some(text) => (
            [(
                axum::http::header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        None => {
            let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "forbidden: User \"system:serviceaccount:draguard:draguard\" cannot get path \"/metrics\"",
                "reason": "Forbidden", "details": {}, "code": 403});
            (StatusCode::FORBIDDEN, axum::Json(body)).into_response()
        }
    }
}

async fn list_namespaces(State(w): State<Arc<Watched>>, Query(q): Params) -> Response {
    w.serve("namespaces", None, q).await
}

async fn list_claims(State(w): State<Arc<Watched>>, Query(q): Params) -> Response {
    w.serve("resourceclaims", None, q).await
}

async fn list_slices(State(w): State<Arc<Watched>>, Query(q): Params) -> Response {
    w.serve("resourceslices", None, q).await
}

async fn list_device_classes(State(w): State<Arc<Watched>>, Query(q): Params) -> Response {
    w.serve("deviceclasses", None, q).await
}

async fn list_pods(State(w): State<Arc<Watched>>, Query(q): Params) -> Response {
    w.serve("pods", None, q).await
}

async fn list_pods_in(State(w): State<Arc<Watched>>, Path(ns): Path<String>, Query(q): Params) -> Response {
    w.serve("pods", Some(ns), q).await
}

async fn list_claims_in(State(w): State<Arc<Watched>>, Path(ns): Path<String>, Query(q): Params) -> Response {
    w.serve("resourceclaims", Some(ns), q).await
}

async fn list_patches(State(w): State<Arc<Watched>>, Query(q): Params) -> Response {
    w.serve("resourceslicepatches", None, q).await
}

async fn list_all_quotas(State(w): State<Arc<Watched>>, Query(q): Params) -> Response {
    w.serve("resourcequotas", None, q).await
}

async fn list_quotas(State(w): State<Arc<Watched>>, Path(ns): Path<String>, Query(q): Params) -> Response {
    w.serve("resourcequotas", Some(ns), q).await
}

async fn get_quota(State(w): State<Arc<Watched>>, Path((ns, name)): Path<(String, String)>) -> Response {
    match w.get("resourcequotas", &ns, &name) {
        Some(v) => axum::Json(v).into_response(),
        None => not_found(&name),
    }
}

fn not_found(name: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("resourcequotas \"{name}\" not found"),
        "resourcequotas",
        None,
        name,
    )
}

async fn create_quota(
    State(s): State<AppState>,
    Path(ns): Path<String>,
    axum::Json(mut v): axum::Json<Value>,
) -> Response {
    v["metadata"]["namespace"] = json!(ns);
    let name = v["metadata"]["name"].as_str().unwrap_or("").to_owned();
    s.objects
        .lock()
        .expect("lock")
        .writes
        .push((Method::POST.to_string(), format!("{ns}/{name}")));
    let stored = s.watched.apply("resourcequotas", v);
    (StatusCode::CREATED, axum::Json(stored)).into_response()
}

async fn replace_quota(
    State(s): State<AppState>,
    Path((ns, name)): Path<(String, String)>,
    axum::Json(mut v): axum::Json<Value>,
) -> Response {
    if s.watched.get("resourcequotas", &ns, &name).is_none() {
        return not_found(&name);
    }
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["name"] = json!(name);
    s.objects
        .lock()
        .expect("lock")
        .writes
        .push((Method::PUT.to_string(), format!("{ns}/{name}")));
    axum::Json(s.watched.apply("resourcequotas", v)).into_response()
}

async fn delete_quota(State(s): State<AppState>, Path((ns, name)): Path<(String, String)>) -> Response {
    let Some(removed) = s.watched.delete("resourcequotas", &ns, &name) else {
        return not_found(&name);
    };
    s.objects
        .lock()
        .expect("lock")
        .writes
        .push((Method::DELETE.to_string(), format!("{ns}/{name}")));
    axum::Json(removed).into_response()
}

/// A Status body as the apiserver sends it.
/// A request's Content-Type, or "" without one: what the fake's writes
/// check before they take a body.
fn content_type(headers: &axum::http::HeaderMap) -> &str {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

fn status(code: StatusCode, reason: &str, message: String, kind: &str, group: Option<&str>, name: &str) -> Response {
    let mut details = json!({"name": name, "kind": kind});
    if let Some(group) = group {
        details["group"] = json!(group);
    }
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": details, "code": code.as_u16()});
    (code, axum::Json(body)).into_response()
}

fn find_in(objects: &Objects, key: &str, ns: Option<&str>, name: &str) -> Option<usize> {
    objects
        .lists
        .get(key)?
        .iter()
        .position(|v| v["metadata"]["name"] == name && ns.is_none_or(|ns| v["metadata"]["namespace"] == ns))
}

fn secret_not_found(name: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("secrets \"{name}\" not found"),
        "secrets",
        None,
        name,
    )
}

/// Deployments, ReplicaSets and StatefulSets, read one at a time from
/// `Objects::lists` (by plural), as `serve` reads the workload of a scale.
async fn get_workload(State(s): State<Shared>, Path((ns, plural, name)): Path<(String, String, String)>) -> Response {
    let mut objects = s.lock().expect("lock");
    objects.workload_gets.push(format!("{ns}/{plural}/{name}"));
    if objects.forbid_workload_gets {
        let message = format!(
            "{plural}.apps \"{name}\" is forbidden: User \"system:serviceaccount:draguard:draguard\" cannot get resource \"{plural}\" in API group \"apps\" in the namespace \"{ns}\""
        );
        return status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            message,
            &plural,
            Some("apps"),
            &name,
        );
    }
    match find_in(&objects, &plural, Some(&ns), &name).and_then(|i| objects.lists.get(&plural).map(|l| l[i].clone())) {
        Some(v) => axum::Json(v).into_response(),
        None => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{plural}.apps \"{name}\" not found"),
            &plural,
            Some("apps"),
            &name,
        ),
    }
}

async fn get_secret(State(s): State<Shared>, Path((ns, name)): Path<(String, String)>) -> Response {
    let gate = {
        let mut objects = s.lock().expect("lock");
        match &mut objects.secret_get_barrier {
            Some((barrier, left)) if *left > 0 => {
                *left -= 1;
                Some(barrier.clone())
            }
            _ => None,
        }
    };
    if let Some(barrier) = gate {
        barrier.wait().await;
    }
    let objects = s.lock().expect("lock");
    match find_in(&objects, "secrets", Some(&ns), &name)
        .and_then(|i| objects.lists.get("secrets").map(|l| l[i].clone()))
    {
        Some(v) => axum::Json(v).into_response(),
        None => secret_not_found(&name),
    }
}

async fn create_secret(
    State(s): State<Shared>,
    Path(ns): Path<String>,
    axum::Json(mut v): axum::Json<Value>,
) -> Response {
    let name = v["metadata"]["name"].as_str().unwrap_or("").to_owned();
    let mut objects = s.lock().expect("lock");
    if find_in(&objects, "secrets", Some(&ns), &name).is_some() {
        objects
            .refused
            .push(("POST".into(), format!("409 AlreadyExists {ns}/{name}")));
        return status(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("secrets \"{name}\" already exists"),
            "secrets",
            None,
            &name,
        );
    }
    let rv = objects.next_resource_version();
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["resourceVersion"] = json!(rv);
    v["metadata"]["uid"] = json!(format!("uid-{ns}-{name}"));
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("Secret");
    objects.writes.push(("POST".into(), format!("secrets/{ns}/{name}")));
    objects.lists.entry("secrets".into()).or_default().push(v.clone());
    (StatusCode::CREATED, axum::Json(v)).into_response()
}

async fn replace_secret(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    axum::Json(mut v): axum::Json<Value>,
) -> Response {
    let mut objects = s.lock().expect("lock");
    let Some(i) = find_in(&objects, "secrets", Some(&ns), &name) else {
        return secret_not_found(&name);
    };
    let stored = objects.lists.get("secrets").map(|l| l[i].clone()).unwrap_or_default();
    let sent = v["metadata"]["resourceVersion"].as_str().unwrap_or("").to_owned();
    // An update without a resourceVersion is unconditional, as for the
    // apiserver's Secrets; one with a stale resourceVersion is refused.
    if !sent.is_empty() && stored["metadata"]["resourceVersion"] != sent.as_str() {
        objects
            .refused
            .push(("PUT".into(), format!("409 Conflict {ns}/{name}@{sent}")));
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on secrets \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
            "secrets",
            None,
            &name,
        );
    }
    let rv = objects.next_resource_version();
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["resourceVersion"] = json!(rv);
    objects
        .writes
        .push(("PUT".into(), format!("secrets/{ns}/{name}@{sent}")));
    if let Some(list) = objects.lists.get_mut("secrets") {
        list[i] = v.clone();
    }
    axum::Json(v).into_response()
}

fn webhook_config_not_found(plural: &str, name: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{plural}.admissionregistration.k8s.io \"{name}\" not found"),
        plural,
        Some("admissionregistration.k8s.io"),
        name,
    )
}

const WEBHOOK_CONFIGS: [&str; 2] = ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"];

async fn list_webhook_configs(State(w): State<Arc<Watched>>, Path(plural): Path<String>, Query(q): Params) -> Response {
    if !WEBHOOK_CONFIGS.contains(&plural.as_str()) {
        return (StatusCode::NOT_FOUND, "404 page not found").into_response();
    }
    w.serve(&plural, None, q).await
}

async fn get_webhook_config(State(w): State<Arc<Watched>>, Path((plural, name)): Path<(String, String)>) -> Response {
    if !WEBHOOK_CONFIGS.contains(&plural.as_str()) {
        return (StatusCode::NOT_FOUND, "404 page not found").into_response();
    }
    match w.get(&plural, "", &name) {
        Some(v) => axum::Json(v).into_response(),
        None => webhook_config_not_found(&plural, &name),
    }
}

async fn patch_webhook_config(
    State(state): State<AppState>,
    Path((plural, name)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let content_type = content_type(&headers);
    if content_type != "application/json-patch+json" {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("this fake only takes JSON patches, not {content_type}"),
            &plural,
            Some("admissionregistration.k8s.io"),
            &name,
        );
    }
    if !WEBHOOK_CONFIGS.contains(&plural.as_str()) {
        return (StatusCode::NOT_FOUND, "404 page not found").into_response();
    }
    let mut objects = state.objects.lock().expect("lock");
    if objects.forbid_webhook_patches {
        objects
            .refused
            .push(("PATCH".into(), format!("403 Forbidden {plural}/{name}")));
        return status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            format!(
                "{plural}.admissionregistration.k8s.io \"{name}\" is forbidden: User \"system:serviceaccount:draguard:draguard\" cannot patch resource \"{plural}\" in API group \"admissionregistration.k8s.io\" at the cluster scope"
            ),
            &plural,
            Some("admissionregistration.k8s.io"),
            &name,
        );
    }
    let Some(mut doc) = state.watched.get(&plural, "", &name) else {
        return webhook_config_not_found(&plural, &name);
    };
    let patch: json_patch::Patch = match serde_json::from_slice(&body) {
        Ok(patch) => patch,
        Err(e) => {
            return status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                e.to_string(),
                &plural,
                None,
                &name,
            );
        }
    };
    if let Err(e) = json_patch::patch(&mut doc, &patch) {
        objects
            .refused
            .push(("PATCH".into(), format!("422 Invalid {plural}/{name}")));
        return status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            e.to_string(),
            &plural,
            Some("admissionregistration.k8s.io"),
            &name,
        );
    }
    objects.writes.push((
        "PATCH".into(),
        format!("{plural}/{name} {}", String::from_utf8_lossy(&body)),
    ));
    // Stored with the next resourceVersion, and a MODIFIED to watches.
    let stored = state.watched.apply(&plural, doc);
    drop(objects);
    axum::Json(stored).into_response()
}

async fn list_taint_rules(State(w): State<Arc<Watched>>, Query(q): Params) -> Response {
    w.serve("devicetaintrules", None, q).await
}

/// A JSON merge patch of a DeviceTaintRule. A `metadata.resourceVersion`
/// in the patch is a precondition, as for the apiserver: a stale one is a
/// 409 Conflict.
async fn merge_patch_taint_rule(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    const GROUP: Option<&str> = Some("resource.k8s.io");
    let content_type = content_type(&headers);
    if content_type != "application/merge-patch+json" {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("this fake only takes merge patches of DeviceTaintRules, not {content_type}"),
            "devicetaintrules",
            GROUP,
            &name,
        );
    }
    let Some(mut doc) = state.watched.get("devicetaintrules", "", &name) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("devicetaintrules.resource.k8s.io \"{name}\" not found"),
            "devicetaintrules",
            GROUP,
            &name,
        );
    };
    let patch: Value = match serde_json::from_slice(&body) {
        Ok(patch) => patch,
        Err(e) => {
            return status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                e.to_string(),
                "devicetaintrules",
                GROUP,
                &name,
            );
        }
    };
    let mut objects = state.objects.lock().expect("lock");
    let wanted = &patch["metadata"]["resourceVersion"];
    if !wanted.is_null() && *wanted != doc["metadata"]["resourceVersion"] {
        objects
            .refused
            .push(("PATCH".into(), format!("409 Conflict devicetaintrules/{name}")));
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on devicetaintrules.resource.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
            "devicetaintrules",
            GROUP,
            &name,
        );
    }
    json_patch::merge(&mut doc, &patch);
    objects.writes.push((
        "PATCH".into(),
        format!("devicetaintrules/{name} {}", String::from_utf8_lossy(&body)),
    ));
    let stored = state.watched.apply("devicetaintrules", doc);
    drop(objects);
    axum::Json(stored).into_response()
}

async fn create_event(State(s): State<Shared>, Path(ns): Path<String>, axum::Json(v): axum::Json<Value>) -> Response {
    s.lock().expect("lock").events.push(("POST".into(), ns, v.clone()));
    (StatusCode::CREATED, axum::Json(v)).into_response()
}

async fn patch_event(
    State(s): State<Shared>,
    Path((ns, _name)): Path<(String, String)>,
    axum::Json(v): axum::Json<Value>,
) -> Response {
    s.lock().expect("lock").events.push(("PATCH".into(), ns, v.clone()));
    axum::Json(v).into_response()
}
