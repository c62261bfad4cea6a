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

    #[test]
    fn labels_are_checked() {
        let mut m = meta("a", "ns");
        m.labels = Some([("a/b/c".to_string(), "-x".to_string())].into());
        let errs = validate_object_meta(&m, true, &Path::new("metadata"));
        assert_eq!(errs.len(), 2);
        assert!(errs.iter().all(|e| e.field.as_str() == "metadata.labels"));
    }
}
