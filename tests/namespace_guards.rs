//! `namespaceGuards`: who may add, change or remove the Namespace labels
//! and annotations that grant privilege, judged on the AdmissionReview's
//! `userInfo` through the whole review, as `/validate` answers it.

mod support {
    pub mod context;
}

use draguard::admission::Incoming;
use draguard::policy::PolicySet;
use draguard::view::StaticView;
use serde_json::{Value, json};
use support::context::{validate, verdict};

const GUARDS: &str = r#"
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata: {name: namespace-guards}
spec:
  exempt: {users: [break-glass]}
  namespaceGuards:
    allow:
      groups: [platform-admins]
      serviceAccounts: [flux-system/kustomize-controller]
    annotations: [example.com/cost-center]
"#;

fn policies(yaml: &str) -> PolicySet {
    PolicySet {
        policies: draguard::policy::load::parse("guards.yaml", yaml).expect("valid policy"),
        ..Default::default()
    }
}

/// An AdmissionReview of a Namespace write by `user` in `groups`: a
/// CREATE of `labels`/`annotations`, or an UPDATE from `old` when given.
fn namespace_write(user: &str, groups: &[&str], new: Value, old: Option<Value>) -> Vec<u8> {
    let ns = |metadata: Value| {
        let mut metadata = metadata;
        metadata["name"] = json!("ml");
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": metadata})
    };
    let mut request = json!({
        "uid": "u1",
        "kind": {"group": "", "version": "v1", "kind": "Namespace"},
        "resource": {"group": "", "version": "v1", "resource": "namespaces"},
        "name": "ml", "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
        "userInfo": {"username": user, "groups": groups},
        "object": ns(new),
    });
    if let Some(old) = old {
        request["oldObject"] = ns(old);
    }
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        .expect("json")
}

const AUTHENTICATED: &str = "system:authenticated";

#[test]
fn only_the_allowed_may_add_the_admin_access_label() {
    let view = StaticView::default();
    let policies = policies(GUARDS);
    let ctx = validate(&view, &policies, Default::default());
    let admin_label = json!({"labels": {"team": "ml", "resource.kubernetes.io/admin-access": "true"}});
    let plain = json!({"labels": {"team": "ml"}});

    let bob = namespace_write("bob", &["dev", AUTHENTICATED], admin_label.clone(), Some(plain.clone()));
    assert_eq!(
        verdict(&ctx, &bob),
        Err("namespaces \"ml\" is forbidden: toleration policy \"namespace-guards\": label resource.kubernetes.io/admin-access may be added only by groups [platform-admins] or service accounts [flux-system/kustomize-controller]; bob (groups [dev, system:authenticated]) may not".to_owned())
    );
    let (_, response) = Incoming::parse(&bob).expect("review").answer(&ctx);
    assert_eq!(
        response["response"]["status"]["details"]["causes"][0]["field"],
        "metadata.labels[resource.kubernetes.io/admin-access]"
    );

    // The same on CREATE: a new Namespace cannot be born privileged.
    assert!(
        verdict(
            &ctx,
            &namespace_write("bob", &[AUTHENTICATED], admin_label.clone(), None)
        )
        .is_err()
    );

    for (who, groups) in [
        ("carol", vec!["platform-admins", AUTHENTICATED]),
        (
            "system:serviceaccount:flux-system:kustomize-controller",
            vec![AUTHENTICATED],
        ),
        ("break-glass", vec![AUTHENTICATED]),
    ] {
        let write = namespace_write(who, &groups, admin_label.clone(), Some(plain.clone()));
        assert_eq!(verdict(&ctx, &write), Ok(()), "{who} may");
    }
}

#[test]
fn writes_that_leave_the_guarded_keys_alone_are_admitted_whoever_sends_them() {
    let view = StaticView::default();
    let policies = policies(GUARDS);
    let ctx = validate(&view, &policies, Default::default());
    let guarded = json!({
        "labels": {"team": "ml", "resource.kubernetes.io/admin-access": "true"},
        "annotations": {"scheduler.alpha.kubernetes.io/tolerationsWhitelist": "[]"}
    });
    let mut relabelled = guarded.clone();
    relabelled["labels"]["team"] = json!("research");
    relabelled["annotations"]["owner"] = json!("bob");
    for (name, new, old) in [
        ("a plain create", json!({"labels": {"team": "ml"}}), None),
        ("another label and annotation", relabelled, Some(guarded.clone())),
        ("no change at all", guarded.clone(), Some(guarded)),
    ] {
        let write = namespace_write("bob", &[AUTHENTICATED], new, old);
        assert_eq!(verdict(&ctx, &write), Ok(()), "{name}");
    }
}

#[test]
fn every_guarded_key_a_write_touches_is_named() {
    let view = StaticView::default();
    let policies = policies(GUARDS);
    let ctx = validate(&view, &policies, Default::default());
    let old = json!({
        "labels": {"draguard.dev/ignore": "false"},
        "annotations": {"scheduler.alpha.kubernetes.io/defaultTolerations": "[]", "example.com/cost-center": "a"}
    });
    let new = json!({
        "labels": {"draguard.dev/ignore": "true"},
        "annotations": {"example.com/cost-center": "b"}
    });
    let (decision, response) = Incoming::parse(&namespace_write("bob", &[], new, Some(old)))
        .expect("review")
        .answer(&ctx);
    assert!(!decision.allowed);
    let causes: Vec<(&str, &str)> = response["response"]["status"]["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .map(|c| (c["field"].as_str().unwrap_or(""), c["message"].as_str().unwrap_or("")))
        .collect();
    let rest = "only by groups [platform-admins] or service accounts [flux-system/kustomize-controller]; bob may not";
    assert_eq!(
        causes,
        [
            (
                "metadata.labels[draguard.dev/ignore]",
                format!("toleration policy \"namespace-guards\": label draguard.dev/ignore may be changed {rest}").as_str()
            ),
            (
                "metadata.annotations[scheduler.alpha.kubernetes.io/defaultTolerations]",
                format!("toleration policy \"namespace-guards\": annotation scheduler.alpha.kubernetes.io/defaultTolerations may be removed {rest}").as_str()
            ),
            (
                "metadata.annotations[example.com/cost-center]",
                format!("toleration policy \"namespace-guards\": annotation example.com/cost-center may be changed {rest}").as_str()
            ),
        ]
    );
}

#[test]
fn a_warn_mode_guard_admits_with_the_reason() {
    let view = StaticView::default();
    let policies = policies(&GUARDS.replace("spec:\n", "spec:\n  mode: Warn\n"));
    let ctx = validate(&view, &policies, Default::default());
    let write = namespace_write(
        "bob",
        &[],
        json!({"labels": {"resource.kubernetes.io/admin-access": "true"}}),
        None,
    );
    let (decision, _) = Incoming::parse(&write).expect("review").answer(&ctx);
    assert!(decision.allowed);
    assert_eq!(
        decision.warning_texts(),
        [
            "toleration policy \"namespace-guards\": label resource.kubernetes.io/admin-access may be added only by groups [platform-admins] or service accounts [flux-system/kustomize-controller]; bob may not"
        ]
    );
}

#[test]
fn without_guards_a_namespace_is_not_judged() {
    let view = StaticView::default();
    let none = PolicySet::default();
    let ctx = validate(&view, &none, Default::default());
    let write = namespace_write(
        "bob",
        &[],
        json!({"labels": {"resource.kubernetes.io/admin-access": "true"}}),
        None,
    );
    assert_eq!(verdict(&ctx, &write), Ok(()));
}

#[test]
fn a_policy_that_selects_namespaces_may_not_hold_guards() {
    let yaml = GUARDS.replace("spec:\n", "spec:\n  namespaces: {names: [team-*]}\n");
    let errors = draguard::policy::load::parse("guards.yaml", &yaml).expect_err("refused");
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "guards.yaml:8:3: namespaceGuards guard every Namespace, but this policy selects namespaces (spec.namespaces.names or selector), so it never applies to a Namespace; put the guards in a policy that selects none"
        ]
    );
    let bad_key = GUARDS.replace("[example.com/cost-center]", "[\"example.com/a b\"]");
    let errors = draguard::policy::load::parse("guards.yaml", &bad_key).expect_err("refused");
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(text.len(), 1, "{text:?}");
    assert!(
        text[0].starts_with("guards.yaml:11:19: \"example.com/a b\" is not a valid annotation key: "),
        "{text:?}"
    );
}

/// `namespaces/status` and `namespaces/finalize` store the request's
/// labels and annotations too, so a guard judges them as it judges the
/// Namespace itself; other kinds' subresource writes stay unjudged.
#[test]
fn guards_hold_on_every_namespace_subresource() {
    let view = StaticView::default();
    let policies = policies(GUARDS);
    let ctx = validate(&view, &policies, Default::default());
    let admin_label = json!({"labels": {"resource.kubernetes.io/admin-access": "true"}});
    let plain = json!({"labels": {"team": "ml"}});
    let through = |sub: &str, user: &str, groups: &[&str], new: &Value, old: &Value| {
        let review = namespace_write(user, groups, new.clone(), Some(old.clone()));
        let mut review: Value = serde_json::from_slice(&review).expect("json");
        review["request"]["subResource"] = json!(sub);
        serde_json::to_vec(&review).expect("json")
    };
    for sub in ["status", "finalize"] {
        assert_eq!(
            verdict(&ctx, &through(sub, "bob", &[AUTHENTICATED], &admin_label, &plain)),
            Err("namespaces \"ml\" is forbidden: toleration policy \"namespace-guards\": label resource.kubernetes.io/admin-access may be added only by groups [platform-admins] or service accounts [flux-system/kustomize-controller]; bob (groups [system:authenticated]) may not".to_owned()),
            "namespaces/{sub}"
        );
        assert_eq!(
            verdict(&ctx, &through(sub, "carol", &["platform-admins"], &admin_label, &plain)),
            Ok(()),
            "namespaces/{sub} by an allowed group"
        );
        // The namespace controller's status and finalize writes touch no
        // guarded key.
        assert_eq!(
            verdict(
                &ctx,
                &through(
                    sub,
                    "system:serviceaccount:kube-system:namespace-controller",
                    &[],
                    &admin_label,
                    &admin_label
                )
            ),
            Ok(()),
            "namespaces/{sub} that keeps the keys"
        );
    }
}

/// An apiserver always names the requester; a request to `serve` that
/// names nobody cannot be one a guard allows, whatever its groups.
#[test]
fn a_request_without_a_username_may_not_touch_a_guarded_key() {
    let view = StaticView::default();
    let policies = policies(GUARDS);
    let ctx = validate(&view, &policies, Default::default());
    let admin_label = json!({"labels": {"resource.kubernetes.io/admin-access": "true"}});
    let plain = json!({"labels": {"team": "ml"}});
    for username in [None, Some("")] {
        let mut write: Value = serde_json::from_slice(&namespace_write(
            "",
            &["platform-admins"],
            admin_label.clone(),
            Some(plain.clone()),
        ))
        .expect("json");
        write["request"]["userInfo"]["username"] = json!(username);
        if username.is_none() {
            write["request"]["userInfo"]
                .as_object_mut()
                .expect("userInfo")
                .remove("username");
        }
        assert_eq!(
            verdict(&ctx, &serde_json::to_vec(&write).expect("json")),
            Err("namespaces \"ml\" is forbidden: toleration policy \"namespace-guards\": label resource.kubernetes.io/admin-access may be added only by groups [platform-admins] or service accounts [flux-system/kustomize-controller]; a request that names no user may not".to_owned()),
            "username {username:?}"
        );
    }
    // A write that touches no guarded key is admitted, named or not.
    let mut relabel: Value =
        serde_json::from_slice(&namespace_write("", &[], json!({"labels": {"team": "b"}}), Some(plain))).expect("json");
    relabel["request"]["userInfo"] = json!({});
    assert_eq!(verdict(&ctx, &serde_json::to_vec(&relabel).expect("json")), Ok(()));
}
