//! Policies in the review core: the tolerations of Pods and claims as
//! policy subjects, default tolerations as JSON patches, violations as
//! verdicts.

use json_patch::PatchOperation;
use serde_json::Value;

use super::applicable::Applicable;
use super::cover::describe;
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

pub fn from_core(t: &k8s_openapi::api::core::v1::Toleration) -> Toleration {
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

/// The default tolerations each list lacks, as patches against `object`,
/// and the defaults left out because the list would pass its limit (each
/// with the list's path and why, for a warning).
pub fn default_patches(
    applicable: &Applicable<'_>,
    target: TolerationTarget,
    lists: &[TolerationList],
    object: &Value,
) -> (Vec<PatchOperation>, Vec<(Path, String)>) {
    let mut ops = Vec::new();
    let mut warnings = Vec::new();
    for list in lists {
        let mut add = enforce::defaults_for(applicable, target, &list.tolerations);
        // A default must never make a valid object invalid: past the list's
        // limit, the rest are left out, each with a warning.
        let room = max_tolerations(target).saturating_sub(list.tolerations.len());
        for skipped in add.drain(room.min(add.len())..) {
            warnings.push((
                list.path.clone(),
                format!(
                    "policy {:?}: default toleration {} not added: {} would then hold more than {} tolerations",
                    skipped.policy,
                    describe(&skipped.toleration),
                    list.path,
                    max_tolerations(target)
                ),
            ));
        }
        if add.is_empty() {
            continue;
        }
        let tokens: Vec<&str> = list.tokens.iter().map(String::as_str).collect();
        let values: Vec<Value> = add
            .iter()
            .filter_map(|d| serde_json::to_value(&d.toleration).ok())
            .collect();
        // Appended to a list; set where there is none (absent or null).
        // Anything else there is not a list of tolerations: nothing is
        // written into it (such an object does not decode, and is refused).
        match crate::mutate::at(object, &tokens) {
            Some(Value::Array(_)) => ops.extend(
                values
                    .into_iter()
                    .filter_map(|v| crate::mutate::append(object, &tokens, v)),
            ),
            None | Some(Value::Null) => ops.extend(crate::mutate::set(object, &tokens, Value::Array(values))),
            Some(_) => {}
        }
    }
    (ops, warnings)
}

/// How many tolerations a list may hold: a device request's are capped
/// (`DEVICE_TOLERATIONS_MAX`); a Pod's are not.
fn max_tolerations(target: TolerationTarget) -> usize {
    match target {
        TolerationTarget::Device => crate::rules::tolerations::DEVICE_TOLERATIONS_MAX,
        TolerationTarget::Pod => usize::MAX,
    }
}
