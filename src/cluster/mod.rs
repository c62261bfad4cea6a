//! What draguard may know about the cluster. The core reads it only through
//! [`ClusterView`]; the server backs it with watched caches when it has a
//! cluster, `check` and tests back it with objects they were given.

pub mod live;

use std::collections::{BTreeMap, HashMap};

/// A read-only view of cluster state the rules may consult.
pub trait ClusterView: Send + Sync {
    /// Labels of a namespace, or `None` when the namespace is not known
    /// (no cluster, not in the cache, not in the checked manifests).
    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>>;

    /// Annotations of a namespace (PodTolerationRestriction compatibility),
    /// or `None` when the namespace is not known.
    fn namespace_annotations(&self, _namespace: &str) -> Option<BTreeMap<String, String>> {
        None
    }
}

/// No cluster at all: nothing is known.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCluster;

impl ClusterView for NoCluster {
    fn namespace_labels(&self, _: &str) -> Option<BTreeMap<String, String>> {
        None
    }
}

/// A fixed set of facts, for `check`, `review` and tests.
#[derive(Debug, Default, Clone)]
pub struct StaticView {
    pub namespaces: HashMap<String, BTreeMap<String, String>>,
    pub annotations: HashMap<String, BTreeMap<String, String>>,
}

impl StaticView {
    pub fn with_namespace(mut self, name: &str, labels: &[(&str, &str)]) -> Self {
        self.namespaces.insert(
            name.to_owned(),
            labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        );
        self
    }
}

impl ClusterView for StaticView {
    fn namespace_labels(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces.get(namespace).cloned()
    }

    fn namespace_annotations(&self, namespace: &str) -> Option<BTreeMap<String, String>> {
        self.annotations.get(namespace).cloned()
    }
}
