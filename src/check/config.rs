//! `.draguard.yaml`: what `draguard check` would otherwise be told with
//! flags, kept with the repository so every run (a laptop, CI) checks the
//! same way. Found upward from the working directory, or named with
//! `--config`. Paths in it are relative to the folder it is in. Flags
//! override single values (`--policies`, `--kubernetes-version`, ...) and
//! add to lists (`--exclude`, `--pod-template`, `--namespace-labels`).
//!
//! ```yaml
//! policies: policies/
//! exclude: [vendor/, "charts/**/tests/"]
//! kubernetesVersion: "1.36"
//! featureGates: DRAExtendedResource=false
//! output: sarif
//! namespace: default
//! render: auto
//! renderTimeout: 60
//! namespaceLabels:
//!   ml: {team: ml}
//! podTemplates:
//!   - kind: Trainer
//!     group: example.com
//!     paths: ["spec.pods.*"]
//!     replicas: ["spec.replicas"]
//! skipKinds: [RayService]
//! skipRules: [quota-exceeded]
//! strict: false
//! strictInputs: false
//! placeholders: ["FILLED BY THE OPERATOR"]
//! tolerationLists:
//!   Flavor.example.com: ["spec.tolerations"]
//! embeddedPodSpecs:
//!   enabled: true
//!   skipKinds: [Chart.example.com]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::embedded_specs::EmbeddedPodSpecs;
use super::pod_templates::{ListRole, Replicas, TemplateKind, TemplatePath, kind_group_of};

/// The file searched for, upward from the working directory.
pub const FILE: &str = ".draguard.yaml";

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckConfig {
    /// The toleration policies folder.
    #[serde(default)]
    pub policies: Option<PathBuf>,
    /// Gitignore-syntax globs, relative to the config's folder.
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub kubernetes_version: Option<String>,
    #[serde(default)]
    pub feature_gates: Option<String>,
    /// `text`, `json`, `sarif` or `junit`.
    #[serde(default)]
    pub output: Option<String>,
    /// The namespace of objects that name none.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Labels of namespaces, for policy selectors.
    #[serde(default)]
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default)]
    pub pod_templates: Vec<PodTemplateConfig>,
    /// Toleration lists outside pod specs, by `KIND.GROUP`: judged as a
    /// Pod's tolerations.
    #[serde(default)]
    pub toleration_lists: BTreeMap<String, Vec<String>>,
    /// Pod specs found by their shape in kinds draguard does not know.
    #[serde(default)]
    pub embedded_pod_specs: Option<EmbeddedPodSpecsConfig>,
    /// Where SARIF URIs are relative to, relative to the config's folder
    /// (default: the repository root, else the working directory).
    #[serde(default, alias = "sarifBase")]
    pub base_dir: Option<PathBuf>,
    /// Kinds not judged (`Kind` or `Kind.group`), as `--skip-kind`.
    #[serde(default)]
    pub skip_kinds: Vec<String>,
    /// Rules whose findings are left out, as `--skip-rule`.
    #[serde(default)]
    pub skip_rules: Vec<String>,
    /// As `--strict`.
    #[serde(default)]
    pub strict: bool,
    /// As `--strict-inputs`.
    #[serde(default)]
    pub strict_inputs: bool,
    /// Texts that mark a value as a placeholder filled in at deploy time
    /// (`FILLED BY THE OPERATOR`), besides `${VAR}`, `{{x}}` and `__X__`:
    /// findings about such values are left out, and counted.
    #[serde(default)]
    pub placeholders: Vec<String>,
    /// Whether charts and kustomizations are rendered (`auto`, `never`).
    #[serde(default)]
    pub render: Option<super::render::RenderMode>,
    /// The longest one render may take, in seconds.
    #[serde(default)]
    pub render_timeout: Option<u64>,
}

/// A custom workload's pod templates.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodTemplateConfig {
    pub kind: String,
    pub group: String,
    /// Where the pod specs are (`spec.pods.*`).
    pub paths: Vec<String>,
    /// Counts multiplied into the Pods each template runs at once, read
    /// from the object (default: one).
    #[serde(default)]
    pub replicas: Vec<String>,
}

/// `embeddedPodSpecs`: whether kinds draguard does not know are searched
/// for pod specs, and which kinds are not.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmbeddedPodSpecsConfig {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// `KIND.GROUP` of kinds not searched.
    #[serde(default)]
    pub skip_kinds: Vec<String>,
}

fn yes() -> bool {
    true
}

/// A config file and the folder its relative paths start from.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    pub file: PathBuf,
    pub config: CheckConfig,
}

impl LoadedConfig {
    /// A path of the config, as seen from the working directory.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        relative_to(&self.file, path)
    }

    /// The folder the config's relative paths start from.
    pub fn dir(&self) -> PathBuf {
        self.file.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    }

    /// Its pod templates and toleration lists, as the table holds them.
    pub fn pod_templates(&self) -> Result<Vec<TemplateKind>, String> {
        let file = self.file.display();
        let mut rows = self
            .config
            .pod_templates
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let at = |what: &str, e: String| format!("{file}: podTemplates[{i}].{what}: {e}");
                let parse = |paths: &[String], what: &str| {
                    paths
                        .iter()
                        .map(|p| TemplatePath::parse(p).map_err(|e| at(what, e)))
                        .collect::<Result<Vec<_>, _>>()
                };
                if t.paths.is_empty() {
                    return Err(at("paths", "name at least one path".into()));
                }
                let replicas = parse(&t.replicas, "replicas")?;
                let templates = parse(&t.paths, "paths")?
                    .into_iter()
                    .map(|p| (p, Replicas::Product(replicas.clone())))
                    .collect();
                Ok(TemplateKind {
                    declared: Some(format!("podTemplates[{i}] of {file}")),
                    ..TemplateKind::with_templates(&t.group, &t.kind, templates)
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        for (kind_group, paths) in &self.config.toleration_lists {
            let at = |e: String| format!("{file}: tolerationLists.{kind_group}: {e}");
            let (kind, group) = kind_group_of(kind_group).map_err(at)?;
            if paths.is_empty() {
                return Err(at("name at least one path".into()));
            }
            let lists = paths
                .iter()
                .map(|p| {
                    TemplatePath::parse(p)
                        .map(|p| (p, ListRole::PodTolerations))
                        .map_err(at)
                })
                .collect::<Result<Vec<_>, _>>()?;
            rows.push(TemplateKind {
                lists,
                declared: Some(format!("tolerationLists.{kind_group} of {file}")),
                ..TemplateKind::with_templates(group, kind, Vec::new())
            });
        }
        Ok(rows)
    }

    /// Its `embeddedPodSpecs` (default: on, for every kind).
    pub fn embedded_pod_specs(&self) -> Result<EmbeddedPodSpecs, String> {
        let Some(config) = &self.config.embedded_pod_specs else {
            return Ok(EmbeddedPodSpecs::default());
        };
        let skip = config
            .skip_kinds
            .iter()
            .map(|k| {
                kind_group_of(k)
                    .map(|(kind, group)| (kind.to_owned(), group.to_owned()))
                    .map_err(|e| format!("{}: embeddedPodSpecs.skipKinds: {e}", self.file.display()))
            })
            .collect::<Result<_, _>>()?;
        Ok(EmbeddedPodSpecs {
            enabled: config.enabled,
            skip,
        })
    }
}

/// `path` as written in `file`: relative to `file`'s folder.
pub fn relative_to(file: &Path, path: &Path) -> PathBuf {
    match file.parent() {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    }
}

/// The nearest `.draguard.yaml` in `start` or a folder above it.
pub fn find(start: &Path) -> Option<PathBuf> {
    start.ancestors().map(|dir| dir.join(FILE)).find(|file| file.is_file())
}

/// Reads a config file; a problem names the file, line and column.
pub fn load(file: &Path) -> Result<LoadedConfig, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: cannot read: {e}", file.display()))?;
    let config = if text.trim().is_empty() {
        CheckConfig::default()
    } else {
        serde_saphyr::from_str::<CheckConfig>(&text).map_err(|e| {
            let place = e
                .location()
                .map_or_else(String::new, |l| format!(":{}:{}", l.line(), l.column()));
            format!(
                "{}{place}: {}",
                file.display(),
                crate::yaml::messages::message(&e, &text)
            )
        })?
    };
    Ok(LoadedConfig {
        file: file.to_path_buf(),
        config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_loads_and_a_typo_is_refused_with_its_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join(FILE);
        std::fs::write(
            &file,
            "policies: policies/\nexclude: [vendor/]\nkubernetesVersion: \"1.36\"\nfeatureGates: A=true\noutput: sarif\nnamespace: ci\nnamespaceLabels: {ml: {team: ml}}\npodTemplates:\n- {kind: Trainer, group: example.com, paths: [\"spec.pods.*\"], replicas: [spec.replicas]}\nbaseDir: .\nrender: never\nrenderTimeout: 5\n",
        )
        .expect("write");
        let loaded = load(&file).expect("loads");
        assert_eq!(loaded.config.kubernetes_version.as_deref(), Some("1.36"));
        assert_eq!(loaded.config.render, Some(crate::check::render::RenderMode::Never));
        assert_eq!(loaded.config.render_timeout, Some(5));
        assert_eq!(loaded.resolve(Path::new("policies/")), dir.path().join("policies/"));
        assert_eq!(loaded.resolve(Path::new("/abs")), PathBuf::from("/abs"));
        let templates = loaded.pod_templates().expect("templates");
        assert_eq!(templates[0].kind, "Trainer");
        let object = serde_json::json!({"spec": {"replicas": 3, "pods": {"a": {"containers": []}}}});
        assert_eq!(templates[0].find(&object)[0].replicas, 3);

        std::fs::write(
            &file,
            "tolerationLists: {Flavor.example.com: [spec.tolerations]}\nembeddedPodSpecs: {skipKinds: [Chart.example.com]}\n",
        )
        .expect("write");
        let loaded = load(&file).expect("loads");
        let rows = loaded.pod_templates().expect("rows");
        assert_eq!(
            (rows[0].kind.as_str(), rows[0].group.as_str()),
            ("Flavor", "example.com")
        );
        let flavor = serde_json::json!({"spec": {"tolerations": [{"key": "k"}]}});
        assert_eq!(rows[0].find_lists(&flavor).len(), 1);
        let search = loaded.embedded_pod_specs().expect("settings");
        assert!(search.enabled && !search.searches("example.com", "Chart") && search.searches("example.com", "Other"));
        std::fs::write(&file, "tolerationLists: {Flavor: [spec.tolerations]}\n").expect("write");
        let err = load(&file).expect("loads").pod_templates().expect_err("no group");
        assert!(
            err.contains("tolerationLists.Flavor: \"Flavor\" is not KIND.GROUP"),
            "{err}"
        );
        std::fs::write(&file, "embeddedPodSpecs: {enabled: false}\n").expect("write");
        assert!(
            !load(&file)
                .expect("loads")
                .embedded_pod_specs()
                .expect("settings")
                .enabled
        );

        std::fs::write(&file, "policies: p\npolicy: q\n").expect("write");
        let err = load(&file).expect_err("a typo");
        assert!(
            err.starts_with(&format!("{}:2:1: unknown field `policy`", file.display())),
            "{err}"
        );

        std::fs::write(&file, "podTemplates: [{kind: T, group: g, paths: [\"a[0]\"]}]\n").expect("write");
        let err = load(&file).expect("loads").pod_templates().expect_err("a bad path");
        assert!(err.contains("podTemplates[0].paths: "), "{err}");
        std::fs::write(&file, "").expect("write");
        assert_eq!(load(&file).expect("empty is fine").config, CheckConfig::default());
    }

    #[test]
    fn the_nearest_file_upward_is_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let deep = dir.path().join("a/b/c");
        std::fs::create_dir_all(&deep).expect("mkdir");
        assert_eq!(find(&deep), None::<PathBuf>.or_else(|| find(dir.path())));
        std::fs::write(dir.path().join("a").join(FILE), "").expect("write");
        assert_eq!(find(&deep), Some(dir.path().join("a").join(FILE)));
        std::fs::write(deep.join(FILE), "").expect("write");
        assert_eq!(find(&deep), Some(deep.join(FILE)));
    }
}
