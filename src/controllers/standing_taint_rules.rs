//! `serve` with a cluster: DeviceTaintRules judged while they stand, not
//! only when written. A NoExecute rule admitted while it reached no device
//! evicts every pod allocated on what it picks once slices and allocations
//! appear; this loop counts its reach again when those change and, past a
//! policy's `taintRules` caps (`review::standing_taint_rule`), says so: a
//! Warning Event `ReachExceedsCaps` on the rule, the gauge
//! `draguard_taint_rule_reach{rule,kind}` and a log line. With
//! `onExceed: Pause` it also sets the rule's effect to None.
//!
//! Bounded, and never in the way of admission:
//! - The rules come from a watch of their own ([`TaintRuleIndex`], at most
//!   `MAX_RULES`), not part of `/readyz`: a review never waits on it.
//! - Debounced: a round every [`Settings::every`]; a rule is counted again
//!   only when it, the slices or the claims changed since its last count,
//!   or the policies were reloaded, so a burst of changes costs one count.
//! - At most [`Settings::per_round`] counts a round, one at a time, on a
//!   blocking thread, each under a slot of `cluster::impact_permits` taken
//!   only while no DeviceTaintRule review holds one (and never waited
//!   for): reviews go first and keep the other slot; a rule that found
//!   them busy is retried next round.
//! - An Event only when what the rule passes changes, not every round.
//!
//! One voice for all replicas: every replica counts (its own gauge, scraped
//! per pod, and warm counts for a take-over), but only the replica holding
//! the Lease [`LEASE_NAME`] in draguard's namespace (`controllers::lease`)
//! publishes the Events and sends the pause (each replica published each
//! Event before: three times over with deploy/base's three replicas).
//! What the holder has said travels in the Lease
//! (`standing_taint_rules_said`): the replica that takes over (within a
//! renewal, 2 s, of a holder that stopped and gave the Lease up; at most
//! `leaseDurationSeconds` + a renewal after one that died, 17 s by
//! default) judges every rule again against it, so it says what changed
//! and repeats an Event at most once per take-over (when the holder died
//! between publishing and noting). A replica that cannot read or renew the
//! Lease (its Role missing, the apiserver down) publishes nothing, logs
//! that once a minute and exports `draguard_taint_rules_leader 0`; reviews
//! never wait on any of it. A pause is still sent with the rule's
//! resourceVersion, so that even two holders (a partition) cannot both
//! apply one.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::cluster::error_log::{ERROR_LINE_EVERY, ErrorLineAction, ErrorLog};
use crate::cluster::index::{Watched, spawn_watch};
use crate::cluster::live::LiveView;
use crate::cluster::slim::SlimObject;
use crate::cluster::taint_rules::{StandingRule, TaintRuleIndex};
use crate::controllers::lease::Leader;
use crate::controllers::lease_gauge::LeaseGauge;
use crate::controllers::standing_taint_rules_said::{NOTE, Said, Say};
use crate::kubernetes::KubeVersion;
use crate::objects::dra::DeviceTaintRuleSpec;
use crate::policy::PolicySet;
use crate::policy_files::reload::PolicyStore;
use crate::review::standing_taint_rule::{self, StandingReach};
use crate::server::taint_rule_reach::{Reach, TaintRuleReach};
use crate::view::TaintRuleImpact;

/// The Lease whose holder speaks for all replicas, in draguard's
/// namespace: one of its own, not the audit's, as the audit is opt-in and
/// may hold its Lease through a long round.
pub const LEASE_NAME: &str = "draguard-taint-rules";
/// `/metrics`: whether this replica holds it.
pub const LEADER_METRIC: &str = "draguard_taint_rules_leader";
pub const LEADER_HELP: &str = "1 while this replica holds the Lease draguard-taint-rules (only it publishes the standing DeviceTaintRules' Events and pauses them), else 0.";

/// The Event reason when a standing rule passes its caps.
pub const REASON_EXCEEDS: &str = "ReachExceedsCaps";
/// The Event reason when it is back within them.
pub const REASON_WITHIN: &str = "ReachWithinCaps";
/// The Event reason when `onExceed: Pause` set its effect to None.
pub const REASON_PAUSED: &str = "Paused";
/// An Event's note is at most 1 kB (events.k8s.io/v1 `note`, kube-runtime
/// 5.0.0 src/events.rs `Event::note`).
const NOTE_BYTES: usize = 1024;

/// How often, and how much, the loop counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// A round every this long: the debounce. A rule is counted at most
    /// once a round, whatever changed how often in between.
    pub every: Duration,
    /// Rules counted a round at most (the least recently counted first);
    /// the rest wait for the next round. With `n` rules changing at once,
    /// the last is counted after `ceil(n / per_round)` rounds.
    pub per_round: usize,
}

impl Default for Settings {
    /// 5 s and 8: at most 1.6 counts a second, each as costly as one
    /// DeviceTaintRule write's (tens of ms over 100,000 claims).
    fn default() -> Self {
        Settings {
            every: Duration::from_secs(5),
            per_round: 8,
        }
    }
}

/// What was last counted for one rule (what was said is in [`Said`]).
struct Seen {
    resource_version: Option<String>,
    reach_changes: u64,
    policies: Arc<PolicySet>,
    counted: Instant,
}

pub struct StandingTaintRules {
    client: Client,
    view: LiveView,
    rules: Arc<Watched<TaintRuleIndex>>,
    resource: ApiResource,
    policies: PolicyStore,
    version: KubeVersion,
    reach: TaintRuleReach,
    recorder: Recorder,
    settings: Settings,
    seen: HashMap<String, Seen>,
    /// The Lease: only its holder publishes and pauses.
    leader: Leader,
    holding: LeaseGauge,
    leading: bool,
    /// What the holder has said, by rule uid; written to the Lease when
    /// it changed.
    said: Said,
    said_changed: bool,
    errors: ErrorLog,
    untracked_logged: usize,
}

impl StandingTaintRules {
    /// Starts the DeviceTaintRule watch (in the version `version` serves)
    /// on the current runtime; [`StandingTaintRules::run`] is the loop.
    /// `leader` is the Lease [`LEASE_NAME`]; `holding` says whether this
    /// replica holds it.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        client: Client,
        view: LiveView,
        policies: PolicyStore,
        version: KubeVersion,
        reach: TaintRuleReach,
        settings: Settings,
        leader: Leader,
        holding: LeaseGauge,
    ) -> Self {
        let gvk = GroupVersionKind::gvk(
            "resource.k8s.io",
            standing_taint_rule::api_version(version),
            "DeviceTaintRule",
        );
        let resource = ApiResource::from_gvk_with_plural(&gvk, "devicetaintrules");
        // Optional: an apiserver that does not serve the version (the
        // DRADeviceTaintRules gate off) has no rules to stand.
        let rules = Watched::new("devicetaintrules", true);
        spawn_watch(Api::<SlimObject>::all_with(client.clone(), &resource), rules.clone());
        let reporter = Reporter {
            controller: "draguard".into(),
            // A pod's hostname is its name.
            instance: std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()),
        };
        StandingTaintRules {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            view,
            rules,
            resource,
            policies,
            version,
            reach,
            settings,
            seen: HashMap::new(),
            leader: leader.with_note(NOTE),
            holding,
            leading: false,
            said: Said::default(),
            said_changed: false,
            errors: ErrorLog::new(ERROR_LINE_EVERY),
            untracked_logged: 0,
        }
    }

    /// The loop, until `stop` completes: then it gives the Lease up, so
    /// that another replica speaks within a renewal, not after 15 s.
    pub async fn run(mut self, stop: impl std::future::Future<Output = ()>) {
        let mut stop = std::pin::pin!(stop);
        tracing::info!(
            lease = %self.leader.name(),
            identity = %self.leader.identity(),
            "standing DeviceTaintRules: every replica counts their reach; the replica holding the Lease publishes their Events"
        );
        let mut rounds = tokio::time::interval(self.settings.every);
        rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The Lease is renewed (or watched for a silent holder) on its own
        // period, between rounds too.
        let mut renewals = tokio::time::interval(self.leader.times().renew_every);
        renewals.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = rounds.tick() => {
                    self.lead().await;
                    self.round().await;
                    self.write_said().await;
                }
                _ = renewals.tick() => {
                    self.lead().await;
                }
                () = &mut stop => break,
            }
        }
        if let Err(e) = self.leader.release().await {
            tracing::warn!(error = %e, lease = %self.leader.name(), "cannot release the Lease; another replica takes it over once it expires");
        }
        self.holding.set(false);
    }

    /// Whether this replica holds the Lease now, renewing it when due.
    /// Having just taken it, it reads what its predecessor said; holding it
    /// again (taken, or renewed after a lapse in which it said nothing), it
    /// counts every rule again to judge against what was said.
    async fn lead(&mut self) -> bool {
        let holds = self.leader.still_holds().await;
        let acquired = self.leader.acquired();
        if let Some(found) = &acquired {
            let (said, unreadable) = Said::parse(found.as_deref());
            if let Some(error) = unreadable {
                tracing::warn!(%error, annotation = NOTE, "the Lease's note of Events published is unreadable; the rules past their caps are said again");
            }
            self.said = said;
            self.leader.set_note(self.said.note());
        }
        if holds && (!self.leading || acquired.is_some()) {
            tracing::info!(
                past_caps = self.said.len(),
                "holds the standing DeviceTaintRules' Lease: this replica publishes their Events from now on"
            );
            self.seen.clear();
        } else if self.leading && !holds {
            tracing::info!(
                "no longer holds the standing DeviceTaintRules' Lease: publishes nothing until it holds it again"
            );
        }
        self.leading = holds;
        self.holding.set(holds);
        holds
    }

    /// Writes what was said to the Lease at once when it changed, so that
    /// a successor repeats as little as possible.
    async fn write_said(&mut self) {
        if !std::mem::take(&mut self.said_changed) || !self.leading {
            return;
        }
        self.leader.set_note(self.said.note());
        self.leader.try_hold_logged().await;
    }

    /// One round: forget deleted rules, count the changed ones.
    async fn round(&mut self) {
        if !self.rules.is_synced() {
            return;
        }
        let (rules, untracked) = self.rules.read(|index| {
            let rules: Vec<(String, StandingRule)> =
                index.by_name.iter().map(|(n, r)| (n.clone(), r.clone())).collect();
            (rules, index.untracked)
        });
        if untracked > self.untracked_logged {
            self.untracked_logged = untracked;
            tracing::warn!(
                untracked,
                tracked = rules.len(),
                "more standing DeviceTaintRules than the check tracks; the rest are not judged while they stand"
            );
        }
        let names: std::collections::HashSet<&str> = rules.iter().map(|(n, _)| n.as_str()).collect();
        self.seen.retain(|name, _| names.contains(name.as_str()));
        self.reach.retain(|name| names.contains(name));
        let keys: std::collections::HashSet<&str> = rules.iter().map(|(n, r)| said_key(n, r)).collect();
        self.said_changed |= self.said.retain(|key| keys.contains(key));
        let policies = self.policies.current();
        let changes = self.view.reach_changes();
        let mut due: Vec<&(String, StandingRule)> = rules
            .iter()
            .filter(|(name, rule)| match self.seen.get(name) {
                None => true,
                Some(seen) => {
                    seen.resource_version != rule.resource_version
                        || seen.reach_changes != changes
                        || !Arc::ptr_eq(&seen.policies, &policies)
                }
            })
            .collect();
        // Never counted first, then the least recently counted.
        due.sort_by_key(|(name, _)| self.seen.get(name).map(|s| s.counted));
        for (name, rule) in due.into_iter().take(self.settings.per_round) {
            self.check(name, rule, &policies, changes).await;
        }
    }

    /// Counts one rule's reach, judges it, and acts on the answer.
    async fn check(&mut self, name: &str, rule: &StandingRule, policies: &Arc<PolicySet>, changes: u64) {
        let counts = match reach_now(self.view.clone(), rule.spec.clone(), self.version).await {
            TaintRuleImpact::Known(counts) => counts,
            // Caches still listing, or every slot busy with reviews: the
            // rule stays due, for the next round.
            TaintRuleImpact::Unknown | TaintRuleImpact::Busy { .. } => return,
        };
        let Some(reach) = standing_taint_rule::judge(policies, Some(&rule.annotations), &rule.spec, &counts) else {
            return;
        };
        self.reach.set(
            name,
            Reach {
                pods: reach.pods as u64,
                namespaces: reach.namespaces as u64,
            },
        );
        let summary = (!reach.exceeded.is_empty()).then(|| reach.summary(name));
        let mut seen = Seen {
            resource_version: rule.resource_version.clone(),
            reach_changes: changes,
            policies: policies.clone(),
            counted: Instant::now(),
        };
        // Only the holder speaks; the others have counted for their gauge.
        if self.lead().await {
            let key = said_key(name, rule);
            match (self.said.say(key, summary.as_deref()), &summary) {
                (Say::Exceeds, Some(now)) => {
                    tracing::warn!(rule = name, pods = reach.pods, namespaces = reach.namespaces, "{now}");
                    self.publish(name, rule, EventType::Warning, REASON_EXCEEDS, now).await;
                }
                (Say::Within, _) => {
                    let within = format!(
                        "DeviceTaintRule {name} reaches {} pods in {} namespaces, within its caps again",
                        reach.pods, reach.namespaces
                    );
                    tracing::info!(rule = name, "{within}");
                    self.publish(name, rule, EventType::Normal, REASON_WITHIN, &within)
                        .await;
                }
                _ => {}
            }
            // Noted after publishing: a holder that dies in between leaves
            // its successor to say it once more, never to miss it.
            self.said_changed |= self.said.note_said(key, summary.as_deref());
            if rule.spec.taint.effect == "NoExecute" && !self.pause(name, rule, &reach).await {
                // Not paused though asked to: due again next round.
                seen.resource_version = None;
            }
        }
        self.seen.insert(name.to_owned(), seen);
    }

    /// `onExceed: Pause`: sets the rule's effect to None. `false` when a
    /// pause was due and did not happen.
    async fn pause(&mut self, name: &str, rule: &StandingRule, reach: &StandingReach) -> bool {
        let resource_version = rule.resource_version.as_deref().unwrap_or_default();
        let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let Some(patch) = reach.pause_patch(resource_version, &now) else {
            return true;
        };
        if !self.lead().await {
            return false;
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &self.resource);
        match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {
                let note = patch["metadata"]["annotations"][standing_taint_rule::PAUSED]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                tracing::warn!(rule = name, "paused: effect NoExecute set to None: {note}");
                self.publish(name, rule, EventType::Warning, REASON_PAUSED, &note).await;
                true
            }
            Err(e) => {
                if let ErrorLineAction::Log { suppressed } = self.errors.failed_with(Instant::now(), "pause") {
                    tracing::error!(rule = name, error = %e, suppressed, "cannot pause the DeviceTaintRule; retrying next round");
                }
                false
            }
        }
    }

    async fn publish(&mut self, name: &str, rule: &StandingRule, type_: EventType, reason: &str, note: &str) {
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(truncated(note, NOTE_BYTES)),
            action: "JudgeStandingRule".to_owned(),
            secondary: None,
        };
        let regarding = ObjectReference {
            api_version: Some(self.resource.api_version.clone()),
            kind: Some("DeviceTaintRule".to_owned()),
            name: Some(name.to_owned()),
            uid: rule.uid.clone(),
            ..ObjectReference::default()
        };
        // Cluster-scoped: kube-runtime writes the Event in `default`, as
        // the kubelet does for Nodes.
        if let Err(e) = self.recorder.publish(&event, &regarding).await
            && let ErrorLineAction::Log { suppressed } = self.errors.failed_with(Instant::now(), "event")
        {
            tracing::warn!(rule = name, reason, error = %e, suppressed, "cannot publish the Event (the log line above says the same)");
        }
    }
}

/// The key of a rule in [`Said`]: its uid (a rule deleted and created
/// again under its name is another rule), its name for a rule without one.
fn said_key<'a>(name: &'a str, rule: &'a StandingRule) -> &'a str {
    rule.uid.as_deref().unwrap_or(name)
}

/// The one place the reach is counted: on a blocking thread, as it walks
/// the indexes under their read locks.
async fn reach_now(view: LiveView, spec: DeviceTaintRuleSpec, version: KubeVersion) -> TaintRuleImpact {
    tokio::task::spawn_blocking(move || view.taint_rule_impact_when_idle(&spec, version))
        .await
        .unwrap_or(TaintRuleImpact::Unknown)
}

/// `text` cut to at most `max` bytes on a character boundary, with `…`.
fn truncated(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_cut_on_a_character_boundary_within_the_limit() {
        assert_eq!(truncated("short", 10), "short");
        let long = "é".repeat(600);
        let cut = truncated(&long, NOTE_BYTES);
        assert!(cut.len() <= NOTE_BYTES, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert_eq!(cut.len(), 1023, "510 two-byte characters and the ellipsis");
    }
}
