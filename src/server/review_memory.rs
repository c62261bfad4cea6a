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

mod block;

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
    /// Counts `chunk`'s elements and objects, 64 bytes at a time where it
    /// can (`block`): a bytewise pass was ~15 instructions a byte, the
    /// largest cost a plain claim's `/validate` added when the charge came
    /// (39k of a 2.6 KB claim's 237k). The counts are the bytewise pass's
    /// exactly, for any bytes (`tests`: every split of random bodies).
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        self.bytes = self.bytes.saturating_add(chunk.len());
        let (blocks, rest) = chunk.as_chunks::<{ block::LEN }>();
        #[cfg(target_arch = "x86_64")]
        if block::avx2::detected() {
            // SAFETY: this CPU has AVX2 and POPCNT, detected just now.
            unsafe { self.feed_blocks_avx2(blocks) };
            self.feed_bytes(rest);
            return;
        }
        for bytes in blocks {
            self.feed_masked(bytes, block::Masks::of(bytes));
        }
        self.feed_bytes(rest);
    }

    /// The blocks with AVX2's 32-byte compares and POPCNT, which most
    /// x86_64 CPUs have and its baseline lacks (half the instructions of
    /// SSE2's masks, one for each count).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    fn feed_blocks_avx2(&mut self, blocks: &[[u8; block::LEN]]) {
        for bytes in blocks {
            self.feed_masked(bytes, block::avx2::masks(bytes));
        }
    }

    #[inline(always)]
    fn feed_masked(&mut self, bytes: &[u8; block::LEN], masks: block::Masks) {
        if !self.feed_block(&masks) {
            self.feed_bytes(bytes);
        }
    }

    /// One block by its masks; false, counting nothing, when a backslash
    /// in it is outside a string (not JSON; the bytewise pass says what it
    /// counts).
    #[inline(always)]
    fn feed_block(&mut self, masks: &block::Masks) -> bool {
        // The bytes escaped by a backslash, each backslash taken as an
        // escape unless escaped itself: what it is inside a string, the
        // only place the bytewise pass follows escapes. Whether each is in
        // a string is known only from the quotes they leave: checked below.
        let mut escaped = u64::from(self.escaped);
        let mut escapes = masks.backslash & !escaped;
        let mut escaping = 0u64;
        while escapes != 0 {
            let at = escapes & escapes.wrapping_neg();
            escaping |= at;
            // The next byte is escaped: a backslash there escapes nothing.
            let next = at << 1;
            escaped |= next;
            escapes &= !(at | next);
        }
        // Bit i: byte i is inside a string (an opening quote counts as
        // inside, a closing one as outside; neither is counted).
        let quotes = masks.quote & !escaped;
        let inside = block::prefix_xor(quotes) ^ if self.in_string { !0 } else { 0 };
        if masks.backslash & !inside != 0 {
            return false;
        }
        self.objects += (masks.object & !inside).count_ones() as usize;
        self.elements += (masks.element & !inside).count_ones() as usize;
        self.in_string = inside >> (block::LEN - 1) == 1;
        // A backslash that ends the block escapes the next block's first byte.
        self.escaped = escaping >> (block::LEN - 1) == 1;
        true
    }

    /// The same counts, one byte at a time.
    fn feed_bytes(&mut self, bytes: &[u8]) {
        let (mut in_string, mut escaped) = (self.in_string, self.escaped);
        let (mut elements, mut objects) = (self.elements, self.objects);
        for &b in bytes {
            if in_string {
                if escaped {
                    escaped = false;
                } else if b == b'\\' {
                    escaped = true;
                } else if b == b'"' {
                    in_string = false;
                }
            } else {
                match b {
                    b'"' => in_string = true,
                    b'{' => objects += 1,
                    b'[' | b',' | b':' => elements += 1,
                    _ => {}
                }
            }
        }
        (self.in_string, self.escaped) = (in_string, escaped);
        (self.elements, self.objects) = (elements, objects);
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

    /// The bytewise pass alone, as `feed` was before its blocks.
    fn bytewise(body: &[u8]) -> Shape {
        let mut shape = Shape {
            bytes: body.len(),
            ..Shape::default()
        };
        shape.feed_bytes(body);
        shape
    }

    fn counts(shape: &Shape) -> (usize, usize, usize, bool, bool) {
        (
            shape.bytes,
            shape.elements,
            shape.objects,
            shape.in_string,
            shape.escaped,
        )
    }

    proptest::proptest! {
        /// Bodies of the bytes that matter (and others), across several
        /// blocks, with runs of backslashes and quotes: the blocks count
        /// what the bytewise pass counts, however the body is split.
        #[test]
        fn blocks_count_what_bytes_count(
            body in proptest::collection::vec(
                proptest::sample::select(&b"\"\\{}[],: ax\x80\xff"[..]), 0..400),
            cuts in proptest::collection::vec(0usize..400, 0..4),
            escapes in 0..3u8,
        ) {
            // Backslashes: none, all (some outside strings, where blocks
            // go byte by byte), or those of the second block only (its
            // last escape can carry into the third).
            let body: Vec<u8> = body
                .into_iter()
                .enumerate()
                .map(|(i, b)| match (b, escapes) {
                    (b'\\', 0) => b'x',
                    (b'\\', 2) if !(64..128).contains(&i) => b'x',
                    _ => b,
                })
                .collect();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(body.len())).collect();
            cuts.sort_unstable();
            let mut shape = Shape::default();
            let mut from = 0;
            for cut in cuts.into_iter().chain([body.len()]) {
                shape.feed(&body[from..cut]);
                from = cut;
            }
            proptest::prop_assert_eq!(counts(&shape), counts(&bytewise(&body)));
        }
    }

    /// A backslash that ends a block escapes the first byte of the next:
    /// here a quote, which does not close the string, so the `,:{[` after
    /// it are text.
    #[test]
    fn an_escape_across_blocks_is_followed() {
        let mut body = b"[\"".to_vec();
        body.resize(63, b'a');
        body.extend_from_slice(b"\\\",:{[\",1]");
        // The second block whole, so that it is read as a block.
        body.resize(128, b' ');
        let mut shape = Shape::default();
        shape.feed(&body);
        assert_eq!((shape.elements, shape.objects), (2, 0));
        assert_eq!(counts(&shape), counts(&bytewise(&body)));
    }

    #[test]
    fn a_real_review_counts_the_same_in_blocks() {
        let body = include_bytes!("../../tests/fixtures/apiserver/resourceclaim-create-4.json");
        let mut shape = Shape::default();
        shape.feed(body);
        assert_eq!(counts(&shape), counts(&bytewise(body)));
        assert!(shape.objects > 10 && shape.elements > 50, "{:?}", counts(&shape));
    }

    #[test]
    fn the_least_charge_is_the_charge_of_a_body_without_elements() {
        assert_eq!(least_charge(1000), review_charge(&[b' '; 1000]));
        assert_eq!(least_charge(usize::MAX), usize::MAX);
    }
}
