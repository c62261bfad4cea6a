//! Where in the input an object's findings point: the document and its
//! place in it (`Located`, parsed again with positions only when a finding
//! needs one), and the decision's causes turned into findings there
//! (`Place`).

use super::input;
use super::object::{Object, Origin, Tree};
use super::{Finding, Severity};
use crate::field::{Path, Segment};
use crate::verdict::{Denial, ReviewError, Violation};
use crate::yaml::Position;

/// Where an object's findings are located in the input.
pub(super) struct Place<'a> {
    pub(super) located: &'a Located<'a>,
    pub(super) prefix: &'a [Segment],
    pub(super) kind: &'a str,
    /// The object's own position, for findings without a field.
    pub(super) position: Position,
}

impl Place<'_> {
    pub(super) fn at(&self, field: Option<&Path>) -> Position {
        field.map_or(self.position, |f| {
            self.located.locate(self.prefix, &manifest_path(self.kind, f))
        })
    }

    /// The decision's causes, audit entries and warnings, as findings.
    pub(super) fn record(&self, decision: &crate::verdict::Decision, findings: &mut Vec<Finding>) {
        let mut cause = |reason: &str, field: Option<&Path>, message: String, broken: Option<&Violation>| {
            findings.push(Finding {
                concept: broken.map(|v| v.concept),
                policy: broken.map(|v| v.policy.clone()),
                ..error_finding(reason, field.map(ToString::to_string), message, self.at(field))
            });
        };
        match &decision.denial {
            Some(Denial::Invalid { errors, .. }) => {
                for e in errors {
                    cause(e.kind.reason(), Some(&e.field), e.body(), None);
                }
            }
            Some(Denial::Forbidden { violations, .. }) => {
                // A violation without a field (quota) is a cause with an empty
                // field, as in the Status: reported at the object.
                let object = Path::new("");
                for v in violations {
                    cause(
                        "FieldValueForbidden",
                        Some(v.field.as_ref().unwrap_or(&object)),
                        v.message.clone(),
                        Some(v),
                    );
                }
            }
            // A decode error is reported where the shape went wrong.
            Some(Denial::BadRequest(ReviewError::Undecodable { source, .. })) if !source.field.is_empty() => cause(
                "BadRequest",
                Some(&source.field),
                format!("could not be decoded: {}", source.message),
                None,
            ),
            Some(Denial::BadRequest(e)) => cause("BadRequest", None, e.to_string(), None),
            None => {}
        }
        for entry in &decision.audit {
            findings.push(Finding {
                severity: Severity::Warning,
                field: None,
                reason: "PolicyAudit".into(),
                message: format!("audit: {entry}"),
                position: self.position,
                concept: None,
                policy: None,
            });
        }
        for warning in &decision.warnings {
            findings.push(Finding {
                severity: Severity::Warning,
                field: warning.field.as_ref().map(ToString::to_string),
                reason: "Warning".into(),
                message: warning.message.clone(),
                position: self.at(warning.field.as_ref()),
                concept: warning.concept,
                policy: warning.policy.clone(),
            });
        }
    }
}

pub(super) fn error_finding(reason: &str, field: Option<String>, message: String, position: Position) -> Finding {
    Finding {
        severity: Severity::Error,
        field,
        reason: reason.to_owned(),
        message,
        position,
        concept: None,
        policy: None,
    }
}

/// Where a reported field really is in the manifest: the apiserver reports
/// node taints under `metadata.taints`, but they are written in `spec`.
pub(super) fn manifest_path(kind: &str, field: &Path) -> Vec<Segment> {
    let mut segments = field.segments().to_vec();
    let is_field = |s: Option<&Segment>, name: &str| matches!(s, Some(Segment::Field(f)) if f == name);
    if kind == "Node" && is_field(segments.first(), "metadata") && is_field(segments.get(1), "taints") {
        segments[0] = Segment::Field("spec".into());
    }
    segments
}

/// Positions in one document, parsed again (once per document, shared by
/// its objects) only when a finding needs one: most objects have none, and
/// keeping every document's tree would cost more memory than the objects.
pub(super) struct Located<'a> {
    pub(super) document: Option<input::Document<'a>>,
    /// The column the document's first line starts at (a JSON item's
    /// text may start mid-line).
    pub(super) first_column: u64,
    pub(super) tree: Option<&'a Tree>,
}

impl<'a> Located<'a> {
    /// Where `object`'s positions are read, and its place in its document:
    /// a document's only object (or a JSON item) parses it alone into
    /// `own_tree`, which goes when the object is judged; the items of a
    /// YAML List share their document's tree.
    pub(super) fn of(
        object: &Object,
        documents: &[input::Document<'a>],
        trees: &'a [Tree],
        own_tree: &'a Tree,
    ) -> (Self, Vec<Segment>) {
        let document = documents.get(object.document).copied();
        match &object.origin {
            Origin::Path(prefix) => (
                Located {
                    document,
                    first_column: 1,
                    tree: if prefix.is_empty() {
                        Some(own_tree)
                    } else {
                        trees.get(object.document)
                    },
                },
                prefix.clone(),
            ),
            Origin::Json { range, start } => (
                Located {
                    document: document.and_then(|d| {
                        Some(input::Document {
                            source: d.source,
                            text: d.text.get(range.clone())?,
                            first_line: start.line,
                        })
                    }),
                    first_column: start.column,
                    tree: Some(own_tree),
                },
                Vec::new(),
            ),
        }
    }
}

impl Located<'_> {
    /// The keys given twice under `prefix` (the object's place in its
    /// document), at their source positions.
    pub(super) fn duplicates(&self, prefix: &[Segment]) -> Vec<(Path, Position)> {
        let Some(document) = self.document else {
            return Vec::new();
        };
        let Some(tree) = self
            .tree
            .and_then(|t| t.get_or_init(|| document.tree().map(Box::new)).as_deref())
        else {
            return Vec::new();
        };
        crate::yaml::duplicates::duplicate_keys(tree, prefix)
            .into_iter()
            .map(|(field, mut at)| {
                at.line += document.first_line - 1;
                if at.line == document.first_line {
                    at.column += self.first_column.saturating_sub(1);
                }
                (field, at)
            })
            .collect()
    }

    pub(super) fn locate(&self, prefix: &[Segment], field: &[Segment]) -> Position {
        let Some(document) = self.document else {
            return Position::default();
        };
        // The document's own start needs no parse: its first line of content.
        let on_first_line = |mut at: Position| {
            if at.line == document.first_line {
                at.column += self.first_column.saturating_sub(1);
            }
            at
        };
        if prefix.is_empty()
            && field.is_empty()
            && let Some(at) = document.start()
        {
            return on_first_line(at);
        }
        let Some(tree) = self
            .tree
            .and_then(|t| t.get_or_init(|| document.tree().map(Box::new)).as_deref())
        else {
            return Position::default();
        };
        let path: Vec<Segment> = prefix.iter().chain(field).cloned().collect();
        let mut at = crate::yaml::locate(tree, &path);
        if at.line > 0 {
            at.line += document.first_line - 1;
            at = on_first_line(at);
        }
        at
    }
}
