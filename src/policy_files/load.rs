//! Reads a policy folder from disk (or one policy file named instead of a
//! folder): lists its `*.yaml`/`*.yml` files, refuses a broken ConfigMap
//! mount, and hands each file's text to the
//! policy core (`policy::load::parse_file`), which reads no file.

use std::path::{Path, PathBuf};

use crate::policy::PolicySet;
use crate::policy::load::{PolicyError, PolicyLoadError, Skipped, duplicate_names, parse_file};
use crate::yaml::Position;

/// What a policy folder holds.
#[derive(Debug, Clone, Default)]
pub struct Folder {
    pub set: PolicySet,
    pub skipped: Vec<Skipped>,
}

/// Loads every `*.yaml`/`*.yml` file of `dir` (not recursively, in name
/// order), or `dir` itself when it names a file. The folder was named by the user, so a folder that does not
/// exist is an error, never "no policies". Any error fails the whole load,
/// so a broken edit never replaces good policies.
pub fn load_dir(dir: &Path) -> Result<Folder, PolicyLoadError> {
    let folder_error = |message: String| {
        PolicyLoadError::Folder(PolicyError {
            file: dir.display().to_string(),
            position: Position::default(),
            message,
        })
    };
    let files = match policy_files(dir) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(folder_error("the policy folder does not exist".into()));
        }
        Err(e) => return Err(folder_error(format!("cannot read the policy folder: {e}"))),
    };
    if let Some(message) = dangling_data_link(dir) {
        return Err(folder_error(message));
    }
    let mut folder = Folder::default();
    let mut errors = Vec::new();
    for file in files {
        let name = file.display().to_string();
        match std::fs::read_to_string(&file) {
            Ok(text) => match parse_file(&name, &text) {
                Ok(parsed) => {
                    folder.set.policies.extend(parsed.policies);
                    folder.set.add_driver_schemas(&parsed.driver_schemas);
                    folder.skipped.extend(parsed.skipped);
                }
                Err(mut e) => errors.append(&mut e),
            },
            Err(e) => errors.push(PolicyError {
                file: name,
                position: Position::default(),
                message: format!("cannot read: {e}"),
            }),
        }
    }
    errors.extend(duplicate_names(&folder.set));
    if errors.is_empty() {
        Ok(folder)
    } else {
        Err(PolicyLoadError::Files(errors))
    }
}

/// The policy files of a folder, in name order; a file named instead of a
/// folder is the one file (a first policy is often one file, and `policy
/// test` or `check` on it should not need a folder made for it).
///
/// A `*.yaml` symlink whose target is gone is listed too, so that reading
/// it fails: a ConfigMap's key link dangles between kubelet's swap of
/// `..data` and its removal of the old keys, and skipping it would read
/// as a folder without that policy.
pub fn policy_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    if dir.is_file() {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .filter(|p| p.is_file() || is_dangling_link(p))
        .collect();
    files.sort();
    Ok(files)
}

fn is_dangling_link(path: &Path) -> bool {
    path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) && path.metadata().is_err()
}

/// A ConfigMap or Secret volume is a folder whose `..data` link points at
/// kubelet's latest timestamped copy, with each key a link through it
/// (kubernetes v1.36 pkg/volume/util/atomic_writer.go, `dataDirName`).
/// `..data` pointing nowhere means the mount is broken, not that the
/// policies are gone.
fn dangling_data_link(dir: &Path) -> Option<String> {
    let data = dir.join("..data");
    is_dangling_link(&data).then(|| {
        let target = std::fs::read_link(&data).map_or_else(|_| "?".to_owned(), |t| t.display().to_string());
        format!("the ConfigMap's ..data link points at {target}, which does not exist")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata:
  name: ml-gpus
spec:
  namespaces:
    names: [\"ml-*\"]
  pods:
    allow:
    - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
    defaults:
    - {key: dedicated, operator: Equal, value: ml, effect: NoSchedule}
---
apiVersion: policy.draguard.dev/v1alpha1
kind: TolerationPolicy
metadata:
  name: maintenance
spec:
  mode: Warn
  devices:
    deny:
    - {key: example.com/maintenance, operator: Exists}
";

    #[test]
    fn folders_load_in_order_and_duplicates_fail() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("b.yaml"), GOOD).expect("write");
        std::fs::write(dir.path().join("a.yml"), GOOD.split("---").next().expect("first doc")).expect("write");
        std::fs::write(dir.path().join("notes.md"), "not a policy").expect("write");
        let errs = load_dir(dir.path()).expect_err("duplicate");
        assert!(matches!(&errs, PolicyLoadError::Files(e) if e.len() == 1), "{errs:?}");
        assert!(
            errs.errors()[0]
                .message
                .contains("policy \"ml-gpus\" is also defined in"),
            "{errs:?}"
        );
        std::fs::remove_file(dir.path().join("a.yml")).expect("rm");
        assert_eq!(load_dir(dir.path()).expect("loads").set.policies.len(), 2);
    }

    /// A ConfigMap volume whose links lead nowhere is a failed read, not
    /// a folder without policies.
    #[cfg(unix)]
    #[test]
    fn dangling_links_are_read_errors() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().expect("tempdir");
        symlink("..2026_11_26_14_00_00.1", dir.path().join("..data")).expect("link");
        symlink("..data/gpu.yaml", dir.path().join("gpu.yaml")).expect("link");
        let errs = load_dir(dir.path()).expect_err("a dangling ..data fails");
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [format!(
                "{}:0:0: the ConfigMap's ..data link points at ..2026_11_26_14_00_00.1, which does not exist",
                dir.path().display()
            )]
        );
        // A key whose target is gone, with `..data` itself good.
        std::fs::create_dir(dir.path().join("..2026_11_26_14_00_00.1")).expect("mkdir");
        let errs = load_dir(dir.path()).expect_err("a dangling key fails");
        let messages: Vec<String> = errs.iter().map(|e| e.message.clone()).collect();
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(messages[0].starts_with("cannot read: "), "{messages:?}");
        assert_eq!(errs.errors()[0].file, dir.path().join("gpu.yaml").display().to_string());
    }

    #[test]
    fn a_named_folder_that_is_missing_is_an_error_not_zero_policies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("missing");
        let errs = load_dir(&missing).expect_err("a missing folder fails");
        assert!(matches!(errs, PolicyLoadError::Folder(_)), "{errs:?}");
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            [format!("{}:0:0: the policy folder does not exist", missing.display())]
        );
    }

    #[test]
    fn a_file_named_instead_of_a_folder_is_loaded_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("file.yaml");
        std::fs::write(&file, GOOD).expect("write");
        // A broken sibling must not be read: only the named file is.
        std::fs::write(dir.path().join("broken.yaml"), "kind: [").expect("write");
        let folder = load_dir(&file).expect("one policy file loads");
        let names: Vec<&str> = folder
            .set
            .policies
            .iter()
            .map(|p| p.policy.metadata.name.as_str())
            .collect();
        assert_eq!(names, ["ml-gpus", "maintenance"]);
        assert_eq!(policy_files(&file).expect("listed"), [file]);
    }

    #[test]
    fn invalid_files_are_all_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.yaml"), "[").expect("write");
        std::fs::write(dir.path().join("b.yaml"), "kind: [").expect("write");
        let errs = load_dir(dir.path()).expect_err("invalid files");
        assert!(matches!(&errs, PolicyLoadError::Files(e) if e.len() == 2), "{errs:?}");
        let files: Vec<&str> = errs.iter().map(|e| e.file.as_str()).collect();
        assert!(
            files[0].ends_with("a.yaml") && files[1].ends_with("b.yaml"),
            "{files:?}"
        );
    }

    #[test]
    fn documents_of_other_api_groups_are_skipped_with_a_note() {
        let dir = tempfile::tempdir().expect("tempdir");
        let kyverno =
            "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: require-labels}\nspec: {rules: []}\n";
        std::fs::write(dir.path().join("kyverno.yaml"), kyverno).expect("write");
        std::fs::write(
            dir.path().join("kustomization.yaml"),
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n",
        )
        .expect("write");
        // A file may mix both: the policy loads, the other document is noted.
        std::fs::write(dir.path().join("mixed.yaml"), format!("{kyverno}---\n{GOOD}")).expect("write");
        let folder = load_dir(dir.path()).expect("foreign documents are not errors");
        assert_eq!(folder.set.policies.len(), 2, "both policies of GOOD load");
        let notes: Vec<String> = folder.skipped.iter().map(ToString::to_string).collect();
        let at = |file: &str, line: usize| format!("{}:{line}:1", dir.path().join(file).display());
        assert_eq!(
            notes,
            [
                format!(
                    "{}: skipped kustomize.config.k8s.io/v1beta1 Kustomization: not a draguard policy (policy.draguard.dev/v1alpha1 TolerationPolicy)",
                    at("kustomization.yaml", 1)
                ),
                format!(
                    "{}: skipped kyverno.io/v1 ClusterPolicy: not a draguard policy (policy.draguard.dev/v1alpha1 TolerationPolicy)",
                    at("kyverno.yaml", 1)
                ),
                format!(
                    "{}: skipped kyverno.io/v1 ClusterPolicy: not a draguard policy (policy.draguard.dev/v1alpha1 TolerationPolicy)",
                    at("mixed.yaml", 1)
                ),
            ]
        );
    }

    /// `draguard policy test` suites live beside the policies they test:
    /// `check --policies`, `review` and `serve` load the folder all the same.
    #[test]
    fn a_policy_test_suite_in_the_folder_is_skipped_with_a_note() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("policy.yaml"), GOOD).expect("write");
        let suite = "apiVersion: policy.draguard.dev/v1alpha1\nkind: PolicyTest\nmetadata: {name: t}\ncases: []\n";
        std::fs::write(dir.path().join("policy_test.yaml"), suite).expect("write");
        let folder = load_dir(dir.path()).expect("a suite is not an error");
        assert_eq!(folder.set.policies.len(), 2, "both policies of GOOD load");
        let notes: Vec<String> = folder.skipped.iter().map(ToString::to_string).collect();
        assert_eq!(
            notes,
            [format!(
                "{}:1:1: skipped policy.draguard.dev/v1alpha1 PolicyTest: not a draguard policy (policy.draguard.dev/v1alpha1 TolerationPolicy)",
                dir.path().join("policy_test.yaml").display()
            )]
        );
    }
}
