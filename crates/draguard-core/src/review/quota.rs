//! Quota (SPEC.md §7): on CREATE, usage plus this object's charge must fit
//! every limit of the applying policies and of the namespace's
//! ResourceQuotas.

use super::{Context, ReviewSubject};
use crate::kinds::AdmittedKind;
use crate::kubernetes::Gate;
use crate::policy::Selection;
use crate::policy::applicable::Applicable;
use crate::quota::{Charge, Limits, QuotaKeys, excesses};
use crate::verdict::Mode;
use crate::verdict::Violation;
use crate::verdict::Warning;
use crate::view::{NotSynced, QuotaUsage};

/// One source of limits: a policy's `quota` (with its mode and message,
/// and whether it applies only if the unknown labels say so) or a
/// ResourceQuota.
struct LimitSource {
    limits: Limits,
    mode: Mode,
    message: String,
    guessed: bool,
}

pub fn quota<K: AdmittedKind>(
    subject: &ReviewSubject<'_, K>,
    applicable: &Applicable<'_>,
    ctx: &Context<'_>,
) -> (Vec<Violation>, Vec<Warning>) {
    if !subject.is_create() {
        return (Vec::new(), Vec::new());
    }
    let namespace = subject.namespace();
    let (sources, quotas_unknown) = limit_sources(applicable, namespace, ctx);
    // Most namespaces have no limits: then nothing is charged.
    if sources.is_empty() && quotas_unknown.is_none() {
        return (Vec::new(), Vec::new());
    }
    let Some(requested) = K::quota_charge(&subject.view, namespace, ctx.cluster) else {
        return (Vec::new(), Vec::new());
    };
    let mut violations = Vec::new();
    if let Some(NotSynced(cache)) = quotas_unknown {
        // The apiserver enforces the ResourceQuotas this replica cannot see
        // yet; admitting here would only defer the denial, or miss it.
        violations.push(Violation {
            concept: crate::verdict::Concept::Quota,
            policy: "ResourceQuota".to_owned(),
            mode: Mode::Enforce,
            field: None,
            message: match ctx.cluster.cache_denied(cache) {
                Some(denied) => format!("quota: the ResourceQuotas of namespace {namespace:?} are unknown: {denied}"),
                None => format!(
                    "quota: the ResourceQuotas of namespace {namespace:?} are unknown until draguard's {cache} cache has listed; retry shortly"
                ),
            },
        });
    }
    let mut warnings = Vec::new();
    let used = match ctx.cluster.quota_usage(namespace) {
        QuotaUsage::Known(used) => used,
        QuotaUsage::NotTracked => {
            warnings.push(Warning::new(format!(
                "quota: the usage of namespace {namespace:?} is unknown (no cluster); only this claim's charge ({requested}) was checked against the limits"
            )));
            Charge::default()
        }
        QuotaUsage::Unknown { cache } => {
            // Refuse to guess: each source says in its own mode that it
            // cannot be checked. A replica in this state is not ready, so
            // a correct Service sends it nothing anyway.
            for source in &sources {
                violations.push(Violation {
                    concept: crate::verdict::Concept::Quota,
                    policy: source.limits.source.clone(),
                    mode: source.mode,
                    field: None,
                    message: match ctx.cluster.cache_denied(cache) {
                        Some(ref denied) => format!(
                            "quota: the usage of namespace {namespace:?} is unknown, so {} cannot be checked: {denied}",
                            source.limits.source
                        ),
                        None => format!(
                            "quota: the usage of namespace {namespace:?} is unknown until draguard's {cache} cache has listed, so {} cannot be checked; retry shortly",
                            source.limits.source
                        ),
                    },
                });
            }
            return (violations, warnings);
        }
    };
    let keys = quota_keys(&used, &requested, ctx);
    for source in sources {
        for excess in excesses(&source.limits, &used, &requested, &keys) {
            let caveat = if source.guessed {
                format!(" (if the policy applies: the labels of namespace {namespace:?} are unknown)")
            } else {
                String::new()
            };
            let text = format!("{excess}{caveat}");
            violations.push(Violation {
                concept: crate::verdict::Concept::Quota,
                policy: source.limits.source.clone(),
                mode: source.mode,
                field: None,
                message: if source.message.is_empty() {
                    text
                } else {
                    format!("{text}: {}", source.message)
                },
            });
        }
    }
    (violations, warnings)
}

/// The extended-resource keys in force (DRAExtendedResource), for the
/// device classes of the request and of the namespace's usage: a class
/// the request does not name may share its extended resource name.
fn quota_keys(used: &Charge, requested: &Charge, ctx: &Context<'_>) -> QuotaKeys {
    if !ctx.target.enabled(Gate::DRAExtendedResource) {
        return QuotaKeys::devices_only();
    }
    let classes = requested.devices.keys().chain(used.devices.keys()).map(String::as_str);
    QuotaKeys::extended(classes, |class| ctx.cluster.device_class(class))
}

/// The limits that apply, and whether the namespace's ResourceQuotas are
/// unknown (their cache not synced).
fn limit_sources(
    applicable: &Applicable<'_>,
    namespace: &str,
    ctx: &Context<'_>,
) -> (Vec<LimitSource>, Option<NotSynced>) {
    let mut sources: Vec<LimitSource> = applicable
        .policies
        .iter()
        .filter_map(|(p, selection)| {
            Limits::from_policy(&p.metadata.name, &p.spec.quota).map(|limits| LimitSource {
                limits,
                mode: p.spec.mode,
                message: p.spec.message.clone(),
                guessed: *selection == Selection::Unknown,
            })
        })
        .collect();
    let quotas = match ctx.cluster.resource_quotas(namespace) {
        Ok(quotas) => quotas,
        Err(pending) => return (sources, Some(pending)),
    };
    sources.extend(quotas.into_iter().map(|limits| LimitSource {
        limits,
        mode: Mode::Enforce,
        message: String::new(),
        guessed: false,
    }));
    (sources, None)
}
