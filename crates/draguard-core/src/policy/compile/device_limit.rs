//! draguard's limit of 16 device tolerations per request list
//! (`rules::tolerations::DEVICE_TOLERATIONS_MAX`, SPEC.md §3), in CEL,
//! inside a namespace's compiled Enforce devices policy: the one check the
//! webhook makes on a new claim or template that neither the apiserver
//! (kube-apiserver v1.36.2 admits a request of 5,000 tolerations) nor the
//! drivers' configs cover.
//!
//! The webhook (`rules::claim::validate_device_claim`) walks request by
//! request, each request's `exactly` list, then each `firstAvailable`
//! subrequest's, and `rules::validate_slice` answers a list past the limit
//! with `field.TooMany` only: `PATH: Too many: N: must have at most 16
//! items`. The path is the internal (v1) one in every served version (the
//! hand-written validation runs on the internal object: a v1beta1 request's
//! list is `requests[i].exactly.tolerations` there too), and the compiled
//! policy sees every version's claim as v1 (`matchPolicy: Equivalent`), so
//! one expression serves v1, v1beta1 and v1beta2. The message is the first
//! list past the limit, as the webhook's first error.

use super::cel::string as lit;
use super::objects::list_at;
use crate::rules::tolerations::DEVICE_TOLERATIONS_MAX;

/// `list` (CEL) holds more than the limit.
fn over(list: &str) -> String {
    format!("size({list}) > {DEVICE_TOLERATIONS_MAX}")
}

/// `FieldError::too_many(path, size(list), 16)` as the webhook renders it,
/// with `path` a CEL string expression.
pub fn too_many_text(path: &str, list: &str) -> String {
    format!(
        "{path} + ': Too many: ' + string(size({list})) + {}",
        lit(&format!(": must have at most {DEVICE_TOLERATIONS_MAX} items"))
    )
}

/// The claim spec at `spec` has a list past the limit (CEL).
pub fn past_the_limit(spec: &[&str]) -> String {
    let mut requests_path = spec.to_vec();
    requests_path.extend(["devices", "requests"]);
    let requests = list_at("object", &requests_path);
    format!("{requests}.exists(r, {})", request_over())
}

/// The request `r` has a list past the limit (CEL).
fn request_over() -> String {
    let exactly = list_at("r", &["exactly", "tolerations"]);
    let subs = list_at("r", &["firstAvailable"]);
    let sub = list_at("s", &["tolerations"]);
    format!("{} || {subs}.exists(s, {})", over(&exactly), over(&sub))
}

/// The limit's part of the Invalid validation of a claim spec at `spec`
/// (`["spec"]` in a claim, `["spec", "spec"]` in a template): the
/// condition that a list is past it, and the message naming the first
/// such list (CEL; the validation's static message is shared with the
/// configs').
pub fn check(spec: &[&str]) -> (String, String) {
    let mut requests_path = spec.to_vec();
    requests_path.extend(["devices", "requests"]);
    let requests = list_at("object", &requests_path);
    let exactly = list_at("r", &["exactly", "tolerations"]);
    let subs = list_at("r", &["firstAvailable"]);
    let sub = list_at("s", &["tolerations"]);
    let request_over = request_over();
    let base = lit(&format!("{}.devices.requests[", spec.join(".")));
    let exactly_path = format!("{base} + string(i) + '].exactly.tolerations'");
    let sub_path = format!("{base} + string(i) + '].firstAvailable[' + string(k) + '].tolerations'");
    let first_of_request = format!(
        "{} ? {} : {subs}.transformList(k, s, {}, {})[0]",
        over(&exactly),
        too_many_text(&exactly_path, &exactly),
        over(&sub),
        too_many_text(&sub_path, &sub),
    );
    (
        past_the_limit(spec),
        format!("{requests}.transformList(i, r, {request_over}, {first_of_request})[0]"),
    )
}
