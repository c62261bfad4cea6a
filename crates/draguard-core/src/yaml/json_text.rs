//! A document read straight into compact JSON text, without building a
//! tree: `check` holds each object as that text until its turn comes, and
//! a tree per object (a map allocation per mapping) was most of its memory
//! traffic. The text means what [`super::node::Node::to_value`] means: YAML
//! scalars as JSON values, map keys as text.
//!
//! The same writer compacts JSON read by `serde_json`, where it also
//! refuses a key given twice (the YAML parser refuses those itself).

use std::fmt::{self, Write as _};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::node::KeyText;

/// A document as compact JSON text. `UNIQUE_KEYS` refuses a key given
/// twice in one mapping (for JSON input; the YAML parser already does).
pub struct JsonText<const UNIQUE_KEYS: bool>(pub String);

impl<'de, const UNIQUE_KEYS: bool> de::Deserialize<'de> for JsonText<UNIQUE_KEYS> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut out = String::new();
        Writer::<UNIQUE_KEYS> { out: &mut out }.deserialize(deserializer)?;
        Ok(JsonText(out))
    }
}

/// Writes one node, and everything under it, to `out`.
struct Writer<'o, const UNIQUE_KEYS: bool> {
    out: &'o mut String,
}

impl<'de, const UNIQUE_KEYS: bool> DeserializeSeed<'de> for Writer<'_, UNIQUE_KEYS> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<const UNIQUE_KEYS: bool> Writer<'_, UNIQUE_KEYS> {
    fn string(&mut self, s: &str) {
        write_string(self.out, s);
    }

    fn display(&mut self, v: impl fmt::Display) {
        // Writing to a String cannot fail.
        let _ = write!(self.out, "{v}");
    }
}

/// `s` as a JSON string, escaped as serde_json escapes it.
pub(super) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escape);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

impl<'de, const UNIQUE_KEYS: bool> Visitor<'de> for Writer<'_, UNIQUE_KEYS> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_bool<E: de::Error>(mut self, v: bool) -> Result<(), E> {
        self.display(v);
        Ok(())
    }
    fn visit_i64<E: de::Error>(mut self, v: i64) -> Result<(), E> {
        self.display(v);
        Ok(())
    }
    fn visit_u64<E: de::Error>(mut self, v: u64) -> Result<(), E> {
        self.display(v);
        Ok(())
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<(), E> {
        match i64::try_from(v) {
            Ok(v) => self.visit_i64(v),
            Err(_) => self.visit_f64(v as f64),
        }
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<(), E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => self.visit_f64(v as f64),
        }
    }
    fn visit_f64<E: de::Error>(mut self, v: f64) -> Result<(), E> {
        // As serde_json's Value holds it: a float that JSON cannot write
        // (NaN, infinity) is null.
        match serde_json::Number::from_f64(v) {
            Some(n) => self.display(n),
            None => self.out.push_str("null"),
        }
        Ok(())
    }
    fn visit_str<E: de::Error>(mut self, v: &str) -> Result<(), E> {
        self.string(v);
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.out.push_str("null");
        Ok(())
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.out.push('[');
        let mut first = true;
        loop {
            let at = self.out.len();
            if !first {
                self.out.push(',');
            }
            if seq
                .next_element_seed(Writer::<UNIQUE_KEYS> { out: self.out })?
                .is_none()
            {
                // No element: take back the separator.
                self.out.truncate(at);
                break;
            }
            first = false;
        }
        self.out.push(']');
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.out.push('{');
        // Where each key was written, to find one given twice (JSON only):
        // sorted once the mapping ends, so a big mapping costs n log n.
        let mut keys: Vec<std::ops::Range<usize>> = Vec::new();
        let mut first = true;
        while let Some(KeyText(key)) = map.next_key()? {
            if !first {
                self.out.push(',');
            }
            first = false;
            let start = self.out.len();
            write_string(self.out, &key);
            if UNIQUE_KEYS {
                keys.push(start..self.out.len());
            }
            self.out.push(':');
            map.next_value_seed(Writer::<UNIQUE_KEYS> { out: self.out })?;
        }
        if UNIQUE_KEYS && keys.len() > 1 {
            let out = &*self.out;
            keys.sort_unstable_by(|a, b| out[a.clone()].cmp(&out[b.clone()]));
            if let Some(pair) = keys.windows(2).find(|p| out[p[0].clone()] == out[p[1].clone()]) {
                let key: String = serde_json::from_str(&out[pair[0].clone()]).unwrap_or_default();
                return Err(de::Error::custom(super::messages::duplicate_key(&key)));
            }
        }
        self.out.push('}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::yaml::node::Node;

    fn yaml(text: &str) -> Value {
        let JsonText::<false>(json) = serde_saphyr::from_str(text).expect("parses");
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json} is JSON: {e}"))
    }

    /// The text means what the tree with positions means.
    #[test]
    fn yaml_reads_as_the_positioned_tree_reads() {
        let text = "i: 3\nf: 1.5\nb: true\nn: null\ns: '3'\nq: \"yes\"\n80: port\nnull: {}\nl: [1, {a: [x]}]\n\
                    e: []\nm: {}\nesc: \"tab\\there \\\"q\\\" back\\\\slash \\u0001 \\u00e9\"\nbig: 18446744073709551615\n\
                    neg: -9223372036854775808\nlong: 123456789012345678901234567890\n";
        let tree: serde_saphyr::Spanned<Node> = serde_saphyr::from_str(text).expect("parses");
        assert_eq!(yaml(text), tree.value.to_value());
        assert_eq!(yaml("[]"), json!([]));
        assert_eq!(yaml("a: ~"), json!({"a": null}));
    }

    /// A merge that a key then overrides is no duplicate: the parser merges
    /// before the writer sees the keys.
    #[test]
    fn merge_overrides_are_no_duplicates() {
        let text = "base: &b {a: 1, c: 2}\nx:\n  <<: *b\n  a: 3\n";
        let JsonText::<false>(json) = serde_saphyr::from_str(text).expect("parses");
        let x: Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(x["x"], json!({"a": 3, "c": 2}));
        assert_eq!(json.matches("\"a\"").count(), 2, "once in base, once in x: {json}");
    }

    /// JSON compacts to the text serde_json writes, and a key given twice
    /// is refused in the words the YAML path uses.
    #[test]
    fn json_compacts_and_refuses_duplicate_keys() {
        let text = "{ \"i\": 3, \"f\": 1.5, \"b\": true, \"n\": null,\n \"l\": [1, {\"a\": [\"x\"]}, []], \"s\": \"\\u00e9\\n\\\"\" }";
        let JsonText::<true>(json) = serde_json::from_str(text).expect("parses");
        let value: Value = serde_json::from_str(text).expect("parses");
        assert_eq!(
            json,
            r#"{"i":3,"f":1.5,"b":true,"n":null,"l":[1,{"a":["x"]},[]],"s":"é\n\""}"#
        );
        assert_eq!(serde_json::from_str::<Value>(&json).expect("JSON"), value);
        let err = serde_json::from_str::<JsonText<true>>(r#"{"spec": {"a": 1, "b": {"a": 0}, "a": 2}}"#)
            .err()
            .expect("a duplicate key");
        assert!(
            err.to_string()
                .starts_with("a is given twice in the same mapping: keep one (which one the apiserver keeps is not what you wrote) at line 1 column "),
            "{err}"
        );
    }
}
