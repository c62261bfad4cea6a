//! YAML documents with the source position of every node, so a finding at
//! `spec.devices.requests[0].exactly.tolerations[1].effect` can point at the
//! line and column of that field in the manifest.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::{Location, Spanned};

/// A YAML node with positions: maps keep their keys' positions too.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Map(Vec<(Spanned<String>, Spanned<Node>)>),
    Seq(Vec<Spanned<Node>>),
    Scalar,
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Scalar)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some((k, v)) = map.next_entry::<Spanned<String>, Spanned<Node>>()? {
            entries.push((k, v));
        }
        Ok(Node::Map(entries))
    }
}

/// Where a field is: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    pub line: u64,
    pub column: u64,
}

impl From<&Location> for Position {
    fn from(l: &Location) -> Self {
        Position {
            line: l.line(),
            column: l.column(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_carry_positions() {
        let text = "a: 1\nspec:\n  list:\n  - x: 1\n    effect: Bogus\n---\nb: 2\n";
        let docs: Vec<Spanned<Node>> = serde_saphyr::from_multiple(text).expect("parses");
        assert_eq!(docs.len(), 2);
        let Node::Map(entries) = &docs[0].value else {
            panic!("map")
        };
        assert_eq!(entries[1].0.value, "spec");
        assert_eq!(
            Position::from(&entries[1].0.referenced),
            Position { line: 2, column: 1 }
        );
        let Node::Map(spec) = &entries[1].1.value else {
            panic!("map")
        };
        let Node::Seq(list) = &spec[0].1.value else {
            panic!("seq")
        };
        let Node::Map(item) = &list[0].value else { panic!("map") };
        assert_eq!(item[1].0.value, "effect");
        assert_eq!(Position::from(&item[1].0.referenced), Position { line: 5, column: 5 });
        assert_eq!(Position::from(&item[1].1.referenced), Position { line: 5, column: 13 });
    }
}
