//! The parser's nesting limit, checked by one linear scan before parsing.
//!
//! cel-go's parser counts how deep each grammar rule is entered and stops
//! at the first rule entered more than `maxRecursionDepth` times, with one
//! error that has no location (parser/parser.go, `recursionListener`, and
//! the defaults in `NewParser`, cel-go v0.25.0 to v0.28.1: 250). The
//! Kubernetes CEL environment sets no parser option
//! (k8s.io/apiserver/pkg/cel/environment/base.go), so the apiserver's limit
//! is that default, and a DRA selector nested past it is denied with
//! `compilation failed: ERROR: <input>:-1:0: expression recursion limit
//! exceeded: 250` (k8s.io/dynamic-resource-allocation/cel/compile.go
//! prefixes `compilation failed: ` to cel-go's issues).
//!
//! The Rust parser, in contrast, reports an error for every level past its
//! limit and keeps descending: a 10 KiB run of `[` costs it most of a
//! second. So the nesting is measured here first, in one pass over the
//! bytes, and an expression cel-go would stop on is rejected without being
//! parsed at all.
//!
//! What is counted is the depth of the `expr` rule, the one every nesting
//! construct goes through:
//! - the top-level expression is at depth 1;
//! - a bracket, `(`, `[` or `{`, that holds anything holds an expression
//!   one deeper (parenthesised, list element, index, call argument, map
//!   key or value, message field value);
//! - the else branch of a conditional, after its `:`, is an expression one
//!   deeper (`expr: conditionalOr '?' conditionalOr ':' expr`), so a chain
//!   of conditionals nests too. Outside `{ }` a `:` can only be a
//!   conditional's; inside, it may be a map's or a field's and is not
//!   counted, and a `,` starts a new element.
//!
//! This is a lower bound of cel-go's count: whatever the scan rejects,
//! cel-go rejects, so the verdict never differs from the apiserver's. Of a
//! valid expression the scan sees exactly what the lexer sees (strings,
//! raw strings, comments are skipped as the lexer skips them); an invalid
//! one is rejected by cel-go either way. What the scan cannot see
//! (cel-go's other counters: long chains of `+` or `.field`) stays with
//! the parser. The message is cel-go's first line; cel-go lists after it
//! any syntax errors it met before the limit, which are not listed here.

/// cel-go's default `maxRecursionDepth` (parser/parser.go, `NewParser`).
pub const MAX_RECURSION_DEPTH: usize = 250;

/// The detail cel-go gives past [`MAX_RECURSION_DEPTH`] (an error at
/// `common.NoLocation`, line -1, column 0 displayed).
pub fn too_deep_detail() -> String {
    format!("compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: {MAX_RECURSION_DEPTH}")
}

/// How deep `expression` nests its expressions, as cel-go counts them (a
/// lower bound), up to one past [`MAX_RECURSION_DEPTH`], where the scan
/// stops. Linear in the length of `expression`.
pub fn depth(expression: &str) -> usize {
    deepest(expression.as_bytes(), MAX_RECURSION_DEPTH)
}

/// Whether `depth` is past what cel-go's parser allows.
pub fn too_deep(depth: usize) -> bool {
    depth > MAX_RECURSION_DEPTH
}

/// One open bracket: whether a `:` in it is a conditional's, and how many
/// conditionals of its current element have been entered.
struct Level {
    counts_colons: bool,
    colons: usize,
}

/// The depth of the deepest expression in `src`, or `limit + 1` as soon as
/// one is deeper than `limit`.
fn deepest(src: &[u8], limit: usize) -> usize {
    // The top level: a `:` there is a conditional's.
    let mut levels = vec![Level {
        counts_colons: true,
        colons: 0,
    }];
    let mut depth = 1usize;
    let mut deepest = depth;
    let mut i = 0;
    while i < src.len() {
        match src[i] {
            b'/' if src.get(i + 1) == Some(&b'/') => {
                i = line_end(src, i);
                continue;
            }
            quote @ (b'"' | b'\'') => {
                i = string_end(src, i, quote, raw_prefix(src, i));
                continue;
            }
            open @ (b'(' | b'[' | b'{') => {
                levels.push(Level {
                    counts_colons: open != b'{',
                    colons: 0,
                });
                depth += 1;
                // An empty bracket holds no expression (`[]`, `f()`, `{}`,
                // and the grammar's lone trailing comma, `[,]`).
                if depth > deepest && !matches!(next_significant(src, i + 1), Some(b')' | b']' | b'}' | b',') | None) {
                    deepest = depth;
                    if deepest > limit {
                        return deepest;
                    }
                }
            }
            b')' | b']' | b'}' => {
                // Unbalanced closers make the expression invalid anyway;
                // the top level is never popped.
                if levels.len() > 1
                    && let Some(level) = levels.pop()
                {
                    depth -= 1 + level.colons;
                }
            }
            b',' => {
                if let Some(level) = levels.last_mut() {
                    depth -= level.colons;
                    level.colons = 0;
                }
            }
            b':' => {
                if let Some(level) = levels.last_mut().filter(|l| l.counts_colons) {
                    level.colons += 1;
                    depth += 1;
                    deepest = deepest.max(depth);
                    if deepest > limit {
                        return deepest;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    deepest
}

/// The offset just past the `\n` that ends the comment starting at `from`.
fn line_end(src: &[u8], from: usize) -> usize {
    src[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(src.len(), |n| from + n + 1)
}

/// The first byte from `from` that is not blank or in a comment.
fn next_significant(src: &[u8], mut from: usize) -> Option<u8> {
    while from < src.len() {
        match src[from] {
            b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' => from += 1,
            b'/' if src.get(from + 1) == Some(&b'/') => from = line_end(src, from),
            b => return Some(b),
        }
    }
    None
}

/// Whether the quote at `at` opens a raw string: the lexer's `RAW` prefix
/// (`r`, or `br` for raw bytes) makes a token of its own with the string,
/// so it counts only when the identifier-like run before the quote is that
/// prefix exactly (`xr"…"` is the identifier `xr` and a plain string).
fn raw_prefix(src: &[u8], at: usize) -> bool {
    let run_start = src[..at]
        .iter()
        .rposition(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
        .map_or(0, |p| p + 1);
    matches!(&src[run_start..at], b"r" | b"R" | b"br" | b"bR" | b"Br" | b"BR")
}

/// The offset just past the string literal whose opening quote is at `at`
/// (the end of the input when it is not closed: the lexer rejects it).
/// Triple-quoted strings may span lines; escapes (`\` and the next byte)
/// count only in strings that are not raw.
fn string_end(src: &[u8], at: usize, quote: u8, raw: bool) -> usize {
    let triple = src.get(at + 1) == Some(&quote) && src.get(at + 2) == Some(&quote);
    let mut i = at + if triple { 3 } else { 1 };
    while i < src.len() {
        let b = src[i];
        if b == b'\\' && !raw {
            i += 2;
            continue;
        }
        if b == quote {
            if !triple {
                return i + 1;
            }
            if src.get(i + 1) == Some(&quote) && src.get(i + 2) == Some(&quote) {
                return i + 3;
            }
        } else if !triple && (b == b'\n' || b == b'\r') {
            // A one-line string cannot hold a line break: the lexer fails
            // here, and what follows is not scanned as string content.
            return i;
        }
        i += 1;
    }
    src.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lists(n: usize, inner: &str) -> String {
        format!("{}{inner}{}", "[".repeat(n), "]".repeat(n))
    }

    /// cel-go's own case (parser_test.go, with a limit of 32): 32 nested
    /// lists around a literal are refused, 31 are not. At the default of
    /// 250 the boundary is 249 / 250.
    #[test]
    fn the_limit_is_cel_gos() {
        assert_eq!(deepest(lists(32, "'not fine'").as_bytes(), 32), 33);
        assert_eq!(deepest(lists(31, "'fine'").as_bytes(), 32), 32);
        assert!(!too_deep(&lists(249, "1")));
        assert!(too_deep(&lists(250, "1")));
        assert!(!too_deep(&format!("{}1{}", "(".repeat(249), ")".repeat(249))));
        assert!(too_deep(&format!("{}1{}", "(".repeat(250), ")".repeat(250))));
        // The issue's selector: 10 KiB of `[`, never closed.
        assert!(too_deep(&"[".repeat(10 * 1024)));
    }

    #[test]
    fn the_message_is_cel_gos() {
        assert_eq!(
            too_deep_detail(),
            "compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250"
        );
    }

    /// An empty bracket holds no expression: 250 brackets of which the
    /// innermost is empty are 250 expressions deep, within the limit.
    #[test]
    fn an_empty_innermost_bracket_is_not_a_level() {
        assert!(!too_deep(&lists(250, "")));
        assert!(!too_deep(&lists(250, " // nothing\n ")));
        assert!(too_deep(&lists(251, "")));
        assert!(!too_deep(&format!("{}f(){}", "(".repeat(249), ")".repeat(249))));
    }

    /// A chain of conditionals nests its else branches.
    #[test]
    fn conditional_chains_nest() {
        let chain = |n: usize| format!("{}true", "true ? 1 : ".repeat(n));
        assert!(!too_deep(&chain(249)));
        assert!(too_deep(&chain(250)));
        // Conditionals in separate list elements do not add up.
        let elements = vec!["true ? 1 : 2"; 600].join(", ");
        assert!(!too_deep(&format!("[{elements}]")));
        // Map keys and values are not conditionals.
        let map = (0..600).map(|i| format!("{i}: {i}")).collect::<Vec<_>>().join(", ");
        assert!(!too_deep(&format!("{{{map}}}")));
        // Brackets and conditionals add up.
        assert!(too_deep(&format!(
            "{}{}{}",
            "[".repeat(200),
            chain(50),
            "]".repeat(200)
        )));
        assert!(!too_deep(&format!(
            "{}{}{}",
            "[".repeat(200),
            chain(49),
            "]".repeat(200)
        )));
    }

    /// Brackets in strings and comments are not nesting, as the lexer sees
    /// them; raw strings have no escapes, and only a prefix of its own is raw.
    #[test]
    fn strings_and_comments_are_skipped() {
        let brackets = "[".repeat(300);
        assert!(!too_deep(&format!("device.driver == \"{brackets}\"")));
        assert!(!too_deep(&format!("device.driver == '{brackets}'")));
        assert!(!too_deep(&format!("device.driver == \"\"\"\n{brackets}\"\"\"")));
        assert!(!too_deep(&format!("device.driver == b'{brackets}'")));
        assert!(!too_deep(&format!("true // {brackets}\n")));
        assert!(
            !too_deep(&format!("'\\'{brackets}'")),
            "an escaped quote does not close"
        );
        // `r'\'` is a whole raw string: the brackets after it count.
        assert!(too_deep(&format!("[r'\\', {brackets}1{}]", "]".repeat(300))));
        assert!(too_deep(&format!("[br'\\', {brackets}1{}]", "]".repeat(300))));
        // `xr'\'...` is the identifier `xr` and a plain string with an
        // escaped quote: the brackets are inside it.
        assert!(!too_deep(&format!("[xr'\\', {brackets}1'']")));
    }

    fn too_deep(expression: &str) -> bool {
        super::too_deep(depth(expression))
    }

    #[test]
    fn real_selectors_pass() {
        for selector in [
            r#"device.driver == "gpu.example.com""#,
            r#"device.attributes["gpu.example.com"].model == "a100" && device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
            r#"has(device.attributes["x"].y) ? device.attributes["x"].y : false"#,
            "",
            "]]]]",
        ] {
            assert!(!too_deep(selector), "{selector}");
        }
        assert_eq!(depth("device.driver == 'a'"), 1);
        assert_eq!(depth("f(a[0], [b])"), 3);
        assert_eq!(depth("a ? b : c ? d : [e]"), 4);
    }
}
