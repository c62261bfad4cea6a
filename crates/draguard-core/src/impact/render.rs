//! `draguard impact`'s output: per rule, the summary line, the affected
//! pods grouped by namespace and node, and the devices reached; as text
//! for people and as JSON for scripts.

use serde_json::{Value, json};

use super::{Impact, Outcome};
use crate::kubernetes::Target;

/// One rule's impact, with what the output names it by.
pub struct RuleImpact<'a> {
    pub name: &'a str,
    pub impact: Impact,
}

fn outcome_text(outcome: Outcome) -> String {
    match outcome {
        Outcome::Evicted { after_seconds: 0 } => "evicted".to_owned(),
        Outcome::Evicted { after_seconds } => format!("evicted after {after_seconds}s"),
        Outcome::Unschedulable => "not schedulable again".to_owned(),
        Outcome::Tolerated => "tolerates".to_owned(),
    }
}

fn outcome_json(outcome: Outcome) -> Value {
    match outcome {
        Outcome::Evicted { after_seconds } => json!({"outcome": "evicted", "afterSeconds": after_seconds}),
        Outcome::Unschedulable => json!({"outcome": "unschedulable"}),
        Outcome::Tolerated => json!({"outcome": "tolerated"}),
    }
}

/// Columns padded to their widest cell, two spaces apart.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

pub fn text(impacts: &[RuleImpact<'_>], node_of: &dyn Fn(&str, &str) -> Option<String>, target: Target) -> String {
    let mut out = String::new();
    for (i, r) in impacts.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let impact = &r.impact;
        out.push_str(&format!(
            "DeviceTaintRule {} ({}, Kubernetes {} rules)\n{}\n",
            r.name,
            impact.effect,
            target.version,
            impact.summary()
        ));
        if !impact.pods.is_empty() {
            let mut rows: Vec<Vec<String>> = impact
                .pods
                .iter()
                .map(|p| {
                    vec![
                        p.namespace.clone(),
                        node_of(&p.namespace, &p.name).unwrap_or_else(|| "-".to_owned()),
                        p.name.clone(),
                        p.claim.clone(),
                        outcome_text(p.outcome),
                    ]
                })
                .collect();
            rows.sort();
            out.push('\n');
            out.push_str(&table(&["NAMESPACE", "NODE", "POD", "CLAIM", "OUTCOME"], &rows));
        }
        if let Some(note) = without_tolerations_note(impact) {
            out.push('\n');
            out.push_str(&note);
        }
        if !impact.devices.is_empty() {
            let rows: Vec<Vec<String>> = impact
                .devices
                .iter()
                .map(|d| vec![d.id.to_string(), d.node.clone().unwrap_or_else(|| "-".to_owned())])
                .collect();
            out.push('\n');
            out.push_str(&table(&["DEVICE", "NODE"], &rows));
        }
    }
    out
}

/// `note: 7 of 8 claims ...` when allocation results on reached devices
/// carry no tolerations; `None` when every one carries some.
fn without_tolerations_note(impact: &Impact) -> Option<String> {
    let bare = impact.claims.iter().filter(|c| c.without_tolerations).count();
    (bare > 0).then(|| {
        format!(
            "note: {bare} of {} claims have an allocation result on a reached device without tolerations: \
             the scheduler copies a request's tolerations into its result, so their requests had none\n",
            impact.claims.len()
        )
    })
}

pub fn json(impacts: &[RuleImpact<'_>], node_of: &dyn Fn(&str, &str) -> Option<String>, target: Target) -> Value {
    let rules: Vec<Value> = impacts
        .iter()
        .map(|r| {
            let impact = &r.impact;
            let pods: Vec<Value> = impact
                .pods
                .iter()
                .map(|p| {
                    let mut pod = json!({"namespace": p.namespace, "name": p.name, "claim": p.claim,
                        "node": node_of(&p.namespace, &p.name)});
                    if let (Some(pod), Value::Object(outcome)) = (pod.as_object_mut(), outcome_json(p.outcome)) {
                        pod.extend(outcome);
                    }
                    pod
                })
                .collect();
            let claims: Vec<Value> = impact
                .claims
                .iter()
                .map(|c| {
                    let mut claim = json!({"namespace": c.namespace, "name": c.name,
                        "devices": c.devices.iter().map(ToString::to_string).collect::<Vec<_>>()});
                    if c.without_tolerations {
                        claim["withoutTolerations"] = Value::Bool(true);
                    }
                    if let (Some(claim), Value::Object(outcome)) = (claim.as_object_mut(), outcome_json(c.outcome)) {
                        claim.extend(outcome);
                    }
                    claim
                })
                .collect();
            json!({
                "rule": r.name,
                "effect": impact.effect,
                "summary": impact.summary(),
                "devices": impact.devices.iter().map(|d| json!({"device": d.id.to_string(), "node": d.node})).collect::<Vec<_>>(),
                "claims": claims,
                "pods": pods,
            })
        })
        .collect();
    json!({"kubernetes": target.version.as_str(), "rules": rules})
}
