//! Which replica writes: the holder of one coordination.k8s.io/v1 Lease,
//! as client-go's leader election decides it
//! (k8s.io/client-go tools/leaderelection/leaderelection.go, v0.34.0,
//! `tryAcquireOrRenew`): a holder renews the Lease every
//! [`LeaseTimes::renew_every`]; another replica takes it over only once it
//! has seen the same record unchanged for a whole `leaseDurationSeconds`
//! on its own clock (never by comparing `renewTime` with its clock, which
//! may be skewed); every write is a create or a replace carrying the
//! resourceVersion read, so of two replicas racing, the apiserver's 409
//! Conflict leaves one.
//!
//! A holder stops writing before another replica may take over: it holds
//! the Lease only until [`LeaseTimes::write_for`] after its last renewal,
//! shorter than the lease duration. Small get/create/replace calls instead
//! of a leader-election crate: this is the whole of what draguard needs.
//!
//! Used by the background audit (Lease `draguard-audit`) and the standing
//! DeviceTaintRules (Lease `draguard-taint-rules`): one Lease each, so that
//! each loop renews on its own schedule and the opt-in audit, which may
//! hold its Lease through a long round, neither delays nor depends on the
//! always-on standing check.
//!
//! A holder may keep a short note in one annotation of its Lease
//! ([`Leader::with_note`]): what it has already said, so that the replica
//! that takes over does not say it again ([`Leader::acquired`]).
//!
//! Errors (RBAC missing, apiserver down) leave the replica without the
//! Lease and are logged at most once a minute per distinct error.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;

use crate::cluster::error_log::{ERROR_LINE_EVERY, ErrorLineAction, ErrorLog};

/// The Lease's timings.
#[derive(Debug, Clone, Copy)]
pub struct LeaseTimes {
    /// `leaseDurationSeconds`: how long others wait for a silent holder.
    pub duration: Duration,
    /// How often the holder renews it (and others look at it).
    pub renew_every: Duration,
    /// How long after a renewal the holder still writes: below `duration`
    /// by more than a renewal's round trip.
    pub write_for: Duration,
}

impl Default for LeaseTimes {
    /// client-go's defaults for kube-controller-manager: 15 s duration,
    /// renewal deadline 10 s, retry every 2 s.
    fn default() -> Self {
        LeaseTimes {
            duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(2),
            write_for: Duration::from_secs(10),
        }
    }
}

/// What a replica may do with the Lease record it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// It holds it: renew.
    Renew,
    /// Nobody holds it, or its holder has been silent a whole duration:
    /// take it over.
    Take,
    /// Another replica holds it and renews it: wait.
    Wait,
}

/// The decision of client-go's `tryAcquireOrRenew` (step 2): `unchanged_for`
/// is how long this replica has seen the same record, on its own clock.
pub fn claim(holder: &str, identity: &str, unchanged_for: Duration, duration: Duration) -> Claim {
    if holder == identity {
        Claim::Renew
    } else if holder.is_empty() || unchanged_for >= duration {
        Claim::Take
    } else {
        Claim::Wait
    }
}

/// One replica's view of the Lease.
pub struct Leader {
    api: Api<Lease>,
    name: String,
    identity: String,
    times: LeaseTimes,
    /// The last record seen (its resourceVersion) and when, on this clock.
    observed: Option<(String, Instant)>,
    /// Until when this replica may write.
    holds_until: Option<Instant>,
    /// When it last tried to acquire or renew.
    last_try: Option<Instant>,
    /// The annotation that holds the holder's note, and its value to write.
    note_key: Option<&'static str>,
    note: Option<String>,
    /// Set when this replica took the Lease: the note it found there.
    acquired: Option<Option<String>>,
    errors: ErrorLog,
}

impl Leader {
    pub fn new(client: kube::Client, namespace: &str, name: &str, identity: String, times: LeaseTimes) -> Self {
        Leader {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity,
            times,
            observed: None,
            holds_until: None,
            last_try: None,
            note_key: None,
            note: None,
            acquired: None,
            errors: ErrorLog::new(ERROR_LINE_EVERY),
        }
    }

    /// The holder keeps a note in the Lease's annotation `key`.
    pub fn with_note(mut self, key: &'static str) -> Self {
        self.note_key = Some(key);
        self
    }

    /// The note the next renewal writes.
    pub fn set_note(&mut self, note: String) {
        self.note = Some(note);
    }

    /// Once after each time this replica took the Lease (from another
    /// holder, or by creating it): the note it found there (`None` when
    /// there was none). The note becomes this replica's own until
    /// [`Leader::set_note`].
    pub fn acquired(&mut self) -> Option<Option<String>> {
        self.acquired.take()
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn times(&self) -> LeaseTimes {
        self.times
    }

    /// Whether this replica holds the Lease now (and may write).
    pub fn holds(&self) -> bool {
        self.holds_until.is_some_and(|until| Instant::now() < until)
    }

    /// Acquires or renews the Lease if it can; returns [`Leader::holds`].
    /// An apiserver error leaves this replica without it (the next try
    /// may get it back), and is returned for the log.
    pub async fn try_hold(&mut self) -> Result<bool, kube::Error> {
        let started = Instant::now();
        self.last_try = Some(started);
        match self.try_write(started).await {
            Ok(true) => {
                self.holds_until = Some(started + self.times.write_for);
                Ok(true)
            }
            Ok(false) => {
                self.holds_until = None;
                Ok(false)
            }
            // Still ours until the last renewal runs out: one failed
            // renewal is not a lost Lease.
            Err(e) => Err(e),
        }
    }

    /// Whether this replica still holds the Lease, renewing it first when
    /// a renewal is due: what a loop asks every renewal period, and a long
    /// round before each write. Errors are logged at most once a minute.
    pub async fn still_holds(&mut self) -> bool {
        let due = self.last_try.is_none_or(|at| at.elapsed() >= self.times.renew_every);
        if due {
            self.try_hold_logged().await;
        }
        self.holds()
    }

    /// [`Leader::try_hold`] now, whether due or not (to write a changed
    /// note at once), its error logged at most once a minute.
    pub async fn try_hold_logged(&mut self) -> bool {
        match self.try_hold().await {
            Ok(holds) => {
                if let Some(errors) = self.errors.succeeded() {
                    tracing::info!(lease = %self.name, errors, "the Lease can be read and renewed again");
                }
                holds
            }
            Err(e) => {
                if let ErrorLineAction::Log { suppressed } = self.errors.failed_with(Instant::now(), &error_key(&e)) {
                    tracing::warn!(
                        error = %e,
                        lease = %self.name,
                        suppressed,
                        "cannot read or renew the Lease; this replica writes nothing the Lease guards until it holds it \
                         (at most one line a minute; `suppressed` errors since the last)"
                    );
                }
                self.holds()
            }
        }
    }

    /// Gives the Lease up, if this replica holds it, so that another takes
    /// it over at once instead of after a whole duration (client-go's
    /// `release`, `ReleaseOnCancel`): the holder emptied, the note kept
    /// for the successor. A replica that is shutting down calls it after
    /// its last write.
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        if self.holds_until.take().is_none() {
            return Ok(());
        }
        let Some(mut current) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let Some(spec) = current.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.acquire_time = None;
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        self.put_note(&mut current.metadata);
        self.api.replace(&self.name, &PostParams::default(), &current).await?;
        tracing::info!(lease = %self.name, identity = %self.identity, "released the Lease");
        Ok(())
    }

    async fn try_write(&mut self, now: Instant) -> Result<bool, kube::Error> {
        let Some(current) = self.api.get_opt(&self.name).await? else {
            let mut metadata = ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            };
            self.put_note(&mut metadata);
            let lease = Lease {
                metadata,
                spec: Some(self.spec(None, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created, now);
                    self.acquired = Some(None);
                    tracing::info!(lease = %self.name, identity = %self.identity, "created the Lease, and holds it");
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        self.observe(&current, now);
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.as_deref().unwrap_or("");
        let seen_since = self.observed.as_ref().map_or(now, |(_, at)| *at);
        let ours = match claim(
            holder,
            &self.identity,
            now.saturating_duration_since(seen_since),
            self.times.duration,
        ) {
            Claim::Wait => return Ok(false),
            Claim::Renew => true,
            Claim::Take => false,
        };
        // Taking over, the note is the former holder's: kept as found.
        let found = self
            .note_key
            .and_then(|key| current.metadata.annotations.as_ref().and_then(|a| a.get(key).cloned()));
        if !ours {
            self.note = found.clone();
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
        let acquired = if ours { spec.acquire_time.clone() } else { None };
        let mut renewed = current.clone();
        renewed.spec = Some(self.spec(acquired, transitions));
        self.put_note(&mut renewed.metadata);
        // The resourceVersion read: a replace that raced another is 409.
        match self.api.replace(&self.name, &PostParams::default(), &renewed).await {
            Ok(written) => {
                self.observe(&written, now);
                if !ours {
                    self.acquired = Some(found);
                    tracing::info!(lease = %self.name, identity = %self.identity, was = holder, "took the Lease");
                }
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn put_note(&self, metadata: &mut ObjectMeta) {
        if let (Some(key), Some(note)) = (self.note_key, &self.note) {
            metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(key.to_owned(), note.clone());
        }
    }

    /// Notes when the record last changed, on this clock.
    fn observe(&mut self, lease: &Lease, now: Instant) {
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        match &self.observed {
            Some((seen, _)) if *seen == version => {}
            _ => self.observed = Some((version, now)),
        }
    }

    fn spec(&self, acquired: Option<MicroTime>, transitions: i32) -> LeaseSpec {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(i32::try_from(self.times.duration.as_secs()).unwrap_or(i32::MAX)),
            acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
            renew_time: Some(now),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }
}

/// One log line a minute per kind of failure: a 403 (RBAC missing) and a
/// connection error are different lines, the same 403 every 2 s is one.
fn error_key(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("api {}", s.code),
        _ => "transport".to_owned(),
    }
}

/// This process's identity in the Lease: the pod's name ($HOSTNAME in a
/// pod) and a random suffix, as client-go's callers do (hostname_uuid), so
/// that a restarted container is not taken for the holder it replaced.
pub fn identity() -> String {
    use std::hash::{BuildHasher, Hasher};
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "draguard".to_owned());
    // RandomState's keys are random per process: a suffix without a
    // random-number crate.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    format!("{host}_{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DURATION: Duration = Duration::from_secs(15);

    #[test]
    fn a_holder_renews_and_others_wait_a_whole_duration_of_silence() {
        let me = "draguard-a_1";
        assert_eq!(claim(me, me, Duration::from_secs(60), DURATION), Claim::Renew);
        assert_eq!(claim("draguard-b_2", me, Duration::ZERO, DURATION), Claim::Wait);
        assert_eq!(
            claim("draguard-b_2", me, Duration::from_millis(14_999), DURATION),
            Claim::Wait
        );
        assert_eq!(claim("draguard-b_2", me, DURATION, DURATION), Claim::Take);
        assert_eq!(
            claim("", me, Duration::ZERO, DURATION),
            Claim::Take,
            "a released Lease is free at once"
        );
        assert_eq!(
            claim("draguard-a_9", me, Duration::ZERO, DURATION),
            Claim::Wait,
            "the same pod name restarted is another holder"
        );
    }

    #[test]
    fn identities_are_the_pod_name_and_a_fresh_suffix() {
        let (a, b) = (identity(), identity());
        assert_ne!(a, b);
        let (host, suffix) = a.rsplit_once('_').expect("host_suffix");
        assert!(!host.is_empty());
        assert_eq!(suffix.len(), 16);
    }
}
