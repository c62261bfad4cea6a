//! Reading manifests: files, folders (recursively: `.yaml`, `.yml`,
//! `.json`), `-` for standard input; multi-document YAML; `kind: List`;
//! a top-level JSON array; JSON objects one after the other (`json.rs`). A file that cannot be read or parsed is a
//! problem of that file only: every other file is still checked.
//!
//! A folder walk skips hidden files and folders (`.github`, `.git`) unless
//! they are named, the paths `--exclude` globs match, and what a
//! `.draguardignore` (gitignore syntax, in the folder or any parent)
//! lists. A file named on the command line is always read.
//!
//! Helm charts and kustomizations a walk finds are rendered, or skipped
//! with a note (`render`).

use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_saphyr::Spanned;

use crate::yaml::Node;
use crate::yaml::yaml_options;

/// One input file (or standard input) and its text.
#[derive(Debug, Clone)]
pub struct Source {
    /// As shown to the user: the path as given, or `-`.
    pub name: String,
    pub text: String,
}

/// A file that could not be read or parsed: reported where it went wrong,
/// and the run goes on (exit 2 at its end).
#[derive(Debug, Clone, PartialEq)]
pub struct FileProblem {
    pub file: String,
    /// 0 when the problem is the whole file (unreadable).
    pub line: u64,
    pub column: u64,
    pub message: String,
}

impl std::fmt::Display for FileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)
        }
    }
}

impl std::error::Error for FileProblem {}

impl FileProblem {
    pub(super) fn whole(file: impl Into<String>, message: impl Into<String>) -> Self {
        FileProblem {
            file: file.into(),
            line: 0,
            column: 0,
            message: message.into(),
        }
    }
}

/// The ignore file a folder (or any parent) may hold.
pub const IGNORE_FILE: &str = ".draguardignore";

/// Which files a folder walk picks up, besides the manifest extensions.
#[derive(Debug, Clone, Default)]
pub struct Walk {
    /// Gitignore-syntax globs of paths to skip, each set with the folder
    /// it is relative to (`--exclude`: the working directory; a config
    /// file's: its folder).
    pub excludes: Vec<Excludes>,
    /// The name standard input is reported under (default `-`).
    pub stdin_name: Option<String>,
    /// How charts and kustomizations found in folders are rendered.
    pub render: super::render::RenderSettings,
    /// The largest file (or standard input) read, in bytes
    /// (`--max-file-size`; [`MAX_FILE_BYTES`] when `None`).
    pub max_file_bytes: Option<u64>,
}

/// The largest input file read by default: 1 GiB, the most text the YAML
/// parser reads in one input (`yaml_options`). A file is refused from its
/// size, before it is read: `check` holds each file's text while it
/// judges it.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// The most documents one file may hold, the YAML parser's own document
/// limit (`yaml_options`): past it a file is refused, not judged in part.
pub const MAX_DOCUMENTS: usize = 1_000_000;

impl Walk {
    fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes.unwrap_or(MAX_FILE_BYTES)
    }
}

/// Globs, and the folder they are relative to.
#[derive(Debug, Clone, Default)]
pub struct Excludes {
    pub root: PathBuf,
    /// Where they were given, for an error (`--exclude`, a config file).
    pub from: String,
    pub globs: Vec<String>,
}

/// What the command-line paths hold: the sources in a stable order, and
/// the files that could not be read.
#[derive(Debug, Default)]
pub struct Inputs {
    pub sources: Vec<Source>,
    pub problems: Vec<FileProblem>,
    /// Charts and kustomizations not rendered: one note each.
    pub notes: Vec<super::render::Note>,
    /// Where the documents of each kustomization build come from.
    pub placements: Vec<super::origin::Placements>,
}

/// Expands the command-line paths into sources, in a stable order.
pub fn read_sources(paths: &[PathBuf], walk: &Walk) -> Inputs {
    let mut inputs = Inputs::default();
    let excludes = match exclude_matcher(&walk.excludes) {
        Ok(m) => m,
        Err(problem) => {
            inputs.problems.push(problem);
            return inputs;
        }
    };
    for path in paths {
        if path.as_os_str() == "-" {
            let name = walk.stdin_name.clone().unwrap_or_else(|| "-".into());
            match read_at_most(std::io::stdin().lock(), walk.max_file_bytes(), 0) {
                Ok(Some(bytes)) => match String::from_utf8(bytes) {
                    Ok(text) => inputs.sources.push(Source { name, text }),
                    Err(_) => inputs.problems.push(FileProblem::whole(name, "not UTF-8 text")),
                },
                Ok(None) => inputs.problems.push(too_large(&name, walk.max_file_bytes())),
                Err(e) => inputs
                    .problems
                    .push(FileProblem::whole(name, format!("cannot read standard input: {e}"))),
            }
            continue;
        }
        match std::fs::metadata(path) {
            Err(e) => inputs.problems.push(unreadable(path, &e)),
            Ok(meta) if meta.is_dir() => {
                let mut files = Vec::new();
                walk_folder(path, &excludes, &mut files, &mut inputs.problems);
                files.sort();
                let plan = super::render::Plan::of(&files, &walk.render);
                let first = inputs.sources.len();
                for file in files.iter().filter(|f| plan.reads(f)) {
                    read_into(file, walk, &mut inputs);
                }
                let rendered = plan.render(&walk.render);
                for file in &rendered.read_raw {
                    read_into(file, walk, &mut inputs);
                }
                inputs.sources.extend(rendered.sources);
                inputs.problems.extend(rendered.problems);
                inputs.notes.extend(rendered.notes);
                inputs.placements.extend(rendered.placements);
                // Rendered templates among the files, in one order by name.
                inputs.sources[first..].sort_by(|a, b| a.name.cmp(&b.name));
            }
            // A FIFO or a device would block, or never end: `-` reads
            // standard input.
            Ok(meta) if !meta.is_file() => inputs.problems.push(FileProblem::whole(
                path.display().to_string(),
                "not a regular file (a pipe, socket or device): name `-` to read standard input",
            )),
            Ok(_) => read_into(path, walk, &mut inputs),
        }
    }
    inputs
}

fn exclude_matcher(excludes: &[Excludes]) -> Result<Vec<ignore::gitignore::Gitignore>, FileProblem> {
    excludes
        .iter()
        .map(|set| {
            // Matched against absolute paths: roots and walked paths agree.
            let root = std::path::absolute(&set.root).unwrap_or_else(|_| set.root.clone());
            let mut builder = ignore::gitignore::GitignoreBuilder::new(root);
            for glob in &set.globs {
                builder
                    .add_line(None, glob)
                    .map_err(|e| FileProblem::whole(&set.from, format!("{glob:?} is not a valid glob: {e}")))?;
            }
            builder
                .build()
                .map_err(|e| FileProblem::whole(&set.from, format!("the globs do not build: {e}")))
        })
        .collect()
}

fn unreadable(path: &Path, e: &std::io::Error) -> FileProblem {
    FileProblem::whole(path.display().to_string(), format!("cannot read: {e}"))
}

/// Reads a regular file, refused from its size before a byte is read.
fn read_into(path: &Path, walk: &Walk, inputs: &mut Inputs) {
    let name = path.display().to_string();
    let limit = walk.max_file_bytes();
    let read = std::fs::File::open(path).and_then(|file| {
        let size = file.metadata()?.len();
        if size > limit {
            return Ok(None);
        }
        // The size may grow while it is read: the limit holds anyway.
        read_at_most(file, limit, size)
    });
    match read {
        Err(e) => inputs.problems.push(unreadable(path, &e)),
        Ok(None) => inputs.problems.push(too_large(&name, limit)),
        Ok(Some(bytes)) => match String::from_utf8(bytes) {
            Ok(text) => inputs.sources.push(Source { name, text }),
            Err(_) => inputs.problems.push(FileProblem::whole(name, "not UTF-8 text")),
        },
    }
}

/// Everything `reader` holds, or `None` when that is more than `limit`
/// bytes (read no further than one byte past it). Room for `expected`
/// bytes is made at once: grown by doubling, a 70 MB file would take
/// 128 MB, and the copy 64 MB more.
fn read_at_most(reader: impl std::io::Read, limit: u64, expected: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::with_capacity(usize::try_from(expected.min(limit)).unwrap_or(0).saturating_add(1));
    reader.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

fn too_large(name: &str, limit: u64) -> FileProblem {
    FileProblem::whole(
        name,
        format!("larger than {limit} bytes, the most one input may hold (--max-file-size): not read"),
    )
}

fn is_manifest(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
}

/// The manifests under `dir`: hidden entries, excluded paths and what
/// `.draguardignore` files list are skipped (git's own ignore files are
/// not read: a rendered folder git ignores may be what CI checks).
fn walk_folder(
    dir: &Path,
    excludes: &[ignore::gitignore::Gitignore],
    files: &mut Vec<PathBuf>,
    problems: &mut Vec<FileProblem>,
) {
    let excludes = excludes.to_vec();
    let walker = ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .hidden(true)
        .parents(true)
        .add_custom_ignore_filename(IGNORE_FILE)
        .filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            // The named folder itself is walked even when a glob matches it.
            let path = std::path::absolute(entry.path()).unwrap_or_else(|_| entry.path().to_path_buf());
            entry.depth() == 0 || !excludes.iter().any(|set| set.matched(&path, is_dir).is_ignore())
        })
        .build();
    let mut found: Vec<(PathBuf, bool)> = Vec::new();
    for entry in walker {
        match entry {
            Ok(entry) => {
                let path = entry.path();
                // Markers too: `Kustomization` has no manifest extension.
                if entry.depth() > 0 && (is_manifest(path) || super::render::is_marker(path)) && path.is_file() {
                    found.push((path.to_path_buf(), entry.path_is_symlink()));
                }
            }
            Err(e) => problems.push(FileProblem::whole(
                dir.display().to_string(),
                format!("cannot read: {e}"),
            )),
        }
    }
    files.extend(once_each(found));
}

/// `found` (each file and whether it was reached through a symlink), each
/// file once: a symlink to a file also found at its own path, or to one
/// another symlink already gave, is left out, so that its objects are not
/// judged and reported twice. Only when some symlink was met is any path
/// resolved.
fn once_each(found: Vec<(PathBuf, bool)>) -> Vec<PathBuf> {
    if !found.iter().any(|(_, link)| *link) {
        return found.into_iter().map(|(p, _)| p).collect();
    }
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut seen: std::collections::HashSet<PathBuf> =
        found.iter().filter(|(_, link)| !link).map(|(p, _)| real(p)).collect();
    found
        .into_iter()
        .filter(|(path, link)| !link || seen.insert(real(path)))
        .map(|(p, _)| p)
        .collect()
}

/// The documents of a source with the position of every node; empty
/// documents are dropped. JSON is YAML.
pub fn parse_documents(source: &Source) -> Result<Vec<Spanned<Node>>, FileProblem> {
    serde_saphyr::from_multiple_with_options(&source.text, yaml_options())
        .map_err(|e| syntax_error(&source.name, &source.text, &e))
}

fn syntax_error(name: &str, text: &str, e: &serde_saphyr::Error) -> FileProblem {
    let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
    let mut message = crate::yaml::messages::message(e, text);
    // Where helm or kustomize applies, say how to render.
    if let Some(bare) = message.strip_suffix(crate::yaml::messages::UNRENDERED)
        && let Some(hint) = super::render::hint(name)
    {
        message = format!("{bare} (an unrendered template? {hint})");
    }
    FileProblem {
        file: name.to_owned(),
        line,
        column,
        message,
    }
}

/// A key given twice in one mapping: read as kubectl reads it.
fn is_duplicate_key(mut error: &serde_saphyr::Error) -> bool {
    while let serde_saphyr::Error::AliasError { error: inner, .. }
    | serde_saphyr::Error::WithSnippet { error: inner, .. } = error
    {
        error = inner;
    }
    matches!(error, serde_saphyr::Error::DuplicateMappingKey { .. })
}

/// One YAML document of a source: its text, and the line it starts on.
/// Documents are parsed on their own (on every core), and only the value
/// is kept; positions are found again in the document's text when a
/// finding needs one.
#[derive(Debug, Clone, Copy)]
pub struct Document<'s> {
    pub source: usize,
    pub text: &'s str,
    /// The 1-based line of `text`'s first line in the source.
    pub first_line: u64,
}

impl<'s> Document<'s> {
    /// The documents of `text`: split before every `---` and after every
    /// `...` at the start of a line. YAML forbids those lines inside a
    /// document's scalars (quoted or block), so the split is the parser's.
    /// Directives (`%YAML 1.2`, `%TAG ! tag:x,2000:`) stay with the `---`
    /// they head: alone, they are no document.
    pub fn split(source: usize, text: &'s str) -> Vec<Document<'s>> {
        let mut out = Vec::new();
        let (mut start, mut first_line, mut line, mut at) = (0usize, 1u64, 1u64, 0usize);
        // Whether the text since `start` holds more than directives,
        // comments and blank lines.
        let mut content = false;
        for piece in text.split_inclusive('\n') {
            let marker = |m: &str| {
                piece
                    .strip_prefix(m)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\n', '\r']))
            };
            if marker("---") && content {
                out.push(Document {
                    source,
                    text: &text[start..at],
                    first_line,
                });
                (start, first_line) = (at, line);
            }
            let bare = piece.trim_start();
            content = content || !(piece.starts_with('%') || bare.is_empty() || bare.starts_with('#'));
            at += piece.len();
            line += 1;
            if marker("...") {
                out.push(Document {
                    source,
                    text: &text[start..at],
                    first_line,
                });
                (start, first_line) = (at, line);
                content = false;
            }
        }
        if at > start {
            out.push(Document {
                source,
                text: &text[start..at],
                first_line,
            });
        }
        out
    }

    /// The document as compact JSON text (`None` for an empty one, or
    /// `null`); a problem names the source's line.
    pub fn json(&self, name: &str) -> Result<Option<String>, FileProblem> {
        self.json_read(name).map(|(json, _)| json)
    }

    /// [`Self::json`], and whether a mapping gives a key twice. kubectl
    /// reads such a document, the last one winning; so does this, on a
    /// second parse only such a document pays for.
    pub fn json_read(&self, name: &str) -> Result<(Option<String>, bool), FileProblem> {
        let problem = |e: &serde_saphyr::Error| {
            let mut problem = syntax_error(name, self.text, e);
            if problem.line > 0 {
                problem.line += self.first_line - 1;
            }
            problem
        };
        // Most documents are plain: read from the parser's events without
        // serde-saphyr's deserializer, to the same text.
        if let Some(json) = crate::yaml::json_direct::json_text(self.text) {
            return Ok((Some(json), false));
        }
        match serde_saphyr::from_multiple_with_options::<crate::yaml::json_text::JsonText<false>>(
            self.text,
            yaml_options(),
        ) {
            Ok(docs) => Ok((
                docs.into_iter().next().map(|d| d.0).filter(|json| json != "null"),
                false,
            )),
            Err(e) if is_duplicate_key(&e) => {
                let docs: Vec<Spanned<Node>> =
                    serde_saphyr::from_multiple_with_options(self.text, crate::yaml::yaml_options_last_wins())
                        .map_err(|e| problem(&e))?;
                let value = docs.into_iter().next().map(|d| d.value.to_value());
                let json = value
                    .filter(|v| !v.is_null())
                    .map(|v| serde_json::to_string(&v))
                    .transpose()
                    .map_err(|e| FileProblem::whole(name, format!("cannot write as JSON: {e}")))?;
                Ok((json, true))
            }
            Err(e) => Err(problem(&e)),
        }
    }

    /// Where the document's block content starts: its first line that is
    /// not blank, a comment, a directive or a bare `---`. `None` when
    /// content shares the `---` line (a flow mapping): the tree knows.
    pub fn start(&self) -> Option<crate::yaml::Position> {
        for (i, line) in self.text.lines().enumerate() {
            let content = line.trim_start();
            if content.is_empty() || content.starts_with('#') || line.starts_with('%') {
                continue;
            }
            if let Some(rest) = line.strip_prefix("---") {
                let rest = rest.trim_start();
                if rest.is_empty() || rest.starts_with('#') {
                    continue;
                }
                return None;
            }
            let indent = (line.len() - content.len()) as u64;
            return Some(crate::yaml::Position {
                line: self.first_line + i as u64,
                column: indent + 1,
            });
        }
        None
    }

    /// The document's tree with positions (for locating findings).
    pub fn tree(&self) -> Option<Spanned<Node>> {
        serde_saphyr::from_multiple_with_options::<Spanned<Node>>(self.text, crate::yaml::yaml_options_last_wins())
            .ok()
            .and_then(|docs| docs.into_iter().next())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Segment;

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
    fn documents_split_where_yaml_does() {
        let text = "a: 1\n---\nb: |\n  ---not a marker\n  x\n--- # c\nc: 3\n...\nd: 4\n";
        let docs = Document::split(0, text);
        let got: Vec<(u64, &str)> = docs.iter().map(|d| (d.first_line, d.text)).collect();
        assert_eq!(
            got,
            [
                (1, "a: 1\n"),
                (2, "---\nb: |\n  ---not a marker\n  x\n"),
                (6, "--- # c\nc: 3\n...\n"),
                (9, "d: 4\n"),
            ]
        );
        let values: Vec<_> = docs.iter().map(|d| d.json("m.yaml").expect("parses")).collect();
        assert_eq!(values[1].as_deref(), Some(r#"{"b":"---not a marker\nx\n"}"#));
        let broken = Document::split(0, "a: 1\n---\nb: [1,\n");
        let problem = broken[1].json("m.yaml").expect_err("broken");
        assert!(problem.line >= 3, "{problem}: the source's line, not the document's");
        assert_eq!(Document::split(0, "").len(), 0);
        assert_eq!(Document::split(0, "---\n").len(), 1);
    }

    /// Where a document starts, read from its text, is where its parse
    /// puts it.
    #[test]
    fn a_documents_start_is_its_roots_position() {
        let text = "# head\napiVersion: v1\n---\n\n# note\n  kind: Pod\n  a: 1\n--- # c\nb: 2\n";
        for document in Document::split(0, text) {
            let tree = document.tree().expect("parses");
            let mut want = crate::yaml::Position::from(&tree.referenced);
            want.line += document.first_line - 1;
            assert_eq!(document.start(), Some(want), "{:?}", document.text);
        }
        let flow = Document::split(0, "--- {a: 1}\n");
        assert_eq!(flow[0].start(), None, "the tree knows");
    }

    /// More comment lines after `key:` than the parser buffers when it
    /// emits comments (32): read, and the value after them is where it is.
    #[test]
    fn any_number_of_comments_before_a_value() {
        let comments: String = (0..1000).map(|i| format!("  # note {i}\n")).collect();
        let text = format!("spec:\n  tolerations:\n{comments}  - effect: Bogus\n");
        let docs = Document::split(0, &text);
        assert_eq!(docs.len(), 1);
        assert_eq!(
            docs[0].json("m.yaml").expect("reads"),
            Some(r#"{"spec":{"tolerations":[{"effect":"Bogus"}]}}"#.to_owned())
        );
        let tree = docs[0].tree().expect("parses");
        let at = crate::yaml::locate(
            &tree,
            &[
                Segment::Field("spec".into()),
                Segment::Field("tolerations".into()),
                Segment::Index(0),
                Segment::Field("effect".into()),
            ],
        );
        assert_eq!((at.line, at.column), (1003, 5));
    }

    /// Quoted scalars whose continuation lines sit at the key's column or
    /// left of it (CRD descriptions): read as go-yaml and libyaml read
    /// them, folded into one line.
    #[test]
    fn quoted_continuations_at_or_left_of_the_key_are_read() {
        let text = "a:\n  b: \"one\n  two\"\n  c: 'three\nfour'\n";
        let docs = Document::split(0, text);
        assert_eq!(
            docs[0].json("m.yaml").expect("reads"),
            Some(r#"{"a":{"b":"one two","c":"three four"}}"#.to_owned())
        );
    }

    #[test]
    fn directives_stay_with_their_document() {
        let text = "%YAML 1.2\n%TAG ! tag:example.com,2000:\n---\na: 1\n...\n%YAML 1.2\n---\nb: 2\n";
        let got: Vec<(u64, &str)> = Document::split(0, text)
            .iter()
            .map(|d| (d.first_line, d.text))
            .collect();
        assert_eq!(
            got,
            [
                (1, "%YAML 1.2\n%TAG ! tag:example.com,2000:\n---\na: 1\n...\n"),
                (6, "%YAML 1.2\n---\nb: 2\n"),
            ]
        );
    }

    #[test]
    fn syntax_errors_have_a_position() {
        let err = parse_documents(&source("a: 1\nb: [1, 2\nc: 3\n")).expect_err("broken");
        let FileProblem {
            line,
            column,
            ref message,
            ..
        } = err;
        assert!(line >= 2, "{err}");
        assert!(column >= 1, "{err}");
        assert!(!message.is_empty());
        assert!(
            err.to_string().starts_with(&format!("m.yaml:{line}:{column}: ")),
            "{err}"
        );
        assert!(!message.contains(" at line "), "{err}");
    }
}
