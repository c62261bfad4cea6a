//! The fixed list of rules `check` reports under: one id per concept
//! (`device-toleration-effect-unsupported`, `policy-toleration-forbidden`,
//! `quota-exceeded`), whatever the field index, the policy or the wording.
//! Code-scanning UIs group results by these ids and show their help;
//! docs/src/reference/check-rules.md documents each (a test keeps the two equal).

use crate::check::{Finding, Severity};
use crate::verdict::Concept;

/// One rule: its id, what it means in a line, and how to fix it.
#[derive(Debug, PartialEq, Eq)]
pub struct Rule {
    pub id: &'static str,
    pub short: &'static str,
    pub help: &'static str,
}

impl Rule {
    /// Where the rule is documented.
    pub fn help_uri(&self) -> String {
        format!("{DOCS}#{}", self.id)
    }
}

const DOCS: &str = "https://github.com/draguard/draguard/blob/main/docs/src/reference/check-rules.md";

macro_rules! rules {
    ($($name:ident = $id:literal, $short:literal, $help:literal;)*) => {
        $(pub const $name: Rule = Rule { id: $id, short: $short, help: $help };)*
        /// Every rule, in the documented order.
        pub const ALL: &[&Rule] = &[$(&$name),*];
    };
}

rules! {
    FILE_UNREADABLE = "file-unreadable",
        "A file could not be read or parsed, so its objects were not checked.",
        "Fix the YAML or JSON at the reported line (an unrendered template is the usual cause), or exclude the file with --exclude or .draguardignore.";
    KIND_VERSION_UNKNOWN = "kind-version-unknown",
        "A kind draguard judges, in an apiVersion it does not know.",
        "Use one of the served versions the message lists; the apiserver would not accept an unknown version either.";
    OBJECT_UNDECODABLE = "object-undecodable",
        "The object does not have the shape of its kind.",
        "A field has the wrong type (a string where a list belongs, say); fix the field the message names.";
    POD_TOLERATION_EFFECT_UNSUPPORTED = "pod-toleration-effect-unsupported",
        "A pod toleration names an effect Kubernetes does not support.",
        "Use NoSchedule, PreferNoSchedule or NoExecute, or leave the effect empty to match every effect.";
    POD_TOLERATION_OPERATOR_UNSUPPORTED = "pod-toleration-operator-unsupported",
        "A pod toleration names an operator Kubernetes does not support.",
        "Use Equal or Exists (Lt and Gt only where the cluster enables them).";
    POD_TOLERATION_INVALID = "pod-toleration-invalid",
        "A pod toleration is not valid.",
        "Fix the toleration as the message says (a key with Exists has no value; tolerationSeconds needs NoExecute).";
    DEVICE_TOLERATION_EFFECT_UNSUPPORTED = "device-toleration-effect-unsupported",
        "A device toleration names an effect DRA does not support.",
        "Device taints have the effects NoSchedule, NoExecute and None; PreferNoSchedule is a node effect only.";
    DEVICE_TOLERATION_OPERATOR_UNSUPPORTED = "device-toleration-operator-unsupported",
        "A device toleration names an operator DRA does not support.",
        "Use Equal or Exists.";
    DEVICE_TOLERATION_INVALID = "device-toleration-invalid",
        "A device toleration is not valid.",
        "Fix the toleration as the message says; a request holds at most 16 tolerations.";
    DEVICE_TAINT_INVALID = "device-taint-invalid",
        "A device taint (of a ResourceSlice or a DeviceTaintRule) is not valid.",
        "Fix the taint as the message says: a qualified key, a value label, the effect NoSchedule, NoExecute or None.";
    NODE_TAINT_INVALID = "node-taint-invalid",
        "A Node taint is not valid.",
        "Fix the taint as the message says: a qualified key, a value label, one of the node effects.";
    DEVICE_SELECTOR_INVALID = "device-selector-invalid",
        "A CEL device selector does not compile or is too costly.",
        "Fix the CEL expression at the reported position; `draguard explain` shows what a selector matches.";
    DEVICE_REQUEST_INVALID = "device-request-invalid",
        "A ResourceClaim's device requests, constraints or configuration are not valid.",
        "Fix the request as the message says (names, counts, allocation modes, firstAvailable alternatives).";
    DRIVER_CONFIG_INVALID = "driver-config-invalid",
        "A driver's opaque device configuration does not match the driver's schema (built in, or a DriverConfigSchema).",
        "Fix the parameter the message names; the message is the driver's own, which the kubelet plugin would report only when the pod starts.";
    DEVICE_CAPACITY_INVALID = "device-capacity-invalid",
        "A device's consumable capacity or a request for it is not valid.",
        "Fix the capacity or its requestPolicy as the message says.";
    METADATA_INVALID = "metadata-invalid",
        "The object's name, namespace, labels or annotations are not valid.",
        "Fix the metadata field the message names.";
    OBJECT_INVALID = "object-invalid",
        "The object is not valid for its kind.",
        "Fix the field the message names; the message is the apiserver's.";
    POLICY_TOLERATION_FORBIDDEN = "policy-toleration-forbidden",
        "A toleration policy does not allow this toleration in this namespace.",
        "Remove the toleration, use one the message lists as allowed, or ask the platform team to allow it in the policy.";
    TOLERATION_WHITELIST_FORBIDDEN = "toleration-whitelist-forbidden",
        "The namespace's PodTolerationRestriction whitelist does not allow this toleration.",
        "Use a toleration the namespace's scheduler.alpha.kubernetes.io/tolerationsWhitelist annotation allows.";
    QUOTA_EXCEEDED = "quota-exceeded",
        "Creating the object would use more than a ResourceQuota or a policy's quota leaves.",
        "Ask for fewer devices or replicas, free some, or raise the quota; the message shows the limit, the use and the request.";
    PATCH_PRIORITY_TIE = "patch-priority-tie",
        "Two ResourceSlicePatches set the same attribute with the same priority.",
        "Give one of the patches a different priority so that which one wins is not left to their names.";
    TAINT_RULE_CAP = "taint-rule-cap",
        "A DeviceTaintRule would evict more than a policy's taintRules caps allow.",
        "Narrow the selector, try it with effect None first, or annotate the rule draguard.dev/acknowledge-evictions with the exact count.";
    POLICY_DEVICE_SHARING_FORBIDDEN = "policy-device-sharing-forbidden",
        "A toleration policy's sharing rules do not allow this device sharing configuration in this namespace.",
        "Use a sharing strategy and MPS settings the message lists as allowed, drop the sharing settings from an adminAccess request, or ask the platform team to change the policy.";
    NAMESPACE_GUARD = "namespace-guard",
        "A guarded Namespace label or annotation is added, changed or removed.",
        "Only the users, groups or service accounts the policy's namespaceGuards allow may change it; have one of them apply it.";
    TAINT_RULE_SELECTS_EVERY_DEVICE = "taint-rule-selects-every-device",
        "A DeviceTaintRule selects every device, or none, depending on the Kubernetes version.",
        "Name a driver, pool or device in deviceSelector.";
    TAINT_RULE_IMPACT = "taint-rule-impact",
        "What a DeviceTaintRule would do to the pods on the devices it reaches.",
        "Read the summary before applying; `draguard impact` lists the pods and devices.";
    NOT_AN_OBJECT = "not-an-object",
        "A document is not a Kubernetes object (it has no apiVersion or kind), so it is skipped.",
        "Remove the document, or exclude the file if it is not a manifest.";
    UNKNOWN_FIELD = "unknown-field",
        "A field the kind does not have (--strict), as the apiserver's strict field validation reports it.",
        "Fix the field's name (kubectl apply refuses it; with --validate=false it would be dropped in silence).";
    DUPLICATE_FIELD = "duplicate-field",
        "A key is given twice in one mapping; kubectl reads the last one.",
        "Keep one of them: draguard, like kubectl, judged the last, which may not be the one meant.";
    NOT_JUDGED = "not-judged",
        "An object of a kind draguard does not know holds tolerations it could not judge.",
        "Name where its pod specs are (podTemplates in .draguard.yaml, or --pod-template) or its toleration lists (tolerationLists), or skip the kind with --skip-kind.";
    SCOPE_UNKNOWN = "scope-unknown",
        "No CustomResourceDefinition tells whether a custom kind is namespaced, and that decides its verdict.",
        "Put the kind's CustomResourceDefinition among the input (or --old): draguard then judges the object where the apiserver will keep it, in no namespace if it is cluster-scoped.";
    POLICY_AUDIT = "policy-audit",
        "An Audit-mode policy recorded a violation.",
        "Nothing is denied; the same violation would be under mode Enforce.";
    ADMISSION_WARNING = "admission-warning",
        "The object is admitted with a warning.",
        "Read the warning; --warnings-as-errors fails the run on it.";
}

/// The rule a finding of an object of `kind` is reported under.
pub fn rule_of(kind: &str, finding: &Finding) -> &'static Rule {
    if let Some(concept) = finding.concept {
        return match concept {
            Concept::TolerationPolicy => &POLICY_TOLERATION_FORBIDDEN,
            Concept::TolerationWhitelist => &TOLERATION_WHITELIST_FORBIDDEN,
            Concept::Quota => &QUOTA_EXCEEDED,
            Concept::PriorityTie => &PATCH_PRIORITY_TIE,
            Concept::TaintRuleCap => &TAINT_RULE_CAP,
            Concept::NamespaceGuard => &NAMESPACE_GUARD,
            Concept::DeviceSharing => &POLICY_DEVICE_SHARING_FORBIDDEN,
        };
    }
    let field = finding.field.as_deref().unwrap_or("");
    match finding.reason.as_str() {
        "UnknownVersion" => return &KIND_VERSION_UNKNOWN,
        "BadRequest" => return &OBJECT_UNDECODABLE,
        "PolicyAudit" => return &POLICY_AUDIT,
        "NotAnObject" => return &NOT_AN_OBJECT,
        "NotJudged" => return &NOT_JUDGED,
        "FieldValueUnknown" => return &UNKNOWN_FIELD,
        "DuplicateField" => return &DUPLICATE_FIELD,
        "ScopeUnknown" => return &SCOPE_UNKNOWN,
        _ => {}
    }
    if finding.severity == Severity::Warning {
        return if field.ends_with("deviceSelector") {
            &TAINT_RULE_SELECTS_EVERY_DEVICE
        } else if finding.message.starts_with("impact: ") {
            &TAINT_RULE_IMPACT
        } else {
            &ADMISSION_WARNING
        };
    }
    validation_rule(kind, field, &finding.reason)
}

/// A validation error by where it is and what kind of error it is.
fn validation_rule(kind: &str, field: &str, reason: &str) -> &'static Rule {
    let leaf = field.rsplit('.').next().unwrap_or("");
    let leaf = leaf.split('[').next().unwrap_or(leaf);
    let unsupported = reason == "FieldValueNotSupported";
    // First: a driver's parameters may hold fields of any name.
    if field.contains(".opaque.parameters") {
        return &DRIVER_CONFIG_INVALID;
    }
    if field.contains("tolerations") {
        let device = field.contains("devices.") || field.contains("requests[");
        return match (device, leaf, unsupported) {
            (true, "effect", true) => &DEVICE_TOLERATION_EFFECT_UNSUPPORTED,
            (true, "operator", true) => &DEVICE_TOLERATION_OPERATOR_UNSUPPORTED,
            (true, _, _) => &DEVICE_TOLERATION_INVALID,
            (false, "effect", true) => &POD_TOLERATION_EFFECT_UNSUPPORTED,
            (false, "operator", true) => &POD_TOLERATION_OPERATOR_UNSUPPORTED,
            (false, _, _) => &POD_TOLERATION_INVALID,
        };
    }
    if field.contains("taints") || field.starts_with("spec.taint") {
        return if kind == "Node" {
            &NODE_TAINT_INVALID
        } else {
            &DEVICE_TAINT_INVALID
        };
    }
    if field.contains("selectors") || field.contains(".cel") {
        return &DEVICE_SELECTOR_INVALID;
    }
    if field.contains("capacity") || field.contains("requestPolicy") {
        return &DEVICE_CAPACITY_INVALID;
    }
    if field.contains("devices.") {
        return &DEVICE_REQUEST_INVALID;
    }
    if field.starts_with("metadata") {
        return &METADATA_INVALID;
    }
    &OBJECT_INVALID
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::Position;

    fn finding(severity: Severity, reason: &str, field: &str, message: &str) -> Finding {
        Finding {
            severity,
            field: (!field.is_empty()).then(|| field.to_owned()),
            reason: reason.into(),
            message: message.into(),
            position: Position::default(),
            concept: None,
            policy: None,
        }
    }

    #[test]
    fn findings_are_grouped_by_concept_not_by_index() {
        let error =
            |kind: &str, reason: &str, field: &str| rule_of(kind, &finding(Severity::Error, reason, field, "x")).id;
        assert_eq!(
            error(
                "ResourceClaim",
                "FieldValueNotSupported",
                "spec.devices.requests[0].exactly.tolerations[2].effect"
            ),
            "device-toleration-effect-unsupported"
        );
        assert_eq!(
            error(
                "ResourceClaimTemplate",
                "FieldValueNotSupported",
                "spec.spec.devices.requests[3].firstAvailable[1].tolerations[0].effect"
            ),
            "device-toleration-effect-unsupported"
        );
        assert_eq!(
            error(
                "Deployment",
                "FieldValueNotSupported",
                "spec.template.spec.tolerations[0].effect"
            ),
            "pod-toleration-effect-unsupported"
        );
        assert_eq!(
            error("Pod", "FieldValueInvalid", "spec.tolerations[0].tolerationSeconds"),
            "pod-toleration-invalid"
        );
        assert_eq!(
            error("Node", "FieldValueInvalid", "metadata.taints[0].key"),
            "node-taint-invalid"
        );
        assert_eq!(
            error("DeviceTaintRule", "FieldValueNotSupported", "spec.taint.effect"),
            "device-taint-invalid"
        );
        assert_eq!(
            error("ResourceSlice", "FieldValueInvalid", "spec.devices[0].taints[0].key"),
            "device-taint-invalid"
        );
        assert_eq!(
            error(
                "ResourceClaim",
                "FieldValueInvalid",
                "spec.devices.requests[0].exactly.selectors[0].cel.expression"
            ),
            "device-selector-invalid"
        );
        assert_eq!(
            error("ResourceClaim", "FieldValueRequired", "spec.devices.requests[0].name"),
            "device-request-invalid"
        );
        assert_eq!(error("Pod", "FieldValueInvalid", "metadata.name"), "metadata-invalid");
        assert_eq!(error("Pod", "UnknownVersion", "apiVersion"), "kind-version-unknown");
        let mut forbidden = finding(Severity::Error, "FieldValueForbidden", "", "exceeded quota");
        forbidden.concept = Some(Concept::Quota);
        assert_eq!(rule_of("ResourceClaim", &forbidden).id, "quota-exceeded");
        let selector = finding(Severity::Warning, "Warning", "spec.deviceSelector", "is empty");
        assert_eq!(
            rule_of("DeviceTaintRule", &selector).id,
            "taint-rule-selects-every-device"
        );
        let impact = finding(Severity::Warning, "Warning", "", "impact: would evict 3 pods");
        assert_eq!(rule_of("DeviceTaintRule", &impact).id, "taint-rule-impact");
        // A tie only warned about carries its concept, as the denial does.
        let mut tie = finding(
            Severity::Warning,
            "Warning",
            "",
            "ResourceSlicePatch \"b\" has the same priority (1) as \"a\", can match the same devices",
        );
        assert_eq!(rule_of("ResourceSlicePatch", &tie).id, "admission-warning");
        tie.concept = Some(Concept::PriorityTie);
        assert_eq!(rule_of("ResourceSlicePatch", &tie).id, "patch-priority-tie");
    }

    /// docs/src/reference/check-rules.md documents exactly these rules, in this order.
    #[test]
    fn the_documented_list_is_the_list() {
        let docs = include_str!("../../docs/src/reference/check-rules.md");
        let documented: Vec<&str> = docs
            .lines()
            .filter_map(|l| l.strip_prefix("### `"))
            .filter_map(|l| l.strip_suffix('`'))
            .collect();
        let ids: Vec<&str> = ALL.iter().map(|r| r.id).collect();
        assert_eq!(documented, ids);
        for rule in ALL {
            assert!(
                docs.contains(rule.short),
                "{}: the short description is in the docs",
                rule.id
            );
            assert!(!rule.help.is_empty());
        }
    }
}
