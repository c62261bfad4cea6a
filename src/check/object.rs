//! An object found in the input, as `check` holds it between reading and
//! judging: where it is, and as little else as its verdict needs.
//!
//! Memory follows the input, not more. An item of a JSON document (a
//! `kubectl get -A -o json` List, a `jq -c` stream) holds no text of its
//! own: it is read again from its byte range of the source when its turn
//! comes (serde_json reads it many times faster than it was found). A YAML
//! document holds its compact JSON text, because reading YAML again would
//! cost as much as the first reading. Identities are kept only where old
//! versions are given to find them by.

use std::sync::OnceLock;

use serde_json::Value;
use serde_saphyr::Spanned;

use super::owners::{Controller, Ownership};
use super::{facts, identity, identity_of, input, text};
use crate::field::Segment;
use crate::yaml::{Node, Position};

/// A document's tree with positions, parsed once, when a finding (or an
/// item of a List) first needs it. Boxed: most documents never parse one,
/// and an empty slot per document costs a pointer, not a tree.
pub(super) type Tree = OnceLock<Option<Box<Spanned<Node>>>>;

/// group/kind/namespace/name, to find an object's old version: the
/// namespace as written (empty when none is), placed by its kind's scope
/// only once every CustomResourceDefinition is read (`super::placed`).
pub(super) type Identity = (String, String, String, String);

pub(super) struct Object {
    pub source: usize,
    /// Its document, as an index into the documents of every source.
    pub document: usize,
    pub origin: Origin,
    /// Its compact JSON text, for an object of a YAML document; `None`
    /// for a JSON item, whose text is its range of the document.
    raw: Option<Box<str>>,
    /// Whether the facts pass reads it (`facts::may_tell`).
    pub fact: bool,
    /// It is no Kubernetes object (no apiVersion or kind), as its review
    /// will find: known before any is judged, so the first of a file can
    /// say how many its file holds when it is reported.
    pub not_kubernetes: bool,
    /// Only when old versions are given (`check --old`).
    pub identity: Option<Box<Identity>>,
    /// It is a CustomResourceDefinition: what it says of its kind's scope
    /// is read before any object is judged (`scope::Scopes::learn`).
    pub definition: bool,
    /// Its uid and controller, only when objects are judged through
    /// their controllers (`audit`).
    pub ownership: Option<Box<Ownership>>,
    /// Its document gives a key twice in one mapping (read as kubectl
    /// reads it, the last one winning): its judgement says where.
    pub duplicates: bool,
}

/// Where an object's text is in its document, to find a finding's line.
pub(super) enum Origin {
    /// At this path of the document's YAML tree: `items[i]` of a List,
    /// `[i]` of a top-level array, nothing for a document of its own.
    Path(Vec<Segment>),
    /// Its own JSON text: this byte range of the document, which starts at
    /// this position in the source (`json::Item`).
    Json {
        range: std::ops::Range<usize>,
        start: Position,
    },
}

/// What an object's identity is read from, without reading the rest.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow, default, rename = "apiVersion")]
    api_version: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    metadata: Option<MetadataHead<'a>>,
}

#[derive(serde::Deserialize)]
struct MetadataHead<'a> {
    #[serde(borrow, default)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, rename = "generateName")]
    generate_name: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    uid: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default, rename = "ownerReferences")]
    owner_references: Option<Vec<OwnerHead<'a>>>,
}

/// An entry of `metadata.ownerReferences`.
#[derive(serde::Deserialize)]
struct OwnerHead<'a> {
    #[serde(borrow, default, rename = "apiVersion")]
    api_version: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    name: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    uid: std::borrow::Cow<'a, str>,
    #[serde(default)]
    controller: Option<bool>,
}

impl OwnerHead<'_> {
    fn controller(&self) -> Controller {
        Controller {
            api_version: self.api_version.as_ref().into(),
            kind: self.kind.as_ref().into(),
            name: self.name.as_ref().into(),
            uid: self.uid.as_ref().into(),
        }
    }
}

/// How objects are read: what they are found by.
#[derive(Clone, Copy)]
pub(super) struct Reading {
    /// Whether identities are kept (old versions are given).
    pub identities: bool,
    /// Whether uids and controllers are kept (`audit`).
    pub owners: bool,
}

impl Object {
    /// An object from its compact JSON text (`json`); only its head is
    /// read here. The text is kept only for an object of a YAML document
    /// (`Origin::Path`): a JSON item is read again from its range.
    pub fn new(source: usize, document: usize, origin: Origin, json: String, reading: Reading) -> Self {
        // A struct reads from an array too: only an object is read as one.
        let head = match json.trim_start().starts_with('{') {
            true => serde_json::from_str::<Head<'_>>(&json),
            false => Err(serde::de::Error::custom("not an object")),
        };
        let is_definition = super::scope::Scopes::is_definition;
        let (kind, has_api_version, definition, identity, ownership) = match head {
            Ok(head) => {
                let meta = head.metadata.as_ref();
                let ownership = reading.owners.then(|| Ownership {
                    uid: meta.and_then(|m| m.uid.as_deref()).map(Into::into),
                    controller: meta
                        .and_then(|m| m.owner_references.as_ref())
                        .and_then(|refs| refs.iter().find(|r| r.controller == Some(true)))
                        .map(|r| Box::new(r.controller())),
                });
                let identity = reading
                    .identities
                    .then(|| {
                        identity_of(
                            head.kind.as_deref(),
                            head.api_version.as_deref(),
                            meta.and_then(|m| m.name.as_deref().or(m.generate_name.as_deref())),
                            meta.and_then(|m| m.namespace.as_deref()),
                        )
                    })
                    .flatten();
                (
                    head.kind.as_deref().map(str::to_owned),
                    head.api_version.is_some(),
                    is_definition(head.api_version.as_deref(), head.kind.as_deref()),
                    identity,
                    ownership,
                )
            }
            // A field of another type than a string (`kind: 3`): read the
            // way the review will read it.
            Err(_) => {
                let value: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
                let identity = reading.identities.then(|| identity(&value)).flatten();
                // (A malformed ownerReferences lands here too: the object
                // is judged itself.)
                let ownership = reading.owners.then(|| Ownership {
                    uid: text(&value, "/metadata/uid").map(Into::into),
                    controller: None,
                });
                (
                    text(&value, "/kind").map(str::to_owned),
                    text(&value, "/apiVersion").is_some(),
                    is_definition(text(&value, "/apiVersion"), text(&value, "/kind")),
                    identity,
                    ownership,
                )
            }
        };
        // The review's test (`check_object`): no kind, or no apiVersion.
        let not_kubernetes = kind.as_deref().is_none_or(str::is_empty) || !has_api_version;
        let fact = facts::may_tell(kind.as_deref(), &json);
        Object {
            source,
            document,
            raw: match origin {
                Origin::Path(_) => Some(json.into_boxed_str()),
                Origin::Json { .. } => None,
            },
            origin,
            fact,
            not_kubernetes,
            identity: identity.map(Box::new),
            definition,
            ownership: ownership.map(Box::new),
            duplicates: false,
        }
    }

    /// The object's text: its compact JSON, or its JSON item as written.
    fn text<'d>(&'d self, documents: &[input::Document<'d>]) -> &'d str {
        match (&self.raw, &self.origin) {
            (Some(raw), _) => raw,
            (None, Origin::Json { range, .. }) => documents
                .get(self.document)
                .and_then(|d| d.text.get(range.clone()))
                .unwrap_or("null"),
            (None, Origin::Path(_)) => "null",
        }
    }

    /// The object's tree, read from its text each time it is needed (JSON
    /// reads many times faster than the YAML it came from). A JSON item was
    /// read whole when it was found (`json::Item::json`), so it reads.
    pub fn tree(&self, documents: &[input::Document<'_>]) -> Value {
        serde_json::from_str(self.text(documents)).unwrap_or(Value::Null)
    }
}
