//! Documents that do not parse, yet are no problem of the run: text that
//! is clearly no manifest (a JSON test fixture with a trailing comma, a
//! Markdown front matter), and unrendered templates (a parse failure on a
//! `{{` line, or in a Helm chart's file)
//! (an operator's Go-template manifests, which only the operator renders).
//! Both are counted in the summary instead of failing every run on a
//! normal repository; `--strict-inputs` makes them errors again.

use std::collections::HashSet;

/// Why a document that does not parse is not a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnreadKind {
    /// It names no `apiVersion` and no `kind` anywhere: not a manifest.
    NotKubernetes,
    /// It holds template actions (`{{ ... }}`), rendered elsewhere, or a
    /// documentation sample's `{name}` placeholders, filled by hand.
    Template,
}

/// The class of a document's text that did not parse, if any. A parse
/// failure is a template only where the template is the reason: the line
/// it failed on holds `{{` (or `{%`), or the file is inside a Helm chart
/// and holds template actions. A manifest with `{{…}}` only in its strings
/// (an Argo Workflow's parameters) that fails elsewhere is broken YAML,
/// an error like any other. A failure on a line with a `{name}`
/// placeholder (`name: {name}-gpu`, a documentation sample) is counted
/// as a template too, as `${VAR}` and `{{x}}` are.
pub fn classify(text: &str, failed_line: &str, in_chart: bool) -> Option<UnreadKind> {
    let actions = text.contains("{{") && text.contains("}}");
    let placeholder = super::skip::braced_name(failed_line.split(" #").next().unwrap_or(failed_line));
    if failed_line.contains("{{") || failed_line.contains("{%") || placeholder || (in_chart && actions) {
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
        let template = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Name }}\n  {{- if .X }}\n";
        assert_eq!(classify(template, "  {{- if .X }}", false), Some(UnreadKind::Template));
        assert_eq!(
            classify("{\"a\": [1, 2,],}", "{\"a\": [1, 2,],}", false),
            Some(UnreadKind::NotKubernetes)
        );
        assert_eq!(
            classify(
                "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n",
                "metadata: {name: [",
                false
            ),
            None
        );
    }

    /// `{{…}}` elsewhere in the file makes no template of a failure on a
    /// line without it, unless the file is a chart's.
    #[test]
    fn a_failure_away_from_template_actions_is_an_error() {
        let workflow = "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nspec:\n  args: [\"{{inputs.parameters.x}}\"]\n  bad: [\n";
        assert_eq!(classify(workflow, "  bad: [", false), None);
        assert_eq!(classify(workflow, "  bad: [", true), Some(UnreadKind::Template));
    }

    #[test]
    fn a_failure_on_a_braced_placeholder_is_a_template() {
        let sample = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}-gpu\n";
        assert_eq!(
            classify(sample, "  name: {name}-gpu", false),
            Some(UnreadKind::Template)
        );
        assert_eq!(classify(sample, "  name: {a: 1} x", false), None);
    }
}
