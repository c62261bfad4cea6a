//! Reads snapshot files for `draguard impact --snapshot` one object at a
//! time. `kubectl get resourceslices,resourceclaims,pods -A -o json` of a
//! 100,000-claim cluster is one 50 MB List; parsed whole into values (and
//! its items copied out) it took 2.68 GB. Here a List's `items` are visited
//! one by one: each item is parsed, reduced into the [`Snapshot`] and
//! dropped, so memory follows what the snapshot keeps, not the file.
//!
//! JSON is parsed by serde_json; anything else (or JSON it refuses) as
//! YAML, with the parser limits `check` uses. A document that is a List
//! (it has an `items` sequence) contributes its items; any other document
//! is one object.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::input;
use crate::impact::snapshot::Snapshot;

/// The objects of `paths` (files, folders, `-`), read into one snapshot.
pub fn read(paths: &[PathBuf]) -> Result<Snapshot, String> {
    let inputs = input::read_sources(paths, &input::Walk::default());
    if let Some(problem) = inputs.problems.first() {
        return Err(problem.to_string());
    }
    let mut snapshot = Snapshot::default();
    for source in inputs.sources {
        read_text(&source.name, &source.text, &mut snapshot)?;
    }
    Ok(snapshot)
}

/// Reads the documents of one source into `snapshot`.
pub fn read_text(name: &str, text: &str, snapshot: &mut Snapshot) -> Result<(), String> {
    if text.trim_start().starts_with(['{', '[']) {
        let mut parts = Snapshot::default();
        let json = serde_json::Deserializer::from_str(text)
            .into_iter::<Document>()
            .try_for_each(|part| part.map(|part| parts.merge(part.0)));
        if json.is_ok() {
            snapshot.merge(parts);
            return Ok(());
        }
    }
    let parts: Vec<Document> = serde_saphyr::from_multiple_with_options(text, crate::yaml::yaml_options())
        .map_err(|e| format!("{name}: {}", crate::yaml::messages::message(&e, text)))?;
    for part in parts {
        snapshot.merge(part.0);
    }
    Ok(())
}

/// What one document adds to a snapshot.
struct Document(Snapshot);

impl<'de> Deserialize<'de> for Document {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(DocumentVisitor)
    }
}

struct DocumentVisitor;

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Document;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object or List")
    }

    /// An object, or a List whose items are read as they come. The keys
    /// of a List other than `items` are not needed (kubectl writes `items`
    /// before `kind`, so the kind cannot decide in time).
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
        let mut snapshot = Snapshot::default();
        let mut object = Map::new();
        let mut listed = false;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                listed |= map.next_value_seed(Items(&mut snapshot))?;
            } else {
                object.insert(key, map.next_value()?);
            }
        }
        if !listed {
            snapshot.add(&Value::Object(object));
        }
        Ok(Document(snapshot))
    }

    // Anything else in a document is not an object: nothing to read.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Document, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Document(Snapshot::default()))
    }

    fn visit_unit<E>(self) -> Result<Document, E> {
        Ok(Document(Snapshot::default()))
    }

    fn visit_none<E>(self) -> Result<Document, E> {
        Ok(Document(Snapshot::default()))
    }

    fn visit_bool<E>(self, _: bool) -> Result<Document, E> {
        Ok(Document(Snapshot::default()))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Document, E> {
        Ok(Document(Snapshot::default()))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Document, E> {
        Ok(Document(Snapshot::default()))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Document, E> {
        Ok(Document(Snapshot::default()))
    }

    fn visit_str<E>(self, _: &str) -> Result<Document, E> {
        Ok(Document(Snapshot::default()))
    }
}

/// A List's `items`, each read into the snapshot and dropped; `true` when
/// they were a sequence.
struct Items<'s>(&'s mut Snapshot);

impl<'de> DeserializeSeed<'de> for Items<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Items<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a List's items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while let Some(item) = seq.next_element::<Value>()? {
            self.0.add(&item);
        }
        Ok(true)
    }

    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_none<E>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }

    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST_JSON: &str = r#"{"apiVersion": "v1", "items": [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
         "spec": {"driver": "gpu.example.com", "nodeName": "node-a", "pool": {"name": "node-a", "resourceSliceCount": 1},
                  "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ml", "managedFields": [{}]},
         "status": {"allocation": {"devices": {"results": [{"request": "r", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"}]}},
                    "reservedFor": [{"resource": "pods", "name": "p-0", "uid": "1"}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p-0", "namespace": "ml"}, "spec": {"nodeName": "node-a"}}
    ], "kind": "List", "metadata": {"resourceVersion": ""}}"#;

    fn summary(snapshot: &Snapshot) -> (usize, usize, Option<&str>, usize) {
        (
            snapshot.devices.len(),
            snapshot.claims.len(),
            snapshot.node_of("ml", "p-0"),
            snapshot.skipped.len(),
        )
    }

    #[test]
    fn a_json_list_yaml_documents_and_a_flow_mapping_read_the_same() {
        let mut json = Snapshot::default();
        read_text("list.json", LIST_JSON, &mut json).expect("JSON");
        assert_eq!(summary(&json), (2, 1, Some("node-a"), 0));
        assert_eq!(json.claims[0].pods, ["p-0"]);
        // The List reads as YAML too, and so do separate documents.
        let yaml = format!(
            "{LIST_JSON}\n---\napiVersion: v1\nkind: Pod\nmetadata: {{name: p-1, namespace: ml}}\nspec: {{nodeName: node-b}}\n---\n"
        );
        let mut documents = Snapshot::default();
        read_text("list.yaml", &yaml, &mut documents).expect("YAML");
        assert_eq!(summary(&documents), (2, 1, Some("node-a"), 0));
        assert_eq!(documents.node_of("ml", "p-1"), Some("node-b"));
        let mut flow = Snapshot::default();
        read_text(
            "flow.yaml",
            "{apiVersion: v1, kind: Pod, metadata: {name: p-0, namespace: ml}, spec: {nodeName: node-c}}",
            &mut flow,
        )
        .expect("a YAML flow mapping, not JSON");
        assert_eq!(flow.node_of("ml", "p-0"), Some("node-c"));
    }

    #[test]
    fn what_is_not_an_object_adds_nothing_and_bad_yaml_names_the_file() {
        let mut snapshot = Snapshot::default();
        read_text(
            "x.yaml",
            "hello\n---\n[1, 2]\n---\nitems: null\nkind: List\n",
            &mut snapshot,
        )
        .expect("read");
        assert!(snapshot.is_empty());
        let error = read_text("bad.yaml", "items: [\n", &mut snapshot).expect_err("unclosed");
        assert!(error.starts_with("bad.yaml: "), "{error}");
    }
}
