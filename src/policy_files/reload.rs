//! Policies in force for a running server, and hot reload: the folder is
//! polled; a valid change replaces the policies at once, an invalid one is
//! logged with file:line:column and the last good policies stay.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::load::{load_dir, policy_files};
use crate::policy::PolicySet;
use crate::policy::load::Skipped;

/// The current policies, shared by every request; swapped whole on reload.
#[derive(Clone)]
pub struct PolicyStore {
    current: Arc<RwLock<Arc<PolicySet>>>,
    outcomes: Arc<ReloadOutcomes>,
    /// Counts the sets put in force, for loops that act on a change (the
    /// background audit's prompt round): a watch channel keeps only the
    /// latest value, so it costs the same however often policies change.
    changes: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Default for PolicyStore {
    fn default() -> Self {
        PolicyStore::new(PolicySet::default())
    }
}

/// How loading the policy folder went, for `/metrics` to read at scrape
/// time: plain atomics, so recording costs the reload nothing measurable.
#[derive(Debug, Default)]
struct ReloadOutcomes {
    successes: AtomicU64,
    failures: AtomicU64,
    /// Unix milliseconds of the last good load; 0 while there was none.
    last_success_ms: AtomicI64,
    /// Whether the latest attempt was good (a fixed file clears a failure).
    last_failed: AtomicBool,
}

/// A snapshot of [`PolicyStore`]'s load outcomes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReloadStats {
    /// Good loads of the folder, the one at start included.
    pub successes: u64,
    /// Loads rejected because a file was invalid.
    pub failures: u64,
    /// When the last good load happened (Unix seconds), if one did.
    pub last_success: Option<f64>,
    /// The latest attempt was rejected: the policies in force are older
    /// than the folder.
    pub last_failed: bool,
}

impl PolicyStore {
    /// Fixed policies (no folder behind them): no load is recorded.
    pub fn new(set: PolicySet) -> Self {
        PolicyStore {
            current: Arc::new(RwLock::new(Arc::new(set))),
            outcomes: Arc::default(),
            changes: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// Sees each [`PolicyStore::replace`] after this call (the latest one
    /// when several came between two looks).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub fn current(&self) -> Arc<PolicySet> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Puts `set` in force and records a good load of the folder.
    pub fn replace(&self, set: PolicySet) {
        let set = Arc::new(set);
        match self.current.write() {
            Ok(mut guard) => *guard = set,
            Err(poisoned) => *poisoned.into_inner() = set,
        }
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        self.outcomes.successes.fetch_add(1, Ordering::Relaxed);
        self.outcomes.last_success_ms.store(now_ms, Ordering::Relaxed);
        self.outcomes.last_failed.store(false, Ordering::Relaxed);
        self.changes.send_modify(|n| *n += 1);
    }

    /// Records a load that was rejected; the policies in force stay.
    pub fn rejected(&self) {
        self.outcomes.failures.fetch_add(1, Ordering::Relaxed);
        self.outcomes.last_failed.store(true, Ordering::Relaxed);
    }

    pub fn reload_stats(&self) -> ReloadStats {
        let o = &self.outcomes;
        let last_ms = o.last_success_ms.load(Ordering::Relaxed);
        ReloadStats {
            successes: o.successes.load(Ordering::Relaxed),
            failures: o.failures.load(Ordering::Relaxed),
            // Milliseconds to seconds: exact enough for "how long ago".
            last_success: (last_ms > 0).then(|| last_ms as f64 / 1000.0),
            last_failed: o.last_failed.load(Ordering::Relaxed),
        }
    }
}

/// A digest of the folder's policy files (names and contents): content,
/// not mtimes, so a same-second edit or a ConfigMap symlink swap is seen.
pub fn fingerprint(dir: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    // A ConfigMap volume's `..data` link, so that one swapped to nowhere
    // is seen even when no key is left to dangle.
    std::fs::read_link(dir.join("..data")).ok().hash(&mut h);
    let files: Vec<PathBuf> = policy_files(dir).unwrap_or_default();
    for f in files {
        f.hash(&mut h);
        std::fs::read(&f).unwrap_or_default().hash(&mut h);
    }
    h.finish()
}

/// Documents of the folder that are not draguard policies, one line each.
pub fn log_skipped(skipped: &[Skipped]) {
    for s in skipped {
        tracing::info!(note = %s, "skipped a document that is not a draguard policy");
    }
}

/// How long a changed folder must stay unchanged before it is loaded: a
/// writer that truncates and then writes a file is not read half-way.
const SETTLE: Duration = Duration::from_millis(300);

/// Polls `dir` every `every` until the task is dropped. A change is loaded
/// once it has settled; a load that fails, that would empty a file that
/// held policies, or that would leave no policy at all (unless
/// `allow_no_policies`, as at start) is rejected and the last good
/// policies stay in force.
pub async fn watch(dir: PathBuf, store: PolicyStore, every: Duration, allow_no_policies: bool) {
    let mut last = fingerprint(&dir);
    let mut holding = files_with_content(&dir);
    loop {
        tokio::time::sleep(every).await;
        let now = fingerprint(&dir);
        if now == last {
            continue;
        }
        tokio::time::sleep(SETTLE.min(every)).await;
        if fingerprint(&dir) != now {
            // Still being written: look again at the next poll.
            continue;
        }
        last = now;
        let emptied: Vec<PathBuf> = holding
            .iter()
            .filter(|f| std::fs::read_to_string(f).is_ok_and(|text| text.trim().is_empty()))
            .cloned()
            .collect();
        if !emptied.is_empty() {
            for file in &emptied {
                tracing::error!(file = %file.display(), "a policy file became empty; write policy files atomically (rename, or a ConfigMap's symlink swap)");
            }
            store.rejected();
            tracing::error!(dir = %dir.display(), "policy change rejected; the last good policies stay in force");
            continue;
        }
        match load_dir(&dir) {
            // A ConfigMap that lost every key (or a mount gone wrong) reads
            // as a folder without policies: applying it would turn
            // enforcement off in every replica at once, and start refuses
            // the same folder.
            Ok(folder) if folder.set.policies.is_empty() && !allow_no_policies => {
                store.rejected();
                tracing::error!(dir = %dir.display(), "the policy folder holds no policies any more; the last good policies stay in force (pass --allow-no-policies to allow none)");
            }
            Ok(folder) => {
                log_skipped(&folder.skipped);
                tracing::info!(dir = %dir.display(), policies = folder.set.policies.len(), "policies reloaded");
                if let Some(note) = crate::policy::namespace_guards::webhook_note(&folder.set) {
                    tracing::warn!("{note}");
                }
                store.replace(folder.set);
                holding = files_with_content(&dir);
            }
            Err(load) => {
                let errors = load.errors();
                for e in errors {
                    tracing::warn!(error = %e, "invalid policy file");
                }
                store.rejected();
                tracing::error!(dir = %dir.display(), errors = errors.len(), "policy change rejected; the last good policies stay in force");
            }
        }
    }
}

/// The folder's policy files that hold more than whitespace.
fn files_with_content(dir: &Path) -> Vec<PathBuf> {
    policy_files(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|f| std::fs::read_to_string(f).is_ok_and(|text| !text.trim().is_empty()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_good_and_rejected_loads() {
        let store = PolicyStore::new(PolicySet::default());
        let fresh = store.reload_stats();
        assert_eq!(
            fresh,
            ReloadStats {
                successes: 0,
                failures: 0,
                last_success: None,
                last_failed: false
            }
        );
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();
        store.replace(PolicySet::default());
        store.rejected();
        let stats = store.reload_stats();
        assert_eq!((stats.successes, stats.failures, stats.last_failed), (1, 1, true));
        let at = stats.last_success.unwrap();
        assert!(at >= before.floor() && at <= before + 60.0, "{at} vs {before}");
        store.replace(PolicySet::default());
        let stats = store.reload_stats();
        assert_eq!((stats.successes, stats.failures, stats.last_failed), (2, 1, false));
    }

    fn policy(name: &str) -> String {
        format!(
            "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: {name}}}\nspec:\n  pods: {{allow: [{{key: example.com/{name}}}]}}\n"
        )
    }

    fn names(store: &PolicyStore) -> Vec<String> {
        store
            .current()
            .policies
            .iter()
            .map(|p| p.policy.metadata.name.clone())
            .collect()
    }

    /// Polls until `done` holds for the store, or fails saying what it saw.
    async fn until(store: &PolicyStore, what: &str, done: impl Fn(&PolicyStore) -> bool) {
        for _ in 0..100 {
            if done(store) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!(
            "never {what}: policies {:?}, stats {:?}",
            names(store),
            store.reload_stats()
        );
    }

    /// Truncated files, a vanished folder and writes in progress never
    /// drop the policies in force; a complete write is loaded.
    #[tokio::test]
    async fn reloads_fail_closed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (a, b) = (dir.path().join("a.yaml"), dir.path().join("b.yaml"));
        std::fs::write(&a, policy("a")).expect("write");
        std::fs::write(&b, policy("b")).expect("write");
        let store = PolicyStore::new(load_dir(dir.path()).expect("valid").set);
        let watcher = tokio::spawn(watch(
            dir.path().to_owned(),
            store.clone(),
            Duration::from_millis(20),
            false,
        ));
        // Let the watcher take its first look before anything changes.
        tokio::time::sleep(Duration::from_millis(100)).await;

        // A truncate (the first half of a non-atomic write) is rejected.
        std::fs::write(&b, "").expect("truncate");
        until(&store, "rejected the emptied file", |s| s.reload_stats().failures == 1).await;
        assert_eq!(names(&store), ["a", "b"]);
        // The write that completes it is loaded.
        std::fs::write(&b, policy("b2")).expect("write");
        until(&store, "loaded the rewrite", |s| names(s) == ["a", "b2"]).await;
        // A deleted file is a deliberate change.
        std::fs::remove_file(&b).expect("remove");
        until(&store, "dropped the deleted file", |s| names(s) == ["a"]).await;
        // A folder moved away keeps the last good policies.
        let moved = dir.path().with_extension("moved");
        std::fs::rename(dir.path(), &moved).expect("move");
        until(&store, "rejected the missing folder", |s| s.reload_stats().last_failed).await;
        assert_eq!(names(&store), ["a"]);
        watcher.abort();
        std::fs::rename(&moved, dir.path()).expect("move back");
    }

    /// A ConfigMap volume as kubelet writes it (kubernetes
    /// pkg/volume/util/atomic_writer.go, v1.36): each version in a
    /// timestamped folder, `..data` a link to the current one, swapped by
    /// renaming a fresh link over it, and each key a link through `..data`.
    #[cfg(unix)]
    struct ConfigMapVolume {
        dir: tempfile::TempDir,
        version: u32,
    }

    #[cfg(unix)]
    impl ConfigMapVolume {
        fn new(keys: &[(&str, String)]) -> Self {
            let mut volume = ConfigMapVolume {
                dir: tempfile::tempdir().expect("tempdir"),
                version: 0,
            };
            volume.publish(keys);
            volume
        }

        fn path(&self) -> &Path {
            self.dir.path()
        }

        /// Writes a new version, then swaps `..data` to it: the keys it
        /// lacks dangle until their links are removed, as kubelet does.
        fn publish(&mut self, keys: &[(&str, String)]) {
            self.version += 1;
            let versioned = format!("..2026_11_26_14_00_00.{:09}", self.version);
            std::fs::create_dir(self.path().join(&versioned)).expect("version folder");
            for (key, text) in keys {
                std::fs::write(self.path().join(&versioned).join(key), text).expect("key");
            }
            self.swap_data_link(&versioned);
            for (key, _) in keys {
                let link = self.path().join(key);
                if link.symlink_metadata().is_err() {
                    std::os::unix::fs::symlink(Path::new("..data").join(key), link).expect("key link");
                }
            }
            for entry in std::fs::read_dir(self.path()).expect("read") {
                let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
                if name.starts_with("..") {
                    if name.starts_with("..2026") && name != versioned {
                        std::fs::remove_dir_all(self.path().join(&name)).expect("old version");
                    }
                } else if !keys.iter().any(|(k, _)| *k == name) {
                    std::fs::remove_file(self.path().join(&name)).expect("stale key link");
                }
            }
        }

        /// Points `..data` at `target` in one rename.
        fn swap_data_link(&self, target: &str) {
            let tmp = self.path().join("..data_tmp");
            std::os::unix::fs::symlink(target, &tmp).expect("link");
            std::fs::rename(&tmp, self.path().join("..data")).expect("swap");
        }
    }

    /// Long enough for the watcher to see a change, let it settle and
    /// judge it (polls of 20 ms, a settle of 20 ms).
    async fn settle() {
        tokio::time::sleep(Duration::from_millis(400)).await;
    }

    /// A ConfigMap that loses every key, or whose `..data` link dangles,
    /// is a failed read: the last good policies stay, the failure is
    /// recorded (`draguard_policy_last_reload_successful 0`), and the next
    /// good version is loaded.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_config_map_never_reloads_to_zero_policies() {
        let mut volume = ConfigMapVolume::new(&[("a.yaml", policy("a")), ("b.yaml", policy("b"))]);
        let store = PolicyStore::new(load_dir(volume.path()).expect("valid").set);
        let watcher = tokio::spawn(watch(
            volume.path().to_owned(),
            store.clone(),
            Duration::from_millis(20),
            false,
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;

        volume.publish(&[]);
        until(&store, "rejected the empty ConfigMap", |s| s.reload_stats().last_failed).await;
        settle().await;
        assert_eq!(names(&store), ["a", "b"]);
        let stats = store.reload_stats();
        assert!(stats.last_failed && stats.failures >= 1, "{stats:?}");
        assert_eq!(stats.successes, 0, "nothing was loaded: {stats:?}");

        volume.publish(&[("a.yaml", policy("a2"))]);
        until(&store, "loaded the next good version", |s| names(s) == ["a2"]).await;
        assert!(!store.reload_stats().last_failed);

        let failures = store.reload_stats().failures;
        volume.swap_data_link("..2026_11_26_14_00_00.gone");
        until(&store, "rejected the dangling ..data", |s| {
            s.reload_stats().failures > failures
        })
        .await;
        settle().await;
        assert_eq!(names(&store), ["a2"]);
        assert!(store.reload_stats().last_failed);
        watcher.abort();
    }

    /// `--allow-no-policies` opts out: the emptied ConfigMap is applied.
    #[cfg(unix)]
    #[tokio::test]
    async fn allow_no_policies_lets_a_config_map_reload_to_zero() {
        let mut volume = ConfigMapVolume::new(&[("a.yaml", policy("a"))]);
        let store = PolicyStore::new(load_dir(volume.path()).expect("valid").set);
        let watcher = tokio::spawn(watch(
            volume.path().to_owned(),
            store.clone(),
            Duration::from_millis(20),
            true,
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
        volume.publish(&[]);
        until(&store, "applied the empty ConfigMap", |s| {
            s.current().policies.is_empty()
        })
        .await;
        let stats = store.reload_stats();
        assert!(!stats.last_failed && stats.successes == 1, "{stats:?}");
        // A dangling link is still a failed read, not "no policies".
        volume.swap_data_link("..2026_11_26_14_00_00.gone");
        until(&store, "rejected the dangling ..data", |s| s.reload_stats().last_failed).await;
        watcher.abort();
    }
}
