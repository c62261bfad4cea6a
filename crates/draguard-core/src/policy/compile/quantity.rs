//! A `format: quantity` schema node judged in CEL, word for word as the
//! webhook judges it (`rules::driver_config::structural`): a string is
//! trimmed of white space and parsed with `k8s_quantity::Quantity::parse`,
//! whose three errors are apimachinery's (`resource.ParseQuantity`,
//! staging/src/k8s.io/apimachinery/pkg/api/resource/quantity.go at
//! kubernetes v1.36.2: `parseQuantityString`, then
//! `quantitySuffixer.interpret`, then the int64 fast path or the `inf.Dec`
//! exact path). A number is not parsed (an int-or-string's type check
//! judges it).
//!
//! Each error is told apart from the others by the step that raises it,
//! in the parser's order:
//! 1. `ErrFormatWrong`: empty, or not the scanner's shape (sign, digits,
//!    one point and digits, suffix letters, one sign, digits). That shape
//!    is not the regular expression the message quotes (`1.2.3` matches
//!    that one and fails the scanner).
//! 2. `ErrSuffix`: the text after the number is none of `interpret`'s
//!    suffixes: the SI ones, the binary ones, or `e`/`E` and an integer
//!    `strconv.ParseInt` reads as an int64 (so `1e99999999999999999999` is
//!    a suffix error, not a format one).
//! 3. `ErrNumeric`: the exact path reached with no digit at all (`.e-10`,
//!    `.Pi`), or a value whose exact decimal form needs more than
//!    `k8s_quantity::MAX_DIGITS` digits (that crate's bound, where Go
//!    would compute with numbers of billions of digits: `1e10000`,
//!    `0e-10000`). Each bound is computed from the text's lengths as the
//!    crate computes it (`parse_int64`, `parse_exact`, `within_bounds`).
//!
//! CEL's `isQuantity` is not used: it is Go's ParseQuantity, which accepts
//! what the crate refuses as too large, and whose exact path, on an
//! exponent near the int32 bound (`1e-2000000000`), would round a number
//! of two billion digits inside the apiserver.
//!
//! The strings extension's `trim()` is Go's `strings.TrimSpace`, Unicode's
//! White_Space, the set Rust's `str::trim` removes.

use super::cel::string as lit;

/// The scanner's shape (`parseQuantityString`: everything it does not
/// refuse with ErrFormatWrong).
const SHAPE: &str = r"^[+-]?[0-9]*(\.[0-9]*)?[eEinumkKMGTP]*[-+]?[0-9]*$";

/// Quantities as they are mostly written, valid whatever the path
/// (`1`, `512Mi`, `1.5Gi`, `-0.25m`): at most 18 integer digits and 9
/// fraction digits, and an SI or binary suffix, is a number of at most 27
/// digits scaled by at most 10^18 or 2^60, far within every bound. Told
/// at once, without the parse's other steps (cheaper on the apiserver;
/// tried on short strings only, where it can match).
const PLAIN: &str = r"^[+-]?[0-9]{1,18}(\.[0-9]{0,9})?([numkMGTPE]|[KMGTPE]i)?$";

/// The SI suffixes and their powers of ten (`suffix.go`,
/// `newSuffixer`'s decSuffixes).
const SI: [(&str, i32); 10] = [
    ("", 0),
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

/// The binary suffixes (`binSuffixes`): `Ki` is 2^10, ... `Ei` 2^60.
const BINARY: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

/// Exponents no int32 reaches: the suffix is binary, or none `interpret`
/// knows.
const BINARY_MARK: i64 = 9_000_000_000;
const BAD_SUFFIX_MARK: i64 = 9_000_000_001;

/// The check of a quantity node: (condition over the value `v`, the
/// webhook's text at `at` with the value shown as `shown`). One check,
/// whose text names the first error the parser meets; `parsed` is where
/// its [`error`] is read.
pub fn check(v: &str, at: &str, shown: &str, parsed: &str) -> (String, String) {
    let error = parsed;
    let messages = [
        k8s_quantity::QuantityError::FormatWrong,
        k8s_quantity::QuantityError::Suffix,
        k8s_quantity::QuantityError::Numeric,
    ]
    .map(|e| lit(&format!(": {e}")));
    (
        format!("type({v}) == string && {error} != 0"),
        format!(
            "{at} + ': Invalid value: ' + {shown} + ['', {}][{error}]",
            messages.join(", ")
        ),
    )
}

/// int32(x) for `-2^32 < x < 2^32`: Go's conversions of the exponent and
/// the scales.
fn int32(x: &str) -> String {
    format!("[({x}) % 4294967296].map(w, w >= 2147483648 ? w - 4294967296 : w < -2147483648 ? w + 4294967296 : w)[0]")
}

/// `5^n` in decimal: the digits of `10^c / 2^n`, the least leading digits
/// a number needs for its product with `2^n` to have one more digit.
fn five_to_the(n: u32) -> String {
    let mut digits = vec![1u8];
    for _ in 0..n {
        let mut carry = 0;
        for d in digits.iter_mut() {
            let x = *d * 5 + carry;
            *d = x % 10;
            carry = x / 10;
        }
        if carry > 0 {
            digits.push(carry);
        }
    }
    digits.iter().rev().map(|d| char::from(b'0' + d)).collect()
}

/// Which error the webhook's parse of the string `v` (trimmed) ends in:
/// 0 none, 1 ErrFormatWrong, 2 ErrSuffix, 3 ErrNumeric (an int).
///
/// Bound: `qt` the trimmed text, `qn` its number (sign, digits, point,
/// digits), `qx` the suffix, `qa` the number's digits, `qp` the
/// fraction's length, `qd` the digits without leading zeros, `qg` the
/// significant ones (no trailing zeros either), `qz` the trailing zeros,
/// `qm` the length of Go's `num` (the integer digits without leading
/// zeros, at least 1), `qe` the suffix's power of ten (or a mark).
pub fn error(v: &str) -> String {
    let max = k8s_quantity::MAX_DIGITS;
    let si = format!(
        "{{{}}}",
        SI.iter()
            .map(|(s, e)| format!("{}: {e}", lit(s)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let binary_j = format!(
        "{{{}}}",
        BINARY
            .iter()
            .zip(1u32..)
            .map(|(b, j)| format!("{}: {j}", lit(b)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let thresholds = format!(
        "{{{}}}",
        BINARY
            .iter()
            .zip(1u32..)
            .map(|(b, j)| format!("{}: {}", lit(b), lit(&five_to_the(10 * j))))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // `interpret`: an SI suffix, a binary one, or `e`/`E` and what
    // strconv.ParseInt reads as an int64 (its digits past leading zeros
    // at most int64's), truncated to int32.
    let exponent = format!(
        "qx in {si} ? {si}[qx] : qx in {binary_j} ? {BINARY_MARK} : (qx.matches('^[eE][+-]?[0-9]+$') && [qx.substring(1).find('[1-9][0-9]*')].map(r, size(r) < 19 || (size(r) == 19 && r <= (qx.contains('-') ? '{}' : '{}')))[0]) ? {} : {BAD_SUFFIX_MARK}",
        i64::MIN.unsigned_abs(),
        i64::MAX,
        int32("int(qx.substring(1))"),
    );
    // Decimal: `parse_int64` when at most 18 digits and a scale of at
    // least -9 (out of bounds: the value's digits and its scale past
    // MAX_DIGITS); else `parse_exact`: no digit; a zero keeps its scale;
    // the significant digits; their shift to nine places, rounded up
    // (one more digit only when all but the last are nines).
    let decimal = format!(
        "[{fast_scale}].map(qc, qm + qp <= 18 && qc >= -9 ? size(qd) > 0 && size(qd) + qc > {max} : qa == '' || [{exact_scale}].map(qk, qg == '' ? qk >= {max} : size(qg) > {max} || (qz - qk + 9 >= 0 ? size(qg) + qz - qk + 9 >= {max} : size(qg) == {max} && qz - qk + 9 == -1 && size(qg.find('^9*')) >= {}))[0])[0]",
        max - 1,
        fast_scale = int32("qe - qp"),
        exact_scale = int32("qp - qe"),
    );
    // Binary (2^(10j)): the fast path when no fraction and
    // 15 - len(num) - 3j - 1 >= 0 (never out of bounds); else exact: a
    // zero keeps the fraction's length as its scale; the significant
    // digits times 2^(10j) (3j more digits, or 3j+1 when they begin at
    // least as 5^(10j) does) shifted to nine places; past that, the value
    // is capped at the int64 maximum.
    let binary = format!(
        "[{binary_j}[qx]].map(qj, qp == 0 && qm <= 14 - 3 * qj ? false : qa == '' || (qg == '' ? qp >= {max} : size(qg) > {max} || (qz - qp + 9 >= 0 && size(qg) + 3 * qj + (qg >= {thresholds}[qx] ? 1 : 0) + qz - qp + 9 > {max})))[0]"
    );
    format!(
        "[{v}.trim()].map(qt, size(qt) <= 32 && qt.matches({plain}) ? 0 : qt == '' || !qt.matches({shape}) ? 1 : \
         [qt.find({number})].map(qn, [qt.substring(size(qn))].map(qx, \
         [qn.find('[0-9.]*$').replace('.', '')].map(qa, \
         [qn.find('[.][0-9]*')].map(qf, [qf == '' ? 0 : size(qf) - 1].map(qp, \
         [qa.find('[1-9][0-9]*')].map(qd, [qd.find('^[0-9]*[1-9]')].map(qg, [size(qd) - size(qg)].map(qz, \
         [size(qn.find('^[^.]*').find('[1-9][0-9]*'))].map(qm, [qm == 0 ? 1 : qm].map(qm, \
         [{exponent}].map(qe, qe == {BAD_SUFFIX_MARK} ? 2 : (qe == {BINARY_MARK} ? ({binary}) : ({decimal})) ? 3 : 0)\
         [0])[0])[0])[0])[0])[0])[0])[0])[0])[0])[0])[0]",
        plain = lit(PLAIN),
        shape = lit(SHAPE),
        number = lit(r"^[+-]?[0-9]*(\.[0-9]*)?"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_powers_of_five() {
        assert_eq!(five_to_the(10), "9765625");
        assert_eq!(five_to_the(20), "95367431640625");
        // 10^19 / 2^60
        assert_eq!(five_to_the(60), "867361737988403547205962240695953369140625");
    }
}
