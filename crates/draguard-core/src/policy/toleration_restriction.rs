//! PodTolerationRestriction compatibility (behind a flag): the in-tree
//! plugin's namespace annotations and cluster configuration as an extra
//! policy source, so a cluster can move from the plugin to draguard
//! without changing behaviour (plugin/pkg/admission/podtolerationrestriction).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::cover::covers;
use super::model::Toleration;
use crate::objects::pod::{ContainerView, PodSpecView};

pub const DEFAULT_TOLERATIONS: &str = "scheduler.alpha.kubernetes.io/defaultTolerations";
pub const TOLERATIONS_WHITELIST: &str = "scheduler.alpha.kubernetes.io/tolerationsWhitelist";
pub const CONFLICT: &str =
    "pod tolerations (possibly merged with namespace default tolerations) conflict with its namespace whitelist";

/// The plugin's cluster configuration
/// (`podtolerationrestriction.admission.k8s.io/v1alpha1` or `v1`, kind `Configuration`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TolerationRestrictionConfig {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub default: Vec<Toleration>,
    #[serde(default)]
    pub whitelist: Vec<Toleration>,
}

impl TolerationRestrictionConfig {
    /// Parses the text of the plugin's configuration file (YAML or JSON)
    /// read from `path` (`policy_files::toleration_restriction` reads it).
    pub fn parse(path: &Path, text: &str) -> Result<Self, TolerationRestrictionConfigError> {
        serde_saphyr::from_str(text).map_err(|source| TolerationRestrictionConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })
    }
}

/// Why the plugin's configuration file cannot be used; the tool does not
/// start rather than run without the configuration it was given.
#[derive(Debug, thiserror::Error)]
pub enum TolerationRestrictionConfigError {
    #[error("{}: cannot read: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The source excerpt is left out: the message is one line, the path
    /// and line:column say where. Boxed: the parser's error is large and
    /// this path is cold.
    #[error("{}: {}", path.display(), source.without_snippet())]
    Parse {
        path: PathBuf,
        source: Box<serde_saphyr::Error>,
    },
}

/// Why PodTolerationRestriction refuses a Pod, or cannot judge it.
#[derive(Debug, thiserror::Error)]
pub enum TolerationRestrictionError {
    /// The namespace's `defaultTolerations` or `tolerationsWhitelist`
    /// annotation does not parse, as the plugin refuses the Pod then.
    #[error("namespace annotation {key} is not a list of tolerations: {source}")]
    Annotation {
        key: &'static str,
        source: serde_json::Error,
    },
    /// A toleration is covered by no whitelist entry.
    #[error("{CONFLICT}")]
    Conflict,
}

/// `extractNSTolerations`: no annotation means "use the cluster
/// configuration"; an empty annotation means "none".
pub fn namespace_tolerations(
    annotations: Option<&BTreeMap<String, String>>,
    key: &'static str,
) -> Result<Option<Vec<Toleration>>, TolerationRestrictionError> {
    let Some(text) = annotations.and_then(|a| a.get(key)) else {
        return Ok(None);
    };
    if text.is_empty() {
        return Ok(Some(Vec::new()));
    }
    serde_json::from_str::<Vec<Toleration>>(text)
        .map(Some)
        .map_err(|source| TolerationRestrictionError::Annotation { key, source })
}

/// `MergeTolerations`: `first` then `second`, dropping every toleration
/// covered by one already kept or by a later, different one.
pub fn merge(first: &[Toleration], second: &[Toleration]) -> Vec<Toleration> {
    let all: Vec<&Toleration> = first.iter().chain(second).collect();
    let mut merged: Vec<Toleration> = Vec::new();
    for (i, t) in all.iter().enumerate() {
        if merged.iter().any(|m| covers(m, t)) {
            continue;
        }
        if all[i + 1..].iter().any(|later| later != t && covers(later, t)) {
            continue;
        }
        merged.push((*t).clone());
    }
    merged
}

fn memory_pressure() -> Toleration {
    Toleration {
        key: "node.kubernetes.io/memory-pressure".into(),
        operator: "Exists".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }
}

/// A BestEffort pod sets no cpu or memory request or limit anywhere.
fn best_effort(spec: &PodSpecView) -> bool {
    let sets_compute = |c: &ContainerView| {
        c.resources.as_ref().is_some_and(|r| {
            [&r.requests, &r.limits].into_iter().flatten().any(|m| {
                m.iter().any(|(name, q)| {
                    (name == "cpu" || name == "memory") && !q.0.trim_start_matches(['0', '.']).is_empty()
                })
            })
        })
    };
    !spec.containers.iter().chain(&spec.init_containers).any(sets_compute)
}

/// `Admit` on CREATE: the pod's tolerations merged with the namespace's (or
/// the cluster's) defaults and, for pods that are not BestEffort, the
/// memory-pressure toleration. `None` when nothing changes.
pub fn admit(
    spec: &PodSpecView,
    tolerations: &[Toleration],
    annotations: Option<&BTreeMap<String, String>>,
    config: &TolerationRestrictionConfig,
) -> Result<Option<Vec<Toleration>>, TolerationRestrictionError> {
    let mut extra = namespace_tolerations(annotations, DEFAULT_TOLERATIONS)?.unwrap_or_else(|| config.default.clone());
    if !best_effort(spec) {
        extra.push(memory_pressure());
    }
    if extra.is_empty() {
        return Ok(None);
    }
    let merged = merge(tolerations, &extra);
    Ok((merged != tolerations).then_some(merged))
}

/// `Validate`: with a non-empty whitelist (the namespace's, else the
/// cluster's), every toleration must be covered by an entry.
pub fn verify(
    tolerations: &[Toleration],
    annotations: Option<&BTreeMap<String, String>>,
    config: &TolerationRestrictionConfig,
) -> Result<(), TolerationRestrictionError> {
    if tolerations.is_empty() {
        return Ok(());
    }
    let whitelist =
        namespace_tolerations(annotations, TOLERATIONS_WHITELIST)?.unwrap_or_else(|| config.whitelist.clone());
    if whitelist.is_empty() || tolerations.iter().all(|t| whitelist.iter().any(|w| covers(w, t))) {
        Ok(())
    } else {
        Err(TolerationRestrictionError::Conflict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(key: &str, value: &str) -> Toleration {
        Toleration {
            key: key.into(),
            operator: "Equal".into(),
            value: value.into(),
            effect: "NoSchedule".into(),
            toleration_seconds: None,
        }
    }

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn pod(resources: serde_json::Value) -> PodSpecView {
        PodSpecView::decode(&json!({"containers": [{"name": "c", "resources": resources}]})).expect("pod")
    }

    #[test]
    fn annotations_override_the_cluster_config() {
        let config = TolerationRestrictionConfig {
            default: vec![t("testKey", "testValue")],
            ..Default::default()
        };
        let merged = admit(&pod(json!({})), &[], None, &config).expect("ok");
        assert_eq!(
            merged,
            Some(vec![t("testKey", "testValue")]),
            "no annotation: the cluster default"
        );
        let none = annotations(&[(DEFAULT_TOLERATIONS, "[]")]);
        assert_eq!(
            admit(&pod(json!({})), &[], Some(&none), &config).expect("ok"),
            None,
            "[] suppresses the default"
        );
        let empty = annotations(&[(DEFAULT_TOLERATIONS, "")]);
        assert_eq!(
            admit(&pod(json!({})), &[], Some(&empty), &config).expect("ok"),
            None,
            "\"\" too"
        );
        let bad = annotations(&[(DEFAULT_TOLERATIONS, "{")]);
        assert!(matches!(
            admit(&pod(json!({})), &[], Some(&bad), &config),
            Err(TolerationRestrictionError::Annotation {
                key: DEFAULT_TOLERATIONS,
                ..
            })
        ));
    }

    #[test]
    fn a_bad_whitelist_annotation_is_an_error_not_a_pass() {
        let bad = annotations(&[(TOLERATIONS_WHITELIST, r#"{"key": "k"}"#)]);
        assert!(matches!(
            verify(&[t("k", "v")], Some(&bad), &TolerationRestrictionConfig::default()),
            Err(TolerationRestrictionError::Annotation {
                key: TOLERATIONS_WHITELIST,
                ..
            })
        ));
    }

    #[test]
    fn ptr_error_messages() {
        let not_a_list = annotations(&[(DEFAULT_TOLERATIONS, "{")]);
        let cases = [
            (
                admit(
                    &pod(json!({})),
                    &[],
                    Some(&not_a_list),
                    &TolerationRestrictionConfig::default(),
                )
                .map(drop),
                "namespace annotation scheduler.alpha.kubernetes.io/defaultTolerations is not a list of tolerations: invalid type: map, expected a sequence at line 1 column 0",
            ),
            (
                verify(
                    &[t("x", "y")],
                    None,
                    &TolerationRestrictionConfig {
                        whitelist: vec![t("a", "b")],
                        ..Default::default()
                    },
                ),
                CONFLICT,
            ),
        ];
        for (result, message) in cases {
            assert_eq!(result.expect_err("refused").to_string(), message);
        }
    }

    #[test]
    fn memory_pressure_for_pods_that_are_not_best_effort() {
        let burstable = pod(json!({"requests": {"cpu": "500m"}}));
        assert_eq!(
            admit(&burstable, &[], None, &TolerationRestrictionConfig::default()).expect("ok"),
            Some(vec![memory_pressure()])
        );
        assert_eq!(
            admit(&pod(json!({})), &[], None, &TolerationRestrictionConfig::default()).expect("ok"),
            None
        );
        assert_eq!(
            admit(
                &pod(json!({"limits": {"example.com/gpu": "1"}})),
                &[],
                None,
                &TolerationRestrictionConfig::default()
            )
            .expect("ok"),
            None
        );
    }

    #[test]
    fn merge_keeps_distinct_and_drops_covered() {
        assert_eq!(
            merge(&[t("k", "a")], &[t("k", "b")]),
            vec![t("k", "a"), t("k", "b")],
            "same key, both kept"
        );
        assert_eq!(
            merge(&[t("k", "a")], &[t("k", "a")]),
            vec![t("k", "a")],
            "equal: the first"
        );
        let all = Toleration {
            key: "k".into(),
            operator: "Exists".into(),
            ..Default::default()
        };
        assert_eq!(
            merge(&[t("k", "a")], std::slice::from_ref(&all)),
            vec![all.clone()],
            "covered by a later one"
        );
    }

    #[test]
    fn whitelist() {
        let wl = annotations(&[(
            TOLERATIONS_WHITELIST,
            r#"[{"key": "testKey", "operator": "Equal", "value": "testValue", "effect": "NoSchedule"}]"#,
        )]);
        assert!(
            verify(
                &[t("testKey", "testValue")],
                Some(&wl),
                &TolerationRestrictionConfig::default()
            )
            .is_ok()
        );
        assert!(matches!(
            verify(
                &[t("testKey", "other")],
                Some(&wl),
                &TolerationRestrictionConfig::default()
            ),
            Err(TolerationRestrictionError::Conflict)
        ));
        assert!(
            verify(&[], Some(&wl), &TolerationRestrictionConfig::default()).is_ok(),
            "no tolerations: nothing to check"
        );
        let config = TolerationRestrictionConfig {
            whitelist: vec![t("a", "b")],
            ..Default::default()
        };
        assert!(
            verify(&[t("x", "y")], None, &config).is_err(),
            "the cluster whitelist when the namespace has none"
        );
        let open = annotations(&[(TOLERATIONS_WHITELIST, "[]")]);
        assert!(
            verify(&[t("x", "y")], Some(&open), &config).is_ok(),
            "an empty namespace whitelist overrides"
        );
    }
}
