//! Policies in force for a running server, and hot reload: the folder is
//! polled; a valid change replaces the policies at once, an invalid one is
//! logged with file:line:column and the last good policies stay.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use super::PolicySet;
use super::load::{load_dir, policy_files};

/// The current policies, shared by every request; swapped whole on reload.
#[derive(Clone, Default)]
pub struct PolicyStore(Arc<RwLock<Arc<PolicySet>>>);

impl PolicyStore {
    pub fn new(set: PolicySet) -> Self {
        PolicyStore(Arc::new(RwLock::new(Arc::new(set))))
    }

    pub fn current(&self) -> Arc<PolicySet> {
        match self.0.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn replace(&self, set: PolicySet) {
        let set = Arc::new(set);
        match self.0.write() {
            Ok(mut guard) => *guard = set,
            Err(poisoned) => *poisoned.into_inner() = set,
        }
    }
}

/// A digest of the folder's policy files (names and contents): content,
/// not mtimes, so a same-second edit or a ConfigMap symlink swap is seen.
pub fn fingerprint(dir: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    let files: Vec<PathBuf> = policy_files(dir).unwrap_or_default();
    for f in files {
        f.hash(&mut h);
        std::fs::read(&f).unwrap_or_default().hash(&mut h);
    }
    h.finish()
}

/// Documents of the folder that are not draguard policies, one line each.
pub fn log_skipped(skipped: &[super::load::Skipped]) {
    for s in skipped {
        tracing::info!(note = %s, "skipped a document that is not a draguard policy");
    }
}

/// Polls `dir` every `every` until the task is dropped.
pub async fn watch(dir: PathBuf, store: PolicyStore, every: Duration) {
    let mut last = fingerprint(&dir);
    loop {
        tokio::time::sleep(every).await;
        let now = fingerprint(&dir);
        if now == last {
            continue;
        }
        last = now;
        match load_dir(&dir) {
            Ok(folder) => {
                log_skipped(&folder.skipped);
                tracing::info!(dir = %dir.display(), policies = folder.set.policies.len(), "policies reloaded");
                store.replace(folder.set);
            }
            Err(errors) => {
                for e in &errors {
                    tracing::warn!(error = %e, "invalid policy file");
                }
                tracing::warn!(dir = %dir.display(), errors = errors.len(), "policy change rejected; the last good policies stay in force");
            }
        }
    }
}
