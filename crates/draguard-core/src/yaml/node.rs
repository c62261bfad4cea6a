//! YAML documents with the source position of every node, so a finding at
//! `spec.devices.requests[0].exactly.tolerations[1].effect` can point at the
//! line and column of that field in the manifest.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_saphyr::{Location, Spanned};

/// A map key as text: YAML scalars other than strings (`null`, `true`,
/// `80`) become their text, as Kubernetes' YAML-to-JSON conversion does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyText(pub String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = KeyText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a scalar map key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyText, E> {
                Ok(KeyText(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<KeyText, E> {
                Ok(KeyText(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<KeyText, E> {
                Ok(KeyText("null".to_owned()))
            }
            fn visit_none<E: de::Error>(self) -> Result<KeyText, E> {
                Ok(KeyText("null".to_owned()))
            }
        }
        deserializer.deserialize_any(KeyVisitor)
    }
}

/// A YAML node with positions: maps keep their keys' positions too, and
/// scalars their value, so one parse gives both the JSON to review and
/// the positions to report.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Map(Vec<(Spanned<KeyText>, Spanned<Node>)>),
    Seq(Vec<Spanned<Node>>),
    Scalar(Value),
}

impl Node {
    /// The JSON value of this node (later duplicate keys win, as in YAML
    /// decoders Kubernetes uses).
    pub fn to_value(&self) -> Value {
        match self {
            Node::Scalar(v) => v.clone(),
            Node::Seq(items) => Value::Array(items.iter().map(|i| i.value.to_value()).collect()),
            Node::Map(entries) => {
                let mut map = serde_json::Map::with_capacity(entries.len());
                for (k, v) in entries {
                    map.insert(k.value.0.clone(), v.value.to_value());
                }
                Value::Object(map)
            }
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

/// The scalar visits of [`Node`]: YAML scalars as JSON values, `wrap`ped
/// into the visitor's type.
macro_rules! scalar_visits {
    ($wrap:expr) => {
        fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
            Ok($wrap(Value::Bool(v)))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v)))
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v)))
        }
        fn visit_i128<E: de::Error>(self, v: i128) -> Result<Self::Value, E> {
            Ok($wrap(
                i64::try_from(v).map_or_else(|_| Value::from(v as f64), Value::from),
            ))
        }
        fn visit_u128<E: de::Error>(self, v: u128) -> Result<Self::Value, E> {
            Ok($wrap(
                u64::try_from(v).map_or_else(|_| Value::from(v as f64), Value::from),
            ))
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            Ok($wrap(
                serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
            ))
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok($wrap(Value::from(v)))
        }
        fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
            Ok($wrap(Value::String(v)))
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($wrap(Value::Null))
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($wrap(Value::Null))
        }
    };
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    scalar_visits!(Node::Scalar);

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
        while let Some((k, v)) = map.next_entry::<Spanned<KeyText>, Spanned<Node>>()? {
            entries.push((k, v));
        }
        Ok(Node::Map(entries))
    }
}

/// Where a field is: 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
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
        assert_eq!(entries[1].0.value.0, "spec");
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
        assert_eq!(item[1].0.value.0, "effect");
        assert_eq!(Position::from(&item[1].0.referenced), Position { line: 5, column: 5 });
        assert_eq!(Position::from(&item[1].1.referenced), Position { line: 5, column: 13 });
        assert_eq!(
            docs[0].value.to_value(),
            serde_json::json!({"a": 1, "spec": {"list": [{"x": 1, "effect": "Bogus"}]}})
        );
    }

    #[test]
    fn scalars_keep_their_yaml_types() {
        let doc: Spanned<Node> =
            serde_saphyr::from_str("i: 3\nf: 1.5\nb: true\nn: null\ns: '3'\nq: \"yes\"\n80: port\nnull: {}\n")
                .expect("parses");
        assert_eq!(
            doc.value.to_value(),
            // YAML 1.1, as kubectl reads it: a plain `n` is false, and a key
            // is written as text the way Kubernetes' YAML-to-JSON does.
            serde_json::json!({"i": 3, "f": 1.5, "b": true, "false": null, "s": "3", "q": "yes", "80": "port", "null": {}})
        );
    }
}
