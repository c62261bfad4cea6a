//! Writes the audit's PolicyReports by server-side apply, as field
//! manager `draguard`, and deletes those of namespaces that no longer
//! have findings. Every report is named `draguard-audit` and labelled
//! `app.kubernetes.io/managed-by: draguard`; draguard touches no other.

use std::collections::BTreeSet;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::Value;

use crate::report::policy_report::{API_VERSION, NAME};

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "draguard";
/// The label every report carries (the stale ones are found by it).
const MANAGED: &str = "app.kubernetes.io/managed-by=draguard";
/// Reports listed at once when looking for stale ones.
const PAGE: u32 = 500;

fn resource(kind: &str, plural: &str) -> ApiResource {
    let (group, version) = API_VERSION.split_once('/').unwrap_or(("wgpolicyk8s.io", "v1alpha2"));
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub struct ReportWriter {
    client: kube::Client,
    namespaced: ApiResource,
    cluster: ApiResource,
}

/// Why a report was not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The wg-policy CRDs are not installed: nothing to write to.
    #[error("the PolicyReport CRDs (wgpolicyk8s.io/v1alpha2) are not installed")]
    NoCrd,
    #[error(transparent)]
    Api(#[from] kube::Error),
}

/// A 404 that is no Status of reason NotFound: the apiserver's plain
/// `404 page not found` for a resource it does not serve.
fn not_served(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 && !s.is_not_found())
}

impl ReportWriter {
    pub fn new(client: kube::Client) -> Self {
        ReportWriter {
            client,
            namespaced: resource("PolicyReport", "policyreports"),
            cluster: resource("ClusterPolicyReport", "clusterpolicyreports"),
        }
    }

    /// Applies `report` (a PolicyReport of `namespace`, or the
    /// ClusterPolicyReport for `None`), forcing draguard's ownership of
    /// its fields: the report is draguard's alone.
    pub async fn apply(&self, namespace: Option<&str>, report: &Value) -> Result<(), WriteError> {
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.namespaced),
            None => Api::all_with(self.client.clone(), &self.cluster),
        };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api.patch(NAME, &params, &Patch::Apply(report)).await {
            Ok(_) => Ok(()),
            Err(e) if not_served(&e) => Err(WriteError::NoCrd),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes draguard's PolicyReports in namespaces not in `keep`: their
    /// findings are gone. Returns how many were deleted.
    pub async fn delete_stale(&self, keep: &BTreeSet<String>) -> Result<usize, WriteError> {
        let all: Api<DynamicObject> = Api::all_with(self.client.clone(), &self.namespaced);
        let mut params = ListParams::default().labels(MANAGED).limit(PAGE);
        let mut stale = Vec::new();
        loop {
            let page = match all.list_metadata(&params).await {
                Ok(page) => page,
                Err(e) if not_served(&e) => return Err(WriteError::NoCrd),
                Err(e) => return Err(e.into()),
            };
            for report in page.items {
                let (Some(ns), Some(name)) = (report.metadata.namespace, report.metadata.name) else {
                    continue;
                };
                if name == NAME && !keep.contains(&ns) {
                    stale.push(ns);
                }
            }
            match page.metadata.continue_.filter(|t| !t.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
        let mut deleted = 0;
        for ns in stale {
            let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &ns, &self.namespaced);
            match api.delete(NAME, &DeleteParams::default()).await {
                Ok(_) => deleted += 1,
                // Gone already (another writer, a namespace deleted).
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(deleted)
    }
}
