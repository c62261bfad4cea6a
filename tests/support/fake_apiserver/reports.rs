//! wgpolicyk8s.io/v1alpha2 PolicyReports and ClusterPolicyReports, and
//! coordination.k8s.io/v1 Leases, as the apiserver serves them to the
//! background audit:
//! - reports are written by server-side apply only (a PATCH of
//!   `application/apply-patch+yaml` with a `fieldManager`; anything else
//!   is 415), listed (all namespaces, by label selector `k=v`) and deleted;
//! - Leases are read, created (409 AlreadyExists on a second create) and
//!   replaced (409 Conflict for a stale resourceVersion), each write with
//!   the next resourceVersion; or all refused (403, `forbid_leases`).
//!
//! Every write is recorded, as `PATCH policyreports/<ns>/<name>
//! fieldManager=<m> force=<f> <content type>`, `DELETE policyreports/<ns>/<name>`,
//! `POST leases/<ns>/<name> <holder>`, `PUT leases/<ns>/<name> <holder>`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

#[derive(Default)]
pub struct Store {
    /// Reports by (namespace, "" for the cluster's; name).
    pub reports: BTreeMap<(String, String), Value>,
    pub leases: BTreeMap<(String, String), Value>,
    pub writes: Vec<String>,
    resource_version: u64,
    /// When set, every report write is refused with 404 page not found,
    /// as by a cluster without the CRDs.
    pub no_crds: bool,
    /// When set, every Lease request is refused with 403, as for a
    /// ServiceAccount without the Lease's Role.
    pub forbid_leases: bool,
}

impl Store {
    fn next_version(&mut self) -> String {
        self.resource_version += 1;
        (1000 + self.resource_version).to_string()
    }
}

pub type Shared = Arc<Mutex<Store>>;

pub fn routes(store: Shared) -> Router {
    const G: &str = "/apis/wgpolicyk8s.io/v1alpha2";
    Router::new()
        .route(&format!("{G}/policyreports"), axum::routing::get(list_reports))
        .route(
            &format!("{G}/namespaces/{{ns}}/policyreports/{{name}}"),
            axum::routing::patch(apply_report).delete(delete_report).get(get_report),
        )
        .route(
            &format!("{G}/clusterpolicyreports/{{name}}"),
            axum::routing::patch(apply_cluster_report),
        )
        .route(
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
            axum::routing::post(create_lease),
        )
        .route(
            "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}",
            axum::routing::get(get_lease).put(replace_lease),
        )
        .with_state(store)
}

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": {}, "code": code.as_u16()});
    (code, axum::Json(body)).into_response()
}

fn page_not_found() -> Response {
    (StatusCode::NOT_FOUND, "404 page not found").into_response()
}

async fn apply_report(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    apply(&s, ns, name, q, &headers, &body, "PolicyReport")
}

async fn apply_cluster_report(
    State(s): State<Shared>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    apply(&s, String::new(), name, q, &headers, &body, "ClusterPolicyReport")
}

fn apply(
    s: &Shared,
    ns: String,
    name: String,
    q: HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
    kind: &str,
) -> Response {
    let mut store = s.lock().expect("store");
    if store.no_crds {
        return page_not_found();
    }
    let content_type = super::content_type(headers).to_owned();
    if content_type != "application/apply-patch+yaml" {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("this fake takes server-side apply only, not {content_type}"),
        );
    }
    let Some(manager) = q.get("fieldManager") else {
        return status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
                .into(),
        );
    };
    // JSON is YAML: what kube-rs sends.
    let mut object: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", e.to_string()),
    };
    if object["kind"] != kind || object["metadata"]["name"] != name.as_str() {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "the kind or name of the body is not the URL's".into(),
        );
    }
    let kind_path = if ns.is_empty() {
        "clusterpolicyreports"
    } else {
        "policyreports"
    };
    let what = if ns.is_empty() {
        name.clone()
    } else {
        format!("{ns}/{name}")
    };
    store.writes.push(format!(
        "PATCH {kind_path}/{what} fieldManager={manager} force={} {content_type}",
        q.get("force").map_or("false", String::as_str)
    ));
    let rv = store.next_version();
    object["metadata"]["resourceVersion"] = json!(rv);
    store.reports.insert((ns, name), object.clone());
    axum::Json(object).into_response()
}

async fn get_report(State(s): State<Shared>, Path((ns, name)): Path<(String, String)>) -> Response {
    match s.lock().expect("store").reports.get(&(ns, name.clone())) {
        Some(v) => axum::Json(v.clone()).into_response(),
        None => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("policyreports.wgpolicyk8s.io \"{name}\" not found"),
        ),
    }
}

async fn list_reports(State(s): State<Shared>, Query(q): Query<HashMap<String, String>>) -> Response {
    let store = s.lock().expect("store");
    if store.no_crds {
        return page_not_found();
    }
    let selector = q.get("labelSelector").and_then(|l| l.split_once('='));
    let items: Vec<Value> = store
        .reports
        .iter()
        .filter(|((ns, _), _)| !ns.is_empty())
        .map(|(_, v)| v)
        .filter(|v| selector.is_none_or(|(k, want)| v["metadata"]["labels"][k] == *want))
        .map(|v| json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": v["metadata"]}))
        .collect();
    axum::Json(
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList",
        "metadata": {"resourceVersion": "1"}, "items": items}),
    )
    .into_response()
}

async fn delete_report(State(s): State<Shared>, Path((ns, name)): Path<(String, String)>) -> Response {
    let mut store = s.lock().expect("store");
    match store.reports.remove(&(ns.clone(), name.clone())) {
        Some(v) => {
            store.writes.push(format!("DELETE policyreports/{ns}/{name}"));
            axum::Json(v).into_response()
        }
        None => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("policyreports.wgpolicyk8s.io \"{name}\" not found"),
        ),
    }
}

fn lease_not_found(name: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("leases.coordination.k8s.io \"{name}\" not found"),
    )
}

/// The apiserver's refusal of a verb on a Lease to draguard's ServiceAccount.
fn lease_forbidden(verb: &str, ns: &str, name: &str) -> Response {
    status(
        StatusCode::FORBIDDEN,
        "Forbidden",
        format!(
            "leases.coordination.k8s.io \"{name}\" is forbidden: User \"system:serviceaccount:draguard:draguard\" cannot {verb} resource \"leases\" in API group \"coordination.k8s.io\" in the namespace \"{ns}\""
        ),
    )
}

async fn get_lease(State(s): State<Shared>, Path((ns, name)): Path<(String, String)>) -> Response {
    let store = s.lock().expect("store");
    if store.forbid_leases {
        return lease_forbidden("get", &ns, &name);
    }
    match store.leases.get(&(ns, name.clone())) {
        Some(v) => axum::Json(v.clone()).into_response(),
        None => lease_not_found(&name),
    }
}

fn holder(lease: &Value) -> String {
    lease["spec"]["holderIdentity"].as_str().unwrap_or("").to_owned()
}

async fn create_lease(
    State(s): State<Shared>,
    Path(ns): Path<String>,
    axum::Json(mut v): axum::Json<Value>,
) -> Response {
    let mut store = s.lock().expect("store");
    let name = v["metadata"]["name"].as_str().unwrap_or("").to_owned();
    if store.forbid_leases {
        return lease_forbidden("create", &ns, &name);
    }
    if store.leases.contains_key(&(ns.clone(), name.clone())) {
        return status(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("leases.coordination.k8s.io \"{name}\" already exists"),
        );
    }
    let rv = store.next_version();
    v["metadata"]["namespace"] = json!(ns);
    v["metadata"]["resourceVersion"] = json!(rv);
    store.writes.push(format!("POST leases/{ns}/{name} {}", holder(&v)));
    store.leases.insert((ns, name), v.clone());
    (StatusCode::CREATED, axum::Json(v)).into_response()
}

async fn replace_lease(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    axum::Json(mut v): axum::Json<Value>,
) -> Response {
    let mut store = s.lock().expect("store");
    if store.forbid_leases {
        return lease_forbidden("update", &ns, &name);
    }
    let Some(stored) = store.leases.get(&(ns.clone(), name.clone())) else {
        return lease_not_found(&name);
    };
    if v["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"] {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on leases.coordination.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        );
    }
    let rv = store.next_version();
    v["metadata"]["resourceVersion"] = json!(rv);
    store.writes.push(format!("PUT leases/{ns}/{name} {}", holder(&v)));
    store.leases.insert((ns, name), v.clone());
    axum::Json(v).into_response()
}
