//! Calls per write, counted from draguard's metrics, over several policy
//! sets: each set restarts serve on a policies folder (the shipped
//! `policies/` plus or minus a policy), waits until serve has written the
//! entries it manages (the defaulting entry's `draguard-policies-in-force`
//! condition and the `<hash>.selector.mutate.draguard.dev` entries) and the
//! apiserver routes by them, then makes server-side dry runs of claims,
//! templates and Pods as the operator in namespaces with various labels.
//!
//! What docs/src/operating/outages.md promises, checked as the apiserver routes:
//! - a write that needs no mutation costs one call (validate);
//! - a write that gets a default costs two (mutate, then validate), and
//!   the default is in the object the apiserver answers;
//! - no write is sent to two mutating entries (the selector entries'
//!   regions are disjoint);
//! - a second label selector on another key costs nothing in namespaces
//!   it does not select (issue 39, bug 2: it cost every claim and Pod
//!   CREATE 2 calls);
//! - with `--pod-toleration-restriction` every Pod is sent to /mutate (its
//!   merge may add tolerations to any Pod), claims are not.
//!
//! A Pod in a namespace where every default is refused by a policy that
//! selects it by label costs nothing (issue 39 left it a needless call).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Outcome;
use crate::admission_calls::{Calls, Scrape, plain_value};
use crate::cluster::{Cluster, ROOT};
use crate::draguard::{NAME, ServeOptions, entries};
use crate::kubectl::Kubectl;

/// serve's condition on the defaulting entry (src/controllers/mutate_conditions.rs).
const CONDITION: &str = "draguard-policies-in-force";
/// serve's condition on the validating entries (src/controllers/validate_conditions.rs).
const VALIDATE_CONDITION: &str = "draguard-can-change-outcome";
const VALIDATING_ENTRY: &str = "validate.draguard.dev";
/// The name shape of serve's selector entries.
const SELECTOR_ENTRY: &str = ".selector.mutate.draguard.dev";
const DEFAULTING_ENTRY: &str = "mutate.draguard.dev";

// Namespaces, by what selects them.
const PLAIN: &str = "e2e-calls-plain";
/// Named by the shipped dedicated-ml-nodes (`names: [ml, ml-*]`).
const ML_BY_NAME: &str = "ml";
const TEAM_ML: &str = "e2e-calls-team-ml";
const TIER: &str = "e2e-calls-tier";
const BOTH: &str = "e2e-calls-team-ml-tier";
const TEAM_AI: &str = "e2e-calls-team-ai";
const PTR: &str = "e2e-calls-ptr";

/// The toleration keys the policies below default.
const DEDICATED: &str = "dedicated";
const RESTRICTED: &str = "e2e.draguard.dev/restricted";
const AI: &str = "e2e.draguard.dev/ai";
const PTR_DEFAULT: &str = "e2e.draguard.dev/ptr";

/// A defaulting policy on `tier=restricted`: another key than the shipped
/// `team=ml` (issue 39's bug 2).
const TIER_POLICY: &str = r#"apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: e2e-tier-restricted}
spec:
  namespaces:
    selector:
      matchLabels: {tier: restricted}
  pods:
    defaults: [{key: e2e.draguard.dev/restricted, operator: Exists, effect: NoSchedule}]
  devices:
    defaults: [{key: e2e.draguard.dev/restricted, operator: Exists, effect: NoSchedule}]
"#;

/// A defaulting policy whose selector overlaps the shipped `team=ml`.
const OVERLAP_POLICY: &str = r#"apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: e2e-team-ml-or-ai}
spec:
  namespaces:
    selector:
      matchExpressions: [{key: team, operator: In, values: [ml, ai]}]
  pods:
    defaults: [{key: e2e.draguard.dev/ai, operator: Exists, effect: NoSchedule}]
  devices:
    defaults: [{key: e2e.draguard.dev/ai, operator: Exists, effect: NoSchedule}]
"#;

/// The shipped dedicated-ml-nodes' selector, removed for "names only".
const SHIPPED_SELECTOR: &str =
    "    selector:\n      matchLabels: {team: ml}       # ... or any namespace labelled team=ml\n";

#[derive(Clone, Copy)]
enum Kind {
    Claim,
    Template,
    Pod,
}

impl Kind {
    /// draguard's `kind` label.
    fn label(self) -> &'static str {
        match self {
            Kind::Claim => "ResourceClaim",
            Kind::Template => "ResourceClaimTemplate",
            Kind::Pod => "Pod",
        }
    }

    fn yaml(self, namespace: &str) -> String {
        match self {
            Kind::Claim => crate::draguard::claim_yaml(namespace, "calls"),
            Kind::Template => format!(
                "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {{name: calls, namespace: {namespace}}}\n\
                 spec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly: {{deviceClassName: gpu.example.com}}\n"
            ),
            Kind::Pod => format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: calls, namespace: {namespace}}}\n\
                 spec:\n  containers: [{{name: c, image: registry.k8s.io/pause:3.10}}]\n"
            ),
        }
    }

    /// The toleration keys of the object the apiserver answered, but the
    /// apiserver's own (DefaultTolerationSeconds' node.kubernetes.io/*).
    fn tolerations(self, object: &Value) -> Vec<String> {
        let lists: Vec<&Value> = match self {
            Kind::Pod => vec![&object["spec"]["tolerations"]],
            Kind::Claim => requests(&object["spec"]["devices"]),
            Kind::Template => requests(&object["spec"]["spec"]["devices"]),
        };
        let mut keys: Vec<String> = lists
            .into_iter()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|t| t["key"].as_str())
            .filter(|k| !k.starts_with("node.kubernetes.io/"))
            .map(str::to_owned)
            .collect();
        keys.sort();
        keys
    }
}

fn requests(devices: &Value) -> Vec<&Value> {
    devices["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| &r["exactly"]["tolerations"])
        .collect()
}

/// One write and what it should cost.
struct Case {
    namespace: &'static str,
    kind: Kind,
    mutate: u64,
    validate: u64,
    /// The toleration keys the answered object carries (sorted).
    defaults: &'static [&'static str],
}

/// Needs no mutation.
fn one(namespace: &'static str, kind: Kind) -> Case {
    Case {
        namespace,
        kind,
        mutate: 0,
        validate: 0,
        defaults: &[],
    }
}

/// Sent to /mutate.
fn two(namespace: &'static str, kind: Kind, defaults: &'static [&'static str]) -> Case {
    Case {
        namespace,
        kind,
        mutate: 1,
        validate: 0,
        defaults,
    }
}

impl Case {
    /// The /validate calls the write costs under the shipped policies and
    /// the ones below (src/controllers/validate_conditions.rs): a template
    /// CREATE always (its charge against ResourceQuotas); a Pod or claim
    /// when it carries a toleration of its own after /mutate, which the
    /// shipped deny lists (selecting every namespace here) may judge; and
    /// with PodTolerationRestriction on, every Pod. The rest, the
    /// apiserver's own rules judge alone: no call.
    fn with_validate(mut self, toleration_restriction: bool) -> Case {
        let judged = matches!(self.kind, Kind::Template)
            || !self.defaults.is_empty()
            || (toleration_restriction && matches!(self.kind, Kind::Pod));
        self.validate = u64::from(judged);
        self
    }
}

struct PolicySet {
    name: &'static str,
    /// The shipped dedicated-ml-nodes without its `team=ml` selector.
    names_only: bool,
    extra_policies: &'static [(&'static str, &'static str)],
    extra_args: &'static [&'static str],
    /// How many selector entries serve writes for it.
    selector_entries: usize,
    /// Whether some policy defaults claims: otherwise serve parks the
    /// claims rule of the defaulting entry (src/controllers/mutate_rules.rs),
    /// and the apiserver does not even evaluate its conditions for a claim.
    claims_routed: bool,
    cases: Vec<Case>,
}

fn policy_sets() -> Vec<PolicySet> {
    use Kind::{Claim, Pod, Template};
    vec![
        PolicySet {
            name: "names only",
            names_only: true,
            extra_policies: &[],
            extra_args: &[],
            selector_entries: 0,
            claims_routed: false,
            cases: vec![
                one(PLAIN, Claim),
                one(PLAIN, Template),
                one(PLAIN, Pod),
                one(ML_BY_NAME, Claim),
                two(ML_BY_NAME, Pod, &[DEDICATED]),
                one(TEAM_ML, Pod),
            ],
        },
        PolicySet {
            name: "one label selector (shipped)",
            names_only: false,
            extra_policies: &[],
            extra_args: &[],
            selector_entries: 1,
            claims_routed: false,
            cases: vec![
                one(PLAIN, Claim),
                one(PLAIN, Template),
                one(PLAIN, Pod),
                two(ML_BY_NAME, Pod, &[DEDICATED]),
                one(TEAM_ML, Claim),
                one(TEAM_ML, Template),
                // Selected by label, but dedicated-ml-nodes-are-ml-only
                // refuses dedicated=ml outside the namespaces *named* ml
                // and ml-*: no default, and no call for one.
                one(TEAM_ML, Pod),
                one(TIER, Pod),
            ],
        },
        PolicySet {
            name: "two selectors, keys team and tier",
            names_only: false,
            extra_policies: &[("e2e-tier-restricted.yaml", TIER_POLICY)],
            extra_args: &[],
            selector_entries: 3,
            claims_routed: true,
            cases: vec![
                // Bug 2: 2 calls each before the disjoint regions.
                one(PLAIN, Claim),
                one(PLAIN, Template),
                one(PLAIN, Pod),
                two(ML_BY_NAME, Pod, &[DEDICATED]),
                one(TEAM_ML, Claim),
                one(TEAM_ML, Pod),
                two(TIER, Claim, &[RESTRICTED]),
                two(TIER, Template, &[RESTRICTED]),
                two(TIER, Pod, &[RESTRICTED]),
                two(BOTH, Claim, &[RESTRICTED]),
                // dedicated-ml-nodes allows only its own toleration, so
                // the tier default is left out (enforce::defaults_for),
                // and dedicated=ml is refused as above: no default, and
                // no call, since dedicated-ml-nodes' selector holds on
                // the whole region (mutate_conditions.rs, `unblocked`).
                one(BOTH, Pod),
                one(TEAM_AI, Pod),
            ],
        },
        PolicySet {
            name: "overlapping selectors, team=ml and team in (ml,ai)",
            names_only: false,
            extra_policies: &[("e2e-team-ml-or-ai.yaml", OVERLAP_POLICY)],
            extra_args: &[],
            selector_entries: 2,
            claims_routed: true,
            cases: vec![
                one(PLAIN, Claim),
                one(PLAIN, Pod),
                two(TEAM_ML, Claim, &[AI]),
                two(TEAM_ML, Template, &[AI]),
                // Neither default is admitted here (the ai default is
                // refused by dedicated-ml-nodes, selecting team=ml by
                // label): no call, as for BOTH above.
                one(TEAM_ML, Pod),
                two(TEAM_AI, Claim, &[AI]),
                two(TEAM_AI, Pod, &[AI]),
                one(TIER, Claim),
                one(TIER, Pod),
            ],
        },
        PolicySet {
            name: "PodTolerationRestriction on",
            names_only: false,
            extra_policies: &[],
            extra_args: &["--pod-toleration-restriction"],
            // Every Pod reaches the defaulting entry already, and no
            // policy defaults claims: no selector entry is needed.
            selector_entries: 0,
            claims_routed: false,
            cases: vec![
                one(PLAIN, Claim),
                one(PLAIN, Template),
                // A BestEffort Pod gets nothing, but the merge could add
                // to any Pod: every Pod is sent.
                two(PLAIN, Pod, &[]),
                two(PTR, Pod, &[PTR_DEFAULT]),
                one(PTR, Claim),
                two(TEAM_ML, Pod, &[]),
            ],
        },
    ]
}

pub fn per_write(cluster: &mut Cluster) -> Outcome {
    cluster.ensure_base_serving();
    let admin = cluster.admin.clone();
    let operator = cluster.operator();
    make_namespaces(cluster);

    let mut table = vec![format!(
        "    {:<50} {:<24} {:<21} {:<28} {}",
        "policy set", "namespace", "kind", "calls (mutate, validate)", "defaults"
    )];
    let mut failures = Vec::new();
    for set in policy_sets() {
        let started = Instant::now();
        let folder = write_policies(cluster, &set);
        strip_managed_entries(&admin);
        cluster.start_serve(&ServeOptions {
            policies: Some(folder),
            extra_args: set.extra_args.iter().map(|a| (*a).to_owned()).collect(),
        });
        wait_for_managed_entries(&admin, set.selector_entries, set.claims_routed);
        let serve = cluster.serve.as_ref().expect("serving");
        wait_until_routed(serve, &operator);
        let widened = plain_value(&serve.metrics(), "draguard_routing_widened_policies");
        if widened != Some(0.0) {
            failures.push(format!(
                "{}: draguard_routing_widened_policies is {widened:?}, expected 0 (exact routing)",
                set.name
            ));
        }
        let settled = started.elapsed();
        let toleration_restriction = set.extra_args.contains(&"--pod-toleration-restriction");
        for case in set.cases {
            let case = case.with_validate(toleration_restriction);
            let (calls, defaults) = dry_run(serve, &operator, case.namespace, case.kind);
            let expected = Calls {
                mutate: case.mutate,
                validate: case.validate,
            };
            let mark = if calls == expected && defaults == case.defaults {
                ""
            } else {
                "  <-- FAILED"
            };
            table.push(format!(
                "    {:<50} {:<24} {:<21} {:<28} [{}]{mark}",
                set.name,
                case.namespace,
                case.kind.label(),
                calls.to_string(),
                defaults.join(", ")
            ));
            if calls != expected {
                failures.push(format!(
                    "{}: {} CREATE in {}: {calls} calls, expected {expected}",
                    set.name,
                    case.kind.label(),
                    case.namespace
                ));
            }
            if calls.mutate > 1 {
                failures.push(format!(
                    "{}: {} CREATE in {} was sent to {} mutating entries",
                    set.name,
                    case.kind.label(),
                    case.namespace,
                    calls.mutate
                ));
            }
            if defaults != case.defaults {
                failures.push(format!(
                    "{}: {} CREATE in {}: tolerations {defaults:?}, expected {:?}",
                    set.name,
                    case.kind.label(),
                    case.namespace,
                    case.defaults
                ));
            }
        }
        table.push(format!(
            "    ({}: serve restarted and its entries in place in {:.1} s, {} selector entries)",
            set.name,
            settled.as_secs_f64(),
            set.selector_entries
        ));
    }
    // The next scenario starts serve on the Deployment's own policies.
    cluster.stop_serve();
    println!(
        "    calls per write (server-side dry runs as {}):",
        crate::cluster::OPERATOR
    );
    for row in &table {
        println!("{row}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Outcome::Passed
}

fn make_namespaces(cluster: &Cluster) {
    let ptr_annotation = json!([{"key": PTR_DEFAULT, "operator": "Exists", "effect": "NoSchedule"}]).to_string();
    let namespaces: Vec<(&str, String)> = vec![
        (PLAIN, String::new()),
        (ML_BY_NAME, String::new()),
        (TEAM_ML, "labels: {team: ml}".to_owned()),
        (TIER, "labels: {tier: restricted}".to_owned()),
        (BOTH, "labels: {team: ml, tier: restricted}".to_owned()),
        (TEAM_AI, "labels: {team: ai}".to_owned()),
        (
            PTR,
            format!("annotations: {{scheduler.alpha.kubernetes.io/defaultTolerations: '{ptr_annotation}'}}"),
        ),
    ];
    let mut yaml = String::new();
    for (name, more) in &namespaces {
        let more = if more.is_empty() {
            String::new()
        } else {
            format!(", {more}")
        };
        yaml.push_str(&format!(
            "---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {name}{more}}}\n"
        ));
    }
    cluster.admin.apply(&yaml);
    for (name, _) in &namespaces {
        cluster.wait_for(&["serviceaccount", "default", "-n", name], Duration::from_secs(30));
    }
}

/// The shipped policies, edited and extended for `set`, in a folder of
/// the scratch dir.
fn write_policies(cluster: &Cluster, set: &PolicySet) -> PathBuf {
    let folder = cluster.scratch(&format!(
        "policies-{}",
        set.name.replace(|c: char| !c.is_alphanumeric(), "-")
    ));
    std::fs::create_dir_all(&folder).expect("policies folder");
    let shipped = Path::new(ROOT).join("policies");
    for entry in std::fs::read_dir(&shipped).expect("policies/") {
        let path = entry.expect("policies/ entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let name = path.file_name().expect("file name").to_owned();
        let mut text = std::fs::read_to_string(&path).expect("shipped policy");
        if set.names_only && text.contains("name: dedicated-ml-nodes\n") {
            assert!(
                text.contains(SHIPPED_SELECTOR),
                "policies/dedicated-nodes.yaml no longer selects team=ml as this scenario expects"
            );
            text = text.replace(SHIPPED_SELECTOR, "");
        }
        std::fs::write(folder.join(name), text).expect("policy file");
    }
    for (name, text) in set.extra_policies {
        std::fs::write(folder.join(name), text).expect("policy file");
    }
    folder
}

/// Removes what serve manages from the stored webhook configurations
/// (while no serve runs to put it back), so that the next serve's entries
/// are seen to appear rather than mistaken for the last one's.
fn strip_managed_entries(admin: &Kubectl) {
    strip(
        "validatingwebhookconfiguration",
        admin,
        |_| false,
        |_| true,
        VALIDATE_CONDITION,
    );
    strip(
        "mutatingwebhookconfiguration",
        admin,
        |name| name.ends_with(SELECTOR_ENTRY),
        |name| name == DEFAULTING_ENTRY,
        CONDITION,
    );
    // And the defaulting entry's rules as deploy/base writes them, which
    // serve narrows where no policy defaults a kind.
    let config = admin.get_json(&["mutatingwebhookconfiguration", NAME]);
    if let Some(i) = entries(&config).iter().position(|e| e["name"] == DEFAULTING_ENTRY) {
        let rules = json!([
            {"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"], "operations": ["CREATE"],
             "resources": ["resourceclaims", "resourceclaimtemplates"], "scope": "Namespaced"},
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"},
        ]);
        let patch = json!([{"op": "add", "path": format!("/webhooks/{i}/rules"), "value": rules}]);
        admin.ok(&[
            "patch",
            "mutatingwebhookconfiguration",
            NAME,
            "--type=json",
            "-p",
            &patch.to_string(),
        ]);
    }
}

/// Whether an entry's rules send claim CREATEs.
fn sends_claims(entry: &Value) -> bool {
    entry["rules"].as_array().is_some_and(|rules| {
        rules.iter().any(|r| {
            r["apiGroups"]
                .as_array()
                .is_some_and(|g| g.iter().any(|g| g == "resource.k8s.io"))
                && r["resources"]
                    .as_array()
                    .is_some_and(|rs| rs.iter().any(|x| x == "resourceclaims"))
        })
    })
}

/// Removes from `kind`'s configuration the entries `drop_entry` names and
/// the condition `condition` from the entries `from_entry` names.
fn strip(
    kind: &str,
    admin: &Kubectl,
    drop_entry: impl Fn(&str) -> bool,
    from_entry: impl Fn(&str) -> bool,
    condition: &str,
) {
    let config = admin.get_json(&[kind, NAME]);
    let mut patch = Vec::new();
    // Highest index first, so that each removal leaves the next one's index.
    for (i, entry) in entries(&config).iter().enumerate().rev() {
        let name = entry["name"].as_str().unwrap_or_default();
        if drop_entry(name) {
            patch.push(json!({"op": "remove", "path": format!("/webhooks/{i}")}));
        } else if from_entry(name) {
            let conditions = entry["matchConditions"].as_array().cloned().unwrap_or_default();
            for (j, c) in conditions.iter().enumerate().rev() {
                if c["name"] == condition {
                    patch.push(json!({"op": "remove", "path": format!("/webhooks/{i}/matchConditions/{j}")}));
                }
            }
        }
    }
    if !patch.is_empty() {
        admin.ok(&[
            "patch",
            kind,
            NAME,
            "--type=json",
            "-p",
            &Value::Array(patch).to_string(),
        ]);
    }
}

/// Waits until the stored configuration has serve's condition on the
/// defaulting entry and `selector_entries` selector entries.
fn wait_for_managed_entries(admin: &Kubectl, selector_entries: usize, claims_routed: bool) {
    let start = Instant::now();
    loop {
        let config = admin.get_json(&["mutatingwebhookconfiguration", NAME]);
        let webhooks = entries(&config);
        let has_condition = webhooks.iter().any(|e| {
            e["name"] == DEFAULTING_ENTRY
                && e["matchConditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["name"] == CONDITION))
        });
        // The defaulting entry and its selector entries send claims only
        // where some policy defaults them.
        let claim_rules: Vec<bool> = webhooks
            .iter()
            .filter(|e| {
                e["name"] == DEFAULTING_ENTRY || e["name"].as_str().is_some_and(|n| n.ends_with(SELECTOR_ENTRY))
            })
            .map(sends_claims)
            .collect();
        let rules_as_expected = claim_rules.iter().all(|&routed| routed == claims_routed);
        let selectors = webhooks
            .iter()
            .filter(|e| e["name"].as_str().is_some_and(|n| n.ends_with(SELECTOR_ENTRY)))
            .count();
        let validating = admin.get_json(&["validatingwebhookconfiguration", NAME]);
        let validate_condition = entries(&validating).iter().any(|e| {
            e["name"] == VALIDATING_ENTRY
                && e["matchConditions"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["name"] == VALIDATE_CONDITION))
        });
        if has_condition && validate_condition && selectors == selector_entries && rules_as_expected {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "serve's managed entries not in place after 30 s: condition {CONDITION} {}, \
             {VALIDATE_CONDITION} {}, {selectors} selector entries (expected {selector_entries}), \
             claims rules {claim_rules:?} (expected {claims_routed} in each):\n{}",
            if has_condition { "present" } else { "missing" },
            if validate_condition { "present" } else { "missing" },
            webhooks
                .iter()
                .map(|e| format!("{} {}", e["name"], e["namespaceSelector"]))
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until the apiserver routes by the stored configuration (its
/// webhook informer follows the store a moment later): a claim in a
/// namespace no policy defaults claims in is sent to /validate alone. It
/// was sent to /mutate too while the condition was stripped.
fn wait_until_routed(serve: &crate::draguard::Serve, operator: &Kubectl) {
    let start = Instant::now();
    loop {
        let (calls, _) = dry_run(serve, operator, PLAIN, Kind::Claim);
        if calls.mutate == 0 && calls.validate == 0 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "a claim in {PLAIN} still costs {calls} calls 10 s after serve's entries were stored"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A server-side dry run of `kind` in `namespace` as the operator: the
/// calls it cost, and the toleration keys of the object answered.
fn dry_run(serve: &crate::draguard::Serve, operator: &Kubectl, namespace: &str, kind: Kind) -> (Calls, Vec<String>) {
    let before = Scrape::of(serve);
    let run = operator.run(
        &["create", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&kind.yaml(namespace)),
    );
    let after = Scrape::of(serve);
    assert!(
        run.success,
        "{} dry run in {namespace} refused:\n{}",
        kind.label(),
        run.stderr
    );
    let object: Value = serde_json::from_str(&run.stdout).expect("kubectl prints JSON");
    (after.since(&before, &[kind.label()]), kind.tolerations(&object))
}
