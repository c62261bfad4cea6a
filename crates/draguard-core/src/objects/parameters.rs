//! A driver's opaque `parameters` (`runtime.RawExtension`): the JSON text
//! the request carried, and the tree rules read, decoded from the text only
//! when a rule asks for it.
//!
//! Most configs a webhook sees are ones it has judged before (every claim a
//! template stamps carries the same few), and the driver-config memo
//! (`rules::driver_config::memo`) answers those by their text: hashing and
//! comparing a few hundred bytes. The same text always decodes to the same
//! tree, so a verdict kept for a text is the verdict of its tree. So on
//! that path nothing needs the tree, and building it (a node and a string
//! allocated for each field, freed at the end of the review) was most of
//! what a repeated config cost (`scripts/validate-instructions.sh`).
//!
//! What decoding the tree could refuse is checked when the parameters are
//! read, without building it ([`Checked`]): a number out of range, nesting
//! past serde_json's limit. So a config that decodes here always decodes
//! later, and an object that decoded before this type still does. (One
//! difference: the nesting limit of 128 now counts from the parameters, not
//! from the object around them, so parameters nested between about 120
//! and 128 deep decode where the whole object failed before; the
//! apiserver, whose limit is 10,000, accepts them too.)

use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// The compact encoding of a decoded tree is at most this many times the
/// length of the text it was decoded from: spaces go, a string's escapes
/// only shrink (`\u00e9` becomes `é`, `\/` becomes `/`; serde_json escapes
/// only what JSON text must already have escaped), a repeated key is kept
/// once, and a number grows at most from `1e15` (4 bytes) to
/// `1000000000000000.0` (18 bytes; from 1e16 on ryu writes an exponent
/// again). Tested below over every short number form.
const MAX_GROWTH: usize = 5;

/// An `io::Write` that keeps only the number of bytes written: the size of
/// an encoding without building it.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The size of `value` encoded compactly. The apiserver measures the raw
/// bytes it received; a webhook sees the object re-encoded, so the compact
/// encoding is the closest measure.
pub fn encoded_len(value: &Value) -> usize {
    let mut counted = ByteCount(0);
    match serde_json::to_writer(&mut counted, value) {
        Ok(()) => counted.0,
        Err(_) => usize::MAX,
    }
}

/// The parameters' text, and their tree once asked for.
#[derive(Clone)]
pub struct Parameters {
    /// As the request carried it (an AdmissionReview's object is the
    /// apiserver's compact encoding); decoded from a tree (`check`'s
    /// manifests), its compact encoding.
    text: Box<str>,
    value: OnceLock<Value>,
}

impl Parameters {
    /// The JSON text the parameters were read from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The decoded tree.
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| {
            // Checked when read (`Checked`), so it decodes; were it ever
            // not to, no rule judges `null` as a driver's config.
            serde_json::from_str(&self.text).unwrap_or(Value::Null)
        })
    }

    /// Whether the parameters are a JSON object (the text has no leading
    /// space: serde_json's raw values start at the value).
    pub fn is_object(&self) -> bool {
        self.text.starts_with('{')
    }

    /// Whether the tree's compact encoding (what [`encoded_len`] measures
    /// against the apiserver's limit) is at most `max` bytes:
    /// certain from the text's length when it is short enough, measured
    /// otherwise.
    pub fn fits(&self, max: usize) -> bool {
        self.text.len().saturating_mul(MAX_GROWTH) <= max || encoded_len(self.value()) <= max
    }
}

impl Deref for Parameters {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

/// Equal trees are equal parameters, whatever their text (ratcheting
/// compares a stored config with the new one this way).
impl PartialEq for Parameters {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text || self.value() == other.value()
    }
}

impl fmt::Debug for Parameters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Parameters").field(&&*self.text).finish()
    }
}

impl From<Value> for Parameters {
    fn from(value: Value) -> Self {
        Parameters {
            text: value.to_string().into_boxed_str(),
            value: OnceLock::from(value),
        }
    }
}

impl<'de> Deserialize<'de> for Parameters {
    /// The text (serde_json hands it over as it is in the request, or
    /// encodes a tree compactly), checked to decode.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        let mut checker = serde_json::Deserializer::from_str(raw.get());
        if let Err(e) = Checked.deserialize(&mut checker) {
            // The position is in the parameters' text, which the requester
            // never saw as such: the field path says where.
            let position = format!(" at line {} column {}", e.line(), e.column());
            let text = e.to_string();
            return Err(de::Error::custom(text.strip_suffix(&position).unwrap_or(&text)));
        }
        Ok(Parameters {
            text: raw.into(),
            value: OnceLock::new(),
        })
    }
}

/// A JSON value walked as decoding it into a [`Value`] would walk it, and
/// refused where that would be, but with nothing allocated: numbers are
/// parsed, strings borrowed.
struct Checked;

impl<'de> DeserializeSeed<'de> for Checked {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Checked {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Checked)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Checked)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::objects::ObjectJson;
    use crate::objects::claim::OpaqueDeviceConfiguration;

    fn raw(text: &str) -> ObjectJson {
        ObjectJson::Raw(RawValue::from_string(text.to_owned()).expect("json"))
    }

    #[test]
    fn from_a_request_the_text_is_the_requests_and_the_tree_its_decoding() {
        let text = r#"{"driver":"d.example.com","parameters":{"b": [1, 2.5],"a":"<&>"}}"#;
        let opaque: OpaqueDeviceConfiguration = raw(text).decode().expect("decodes");
        let p = opaque.parameters.expect("present");
        assert_eq!(p.text(), r#"{"b": [1, 2.5],"a":"<&>"}"#);
        assert_eq!(*p, json!({"a": "<&>", "b": [1, 2.5]}));
        assert!(p.is_object());
    }

    #[test]
    fn from_a_tree_the_text_is_its_compact_encoding() {
        let tree = ObjectJson::Tree(json!({"driver": "d.example.com", "parameters": {"b": 1, "a": {"c": null}}}));
        let opaque: OpaqueDeviceConfiguration = tree.decode().expect("decodes");
        let p = opaque.parameters.expect("present");
        assert_eq!(p.text(), r#"{"a":{"c":null},"b":1}"#);
    }

    #[test]
    fn null_and_absence_are_no_parameters_and_other_json_is_kept() {
        for text in [r#"{"driver":"d","parameters":null}"#, r#"{"driver":"d"}"#] {
            let opaque: OpaqueDeviceConfiguration = raw(text).decode().expect("decodes");
            assert_eq!(opaque.parameters, None, "{text}");
        }
        let opaque: OpaqueDeviceConfiguration = raw(r#"{"driver":"d","parameters":[1]}"#).decode().expect("decodes");
        assert_eq!(opaque.parameters.as_deref(), Some(&json!([1])));
    }

    #[test]
    fn equal_trees_are_equal_whatever_their_text() {
        let spaced: OpaqueDeviceConfiguration = raw(r#"{"driver":"d","parameters":{"a": 1, "b": 2}}"#)
            .decode()
            .expect("decodes");
        let compact = Parameters::from(json!({"b": 2, "a": 1}));
        assert_eq!(spaced.parameters.as_ref(), Some(&compact));
        assert_ne!(Some(&Parameters::from(json!({"a": 2}))), spaced.parameters.as_ref());
    }

    #[test]
    fn what_the_tree_would_refuse_is_refused_when_read() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for (parameters, message) in [
            ("1e400", "number out of range"),
            (deep.as_str(), "recursion limit exceeded"),
            (r#"{"a": [1, {"b": -1e999}]}"#, "number out of range"),
        ] {
            let text = format!(r#"{{"driver":"d","parameters":{parameters}}}"#);
            let err = raw(&text).decode::<OpaqueDeviceConfiguration>().expect_err("refused");
            assert_eq!(err.to_string(), format!("parameters: {message}"), "{parameters}");
        }
        // Deep, but within the limit counted from the parameters.
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        let opaque: OpaqueDeviceConfiguration = raw(&format!(r#"{{"driver":"d","parameters":{ok}}}"#))
            .decode()
            .expect("decodes");
        assert!(opaque.parameters.expect("present").is_array());
    }

    /// [`MAX_GROWTH`]: the compact encoding of every short number form, the
    /// only text that grows when decoded and encoded again.
    #[test]
    fn a_tree_encodes_in_at_most_five_times_its_text() {
        let mut forms = Vec::new();
        for sign in ["", "-"] {
            for mantissa in ["0", "1", "9", "1.5", "0.1"] {
                for e in ["e", "E", "e+", "e-"] {
                    for x in 0..=25 {
                        forms.push(format!("{sign}{mantissa}{e}{x}"));
                    }
                }
                forms.push(format!("{sign}{mantissa}"));
            }
        }
        forms.push("18446744073709551616".into());
        forms.push("-9223372036854775809".into());
        for form in forms {
            let Ok(value) = serde_json::from_str::<Value>(&form) else {
                continue;
            };
            let encoded = encoded_len(&value);
            assert!(
                encoded <= MAX_GROWTH * form.len(),
                "{form} encodes as {value} ({encoded} bytes)"
            );
        }
        // And `fits` agrees with the measure on both sides of the bound.
        let p = Parameters::from(json!({"n": 1e15}));
        assert!(p.fits(p.text().len()));
        assert!(!p.fits(p.text().len() - 1));
        let spaced: OpaqueDeviceConfiguration = raw(r#"{"driver":"d","parameters":{"n":   1e15}}"#)
            .decode()
            .expect("decodes");
        let p = spaced.parameters.expect("present");
        assert_eq!(encoded_len(&p), r#"{"n":1000000000000000.0}"#.len());
        assert!(p.fits(24) && !p.fits(23));
    }
}
