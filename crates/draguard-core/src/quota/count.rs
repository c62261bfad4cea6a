//! A ResourceQuota `hard` quantity read as a device or claim count.
//!
//! The value is apimachinery's (`k8s_quantity`); which texts are counts is
//! draguard's, narrower than a quantity and unchanged since this reader was
//! hand-written, so that no limit a manifest or a cluster sets changes.

use k8s_quantity::{NotU64, Quantity};

/// A ResourceQuota `hard` quantity as a device or claim count, in any form
/// `resource.Quantity` takes: decimal (`m`, `k`, `M`, `G`, `T`, `P`, `E`)
/// and binary (`Ki` to `Ei`) suffixes, exponents (`1e3`, `5E2`) and
/// decimal points (`1.5k`); a value past `u64::MAX` saturates there. A
/// value that is not a whole number (`1.5`, `2500m`), a sign or garbage is
/// not a count, and the limit is left out.
///
/// Narrower than apimachinery, which also takes a sign (`+1`), a number
/// without a digit (`k` is 0), `n` and `u`, and exponents beyond ±40; and
/// reads otherwise a fraction of a binary unit (`0.5Ki` is 512), a value
/// finer than `1n` (rounded up: `0.9999999999` is 1), a binary value past
/// the int64 maximum (capped) and more than 38 digits (exact).
pub(super) fn parse_count(q: &str) -> Option<u64> {
    let q = q.trim();
    let number_end = q.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(q.len());
    let (number, suffix) = q.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return None;
    }
    // The number's power of ten, and its power of two for a binary suffix.
    let (exponent, binary): (i64, u32) = match suffix {
        "" => (0, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        written => {
            let digits = written.strip_prefix(['e', 'E'])?;
            (digits.parse::<i32>().ok().filter(|e| e.abs() <= 40)?.into(), 0)
        }
    };
    let digits = format!("{whole}{fraction}");
    let significant = digits.trim_start_matches('0');
    // More than 38 significant digits are no count anyone writes: no limit.
    if significant.len() > 38 {
        return Some(u64::MAX);
    }
    // A whole number before any binary factor: the decimal places left
    // once trailing zeros are dropped must be none (Go would round a value
    // finer than 1n up, and multiply a fraction by the binary unit).
    let trailing_zeros = significant.len() - significant.trim_end_matches('0').len();
    let places = i64::try_from(fraction.len()).ok()? - i64::try_from(trailing_zeros).ok()? - exponent;
    if !significant.is_empty() && places > 0 {
        return None;
    }
    // A binary suffix applies here: Go caps a binary quantity at the int64
    // maximum, where a count saturates at u64's.
    let decimal = if binary == 0 { q } else { number };
    match Quantity::parse(decimal).ok()?.as_u64() {
        Ok(n) => Some(n.saturating_mul(1 << binary)),
        Err(NotU64::TooLarge) => Some(u64::MAX),
        Err(NotU64::Negative | NotU64::Fraction) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::parse_count;

    #[test]
    fn quantities_read_as_whole_counts() {
        for (text, want) in [
            ("8", Some(8)),
            (" 10 ", Some(10)),
            ("1k", Some(1_000)),
            ("2M", Some(2_000_000)),
            ("1G", Some(1_000_000_000)),
            ("3T", Some(3_000_000_000_000)),
            ("1E", Some(1_000_000_000_000_000_000)),
            ("1Ki", Some(1024)),
            ("2Mi", Some(2 << 20)),
            ("2Gi", Some(2 << 30)),
            ("1Ei", Some(1 << 60)),
            ("1e3", Some(1_000)),
            ("5E2", Some(500)),
            ("1.5k", Some(1_500)),
            ("2.0", Some(2)),
            ("2000m", Some(2)),
            ("2.5", None),
            ("2500m", None),
            ("999m", None),
            (".5k", Some(500)),
            ("007", Some(7)),
            ("16Ei", Some(u64::MAX)),
            ("1e40", Some(u64::MAX)),
            ("99999999999999999999999999999999999999999", Some(u64::MAX)),
            ("-1", None),
            ("+1", None),
            ("1.2.3", None),
            ("1x", None),
            ("k", None),
            ("", None),
            ("1e999", None),
        ] {
            assert_eq!(parse_count(text), want, "{text:?}");
        }
    }
    /// Where apimachinery reads a count that this reader never did, or
    /// reads it otherwise; each answer is the one draguard always gave.
    #[test]
    fn keeps_its_reading_where_apimachinery_differs() {
        for (text, want) in [
            // Go: 512 and 1 (a fraction of a binary unit; rounded up to 1n).
            ("0.5Ki", None),
            ("0.9999999999", None),
            ("0.9999999999Ki", None),
            // Go: 1, 0 and 0 (`n` and `u`; a number with no digit is zero).
            ("1000000u", None),
            ("k", None),
            (".", None),
            // Go caps a binary value at the int64 maximum.
            ("8Ei", Some(1 << 63)),
            ("15Ei", Some(15 << 60)),
            // Go takes an exponent up to int32's.
            ("0e41", None),
            // Trailing zeros make a whole number at any exponent within ±40.
            ("10000000000e-10", Some(1)),
            ("1.000000000000000000000000000000000000001", Some(u64::MAX)),
        ] {
            assert_eq!(parse_count(text), want, "{text:?}");
        }
    }
}
