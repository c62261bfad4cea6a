//! Keys given twice in one mapping. kubectl reads such a manifest (go-yaml
//! v2 through sigs.k8s.io/yaml: the last one wins), so draguard reads it
//! the same way and says where each repeated key is.

use serde_saphyr::Spanned;

use super::node::{Node, Position};
use crate::field::{Path, Segment};

/// Every key of `node` at `under` (a path into it) that repeats an earlier
/// key of its mapping: the field path of the repeated key (from `under`:
/// an object's own fields, for a List's item) and the position of the
/// repeat, in document order. Empty when `under` is not in `node`.
pub fn duplicate_keys(node: &Spanned<Node>, under: &[Segment]) -> Vec<(Path, Position)> {
    let mut at = node;
    for segment in under {
        let next = match (&at.value, segment) {
            (Node::Map(entries), Segment::Field(name)) => entries.iter().rev().find(|(k, _)| k.value.0 == **name),
            (Node::Map(entries), Segment::Key(name)) => entries.iter().rev().find(|(k, _)| k.value.0 == *name),
            (Node::Seq(items), Segment::Index(i)) => match items.get(*i) {
                Some(item) => {
                    at = item;
                    continue;
                }
                None => return Vec::new(),
            },
            _ => return Vec::new(),
        };
        let Some((_, value)) = next else {
            return Vec::new();
        };
        at = value;
    }
    let mut out = Vec::new();
    collect(at, &Path::new(""), &mut out);
    out
}

fn collect(node: &Spanned<Node>, path: &Path, out: &mut Vec<(Path, Position)>) {
    match &node.value {
        Node::Map(entries) => {
            for (i, (key, value)) in entries.iter().enumerate() {
                let field = path.child(&key.value.0);
                if entries[..i].iter().any(|(k, _)| k.value.0 == key.value.0) {
                    out.push((field.clone(), Position::from(&key.referenced)));
                }
                collect(value, &field, out);
            }
        }
        Node::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                collect(item, &path.index(i), out);
            }
        }
        Node::Scalar(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Spanned<Node> {
        serde_saphyr::from_str_with_options(text, crate::yaml::yaml_options_last_wins()).expect("parses")
    }

    #[test]
    fn repeated_keys_are_found_where_they_repeat() {
        let tree = doc("a: 1\nb:\n  - c: 1\n    c: 2\na: 3\n");
        let got: Vec<(String, u64, u64)> = duplicate_keys(&tree, &[])
            .into_iter()
            .map(|(p, at)| (p.to_string(), at.line, at.column))
            .collect();
        assert_eq!(got, [("b[0].c".to_owned(), 4, 5), ("a".to_owned(), 5, 1)]);
        assert_eq!(
            tree.value.to_value(),
            serde_json::json!({"a": 3, "b": [{"c": 2}]}),
            "the last one wins"
        );
    }

    #[test]
    fn under_a_path_only_its_subtree_counts() {
        let tree = doc("items:\n- {a: 1, a: 2}\n- {b: 1, b: 2}\nx: 1\nx: 2\n");
        let got: Vec<String> = duplicate_keys(&tree, &[Segment::Field("items".into()), Segment::Index(1)])
            .into_iter()
            .map(|(p, _)| p.to_string())
            .collect();
        assert_eq!(got, ["b"]);
    }
}
