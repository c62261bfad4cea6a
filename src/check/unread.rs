//! Documents that do not parse, yet are no problem of the run: text that
//! is clearly no manifest (a JSON test fixture with a trailing comma, a
//! Markdown front matter), and unrendered templates outside a Helm chart
//! (an operator's Go-template manifests, which only the operator renders).
//! Both are counted in the summary instead of failing every run on a
//! normal repository; `--strict-inputs` makes them errors again.

use std::collections::HashSet;

/// Why a document that does not parse is not a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnreadKind {
    /// It names no `apiVersion` and no `kind` anywhere: not a manifest.
    NotKubernetes,
    /// It holds template actions (`{{ ... }}`): rendered elsewhere.
    Template,
}

/// The class of a document's text that did not parse, if any.
pub fn classify(text: &str) -> Option<UnreadKind> {
    if text.contains("{{") && text.contains("}}") {
        Some(UnreadKind::Template)
    } else if !text.contains("apiVersion") && !text.contains("kind") {
        Some(UnreadKind::NotKubernetes)
    } else {
        None
    }
}

/// The files counted.
#[derive(Debug, Default)]
pub struct Unread {
    pub templates: HashSet<String>,
    pub not_kubernetes: HashSet<String>,
    pub not_kubernetes_documents: usize,
}

impl Unread {
    pub fn add(&mut self, class: UnreadKind, file: &str) {
        match class {
            UnreadKind::Template => {
                self.templates.insert(file.to_owned());
            }
            UnreadKind::NotKubernetes => {
                self.not_kubernetes.insert(file.to_owned());
                self.not_kubernetes_documents += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_and_non_manifests_are_told_apart_from_broken_manifests() {
        assert_eq!(
            classify("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}\n  {{- if .X }}\n"),
            Some(UnreadKind::Template)
        );
        assert_eq!(classify("{\"a\": [1, 2,],}"), Some(UnreadKind::NotKubernetes));
        assert_eq!(classify("apiVersion: v1\nkind: Pod\nmetadata: {name: [\n"), None);
    }
}
