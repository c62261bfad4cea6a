//! The bytes of a body that its review charge counts, 64 at a time: one bit
//! per byte for quotes, backslashes, `{`, and `[` `,` `:`. On x86_64 four
//! SSE2 compares and masks a mask (SSE2 is part of the x86_64 baseline, so
//! every x86_64 build has it); elsewhere a plain loop gives the same bits.

/// Bytes per block: one bit each in a `u64`.
pub(super) const LEN: usize = 64;

/// Bit i of each mask is byte i of the block.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Masks {
    pub quote: u64,
    pub backslash: u64,
    /// `{`
    pub object: u64,
    /// `[`, `,` and `:`
    pub element: u64,
}

impl Masks {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    pub(super) fn of(bytes: &[u8; LEN]) -> Masks {
        sse2::masks(bytes)
    }

    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    pub(super) fn of(bytes: &[u8; LEN]) -> Masks {
        Masks::bytewise(bytes)
    }

    /// The same bits, one byte at a time.
    #[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2", not(test)), allow(dead_code))]
    fn bytewise(bytes: &[u8; LEN]) -> Masks {
        let mut masks = Masks::default();
        for (i, &b) in bytes.iter().enumerate() {
            let bit = 1u64 << i;
            match b {
                b'"' => masks.quote |= bit,
                b'\\' => masks.backslash |= bit,
                b'{' => masks.object |= bit,
                b'[' | b',' | b':' => masks.element |= bit,
                _ => {}
            }
        }
        masks
    }
}

/// Bit i of the result: the parity of the set bits of `x` at 0..=i. Of a
/// quote mask without escapes: whether byte i is after an odd number of
/// quotes, inside a string.
pub(super) fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8};

    use super::{LEN, Masks};

    pub(super) fn masks(bytes: &[u8; LEN]) -> Masks {
        // SAFETY: the build enables SSE2 (the module's cfg), so every CPU it
        // runs on has it.
        unsafe { with_sse2(bytes) }
    }

    #[target_feature(enable = "sse2")]
    fn with_sse2(bytes: &[u8; LEN]) -> Masks {
        // The byte values as the signed lanes SSE2 compares.
        let lane = |b: u8| _mm_set1_epi8(i8::from_ne_bytes([b]));
        let (quote, backslash, object) = (lane(b'"'), lane(b'\\'), lane(b'{'));
        let (list, comma, colon) = (lane(b'['), lane(b','), lane(b':'));
        let mut masks = Masks::default();
        let (lanes, _) = bytes.as_chunks::<16>();
        for (i, sixteen) in lanes.iter().enumerate() {
            // SAFETY: an unaligned load of 16 bytes from a 16-byte array.
            let v = unsafe { _mm_loadu_si128(sixteen.as_ptr().cast::<__m128i>()) };
            // `_mm_movemask_epi8` sets the low 16 bits of its i32, one per
            // lane: they become bits 16i..16i+16.
            let bits = |m: __m128i| u64::from(_mm_movemask_epi8(m).cast_unsigned() & 0xffff) << (16 * i);
            masks.quote |= bits(_mm_cmpeq_epi8(v, quote));
            masks.backslash |= bits(_mm_cmpeq_epi8(v, backslash));
            masks.object |= bits(_mm_cmpeq_epi8(v, object));
            let element = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, list), _mm_cmpeq_epi8(v, comma)),
                _mm_cmpeq_epi8(v, colon),
            );
            masks.element |= bits(element);
        }
        masks
    }
}

/// 32 bytes a compare, where the CPU has AVX2 (detected when the process
/// runs: the x86_64 baseline has only SSE2).
#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
    };

    use super::{LEN, Masks};

    /// Whether this CPU has AVX2 and POPCNT (std remembers the answer).
    pub(in crate::server::review_memory) fn detected() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")
    }

    #[target_feature(enable = "avx2")]
    pub(in crate::server::review_memory) fn masks(bytes: &[u8; LEN]) -> Masks {
        let lane = |b: u8| _mm256_set1_epi8(i8::from_ne_bytes([b]));
        let (quote, backslash, object) = (lane(b'"'), lane(b'\\'), lane(b'{'));
        let (list, comma, colon) = (lane(b'['), lane(b','), lane(b':'));
        let mut masks = Masks::default();
        let (halves, _) = bytes.as_chunks::<32>();
        for (i, half) in halves.iter().enumerate() {
            // SAFETY: an unaligned load of 32 bytes from a 32-byte array.
            let v = unsafe { _mm256_loadu_si256(half.as_ptr().cast::<__m256i>()) };
            // One bit per byte of the half: bits 32i..32i+32.
            let bits = |m: __m256i| u64::from(_mm256_movemask_epi8(m).cast_unsigned()) << (32 * i);
            masks.quote |= bits(_mm256_cmpeq_epi8(v, quote));
            masks.backslash |= bits(_mm256_cmpeq_epi8(v, backslash));
            masks.object |= bits(_mm256_cmpeq_epi8(v, object));
            let element = _mm256_or_si256(
                _mm256_or_si256(_mm256_cmpeq_epi8(v, list), _mm256_cmpeq_epi8(v, comma)),
                _mm256_cmpeq_epi8(v, colon),
            );
            masks.element |= bits(element);
        }
        masks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_xor_is_the_running_parity() {
        let x = 0b1001_0100u64 | (1 << 63);
        let mut parity = false;
        let mut want = 0u64;
        for i in 0..64 {
            parity ^= x >> i & 1 == 1;
            want |= u64::from(parity) << i;
        }
        assert_eq!(prefix_xor(x), want);
    }

    proptest::proptest! {
        #[test]
        fn masks_are_the_bytewise_bits(
            bytes in proptest::collection::vec(proptest::sample::select(&b"\"\\{}[],: a\x80\xff"[..]), LEN..=LEN)
        ) {
            let block: &[u8; LEN] = bytes[..].try_into().expect("LEN bytes");
            proptest::prop_assert_eq!(Masks::of(block), Masks::bytewise(block));
            #[cfg(target_arch = "x86_64")]
            if avx2::detected() {
                // SAFETY: this CPU has AVX2.
                proptest::prop_assert_eq!(unsafe { avx2::masks(block) }, Masks::bytewise(block));
            }
        }
    }
}
