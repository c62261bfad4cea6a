//! One round of the background audit: the cluster read through paged,
//! read-only LISTs, judged by `check`'s engine as `draguard audit` judges
//! a snapshot, a part at a time, each part's PolicyReport written as soon
//! as it is judged.
//!
//! Why LISTs and not the watch caches: the caches hold what a review
//! consults (namespace labels, quota totals, devices), slimmed; the audit
//! judges the Pods, workloads and claims themselves, which no cache holds.
//!
//! Why parts: memory. The first part is the cluster-scoped objects
//! (Namespaces, Nodes, DeviceClasses, ResourceSlices, DeviceTaintRules,
//! ResourceSlicePatches), with every ResourceClaim while a DeviceTaintRule
//! stands (their allocations give it its reach); it reports the
//! cluster-scoped objects.
//! Then one part per namespace: its Namespace (labels), the DeviceClasses
//! and every namespaced kind in it, which is all an object of the
//! namespace is judged with, its controllers included (an owner is always
//! in its object's namespace). Only one part is held at a time, as JSON
//! text of at most [`RoundSettings::part_bytes`]; a larger part is not
//! judged, and the round says so.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;

use super::metrics::RoundCounts;
use super::reports::{ReportWriter, WriteError};
use crate::check::{self, Judgement, ObjectReport, Options, Severity, Sink};
use crate::cluster::audited_kinds::{Audited, audited};
use crate::cluster::paged_list::{Collection, each_if_served};
use crate::controllers::lease::Leader;
use crate::policy::toleration_restriction::TolerationRestrictionConfig;
use crate::policy_files::reload::PolicyStore;
use crate::report::policy_report::Scope;

/// Bounds of one round.
#[derive(Debug, Clone, Copy)]
pub struct RoundSettings {
    /// The JSON text one part may hold (see the module's docs).
    pub part_bytes: usize,
    /// Results one report keeps; the rest are counted, not listed.
    pub report_results: usize,
}

impl Default for RoundSettings {
    fn default() -> Self {
        RoundSettings {
            part_bytes: 16 << 20,
            report_results: 500,
        }
    }
}

/// What the objects are judged under.
pub struct Judge {
    pub policies: PolicyStore,
    pub toleration_restriction: Option<Arc<TolerationRestrictionConfig>>,
    pub target: crate::kubernetes::Target,
    /// One thread: a round is background work and must not take the
    /// cores the reviews need.
    pub pool: Arc<rayon::ThreadPool>,
}

impl Judge {
    fn options(&self) -> Options {
        Options {
            policies: (*self.policies.current()).clone(),
            toleration_restriction: self.toleration_restriction.as_deref().cloned(),
            target: self.target,
            pod_templates: check::workload_kinds::builtin(),
            through_controllers: true,
            ..Options::at(jiff::Timestamp::now())
        }
    }
}

/// Which verdicts of a part are its own.
#[derive(Clone)]
enum Keep {
    Cluster,
    Namespace(String),
}

/// A part's verdicts: its report, and what is counted.
struct PartSink {
    keep: Keep,
    scope: Scope,
    counts: RoundCounts,
}

impl Sink for PartSink {
    fn take(&mut self, mut verdict: ObjectReport) {
        let own = match (&self.keep, &verdict.id.namespace) {
            (Keep::Cluster, None) => true,
            (Keep::Namespace(ns), Some(of)) => ns == of,
            _ => false,
        };
        if !own || verdict.judgement == Judgement::NotKubernetes {
            return;
        }
        // An object's `draguard.dev/ignore-check` holds here as in `audit`.
        check::skip::suppress_in(
            &mut verdict,
            &[],
            |kind, finding| crate::report::rules::rule_of(kind, finding).id,
            |id| crate::report::rules::ALL.iter().any(|r| r.id == id),
        );
        self.counts.objects += 1;
        if !verdict.allowed && verdict.judgement != Judgement::Unusable {
            self.counts.denied += 1;
        }
        for finding in &verdict.findings {
            // As the PolicyReport results name them.
            let result = match (finding.severity, &verdict.judgement) {
                (_, Judgement::Unusable) => "error",
                (Severity::Error, _) => "fail",
                (Severity::Warning, _) => "warn",
            };
            self.counts
                .add_findings(finding.policy.as_deref().unwrap_or("draguard"), result, 1);
        }
        self.scope.add(&verdict);
    }
}

/// A v1 List's JSON text, refused past a size.
struct PartText {
    text: String,
    limit: usize,
    empty: bool,
}

impl PartText {
    fn new(limit: usize) -> Self {
        PartText {
            text: String::from("{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":["),
            limit,
            empty: true,
        }
    }

    fn push_text(&mut self, item: &str) -> Result<(), String> {
        if self.text.len() + item.len() + 2 > self.limit {
            return Err(format!("larger than the part budget of {} bytes", self.limit));
        }
        if !self.empty {
            self.text.push(',');
        }
        self.empty = false;
        self.text.push_str(item);
        Ok(())
    }

    fn push(&mut self, mut item: Value) -> Result<(), String> {
        slim(&mut item);
        let text = serde_json::to_string(&item).map_err(|e| format!("cannot write JSON: {e}"))?;
        self.push_text(&text)
    }

    fn finish(mut self) -> String {
        self.text.push_str("]}");
        self.text
    }
}

/// Drops what no rule reads and what often makes up most of an object's
/// text: `metadata.managedFields`, the copy of the whole object in
/// kubectl's last-applied-configuration annotation, and a Node's list of
/// images (tens of KiB on a busy node; only its taints are judged).
fn slim(item: &mut Value) {
    if let Some(metadata) = item.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
        if let Some(annotations) = metadata.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
    if item["kind"] == "Node"
        && let Some(status) = item.get_mut("status").and_then(Value::as_object_mut)
    {
        status.remove("images");
    }
}

/// What one round did, for its log line.
#[derive(Debug, Default)]
pub struct RoundOutcome {
    pub counts: RoundCounts,
    pub namespaces: usize,
    /// PolicyReports written (the ClusterPolicyReport included).
    pub reports_written: usize,
    pub reports_deleted: usize,
    /// Why no report was written, when none could be.
    pub not_written: Option<String>,
}

/// Why a round stopped.
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    #[error("this replica no longer holds the audit Lease")]
    LostLease,
    #[error("{0}")]
    Read(String),
    #[error("cannot write a PolicyReport: {0}")]
    Write(kube::Error),
}

pub struct Round<'a> {
    pub client: &'a kube::Client,
    pub judge: &'a Judge,
    pub writer: &'a ReportWriter,
    pub leader: &'a mut Leader,
    pub settings: RoundSettings,
}

impl Round<'_> {
    pub async fn run(self) -> Result<RoundOutcome, RoundError> {
        let Round {
            client,
            judge,
            writer,
            leader,
            settings,
        } = self;
        let options = Arc::new(judge.options());
        let kinds = audited();
        let claims = kinds
            .iter()
            .find(|a| a.collection.group == "resource.k8s.io" && a.collection.plural == "resourceclaims");
        let mut outcome = RoundOutcome::default();

        // The cluster's part; the Namespaces and DeviceClasses are kept
        // (as text) for the namespaces' parts.
        let mut namespaces: Vec<(String, String)> = Vec::new();
        let mut classes: Vec<String> = Vec::new();
        let mut part = Some(PartText::new(settings.part_bytes));
        // The claims come last, and only while a DeviceTaintRule stands:
        // its reach is all they are read for here (each is judged in its
        // namespace's part), and they can be most of this part.
        let mut taint_rules = 0usize;
        let cluster_reads = kinds.iter().filter(|a| !a.namespaced).chain(claims);
        for audited in cluster_reads {
            let c = &audited.collection;
            if c.plural == "resourceclaims" && taint_rules == 0 {
                continue;
            }
            let namespace_kind = c.kind == "Namespace" && c.group.is_empty();
            let class_kind = c.plural == "deviceclasses";
            let rule_kind = c.plural == "devicetaintrules";
            each_if_served(client, c, None, |mut item| {
                slim(&mut item);
                taint_rules += usize::from(rule_kind);
                if namespace_kind || class_kind {
                    let text = serde_json::to_string(&item).map_err(|e| format!("cannot write JSON: {e}"))?;
                    if namespace_kind {
                        let name = item["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                        namespaces.push((name, text.clone()));
                    } else {
                        classes.push(text.clone());
                    }
                    if let Some(p) = &mut part
                        && let Err(e) = p.push_text(&text)
                    {
                        too_large("the cluster-scoped objects", &e);
                        part = None;
                    }
                } else if let Some(p) = &mut part
                    && let Err(e) = p.push(item)
                {
                    too_large("the cluster-scoped objects", &e);
                    part = None;
                }
                Ok(())
            })
            .await
            .map_err(RoundError::Read)?;
        }
        let cluster_scope = match part {
            Some(text) => {
                let judging = judge_part(judge, &options, text.finish(), Keep::Cluster, settings);
                holding(leader, judging).await
            }
            None => None,
        };
        let mut can_write = true;
        // A part not judged (too large, or its judgement failed) keeps its
        // last report: an empty one would say its findings are gone.
        match cluster_scope {
            Some((scope, counts)) => {
                add_counts(&mut outcome.counts, counts);
                outcome.counts.omitted += scope.omitted();
                write(leader, writer, None, scope, &mut can_write, &mut outcome).await?;
            }
            None => outcome.counts.parts_not_judged += 1,
        }

        // Each namespace's part. A kind the cluster does not serve is
        // asked for once, in the first namespace; a served one in the
        // version found there.
        let mut served: Vec<Option<Collection>> = kinds
            .iter()
            .filter(|a| a.namespaced)
            .map(|a| Some(pinned(a, None)))
            .collect();
        let namespaced: Vec<&Audited> = kinds.iter().filter(|a| a.namespaced).collect();
        let mut keep = BTreeSet::new();
        outcome.namespaces = namespaces.len();
        for (namespace, namespace_text) in &namespaces {
            // Renewed between namespaces too: a round of many clean
            // namespaces writes nothing for long, and a Lease left to run
            // out lets a second replica start a round of its own.
            if !leader.still_holds().await {
                return Err(RoundError::LostLease);
            }
            let mut part = PartText::new(settings.part_bytes);
            let mut fits = part.push_text(namespace_text);
            for class in &classes {
                fits = fits.and_then(|()| part.push_text(class));
            }
            for (audited, collection) in namespaced.iter().zip(served.iter_mut()) {
                let (Ok(()), Some(c)) = (&fits, collection.as_ref()) else {
                    continue;
                };
                let version = each_if_served(client, c, Some(namespace), |item| {
                    if fits.is_ok() {
                        fits = part.push(item);
                    }
                    Ok(())
                })
                .await
                .map_err(RoundError::Read)?;
                *collection = version.map(|v| pinned(audited, Some(v)));
            }
            if let Err(e) = fits {
                too_large(&format!("namespace {namespace}"), &e);
                outcome.counts.parts_not_judged += 1;
                // Not judged, so its last report stands.
                keep.insert(namespace.clone());
                continue;
            }
            let keep_ns = Keep::Namespace(namespace.clone());
            let judging = judge_part(judge, &options, part.finish(), keep_ns, settings);
            let Some((scope, counts)) = holding(leader, judging).await else {
                outcome.counts.parts_not_judged += 1;
                keep.insert(namespace.clone());
                continue;
            };
            add_counts(&mut outcome.counts, counts);
            outcome.counts.omitted += scope.omitted();
            if scope.has_findings() {
                keep.insert(namespace.clone());
                write(leader, writer, Some(namespace), scope, &mut can_write, &mut outcome).await?;
            }
        }
        if can_write {
            if !leader.still_holds().await {
                return Err(RoundError::LostLease);
            }
            match writer.delete_stale(&keep).await {
                Ok(n) => outcome.reports_deleted = n,
                Err(WriteError::NoCrd) => outcome.not_written = Some(WriteError::NoCrd.to_string()),
                Err(WriteError::Api(e)) => return Err(RoundError::Write(e)),
            }
        }
        Ok(outcome)
    }
}

/// `audited` with only `version` to try, once it is known.
fn pinned(audited: &Audited, version: Option<&'static str>) -> Collection {
    let c = &audited.collection;
    let versions = match version.and_then(|v| c.versions.iter().position(|x| *x == v)) {
        Some(i) => &c.versions[i..=i],
        None => c.versions,
    };
    Collection { versions, ..*c }
}

fn too_large(what: &str, why: &str) {
    tracing::warn!(
        part = what,
        reason = why,
        "audit: not judged this round; raise --audit-part-size to judge it"
    );
}

fn add_counts(total: &mut RoundCounts, part: RoundCounts) {
    total.objects += part.objects;
    total.denied += part.denied;
    total.parts_not_judged += part.parts_not_judged;
    for ((policy, result), n) in part.findings {
        total.add_findings(&policy, result, n);
    }
}

/// `judging`, with the Lease renewed while it runs: a large part may take
/// longer than the Lease lasts.
async fn holding<T>(leader: &mut Leader, judging: impl std::future::Future<Output = T>) -> T {
    let mut judging = std::pin::pin!(judging);
    loop {
        tokio::select! {
            done = &mut judging => return done,
            () = tokio::time::sleep(leader.times().renew_every) => {
                leader.still_holds().await;
            }
        }
    }
}

/// Judges one part on the audit's own thread; `None` when the judgement
/// failed.
async fn judge_part(
    judge: &Judge,
    options: &Arc<Options>,
    text: String,
    keep: Keep,
    settings: RoundSettings,
) -> Option<(Scope, RoundCounts)> {
    let pool = judge.pool.clone();
    let options = options.clone();
    let judged = tokio::task::spawn_blocking(move || {
        let sources = [check::Source {
            name: "cluster".into(),
            text,
        }];
        let mut sink = PartSink {
            keep,
            scope: Scope::capped(settings.report_results),
            counts: RoundCounts::default(),
        };
        pool.install(|| {
            check::check_into(&sources, &[], &options, |_, _| {}, &mut sink);
        });
        (sink.scope, sink.counts)
    })
    .await;
    judged
        .inspect_err(|e| {
            // A panic in the judgement is draguard's bug: this part is
            // lost, the round and the server go on.
            tracing::error!(error = %e, "audit: judging a part failed");
        })
        .ok()
}

/// Writes one report while this replica holds the Lease; without the CRDs
/// the round goes on judging (the metrics and log still say what it
/// found) and writes nothing more.
async fn write(
    leader: &mut Leader,
    writer: &ReportWriter,
    namespace: Option<&str>,
    scope: Scope,
    can_write: &mut bool,
    outcome: &mut RoundOutcome,
) -> Result<(), RoundError> {
    if !*can_write {
        return Ok(());
    }
    if !leader.still_holds().await {
        return Err(RoundError::LostLease);
    }
    let report = scope.into_report(namespace);
    match writer.apply(namespace, &report).await {
        Ok(()) => {
            outcome.reports_written += 1;
            Ok(())
        }
        Err(WriteError::NoCrd) => {
            *can_write = false;
            outcome.not_written = Some(WriteError::NoCrd.to_string());
            Ok(())
        }
        Err(WriteError::Api(e)) => Err(RoundError::Write(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_part_refuses_what_would_pass_its_budget_and_is_a_list() {
        let item = json!({"kind": "Pod", "metadata": {"name": "a"}});
        let one = serde_json::to_string(&item).expect("JSON").len();
        let header = PartText::new(0).text.len();
        // Room for exactly two items, their comma and the closing `]}`.
        let mut part = PartText::new(header + 2 * one + 1 + 2);
        assert_eq!(part.push(item.clone()), Ok(()));
        assert_eq!(part.push(item.clone()), Ok(()));
        let limit = header + 2 * one + 3;
        assert_eq!(
            part.push(item.clone()),
            Err(format!("larger than the part budget of {limit} bytes"))
        );
        let list: Value = serde_json::from_str(&part.finish()).expect("a JSON List");
        assert_eq!(list["items"], json!([item, item]));
    }

    #[test]
    fn a_node_loses_its_image_list_not_its_taints() {
        let mut node = json!({"kind": "Node", "metadata": {"name": "n"},
            "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]},
            "status": {"images": [{"names": ["a"]}], "capacity": {"cpu": "8"}}});
        slim(&mut node);
        assert_eq!(
            node,
            json!({"kind": "Node", "metadata": {"name": "n"},
                   "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]},
                   "status": {"capacity": {"cpu": "8"}}})
        );
    }

    #[test]
    fn objects_lose_managed_fields_and_the_last_applied_copy_only() {
        let mut pod = json!({"metadata": {"name": "a", "managedFields": [{"manager": "kubectl"}],
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}", "draguard.dev/ignore-check": "all"}},
            "spec": {"tolerations": []}});
        slim(&mut pod);
        assert_eq!(
            pod,
            json!({"metadata": {"name": "a", "annotations": {"draguard.dev/ignore-check": "all"}},
                   "spec": {"tolerations": []}})
        );
    }

    /// Three Pods of `ml` that tolerate spot nodes, which the policy does
    /// not allow, and one of `web`, judged as the namespace `ml`'s part
    /// with room for two results.
    #[test]
    fn a_namespace_part_keeps_its_own_verdicts_and_caps_its_results() {
        let policy = "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {name: gpu-nodes}\nspec:\n  pods:\n    allow: [{key: nvidia.com/gpu, operator: Exists}]\n";
        let options = Options {
            policies: crate::policy::PolicySet {
                policies: crate::policy::load::parse("gpu.yaml", policy).expect("policy"),
                ..Default::default()
            },
            through_controllers: true,
            ..Options::at(jiff::Timestamp::now())
        };
        let pod = |ns: &str, name: &str| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{name}")},
                   "spec": {"containers": [{"name": "c", "image": "i"}],
                            "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}})
        };
        let mut part = PartText::new(1 << 20);
        for (ns, name) in [("ml", "a"), ("ml", "b"), ("web", "w"), ("ml", "c")] {
            part.push(pod(ns, name)).expect("room");
        }
        let mut sink = PartSink {
            keep: Keep::Namespace("ml".into()),
            scope: Scope::capped(2),
            counts: RoundCounts::default(),
        };
        let sources = [check::Source {
            name: "cluster".into(),
            text: part.finish(),
        }];
        check::check_into(&sources, &[], &options, |_, _| {}, &mut sink);
        assert_eq!((sink.counts.objects, sink.counts.denied), (3, 3));
        assert_eq!(sink.counts.findings.get(&("gpu-nodes".to_owned(), "fail")), Some(&3));
        assert_eq!(sink.scope.omitted(), 1);
        let report = sink.scope.into_report(Some("ml"));
        assert_eq!(report["metadata"]["namespace"], "ml");
        assert_eq!(report["metadata"]["annotations"]["draguard.dev/results-omitted"], "1");
        assert_eq!(report["summary"]["fail"], 3, "the summary counts every result");
        let named: Vec<&Value> = report["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| &r["resources"][0]["name"])
            .collect();
        assert_eq!(named, [&json!("a"), &json!("b")]);
    }
}
