//! Watches draguard's two webhook configurations, so that a `caBundle`
//! someone removed or changed (a `kubectl apply` of the manifests, a GitOps
//! sync, a hand edit) is seen within the watch's latency instead of at the
//! next periodic check: while it is wrong, every claim and pod write fails.
//!
//! Each configuration is watched on its own, narrowed by the field selector
//! `metadata.name=<name>`. That selector is also what lets RBAC grant
//! `list`/`watch` with `resourceNames` (k8s.io/apiserver
//! pkg/endpoints/request/requestinfo.go takes the name of a list or watch
//! from an exact `metadata.name` field selector), so draguard needs no right
//! to read any other webhook configuration.
//!
//! The watch yields what it saw, as [`Seen`]; deciding what to do is the
//! controller's ([`super::webhook_certs`]).

use std::time::Instant;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::Api;
use kube::runtime::{WatchStreamExt as _, watcher};

use super::webhook_certs::{WebhookEntry, mutating_entries, validating_entries};
use crate::cluster::error_log::{ERROR_LINE_EVERY, ErrorLineAction, ErrorLog};
use crate::cluster::watch_error;

/// Which of the two configurations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigKind {
    Mutating,
    Validating,
}

impl ConfigKind {
    pub fn name(self) -> &'static str {
        match self {
            ConfigKind::Mutating => "MutatingWebhookConfiguration",
            ConfigKind::Validating => "ValidatingWebhookConfiguration",
        }
    }

    /// Its slot in the controller's `[mutating, validating]` arrays.
    pub fn index(self) -> usize {
        match self {
            ConfigKind::Mutating => 0,
            ConfigKind::Validating => 1,
        }
    }
}

/// One configuration as the watch last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub kind: ConfigKind,
    /// Its entries; `None` once it is gone.
    pub entries: Option<Vec<WebhookEntry>>,
}

/// The state of one configuration's watch across a (re-)list: an object
/// that is not in a re-list was deleted while the watch was down, and only
/// the end of the list can tell.
#[derive(Debug, Default)]
struct Relist {
    listing: bool,
    listed_any: bool,
}

impl Relist {
    /// What one watcher event says about the configuration, if anything.
    fn on_event<K>(
        &mut self,
        kind: ConfigKind,
        event: watcher::Event<K>,
        entries: fn(&K) -> Vec<WebhookEntry>,
    ) -> Option<Seen> {
        let seen = |entries| Some(Seen { kind, entries });
        match event {
            watcher::Event::Init => {
                self.listing = true;
                self.listed_any = false;
                None
            }
            watcher::Event::InitApply(object) => {
                self.listed_any = true;
                seen(Some(entries(&object)))
            }
            watcher::Event::InitDone => {
                let gone = std::mem::take(&mut self.listing) && !self.listed_any;
                if gone { seen(None) } else { None }
            }
            watcher::Event::Apply(object) => seen(Some(entries(&object))),
            watcher::Event::Delete(_) => seen(None),
        }
    }
}

/// Every change of either configuration named `name`, forever. Watch errors
/// are retried with kube-runtime's default backoff and logged as the
/// cluster watches' are: at most one line a minute per configuration.
pub fn changes(
    mutating: Api<MutatingWebhookConfiguration>,
    validating: Api<ValidatingWebhookConfiguration>,
    name: &str,
) -> impl Stream<Item = Seen> + Send + 'static {
    let config = || watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mutating = one(ConfigKind::Mutating, mutating, config(), mutating_entries);
    let validating = one(ConfigKind::Validating, validating, config(), validating_entries);
    futures::stream::select(mutating, validating)
}

fn one<K>(
    kind: ConfigKind,
    api: Api<K>,
    config: watcher::Config,
    entries: fn(&K) -> Vec<WebhookEntry>,
) -> impl Stream<Item = Seen> + Send + 'static
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let mut relist = Relist::default();
    let mut log = ErrorLog::new(ERROR_LINE_EVERY);
    watcher(api, config).default_backoff().filter_map(move |event| {
        let seen = match event {
            Ok(event) => {
                // As the cluster watches (`cluster::index::spawn_watch`):
                // kube-runtime announces each list attempt with `Init`
                // before making it, failing ones included, so only what the
                // apiserver sent shows the watch works again.
                if !matches!(event, watcher::Event::Init)
                    && let Some(errors) = log.succeeded()
                {
                    tracing::info!(kind = kind.name(), errors, "webhook configuration watch recovered");
                }
                relist.on_event(kind, event, entries)
            }
            Err(e) => {
                let action = log.failed_with(Instant::now(), &watch_error::key(&e));
                if let ErrorLineAction::Log { suppressed } = action {
                    if watch_error::is_denied(&e) {
                        tracing::error!(
                            kind = kind.name(),
                            error = %e,
                            suppressed,
                            "webhook configuration watch refused; this will not fix itself: grant list and watch on {} named draguard (deploy/base/rbac-webhook-certs.yaml); caBundle is still checked every minute (at most one line a minute; `suppressed` errors since the last)",
                            kind.name()
                        );
                    } else {
                        tracing::warn!(
                            kind = kind.name(),
                            error = %e,
                            suppressed,
                            "webhook configuration watch failed; caBundle is still checked every minute (at most one line a minute per distinct error; `suppressed` errors since the last)"
                        );
                    }
                }
                None
            }
        };
        std::future::ready(seen)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::{ServiceReference, ValidatingWebhook, WebhookClientConfig};
    use kube::api::ObjectMeta;

    fn config(ca: Option<&[u8]>) -> ValidatingWebhookConfiguration {
        ValidatingWebhookConfiguration {
            metadata: ObjectMeta {
                name: Some("draguard".into()),
                ..ObjectMeta::default()
            },
            webhooks: Some(vec![ValidatingWebhook {
                name: "validate.draguard.dev".into(),
                client_config: WebhookClientConfig {
                    service: Some(ServiceReference {
                        namespace: "draguard".into(),
                        name: "draguard".into(),
                        ..ServiceReference::default()
                    }),
                    ca_bundle: ca.map(|c| k8s_openapi::ByteString(c.to_vec())),
                    ..WebhookClientConfig::default()
                },
                ..ValidatingWebhook::default()
            }]),
        }
    }

    fn entry(ca: Option<&[u8]>) -> Vec<WebhookEntry> {
        vec![WebhookEntry {
            name: "validate.draguard.dev".into(),
            service: Some(("draguard".into(), "draguard".into())),
            ca_bundle: ca.map(<[u8]>::to_vec),
        }]
    }

    #[test]
    fn events_become_what_was_seen_and_a_relist_without_the_object_is_a_deletion() {
        let kind = ConfigKind::Validating;
        let mut relist = Relist::default();
        let mut on = |event| relist.on_event(kind, event, validating_entries);
        assert_eq!(on(watcher::Event::Init), None);
        assert_eq!(
            on(watcher::Event::InitApply(config(Some(b"CA")))),
            Some(Seen {
                kind,
                entries: Some(entry(Some(b"CA")))
            })
        );
        assert_eq!(on(watcher::Event::InitDone), None, "listed: nothing more to say");
        assert_eq!(
            on(watcher::Event::Apply(config(None))),
            Some(Seen {
                kind,
                entries: Some(entry(None))
            }),
            "a removed caBundle"
        );
        assert_eq!(
            on(watcher::Event::Delete(config(None))),
            Some(Seen { kind, entries: None })
        );
        // Deleted while the watch was down: the re-list does not have it.
        assert_eq!(on(watcher::Event::Init), None);
        assert_eq!(on(watcher::Event::InitDone), Some(Seen { kind, entries: None }));
    }
}
