//! ResourceClaim and ResourceClaimTemplate specs: `validateDeviceClaim` and
//! everything below it in `pkg/apis/resource/validation/validation.go`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::field::{FieldError, Path};
use crate::objects::claim::{
    ALLOCATION_MODE_ALL, ALLOCATION_MODE_EXACT_COUNT, ClaimSpec, DeviceClaim, DeviceClaimConfiguration,
    DeviceConstraint, DeviceRequest, DeviceSelector, DeviceSubRequest, ExactDeviceRequest,
    OpaqueDeviceConfiguration,
};
use crate::rules::tolerations::validate_device_tolerations;
use crate::rules::{cel, invalid_each, names, validate_set, validate_slice};

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
pub fn validate_claim_spec(spec: &ClaimSpec, path: &Path) -> Vec<FieldError> {
    validate_device_claim(&spec.devices, &path.child("devices"))
}

fn validate_device_claim(claim: &DeviceClaim, path: &Path) -> Vec<FieldError> {
    let names = RequestNames::gather(claim);
    let mut errs = validate_set(
        &claim.requests,
        DEVICE_REQUESTS_MAX,
        &path.child("requests"),
        validate_device_request,
        |r| r.name.clone(),
    );
    errs.extend(validate_slice(
        &claim.constraints,
        DEVICE_CONSTRAINTS_MAX,
        &path.child("constraints"),
        |c, p| validate_constraint(c, p, &names),
    ));
    errs.extend(validate_slice(
        &claim.config,
        DEVICE_CONFIG_MAX,
        &path.child("config"),
        |c, p| validate_claim_config(c, p, &names),
    ));
    errs
}

/// Request names and, for `firstAvailable` requests, their subrequest names.
struct RequestNames(BTreeMap<String, Option<BTreeSet<String>>>);

impl RequestNames {
    fn gather(claim: &DeviceClaim) -> Self {
        let mut names = BTreeMap::new();
        for r in &claim.requests {
            let subs = if r.first_available.is_empty() {
                None
            } else {
                Some(r.first_available.iter().map(|s| s.name.clone()).collect())
            };
            names.insert(r.name.clone(), subs);
        }
        RequestNames(names)
    }

    /// `requestNames.Has`: `main` matches any request, `main/sub` only a
    /// subrequest of a `firstAvailable` request.
    fn has(&self, reference: &str) -> bool {
        let segments: Vec<&str> = reference.split('/').collect();
        match segments.as_slice() {
            [request] => self.0.contains_key(*request),
            [request, sub] => matches!(self.0.get(*request), Some(Some(subs)) if subs.contains(*sub)),
            _ => false,
        }
    }
}

fn validate_request_name(name: &str, path: &Path) -> Vec<FieldError> {
    invalid_each(path, name, names::dns1123_label(name))
}

fn validate_device_request(request: &DeviceRequest, path: &Path) -> Vec<FieldError> {
    let mut errs = validate_request_name(&request.name, &path.child("name"));
    let has_first_available = !request.first_available.is_empty();
    match (&request.exactly, has_first_available) {
        (None, false) => errs.push(FieldError::required(
            path.clone(),
            "exactly one of `exactly` or `firstAvailable` is required",
        )),
        (Some(_), true) => errs.push(FieldError::invalid(
            path.clone(),
            crate::field::BadValue::Null,
            "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set",
        )),
        (None, true) => errs.extend(validate_set(
            &request.first_available,
            FIRST_AVAILABLE_MAX,
            &path.child("firstAvailable"),
            validate_subrequest,
            |s| s.name.clone(),
        )),
        (Some(exactly), false) => errs.extend(validate_exact_request(exactly, &path.child("exactly"))),
    }
    errs
}

fn validate_exact_request(request: &ExactDeviceRequest, path: &Path) -> Vec<FieldError> {
    let mut errs = validate_device_class(&request.device_class_name, &path.child("deviceClassName"));
    errs.extend(validate_selectors(&request.selectors, &path.child("selectors")));
    errs.extend(validate_allocation_mode(&request.allocation_mode, request.count, path));
    errs.extend(validate_device_tolerations(&request.tolerations, &path.child("tolerations")));
    errs
}

fn validate_subrequest(sub: &DeviceSubRequest, path: &Path) -> Vec<FieldError> {
    let mut errs = validate_request_name(&sub.name, &path.child("name"));
    errs.extend(validate_device_class(&sub.device_class_name, &path.child("deviceClassName")));
    errs.extend(validate_selectors(&sub.selectors, &path.child("selectors")));
    errs.extend(validate_allocation_mode(&sub.allocation_mode, sub.count, path));
    errs.extend(validate_device_tolerations(&sub.tolerations, &path.child("tolerations")));
    errs
}

fn validate_device_class(name: &str, path: &Path) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required(path.clone(), "")];
    }
    invalid_each(path, name, names::dns1123_subdomain(name))
}

fn validate_selectors(selectors: &[DeviceSelector], path: &Path) -> Vec<FieldError> {
    validate_slice(selectors, DEVICE_SELECTORS_MAX, path, |s, p| match &s.cel {
        None => vec![FieldError::required(p.child("cel"), "")],
        Some(c) => cel::validate_expression(&c.expression, &p.child("cel").child("expression")),
    })
}

/// `validateDeviceAllocationMode`, after defaulting.
fn validate_allocation_mode(mode: &str, count: i64, path: &Path) -> Vec<FieldError> {
    match mode {
        ALLOCATION_MODE_ALL if count != 0 => vec![FieldError::invalid(
            path.child("count"),
            count,
            "must not be specified when allocationMode is 'All'",
        )],
        ALLOCATION_MODE_EXACT_COUNT if count <= 0 => {
            vec![FieldError::invalid(path.child("count"), count, "must be greater than zero")]
        }
        ALLOCATION_MODE_ALL | ALLOCATION_MODE_EXACT_COUNT => Vec::new(),
        other => vec![FieldError::not_supported(
            path.child("allocationMode"),
            other,
            &[ALLOCATION_MODE_ALL, ALLOCATION_MODE_EXACT_COUNT],
        )],
    }
}

fn validate_constraint(c: &DeviceConstraint, path: &Path, names: &RequestNames) -> Vec<FieldError> {
    let mut errs = validate_request_refs(&c.requests, &path.child("requests"), names);
    if let Some(attr) = &c.match_attribute {
        errs.extend(validate_fully_qualified_name(attr, &path.child("matchAttribute")));
    } else if let Some(attr) = &c.distinct_attribute {
        errs.extend(validate_fully_qualified_name(attr, &path.child("distinctAttribute")));
    } else {
        // The message is the apiserver's, "multiple" included (DRAConsumableCapacity on).
        errs.push(FieldError::required(
            path.clone(),
            "exactly one of \"matchAttribute\" or \"distinctAttribute\" is required, but multiple fields are set",
        ));
    }
    errs
}

fn validate_claim_config(c: &DeviceClaimConfiguration, path: &Path, names: &RequestNames) -> Vec<FieldError> {
    let mut errs = validate_request_refs(&c.requests, &path.child("requests"), names);
    match &c.opaque {
        None => errs.push(FieldError::required(path.child("opaque"), "")),
        Some(opaque) => errs.extend(validate_opaque(opaque, &path.child("opaque"))),
    }
    errs
}

fn validate_request_refs(refs: &[String], path: &Path, names: &RequestNames) -> Vec<FieldError> {
    validate_set(
        refs,
        DEVICE_REQUESTS_MAX,
        path,
        |r, p| validate_request_ref(r, p, names),
        Clone::clone,
    )
}

/// `validateRequestNameRef`.
fn validate_request_ref(reference: &str, path: &Path, names: &RequestNames) -> Vec<FieldError> {
    let segments: Vec<&str> = reference.split('/').collect();
    if segments.len() > 2 {
        return vec![FieldError::invalid(path.clone(), reference, REQUEST_REF_MESSAGE)];
    }
    let mut errs: Vec<FieldError> = segments.iter().flat_map(|s| validate_request_name(s, path)).collect();
    if !names.has(reference) {
        errs.push(FieldError::invalid(path.clone(), reference, REQUEST_REF_MESSAGE));
    }
    errs
}

fn validate_opaque(opaque: &OpaqueDeviceConfiguration, path: &Path) -> Vec<FieldError> {
    let mut errs = validate_driver_name(&opaque.driver, &path.child("driver"));
    errs.extend(validate_raw_parameters(opaque.parameters.as_ref(), &path.child("parameters")));
    errs
}

/// `validateRawExtension` on create: present, at most 10 KiB, a JSON object.
fn validate_raw_parameters(parameters: Option<&Value>, path: &Path) -> Vec<FieldError> {
    let Some(value) = parameters else {
        return vec![FieldError::required(path.clone(), "")];
    };
    // The apiserver measures the raw bytes it received; a webhook sees the
    // object re-encoded, so the compact encoding is the closest measure.
    let size = serde_json::to_vec(value).map(|v| v.len()).unwrap_or(usize::MAX);
    if size > OPAQUE_PARAMETERS_MAX {
        return vec![FieldError::too_long(path.clone(), OPAQUE_PARAMETERS_MAX)];
    }
    if !value.is_object() {
        return vec![FieldError::invalid(path.clone(), "<value omitted>", "must be a valid JSON object")];
    }
    Vec::new()
}

/// `corevalidation.ValidateCSIDriverName`: checked lower-cased, so upper
/// case passes.
pub fn validate_driver_name(name: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push(FieldError::required(path.clone(), ""));
    }
    if name.len() > DRIVER_NAME_MAX {
        errs.push(FieldError::too_long(path.clone(), DRIVER_NAME_MAX));
    }
    errs.extend(invalid_each(path, name, names::dns1123_subdomain(&name.to_lowercase())));
    errs
}

/// `validateFullyQualifiedName`: `domain/id`.
pub fn validate_fully_qualified_name(name: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = validate_qualified_name(name, path);
    if !name.contains('/') {
        errs.push(FieldError::invalid(
            path.clone(),
            name,
            "a fully qualified name must be a domain and a name separated by a slash",
        ));
    }
    errs
}

/// `validateQualifiedName`: an optional domain and a C identifier.
pub fn validate_qualified_name(name: &str, path: &Path) -> Vec<FieldError> {
    let parts: Vec<&str> = name.split('/').collect();
    match parts.as_slice() {
        [id] => validate_c_identifier(id, path),
        [domain, id] => {
            let mut errs = Vec::new();
            if domain.is_empty() {
                errs.push(FieldError::invalid(path.clone(), "", "the domain must not be empty"));
            } else {
                errs.extend(validate_driver_name(domain, path));
            }
            if id.is_empty() {
                errs.push(FieldError::invalid(path.clone(), "", "the name must not be empty"));
            } else {
                errs.extend(validate_c_identifier(id, path));
            }
            errs
        }
        _ => vec![FieldError::invalid(path.clone(), name, "must not contain more than one slash")],
    }
}

fn validate_c_identifier(id: &str, path: &Path) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if id.len() > DEVICE_MAX_ID_LENGTH {
        errs.push(FieldError::too_long(path.clone(), DEVICE_MAX_ID_LENGTH));
    }
    errs.extend(invalid_each(path, id, names::c_identifier(id)));
    errs
}

/// `AuthorizedForAdmin` (pkg/registry/resource/utils.go): the first request
/// asking for admin access needs the namespace label. `labels` is `None`
/// when the namespace is unknown, in which case nothing can be said.
pub fn validate_admin_access(
    spec: &ClaimSpec,
    requests_path: &Path,
    labels: Option<&BTreeMap<String, String>>,
) -> Vec<FieldError> {
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
        requests_path.index(i).child("exactly").child("adminAccess"),
        format!("admin access to devices requires the `{ADMIN_ACCESS_NAMESPACE_LABEL}: true` label on the containing namespace"),
    )]
}
