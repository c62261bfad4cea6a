//! A cluster index kept current by a kube-runtime watcher.
//!
//! Each concern (quota usage, namespace labels, ResourceQuota limits,
//! ResourceSlicePatches) reduces the objects of one watch to what draguard
//! reads, on every event, so that a request reads its answer without
//! walking or decoding the cluster's objects. Whole objects are never
//! kept: each is reduced as it arrives and dropped.
//!
//! A (re-)list is built into a fresh index beside the one in service and
//! swapped in when it completes. A re-list happens when the watch lost
//! events (410 Gone); until it is done the index says it is not synced, so
//! `/readyz` answers 503 and the quota check refuses to guess.

use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;

use super::error_log::{ERROR_LINE_EVERY, ErrorLineAction, ErrorLog};
use super::watch_error;
use crate::view::CacheState;

/// What one concern keeps of its objects.
pub trait WatchIndex: Default + Send + Sync + 'static {
    type Object: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static;

    /// An object was listed, created or changed.
    fn apply(&mut self, object: &Self::Object);
    /// An object was deleted.
    fn delete(&mut self, object: &Self::Object);
    /// How many objects the index holds, for `/metrics`.
    fn objects(&self) -> usize;
}

/// An index, and what its watch has done so far.
pub struct Watched<I> {
    what: &'static str,
    index: RwLock<I>,
    synced: AtomicBool,
    started: Instant,
    /// Time from the start to the first completed list.
    first_synced_after: OnceLock<Duration>,
    errors: AtomicU64,
    /// Changes applied to the index in service (events, swapped-in lists),
    /// for a reader that redoes work only when something changed
    /// (`controllers::standing_taint_rules`).
    changes: AtomicU64,
    /// The watch task has ended (its runtime is shutting down): the index
    /// will never change again.
    stopped: AtomicBool,
    /// The resource may not exist (an optional CRD): a 404 on the list is
    /// an empty, synced index, not an outage.
    optional: bool,
    /// While the apiserver refuses the watch (401, 403): what is missing,
    /// for `/readyz` and the reviews that need this cache. Cleared by the
    /// next event.
    denied: Mutex<Option<String>>,
}

impl<I: WatchIndex> Watched<I> {
    pub fn new(what: &'static str, optional: bool) -> Arc<Self> {
        Arc::new(Watched {
            what,
            index: RwLock::new(I::default()),
            synced: AtomicBool::new(false),
            started: Instant::now(),
            first_synced_after: OnceLock::new(),
            errors: AtomicU64::new(0),
            changes: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
            optional,
            denied: Mutex::new(None),
        })
    }

    pub fn name(&self) -> &'static str {
        self.what
    }

    /// No watch feeds this index any more.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// The watch has a complete list and has not lost events since.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// How many times the index in service has changed so far; equal
    /// counts mean the same index.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// While the apiserver refuses this watch: what is missing, and that
    /// it will not fix itself (`watch_error::denied_message`).
    pub fn denied(&self) -> Option<String> {
        self.denied.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Synced, the name, and what is missing while the watch is refused.
    pub fn readiness_state(&self) -> (bool, &'static str, Option<String>) {
        (self.is_synced(), self.what, self.denied())
    }

    pub(crate) fn set_denied(&self, denied: Option<String>) {
        *self.denied.lock().unwrap_or_else(PoisonError::into_inner) = denied;
    }

    /// Reads the index. A writer that panicked leaves an index that was
    /// consistent before its event; reading it beats failing every request.
    pub fn read<R>(&self, f: impl FnOnce(&I) -> R) -> R {
        f(&self.index.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn write(&self, f: impl FnOnce(&mut I)) {
        f(&mut self.index.write().unwrap_or_else(PoisonError::into_inner));
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    pub fn state(&self) -> CacheState {
        CacheState {
            name: self.what,
            synced: self.is_synced(),
            objects: self.read(WatchIndex::objects),
            watch_errors: self.errors.load(Ordering::Relaxed),
            first_synced_after: self.first_synced_after.get().copied(),
        }
    }

    /// A list began: until it completes, the index may be missing what the
    /// watch lost.
    fn list_started(&self) {
        self.synced.store(false, Ordering::Release);
    }

    /// A list completed: `fresh` replaces the index in service.
    fn list_done(&self, fresh: I) {
        self.write(|index| *index = fresh);
        self.mark_synced();
    }

    fn mark_synced(&self) {
        self.synced.store(true, Ordering::Release);
        let first = self.first_synced_after.get_or_init(|| self.started.elapsed());
        tracing::debug!(cache = self.what, seconds = first.as_secs_f64(), "cache synced");
    }

    /// Applies one watcher event. `relist` holds the index being built by
    /// a list in progress.
    pub fn on_event(&self, event: watcher::Event<I::Object>, relist: &mut Option<I>) {
        match event {
            watcher::Event::Init => {
                self.list_started();
                *relist = Some(I::default());
            }
            watcher::Event::InitApply(object) => relist.get_or_insert_with(I::default).apply(&object),
            watcher::Event::InitDone => self.list_done(relist.take().unwrap_or_default()),
            watcher::Event::Apply(object) => self.write(|index| index.apply(&object)),
            watcher::Event::Delete(object) => self.write(|index| index.delete(&object)),
        }
    }

    /// Counts a watch error. For an optional resource the server does not
    /// serve (404), the index is empty and synced.
    fn on_error(&self, error: &watcher::Error) -> bool {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let missing = matches!(
            error,
            watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 404
        );
        if self.optional && missing {
            self.list_done(I::default());
            return true;
        }
        false
    }
}

/// Objects per page of a (re-)list: only one page is decoded at a time, so
/// a list of 100,000 claims is never held whole. kube-runtime's default
/// (`watcher::Config::default`, kube-runtime-5.0.0 src/watcher.rs), and
/// client-go's pager's `defaultPageSize` (kubernetes/kubernetes
/// staging/src/k8s.io/client-go/tools/pager/pager.go, master 04791b49),
/// stated here so that it cannot change unnoticed.
const LIST_PAGE: u32 = 500;

/// Runs the watch of `api` into `watched` on the current runtime until the
/// runtime stops. Errors are retried with kube-runtime's default backoff
/// and logged at most once a minute per distinct error; a refused watch
/// (401, 403) names the missing permission instead of promising a retry.
pub fn spawn_watch<I: WatchIndex>(api: Api<I::Object>, watched: Arc<Watched<I>>) {
    let resource = watch_error::rbac_resource(api.resource_url());
    let config = watcher::Config::default().page_size(LIST_PAGE);
    let stream = watcher(api, config).default_backoff();
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        let mut log = ErrorLog::new(ERROR_LINE_EVERY);
        let mut relist: Option<I> = None;
        let what = watched.name();
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    // kube-runtime announces each list attempt with `Init`
                    // before making it, failing ones included: only what
                    // the apiserver sent shows the watch works.
                    let answered = !matches!(event, watcher::Event::Init);
                    watched.on_event(event, &mut relist);
                    if answered {
                        if watched.denied().is_some() {
                            watched.set_denied(None);
                        }
                        if let Some(errors) = log.succeeded() {
                            tracing::info!(what, errors, "watch recovered");
                        }
                    }
                }
                Err(e) => {
                    if watched.on_error(&e) {
                        // A CRD that is not installed: expected, and quiet.
                        tracing::debug!(what, error = %e, "not served; treated as empty");
                        continue;
                    }
                    let denied = watch_error::status_code(&e)
                        .filter(|_| watch_error::is_denied(&e))
                        .map(|code| watch_error::denied_message(code, &resource));
                    if watched.denied() != denied {
                        watched.set_denied(denied.clone());
                    }
                    let action = log.failed_with(Instant::now(), &watch_error::key(&e));
                    let ErrorLineAction::Log { suppressed } = action else {
                        continue;
                    };
                    match denied {
                        Some(denied) => tracing::error!(
                            error = %e,
                            what,
                            suppressed,
                            "watch refused: {denied} (at most one line a minute; `suppressed` errors since the last)"
                        ),
                        None => tracing::warn!(
                            error = %e,
                            what,
                            suppressed,
                            "watch error; retrying with backoff (at most one line a minute per distinct error; `suppressed` errors since the last)"
                        ),
                    }
                }
            }
        }
        watched.stopped.store(true, Ordering::Release);
    });
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    /// The names of the objects seen.
    #[derive(Default)]
    struct Names(BTreeSet<String>);

    impl WatchIndex for Names {
        type Object = ConfigMap;

        fn apply(&mut self, object: &ConfigMap) {
            self.0.insert(object.metadata.name.clone().unwrap_or_default());
        }

        fn delete(&mut self, object: &ConfigMap) {
            self.0.remove(object.metadata.name.as_deref().unwrap_or_default());
        }

        fn objects(&self) -> usize {
            self.0.len()
        }
    }

    fn named(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn names(watched: &Watched<Names>) -> Vec<String> {
        watched.read(|n| n.0.iter().cloned().collect())
    }

    #[test]
    fn a_list_is_swapped_in_whole_and_events_follow() {
        let watched = Watched::<Names>::new("configmaps", false);
        let mut relist = None;
        assert!(!watched.is_synced());
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(named("a")),
            watcher::Event::InitApply(named("b")),
        ] {
            watched.on_event(event, &mut relist);
        }
        assert!(!watched.is_synced(), "not before the list is done");
        assert!(names(&watched).is_empty(), "a list in progress is not served");
        watched.on_event(watcher::Event::InitDone, &mut relist);
        assert!(watched.is_synced());
        assert_eq!(names(&watched), ["a", "b"]);
        assert_eq!(watched.changes(), 1, "the list swapped in is one change");
        watched.on_event(watcher::Event::Apply(named("c")), &mut relist);
        watched.on_event(watcher::Event::Delete(named("a")), &mut relist);
        assert_eq!(names(&watched), ["b", "c"]);
        assert_eq!(watched.changes(), 3);
        let state = watched.state();
        assert_eq!((state.synced, state.objects), (true, 2));
        assert!(state.first_synced_after.is_some());
    }

    #[test]
    fn a_relist_after_lost_events_is_unsynced_until_done_and_replaces_the_index() {
        let watched = Watched::<Names>::new("configmaps", false);
        let mut relist = None;
        watched.on_event(watcher::Event::Init, &mut relist);
        watched.on_event(watcher::Event::InitApply(named("gone-while-lost")), &mut relist);
        watched.on_event(watcher::Event::InitDone, &mut relist);
        let first = watched.state().first_synced_after;
        // The watch expired (410): kube-runtime lists again.
        watched.on_event(watcher::Event::Init, &mut relist);
        assert!(!watched.is_synced());
        assert_eq!(names(&watched), ["gone-while-lost"], "the old index serves meanwhile");
        watched.on_event(watcher::Event::InitApply(named("new")), &mut relist);
        watched.on_event(watcher::Event::InitDone, &mut relist);
        assert!(watched.is_synced());
        assert_eq!(names(&watched), ["new"], "a deletion lost with the watch is gone too");
        assert_eq!(watched.state().first_synced_after, first, "time to first sync is kept");
    }

    #[test]
    fn a_missing_optional_resource_is_an_empty_synced_index() {
        let not_found = || {
            watcher::Error::InitialListFailed(kube::Error::Api(Box::new(kube::core::Status {
                code: 404,
                ..kube::core::Status::default()
            })))
        };
        let optional = Watched::<Names>::new("resourceslicepatches", true);
        assert!(optional.on_error(&not_found()));
        assert!(optional.is_synced());
        let required = Watched::<Names>::new("resourceclaims", false);
        assert!(!required.on_error(&not_found()));
        assert!(!required.is_synced());
        assert_eq!(required.state().watch_errors, 1);
    }
}
