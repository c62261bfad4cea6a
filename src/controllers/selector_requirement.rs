//! A label selector requirement as the selector controllers reason about
//! it (`claims_selector`, `mutate_selector_entries`): `matchLabels` become
//! `In`, values a set, so that equal selectors compare equal; and its
//! `LabelSelectorRequirement` for the entries they write.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

use crate::policy::model::SelectorOperator;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Requirement {
    pub key: String,
    pub operator: SelectorOperator,
    pub values: BTreeSet<String>,
}

impl Requirement {
    /// As a namespaceSelector states it, `values` left out when there are
    /// none (`Exists`, `DoesNotExist`).
    pub fn to_k8s(&self) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: self.key.clone(),
            operator: self.operator.as_str().to_owned(),
            values: (!self.values.is_empty()).then(|| self.values.iter().cloned().collect()),
        }
    }
}
