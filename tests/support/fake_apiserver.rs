// Shared by several test crates; each uses a part of it.
#![allow(dead_code)]

//! A fake Kubernetes API server on loopback, for kube-rs clients in tests:
//! LIST answers the stored objects, WATCH stays open without events, and
//! ResourceQuotas can be created, replaced and deleted (recorded).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// Objects by collection path (`/api/v1/namespaces`), and what clients wrote.
#[derive(Default)]
pub struct Objects {
    pub lists: BTreeMap<String, Vec<Value>>,
    pub writes: Vec<(String, String)>,
}

pub type Shared = Arc<Mutex<Objects>>;

pub struct FakeApiServer {
    pub addr: SocketAddr,
    pub objects: Shared,
}

impl FakeApiServer {
    pub async fn start(objects: Objects) -> FakeApiServer {
        let shared: Shared = Arc::new(Mutex::new(objects));
        let app = Router::new()
            .route("/api/v1/namespaces", axum::routing::get(list_namespaces))
            .route("/api/v1/resourcequotas", axum::routing::get(list_all_quotas))
            .route(
                "/apis/draguard.dev/v1alpha1/resourceslicepatches",
                axum::routing::get(list_patches),
            )
            .route(
                "/apis/resource.k8s.io/v1/resourceclaims",
                axum::routing::get(list_claims),
            )
            .route(
                "/api/v1/namespaces/{ns}/resourcequotas",
                axum::routing::get(list_quotas).post(create_quota),
            )
            .route(
                "/api/v1/namespaces/{ns}/resourcequotas/{name}",
                axum::routing::get(get_quota).put(replace_quota).delete(delete_quota),
            )
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeApiServer { addr, objects: shared }
    }

    pub fn client(&self) -> kube::Client {
        let url: axum::http::Uri = format!("http://{}", self.addr).parse().expect("url");
        kube::Client::try_from(kube::Config::new(url)).expect("client")
    }

    pub fn quotas(&self) -> Vec<Value> {
        self.objects
            .lock()
            .expect("lock")
            .lists
            .get("resourcequotas")
            .cloned()
            .unwrap_or_default()
    }
}

fn is_watch(query: &Option<String>) -> bool {
    query
        .as_deref()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

fn list(objects: &Shared, key: &str, kind: &str, query: &Option<String>, filter: impl Fn(&Value) -> bool) -> Response {
    if is_watch(query) {
        // An open watch with nothing to say.
        let body = Body::from_stream(futures::stream::pending::<Result<Bytes, Infallible>>());
        return Response::builder()
            .header("content-type", "application/json")
            .body(body)
            .expect("response");
    }
    let items: Vec<Value> = objects
        .lock()
        .expect("lock")
        .lists
        .get(key)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|v| filter(v))
        .collect();
    let (api_version, _) = match key {
        "resourceclaims" => ("resource.k8s.io/v1", ()),
        "resourceslicepatches" => ("draguard.dev/v1alpha1", ()),
        _ => ("v1", ()),
    };
    axum::Json(json!({"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items}))
        .into_response()
}

async fn list_namespaces(State(s): State<Shared>, RawQuery(q): RawQuery) -> Response {
    list(&s, "namespaces", "NamespaceList", &q, |_| true)
}

async fn list_claims(State(s): State<Shared>, RawQuery(q): RawQuery) -> Response {
    list(&s, "resourceclaims", "ResourceClaimList", &q, |_| true)
}

async fn list_patches(State(s): State<Shared>, RawQuery(q): RawQuery) -> Response {
    list(&s, "resourceslicepatches", "ResourceSlicePatchList", &q, |_| true)
}

async fn list_all_quotas(State(s): State<Shared>, RawQuery(q): RawQuery) -> Response {
    list(&s, "resourcequotas", "ResourceQuotaList", &q, |_| true)
}

async fn list_quotas(State(s): State<Shared>, Path(ns): Path<String>, RawQuery(q): RawQuery) -> Response {
    list(&s, "resourcequotas", "ResourceQuotaList", &q, |v| {
        v["metadata"]["namespace"] == ns.as_str()
    })
}

fn find(objects: &Objects, ns: &str, name: &str) -> Option<usize> {
    objects
        .lists
        .get("resourcequotas")?
        .iter()
        .position(|v| v["metadata"]["namespace"] == ns && v["metadata"]["name"] == name)
}

async fn get_quota(State(s): State<Shared>, Path((ns, name)): Path<(String, String)>) -> Response {
    let objects = s.lock().expect("lock");
    match find(&objects, &ns, &name).and_then(|i| objects.lists.get("resourcequotas").map(|l| l[i].clone())) {
        Some(v) => axum::Json(v).into_response(),
        None => not_found(&name),
    }
}

fn not_found(name: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": format!("resourcequotas {name:?} not found")})),
    )
        .into_response()
}

async fn create_quota(
    State(s): State<Shared>,
    Path(ns): Path<String>,
    axum::Json(mut v): axum::Json<Value>,
) -> Response {
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["resourceVersion"] = json!("2");
    let name = v["metadata"]["name"].as_str().unwrap_or("").to_owned();
    let mut objects = s.lock().expect("lock");
    objects.writes.push((Method::POST.to_string(), format!("{ns}/{name}")));
    objects
        .lists
        .entry("resourcequotas".into())
        .or_default()
        .push(v.clone());
    (StatusCode::CREATED, axum::Json(v)).into_response()
}

async fn replace_quota(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    axum::Json(mut v): axum::Json<Value>,
) -> Response {
    let mut objects = s.lock().expect("lock");
    let Some(i) = find(&objects, &ns, &name) else {
        return not_found(&name);
    };
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["resourceVersion"] = json!("3");
    objects.writes.push((Method::PUT.to_string(), format!("{ns}/{name}")));
    if let Some(list) = objects.lists.get_mut("resourcequotas") {
        list[i] = v.clone();
    }
    axum::Json(v).into_response()
}

async fn delete_quota(State(s): State<Shared>, Path((ns, name)): Path<(String, String)>) -> Response {
    let mut objects = s.lock().expect("lock");
    let Some(i) = find(&objects, &ns, &name) else {
        return not_found(&name);
    };
    objects
        .writes
        .push((Method::DELETE.to_string(), format!("{ns}/{name}")));
    let removed = objects
        .lists
        .get_mut("resourcequotas")
        .map(|l| l.remove(i))
        .unwrap_or(Value::Null);
    axum::Json(removed).into_response()
}
