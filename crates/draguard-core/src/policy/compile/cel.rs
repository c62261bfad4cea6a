//! CEL literals: how compiled policies spell strings and lists of them.

/// A CEL string literal (single quotes) holding exactly `s`: backslash,
/// quote and the control characters escaped (cel-spec's string literal
/// escapes, cel-spec doc/langdef.md "String and Bytes Values").
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A CEL list literal of strings.
pub fn strings<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let inner: Vec<String> = items.into_iter().map(string).collect();
    format!("[{}]", inner.join(", "))
}

/// `a || b || ...`, `false` for none; each operand parenthesised.
pub fn any(terms: &[String]) -> String {
    match terms {
        [] => "false".to_owned(),
        [one] => one.clone(),
        many => many.iter().map(|t| format!("({t})")).collect::<Vec<_>>().join(" || "),
    }
}

/// `a && b && ...`, `true` for none; each operand parenthesised.
pub fn all(terms: &[String]) -> String {
    match terms {
        [] => "true".to_owned(),
        [one] => one.clone(),
        many => many.iter().map(|t| format!("({t})")).collect::<Vec<_>>().join(" && "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(string("ml"), "'ml'");
        assert_eq!(string("it's \\ \"x\"\n"), "'it\\'s \\\\ \"x\"\\n'");
        assert_eq!(string("\u{1}"), "'\\u0001'");
        assert_eq!(strings(["a", "b'"]), "['a', 'b\\'']");
    }

    #[test]
    fn connectives() {
        assert_eq!(any(&[]), "false");
        assert_eq!(any(&["a".into()]), "a");
        assert_eq!(any(&["a".into(), "b || c".into()]), "(a) || (b || c)");
        assert_eq!(all(&[]), "true");
        assert_eq!(all(&["a".into(), "b".into()]), "(a) && (b)");
    }
}
