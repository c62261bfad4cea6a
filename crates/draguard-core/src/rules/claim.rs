//! ResourceClaim and ResourceClaimTemplate specs: `validateDeviceClaim` and
//! everything below it in `pkg/apis/resource/validation/validation.go`.

use std::collections::BTreeMap;

use crate::field::{At, FieldError, Path};
use crate::kubernetes::KubeVersion;
use crate::objects::claim::{
    ALLOCATION_MODE_ALL, ALLOCATION_MODE_EXACT_COUNT, ClaimSpec, DeviceClaim, DeviceClaimConfiguration,
    DeviceConstraint, DeviceRequest, DeviceSelector, DeviceSubRequest, ExactDeviceRequest, OpaqueDeviceConfiguration,
};
use crate::objects::parameters::Parameters;
use crate::objects::{ClaimVersion, go_json};
use crate::rules::cel::CompileBudget;
use crate::rules::ratchet::check_enum;
use crate::rules::tolerations::validate_device_tolerations;
use crate::rules::{cel, declare_list, invalid_each, names, unverified, validate_set, validate_slice};

pub const DEVICE_REQUESTS_MAX: usize = 32;
pub const DEVICE_CONSTRAINTS_MAX: usize = 32;
pub const DEVICE_CONFIG_MAX: usize = 32;
pub const DEVICE_SELECTORS_MAX: usize = 32;
pub const FIRST_AVAILABLE_MAX: usize = 8;
pub const OPAQUE_PARAMETERS_MAX: usize = 10 * 1024;
pub const DRIVER_NAME_MAX: usize = 63;
pub const DEVICE_MAX_ID_LENGTH: usize = 32;

/// The namespace label that admin access to devices requires.
pub const ADMIN_ACCESS_NAMESPACE_LABEL: &str = "resource.kubernetes.io/admin-access";

const REQUEST_REF_MESSAGE: &str =
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'";

/// `validateResourceClaimSpec` at `path` (`spec` for claims, `spec.spec` for templates).
/// `version`: the served version the spec came in (a repeated request is
/// shown in its shape); `cel`: the request's CEL compile budget, which
/// every selector is charged to.
pub fn validate_claim_spec<'p>(
    spec: &ClaimSpec,
    version: ClaimVersion,
    kube: KubeVersion,
    path: impl Into<At<'p>>,
    cel: &CompileBudget,
) -> Vec<FieldError> {
    let path = path.into();
    validate_device_claim(&spec.devices, None, version, kube, path.field("devices"), cel)
}

/// A changed spec judged against the stored one: enum values ratchet
/// (SPEC.md §4) with requests and subrequests matched by name.
pub fn validate_claim_spec_update<'p>(
    spec: &ClaimSpec,
    old: &ClaimSpec,
    version: ClaimVersion,
    kube: KubeVersion,
    path: impl Into<At<'p>>,
    cel: &CompileBudget,
) -> Vec<FieldError> {
    let path = path.into();
    validate_device_claim(
        &spec.devices,
        Some(&old.devices),
        version,
        kube,
        path.field("devices"),
        cel,
    )
}

fn validate_device_claim(
    claim: &DeviceClaim,
    old: Option<&DeviceClaim>,
    version: ClaimVersion,
    kube: KubeVersion,
    path: At<'_>,
    cel: &CompileBudget,
) -> Vec<FieldError> {
    let names = RequestNames(claim);
    let requests = path.field("requests");
    let mut errs = validate_set(
        &claim.requests,
        DEVICE_REQUESTS_MAX,
        requests,
        |r, p| {
            let stored = old.and_then(|o| o.requests.iter().find(|x| x.name == r.name));
            validate_device_request(r, stored, p, cel)
        },
        |r| r.name.as_str(),
    );
    let request = |i: usize| go_json::versioned_request(&claim.requests[i], version);
    declare_list(&mut errs, requests, Some(&request));
    let constraints = path.field("constraints");
    // 1.38 ratchets the slash rule per field: constraints left as stored
    // keep their names.
    let slashes = Slashes::for_field(kube, old.is_some_and(|o| o.constraints == claim.constraints));
    let mut constraint_errs = validate_slice(&claim.constraints, DEVICE_CONSTRAINTS_MAX, constraints, |c, p| {
        validate_constraint(c, p, &names, slashes)
    });
    declare_list(&mut constraint_errs, constraints, None);
    errs.extend(constraint_errs);
    let config = path.field("config");
    let mut config_errs = validate_slice(&claim.config, DEVICE_CONFIG_MAX, config, |c, p| {
        validate_claim_config(c, p, &names)
    });
    declare_list(&mut config_errs, config, None);
    errs.extend(config_errs);
    errs
}

/// Request names and, for `firstAvailable` requests, their subrequest
/// names, looked up in the claim itself: a claim has at most 32 requests of
/// at most 8 subrequests, so scanning beats building a map of copies.
struct RequestNames<'c>(&'c DeviceClaim);

impl RequestNames<'_> {
    /// `requestNames.Has`: `main` matches any request, `main/sub` only a
    /// subrequest of a `firstAvailable` request. `gatherRequestNames` fills
    /// a map, so of requests sharing a name the last one counts.
    fn has(&self, reference: &str) -> bool {
        let request = |name: &str| self.0.requests.iter().rev().find(|r| r.name == name);
        match reference.split_once('/') {
            None => request(reference).is_some(),
            Some((main, sub)) if !sub.contains('/') => {
                request(main).is_some_and(|r| r.first_available.iter().any(|s| s.name == sub))
            }
            Some(_) => false,
        }
    }
}

fn validate_request_name(name: &str, path: At<'_>) -> Vec<FieldError> {
    invalid_each(path, name, names::dns1123_label(name))
}

fn validate_device_request(
    request: &DeviceRequest,
    old: Option<&DeviceRequest>,
    path: At<'_>,
    cel: &CompileBudget,
) -> Vec<FieldError> {
    let mut errs = validate_request_name(&request.name, path.field("name"));
    let has_first_available = !request.first_available.is_empty();
    match (&request.exactly, has_first_available) {
        (None, false) => errs.push(FieldError::required(
            path,
            "exactly one of `exactly` or `firstAvailable` is required",
        )),
        (Some(_), true) => errs.push(FieldError::invalid(
            path,
            crate::field::BadValue::Null,
            "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
        )),
        (None, true) => {
            let subrequests = path.field("firstAvailable");
            let mut sub_errs = validate_set(
                &request.first_available,
                FIRST_AVAILABLE_MAX,
                subrequests,
                |s, p| {
                    let stored = old.and_then(|o| o.first_available.iter().find(|x| x.name == s.name));
                    validate_subrequest(s, stored, p, cel)
                },
                |s| s.name.as_str(),
            );
            let subrequest = |i: usize| go_json::versioned_subrequest(&request.first_available[i]);
            declare_list(&mut sub_errs, subrequests, Some(&subrequest));
            errs.extend(sub_errs);
        }
        (Some(exactly), false) => errs.extend(validate_exact_request(
            exactly,
            old.and_then(|o| o.exactly.as_ref()),
            path.field("exactly"),
            cel,
        )),
    }
    errs
}

fn validate_exact_request(
    request: &ExactDeviceRequest,
    old: Option<&ExactDeviceRequest>,
    path: At<'_>,
    cel: &CompileBudget,
) -> Vec<FieldError> {
    let mut errs = validate_device_class(&request.device_class_name, path.field("deviceClassName"));
    errs.extend(validate_selectors(&request.selectors, path.field("selectors"), cel));
    let old_mode = old.map(|o| o.allocation_mode.as_str());
    errs.extend(validate_allocation_mode(
        &request.allocation_mode,
        request.count,
        old_mode,
        path,
    ));
    let old_tolerations = old.map(|o| o.tolerations.as_slice());
    errs.extend(validate_device_tolerations(
        &request.tolerations,
        old_tolerations,
        path.field("tolerations"),
    ));
    errs
}

fn validate_subrequest(
    sub: &DeviceSubRequest,
    old: Option<&DeviceSubRequest>,
    path: At<'_>,
    cel: &CompileBudget,
) -> Vec<FieldError> {
    let mut errs = validate_request_name(&sub.name, path.field("name"));
    // Declaratively `required` and `format=k8s-long-name` on subrequests
    // only; `exactly.deviceClassName` has no tag.
    errs.extend(
        validate_device_class(&sub.device_class_name, path.field("deviceClassName"))
            .into_iter()
            .map(FieldError::declared),
    );
    errs.extend(validate_selectors(&sub.selectors, path.field("selectors"), cel));
    let old_mode = old.map(|o| o.allocation_mode.as_str());
    errs.extend(validate_allocation_mode(
        &sub.allocation_mode,
        sub.count,
        old_mode,
        path,
    ));
    let old_tolerations = old.map(|o| o.tolerations.as_slice());
    errs.extend(validate_device_tolerations(
        &sub.tolerations,
        old_tolerations,
        path.field("tolerations"),
    ));
    errs
}

fn validate_device_class(name: &str, path: At<'_>) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path, "")];
    }
    invalid_each(path, name, names::dns1123_subdomain(name))
}

fn validate_selectors(selectors: &[DeviceSelector], path: At<'_>, budget: &CompileBudget) -> Vec<FieldError> {
    let mut errs = validate_slice(selectors, DEVICE_SELECTORS_MAX, path, |s, p| match &s.cel {
        None => vec![FieldError::required(p.child("cel"), "")],
        Some(c) => cel::validate_expression(&c.expression, p.field("cel").field("expression"), budget),
    });
    declare_list(&mut errs, path, None);
    errs
}

/// `validateDeviceAllocationMode`, after defaulting; an unknown mode
/// ratchets against the stored request's.
fn validate_allocation_mode(mode: &str, count: i64, old_mode: Option<&str>, path: At<'_>) -> Vec<FieldError> {
    match mode {
        ALLOCATION_MODE_ALL if count != 0 => vec![FieldError::invalid(
            path.child("count"),
            count,
            "must not be specified when allocationMode is 'All'",
        )],
        ALLOCATION_MODE_EXACT_COUNT if count <= 0 => {
            vec![FieldError::invalid(
                path.child("count"),
                count,
                "must be greater than zero",
            )]
        }
        ALLOCATION_MODE_ALL | ALLOCATION_MODE_EXACT_COUNT => Vec::new(),
        other => check_enum(
            other,
            old_mode,
            path.field("allocationMode"),
            &[ALLOCATION_MODE_ALL, ALLOCATION_MODE_EXACT_COUNT],
        )
        .into_iter()
        .map(FieldError::declared)
        .collect(),
    }
}

fn validate_constraint(c: &DeviceConstraint, path: At<'_>, names: &RequestNames, slashes: Slashes) -> Vec<FieldError> {
    let mut errs = validate_request_refs(&c.requests, path.field("requests"), names);
    if let Some(attr) = &c.match_attribute {
        // `format=k8s-resource-fully-qualified-name`; distinctAttribute has no tag.
        errs.extend(
            validate_fully_qualified_name(attr, slashes, path.field("matchAttribute"))
                .into_iter()
                .map(FieldError::declared),
        );
    } else if let Some(attr) = &c.distinct_attribute {
        errs.extend(validate_fully_qualified_name(
            attr,
            slashes,
            path.field("distinctAttribute"),
        ));
    } else {
        // The message is the apiserver's, "multiple" included (DRAConsumableCapacity on).
        errs.push(FieldError::required(
            path,
            "exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields are set",
        ));
    }
    errs
}

fn validate_claim_config(c: &DeviceClaimConfiguration, path: At<'_>, names: &RequestNames) -> Vec<FieldError> {
    let mut errs = validate_request_refs(&c.requests, path.field("requests"), names);
    match &c.opaque {
        None => errs.push(FieldError::required(path.child("opaque"), "")),
        Some(opaque) => errs.extend(validate_opaque(opaque, path.field("opaque"))),
    }
    errs
}

fn validate_request_refs(refs: &[String], path: At<'_>, names: &RequestNames) -> Vec<FieldError> {
    let mut errs = validate_set(
        refs,
        DEVICE_REQUESTS_MAX,
        path,
        |r, p| validate_request_ref(r, p, names),
        String::as_str,
    );
    declare_list(&mut errs, path, None);
    errs
}

/// `validateRequestNameRef`.
fn validate_request_ref(reference: &str, path: At<'_>, names: &RequestNames) -> Vec<FieldError> {
    if reference.split('/').count() > 2 {
        return vec![FieldError::invalid(path, reference, REQUEST_REF_MESSAGE)];
    }
    let mut errs: Vec<FieldError> = reference
        .split('/')
        .flat_map(|s| validate_request_name(s, path))
        .collect();
    if !names.has(reference) {
        errs.push(FieldError::invalid(path, reference, REQUEST_REF_MESSAGE));
    }
    errs
}

fn validate_opaque(opaque: &OpaqueDeviceConfiguration, path: At<'_>) -> Vec<FieldError> {
    let mut errs = validate_driver_name(&opaque.driver, path.field("driver"));
    errs.extend(validate_raw_parameters(
        opaque.parameters.as_ref(),
        path.field("parameters"),
        false,
    ));
    errs
}

/// `validateRawExtension`: present, a JSON object, and at most 10 KiB
/// unless `stored` (a DeviceClass's parameters stored before the limit
/// came in 1.32 keep their size; a claim's are never judged on update).
/// JSON `null` decodes to nothing, which is `Required` as the apiserver's
/// `v == nil` is.
pub fn validate_raw_parameters(parameters: Option<&Parameters>, path: At<'_>, stored: bool) -> Vec<FieldError> {
    let Some(value) = parameters else {
        return vec![FieldError::required(path, "")];
    };
    // Without decoding the tree when its text is short enough to tell.
    if !stored && !value.fits(OPAQUE_PARAMETERS_MAX) {
        return vec![FieldError::too_long(path, OPAQUE_PARAMETERS_MAX)];
    }
    if !value.is_object() {
        return vec![FieldError::invalid(
            path,
            "<value omitted>",
            "must be a valid JSON object",
        )];
    }
    Vec::new()
}

/// `corevalidation.ValidateCSIDriverName`: checked lower-cased, so upper
/// case passes.
pub fn validate_driver_name<'p>(name: &str, path: impl Into<At<'p>>) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(path, ""));
    }
    if name.len() > DRIVER_NAME_MAX {
        errs.push(FieldError::too_long(path, DRIVER_NAME_MAX));
    }
    errs.extend(invalid_each(
        path,
        name,
        names::dns1123_subdomain(&names::to_lowercase(name)),
    ));
    errs
}

/// `validateFullyQualifiedName`: `domain/id`.
pub fn validate_fully_qualified_name<'p>(name: &str, slashes: Slashes, path: impl Into<At<'p>>) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = validate_qualified_name(name, slashes, path);
    if !name.contains('/') {
        errs.push(FieldError::invalid(
            path,
            name,
            "a fully qualified name must be a domain and a name separated by a slash",
        ));
    }
    errs
}

/// Whether a qualified name may have more than one `/`, which changed in
/// 1.38. `validateQualifiedName` of 1.36 and 1.37
/// (pkg/apis/resource/validation/validation.go, v1.36.2 and v1.37.0)
/// switches on one and two parts only, with a TODO, so `a/b/c` passes
/// unjudged; 1.38 adds a `default:` case that rejects it (kubernetes#141644,
/// 1.38.0-alpha.2) and ratchets it: a stored name stays while the field
/// holding it is unchanged. The caller knows the version and the old
/// object, so it decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slashes {
    /// 1.36, 1.37, or a 1.38 field left as stored: more than one slash passes.
    Unjudged,
    /// 1.38 on a new or changed field: more than one slash is `Invalid`.
    AtMostOne,
}

impl Slashes {
    /// The rule for a field under `version`: judged from 1.38 on, unless
    /// the field is unchanged from the stored object.
    pub fn for_field(version: KubeVersion, unchanged: bool) -> Self {
        if version >= KubeVersion::V1_38 && !unchanged {
            Slashes::AtMostOne
        } else {
            Slashes::Unjudged
        }
    }
}

/// `validateQualifiedName`: an optional domain and a C identifier.
pub fn validate_qualified_name<'p>(name: &str, slashes: Slashes, path: impl Into<At<'p>>) -> Vec<FieldError> {
    let path = path.into();
    match name.split_once('/') {
        None => validate_c_identifier(name, path),
        Some((domain, id)) if !id.contains('/') => {
            let mut errs = Vec::new();
            if domain.is_empty() {
                errs.push(FieldError::invalid(path, "", "the domain must not be empty"));
            } else {
                errs.extend(validate_driver_name(domain, path));
            }
            if id.is_empty() {
                errs.push(FieldError::invalid(path, "", "the name must not be empty"));
            } else {
                errs.extend(validate_c_identifier(id, path));
            }
            errs
        }
        Some(_) => match slashes {
            Slashes::Unjudged => Vec::new(),
            Slashes::AtMostOne => vec![FieldError::invalid(path, name, unverified::MORE_THAN_ONE_SLASH)],
        },
    }
}

fn validate_c_identifier(id: &str, path: At<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if id.len() > DEVICE_MAX_ID_LENGTH {
        errs.push(FieldError::too_long(path, DEVICE_MAX_ID_LENGTH));
    }
    errs.extend(invalid_each(path, id, names::c_identifier(id)));
    errs
}

/// `AuthorizedForAdmin` (pkg/registry/resource/utils.go): the first request
/// asking for admin access needs the namespace label. `labels` is `None`
/// when the namespace is unknown, in which case nothing can be said. The
/// path is the apiserver's, fixed at `spec.devices.requests[i].adminAccess`
/// for claims and templates alike.
pub fn validate_admin_access(spec: &ClaimSpec, labels: Option<&BTreeMap<String, String>>) -> Vec<FieldError> {
    let Some(labels) = labels else {
        return Vec::new();
    };
    let first_admin = spec
        .devices
        .requests
        .iter()
        .position(|r| r.exactly.as_ref().and_then(|e| e.admin_access) == Some(true));
    let Some(i) = first_admin else {
        return Vec::new();
    };
    if labels.get(ADMIN_ACCESS_NAMESPACE_LABEL).map(String::as_str) == Some("true") {
        return Vec::new();
    }
    vec![FieldError::forbidden(
        Path::new("spec")
            .child("devices")
            .child("requests")
            .index(i)
            .child("adminAccess"),
        format!(
            "admin access to devices requires the `{ADMIN_ACCESS_NAMESPACE_LABEL}: true` label on the containing namespace"
        ),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ClaimVersion;
    use rstest::rstest;
    use serde_json::{Value, json};

    /// The errors declarative validation shares with the hand-written
    /// rules are marked, and only those: each mark below is one tag of the
    /// API (SPEC-k8s-1.37.md §2.3), and what is left unmarked is
    /// hand-written only.
    #[test]
    fn errors_declarative_validation_shares_are_marked() {
        let many = |n: usize, item: Value| Value::Array(vec![item; n]);
        let spec = json!({"devices": {
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "c", "allocationMode": "Some",
                    "selectors": many(33, json!({"cel": {"expression": "true"}})),
                    "tolerations": [{"key": "bad key!", "operator": "Exists", "value": "v"}]}},
                {"name": "Bad_Name", "firstAvailable": [{"name": "s", "deviceClassName": "Bad!"}]},
            ],
            "constraints": [{"requests": ["gpu", "gpu"], "matchAttribute": "nodomain"}],
            "config": many(33, json!({"requests": ["gpu"], "opaque": {"driver": "d.example.com", "parameters": {}}})),
        }});
        let spec = ClaimSpec::decode(&spec, ClaimVersion::V1).expect("decodable spec");
        let errs = validate_claim_spec(
            &spec,
            ClaimVersion::V1,
            KubeVersion::NEWEST,
            &Path::new("spec"),
            &CompileBudget::default(),
        );
        let marked: Vec<(String, bool)> = errs
            .iter()
            .map(|e| (format!("{}: {:?}", e.field, e.kind), e.declared.is_some()))
            .collect();
        let want = [
            ("spec.devices.requests[0].exactly.selectors: TooMany", true),
            ("spec.devices.requests[0].exactly.allocationMode: NotSupported", true),
            ("spec.devices.requests[0].exactly.tolerations[0].key: Invalid", true),
            ("spec.devices.requests[0].exactly.tolerations[0].value: Invalid", false),
            ("spec.devices.requests[1].name: Invalid", false),
            (
                "spec.devices.requests[1].firstAvailable[0].deviceClassName: Invalid",
                true,
            ),
            ("spec.devices.constraints[0].requests[1]: Duplicate", true),
            ("spec.devices.constraints[0].matchAttribute: Invalid", true),
            ("spec.devices.config: TooMany", true),
        ];
        let want: Vec<(String, bool)> = want.iter().map(|(f, d)| ((*f).to_owned(), *d)).collect();
        assert_eq!(marked, want);
    }

    fn check_version(spec: Value, version: ClaimVersion) -> Vec<String> {
        check_under(spec, version, KubeVersion::NEWEST)
    }

    fn check_under(spec: Value, version: ClaimVersion, kube: KubeVersion) -> Vec<String> {
        let spec = ClaimSpec::decode(&spec, version).expect("decodable spec");
        validate_claim_spec(&spec, version, kube, &Path::new("spec"), &CompileBudget::default())
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn check(spec: Value) -> Vec<String> {
        check_version(spec, ClaimVersion::V1)
    }

    fn requests(reqs: Value) -> Value {
        json!({"devices": {"requests": reqs}})
    }

    fn exactly(name: &str, extra: Value) -> Value {
        let mut e = json!({"deviceClassName": "gpu.example.com"});
        if let (Some(e), Some(x)) = (e.as_object_mut(), extra.as_object()) {
            e.extend(x.clone());
        }
        json!({"name": name, "exactly": e})
    }

    fn sub(name: &str) -> Value {
        json!({"name": name, "deviceClassName": "gpu.example.com"})
    }

    #[test]
    fn valid_claim_has_no_errors() {
        assert!(check(requests(json!([exactly("gpu", json!({}))]))).is_empty());
        assert!(
            check(requests(
                json!([{"name": "gpu", "firstAvailable": [sub("big"), sub("small")]}])
            ))
            .is_empty()
        );
    }

    #[test]
    fn request_name_is_a_dns_label() {
        let errs = check(requests(json!([exactly("Bad_Name", json!({}))])));
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0]
                .starts_with(r#"spec.devices.requests[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label"#)
        );
    }

    #[test]
    fn exactly_or_first_available() {
        assert_eq!(
            check(requests(json!([{"name": "a"}]))),
            vec!["spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"]
        );
        let both = json!([{"name": "a", "exactly": {"deviceClassName": "c"}, "firstAvailable": [sub("x")]}]);
        assert_eq!(
            check(requests(both)),
            vec![
                "spec.devices.requests[0]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
            ]
        );
    }

    #[test]
    fn v1beta1_main_fields_beside_first_available() {
        let spec = requests(json!([{"name": "a", "tolerations": [], "firstAvailable": [sub("x")]}]));
        assert_eq!(
            check_version(spec, ClaimVersion::V1beta1),
            vec![
                "spec.devices.requests[0]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
            ]
        );
        let flat = requests(json!([{"name": "a", "deviceClassName": "c", "tolerations": [{"operator": "In"}]}]));
        assert_eq!(
            check_version(flat, ClaimVersion::V1beta1),
            vec![
                r#"spec.devices.requests[0].exactly.tolerations[0].operator: Unsupported value: "In": supported values: "Equal", "Exists""#
            ]
        );
        let name_only = requests(json!([{"name": "a"}]));
        assert_eq!(check_version(name_only, ClaimVersion::V1beta1).len(), 1);
    }

    #[test]
    fn at_most_32_requests_and_unique_names() {
        let reqs: Vec<Value> = (0..33).map(|i| exactly(&format!("r{i}"), json!({}))).collect();
        assert_eq!(
            check(requests(json!(reqs))),
            vec!["spec.devices.requests: Too many: 33: must have at most 32 items"]
        );
        let dup = json!([exactly("a", json!({})), exactly("a", json!({}))]);
        assert_eq!(
            check(requests(dup)),
            vec![r#"spec.devices.requests[1]: Duplicate value: "a""#]
        );
    }

    #[test]
    fn first_available_limits_and_names() {
        let nine: Vec<Value> = (0..9).map(|i| sub(&format!("s{i}"))).collect();
        assert_eq!(
            check(requests(json!([{"name": "a", "firstAvailable": nine}]))),
            vec!["spec.devices.requests[0].firstAvailable: Too many: 9: must have at most 8 items"]
        );
        let dup = json!([{"name": "a", "firstAvailable": [sub("x"), sub("x")]}]);
        assert_eq!(
            check(requests(dup)),
            vec![r#"spec.devices.requests[0].firstAvailable[1]: Duplicate value: "x""#]
        );
        let bad = json!([{"name": "a", "firstAvailable": [sub("x.y")]}]);
        assert_eq!(
            check(requests(bad)),
            vec![r#"spec.devices.requests[0].firstAvailable[0].name: Invalid value: "x.y": must not contain dots"#]
        );
    }

    #[test]
    fn device_class_name() {
        let missing = json!([{"name": "a", "exactly": {}}]);
        assert_eq!(
            check(requests(missing)),
            vec!["spec.devices.requests[0].exactly.deviceClassName: Required value"]
        );
        let bad = json!([{"name": "a", "firstAvailable": [{"name": "s", "deviceClassName": "Bad!"}]}]);
        let errs = check(requests(bad));
        assert_eq!(errs.len(), 1);
        assert!(errs[0].starts_with(r#"spec.devices.requests[0].firstAvailable[0].deviceClassName: Invalid value: "Bad!": a lowercase RFC 1123 subdomain"#));
    }

    /// One request's `exactly` fields and the errors they get. No mode
    /// means ExactCount and no count means 1, so `""` and 0 pass.
    #[rstest]
    #[case::negative_count(json!({"count": -1}), &["spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero"])]
    #[case::count_beside_all(
        json!({"allocationMode": "All", "count": 2}),
        &["spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'"]
    )]
    #[case::unknown_mode(
        json!({"allocationMode": "Some"}),
        &[r#"spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Some": supported values: "All", "ExactCount""#]
    )]
    #[case::defaults(json!({"allocationMode": "", "count": 0}), &[])]
    #[case::all(json!({"allocationMode": "All"}), &[])]
    fn allocation_mode_and_count(#[case] fields: Value, #[case] want: &[&str]) {
        assert_eq!(check(requests(json!([exactly("a", fields)]))), want);
    }

    #[test]
    fn selectors() {
        let many: Vec<Value> = (0..33).map(|_| json!({"cel": {"expression": "true"}})).collect();
        assert_eq!(
            check(requests(json!([exactly("a", json!({"selectors": many}))]))),
            vec!["spec.devices.requests[0].exactly.selectors: Too many: 33: must have at most 32 items"]
        );
        assert_eq!(
            check(requests(json!([exactly("a", json!({"selectors": [{}]}))]))),
            vec!["spec.devices.requests[0].exactly.selectors[0].cel: Required value"]
        );
        let errs = check(requests(json!([exactly(
            "a",
            json!({"selectors": [{"cel": {"expression": "device.driver =="}}]})
        )])));
        assert_eq!(errs.len(), 1);
        assert!(errs[0].starts_with(
            r#"spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "device.driver ==": compilation failed: ERROR: <input>:1:"#
        ), "{}", errs[0]);
        let long = "x".repeat(10241);
        assert_eq!(
            check(requests(
                json!([{"name": "a", "firstAvailable": [{"name": "s", "deviceClassName": "c", "selectors": [{"cel": {"expression": long}}]}]}])
            )),
            vec![
                "spec.devices.requests[0].firstAvailable[0].selectors[0].cel.expression: Too long: may not be more than 10240 bytes"
            ]
        );
    }

    /// The issue's second reproducer: 280 distinct malformed selectors of
    /// 10 KB in one claim (9 requests). Each is compiled and rejected with a
    /// bounded detail until the request's source budget (512 KiB here; the
    /// standard one is the apiserver's own bound, see `cel::budget`) is
    /// spent; the one that would go past it is refused with a message naming the budget,
    /// and the rest are not compiled. (The time budget is lifted here so
    /// that a slow machine cannot change which selector that is.)
    #[test]
    fn selectors_past_the_source_budget_are_refused() {
        let expression = |i: usize| {
            let head = format!("device.driver == \"{i:05}");
            format!("{head}{}\" )", "a".repeat(10_000 - head.len() - 3))
        };
        let all: Vec<String> = (0..280).map(expression).collect();
        assert!(all.iter().all(|e| e.len() == 10_000));
        let reqs: Vec<Value> = all
            .chunks(DEVICE_SELECTORS_MAX)
            .enumerate()
            .map(|(r, chunk)| {
                let selectors: Vec<Value> = chunk.iter().map(|e| json!({"cel": {"expression": e}})).collect();
                exactly(&format!("r{r}"), json!({"selectors": selectors}))
            })
            .collect();
        let spec = ClaimSpec::decode(&requests(Value::Array(reqs)), ClaimVersion::V1).expect("decodable spec");
        let budget = CompileBudget::with_limits(512 << 10, std::time::Duration::MAX, None);
        let errs = validate_claim_spec(
            &spec,
            ClaimVersion::V1,
            KubeVersion::NEWEST,
            &Path::new("spec"),
            &budget,
        );
        // 52 selectors of 10,000 bytes fit in 512 KiB; the 53rd does not.
        assert_eq!(errs.len(), 53);
        for (i, e) in errs[..52].iter().enumerate() {
            let field = format!(
                "spec.devices.requests[{}].exactly.selectors[{}].cel.expression",
                i / 32,
                i % 32
            );
            assert_eq!(e.field.to_string(), field);
            assert_eq!(
                e.detail,
                format!(
                    "compilation failed: ERROR: <input>:1:10000: Syntax error: extraneous input ')' expecting <EOF>\n | …{}\" )\n | ．{}^",
                    "a".repeat(196),
                    ".".repeat(198)
                )
            );
        }
        assert_eq!(
            errs[52].to_string(),
            "spec.devices.requests[1].exactly.selectors[20].cel.expression: Forbidden: not checked: this request's CEL selectors total more than draguard's budget of 524288 bytes per request"
        );
    }

    #[test]
    fn of_requests_sharing_a_name_the_last_one_names_subrequests() {
        // `gatherRequestNames` fills a map: the later `r` (no subrequests) wins.
        let spec = json!({"devices": {
            "requests": [{"name": "r", "firstAvailable": [sub("s")]}, exactly("r", json!({}))],
            "constraints": [{"requests": ["r/s", "r"], "matchAttribute": "example.com/m"}],
        }});
        assert_eq!(
            check(spec),
            vec![
                r#"spec.devices.requests[1]: Duplicate value: "r""#.to_owned(),
                format!(r#"spec.devices.constraints[0].requests[0]: Invalid value: "r/s": {REQUEST_REF_MESSAGE}"#),
            ]
        );
    }

    fn with_constraints(constraints: Value) -> Value {
        json!({"devices": {
            "requests": [exactly("a", json!({})), {"name": "p", "firstAvailable": [sub("s")]}],
            "constraints": constraints,
        }})
    }

    /// Constraints over the requests `a` and `p` (subrequest `s`), and the
    /// errors they get.
    #[rstest]
    #[case::requests_and_subrequests(json!([{"requests": ["a", "p", "p/s"], "matchAttribute": "example.com/model"}]), vec![])]
    #[case::unknown_request(
        json!([{"requests": ["missing"], "matchAttribute": "example.com/m"}]),
        vec![format!(r#"spec.devices.constraints[0].requests[0]: Invalid value: "missing": {REQUEST_REF_MESSAGE}"#)]
    )]
    #[case::subrequest_of_a_plain_request(
        json!([{"requests": ["a/s"], "matchAttribute": "example.com/m"}]),
        vec![format!(r#"spec.devices.constraints[0].requests[0]: Invalid value: "a/s": {REQUEST_REF_MESSAGE}"#)]
    )]
    #[case::two_slashes(
        json!([{"requests": ["p/s/t"], "matchAttribute": "example.com/m"}]),
        vec![format!(r#"spec.devices.constraints[0].requests[0]: Invalid value: "p/s/t": {REQUEST_REF_MESSAGE}"#)]
    )]
    #[case::duplicate(
        json!([{"requests": ["a", "a"], "matchAttribute": "example.com/m"}]),
        vec![r#"spec.devices.constraints[0].requests[1]: Duplicate value: "a""#.to_owned()]
    )]
    #[case::thirty_three(
        Value::Array(vec![json!({"requests": ["a"], "matchAttribute": "example.com/m"}); 33]),
        vec!["spec.devices.constraints: Too many: 33: must have at most 32 items".to_owned()]
    )]
    fn constraint_request_references(#[case] constraints: Value, #[case] want: Vec<String>) {
        assert_eq!(check(with_constraints(constraints)), want);
    }

    /// One constraint's attribute and the errors it gets.
    #[rstest]
    #[case::no_domain(
        json!({"matchAttribute": "model"}),
        &[r#"spec.devices.constraints[0].matchAttribute: Invalid value: "model": a fully qualified name must be a domain and a name separated by a slash"#]
    )]
    #[case::empty_domain(
        json!({"distinctAttribute": "/model"}),
        &[r#"spec.devices.constraints[0].distinctAttribute: Invalid value: "": the domain must not be empty"#]
    )]
    #[case::empty_name(
        json!({"matchAttribute": "example.com/"}),
        &[r#"spec.devices.constraints[0].matchAttribute: Invalid value: "": the name must not be empty"#]
    )]
    #[case::not_a_c_identifier(
        json!({"matchAttribute": "example.com/1x"}),
        &[r#"spec.devices.constraints[0].matchAttribute: Invalid value: "1x": a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')"#]
    )]
    #[case::name_past_32_bytes(
        json!({"matchAttribute": format!("example.com/{}", "x".repeat(33))}),
        &["spec.devices.constraints[0].matchAttribute: Too long: may not be more than 32 bytes"]
    )]
    #[case::neither(
        json!({}),
        &[r#"spec.devices.constraints[0]: Required value: exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set"#]
    )]
    fn constraint_attributes_are_fully_qualified(#[case] attribute: Value, #[case] want: &[&str]) {
        assert_eq!(check(with_constraints(json!([attribute]))), want);
    }

    /// Two slashes: 1.36 and 1.37 leave them unjudged, 1.38 rejects them
    /// (SPEC-k8s-1.38.md rule 1).
    #[rstest]
    fn constraint_attributes_with_two_slashes_from_138(#[values("matchAttribute", "distinctAttribute")] field: &str) {
        let spec = with_constraints(json!([{field: "a/b/c"}]));
        for kube in [KubeVersion::V1_36, KubeVersion::V1_37] {
            assert_eq!(
                check_under(spec.clone(), ClaimVersion::V1, kube),
                Vec::<String>::new(),
                "{kube}"
            );
        }
        assert_eq!(
            check_under(spec, ClaimVersion::V1, KubeVersion::V1_38),
            vec![format!(
                r#"spec.devices.constraints[0].{field}: Invalid value: "a/b/c": must not contain more than one slash"#
            )]
        );
    }

    fn with_config(config: Value) -> Value {
        json!({"devices": {"requests": [exactly("a", json!({}))], "config": config}})
    }

    #[test]
    fn opaque_configuration() {
        let ok = json!([{"requests": ["a"], "opaque": {"driver": "gpu.example.com", "parameters": {"x": 1}}}]);
        assert!(check(with_config(ok)).is_empty());
        assert_eq!(
            check(with_config(json!([{}]))),
            vec!["spec.devices.config[0].opaque: Required value"]
        );
        assert_eq!(
            check(with_config(json!([{"opaque": {"driver": "d.example.com"}}]))),
            vec!["spec.devices.config[0].opaque.parameters: Required value"]
        );
        assert_eq!(
            check(with_config(
                json!([{"opaque": {"driver": "d.example.com", "parameters": null}}])
            )),
            vec!["spec.devices.config[0].opaque.parameters: Required value"]
        );
        assert_eq!(
            check(with_config(
                json!([{"opaque": {"driver": "d.example.com", "parameters": [1]}}])
            )),
            vec![
                r#"spec.devices.config[0].opaque.parameters: Invalid value: "<value omitted>": must be a valid JSON object"#
            ]
        );
        // `{"x":"…"}` is the value and 8 bytes: 10240 bytes in all pass, one more does not.
        let sized = |n: usize| json!([{"opaque": {"driver": "d.example.com", "parameters": {"x": "y".repeat(n)}}}]);
        assert!(check(with_config(sized(10232))).is_empty());
        assert_eq!(
            check(with_config(sized(10233))),
            vec!["spec.devices.config[0].opaque.parameters: Too long: may not be more than 10240 bytes"]
        );
        let big = json!([{"opaque": {"driver": "d.example.com", "parameters": {"x": "y".repeat(10240)}}}]);
        assert_eq!(
            check(with_config(big)),
            vec!["spec.devices.config[0].opaque.parameters: Too long: may not be more than 10240 bytes"]
        );
        let errs = check(with_config(json!([{"opaque": {"driver": "", "parameters": {}}}])));
        assert_eq!(errs[0], "spec.devices.config[0].opaque.driver: Required value");
        // Upper case passes: the driver name is checked lower-cased.
        assert!(
            check(with_config(
                json!([{"opaque": {"driver": "GPU.example.com", "parameters": {}}}])
            ))
            .is_empty()
        );
        let long = format!("{}.com", "d".repeat(60));
        assert_eq!(
            check(with_config(json!([{"opaque": {"driver": long, "parameters": {}}}]))),
            vec!["spec.devices.config[0].opaque.driver: Too long: may not be more than 63 bytes"]
        );
        let many: Vec<Value> = (0..33)
            .map(|_| json!({"opaque": {"driver": "d.example.com", "parameters": {}}}))
            .collect();
        assert_eq!(
            check(with_config(json!(many))),
            vec!["spec.devices.config: Too many: 33: must have at most 32 items"]
        );
    }

    #[test]
    fn tolerations_in_every_subrequest() {
        let spec = requests(json!([{"name": "a", "firstAvailable": [sub("x"), {
            "name": "y", "deviceClassName": "c", "tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]
        }]}]));
        assert_eq!(
            check(spec),
            vec![
                r#"spec.devices.requests[0].firstAvailable[1].tolerations[0].value: Invalid value: "v": must be empty for operator `Exists`"#
            ]
        );
        let seventeen: Vec<Value> = (0..17)
            .map(|i| json!({"key": format!("k{i}"), "operator": "Exists"}))
            .collect();
        assert_eq!(
            check(requests(json!([exactly("a", json!({"tolerations": seventeen}))]))),
            vec!["spec.devices.requests[0].exactly.tolerations: Too many: 17: must have at most 16 items"]
        );
        // The operator defaults to Equal.
        assert!(
            check(requests(json!([exactly(
                "a",
                json!({"tolerations": [{"key": "k", "value": "v"}]})
            )])))
            .is_empty()
        );
    }

    #[test]
    fn admin_access_needs_the_namespace_label() {
        let spec = ClaimSpec::decode(
            &requests(json!([
                exactly("a", json!({})),
                exactly("b", json!({"adminAccess": true}))
            ])),
            ClaimVersion::V1,
        )
        .expect("spec");
        let labelled: BTreeMap<String, String> = [(ADMIN_ACCESS_NAMESPACE_LABEL.to_owned(), "true".to_owned())].into();
        assert!(validate_admin_access(&spec, Some(&labelled)).is_empty());
        assert!(
            validate_admin_access(&spec, None).is_empty(),
            "unknown namespace: nothing to say"
        );
        let errs: Vec<String> = validate_admin_access(&spec, Some(&BTreeMap::new()))
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            errs,
            vec![
                "spec.devices.requests[1].adminAccess: Forbidden: admin access to devices requires the `resource.kubernetes.io/admin-access: true` label on the containing namespace"
            ]
        );
    }

    fn update(new: Value, old: Value) -> Vec<String> {
        let new = ClaimSpec::decode(&new, ClaimVersion::V1).expect("spec");
        let old = ClaimSpec::decode(&old, ClaimVersion::V1).expect("old spec");
        validate_claim_spec_update(
            &new,
            &old,
            ClaimVersion::V1,
            KubeVersion::NEWEST,
            &Path::new("spec"),
            &CompileBudget::default(),
        )
        .iter()
        .map(ToString::to_string)
        .collect()
    }

    #[test]
    fn allocation_mode_ratchets_by_request_name() {
        let mode = |name: &str, m: &str| {
            requests(json!([{"name": name, "exactly": {"deviceClassName": "c", "allocationMode": m}}]))
        };
        assert!(
            update(mode("a", "Future"), mode("a", "Future")).is_empty(),
            "unchanged unknown value stays"
        );
        assert_eq!(
            update(mode("a", "Bogus"), mode("a", "Future")),
            vec![
                r#"spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Bogus": supported values: "All", "ExactCount""#
            ]
        );
        assert_eq!(
            update(mode("b", "Future"), mode("a", "Future")).len(),
            1,
            "another request: judged as new"
        );
        assert!(
            update(mode("a", "All"), mode("a", "Future")).is_empty(),
            "changed to a known value"
        );
        let sub = |m: &str| {
            requests(
                json!([{"name": "a", "firstAvailable": [{"name": "s", "deviceClassName": "c", "allocationMode": m}]}]),
            )
        };
        assert!(update(sub("Future"), sub("Future")).is_empty());
        assert_eq!(update(sub("Bogus"), sub("Future")).len(), 1);
    }

    #[test]
    fn device_toleration_enums_ratchet() {
        let tol = |op: &str, effect: &str| {
            requests(json!([exactly(
                "a",
                json!({"tolerations": [{"key": "k", "operator": op, "effect": effect}]})
            )]))
        };
        assert!(update(tol("Future", "Later"), tol("Future", "Later")).is_empty());
        assert_eq!(
            update(tol("Future", "Bogus"), tol("Future", "Later")),
            vec![
                r#"spec.devices.requests[0].exactly.tolerations[0].operator: Unsupported value: "Future": supported values: "Equal", "Exists""#,
                r#"spec.devices.requests[0].exactly.tolerations[0].effect: Unsupported value: "Bogus": supported values: "NoExecute", "NoSchedule", "None""#,
            ]
        );
        assert!(update(tol("Exists", "NoSchedule"), tol("Future", "Later")).is_empty());
    }
}
