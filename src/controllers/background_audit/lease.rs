//! Which replica writes the audit's reports: the holder of one
//! coordination.k8s.io/v1 Lease, as client-go's leader election decides
//! it (k8s.io/client-go tools/leaderelection/leaderelection.go, v0.34.0):
//! a holder renews the Lease every [`LeaseTimes::renew_every`]; another
//! replica takes it over only once it has seen the same record unchanged
//! for a whole `leaseDurationSeconds` on its own clock (never by comparing
//! `renewTime` with its clock, which may be skewed); every write is a
//! create or a replace carrying the resourceVersion read, so of two
//! replicas racing, the apiserver's 409 Conflict leaves one.
//!
//! A holder stops writing before another replica may take over: it holds
//! the Lease only until [`LeaseTimes::write_for`] after its last renewal,
//! shorter than the lease duration. Small get/create/replace calls instead
//! of a leader-election crate: this is the whole of what the audit needs.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;

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
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
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
            Err(e) => {
                // Still ours until the last renewal runs out: one failed
                // renewal is not a lost Lease.
                Err(e)
            }
        }
    }

    /// Whether this replica still holds the Lease, renewing it first when
    /// a renewal is due: what a long round asks before each write.
    pub async fn still_holds(&mut self) -> bool {
        let due = self.last_try.is_none_or(|at| at.elapsed() >= self.times.renew_every);
        if due && let Err(e) = self.try_hold().await {
            tracing::warn!(error = %e, lease = %self.name, "cannot renew the audit Lease");
        }
        self.holds()
    }

    async fn try_write(&mut self, now: Instant) -> Result<bool, kube::Error> {
        let Some(current) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec(None, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created, now);
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        self.observe(&current, now);
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.as_deref().unwrap_or("");
        let ours = holder == self.identity;
        let seen_since = self.observed.as_ref().map_or(now, |(_, at)| *at);
        let expired = holder.is_empty() || now.saturating_duration_since(seen_since) >= self.times.duration;
        if !ours && !expired {
            return Ok(false);
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
        let acquired = if ours { spec.acquire_time.clone() } else { None };
        let mut renewed = current.clone();
        renewed.spec = Some(self.spec(acquired, transitions));
        // The resourceVersion read: a replace that raced another is 409.
        match self.api.replace(&self.name, &PostParams::default(), &renewed).await {
            Ok(written) => {
                self.observe(&written, now);
                if !ours {
                    tracing::info!(lease = %self.name, identity = %self.identity, was = holder, "took the audit Lease");
                }
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
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
