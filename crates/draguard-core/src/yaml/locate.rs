//! From a Kubernetes field path to the line and column in the manifest.

use serde_saphyr::Spanned;

use super::node::{Node, Position};
use crate::field::Segment;

/// The position of the deepest node on the path of `segments` that exists
/// in `doc`: the key of a map entry (where a reader looks for the field),
/// the item of a list. Internal paths that differ from the wire format are
/// bridged: a v1beta1 request has no `exactly`, a v1beta1 device nests
/// under `basic`.
pub fn locate(doc: &Spanned<Node>, segments: &[Segment]) -> Position {
    let mut node = doc;
    let mut at = Position::from(&doc.referenced);
    let mut i = 0;
    while i < segments.len() {
        let name = match &segments[i] {
            Segment::Field(name) => Some(&**name),
            Segment::Key(key) => Some(key.as_str()),
            Segment::Index(_) => None,
        };
        match (&node.value, name, &segments[i]) {
            (Node::Map(entries), Some(key), _) => {
                // The last of a key given twice: the one kubectl keeps.
                if let Some((k, v)) = entries.iter().rev().find(|(k, _)| k.value.0 == key) {
                    at = Position::from(&k.referenced);
                    node = v;
                } else if key == "exactly" {
                    // v1beta1 flattened request: the fields sit on the request.
                } else if let Some((_, basic)) = entries.iter().find(|(k, _)| k.value.0 == "basic") {
                    node = basic;
                    continue;
                } else {
                    return at;
                }
            }
            (Node::Seq(items), None, Segment::Index(n)) => match items.get(*n) {
                Some(item) => {
                    at = Position::from(&item.referenced);
                    node = item;
                }
                None => return at,
            },
            _ => return at,
        }
        i += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Path;

    fn doc(text: &str) -> Spanned<Node> {
        serde_saphyr::from_str(text).expect("parses")
    }

    #[test]
    fn locates_fields_and_falls_back_to_the_deepest_existing() {
        let d = doc(
            "kind: ResourceClaim\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n        tolerations:\n        - key: k\n          effect: Bogus\n",
        );
        let at = |p: &str| {
            let pos = locate(&d, Path::parse(p).segments());
            (pos.line, pos.column)
        };
        assert_eq!(at("spec.devices.requests[0].exactly.tolerations[0].effect"), (9, 11));
        assert_eq!(at("spec.devices.requests[0].exactly.tolerations[0]"), (8, 11));
        assert_eq!(
            at("spec.devices.requests[0].exactly.count"),
            (6, 7),
            "missing field: its parent"
        );
        assert_eq!(at("spec.devices.requests[3]"), (4, 5));
    }

    #[test]
    fn walks_map_keys_whole() {
        let d = doc("metadata:\n  labels:\n    app: a\n    example.com/tier: gold\n");
        // (path, line, column)
        let cases = [
            (Path::new("metadata").child("labels").key("example.com/tier"), 4, 5),
            (Path::new("metadata").child("labels").key("app"), 3, 5),
            (Path::new("metadata").child("labels").key("missing"), 2, 3),
            (Path::new("metadata").child("labels").index(0), 2, 3),
            (Path::new(""), 1, 1),
        ];
        for (path, line, column) in cases {
            let pos = locate(&d, path.segments());
            assert_eq!((pos.line, pos.column), (line, column), "{path}");
        }
    }

    #[test]
    fn bridges_v1beta1_layouts() {
        let claim =
            doc("spec:\n  devices:\n    requests:\n    - name: gpu\n      tolerations:\n      - operator: In\n");
        let path = Path::new("spec")
            .child("devices")
            .child("requests")
            .index(0)
            .child("exactly")
            .child("tolerations")
            .index(0)
            .child("operator");
        let pos = locate(&claim, path.segments());
        assert_eq!((pos.line, pos.column), (6, 9));
        let slice = doc("spec:\n  devices:\n  - name: d\n    basic:\n      taints:\n      - key: k\n");
        let pos = locate(&slice, Path::parse("spec.devices[0].taints[0].key").segments());
        assert_eq!((pos.line, pos.column), (6, 9));
    }
}
