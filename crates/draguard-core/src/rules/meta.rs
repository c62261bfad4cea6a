//! `ValidateObjectMeta` (k8s.io/apimachinery pkg/api/validation/objectmeta.go):
//! the parts a webhook or a manifest check can get wrong. Owner references,
//! finalizers and managed fields are the apiserver's business.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::field::{At, FieldError};
use crate::rules::{invalid_each, names};

/// `TotalAnnotationSizeLimitB`.
pub const TOTAL_ANNOTATION_SIZE_MAX: usize = 256 * 1024;

/// Name, namespace, labels and annotations of a top-level object whose
/// name is a DNS subdomain.
pub fn validate_object_meta<'p>(meta: &ObjectMeta, namespaced: bool, path: impl Into<At<'p>>) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = Vec::new();
    let generate_name = meta.generate_name.as_deref().unwrap_or("");
    if !generate_name.is_empty() {
        errs.extend(invalid_each(
            path.field("generateName"),
            generate_name,
            names::dns_subdomain_name(generate_name, true),
        ));
    }
    match meta.name.as_deref().unwrap_or("") {
        // A manifest may rely on generateName; the apiserver fills the name
        // in before it validates.
        "" if !generate_name.is_empty() => {}
        "" => errs.push(FieldError::required(
            path.child("name"),
            "name or generateName is required",
        )),
        name => errs.extend(invalid_each(
            path.field("name"),
            name,
            names::dns_subdomain_name(name, false),
        )),
    }
    errs.extend(validate_common(meta, namespaced, path));
    errs
}

/// The longest base the apiserver keeps of a `generateName` before it
/// appends its 5 random characters (k8s.io/apiserver
/// pkg/storage/names/generate.go, `MaxGeneratedNameLength` = 63 - 5).
const GENERATED_NAME_BASE_MAX: usize = 58;

/// `ValidateObjectMetaWithOpts` (apimachinery pkg/api/validation/objectmeta.go,
/// v0.36.0) with `validate.LongName` as the name rule, as
/// `ValidateDeviceClass` calls it (kubernetes pkg/apis/resource/validation/validation.go).
/// Unlike [`validate_object_meta`], `generateName` is not judged itself:
/// the name generated from it is. A manifest in `check` has no generated
/// name yet, so its `generateName` (cut where the apiserver cuts it) is
/// judged at `metadata.name` in its place; the random suffix it would get
/// is lower-case letters and digits and cannot make it wrong. The name's
/// format errors are declarative validation's too
/// (`+k8s:subfield(name)=+k8s:format=k8s-long-name` on the type), so they
/// are marked as such; a missing name is not (`+k8s:optional`).
pub fn validate_object_meta_long_name<'p>(
    meta: &ObjectMeta,
    namespaced: bool,
    path: impl Into<At<'p>>,
) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = Vec::new();
    let generate_name = meta.generate_name.as_deref().unwrap_or("");
    let name = match meta.name.as_deref().unwrap_or("") {
        "" if generate_name.is_empty() => {
            errs.push(FieldError::required(
                path.child("name"),
                "name or generateName is required",
            ));
            None
        }
        // A base ending in `-` is fine: the suffix follows it.
        "" => Some((cut(generate_name, GENERATED_NAME_BASE_MAX), true)),
        name => Some((name, false)),
    };
    if let Some((name, prefix)) = name {
        errs.extend(
            invalid_each(path.field("name"), name, names::dns_subdomain_name(name, prefix))
                .into_iter()
                .map(FieldError::declared),
        );
    }
    errs.extend(validate_common(meta, namespaced, path));
    errs
}

/// `s` cut to at most `max` bytes, on a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `validateObjectMetaAccessorWithOptsCommon`: what follows the name,
/// whichever name rule a kind has.
fn validate_common(meta: &ObjectMeta, namespaced: bool, path: At<'_>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let namespace = meta.namespace.as_deref().unwrap_or("");
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required(path.child("namespace"), ""));
        } else {
            errs.extend(invalid_each(
                path.field("namespace"),
                namespace,
                names::dns1123_label(namespace),
            ));
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden(
            path.child("namespace"),
            "not allowed on this type",
        ));
    }
    errs.extend(validate_labels_and_annotations(meta, path));
    errs
}

/// `ValidateTemplateObjectMeta`: labels and annotations only.
pub fn validate_labels_and_annotations<'p>(meta: &ObjectMeta, path: impl Into<At<'p>>) -> Vec<FieldError> {
    let path = path.into();
    let mut errs = Vec::new();
    if let Some(labels) = &meta.labels {
        let p = path.field("labels");
        for (k, v) in labels {
            errs.extend(invalid_each(p, k, names::label_key(k)));
            errs.extend(invalid_each(p, v, names::label_value(v)));
        }
    }
    if let Some(annotations) = &meta.annotations {
        let p = path.field("annotations");
        let mut total = 0usize;
        for (k, v) in annotations {
            errs.extend(invalid_each(p, k, names::label_key(&names::to_lowercase(k))));
            total = total.saturating_add(k.len()).saturating_add(v.len());
        }
        if total > TOTAL_ANNOTATION_SIZE_MAX {
            errs.push(FieldError::too_long(p, TOTAL_ANNOTATION_SIZE_MAX));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;

    fn meta(name: &str, ns: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        }
    }

    #[test]
    fn name_is_required_unless_generated() {
        let errs = validate_object_meta(&meta("", "ns"), true, &Path::new("metadata"));
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
        let mut generated = meta("", "ns");
        generated.generate_name = Some("claim-".into());
        assert!(validate_object_meta(&generated, true, &Path::new("metadata")).is_empty());
    }

    #[test]
    fn name_must_be_a_subdomain() {
        let errs = validate_object_meta(&meta("Bad_Name", "ns"), true, &Path::new("metadata"));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field.as_str(), "metadata.name");
    }

    #[test]
    fn namespace_required_for_namespaced_kinds() {
        let errs = validate_object_meta(&meta("a", ""), true, &Path::new("metadata"));
        assert_eq!(errs[0].to_string(), "metadata.namespace: Required value");
        assert!(validate_object_meta(&meta("a", ""), false, &Path::new("metadata")).is_empty());
    }

    /// `ValidateObjectMetaWithOpts` judges the name, never `generateName`
    /// itself; a manifest's `generateName` stands in for the name it will
    /// get, and the name's format errors are declarative validation's too.
    #[test]
    fn long_name_meta_judges_the_name_only() {
        let path = Path::new("metadata");
        let mut m = meta("gpu.example.com", "");
        m.generate_name = Some("Bad_".into());
        assert!(validate_object_meta_long_name(&m, false, &path).is_empty());
        m.name = Some("Bad_Name".into());
        let errs = validate_object_meta_long_name(&m, false, &path);
        let got: Vec<(String, bool)> = errs.iter().map(|e| (e.to_string(), e.declared.is_some())).collect();
        assert_eq!(
            got,
            [(
                "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_owned(),
                true
            )]
        );
        m.name = None;
        m.generate_name = Some("gpu-".into());
        assert!(validate_object_meta_long_name(&m, false, &path).is_empty());
        m.generate_name = Some("Gpu-".into());
        assert_eq!(
            validate_object_meta_long_name(&m, false, &path)[0].field.as_str(),
            "metadata.name"
        );
        m.generate_name = None;
        assert_eq!(
            validate_object_meta_long_name(&m, false, &path)[0].to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
        let namespaced = meta("gpu", "ml");
        assert_eq!(
            validate_object_meta_long_name(&namespaced, false, &path)[0].to_string(),
            "metadata.namespace: Forbidden: not allowed on this type"
        );
    }

    #[test]
    fn labels_are_checked() {
        let mut m = meta("a", "ns");
        m.labels = Some([("a/b/c".to_string(), "-x".to_string())].into());
        let errs = validate_object_meta(&m, true, &Path::new("metadata"));
        assert_eq!(errs.len(), 2);
        assert!(errs.iter().all(|e| e.field.as_str() == "metadata.labels"));
    }
}
