//! What a rejected expression is told: its issues, as cel-go renders
//! them, bounded.
//!
//! cel-go (`common/errors.go`, `Errors.ToDisplayString` and
//! `Error.ToDisplayString`, v0.26.x as vendored by Kubernetes v1.36) lists
//! every issue sorted by position, joined by newlines, each as
//! `ERROR: <input>:LINE:COL: msg`, then ` | ` and the source line (tabs
//! made spaces), then ` | ` and a caret under the column: a `.` for each
//! character before it, `．` for a multi-byte one, and `^` (`＾` under a
//! multi-byte character). The apiserver answers `compilation failed: `
//! and that text (`k8s.io/dynamic-resource-allocation/cel/compile.go`,
//! v0.36.x). A detail that stays within [`DETAIL_MAX`] is that, exactly.
//!
//! Past it, the detail is bounded: a 10 KB line echoed per issue, or an
//! error per level of deep nesting, renders as megabytes. So past the bound
//! the detail is the first issue with a caret excerpt of at most
//! [`EXCERPT_MAX`] characters, and how many more there were (see
//! docs/src/versions/differences.md).

use std::fmt::Write as _;

use kube_cel::cel::ParseErrors;

/// The most characters of the source line shown above the caret.
pub const EXCERPT_MAX: usize = 200;
/// The most characters of one error's own text (a token it quotes can be
/// a 10 KB string literal).
pub const MESSAGE_MAX: usize = 500;
/// The most characters of a detail given as cel-go gives it.
pub const DETAIL_MAX: usize = 4096;

/// One issue of an expression: 1-based line, 1-based column in characters
/// (cel-go's runes), and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Issue {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// The parser's errors as issues. Its visitor's "Incomplete ..." errors
/// follow from a syntax error on the same tree: cel-go's visitor reports
/// one only when there was no other error, so they are kept only alone.
pub fn parse_issues(errors: &ParseErrors) -> Vec<Issue> {
    let incomplete = |msg: &str| msg.starts_with("Incomplete ");
    let only_incomplete = errors.errors.iter().all(|e| incomplete(&e.msg));
    let mut issues: Vec<Issue> = errors
        .errors
        .iter()
        .filter(|e| only_incomplete || !incomplete(&e.msg))
        .map(|e| Issue {
            line: usize::try_from(e.pos.0).unwrap_or(0),
            column: usize::try_from(e.pos.1).unwrap_or(0),
            message: e.msg.clone(),
        })
        .collect();
    // cel-go sorts by line, then column, keeping the order of equals.
    issues.sort_by_key(|i| (i.line, i.column));
    issues
}

/// The issues of `source` as one detail, without the `compilation failed: `
/// prefix: as cel-go renders them when that is short, else summarised.
pub fn describe(source: &str, issues: &[Issue]) -> String {
    let Some(first) = issues.first() else {
        return String::from("ERROR: <input>: the CEL parser gave no reason");
    };
    if issues.iter().all(|i| renders_short(source, i)) {
        let mut out = String::new();
        for (k, issue) in issues.iter().enumerate() {
            if k > 0 {
                out.push('\n');
            }
            render(&mut out, source_line(source, issue.line), issue);
            if out.len() > DETAIL_MAX {
                break;
            }
        }
        if out.len() <= DETAIL_MAX {
            return out;
        }
    }
    let mut out = format!(
        "ERROR: <input>:{}:{}: {}",
        first.line,
        first.column,
        cut(&first.message, MESSAGE_MAX)
    );
    if let Some(line) = source_line(source, first.line) {
        let (excerpt, at) = excerpt(line, first.column.saturating_sub(1));
        snippet(&mut out, &excerpt, at);
    }
    match issues.len() - 1 {
        0 => {}
        1 => out.push_str("\n… and 1 more error"),
        more => {
            let _ = write!(out, "\n… and {more} more errors");
        }
    }
    out
}

/// cel-go's `Error.ToDisplayString`, onto `out`.
fn render(out: &mut String, line: Option<&str>, issue: &Issue) {
    let _ = write!(out, "ERROR: <input>:{}:{}: {}", issue.line, issue.column, issue.message);
    if let Some(line) = line {
        snippet(out, line, issue.column.saturating_sub(1));
    }
}

/// The source line and the caret under its character `at` (0-based), as
/// cel-go draws them.
fn snippet(out: &mut String, line: &str, at: usize) {
    let line = line.replace('\t', " ");
    let _ = write!(out, "\n | {line}\n | ");
    let mut chars = line.chars();
    for _ in 0..at {
        match chars.next() {
            Some(c) if c.len_utf8() > 1 => out.push('．'),
            Some(_) => out.push('.'),
            None => break,
        }
    }
    match chars.next() {
        Some(c) if c.len_utf8() > 1 => out.push('＾'),
        _ => out.push('^'),
    }
}

/// Whether cel-go's rendering of `issue` is short: its text and source
/// line within bounds, and its caret on that line.
fn renders_short(source: &str, issue: &Issue) -> bool {
    if issue.message.chars().count() > MESSAGE_MAX {
        return false;
    }
    match source_line(source, issue.line) {
        None => true,
        Some(line) => {
            let width = line.chars().count();
            width <= EXCERPT_MAX && (1..=width + 1).contains(&issue.column)
        }
    }
}

/// The source line an issue points into (cel-go's `Source.Snippet`).
fn source_line(source: &str, line: usize) -> Option<&str> {
    source.split('\n').nth(line.checked_sub(1)?)
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

    /// The detail of `source`, which does not parse.
    fn detail(source: &str) -> String {
        describe(source, &parse_issues(&parsed(source)))
    }

    /// One error on a short line is cel-go's text, byte for byte: the
    /// real apiserver's answer (`kubectl create --dry-run=server`, v1.36.2).
    /// The `cel` crate draws the snippet as `\n| `; cel-go as `\n | `.
    #[test]
    fn one_short_error_is_cel_gos() {
        assert_eq!(
            detail("device.driver =="),
            "ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | device.driver ==\n | ................^"
        );
        assert_eq!(
            detail("device.driver == 'a' &&\n  )"),
            "ERROR: <input>:2:3: Syntax error: mismatched input ')' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n |   )\n | ..^"
        );
    }

    /// cel-go's caret: a wide dot before, and a wide caret under, a
    /// multi-byte character; tabs shown as spaces.
    #[test]
    fn carets_are_drawn_as_cel_go_draws_them() {
        let issue = |column| Issue {
            line: 1,
            column,
            message: "m".into(),
        };
        let mut out = String::new();
        render(&mut out, Some("'é' + foo"), &issue(7));
        assert_eq!(out, "ERROR: <input>:1:7: m\n | 'é' + foo\n | .．....^");
        out.clear();
        render(&mut out, Some("é == x"), &issue(1));
        assert_eq!(out, "ERROR: <input>:1:1: m\n | é == x\n | ＾");
        out.clear();
        render(&mut out, Some("\tfoo"), &issue(2));
        assert_eq!(out, "ERROR: <input>:1:2: m\n |  foo\n | .^");
    }

    /// The issue's reproducer: one error per level past the parser's
    /// limit, each with the 10 KB line. The detail is the first, with 200
    /// characters around its caret, and the count of the rest.
    #[test]
    fn deep_nesting_is_summarised() {
        let source = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
        let errors = parsed(&source);
        let more = errors.errors.len() - 1;
        assert!(more > 4000, "{more}");
        let detail = detail(&source);
        let first = &errors.errors[0];
        assert_eq!(first.pos, (1, 97));
        // The caret sits under the 97th `[`, within 100 characters of the
        // start: the excerpt is the line's first 199 characters and a mark.
        let want = format!(
            "ERROR: <input>:1:97: {}\n | {}…\n | {}^\n… and {more} more errors",
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
        let source = format!("device.driver == \"{literal}\" \"x\"");
        assert_eq!(parsed(&source).errors.len(), 1);
        let detail = detail(&source);
        let (head, shown) = detail.split_once('\n').expect("an excerpt");
        assert_eq!(
            head,
            "ERROR: <input>:1:3021: Syntax error: extraneous input '\"x\"' expecting <EOF>"
        );
        // The caret (under `"x"`) is 3 characters from the end: the window
        // is the line's last 199 characters after a mark, a multi-byte
        // character, which cel-go's caret line marks with a wide dot.
        let want = format!(" | …{}\" \"x\"\n | ．{}^", "a".repeat(194), ".".repeat(196));
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

    /// Every error is shown, as cel-go shows them, while the detail is
    /// short: the real apiserver's answers. The `cel` parser's "Incomplete"
    /// errors, which cel-go does not report beside a syntax error, are not.
    #[test]
    fn every_error_is_shown_while_short() {
        let expecting = "expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}";
        assert_eq!(
            detail("1 + + 2 =="),
            format!(
                "ERROR: <input>:1:5: Syntax error: extraneous input '+' {expecting}\n | 1 + + 2 ==\n | ....^\nERROR: <input>:1:11: Syntax error: mismatched input '<EOF>' {expecting}\n | 1 + + 2 ==\n | ..........^"
            )
        );
        // cel-go's second error expects ':'; the `cel` crate's grammar
        // lists more tokens there (a known difference of its parser).
        assert!(detail("a ? : b").starts_with(&format!(
            "ERROR: <input>:1:5: Syntax error: extraneous input ':' {expecting}\n | a ? : b\n | ....^\nERROR: <input>:1:8: Syntax error: mismatched input '<EOF>' expecting {{"
        )));
    }

    /// Past [`DETAIL_MAX`], the first error and a count.
    #[test]
    fn many_errors_are_counted_not_shown() {
        let source = "1 + ".repeat(50);
        let issues: Vec<Issue> = (1..=40)
            .map(|column| Issue {
                line: 1,
                column,
                message: "m".repeat(100),
            })
            .collect();
        let got = describe(&source, &issues);
        assert!(
            got.starts_with(&format!("ERROR: <input>:1:1: {}\n | 1 + ", "m".repeat(100))),
            "{got}"
        );
        assert!(got.ends_with("\n | ^\n… and 39 more errors"), "{got}");
    }
}
