//! What a rejected expression is told: the parser's errors, bounded.
//!
//! The `cel` parser reports every error with the whole source line and a
//! caret under it. A short expression with one error keeps that text as
//! is: it is cel-go's shape, and what the apiserver says. Deep nesting
//! makes the parser report an error per level past its limit, each echoing
//! the line: `[`×5000 `1` `]`×5000 (10 KB) renders as 124 MB. So past one
//! error, or past a long line or message, the detail is the first error
//! with a caret excerpt of at most [`EXCERPT_MAX`] characters, and how many
//! more there were. (cel-go stops at 100 errors, each still with its whole
//! line: see docs/differences.md.)

use std::fmt::Write as _;

use kube_cel::cel::{ParseError, ParseErrors};

/// The most characters of the source line shown above the caret.
pub const EXCERPT_MAX: usize = 200;
/// The most characters of one error's own text (a token it quotes can be
/// a 10 KB string literal).
pub const MESSAGE_MAX: usize = 500;

/// The parser's errors as one detail, without the `compilation failed: `
/// prefix: verbatim when that is short, else summarised.
pub fn describe(errors: &ParseErrors) -> String {
    let Some(first) = errors.errors.first() else {
        return String::from("ERROR: <input>: the CEL parser gave no reason");
    };
    if errors.errors.len() == 1 && renders_short(first) {
        return errors.to_string();
    }
    let mut out = format!(
        "ERROR: <input>:{}:{}: {}",
        first.pos.0,
        first.pos.1,
        cut(&first.msg, MESSAGE_MAX)
    );
    if let Some(line) = source_line(first) {
        let caret = usize::try_from(first.pos.1.saturating_sub(1)).unwrap_or(0);
        let (excerpt, at) = excerpt(line, caret);
        let _ = write!(out, "\n| {excerpt}\n| {}^", ".".repeat(at));
    }
    match errors.errors.len() - 1 {
        0 => {}
        1 => out.push_str("\n… and 1 more error"),
        more => {
            let _ = write!(out, "\n… and {more} more errors");
        }
    }
    out
}

/// Whether the parser's own rendering of `error` is short: its text and
/// source line within bounds, and its caret on that line (the rendering
/// pads to the column, whatever it is).
fn renders_short(error: &ParseError) -> bool {
    if error.msg.chars().count() > MESSAGE_MAX {
        return false;
    }
    match source_line(error) {
        None => true,
        Some(line) => {
            let width = line.chars().count();
            width <= EXCERPT_MAX && (1..=width + 1).contains(&usize::try_from(error.pos.1).unwrap_or(0))
        }
    }
}

/// The source line an error points into, as the parser's rendering finds it.
fn source_line(error: &ParseError) -> Option<&str> {
    let line = usize::try_from(error.pos.0).ok()?.checked_sub(1)?;
    error.source_info.as_ref()?.source.lines().nth(line)
}

/// At most `max` characters of `text`, the last one `…` when it was cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some(_) => {
            let mut kept: String = text.chars().take(max.saturating_sub(1)).collect();
            kept.push('…');
            kept
        }
    }
}

/// A window of at most [`EXCERPT_MAX`] characters of `line` around the
/// character index `caret` (which may be one past the end: the end of
/// input), with `…` where it was cut; and the caret's index in it.
fn excerpt(line: &str, caret: usize) -> (String, usize) {
    let chars: Vec<char> = line.chars().collect();
    let caret = caret.min(chars.len());
    if chars.len() <= EXCERPT_MAX {
        return (line.to_owned(), caret);
    }
    let mut start = caret.saturating_sub(EXCERPT_MAX / 2).min(chars.len() - EXCERPT_MAX);
    let mut end = start + EXCERPT_MAX;
    let (lead, trail) = (start > 0, end < chars.len());
    // The marks take the place of a character each, so that the whole
    // excerpt stays within the bound.
    if lead {
        start += 1;
    }
    if trail {
        end -= 1;
    }
    let mut shown = String::with_capacity(EXCERPT_MAX * 4);
    if lead {
        shown.push('…');
    }
    shown.extend(&chars[start..end]);
    if trail {
        shown.push('…');
    }
    (shown, caret - start + usize::from(lead))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(source: &str) -> ParseErrors {
        // Deep nesting needs the compile thread's stack in a debug build.
        let source = source.to_owned();
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(move || match kube_cel::cel::Program::compile(&source) {
                Ok(_) => panic!("{source:.40} parses"),
                Err(e) => e,
            })
            .expect("thread")
            .join()
            .expect("parser")
    }

    /// One error on a short line is the parser's text, byte for byte.
    #[test]
    fn one_short_error_is_verbatim() {
        let errors = parsed("device.driver ==");
        assert_eq!(describe(&errors), errors.to_string());
        assert_eq!(
            describe(&errors),
            "ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n| device.driver ==\n| ................^"
        );
        let multiline = parsed("device.driver == 'a' &&\n  )");
        assert_eq!(describe(&multiline), multiline.to_string());
    }

    /// The reproducer: one error per level past the parser's
    /// limit, each with the 10 KB line. The detail is the first, with 200
    /// characters around its caret, and the count of the rest.
    #[test]
    fn deep_nesting_is_summarised() {
        let source = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
        let errors = parsed(&source);
        let more = errors.errors.len() - 1;
        assert!(more > 4000, "{more}");
        let detail = describe(&errors);
        let first = &errors.errors[0];
        assert_eq!(first.pos, (1, 97));
        // The caret sits under the 97th `[`, within 100 characters of the
        // start: the excerpt is the line's first 199 characters and a mark.
        let want = format!(
            "ERROR: <input>:1:97: {}\n| {}…\n| {}^\n… and {more} more errors",
            first.msg,
            "[".repeat(199),
            ".".repeat(96)
        );
        assert_eq!(detail, want);
        assert!(detail.len() < 1024, "{}", detail.len());
    }

    /// A long line with one error is cut around the caret; a caret near
    /// either end keeps that end.
    #[test]
    fn long_lines_are_cut_around_the_caret() {
        let literal = "a".repeat(3000);
        let errors = parsed(&format!("device.driver == \"{literal}\" \"x\""));
        assert_eq!(errors.errors.len(), 1);
        let detail = describe(&errors);
        let (head, shown) = detail.split_once('\n').expect("an excerpt");
        assert_eq!(
            head,
            "ERROR: <input>:1:3021: Syntax error: extraneous input '\"x\"' expecting <EOF>"
        );
        // The caret (under `"x"`) is 3 characters from the end: the window
        // is the line's last 199 characters after a mark.
        let want = format!("| …{}\" \"x\"\n| {}^", "a".repeat(194), ".".repeat(197));
        assert_eq!(shown, want);

        let (start, at) = excerpt(&format!("xy{}", "z".repeat(400)), 1);
        assert_eq!(start, format!("xy{}…", "z".repeat(197)));
        assert_eq!(at, 1);
        // The end of input, one past the last character.
        let (end, at) = excerpt(&"q".repeat(400), 400);
        assert_eq!(end, format!("…{}", "q".repeat(199)));
        assert_eq!(at, 200);
        // In the middle: 100 characters before the caret, 99 after it.
        let middle: String = (0..1000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let (window, at) = excerpt(&middle, 500);
        assert_eq!(window.chars().count(), 200);
        assert_eq!(window, format!("…{}…", &middle[401..599]));
        assert_eq!(window.chars().nth(at), middle.chars().nth(500));
    }

    #[test]
    fn long_messages_are_cut() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "ab…");
        assert_eq!(cut(&"é".repeat(600), MESSAGE_MAX).chars().count(), MESSAGE_MAX);
    }

    /// Errors past the first on a short line are counted, not shown.
    #[test]
    fn more_errors_are_counted_not_shown() {
        let expecting = "expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}";
        assert_eq!(
            describe(&parsed("1 + + 2 ==")),
            format!(
                "ERROR: <input>:1:5: Syntax error: extraneous input '+' {expecting}\n| 1 + + 2 ==\n| ....^\n… and 1 more error"
            )
        );
        assert_eq!(
            describe(&parsed("a ? : b")),
            "ERROR: <input>:1:1: Incomplete `ExprContext` for `_?_:_` expression!\n| a ? : b\n| ^\n… and 2 more errors"
        );
    }
}
