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

/// The scalar visits shared by [`Node`] and [`PlainValue`]: YAML scalars
/// as JSON values, `wrap`ped into the visitor's type.
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

/// A YAML document read straight into JSON, with [`Node::to_value`]'s
/// meaning but no positions: `check` reads every document this way, and
/// parses one again with positions only when a finding needs them.
pub type PlainValue = Plain<false>;

/// A JSON document read into JSON by `serde_json`, refusing a key given
/// twice in one object as the YAML parser does (`serde_json::Value` keeps
/// the last silently): `check`'s JSON path means what its YAML path does.
pub type UniqueKeysValue = Plain<true>;

/// A document as JSON; `UNIQUE_KEYS` refuses duplicate keys itself (the
/// YAML parser already does, and merges `<<` before the visitor sees them).
pub struct Plain<const UNIQUE_KEYS: bool>(pub Value);

impl<'de, const UNIQUE_KEYS: bool> Deserialize<'de> for Plain<UNIQUE_KEYS> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PlainVisitor::<UNIQUE_KEYS>)
    }
}

struct PlainVisitor<const UNIQUE_KEYS: bool>;

impl<'de, const UNIQUE_KEYS: bool> Visitor<'de> for PlainVisitor<UNIQUE_KEYS> {
    type Value = Plain<UNIQUE_KEYS>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    scalar_visits!(Plain);

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Plain::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(Plain::<UNIQUE_KEYS>(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Plain(Value::Array(items)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = serde_json::Map::new();
        while let Some((KeyText(k), Plain::<UNIQUE_KEYS>(v))) = map.next_entry()? {
            match entries.entry(k) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(v);
                }
                serde_json::map::Entry::Occupied(slot) if UNIQUE_KEYS => {
                    return Err(de::Error::custom(super::messages::duplicate_key(slot.key())));
                }
                // Later duplicate keys win, as in `Node::to_value`.
                serde_json::map::Entry::Occupied(mut slot) => {
                    slot.insert(v);
                }
            }
        }
        Ok(Plain(Value::Object(entries)))
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

    /// Read without positions, a document means the same JSON.
    #[test]
    fn plain_values_equal_the_positioned_ones() {
        let text = "i: 3\nf: 1.5\nb: true\nn: null\ns: '3'\nq: \"yes\"\n80: port\nnull: {}\nl: [1, {a: [x]}]\n";
        let doc: Spanned<Node> = serde_saphyr::from_str(text).expect("parses");
        let plain: PlainValue = serde_saphyr::from_str(text).expect("parses");
        assert_eq!(plain.0, doc.value.to_value());
    }

    /// A merge (`<<`) that a key then overrides is no duplicate: the parser
    /// merges before the visitor sees the keys.
    #[test]
    fn merge_overrides_are_no_duplicates() {
        let text = "base: &b {a: 1, c: 2}\nx:\n  <<: *b\n  a: 3\n";
        let plain: PlainValue = serde_saphyr::from_str(text).expect("parses");
        assert_eq!(plain.0["x"], serde_json::json!({"a": 3, "c": 2}));
    }

    /// JSON through serde_json means what it means through YAML, and a key
    /// given twice is refused in the words the YAML path uses.
    #[test]
    fn json_values_refuse_duplicate_keys() {
        let text = r#"{"i": 3, "f": 1.5, "b": true, "n": null, "l": [1, {"a": ["x"]}], "big": 18446744073709551615, "neg": -7}"#;
        let json: UniqueKeysValue = serde_json::from_str(text).expect("parses");
        let yaml: PlainValue = serde_saphyr::from_str(text).expect("parses");
        assert_eq!(json.0, yaml.0);
        let err = serde_json::from_str::<UniqueKeysValue>(r#"{"spec": {"a": 1, "a": 2}}"#)
            .err()
            .expect("a duplicate key");
        assert_eq!(
            err.to_string(),
            "a is given twice in the same mapping: keep one (which one the apiserver keeps is not what you wrote) at line 1 column 25"
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
