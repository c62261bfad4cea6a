//! The parts of Pods and Nodes draguard judges, through k8s-openapi's core
//! types (which decode leniently: a missing required field is its zero).

use k8s_openapi::api::core::v1::{PodResourceClaim, ResourceRequirements, Taint, Toleration, TopologySpreadConstraint};
use serde::Deserialize;
use serde_json::Value;

use super::{DecodeError, nullable};

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSpecView {
    #[serde(deserialize_with = "nullable")]
    pub tolerations: Vec<Toleration>,
    #[serde(deserialize_with = "nullable")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    #[serde(deserialize_with = "nullable")]
    pub resource_claims: Vec<PodResourceClaim>,
    #[serde(deserialize_with = "nullable")]
    pub containers: Vec<ContainerView>,
    #[serde(deserialize_with = "nullable")]
    pub init_containers: Vec<ContainerView>,
    pub resources: Option<ResourceRequirements>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ContainerView {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    pub resources: Option<ResourceRequirements>,
}

impl PodSpecView {
    pub fn decode(spec: &Value) -> Result<Self, DecodeError> {
        super::decode(spec)
    }
}

/// The part of a Node's spec draguard judges.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NodeSpecView {
    #[serde(deserialize_with = "nullable")]
    pub taints: Vec<Taint>,
}

/// `spec.taints` of a Node.
pub fn node_taints(spec: &Value) -> Result<Vec<Taint>, DecodeError> {
    super::decode::<NodeSpecView>(spec).map(|n| n.taints)
}
