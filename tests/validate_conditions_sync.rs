//! The validating entries' managed matchCondition against a fake API
//! server: written into the entries that send what it judges (and no
//! other), `true` while the rules in force are not known to be the
//! apiserver's, narrowed once they are, widened again when they stop
//! being so, and following a policy reload.

mod support {
    pub mod fake_apiserver;
    pub mod within;
}

use std::time::Duration;

use draguard::controllers::validate_conditions::{CONDITION_NAME, Inputs, expression};
use draguard::controllers::validate_conditions_sync::ValidateConditions;
use draguard::controllers::webhook_certs::CertSettings;
use draguard::kubernetes::apiserver_report::{Differences, Mismatch};
use draguard::policy::PolicySet;
use draguard::policy::load::parse;
use draguard::policy_files::reload::PolicyStore;
use serde_json::{Value, json};
use support::fake_apiserver::{FakeApiServer, Objects};
use support::within::within;

const KUBELET: &str = "!request.userInfo.username.startsWith('system:node:')";

fn policies(namespace: &str) -> PolicySet {
    let yaml = format!(
        "apiVersion: policy.draguard.dev/v1alpha1\nkind: TolerationPolicy\nmetadata: {{name: ml}}\nspec:\n  namespaces: {{names: [{namespace}]}}\n  pods:\n    deny: [{{key: dedicated, operator: Exists}}]\n"
    );
    PolicySet {
        policies: parse("ml.yaml", &yaml).expect("valid policy"),
        ..Default::default()
    }
}

/// The ValidatingWebhookConfiguration: someone else's entry, the claims
/// and Pods entry with its static condition, and the DeviceTaintRule entry
/// (which the condition does not judge).
fn objects() -> Objects {
    let service = json!({"service": {"name": "draguard", "namespace": "draguard", "path": "/validate"}});
    let mut objects = Objects::default();
    objects.lists.insert(
        "validatingwebhookconfigurations".into(),
        vec![json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "draguard", "resourceVersion": "5"},
            "webhooks": [
                {"name": "other.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": {"service": {"name": "other", "namespace": "other"}},
                 "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
                {"name": "validate.draguard.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": service.clone(),
                 "matchConditions": [{"name": "not-a-kubelet", "expression": KUBELET}],
                 "rules": [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                            "resources": ["resourceclaims", "resourceclaimtemplates"]},
                           {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
                {"name": "admin.validate.draguard.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                 "clientConfig": service,
                 "rules": [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"], "operations": ["CREATE"],
                            "resources": ["devicetaintrules"]}]},
            ]})],
    );
    objects
}

fn conditions(api: &FakeApiServer, i: usize) -> Value {
    let config = api
        .webhook_config("validatingwebhookconfigurations", "draguard")
        .expect("config");
    config["webhooks"][i]["matchConditions"].clone()
}

fn with_ours(expression: &str) -> Value {
    json!([{"name": "not-a-kubelet", "expression": KUBELET}, {"name": CONDITION_NAME, "expression": expression}])
}

fn rules(same: bool) -> Differences {
    Differences {
        version: Some(!same),
        gates: Some(Vec::new()),
        unknown_gates: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_condition_follows_the_apiservers_rules_and_the_policies() {
    let api = FakeApiServer::start(objects()).await;
    let store = PolicyStore::new(policies("ml"));
    let mismatch = Mismatch::default();
    let settings = CertSettings::new("draguard-tls", "draguard", "draguard", "draguard");
    let controller = ValidateConditions::new(api.client(), settings, store.clone(), false, mismatch.clone(), None);
    let task = tokio::spawn(controller.run());
    let matching = |namespace: &str| {
        expression(
            &policies(namespace),
            Inputs {
                toleration_restriction: false,
                rules_match_apiserver: true,
            },
        )
    };

    // The apiserver's rules not read yet: everything is sent.
    within(Duration::from_secs(5), || conditions(&api, 1) == with_ours("true"))
        .await
        .unwrap_or_else(|| panic!("written at start: {}", conditions(&api, 1)));
    assert_eq!(conditions(&api, 0), Value::Null, "someone else's entry is untouched");
    assert_eq!(
        conditions(&api, 2),
        Value::Null,
        "an entry sent nothing the condition judges is untouched"
    );

    // The rules in force are the apiserver's: narrowed within a second.
    mismatch.set(&rules(true));
    within(Duration::from_secs(5), || {
        conditions(&api, 1) == with_ours(&matching("ml"))
    })
    .await
    .unwrap_or_else(|| panic!("narrowed: {}", conditions(&api, 1)));

    // A reload to other policies: the expression follows.
    store.replace(policies("research"));
    assert_ne!(matching("research"), matching("ml"));
    within(Duration::from_secs(5), || {
        conditions(&api, 1) == with_ours(&matching("research"))
    })
    .await
    .unwrap_or_else(|| panic!("follows the reload: {}", conditions(&api, 1)));

    // The apiserver upgraded under draguard: everything is sent again.
    mismatch.set(&rules(false));
    within(Duration::from_secs(5), || conditions(&api, 1) == with_ours("true"))
        .await
        .unwrap_or_else(|| panic!("widened again: {}", conditions(&api, 1)));
    assert_eq!(api.writes_of("PATCH").len(), 4, "one write per change, no loop");
    task.abort();
}
