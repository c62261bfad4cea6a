// Shared by tests/cli_logs.rs and, through `#[path]`, the unit tests of
// src/logging.rs (log_capture): one JSON-aware way to look at a log line.

//! What a JSON log line holds, as a collector parsing it would see it.

/// The top-level keys of a JSON object, in order and with repeats
/// (a map would hide a duplicate `message`).
pub fn top_level_keys(line: &str) -> Vec<String> {
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some((key, _)) = map.next_entry::<String, serde::de::IgnoredAny>()? {
                        keys.push(key);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(Visitor)
        }
    }
    match serde_json::from_str::<Keys>(line) {
        Ok(keys) => keys.0,
        Err(e) => panic!("not a JSON object: {e}: {line:?}"),
    }
}
