//! Policies in the review core: the tolerations of Pods and claims as
//! policy subjects, default tolerations as JSON patches, violations as
//! verdicts.

use json_patch::PatchOperation;
use serde_json::Value;

use super::applicable::Applicable;
use super::enforce::{self, PolicyOutcome, TolerationTarget};
use super::model::Toleration;
use crate::field::Path;
use crate::objects::claim::{ClaimSpec, ClaimVersion, DeviceToleration, TolerationPlace};
use crate::objects::pod::PodSpecView;

/// One toleration list of an object: where it is in the JSON (pointer
/// tokens), its Kubernetes field path, and what it holds.
pub struct TolerationList {
    pub tokens: Vec<String>,
    pub path: Path,
    pub tolerations: Vec<Toleration>,
}

fn from_core(t: &k8s_openapi::api::core::v1::Toleration) -> Toleration {
    let s = |v: &Option<String>| v.clone().unwrap_or_default();
    Toleration {
        key: s(&t.key),
        operator: s(&t.operator),
        value: s(&t.value),
        effect: s(&t.effect),
        toleration_seconds: t.toleration_seconds,
    }
}

fn from_device(t: &DeviceToleration) -> Toleration {
    Toleration {
        key: t.key.clone(),
        operator: t.operator.clone(),
        value: t.value.clone(),
        effect: t.effect.clone(),
        toleration_seconds: t.toleration_seconds,
    }
}

/// The tolerations of a pod spec found at `spec_tokens` (`["spec"]` in a
/// Pod, `["spec", "template", "spec"]` in a Deployment).
pub fn pod_lists(spec: &PodSpecView, spec_tokens: &[&str]) -> Vec<TolerationList> {
    let mut tokens: Vec<String> = spec_tokens.iter().map(|t| (*t).to_owned()).collect();
    tokens.push("tolerations".into());
    let path = tokens.iter().fold(Path::new(""), |p, t| p.child(t));
    vec![TolerationList {
        tokens,
        path,
        tolerations: spec.tolerations.iter().map(from_core).collect(),
    }]
}

/// Every `exactly` and every `firstAvailable` entry of a claim spec found
/// at `prefix` (`spec`, or `spec.spec` in a template).
pub fn claim_lists(spec: &ClaimSpec, version: ClaimVersion, prefix: &[&str]) -> Vec<TolerationList> {
    let base: Vec<String> = prefix.iter().map(|s| (*s).to_owned()).collect();
    let path = prefix
        .iter()
        .skip(1)
        .fold(Path::new(prefix.first().copied().unwrap_or("spec")), |p, s| p.child(s));
    spec.toleration_lists()
        .into_iter()
        .map(|(place, list)| {
            let mut tokens = base.clone();
            tokens.extend(["devices".into(), "requests".into()]);
            let requests = path.child("devices").child("requests");
            let field = match place {
                TolerationPlace::Exactly { request } => {
                    tokens.push(request.to_string());
                    if version != ClaimVersion::V1beta1 {
                        tokens.push("exactly".into());
                    }
                    requests.index(request).child("exactly")
                }
                TolerationPlace::Sub { request, sub } => {
                    tokens.extend([request.to_string(), "firstAvailable".into(), sub.to_string()]);
                    requests.index(request).child("firstAvailable").index(sub)
                }
            };
            tokens.push("tolerations".into());
            TolerationList {
                tokens,
                path: field.child("tolerations"),
                tolerations: list.iter().map(from_device).collect(),
            }
        })
        .collect()
}

/// What the applying policies say about all lists of an object.
pub fn evaluate(applicable: &Applicable<'_>, target: TolerationTarget, lists: &[TolerationList]) -> PolicyOutcome {
    let tolerations: Vec<(Path, Toleration)> = lists
        .iter()
        .flat_map(|l| {
            l.tolerations
                .iter()
                .enumerate()
                .map(|(i, t)| (l.path.index(i), t.clone()))
        })
        .collect();
    enforce::judge_all(applicable, target, &tolerations)
}

/// The default tolerations each list lacks, as patches against `object`.
pub fn default_patches(
    applicable: &Applicable<'_>,
    target: TolerationTarget,
    lists: &[TolerationList],
    object: &Value,
) -> Vec<PatchOperation> {
    let mut ops = Vec::new();
    for list in lists {
        let add = enforce::defaults_for(applicable, target, &list.tolerations);
        if add.is_empty() {
            continue;
        }
        let tokens: Vec<&str> = list.tokens.iter().map(String::as_str).collect();
        let pointer = format!("/{}", tokens.join("/"));
        let present = object.pointer(&pointer).is_some_and(Value::is_array);
        let values: Vec<Value> = add.iter().filter_map(|t| serde_json::to_value(t).ok()).collect();
        if present {
            let mut append = tokens.clone();
            append.push("-");
            for v in values {
                ops.push(crate::mutate::add(&append, v));
            }
        } else {
            ops.push(crate::mutate::set(object, &tokens, Value::Array(values)));
        }
    }
    ops
}
