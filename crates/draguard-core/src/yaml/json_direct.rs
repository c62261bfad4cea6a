//! The common YAML document written as compact JSON text straight from
//! the parser's events, without serde-saphyr's deserializer: for a plain
//! manifest that layer (a recorded and hashed fingerprint per key for
//! duplicate and merge detection, a replayed copy of each key, a bool, an
//! integer and a float parse tried on every scalar) cost more than the
//! parse itself.
//!
//! Only documents whose meaning is plain are read here: one mapping or
//! sequence, untagged, without anchors, aliases or merge keys, keys that
//! are strings, no key given twice, and scalars whose value is beyond
//! doubt. Anything else, and any syntax error, gives `None`, and the
//! caller reads the document through serde-saphyr as before: what the
//! text says, and every error message, stays that reading's. The same
//! parser (granit-parser, with the options serde-saphyr gives it) reads
//! both ways, so the events are the same.

use std::ops::Range;

use granit_parser::{Event, Parser, ScalarStyle, StrInput};

use super::json_text::write_string;

/// Nesting deeper than this is left to serde-saphyr, whose budget refuses
/// more than 64 levels (`Budget::max_depth`) in its own words.
const MAX_DEPTH: usize = 48;

/// Documents larger than this are left to serde-saphyr, whose budget
/// counts nodes and events (`super::yaml_options`): below this size no
/// document comes near those counts.
const MAX_TEXT: usize = 16 << 20;

/// Mappings with more keys than this look for a repeated key by sorting
/// them, not by comparing each with every other.
const SMALL_MAP: usize = 12;

/// `text` (one YAML document) as the compact JSON text
/// [`super::json_text::JsonText`] writes for it, when its meaning is plain
/// (see the module's comment); `None` when serde-saphyr must read it.
pub fn json_text(text: &str) -> Option<String> {
    if text.len() > MAX_TEXT {
        return None;
    }
    let mut writer = Direct {
        out: String::with_capacity(text.len()),
        frames: Vec::new(),
        keys: Vec::new(),
    };
    let mut parser = Parser::with_options(StrInput::new(text), parser_options());
    let mut next = move || match parser.next() {
        Some(Ok((event, _))) => Some(event),
        _ => None,
    };
    if !matches!(next()?, Event::StreamStart) || !matches!(next()?, Event::DocumentStart(_, None)) {
        return None;
    }
    loop {
        let event = next()?;
        if writer.event(event)? {
            break;
        }
    }
    // The document, and nothing after it.
    match (next()?, next()?) {
        (Event::DocumentEnd, Event::StreamEnd) => Some(writer.out),
        _ => None,
    }
}

/// The options serde-saphyr gives the parser for [`super::yaml_options`]
/// (serde-saphyr 2.2.0, `Options::parser_options`, `Budget::parser_options`):
/// the parser's defaults, and no comment events.
fn parser_options() -> granit_parser::Options {
    let mut options = granit_parser::Options::default();
    options.emit_comments = false;
    options
}

/// An open mapping or sequence.
struct Frame {
    map: bool,
    /// Entries written so far (a mapping's keys and values each count).
    items: usize,
    /// Where its keys start in [`Direct::keys`].
    keys_from: usize,
}

struct Direct {
    out: String,
    frames: Vec<Frame>,
    /// The byte ranges in `out` of the keys of every open mapping, the
    /// innermost last.
    keys: Vec<Range<usize>>,
}

impl Direct {
    /// Writes one event of the root node; `Some(true)` once the root is
    /// closed, `None` for anything left to serde-saphyr.
    fn event(&mut self, event: Event<'_>) -> Option<bool> {
        match event {
            Event::MappingStart(_, 0, None) | Event::SequenceStart(_, 0, None) => {
                // A key that is a mapping or a sequence is no string.
                if self.separate() || self.frames.len() >= MAX_DEPTH {
                    return None;
                }
                let map = matches!(event, Event::MappingStart(..));
                self.out.push(if map { '{' } else { '[' });
                self.frames.push(Frame {
                    map,
                    items: 0,
                    keys_from: self.keys.len(),
                });
                Some(false)
            }
            Event::MappingEnd | Event::SequenceEnd => {
                let frame = self.frames.pop()?;
                if frame.map {
                    if self.repeats(frame.keys_from) {
                        return None;
                    }
                    self.keys.truncate(frame.keys_from);
                    self.out.push('}');
                } else {
                    self.out.push(']');
                }
                Some(self.frames.is_empty())
            }
            // A scalar document is rare, and its null-ness is
            // serde-saphyr's to say.
            Event::Scalar(value, style, 0, None) if !self.frames.is_empty() => {
                let scalar = Scalar::of(&value, style)?;
                if self.separate() {
                    // `<<` is a merge key only plain; quoted, it is a key.
                    if scalar != Scalar::String || (style == ScalarStyle::Plain && value == "<<") {
                        return None;
                    }
                    let start = self.out.len();
                    write_string(&mut self.out, &value);
                    self.keys.push(start..self.out.len());
                    self.out.push(':');
                } else {
                    scalar.write(&value, &mut self.out);
                }
                Some(false)
            }
            _ => None,
        }
    }

    /// Counts a node that starts in the open collection, writes the
    /// separator before it, and says whether it is a mapping's key.
    fn separate(&mut self) -> bool {
        let Some(frame) = self.frames.last_mut() else {
            return false;
        };
        let at = frame.items;
        frame.items += 1;
        if frame.map {
            // Keys at even places; the `:` after a key is written with it.
            if at % 2 == 0 && at > 0 {
                self.out.push(',');
            }
            at % 2 == 0
        } else {
            if at > 0 {
                self.out.push(',');
            }
            false
        }
    }

    /// Whether a key of the mapping whose keys start at `from` repeats an
    /// earlier one. Keys are compared as written (JSON escaping is one to
    /// one), which is serde-saphyr's comparison for string keys.
    fn repeats(&mut self, from: usize) -> bool {
        let out = &self.out;
        let keys = &mut self.keys[from..];
        if keys.len() <= SMALL_MAP {
            return keys
                .iter()
                .enumerate()
                .any(|(i, k)| keys[..i].iter().any(|earlier| out[earlier.clone()] == out[k.clone()]));
        }
        keys.sort_unstable_by(|a, b| out[a.clone()].cmp(&out[b.clone()]));
        keys.windows(2).any(|pair| out[pair[0].clone()] == out[pair[1].clone()])
    }
}

/// What an untagged scalar means, where that is beyond doubt: as
/// serde-saphyr 2.2.0 reads it for a value of any type
/// (`YamlDeserializer::deserialize_any`: null, then a YAML 1.1 bool, then
/// an integer, then a float, else a string; quoted and block scalars are
/// strings).
#[derive(Debug, PartialEq)]
enum Scalar {
    Null,
    Bool(bool),
    /// A decimal integer that fits a u64, written as it is.
    Unsigned,
    String,
}

impl Scalar {
    /// `None` where the meaning takes serde-saphyr's number parsers (a
    /// float, a sign, a radix, a leading zero, an underscore).
    fn of(value: &str, style: ScalarStyle) -> Option<Scalar> {
        if style != ScalarStyle::Plain {
            return Some(Scalar::String);
        }
        let bytes = value.as_bytes();
        let Some(&first) = bytes.first() else {
            return Some(Scalar::Null);
        };
        if first.is_ascii_alphabetic() || first == b'~' {
            return Some(match value {
                "~" | "null" | "Null" | "NULL" => Scalar::Null,
                v if ["true", "yes", "y", "on"].iter().any(|w| v.eq_ignore_ascii_case(w)) => Scalar::Bool(true),
                v if ["false", "no", "n", "off"].iter().any(|w| v.eq_ignore_ascii_case(w)) => Scalar::Bool(false),
                // No number starts with a letter: Rust's float parser
                // reads `inf` and `nan`, but as no finite float, which
                // serde-saphyr then leaves a string.
                _ => Scalar::String,
            });
        }
        if first.is_ascii_digit() {
            if bytes.iter().all(u8::is_ascii_digit) {
                // No leading zero (an octal, or a string, by options), and
                // short enough to fit a u64 without checking.
                return ((bytes.len() == 1 || first != b'0') && bytes.len() <= 19).then_some(Scalar::Unsigned);
            }
            // A byte no integer (decimal, 0x, 0o, 0b, with underscores)
            // and no float (digits, `.`, an exponent) holds: `100m`,
            // `128Mi`, `1.2.3-rc1`, `10:30`. (`.` and the signs alone are no
            // proof: `1.5`, `1e+3`.)
            let numeric = |b: &u8| b.is_ascii_hexdigit() || b"_xXoObB.+-".contains(b);
            return (!bytes.iter().all(numeric)).then_some(Scalar::String);
        }
        // A sign before what no number starts with (`--flag`, `-inf`):
        // integers want a digit next, finite floats a digit or a dot, and
        // `-inf` and `-nan` are floats to Rust's parser but no finite one.
        if matches!(first, b'+' | b'-') {
            let next = *bytes.get(1)?;
            return (!next.is_ascii_digit() && next != b'.').then_some(Scalar::String);
        }
        // Whitespace, or a dot (`.5`, `.inf`): left to serde-saphyr.
        if first.is_ascii_whitespace() || first == b'.' {
            return None;
        }
        Some(Scalar::String)
    }

    fn write(&self, value: &str, out: &mut String) {
        match self {
            Scalar::Null => out.push_str("null"),
            Scalar::Bool(true) => out.push_str("true"),
            Scalar::Bool(false) => out.push_str("false"),
            Scalar::Unsigned => out.push_str(value),
            Scalar::String => write_string(out, value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::json_text::JsonText;

    /// What serde-saphyr's reading writes.
    fn saphyr(text: &str) -> Option<String> {
        serde_saphyr::from_multiple_with_options::<JsonText<false>>(text, crate::yaml::yaml_options())
            .ok()
            .and_then(|docs| docs.into_iter().next())
            .map(|d| d.0)
    }

    /// Read here, the text is what serde-saphyr writes, byte for byte.
    #[test]
    fn plain_documents_read_as_serde_saphyr_reads_them() {
        for text in [
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pod-0\n  namespace: ns-0\nspec:\n  tolerations:\n  - {key: example.com/dedicated, operator: Equal, value: web, effect: NoSchedule}\n  containers:\n  - name: web\n    image: registry.example.com/web:1\n",
            "---\na: 1\nb: 0\nd: 9999999999999999999\ne: [x, 'y', \"z\\t\"]\nf: |\n  block\n",
            "a: null\nb: ~\nc:\nd: NULL\ne: yes\nf: Y\ng: [No, off, ON, TRUE, false, n]\nh: \"null\"\ni: 'true'\nj: ~x\n\"yes\": 1\n",
            "cpu: 100m\nmem: 128Mi\nv: 1.2.3-rc1\nt: 10:30\ninf: inf\nnan: NaN\nminf: -inf\npinf: +Infinity\n",
            "args: [\"--v=2\", --flag, -x, +y, -_1, -a_b, --]\n\"quoted key\": 1\n'<<': merge-less\nwhite space: \"a b\"\n",
            "list:\n- a\n- - b\n  - {}\n  - []\n- {c: {d: [e]}}\n",
            "[a, {b: c}]\n",
            "é: ü\n\"\\u0001\": \"\\\"\"\nplain: it's # a comment\n",
            "a: 'one\n  two'\nb: >\n  folded\n  text\n\nc: |-\n  kept\n",
        ] {
            let direct = json_text(text);
            assert!(direct.is_some(), "read here: {text:?}");
            assert_eq!(direct, saphyr(text), "{text:?}");
        }
    }

    /// What is not beyond doubt is left to serde-saphyr.
    #[test]
    fn the_rest_is_left_to_serde_saphyr() {
        for text in [
            "a: 1.5\n",
            "a: -1\n",
            "a: +1\n",
            "a: -\n",
            "a: -.5\n",
            "a: -.nan\n",
            "a: .5\n",
            "a: .inf\n",
            "a: 0777\n",
            "a: 0x1F\n",
            "a: 1_000\n",
            "a: 1e3\n",
            "a: 0x\n",
            "a: 1.2.3\n",
            "a: .nanx\n",
            "a: 18446744073709551615\n",
            "a: 123456789012345678901\n",
            "a: !!str 1\n",
            "a: &x 1\nb: *x\n",
            "base: &b {a: 1}\nx:\n  <<: *b\n",
            "x: {<<: {a: 1}}\n",
            "a: 1\na: 2\n",
            "{a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9, j: 10, k: 11, l: 12, m: 13, a: 14}\n",
            "1: a\n",
            "true: a\n",
            "null: a\n",
            "? [a]\n: b\n",
            "just a scalar\n",
            "",
            "a: [1,\n",
            "a: 1\n---\nb: 2\n",
        ] {
            assert_eq!(json_text(text), None, "{text:?}");
        }
        let deep = format!("{}1{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(json_text(&deep), None);
        let deep_enough = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(json_text(&deep_enough), saphyr(&deep_enough));
    }

    /// Many keys, none repeated, sorted to be compared: still read here.
    #[test]
    fn big_mappings_without_repeats_are_read() {
        let text: String = (0..100).map(|i| format!("k{i}: {i}\n")).collect();
        assert_eq!(json_text(&text), saphyr(&text));
        assert!(json_text(&text).is_some());
    }

    /// Every document of every YAML file of the repository's fixtures,
    /// manifests and chart (or under `DRAGUARD_YAML_CORPUS`, a folder of
    /// real manifests: `DRAGUARD_YAML_CORPUS=/path cargo test -p
    /// draguard-core --lib json_direct -- --nocapture`) that is read here
    /// reads to what serde-saphyr writes.
    #[test]
    fn a_corpus_reads_as_serde_saphyr_reads_it() {
        let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let roots: Vec<std::path::PathBuf> = match std::env::var_os("DRAGUARD_YAML_CORPUS") {
            Some(root) => vec![root.into()],
            None => ["tests/fixtures", "deploy", "charts", "policies", "examples"]
                .iter()
                .map(|d| workspace.join(d))
                .collect(),
        };
        let (mut direct, mut left, mut files) = (0, 0, 0);
        let mut folders = roots;
        while let Some(folder) = folders.pop() {
            let Ok(entries) = std::fs::read_dir(&folder) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    folders.push(path);
                    continue;
                }
                let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
                let Ok(text) = std::fs::read_to_string(&path) else {
                    continue;
                };
                if !yaml || text.len() > 4 << 20 {
                    continue;
                }
                files += 1;
                let mut starts: Vec<usize> = vec![0];
                let mut at = 0;
                for line in text.split_inclusive('\n') {
                    if at > 0 && line.starts_with("---") {
                        starts.push(at);
                    }
                    at += line.len();
                }
                starts.push(text.len());
                for pair in starts.windows(2) {
                    let document = &text[pair[0]..pair[1]];
                    match json_text(document) {
                        Some(json) => {
                            direct += 1;
                            assert_eq!(Some(json), saphyr(document), "{}: {document}", path.display());
                        }
                        None => left += 1,
                    }
                }
            }
        }
        println!("{files} files: {direct} documents read here, {left} left to serde-saphyr");
        // The repository's own YAML is mostly plain: a corpus that reads
        // nothing here proves nothing.
        assert!(direct > 100, "{files} files: only {direct} documents read here");
    }
}
