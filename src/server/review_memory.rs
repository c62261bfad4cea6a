//! What a review is charged against the review memory budget: an upper
//! bound on the bytes it holds from its first body byte to its answer,
//! read off the body as it arrives.
//!
//! A body's bytes alone say little: the decoded object, the errors, the
//! patch and the answer are several times the body, and how many times
//! depends on its shape. A 1.44 MB claim with 10,000 requests held 34 MB on
//! `/mutate`; 600 KB of empty requests (`[{},{},…]`) held 60 MB, because
//! every element decodes to a struct, a tree node or an error whatever its
//! size in the text (issue 27, N1). So a review is charged per body byte
//! and per element: each `{`, `[`, `,` and `:` outside a string starts at
//! most one element, and an element costs a bounded number of bytes
//! however it is decoded; an object (`{`) costs more, being what decodes
//! to a struct and what validation errors are made of. The counting is one pass over the bytes, chunk by
//! chunk, so a body whose charge cannot fit is refused before the rest of
//! it is read.
//!
//! The factors are measured, not guessed: `tests/review_memory.rs` runs
//! reviews of the issue's shapes and of the densest shapes found (one-byte
//! elements, one-letter labels, a million numbers in an opaque config)
//! under a counting allocator, and fails when a review's peak passes its
//! charge.

/// Charged per body byte: the body itself, the copy of each object kept as
/// raw JSON, and the strings decoded from it (about 2.6 per byte at most,
/// measured).
pub const PER_BYTE: usize = 4;
/// Charged per element (per `[`, `,` or `:` outside a string): a decoded
/// `serde_json::Value`, map node or list slot, and its share of the patch
/// made of it (up to 71 bytes per `,` measured, on `/mutate` of a million
/// numbers in an opaque config).
pub const PER_ELEMENT: usize = 256;
/// Charged per object (per `{` outside a string), on top of the comma or
/// colon before it: a decoded struct and the validation errors about it.
/// `/validate` of a pod with 500,000 empty tolerations held 286 MB, 572
/// bytes per `{},`; `/mutate` of a pod with 100,000 one-key tolerations
/// (`{"key":"1f"},`) under a policy that refuses them held 97.9 MB, 979
/// bytes each (the tree, the typed pod and the policy's copy of each
/// toleration), charged 1,021 (it was 925 at 352 per object).
pub const PER_OBJECT: usize = 448;
/// Charged to every review, whatever its body: the envelope, the decision
/// and the answer of a small review.
pub const PER_REVIEW: usize = 16 << 10;

/// A body's size and element count so far, fed chunk by chunk.
#[derive(Debug, Default, Clone)]
pub(crate) struct Shape {
    bytes: usize,
    elements: usize,
    objects: usize,
    in_string: bool,
    escaped: bool,
}

impl Shape {
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        self.bytes = self.bytes.saturating_add(chunk.len());
        for &b in chunk {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
            } else {
                match b {
                    b'"' => self.in_string = true,
                    b'{' => self.objects += 1,
                    b'[' | b',' | b':' => self.elements += 1,
                    _ => {}
                }
            }
        }
    }

    /// The bytes a review of the body fed so far is charged.
    pub(crate) fn charge(&self) -> usize {
        charge(self.bytes, self.elements, self.objects)
    }
}

fn charge(bytes: usize, elements: usize, objects: usize) -> usize {
    PER_REVIEW
        .saturating_add(bytes.saturating_mul(PER_BYTE))
        .saturating_add(elements.saturating_mul(PER_ELEMENT))
        .saturating_add(objects.saturating_mul(PER_OBJECT))
}

/// What a body of `declared` bytes is charged at least, whatever its
/// shape: charged from its Content-Length before a byte of it is read.
pub(crate) fn least_charge(declared: usize) -> usize {
    charge(declared, 0, 0)
}

/// The bytes a review of `body` is charged.
pub fn review_charge(body: &[u8]) -> usize {
    let mut shape = Shape::default();
    shape.feed(body);
    shape.charge()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_are_counted_outside_strings_only() {
        let mut shape = Shape::default();
        shape.feed(br#"{"a":[1,2,{}],"b\",:{[":"x"}"#);
        // {  :  [  ,  ,  {  ,  :  — the ones inside "b\",:{[" are text.
        assert_eq!((shape.objects, shape.elements), (2, 6));
        assert_eq!(shape.bytes, 28);
        assert_eq!(
            shape.charge(),
            PER_REVIEW + 28 * PER_BYTE + 6 * PER_ELEMENT + 2 * PER_OBJECT
        );
    }

    #[test]
    fn a_body_fed_in_chunks_counts_as_one() {
        let body = br#"{"k":"a\\\"b,c","l":[{},{}]}"#;
        let whole = review_charge(body);
        for split in 0..body.len() {
            let mut shape = Shape::default();
            shape.feed(&body[..split]);
            shape.feed(&body[split..]);
            assert_eq!(shape.charge(), whole, "split at {split}");
        }
        assert_eq!(whole, charge(body.len(), 5, 3));
    }

    #[test]
    fn the_least_charge_is_the_charge_of_a_body_without_elements() {
        assert_eq!(least_charge(1000), review_charge(&[b' '; 1000]));
        assert_eq!(least_charge(usize::MAX), usize::MAX);
    }
}
