//! Mutate: the patches draguard adds, computed on the object's JSON as
//! sent so that fields unknown to draguard survive. Every write gets its
//! taints' `timeAdded`; a CREATE gets PodTolerationRestriction's merge
//! (when enabled; the in-tree plugin runs before webhooks) and then the
//! applying policies' default tolerations, computed on the merged object.

use json_patch::PatchOperation;
use serde_json::Value;

use super::{Context, ReviewSubject};
use crate::kinds::AdmittedKind;
use crate::objects::ObjectJson;
use crate::policy::applicable::Applicable;
use crate::policy::apply;
use crate::policy::toleration_restriction;
use crate::verdict::{ReviewError, Warning};

/// What `/mutate` adds, and the warnings about what it chose not to add.
#[derive(Debug, Default)]
pub struct Mutation {
    pub patch: Vec<PatchOperation>,
    pub warnings: Vec<Warning>,
}

pub fn patches<K: AdmittedKind>(
    subject: &ReviewSubject<'_, K>,
    applicable: &Applicable<'_>,
    ctx: &Context<'_>,
) -> Result<Mutation, ReviewError> {
    let object = subject
        .object
        .tree()
        .map_err(|e| ReviewError::OwnPatch(e.to_string()))?;
    let old = subject
        .old_object
        .map(ObjectJson::tree)
        .transpose()
        .map_err(|e| ReviewError::OwnPatch(e.to_string()))?;
    let now = crate::mutate::time_added::format_now(ctx.now);
    let mut patch = K::stamps(&object, old.as_deref(), subject.routed, &now);
    let mut warnings = Vec::new();
    if subject.is_create() && K::DEFAULTS_ON_CREATE {
        let (defaults, left_out) = create_defaults(subject, &object, applicable, ctx)?;
        patch.extend(defaults);
        warnings = left_out;
    }
    Ok(Mutation { patch, warnings })
}

fn create_defaults<K: AdmittedKind>(
    subject: &ReviewSubject<'_, K>,
    object: &Value,
    applicable: &Applicable<'_>,
    ctx: &Context<'_>,
) -> Result<(Vec<PatchOperation>, Vec<Warning>), ReviewError> {
    let mut ops = toleration_restriction_merge(subject, object, ctx)?;
    if applicable.is_empty() {
        return Ok((ops, Vec::new()));
    }
    let (defaults, warnings) = if ops.is_empty() {
        policy_defaults::<K>(&subject.view, subject, object, applicable)
    } else {
        // The merge changed the tolerations the defaults are computed on.
        let merged = ObjectJson::Tree(
            crate::mutate::apply(object, &ops).map_err(|e| ReviewError::OwnPatch(e.cause().to_string()))?,
        );
        let view = K::decode(&merged, subject.routed).map_err(|e| ReviewError::OwnPatch(e.to_string()))?;
        let merged = merged.tree().map_err(|e| ReviewError::OwnPatch(e.to_string()))?;
        policy_defaults::<K>(&view, subject, &merged, applicable)
    };
    ops.extend(defaults);
    Ok((ops, warnings))
}

fn policy_defaults<K: AdmittedKind>(
    view: &K::View,
    subject: &ReviewSubject<'_, K>,
    object: &Value,
    applicable: &Applicable<'_>,
) -> (Vec<PatchOperation>, Vec<Warning>) {
    let Some((target, lists)) = K::toleration_lists(view, subject.routed) else {
        return (Vec::new(), Vec::new());
    };
    let (ops, left_out) = apply::default_patches(applicable, target, &lists, object);
    let warnings = left_out
        .into_iter()
        .map(|(field, message)| Warning::at(field, message))
        .collect();
    (ops, warnings)
}

/// PodTolerationRestriction's `MergeTolerations` on a Pod's own spec.
fn toleration_restriction_merge<K: AdmittedKind>(
    subject: &ReviewSubject<'_, K>,
    object: &Value,
    ctx: &Context<'_>,
) -> Result<Vec<PatchOperation>, ReviewError> {
    let (Some(config), Some(spec)) = (ctx.toleration_restriction, K::pod_spec(&subject.view)) else {
        return Ok(Vec::new());
    };
    let lists = apply::pod_lists(spec, &["spec"]);
    let tolerations = lists.first().map(|l| l.tolerations.as_slice()).unwrap_or_default();
    let annotations = ctx.cluster.namespace_annotations(subject.namespace());
    let merged = toleration_restriction::admit(spec, tolerations, annotations.as_ref(), config)
        .map_err(|e| ReviewError::PodTolerationRestriction(e.to_string()))?;
    let Some(merged) = merged else {
        return Ok(Vec::new());
    };
    let values: Vec<Value> = merged.iter().filter_map(|t| serde_json::to_value(t).ok()).collect();
    // `None` where the spec cannot take it (not an object): such a Pod
    // does not decode, and never gets here.
    Ok(
        crate::mutate::set(object, &["spec", "tolerations"], Value::Array(values))
            .into_iter()
            .collect(),
    )
}
