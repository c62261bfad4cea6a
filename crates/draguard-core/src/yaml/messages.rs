//! YAML errors in the words of someone fixing a manifest: what is wrong
//! and what to do, never the parser's internal names (a budget breach is
//! printed by the parser as `RecordedAnchorEvents { .. }`, a duplicate key
//! as advice to set a parser option draguard does not expose).

use std::borrow::Cow;

use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{Error, MessageFormatter, UserMessageFormatter};

/// The message for a parse error of `text` (its first line, without the
/// position, which callers print in front of it).
pub fn message(error: &Error, text: &str) -> String {
    let mut error = error;
    while let Error::AliasError { error: inner, .. } | Error::WithSnippet { error: inner, .. } = error {
        error = inner;
    }
    let message = Words.format_message(error).into_owned();
    // A template the renderer never saw: say so where the parser cannot.
    let line = error.location().map(|l| l.line()).unwrap_or_default();
    let unrendered = usize::try_from(line)
        .ok()
        .and_then(|l| l.checked_sub(1))
        .and_then(|i| text.lines().nth(i))
        .is_some_and(|l| l.contains("{{") || l.contains("{%"));
    let first = message.lines().next().unwrap_or("invalid YAML");
    let mut first = first.split(" at line ").next().unwrap_or(first).to_owned();
    if unrendered {
        first.push_str(UNRENDERED);
    }
    first
}

/// Ends the message of a parse error on a line with `{{` or `{%`. Only
/// the caller knows whether helm or kustomize applies (`check` names them
/// for a file inside a chart or kustomization folder): an operator's own
/// Go-template manifests are rendered by the operator.
pub const UNRENDERED: &str = " (an unrendered template?)";

/// draguard's wording for the errors it words itself; the parser's
/// user-facing wording for the rest.
struct Words;

impl MessageFormatter for Words {
    fn format_message<'a>(&self, err: &'a Error) -> Cow<'a, str> {
        match err {
            Error::DuplicateMappingKey { key: Some(key), .. } => Cow::Owned(duplicate_key(key)),
            Error::DuplicateMappingKey { key: None, .. } => {
                Cow::Borrowed("a key is given twice in the same mapping: keep one")
            }
            Error::Budget { breach, .. } => Cow::Owned(budget(breach)),
            Error::AliasReplayCounterOverflow { .. }
            | Error::AliasReplayLimitExceeded { .. }
            | Error::AliasExpansionLimitExceeded { .. }
            | Error::AliasReplayStackDepthExceeded { .. } => Cow::Borrowed(ALIAS_BOMB),
            other => UserMessageFormatter.format_message(other),
        }
    }
}

/// A key given twice in one mapping (YAML) or object (JSON).
pub fn duplicate_key(key: &str) -> String {
    format!("{key} is given twice in the same mapping: keep one (which one the apiserver keeps is not what you wrote)")
}

const ALIAS_BOMB: &str = "aliases (*name) expand this document past what any manifest needs (a YAML alias bomb?): write the repeated parts out";

fn budget(breach: &BudgetBreach) -> String {
    match breach {
        BudgetBreach::Aliases { .. }
        | BudgetBreach::AliasAnchorRatio { .. }
        | BudgetBreach::RecordedAnchorEvents { .. } => ALIAS_BOMB.to_owned(),
        BudgetBreach::Anchors { anchors } => format!("too many anchors (&name): {anchors}"),
        BudgetBreach::Depth { depth } => format!("nested {depth} levels deep: no manifest needs that many"),
        BudgetBreach::Documents { documents } => {
            format!(
                "more than {} documents in one input: split it",
                documents.saturating_sub(1)
            )
        }
        BudgetBreach::Nodes { nodes } => format!(
            "more than {} values in one input: split it into smaller files",
            nodes.saturating_sub(1)
        ),
        BudgetBreach::Events { .. } | BudgetBreach::ScalarBytes { .. } | BudgetBreach::InputBytes { .. } => {
            "the input is too large to read: split it into smaller files".to_owned()
        }
        BudgetBreach::MergeKeys { merge_keys } => format!("too many merge keys (<<): {merge_keys}"),
        BudgetBreach::SequenceUnbalanced => "a list or mapping is not closed: the input is cut short".to_owned(),
        _ => "the document is too large or too deeply nested to read".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(text: &str) -> String {
        let error = serde_saphyr::from_multiple_with_options::<serde_json::Value>(text, crate::yaml::yaml_options())
            .expect_err("refused");
        message(&error, text)
    }

    #[test]
    fn no_parser_names_reach_the_user() {
        let bomb: String =
            std::iter::once("a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n".to_owned())
                .chain(
                    ('b'..='j')
                        .zip('a'..='i')
                        .map(|(name, prev)| format!("{name}: &{name} [{}]\n", vec![format!("*{prev}"); 9].join(","))),
                )
                .collect();
        assert_eq!(error_of(&bomb), ALIAS_BOMB);
        assert_eq!(
            error_of("kind: Pod\nmetadata: {name: a}\nmetadata: {name: b}\n"),
            "metadata is given twice in the same mapping: keep one (which one the apiserver keeps is not what you wrote)"
        );
        let helm = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Values.name }}\n";
        let worded = error_of(helm);
        assert!(
            worded.ends_with(" (an unrendered template?)") && !worded.contains("helm"),
            "{worded}"
        );
        for text in [bomb.as_str(), "a: [1,\n", helm] {
            let worded = error_of(text);
            for internal in ["Budget", "Options", "{ ", "Recorded", "breach"] {
                assert!(!worded.contains(internal), "{worded:?} names {internal:?}");
            }
        }
    }
}
