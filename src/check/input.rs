//! Reading manifests: files, folders (recursively: `.yaml`, `.yml`,
//! `.json`), `-` for standard input; multi-document YAML; `kind: List`.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_saphyr::Spanned;

use crate::yaml::Node;

/// One input file (or standard input) and its text.
#[derive(Debug, Clone)]
pub struct Source {
    /// As shown to the user: the path as given, or `-`.
    pub name: String,
    pub text: String,
}

/// Input that cannot be used at all (exit code 2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {message}")]
    Unreadable { path: String, message: String },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: String,
        line: u64,
        column: u64,
        message: String,
    },
}

/// Expands the command-line paths into sources, in a stable order.
pub fn read_sources(paths: &[PathBuf]) -> Result<Vec<Source>, InputError> {
    let mut sources = Vec::new();
    for path in paths {
        if path.as_os_str() == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| InputError::Unreadable {
                    path: "-".into(),
                    message: format!("cannot read standard input: {e}"),
                })?;
            sources.push(Source { name: "-".into(), text });
            continue;
        }
        let meta = std::fs::metadata(path).map_err(|e| unreadable(path, &e))?;
        if meta.is_dir() {
            let mut files = Vec::new();
            collect_manifests(path, &mut files)?;
            files.sort();
            for file in files {
                sources.push(read_file(&file)?);
            }
        } else {
            sources.push(read_file(path)?);
        }
    }
    Ok(sources)
}

fn unreadable(path: &Path, e: &std::io::Error) -> InputError {
    InputError::Unreadable {
        path: path.display().to_string(),
        message: format!("cannot read: {e}"),
    }
}

fn read_file(path: &Path) -> Result<Source, InputError> {
    let bytes = std::fs::read(path).map_err(|e| unreadable(path, &e))?;
    let text = String::from_utf8(bytes).map_err(|_| InputError::Unreadable {
        path: path.display().to_string(),
        message: "not UTF-8 text".into(),
    })?;
    Ok(Source {
        name: path.display().to_string(),
        text,
    })
}

fn is_manifest(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
}

fn collect_manifests(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), InputError> {
    let entries = std::fs::read_dir(dir).map_err(|e| unreadable(dir, &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| unreadable(dir, &e))?;
        let path = entry.path();
        let kind = entry.file_type().map_err(|e| unreadable(&path, &e))?;
        if kind.is_dir() {
            collect_manifests(&path, out)?;
        } else if is_manifest(&path) {
            out.push(path);
        }
    }
    Ok(())
}

/// Parser limits for manifests. The defaults (1,024 documents, 250,000
/// nodes, a million events, 64 MiB of scalars per input) are made for
/// configuration files; `helm template` of a whole platform exceeds them.
/// Alias and anchor limits, the guard against expansion bombs, stay as
/// they are.
pub fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 1_000_000;
    budget.max_nodes = 100_000_000;
    budget.max_events = 200_000_000;
    budget.max_total_scalar_bytes = 1 << 30;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

/// The documents of a source with the position of every node; empty
/// documents are dropped. JSON is YAML.
pub fn parse_documents(source: &Source) -> Result<Vec<Spanned<Node>>, InputError> {
    serde_saphyr::from_multiple_with_options(&source.text, yaml_options()).map_err(|e| syntax_error(source, &e))
}

fn syntax_error(source: &Source, e: &serde_saphyr::Error) -> InputError {
    let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
    let message = e.without_snippet().to_string();
    let first = message.lines().next().unwrap_or("invalid YAML").trim();
    // The position is already in front of the message.
    let message = first.split(" at line ").next().unwrap_or(first).to_owned();
    InputError::Syntax {
        path: source.name.clone(),
        line,
        column,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(text: &str) -> Source {
        Source {
            name: "m.yaml".into(),
            text: text.into(),
        }
    }

    #[test]
    fn multi_document_yaml_and_json() {
        let docs = parse_documents(&source("a: 1\n---\n---\nb: 2\n")).expect("parses");
        let values: Vec<_> = docs.iter().map(|d| d.value.to_value()).collect();
        assert_eq!(
            values,
            vec![serde_json::json!({"a": 1}), serde_json::json!({"b": 2})],
            "empty documents are dropped"
        );
        let json = parse_documents(&source(r#"{"kind": "Pod", "spec": {"x": [1, 2]}}"#)).expect("JSON is YAML");
        assert_eq!(json[0].value.to_value()["spec"]["x"][1], 2);
    }

    #[test]
    fn syntax_errors_have_a_position() {
        let err = parse_documents(&source("a: 1\nb: [1, 2\nc: 3\n")).expect_err("broken");
        match err {
            InputError::Syntax {
                line,
                column,
                ref message,
                ..
            } => {
                assert!(line >= 2, "{err}");
                assert!(column >= 1, "{err}");
                assert!(!message.is_empty());
                assert!(
                    err.to_string().starts_with(&format!("m.yaml:{line}:{column}: ")),
                    "{err}"
                );
                assert!(!message.contains(" at line "), "{err}");
            }
            other => panic!("want a syntax error, got {other}"),
        }
    }
}
