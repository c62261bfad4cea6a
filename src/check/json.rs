//! JSON documents read without the YAML parser.
//!
//! `kubectl get -o json` writes every object into one List. The YAML parser
//! reads that on one core at about 10 MB/s; `serde_json` finds where each
//! item starts and ends many times faster, and the items are then read on
//! every core. JSON is YAML, so for one JSON value this path only makes
//! `check` faster: each item means what the YAML path reads (a key given
//! twice: the last one wins in both), and a finding's position is found by parsing
//! its item alone as YAML, as the YAML path parses its document. Several
//! JSON values one after the other (`jq -c` output) are not YAML; kubectl
//! reads them, and so does this path.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::input::{Document, FileProblem};
use crate::field::Segment;
use crate::yaml::Position;

/// One object of a JSON document, not yet read.
#[derive(Debug, Clone)]
pub struct Item<'s> {
    /// Its text: a slice of the document.
    pub text: &'s str,
    /// Where `text` is in the document, in bytes.
    pub range: std::ops::Range<usize>,
    /// Where `text` starts in the source.
    pub start: Position,
}

/// The top of a JSON document: only what tells a List from an object.
/// Every other field is skipped (and still checked to be JSON).
#[derive(Deserialize)]
struct Top<'a> {
    #[serde(borrow, default)]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    items: Option<&'a RawValue>,
}

/// The items of `document` when it is JSON, in order, each read on its
/// own; `None` when it is not JSON: the YAML parser reads it then.
///
/// The document may be several JSON values one after the other, with or
/// without blanks between them (`jq -c '.items[]'` writes one object per
/// line), as kubectl reads it: its stream decoder sniffs JSON by the
/// leading `{` and then reads values with encoding/json's Decoder until
/// the input ends (k8s.io/apimachinery v0.36.3, pkg/util/yaml/decoder.go,
/// NewYAMLOrJSONDecoder and YAMLOrJSONDecoder.Decode). Each value is an
/// object, a List (its items) or an array (its elements).
///
/// A syntax error ends the stream: it is reported at its line and column,
/// after the items read before it. One in the first value of a file that
/// is not `.json` leaves the document to the YAML parser (flow style such
/// as `{a: 1}` is YAML, not JSON), as does a later one when YAML reads the
/// whole document (a comment after the object). kubectl, likewise, only
/// stays with JSON once it has read more than one value.
pub fn items<'s>(document: &Document<'s>, name: &str) -> Option<Vec<Result<Item<'s>, FileProblem>>> {
    let text = document.text;
    let body = text.trim_start();
    if !body.starts_with(['{', '[']) {
        return None;
    }
    let mut parts = Vec::new();
    let mut values = 0usize;
    let mut failure = None;
    for value in serde_json::Deserializer::from_str(body).into_iter::<&RawValue>() {
        match value {
            Ok(value) => {
                values += 1;
                parts.extend(parts_of(value.get()));
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    if let Some(e) = &failure
        && !reported_as_json(document, name, values, e)
    {
        return None;
    }
    let mut lines = Lines::new(document);
    let mut items: Vec<Result<Item<'s>, FileProblem>> = parts
        .into_iter()
        .map(|(_, item)| {
            let offset = offset_in(text, item);
            Ok(Item {
                start: lines.position(offset),
                range: offset..offset + item.len(),
                text: item,
            })
        })
        .collect();
    if let Some(e) = failure {
        // serde_json counts lines and columns from where `body` starts.
        let skipped = text.len() - body.len();
        let body_start = Lines::new(document).position(skipped);
        items.push(Err(problem(name, body_start, &e)));
    }
    Some(items)
}

/// The objects of one JSON value of a stream: a List's items, an array's
/// elements, or the value itself. A value `split` cannot take apart (a
/// List that names its `kind` twice) is one item, whose reading reports
/// why; `null` is no object, as an empty YAML document is none.
fn parts_of(value: &str) -> Vec<JsonPart<'_>> {
    match split(value) {
        Ok(Some(parts)) => parts,
        Ok(None) | Err(_) if value == "null" => Vec::new(),
        Ok(None) | Err(_) => vec![(ItemAt::Whole, value)],
    }
}

/// An object of a JSON text: where it sits, and its text.
pub type JsonPart<'t> = (ItemAt, &'t str);

/// Where an object sits in its JSON text: a small value, where a path
/// would be an allocation per item of a 100,000-item List.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemAt {
    /// The text is the object.
    Whole,
    /// `[i]` of a top-level array.
    Index(usize),
    /// `items[i]` of a List.
    Item(usize),
}

impl ItemAt {
    /// The path of the object in its document's tree.
    pub fn segments(self) -> Vec<Segment> {
        match self {
            ItemAt::Whole => Vec::new(),
            ItemAt::Index(i) => vec![Segment::Index(i)],
            ItemAt::Item(i) => vec![Segment::Field("items".into()), Segment::Index(i)],
        }
    }
}

/// The objects of a JSON text, each with where it sits: the items of a
/// top-level array or of a List; `None` when the text is one object (or
/// no object at all). An error when the text is not JSON.
pub fn split(text: &str) -> Result<Option<Vec<JsonPart<'_>>>, serde_json::Error> {
    let body = text.trim_start();
    if body.starts_with('[') {
        let items: Vec<&RawValue> = serde_json::from_str(body)?;
        return Ok(Some(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| (ItemAt::Index(i), item.get()))
                .collect(),
        ));
    }
    if body.starts_with('{') {
        let top: Top<'_> = serde_json::from_str(body)?;
        return Ok(list_items(&top).map(|items| {
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| (ItemAt::Item(i), item.get()))
                .collect()
        }));
    }
    Ok(None)
}

/// A List's items: `kind` ends in `List` and `items` is an array.
fn list_items<'a>(top: &Top<'a>) -> Option<Vec<&'a RawValue>> {
    let kind: Cow<'_, str> = serde_json::from_str(top.kind?.get()).ok()?;
    if !kind.ends_with("List") {
        return None;
    }
    serde_json::from_str(top.items?.get()).ok()
}

/// Whether a document `serde_json` stopped reading after `values` values
/// is reported as JSON. A `.json` file's syntax error is (reading it again
/// as YAML would only be slower); so is one after a first value, unless
/// YAML reads the document (a comment after it). Otherwise the YAML parser
/// reads it: YAML flow style such as `{a: 1}`, a document that only looks
/// like JSON.
fn reported_as_json(document: &Document<'_>, name: &str, values: usize, e: &serde_json::Error) -> bool {
    let json_file = std::path::Path::new(name)
        .extension()
        .is_some_and(|x| x.eq_ignore_ascii_case("json"));
    if !(e.is_syntax() || e.is_eof()) {
        return false;
    }
    json_file || (values > 0 && document.json(name).is_err())
}

const EOF: &str = "the JSON ends before it is complete: a closing `}`, `]` or `\"` is missing (a file cut short?)";

/// A `serde_json` error of a text that starts at `start` in the source,
/// at the source's line and column.
fn problem(name: &str, start: Position, e: &serde_json::Error) -> FileProblem {
    let (line, column) = (e.line() as u64, e.column() as u64);
    let message = e.to_string();
    FileProblem {
        file: name.to_owned(),
        line: start.line + line.saturating_sub(1),
        column: if line <= 1 {
            start.column + column.saturating_sub(1)
        } else {
            column.max(1)
        },
        // serde_json's "EOF while parsing a value" says where, not what.
        message: if e.is_eof() {
            EOF.to_owned()
        } else {
            message.split(" at line ").next().unwrap_or(&message).to_owned()
        },
    }
}

impl Item<'_> {
    /// The item as compact JSON text, and whether it gives a key twice.
    /// One that serde_json refuses (a key given twice) is read again by
    /// the YAML parser, alone, so that it reads as the YAML path reads it
    /// (a repeated key: the last one wins, as kubectl reads it), and a
    /// problem is the one the YAML path reports, at the same place.
    pub fn json(&self, name: &str) -> Result<(String, bool), FileProblem> {
        match serde_json::from_str::<crate::yaml::json_text::JsonText<true>>(self.text) {
            Ok(json) => Ok((json.0, false)),
            Err(e) => {
                let alone = Document {
                    source: 0,
                    text: self.text,
                    first_line: self.start.line,
                };
                match alone.json_read(name) {
                    Ok((Some(json), true)) => Ok((json, true)),
                    Err(mut problem) => {
                        if problem.line == self.start.line {
                            problem.column += self.start.column.saturating_sub(1);
                        }
                        Err(problem)
                    }
                    Ok(_) => Err(problem(name, self.start, &e)),
                }
            }
        }
    }
}

/// Byte offset of `part` in `whole`, which it is a slice of.
fn offset_in(whole: &str, part: &str) -> usize {
    (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize)
}

/// Lines and columns of increasing offsets in a document, counted once:
/// each byte is looked at once whatever the number of offsets, so a List
/// on one line (`jq -c`, a compact `kubectl get -o json`) costs what an
/// indented one does. (Counting each item's column from its line's start
/// made 40,000 items on one line take 33 s.)
struct Lines<'s> {
    text: &'s str,
    first_line: u64,
    /// The last offset asked, its line (0-based in `text`), and its column
    /// (0-based, in characters, as the YAML parser counts them).
    at: usize,
    line: u64,
    column: u64,
}

impl<'s> Lines<'s> {
    fn new(document: &Document<'s>) -> Self {
        Lines {
            text: document.text,
            first_line: document.first_line,
            at: 0,
            line: 0,
            column: 0,
        }
    }

    /// The position of `offset`, which is no smaller than the last one.
    fn position(&mut self, offset: usize) -> Position {
        let offset = offset.clamp(self.at, self.text.len());
        // Offsets are where JSON values start: character boundaries.
        let between = self.text.get(self.at..offset).unwrap_or("");
        match between.rfind('\n') {
            Some(last) => {
                self.line += between.bytes().filter(|b| *b == b'\n').count() as u64;
                self.column = between[last + 1..].chars().count() as u64;
            }
            None => self.column += between.chars().count() as u64,
        }
        self.at = offset;
        Position {
            line: self.first_line + self.line,
            column: self.column + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each position is the line and character column a reader counts,
    /// across lines and characters of several bytes.
    #[test]
    fn lines_count_characters_from_each_lines_start() {
        let text = "é{\"a\": 1}, {}\n  ü {}{}\n\n{ }";
        let document = Document {
            source: 0,
            text,
            first_line: 7,
        };
        let mut lines = Lines::new(&document);
        let offsets: Vec<usize> = text.match_indices('{').map(|(i, _)| i).collect();
        let got: Vec<(u64, u64)> = offsets
            .into_iter()
            .map(|o| lines.position(o))
            .map(|p| (p.line, p.column))
            .collect();
        assert_eq!(got, [(7, 2), (7, 12), (8, 5), (8, 7), (10, 1)]);
    }
}
