//! From a Kubernetes field path to the line and column in the manifest.

use serde_saphyr::Spanned;

use super::node::{Node, Position};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
}

/// Parses `spec.devices.requests[1].firstAvailable[0]` and map keys such as
/// `metadata.labels[app]`.
pub fn parse_path(path: &str) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('[') {
            let end = inner.find(']').unwrap_or(inner.len());
            let token = &inner[..end];
            segments.push(match token.parse::<usize>() {
                Ok(i) => Segment::Index(i),
                Err(_) => Segment::Key(token.to_owned()),
            });
            rest = inner.get(end + 1..).unwrap_or("");
        } else {
            let rest_trimmed = rest.strip_prefix('.').unwrap_or(rest);
            let end = rest_trimmed.find(['.', '[']).unwrap_or(rest_trimmed.len());
            if end > 0 {
                segments.push(Segment::Key(rest_trimmed[..end].to_owned()));
            }
            rest = &rest_trimmed[end..];
        }
    }
    segments
}

/// The position of the deepest node on `path` that exists in `doc`: the
/// key of a map entry (where a reader looks for the field), the item of a
/// list. Internal paths that differ from the wire format are bridged: a
/// v1beta1 request has no `exactly`, a v1beta1 device nests under `basic`.
pub fn locate(doc: &Spanned<Node>, path: &[Segment]) -> Position {
    let mut node = doc;
    let mut at = Position::from(&doc.referenced);
    let mut i = 0;
    while i < path.len() {
        match (&node.value, &path[i]) {
            (Node::Map(entries), Segment::Key(key)) => {
                if let Some((k, v)) = entries.iter().find(|(k, _)| &k.value.0 == key) {
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
            (Node::Seq(items), Segment::Index(n)) => match items.get(*n) {
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

    #[test]
    fn paths_parse() {
        assert_eq!(
            parse_path("spec.devices.requests[1].firstAvailable[0]"),
            vec![
                Segment::Key("spec".into()),
                Segment::Key("devices".into()),
                Segment::Key("requests".into()),
                Segment::Index(1),
                Segment::Key("firstAvailable".into()),
                Segment::Index(0),
            ]
        );
        assert_eq!(
            parse_path("spec.devices[0].attributes[gpu.example.com/model].string"),
            vec![
                Segment::Key("spec".into()),
                Segment::Key("devices".into()),
                Segment::Index(0),
                Segment::Key("attributes".into()),
                Segment::Key("gpu.example.com/model".into()),
                Segment::Key("string".into()),
            ]
        );
        assert_eq!(parse_path(""), vec![]);
    }

    fn doc(text: &str) -> Spanned<Node> {
        serde_saphyr::from_str(text).expect("parses")
    }

    #[test]
    fn locates_fields_and_falls_back_to_the_deepest_existing() {
        let d = doc(
            "kind: ResourceClaim\nspec:\n  devices:\n    requests:\n    - name: gpu\n      exactly:\n        tolerations:\n        - key: k\n          effect: Bogus\n",
        );
        let at = |p: &str| {
            let pos = locate(&d, &parse_path(p));
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
    fn bridges_v1beta1_layouts() {
        let claim =
            doc("spec:\n  devices:\n    requests:\n    - name: gpu\n      tolerations:\n      - operator: In\n");
        let pos = locate(
            &claim,
            &parse_path("spec.devices.requests[0].exactly.tolerations[0].operator"),
        );
        assert_eq!((pos.line, pos.column), (6, 9));
        let slice = doc("spec:\n  devices:\n  - name: d\n    basic:\n      taints:\n      - key: k\n");
        let pos = locate(&slice, &parse_path("spec.devices[0].taints[0].key"));
        assert_eq!((pos.line, pos.column), (6, 9));
    }
}
