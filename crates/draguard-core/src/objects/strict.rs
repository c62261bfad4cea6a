//! Structs decode only from JSON objects, at every depth.
//!
//! Go's `encoding/json`, which the kube-apiserver decodes with, reads a
//! struct only from an object. serde's derived structs also read one from
//! an array, field by position: a Pod with `spec: []` decoded as an empty
//! spec, and a ResourceSlice taint `["x"]` as a taint with key `x`. Both
//! were then judged, and patched, as if they were objects, and the patch
//! (`add /spec/tolerations`, `add …/taints/0/timeAdded`) did not apply.
//! [`Strict`] wraps any deserializer so that every struct, however deep,
//! demands an object and names what it got otherwise; everything else is
//! passed through untouched.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};

/// A deserializer whose structs accept only objects.
pub struct Strict<D>(pub D);

/// The visitor of a struct: an object, or an error that says one was
/// expected ("invalid type: sequence, expected an object").
struct ObjectOnly<V>(V);

/// Any other visitor, passed through, with every nested value strict.
struct Through<V>(V);

/// A seed whose value is decoded strictly.
struct StrictSeed<S>(S);

/// A sequence, map, enum or variant whose contents are decoded strictly.
struct StrictAccess<A>(A);

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method($($arg,)* Through(visitor))
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any();
        deserialize_bool();
        deserialize_i8();
        deserialize_i16();
        deserialize_i32();
        deserialize_i64();
        deserialize_i128();
        deserialize_u8();
        deserialize_u16();
        deserialize_u32();
        deserialize_u64();
        deserialize_u128();
        deserialize_f32();
        deserialize_f64();
        deserialize_char();
        deserialize_str();
        deserialize_string();
        deserialize_bytes();
        deserialize_byte_buf();
        deserialize_option();
        deserialize_unit();
        deserialize_unit_struct(name: &'static str);
        deserialize_newtype_struct(name: &'static str);
        deserialize_seq();
        deserialize_tuple(len: usize);
        deserialize_tuple_struct(name: &'static str, len: usize);
        deserialize_map();
        deserialize_enum(name: &'static str, variants: &'static [&'static str]);
        deserialize_identifier();
        deserialize_ignored_any();
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, ObjectOnly(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

impl<'de, V: Visitor<'de>> Visitor<'de> for ObjectOnly<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    // Every other `visit_` keeps its default: an "invalid type" error that
    // names what was sent and that an object was expected.
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(StrictAccess(map))
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty);)*) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.0.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Through<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)
    }

    forward_visit! {
        visit_bool(bool);
        visit_i8(i8);
        visit_i16(i16);
        visit_i32(i32);
        visit_i64(i64);
        visit_i128(i128);
        visit_u8(u8);
        visit_u16(u16);
        visit_u32(u32);
        visit_u64(u64);
        visit_u128(u128);
        visit_f32(f32);
        visit_f64(f64);
        visit_char(char);
        visit_str(&str);
        visit_borrowed_str(&'de str);
        visit_string(String);
        visit_bytes(&[u8]);
        visit_borrowed_bytes(&'de [u8]);
        visit_byte_buf(Vec<u8>);
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.visit_unit()
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.visit_none()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.visit_some(Strict(deserializer))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.visit_newtype_struct(Strict(deserializer))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(StrictAccess(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(StrictAccess(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.0.visit_enum(StrictAccess(data))
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for StrictSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(Strict(deserializer))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for StrictAccess<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(StrictSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for StrictAccess<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(StrictSeed(seed))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(StrictSeed(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for StrictAccess<A> {
    type Error = A::Error;
    type Variant = StrictAccess<A::Variant>;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self::Variant), A::Error> {
        self.0
            .variant_seed(StrictSeed(seed))
            .map(|(value, variant)| (value, StrictAccess(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for StrictAccess<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(StrictSeed(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Through(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, ObjectOnly(visitor))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::objects::dra::SliceSpec;
    use crate::objects::pod::PodSpecView;
    use crate::objects::{ObjectJson, Whole, decode, decode_at};

    fn raw(value: &serde_json::Value) -> ObjectJson {
        ObjectJson::Raw(serde_json::value::to_raw_value(value).expect("raw"))
    }

    /// The reproducers, from a tree and from raw text alike: the field path
    /// and what was expected, never a position in the request's text.
    #[test]
    fn a_struct_is_never_read_from_a_list() {
        let cases = [
            (json!({"spec": []}), "spec: invalid type: sequence, expected an object"),
            (
                json!({"spec": {"tolerations": [["x"]]}}),
                "spec.tolerations[0]: invalid type: sequence, expected an object",
            ),
            (
                json!({"metadata": ["p"], "spec": {}}),
                "metadata: invalid type: sequence, expected an object",
            ),
            (json!([]), "invalid type: sequence, expected an object"),
            (
                json!({"spec": 7}),
                "spec: invalid type: integer `7`, expected an object",
            ),
        ];
        for (object, message) in cases {
            let from_tree = decode::<Whole<PodSpecView>>(&object).expect_err("a list is no struct");
            assert_eq!(from_tree.to_string(), message, "{object}");
            let from_raw = raw(&object)
                .decode::<Whole<PodSpecView>>()
                .expect_err("a list is no struct");
            assert_eq!(from_raw, from_tree, "{object}");
        }
        let slice = json!({"devices": [{"name": "d0", "taints": [["x"]]}]});
        assert_eq!(
            decode::<SliceSpec>(&slice).expect_err("a taint list").to_string(),
            "devices[0].taints[0]: invalid type: sequence, expected an object"
        );
    }

    /// What Kubernetes reads stays readable: null objects and lists,
    /// optional structs, maps, lists of scalars, unknown fields.
    #[test]
    fn objects_nulls_and_lists_still_decode() {
        let object = json!({
            "metadata": {"name": "p", "labels": {"a": "b"}, "ownerReferences": null},
            "spec": {"tolerations": null, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                     "resources": null, "unknown": [1, {"x": []}]}
        });
        let pod = decode::<Whole<PodSpecView>>(&object).expect("decodes");
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert_eq!(pod.spec.containers[0].name, "c");
        assert!(pod.spec.tolerations.is_empty());
        let from_raw = raw(&object).decode::<Whole<PodSpecView>>().expect("decodes");
        assert_eq!(from_raw.spec, pod.spec);
        assert!(decode::<Whole<PodSpecView>>(&json!({"spec": null})).is_ok());
    }

    /// A part found by keys: every step on the way must be an object, or
    /// absent or null (the part is then null).
    #[test]
    fn decode_at_refuses_a_list_on_the_way() {
        let tokens = &["spec", "template", "spec"];
        let cases = [
            (json!({"spec": []}), "spec: invalid type: sequence, expected an object"),
            (
                json!({"spec": {"template": "x"}}),
                "spec.template: invalid type: string \"x\", expected an object",
            ),
            (
                json!({"spec": {"template": {"spec": []}}}),
                "spec.template.spec: invalid type: sequence, expected an object",
            ),
            (json!([]), "invalid type: sequence, expected an object"),
        ];
        for (object, message) in cases {
            let error = decode_at::<PodSpecView>(&object, tokens).expect_err("no spec there");
            assert_eq!(error.to_string(), message, "{object}");
        }
        for absent in [json!({}), json!({"spec": null}), json!({"spec": {"template": null}})] {
            assert_eq!(decode_at::<Option<PodSpecView>>(&absent, tokens).expect("absent"), None);
        }
    }
}
