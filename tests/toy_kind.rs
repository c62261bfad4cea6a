//! The toy kind (draguard-core's src/kinds/toy.rs, on with the `toy-kind`
//! feature for tests) proves that a kind is one file plus one registry
//! line: the registry routes it, the webhook validates it, and `check`
//! maps its findings to YAML positions, with nothing else added.

use serde_json::json;

use draguard::admission::Incoming;
use draguard::check::{Options, Source, check};
use draguard::review::Engine;
use draguard::verdict::Phase;
use draguard::view::NoCluster;

fn now() -> jiff::Timestamp {
    "2026-11-21T10:00:00Z".parse().expect("time")
}

#[test]
fn routed_by_the_registry() {
    let routed = draguard::review::registry::route("toy.draguard.dev", "v1", "Widget").expect("routed");
    assert_eq!((routed.row.plural, routed.version), ("widgets", "v1"));
    assert!(draguard::review::registry::route("toy.draguard.dev", "v2", "Widget").is_none());
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
    let policies = draguard::policy::PolicySet::default();
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
