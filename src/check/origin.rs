//! Where each object of a kustomize build comes from: the build is run
//! with `buildMetadata: [originAnnotations, transformerAnnotations]`, which
//! makes kustomize (api/resource/origin.go, kustomize/v5) mark every object
//! with `config.kubernetes.io/origin` (the file it was read from as `path`,
//! plus `repo` and `ref` for a remote one; `configuredIn` and
//! `configuredBy` for a generated one) and
//! `alpha.config.kubernetes.io/transformations` (the kustomization of each
//! transformer that changed it). The marks are taken out of what is judged,
//! and each document is placed at its source file and the object's line in
//! it, found by kind and name.
//!
//! What kustomize v5.8 (kubectl v1.36) writes, checked with the real tool:
//! a base's object has `path: ../REL/base/deploy.yaml` (relative to the
//! folder of the kustomization built, here the temporary wrapper); a
//! component's resource the same, its own file; a generator's
//! `configuredIn: ../REL/base/kustomization.yaml` and `configuredBy:
//! {apiVersion: builtin, kind: ConfigMapGenerator}`; a patch applied in an
//! overlay adds `{configuredIn: .../overlay/kustomization.yaml,
//! configuredBy: {kind: PatchTransformer}}` to the transformations.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use super::input::Document;
use super::render::normal;

const ORIGIN: &str = "config.kubernetes.io/origin:";
const TRANSFORMATIONS: &str = "alpha.config.kubernetes.io/transformations:";

/// Where one document of a build is placed.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed {
    /// The 1-based line of the document's first line in the build's text
    /// (as judged, the marks taken out).
    pub first_line: u64,
    pub at: Place,
    /// The kustomization files whose patches changed the object, as
    /// walked.
    pub patched_in: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Place {
    /// The source file, as walked, and the object's 1-based line in it.
    File { file: String, line: u64 },
    /// Not placed in a file of the checkout: why, for the message. The
    /// finding stays at the build's folder and line.
    Unplaced(String),
}

/// A build's documents placed: what the build of `overlay` gave.
#[derive(Debug, Clone, Default)]
pub struct Placements {
    /// The build's source name (its folder as walked).
    pub overlay: String,
    pub documents: Vec<Placed>,
    /// Built alone in place of these kustomizations, which did not build
    /// (as walked; [`super::bases_alone`]); empty for a root.
    pub instead_of: Vec<String>,
}

impl Placements {
    /// Where the document holding `line` of the build is placed.
    pub fn at(&self, line: u64) -> Option<&Placed> {
        let i = self.documents.partition_point(|d| d.first_line <= line);
        i.checked_sub(1).and_then(|i| self.documents.get(i))
    }
}

/// `output` of a build of `dir` (as walked), run from the folder `built`
/// (absolute; the origin paths are relative to it): the text with the
/// marks taken out, and where each document is placed.
pub fn place(dir: &Path, canonical_dir: &Path, built: &Path, output: &str) -> (String, Placements) {
    let mut text = String::with_capacity(output.len());
    let mut placements = Placements {
        overlay: dir.display().to_string(),
        documents: Vec::new(),
        instead_of: Vec::new(),
    };
    let mut sources = SourceFiles::default();
    let mut line = 1u64;
    for document in Document::split(0, output) {
        let marks = Marks::taken_from(document.text);
        let at = match &marks.origin {
            Some(origin) => origin.place(dir, canonical_dir, built, &marks.stripped, &mut sources),
            None => Place::Unplaced("kustomize gave it no origin".into()),
        };
        let patched_in = marks
            .patched_in
            .iter()
            .map(|k| {
                walked(dir, canonical_dir, &normal(&built.join(k)))
                    .display()
                    .to_string()
            })
            .collect();
        placements.documents.push(Placed {
            first_line: line,
            at,
            patched_in,
        });
        line += marks.stripped.matches('\n').count() as u64;
        text.push_str(&marks.stripped);
    }
    (text, placements)
}

/// One document's marks, and its text without them.
#[derive(Debug, Default)]
struct Marks {
    stripped: String,
    origin: Option<Origin>,
    /// `configuredIn` of each patch transformer.
    patched_in: Vec<String>,
}

#[derive(Debug, Default)]
struct Origin {
    path: Option<String>,
    repo: Option<String>,
    configured_in: Option<String>,
    configured_by: Option<String>,
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn value_of<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.trim_start().trim_start_matches("- ").strip_prefix(key)?;
    Some(rest.trim().trim_matches(['"', '\'']))
}

impl Marks {
    /// kustomize writes both marks as block scalars under
    /// `metadata.annotations` (kyaml's encoder: two-space indents); the
    /// scalar's lines are indented deeper than its key. An `annotations:`
    /// left empty goes too.
    fn taken_from(text: &str) -> Marks {
        let mut marks = Marks::default();
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let mut kept: Vec<&str> = Vec::with_capacity(lines.len());
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i];
            let trimmed = line.trim_start();
            let is_origin = trimmed.starts_with(ORIGIN);
            if is_origin || trimmed.starts_with(TRANSFORMATIONS) {
                let own = indent(line);
                let mut j = i + 1;
                while j < lines.len() && (indent(lines[j]) > own || lines[j].trim().is_empty()) {
                    j += 1;
                }
                let body = &lines[i + 1..j];
                if is_origin {
                    let mut origin = Origin::default();
                    for l in body {
                        origin.path = origin.path.take().or(value_of(l, "path:").map(str::to_owned));
                        origin.repo = origin.repo.take().or(value_of(l, "repo:").map(str::to_owned));
                        origin.configured_in = origin
                            .configured_in
                            .take()
                            .or(value_of(l, "configuredIn:").map(str::to_owned));
                        origin.configured_by = origin.configured_by.take().or(value_of(l, "kind:").map(str::to_owned));
                    }
                    marks.origin = Some(origin);
                } else {
                    // Items `- configuredIn: X` then `configuredBy: {kind: K}`.
                    let mut current: Option<&str> = None;
                    for l in body {
                        if let Some(k) = value_of(l, "configuredIn:") {
                            current = Some(k);
                        }
                        if let (Some(kind), Some(k)) = (value_of(l, "kind:"), current)
                            && kind.starts_with("Patch")
                            && !marks.patched_in.iter().any(|p| p == k)
                        {
                            marks.patched_in.push(k.to_owned());
                        }
                    }
                }
                // `annotations:` holding nothing else goes with them.
                if let Some(last) = kept.last()
                    && last.trim_end() == format!("{}annotations:", " ".repeat(own.saturating_sub(2)))
                    && lines.get(j).is_none_or(|next| indent(next) < own)
                {
                    kept.pop();
                }
                i = j;
                continue;
            }
            kept.push(line);
            i += 1;
        }
        marks.stripped = kept.concat();
        marks
    }
}

impl Origin {
    fn place(
        &self,
        dir: &Path,
        canonical_dir: &Path,
        built: &Path,
        document: &str,
        sources: &mut SourceFiles,
    ) -> Place {
        if let Some(repo) = &self.repo {
            return Place::Unplaced(format!(
                "from the remote resource {repo}{}",
                self.path.as_deref().map(|p| format!(" {p}")).unwrap_or_default()
            ));
        }
        if let Some(path) = &self.path {
            let file = walked(dir, canonical_dir, &normal(&built.join(path)));
            let (kind, name) = kind_and_name(document);
            return match sources.line_of(&file, &kind, &name) {
                Some(line) => Place::File {
                    file: file.display().to_string(),
                    line,
                },
                None => Place::Unplaced(format!("{kind}/{name} not found in {}", file.display())),
            };
        }
        match (&self.configured_by, &self.configured_in) {
            (Some(by), Some(k)) => Place::Unplaced(format!(
                "made by a {by} in {}",
                walked(dir, canonical_dir, &normal(&built.join(k))).display()
            )),
            _ => Place::Unplaced("kustomize gave it no source file".into()),
        }
    }
}

/// `absolute` (a normalised absolute path) as the walk names it: relative
/// to `dir` as walked, which is `canonical_dir` on disk.
fn walked(dir: &Path, canonical_dir: &Path, absolute: &Path) -> PathBuf {
    let Some(relative) = relative(canonical_dir, absolute) else {
        return absolute.to_path_buf();
    };
    let joined = normal(&dir.join(relative));
    // Keep the walk's leading `./`, as its own files are named.
    if matches!(dir.components().next(), Some(Component::CurDir)) && !joined.starts_with("..") {
        Path::new(".").join(joined)
    } else {
        joined
    }
}

/// The path from the folder `from` to `to`, both absolute and normalised.
pub fn relative(from: &Path, to: &Path) -> Option<PathBuf> {
    if !from.is_absolute() || !to.is_absolute() {
        return None;
    }
    let from: Vec<Component<'_>> = from.components().collect();
    let to: Vec<Component<'_>> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for part in &to[common..] {
        out.push(part);
    }
    Some(out)
}

/// `kind` and `metadata.name` of a document as kustomize writes it: both
/// at the indents kyaml gives them (`kind:` at the start of a line,
/// `name:` two spaces into `metadata:`).
fn kind_and_name(document: &str) -> (String, String) {
    let (mut kind, mut name, mut in_metadata) = (String::new(), String::new(), false);
    for line in document.lines() {
        if indent(line) == 0 {
            in_metadata = line.trim_end() == "metadata:";
            if let Some(k) = value_of(line, "kind:") {
                kind = k.to_owned();
            }
        } else if in_metadata
            && indent(line) == 2
            && let Some(n) = value_of(line, "name:")
        {
            name = n.to_owned();
        }
    }
    (kind, name)
}

/// The source files read so far: each document's kind, name and line.
#[derive(Debug, Default)]
struct SourceFiles {
    read: HashMap<PathBuf, Vec<(String, String, u64)>>,
}

/// The most of a source file read to place objects in it.
const MAX_SOURCE: u64 = 64 << 20;

impl SourceFiles {
    /// The line of the object `kind`/`name` in `file`. kustomize may have
    /// renamed it (`namePrefix`, `nameSuffix`): the file's object of that
    /// kind whose name the built name holds (the longest), else the file's
    /// only object of that kind.
    fn line_of(&mut self, file: &Path, kind: &str, name: &str) -> Option<u64> {
        let objects = self.read.entry(file.to_path_buf()).or_insert_with(|| objects_in(file));
        let of_kind: Vec<&(String, String, u64)> = objects.iter().filter(|(k, _, _)| k == kind).collect();
        if let Some((_, _, line)) = of_kind.iter().find(|(_, n, _)| n == name) {
            return Some(*line);
        }
        let held = of_kind
            .iter()
            .filter(|(_, n, _)| !n.is_empty() && name.contains(n.as_str()))
            .max_by_key(|(_, n, _)| n.len());
        match (held, of_kind.as_slice()) {
            (Some((_, _, line)), _) => Some(*line),
            (None, [(_, _, line)]) => Some(*line),
            _ => None,
        }
    }
}

/// An object of a source file, parsed again with positions to place
/// findings at its fields: only for an object with findings.
pub struct SourceObject {
    tree: serde_saphyr::Spanned<crate::yaml::Node>,
    /// The line of the document's first line in the file.
    first_line: u64,
}

impl SourceObject {
    /// The object that starts at `line` of `file`, as [`objects_in`]
    /// counts lines. `None` when the file or the object is gone, or does
    /// not parse.
    pub fn read(file: &str, line: u64) -> Option<Self> {
        let text = read_source(Path::new(file))?;
        let document = Document::split(0, &text)
            .into_iter()
            .find(|d| d.first_line + leading_lines(d.text) == line)?;
        Some(SourceObject {
            tree: document.tree()?,
            first_line: document.first_line,
        })
    }

    /// Where `field` (its segments from the object's root) is: the key or
    /// item a reader looks for.
    pub fn locate(&self, field: &[crate::field::Segment]) -> Option<crate::yaml::Position> {
        let mut at = crate::yaml::locate(&self.tree, field);
        if at.line == 0 {
            return None;
        }
        at.line += self.first_line - 1;
        Some(at)
    }
}

/// A source file's text, at most [`MAX_SOURCE`] bytes of it.
fn read_source(file: &Path) -> Option<String> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_SOURCE).read_to_string(&mut text))
        .ok()?;
    Some(text)
}

/// The lines before a document's object: blank, comments, `---`.
fn leading_lines(text: &str) -> u64 {
    text.lines()
        .take_while(|l| {
            let t = l.trim();
            t.is_empty() || t.starts_with('#') || t.starts_with("---")
        })
        .count() as u64
}

/// Each document's kind, name, and the line it starts at (its first line
/// that is not blank, a comment or `---`).
fn objects_in(file: &Path) -> Vec<(String, String, u64)> {
    let Some(text) = read_source(file) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for document in Document::split(0, &text) {
        let Ok(value) =
            serde_saphyr::from_str_with_options::<serde_json::Value>(document.text, crate::yaml::yaml_options())
        else {
            continue;
        };
        let field = |pointer: &str| value.pointer(pointer).and_then(|v| v.as_str()).unwrap_or("").to_owned();
        out.push((
            field("/kind"),
            field("/metadata/name"),
            document.first_line + leading_lines(document.text),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_taken_out_and_read() {
        let doc = "apiVersion: v1\nkind: Service\nmetadata:\n  annotations:\n    alpha.config.kubernetes.io/transformations: |\n      - configuredIn: ../o/kustomization.yaml\n        configuredBy:\n          apiVersion: builtin\n          kind: PatchTransformer\n    config.kubernetes.io/origin: |\n      path: ../b/svc.yaml\n  name: b-svc\nspec: {}\n";
        let marks = Marks::taken_from(doc);
        assert_eq!(
            marks.stripped,
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: b-svc\nspec: {}\n"
        );
        assert_eq!(marks.patched_in, ["../o/kustomization.yaml"]);
        assert_eq!(marks.origin.and_then(|o| o.path).as_deref(), Some("../b/svc.yaml"));
        let kept =
            "metadata:\n  annotations:\n    a: b\n    config.kubernetes.io/origin: |\n      path: x.yaml\n  name: n\n";
        assert_eq!(
            Marks::taken_from(kept).stripped,
            "metadata:\n  annotations:\n    a: b\n  name: n\n"
        );
        assert_eq!(kind_and_name(doc), ("Service".into(), "b-svc".into()));
    }

    #[test]
    fn paths_are_named_as_walked() {
        assert_eq!(
            relative(Path::new("/a/b/c"), Path::new("/a/d/e.yaml")),
            Some(PathBuf::from("../../d/e.yaml"))
        );
        assert_eq!(
            walked(
                Path::new("./o/prod"),
                Path::new("/r/o/prod"),
                Path::new("/r/base/d.yaml")
            ),
            PathBuf::from("./base/d.yaml")
        );
        assert_eq!(
            walked(Path::new("o/prod"), Path::new("/r/o/prod"), Path::new("/r/base/d.yaml")),
            PathBuf::from("base/d.yaml")
        );
    }
}
