//! Reads PodTolerationRestriction's configuration file
//! (`--toleration-restriction-config`); the policy core parses its text.

use std::path::Path;

use crate::policy::toleration_restriction::{TolerationRestrictionConfig, TolerationRestrictionConfigError};

/// Reads and parses the plugin's configuration file (YAML or JSON).
pub fn load(path: &Path) -> Result<TolerationRestrictionConfig, TolerationRestrictionConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| TolerationRestrictionConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    TolerationRestrictionConfig::parse(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_files() {
        let dir = tempfile::tempdir().expect("temp dir");
        let good = dir.path().join("good.yaml");
        std::fs::write(
            &good,
            "apiVersion: podtolerationrestriction.admission.k8s.io/v1alpha1\nkind: Configuration\n\
             whitelist: [{key: a, operator: Exists}]\n",
        )
        .expect("write");
        let config = load(&good).expect("loads");
        assert_eq!(config.whitelist.len(), 1);
        assert_eq!(config.whitelist[0].key, "a");

        let unknown = dir.path().join("unknown.yaml");
        std::fs::write(&unknown, "defaults: []\n").expect("write");
        let missing = dir.path().join("missing.yaml");
        let cases = [
            (&missing, format!("{}: cannot read: ", missing.display())),
            (&unknown, format!("{}: unknown field `defaults`", unknown.display())),
        ];
        for (path, start) in cases {
            let message = load(path).expect_err("refused").to_string();
            assert!(message.starts_with(&start), "{message:?} does not start with {start:?}");
            assert!(!message.contains('\n'), "one line: {message:?}");
        }
    }
}
