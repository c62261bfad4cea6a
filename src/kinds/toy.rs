//! A toy kind, compiled into unit tests only: it proves that a kind is
//! added by one file and one line of [`crate::review::registry::KINDS`], and is then routed,
//! validated and mapped by `check` with nothing else changed.

use serde::Deserialize;

use super::{AdmittedKind, Facts, KindRow, Routed, RuleVerdict, shared};
use crate::field::{FieldError, Path};
use crate::objects::{DecodeError, ObjectJson, Whole};

pub const ROW: KindRow = KindRow::new("toy.draguard.dev", "Widget", &["v1"], "widgets").with_namespaced(true);

pub struct WidgetKind;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct WidgetSpec {
    size: i64,
}

impl AdmittedKind for WidgetKind {
    type View = Whole<WidgetSpec>;

    fn decode(object: &ObjectJson, _: Routed) -> Result<Self::View, DecodeError> {
        object.decode()
    }

    fn validate(new: &Self::View, old: Option<&Self::View>, _: &Facts<'_>) -> RuleVerdict {
        let mut errs = shared::validate_metadata(&new.metadata, old.map(|o| &o.metadata), true);
        if new.spec.size < 0 {
            errs.push(FieldError::invalid(
                Path::new("spec").child("size"),
                new.spec.size,
                "must be greater than or equal to 0",
            ));
        }
        errs.into()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::admission::Incoming;
    use crate::check::{Options, Source, check};
    use crate::review::Engine;
    use crate::verdict::Phase;
    use crate::view::NoCluster;

    fn now() -> jiff::Timestamp {
        "2026-11-21T10:00:00Z".parse().expect("time")
    }

    #[test]
    fn routed_by_the_registry() {
        let routed = crate::review::registry::route("toy.draguard.dev", "v1", "Widget").expect("routed");
        assert_eq!((routed.row.plural, routed.version), ("widgets", "v1"));
        assert!(crate::review::registry::route("toy.draguard.dev", "v2", "Widget").is_none());
    }

    #[test]
    fn validated_by_the_webhook() {
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u1",
                "kind": {"group": "toy.draguard.dev", "version": "v1", "kind": "Widget"},
                "resource": {"group": "toy.draguard.dev", "version": "v1", "resource": "widgets"},
                "name": "w", "namespace": "ml", "operation": "CREATE", "userInfo": {"username": "alice"},
                "object": {"apiVersion": "toy.draguard.dev/v1", "kind": "Widget",
                           "metadata": {"name": "w", "namespace": "ml"}, "spec": {"size": -1}}
            }
        });
        let bytes = serde_json::to_vec(&body).expect("json");
        let policies = crate::policy::PolicySet::default();
        let ctx = Engine::new(&policies, &NoCluster, Default::default()).context(now(), Phase::Validate, None);
        let (decision, response) = Incoming::parse(&bytes).expect("review").answer(&ctx);
        assert_eq!(decision.cause_fields(), vec!["spec.size"]);
        assert_eq!(
            response["response"]["status"]["message"],
            "Widget.toy.draguard.dev \"w\" is invalid: spec.size: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(response["response"]["status"]["code"], 422);
    }

    #[test]
    fn mapped_by_check() {
        let yaml = "apiVersion: toy.draguard.dev/v1\nkind: Widget\nmetadata: {name: w}\nspec:\n  size: -1\n";
        let sources = [Source {
            name: "w.yaml".into(),
            text: yaml.into(),
        }];
        let options = Options {
            namespace: "team-a".into(),
            pod_templates: Vec::new(),
            ..Options::at(now())
        };
        let report = check(&sources, &[], &options, |_, _| {});
        let object = &report.objects[0];
        assert!(!object.allowed);
        // Namespaced, as its row says: it lands in --namespace.
        assert_eq!(object.id.namespace.as_deref(), Some("team-a"));
        let finding = &object.findings[0];
        assert_eq!(finding.field.as_deref(), Some("spec.size"));
        assert_eq!((finding.position.line, finding.position.column), (5, 3));
    }
}
