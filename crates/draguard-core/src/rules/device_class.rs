//! DeviceClass: `ValidateDeviceClass`, `ValidateDeviceClassUpdate` and
//! `validateDeviceClassSpec` in kubernetes pkg/apis/resource/validation/validation.go,
//! read at commit 009801d9 (the newest the index holds; the v1.36.0 tag
//! itself could not be fetched, the repository is 1.9 GB), with the
//! declarative tags of k8s.io/api resource/v1/types.go at v0.36.0 (alpha,
//! shadow only) and HEAD 10b39a39 (`+k8s:beta(since: "1.37")`, enforced).
//!
//! The apiserver's registry (pkg/registry/resource/deviceclass/strategy.go,
//! the versions the index holds) validates an UPDATE as
//! `ValidateDeviceClass(new)` followed by `ValidateDeviceClassUpdate(new,
//! old)`. So the stored-object rules of the second half (unchanged
//! selectors are not compiled again, unchanged parameters keep a size over
//! today's limit) never make an update pass that the first half, which
//! judges the new object as if created, refuses: they only spare the second
//! half's repeats. draguard follows that for 1.37 on
//! ([`validate_device_class_update`]). The real kube-apiserver v1.36.2
//! lists each spec cause of an UPDATE once, after `ValidateObjectMetaUpdate`'s
//! causes, with nothing stored spared: 1.36 judges the spec of an UPDATE as
//! if created ([`validate_device_class_spec`]; `kinds::device_class`).

use crate::field::{At, FieldError, Path};
use crate::objects::claim::{DeviceClaimConfiguration, DeviceSelector};
use crate::objects::device_class::DeviceClassSpec;
use crate::rules::cel::CompileBudget;
use crate::rules::claim::{
    DEVICE_CONFIG_MAX, DEVICE_SELECTORS_MAX, DRIVER_NAME_MAX, validate_driver_name, validate_raw_parameters,
};
use crate::rules::{cel, declare_list, invalid_each, names, validate_slice};

/// `v1helper.IsExtendedResourceName` says no (1.36, and 1.37+ where
/// declarative validation finds nothing to say instead).
pub const NOT_AN_EXTENDED_RESOURCE_NAME: &str = "must be a valid extended resource name";

/// `corev1.ResourceDefaultNamespacePrefix`: names in it are native.
const DEFAULT_NAMESPACE_PREFIX: &str = "kubernetes.io/";
/// `corev1.DefaultResourceRequestsPrefix`: the quota key prefix.
const REQUESTS_PREFIX: &str = "requests.";

/// How the spec of one DeviceClass is judged.
#[derive(Clone, Copy)]
pub struct Judged<'a> {
    /// Whether declarative validation is enforced (1.37 and later): the
    /// configs' drivers and the extended resource name are then reported
    /// in its words.
    pub declarative: bool,
    pub cel: &'a CompileBudget<'a>,
}

/// `ValidateDeviceClass`'s spec half on CREATE: `validateDeviceClassSpec(spec, nil)`.
pub fn validate_device_class_spec(spec: &DeviceClassSpec, path: &Path, judged: Judged<'_>) -> Vec<FieldError> {
    validate_spec(spec, None, path, judged)
}

/// The spec errors of an UPDATE, as the strategy collects them: the new
/// spec judged as if created, then judged against the stored one.
pub fn validate_device_class_update(
    spec: &DeviceClassSpec,
    old: &DeviceClassSpec,
    path: &Path,
    judged: Judged<'_>,
) -> (Vec<FieldError>, Vec<FieldError>) {
    (
        validate_spec(spec, None, path, judged),
        validate_spec(spec, Some(old), path, judged),
    )
}

/// `validateDeviceClassSpec`: selectors, configs, then the extended
/// resource name. A list equal to the stored one is "stored"
/// (`apiequality.Semantic.DeepEqual`; any change, a reordering too, makes
/// the whole list new).
fn validate_spec(
    spec: &DeviceClassSpec,
    old: Option<&DeviceClassSpec>,
    path: &Path,
    judged: Judged<'_>,
) -> Vec<FieldError> {
    let at: At<'_> = path.into();
    let selectors_stored = old.is_some_and(|o| o.selectors == spec.selectors);
    let selectors = at.field("selectors");
    let mut errs = validate_slice(&spec.selectors, DEVICE_SELECTORS_MAX, selectors, |s, p| {
        validate_selector(s, p, selectors_stored, judged.cel)
    });
    declare_list(&mut errs, selectors, None);
    let configs_stored = old.is_some_and(|o| o.config == spec.config);
    let config = at.field("config");
    let mut config_errs = validate_slice(&spec.config, DEVICE_CONFIG_MAX, config, |c, p| {
        validate_class_config(c, p, configs_stored, judged.declarative)
    });
    declare_list(&mut config_errs, config, None);
    errs.extend(config_errs);
    if let Some(name) = &spec.extended_resource_name {
        errs.extend(validate_extended_resource_name(
            name,
            at.field("extendedResourceName"),
            judged.declarative,
        ));
    }
    errs
}

/// `validateSelector` and `validateCELExpression`: a stored expression is
/// not judged at all ("it must have been valid at the time it was
/// stored"), not even for its length. The compile is the claims' own
/// (`rules::cel`), charged to the request's budget.
fn validate_selector(selector: &DeviceSelector, path: At<'_>, stored: bool, budget: &CompileBudget) -> Vec<FieldError> {
    match &selector.cel {
        None => vec![FieldError::required(path.child("cel"), "")],
        Some(_) if stored => Vec::new(),
        Some(c) => cel::validate_expression(&c.expression, path.field("cel").field("expression"), budget),
    }
}

/// `validateDeviceClassConfiguration` → `validateDeviceConfiguration` →
/// `validateOpaqueConfiguration`.
fn validate_class_config(
    config: &DeviceClaimConfiguration,
    path: At<'_>,
    stored: bool,
    declarative: bool,
) -> Vec<FieldError> {
    let Some(opaque) = &config.opaque else {
        return vec![FieldError::required(path.child("opaque"), "")];
    };
    let opaque_path = path.field("opaque");
    let mut errs = validate_class_driver(&opaque.driver, opaque_path.field("driver"), declarative);
    errs.extend(validate_raw_parameters(
        opaque.parameters.as_ref(),
        opaque_path.field("parameters"),
        stored,
    ));
    errs
}

/// `opaque.driver`: `ValidateCSIDriverName` (Required, TooLong, then the
/// format of the lower-cased name), all three marked covered by
/// declarative validation (`RequiredCovered`, `FormatCovered`,
/// `SizeCovered`). Where that is enforced (1.37 on) its own errors stand in
/// their place: `+k8s:required`, which stops there, then
/// `+k8s:format=k8s-long-name-caseless` and `+k8s:maxLength=63` (in
/// characters), in that
/// order (k8s.io/api resource/v1/zz_generated.validations.go, HEAD
/// 10b39a39, `Validate_OpaqueDeviceConfiguration`).
fn validate_class_driver(driver: &str, path: At<'_>, declarative: bool) -> Vec<FieldError> {
    if !declarative {
        return validate_driver_name(driver, path);
    }
    if driver.is_empty() {
        return vec![FieldError::required(path, "").declared()];
    }
    let mut errs: Vec<FieldError> = invalid_each(path, driver, names::dns1123_subdomain_caseless(driver))
        .into_iter()
        .map(FieldError::declared)
        .collect();
    // `validate.MaxLength` counts characters and says so.
    if driver.len() > DRIVER_NAME_MAX && driver.chars().count() > DRIVER_NAME_MAX {
        errs.push(FieldError::too_long_characters(path, DRIVER_NAME_MAX).declared());
    }
    errs
}

/// `spec.extendedResourceName`. Hand-written, `v1helper.IsExtendedResourceName`
/// gives one error (kubernetes pkg/apis/core/v1/helper/helpers.go); it is
/// covered by declarative validation, which from 1.37 on reports
/// `validate.ExtendedResourceName`'s errors instead (apimachinery
/// pkg/api/validate/strfmt.go, HEAD eed236ce). Where the two disagree and
/// only the hand-written rule objects, its error stays.
pub fn validate_extended_resource_name(name: &str, path: At<'_>, declarative: bool) -> Vec<FieldError> {
    if is_extended_resource_name(name) {
        return Vec::new();
    }
    if declarative {
        let found = declared_extended_resource_name(name);
        if !found.is_empty() {
            let path = path.path();
            return found
                .into_iter()
                .map(|m| FieldError::invalid(path.clone(), name, m).declared())
                .collect();
        }
    }
    vec![FieldError::invalid(path, name, NOT_AN_EXTENDED_RESOURCE_NAME)]
}

/// `v1helper.IsExtendedResourceName`: not native (it has a `/` and no
/// `kubernetes.io/`), no `requests.` prefix, and `requests.<name>` is a
/// qualified name.
pub fn is_extended_resource_name(name: &str) -> bool {
    let native = !name.contains('/') || name.contains(DEFAULT_NAMESPACE_PREFIX);
    if native || name.starts_with(REQUESTS_PREFIX) {
        return false;
    }
    names::label_key(&format!("{REQUESTS_PREFIX}{name}")).is_empty()
}

/// The messages of `validate.ExtendedResourceName`, in its order.
fn declared_extended_resource_name(name: &str) -> Vec<String> {
    let mut messages = Vec::new();
    if !name.contains('/') {
        messages.push("a name must be a domain-prefixed path, such as 'example.com/my-prop'".to_owned());
    } else if name.contains(DEFAULT_NAMESPACE_PREFIX) {
        messages.push(format!("must not have {DEFAULT_NAMESPACE_PREFIX:?} domain"));
    }
    if name.starts_with(REQUESTS_PREFIX) {
        messages.push(format!("must not have {REQUESTS_PREFIX:?} prefix"));
    }
    messages.extend(names::label_key(&format!("{REQUESTS_PREFIX}{name}")));
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::{Value, json};

    const EMPTY_DRIVER: &str = "spec.config[0].opaque.driver: Invalid value: \"\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const CASELESS: &str = "an RFC 1123 subdomain must consist of alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'Example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    /// The real apiserver's answer (v1.36.2) for the selector `foo`.
    const UNDECLARED: &str =
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo\n | ^";

    /// A class the apiserver admits: one selector, one config.
    fn valid() -> Value {
        json!({
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
            "config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"kind": "GpuConfig"}}}],
            "extendedResourceName": "example.com/gpu"
        })
    }

    /// `valid()` with `at` (a JSON pointer) set to `value`, or removed when null.
    fn with(at: &str, value: Value) -> Value {
        let mut spec = valid();
        let (parent, key) = at.rsplit_once('/').expect("pointer");
        let parent = spec.pointer_mut(parent).expect("parent");
        match (parent, value) {
            (Value::Object(map), Value::Null) => {
                map.remove(key);
            }
            (Value::Object(map), value) => {
                map.insert(key.to_owned(), value);
            }
            (Value::Array(list), value) => list[key.parse::<usize>().expect("index")] = value,
            _ => panic!("no place for {at}"),
        }
        spec
    }

    fn spec(value: Value) -> DeviceClassSpec {
        serde_json::from_value(value).expect("decodable spec")
    }

    fn judge(value: Value, declarative: bool) -> Vec<String> {
        let budget = CompileBudget::default();
        let judged = Judged {
            declarative,
            cel: &budget,
        };
        validate_device_class_spec(&spec(value), &Path::new("spec"), judged)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn many(n: usize, item: Value) -> Value {
        Value::Array(vec![item; n])
    }

    #[test]
    fn a_valid_class_has_no_errors() {
        assert_eq!(judge(valid(), false), Vec::<String>::new());
        assert_eq!(judge(json!({}), false), Vec::<String>::new());
        let selector = json!({"cel": {"expression": "true"}});
        assert_eq!(
            judge(with("/selectors", many(32, selector)), false),
            Vec::<String>::new()
        );
    }

    /// One change to a valid class, the apiserver's error for it (1.36:
    /// hand-written validation is the answer).
    #[rstest]
    #[case::selector_without_cel(with("/selectors/0", json!({})), &["spec.selectors[0].cel: Required value"])]
    #[case::selector_does_not_compile(
        with("/selectors/0", json!({"cel": {"expression": "foo == 1"}})),
        &["spec.selectors[0].cel.expression: Invalid value: \"foo == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^"]
    )]
    #[case::selector_too_long(
        with("/selectors/0", json!({"cel": {"expression": format!("'{}' == ''", "a".repeat(10 * 1024))}})),
        &["spec.selectors[0].cel.expression: Too long: may not be more than 10240 bytes"]
    )]
    #[case::too_many_selectors(
        with("/selectors", many(33, json!({"cel": {"expression": "foo"}}))),
        &["spec.selectors: Too many: 33: must have at most 32 items"]
    )]
    #[case::config_without_opaque(with("/config/0", json!({})), &["spec.config[0].opaque: Required value"])]
    #[case::driver_missing(
        with("/config/0/opaque/driver", Value::Null),
        // `ValidateCSIDriverName` goes on to the format of the empty name.
        &["spec.config[0].opaque.driver: Required value", EMPTY_DRIVER]
    )]
    #[case::driver_not_a_subdomain(
        with("/config/0/opaque/driver", json!("gpu_example")),
        &["spec.config[0].opaque.driver: Invalid value: \"gpu_example\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]
    )]
    #[case::driver_upper_case_passes(with("/config/0/opaque/driver", json!("GPU.example.com")), &[])]
    #[case::driver_too_long(
        with("/config/0/opaque/driver", json!(format!("{}.com", "a".repeat(60)))),
        &["spec.config[0].opaque.driver: Too long: may not be more than 63 bytes"]
    )]
    #[case::parameters_missing(
        with("/config/0/opaque/parameters", Value::Null),
        &["spec.config[0].opaque.parameters: Required value"]
    )]
    #[case::parameters_not_an_object(
        with("/config/0/opaque/parameters", json!([1])),
        &["spec.config[0].opaque.parameters: Invalid value: \"<value omitted>\": must be a valid JSON object"]
    )]
    #[case::parameters_too_big(
        with("/config/0/opaque/parameters", json!({"a": "x".repeat(10 * 1024)})),
        &["spec.config[0].opaque.parameters: Too long: may not be more than 10240 bytes"]
    )]
    #[case::too_many_configs(
        with("/config", many(33, json!({}))),
        &["spec.config: Too many: 33: must have at most 32 items"]
    )]
    #[case::extended_resource_name_native(
        with("/extendedResourceName", json!("gpu")),
        &["spec.extendedResourceName: Invalid value: \"gpu\": must be a valid extended resource name"]
    )]
    #[case::extended_resource_name_kubernetes_io(
        with("/extendedResourceName", json!("example.kubernetes.io/gpu")),
        &["spec.extendedResourceName: Invalid value: \"example.kubernetes.io/gpu\": must be a valid extended resource name"]
    )]
    #[case::extended_resource_name_quota_prefix(
        with("/extendedResourceName", json!("requests.example.com/gpu")),
        &["spec.extendedResourceName: Invalid value: \"requests.example.com/gpu\": must be a valid extended resource name"]
    )]
    fn one_change_denied_as_the_apiserver_does(#[case] spec: Value, #[case] want: &[&str]) {
        assert_eq!(judge(spec, false), want);
    }

    /// The apiserver's order: selectors, configs, the extended resource
    /// name; within a config its driver, then its parameters.
    #[test]
    fn causes_come_in_the_apiservers_order() {
        let spec = json!({
            "extendedResourceName": "gpu",
            "config": [{"opaque": {"driver": "", "parameters": [1]}}],
            "selectors": [{"cel": {"expression": "foo"}}, {}]
        });
        let fields: Vec<String> = judge(spec, false)
            .iter()
            .map(|e| e.split(": ").next().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(
            fields,
            [
                "spec.selectors[0].cel.expression",
                "spec.selectors[1].cel",
                "spec.config[0].opaque.driver",
                "spec.config[0].opaque.driver",
                "spec.config[0].opaque.parameters",
                "spec.extendedResourceName"
            ]
        );
    }

    /// From 1.37 declarative validation reports the extended resource name
    /// in `validate.ExtendedResourceName`'s words, marked to go last.
    #[rstest]
    #[case::no_domain("gpu", &["a name must be a domain-prefixed path, such as 'example.com/my-prop'"])]
    #[case::kubernetes_io("example.kubernetes.io/gpu", &["must not have \"kubernetes.io/\" domain"])]
    #[case::quota_prefix("requests.example.com/gpu", &["must not have \"requests.\" prefix"])]
    #[case::bad_name("example.com/gpu!", &[
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    ])]
    fn extended_resource_name_in_declarative_words(#[case] name: &str, #[case] want: &[&str]) {
        let path = Path::new("spec").child("extendedResourceName");
        let errs = validate_extended_resource_name(name, (&path).into(), true);
        let got: Vec<(&str, bool)> = errs.iter().map(|e| (e.detail.as_str(), e.declared.is_some())).collect();
        let want: Vec<(&str, bool)> = want.iter().map(|m| (*m, true)).collect();
        assert_eq!(got, want);
        assert!(validate_extended_resource_name("example.com/gpu", (&path).into(), true).is_empty());
    }

    /// From 1.37 a config's driver is judged by declarative validation:
    /// required stops there, then the caseless format, then the length.
    #[rstest]
    #[case::missing("", &["Required value"])]
    #[case::upper_case("GPU.example.com", &[])]
    #[case::not_a_subdomain("gpu_example", &[CASELESS])]
    #[case::too_long(&format!("{}.com", "a".repeat(60)), &["Too long: may not be more than 63 characters"])]
    #[case::both(&format!("{}_.com", "a".repeat(60)), &[CASELESS, "Too long: may not be more than 63 characters"])]
    #[case::long_in_bytes_only(&format!("{}.com", "é".repeat(40)), &[CASELESS])]
    fn driver_in_declarative_words(#[case] driver: &str, #[case] want: &[&str]) {
        let path = Path::new("spec")
            .child("config")
            .index(0)
            .child("opaque")
            .child("driver");
        let errs = validate_class_driver(driver, (&path).into(), true);
        let got: Vec<(String, bool)> = errs.iter().map(|e| (e.body(), e.declared.is_some())).collect();
        let want: Vec<(String, bool)> = want
            .iter()
            .map(|m| {
                let body = if *m == CASELESS {
                    format!("Invalid value: {driver:?}: {CASELESS}")
                } else {
                    (*m).to_owned()
                };
                (body, true)
            })
            .collect();
        assert_eq!(got, want);
    }

    /// On UPDATE the half judged against the stored class skips what is
    /// stored: unchanged selectors are not compiled, unchanged parameters
    /// keep their size. The half judged as if created does not.
    #[test]
    fn stored_selectors_and_parameters_ratchet_in_the_update_half_only() {
        let old = with("/selectors/0", json!({"cel": {"expression": "foo"}}));
        let old = {
            let mut o = old;
            o["config"][0]["opaque"]["parameters"] = json!({"a": "x".repeat(10 * 1024)});
            o
        };
        let budget = CompileBudget::default();
        let judged = Judged {
            declarative: false,
            cel: &budget,
        };
        let texts = |errs: Vec<FieldError>| errs.iter().map(ToString::to_string).collect::<Vec<_>>();
        let (as_created, against_old) =
            validate_device_class_update(&spec(old.clone()), &spec(old.clone()), &Path::new("spec"), judged);
        assert_eq!(
            texts(as_created),
            [
                format!("spec.selectors[0].cel.expression: Invalid value: \"foo\": {UNDECLARED}"),
                "spec.config[0].opaque.parameters: Too long: may not be more than 10240 bytes".to_owned()
            ]
        );
        assert_eq!(texts(against_old), Vec::<String>::new());
        // A reordered (or any other changed) list is new again.
        let mut changed = old.clone();
        changed["selectors"] = json!([{"cel": {"expression": "true"}}, {"cel": {"expression": "foo"}}]);
        let (_, against_old) = validate_device_class_update(&spec(changed), &spec(old), &Path::new("spec"), judged);
        assert_eq!(
            texts(against_old),
            [format!(
                "spec.selectors[1].cel.expression: Invalid value: \"foo\": {UNDECLARED}"
            )]
        );
    }

    #[test]
    fn extended_resource_names() {
        for good in ["example.com/gpu", "a.b/c-d_e.f"] {
            assert!(is_extended_resource_name(good), "{good}");
        }
        for bad in [
            "gpu",
            "kubernetes.io/gpu",
            "a.kubernetes.io/x",
            "requests.a.com/x",
            "a.com/",
            "a.com/b/c",
        ] {
            assert!(!is_extended_resource_name(bad), "{bad}");
        }
    }
}
