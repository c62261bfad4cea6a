//! The control plane itself: the apiserver is v1.36.2, and each identity
//! the scenarios write as is who the apiserver thinks it is.

use crate::Outcome;
use crate::cluster::{Cluster, OPERATOR};

pub fn control_plane(cluster: &mut Cluster) -> Outcome {
    let version: serde_json::Value =
        serde_json::from_str(&cluster.admin.ok(&["get", "--raw=/version"])).expect("/version is JSON");
    assert_eq!(version["gitVersion"], "v1.36.2", "{version}");

    let who = |k: &crate::kubectl::Kubectl| {
        let review: serde_json::Value =
            serde_json::from_str(&k.ok(&["auth", "whoami", "-o", "json"])).expect("SelfSubjectReview JSON");
        let user = &review["status"]["userInfo"];
        (
            user["username"].as_str().unwrap_or_default().to_owned(),
            user["groups"].clone(),
        )
    };
    let (admin, groups) = who(&cluster.admin);
    assert_eq!(admin, "kubernetes-admin");
    assert!(
        groups
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g == "system:masters")),
        "{groups}"
    );
    let (kubelet, groups) = who(&cluster.kubelet());
    assert_eq!(kubelet, format!("system:node:{}", crate::pki::NODE));
    assert!(
        groups.as_array().is_some_and(|g| g.iter().any(|g| g == "system:nodes")),
        "{groups}"
    );
    let (operator, groups) = who(&cluster.operator());
    assert_eq!(operator, OPERATOR);
    assert!(
        !groups
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g == "system:masters")),
        "{groups}"
    );
    Outcome::Passed
}
