//! Where a selector refers to a variable the DRA environment does not
//! declare, as cel-go's checker reports it.
//!
//! cel-go's checker (`checker/checker.go`, `checkIdent`, v0.26.x as
//! vendored by Kubernetes v1.36) reports each such identifier, at its own
//! position, as `undeclared reference to 'NAME' (in container '')`; the
//! error list is then sorted by position (`common/errors.go`). So `foo ==
//! foo` is two issues, and a comprehension's own variable is no reference.
//!
//! The `cel` parser keeps each node's offset, but hands them out only with
//! a syntax error. The identifiers of the tree are therefore matched to the
//! source's identifier tokens: the parser numbers nodes as it reads, so
//! the tree's identifiers in id order are the source's variable tokens in
//! order, less the variables a macro binds (`l.exists(x, ...)`). When the
//! two lists do not match, the reference is reported without a position.

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};

use super::summary::Issue;

/// The macros whose first argument names a variable (the `cel` parser's
/// `find_expander`).
const BINDING_MACROS: &[&str] = &["all", "exists", "exists_one", "existsOne", "map", "filter"];

/// Words that are tokens of their own, never a variable.
const KEYWORDS: &[&str] = &["true", "false", "null", "in"];

/// The undeclared references of `expression`, parsed as `tree`, in source
/// order. `Err` with the names when their positions could not be found.
pub fn references(expression: &str, tree: &IdedExpr, declared: &[&str]) -> Result<Vec<Issue>, Vec<String>> {
    let mut idents = Vec::new();
    let mut scope = Vec::new();
    walk(tree, declared, &mut scope, &mut idents);
    if idents.iter().all(|i| !i.undeclared) {
        return Ok(Vec::new());
    }
    idents.sort_by_key(|i| i.id);
    let tokens = variable_tokens(expression);
    let matched = tokens.len() == idents.len() && tokens.iter().zip(&idents).all(|(t, i)| t.name == i.name);
    if !matched {
        let mut names: Vec<String> = idents.into_iter().filter(|i| i.undeclared).map(|i| i.name).collect();
        names.sort_unstable();
        names.dedup();
        return Err(names);
    }
    Ok(tokens
        .into_iter()
        .zip(idents)
        .filter(|(_, ident)| ident.undeclared)
        .map(|(token, ident)| Issue {
            line: token.line,
            column: token.column,
            message: format!("undeclared reference to '{}' (in container '')", ident.name),
        })
        .collect())
}

/// An identifier node of the tree.
struct Ident {
    id: u64,
    name: String,
    undeclared: bool,
}

/// Collects the identifier nodes under `expr`, `scope` holding the
/// comprehension variables in force. The parser's own (`@result`) are left
/// out: they have no token.
fn walk<'e>(expr: &'e IdedExpr, declared: &[&str], scope: &mut Vec<&'e str>, out: &mut Vec<Ident>) {
    match &expr.expr {
        Expr::Ident(name) => {
            if !name.starts_with('@') {
                out.push(Ident {
                    id: expr.id,
                    name: name.clone(),
                    undeclared: !declared.contains(&name.as_str()) && !scope.contains(&name.as_str()),
                });
            }
        }
        Expr::Call(call) => {
            if let Some(target) = &call.target {
                walk(target, declared, scope, out);
            }
            for arg in &call.args {
                walk(arg, declared, scope, out);
            }
        }
        Expr::Comprehension(c) => {
            walk(&c.iter_range, declared, scope, out);
            walk(&c.accu_init, declared, scope, out);
            let depth = scope.len();
            scope.push(&c.accu_var);
            walk(&c.result, declared, scope, out);
            scope.push(&c.iter_var);
            if let Some(second) = &c.iter_var2 {
                scope.push(second);
            }
            walk(&c.loop_cond, declared, scope, out);
            walk(&c.loop_step, declared, scope, out);
            scope.truncate(depth);
        }
        Expr::List(list) => {
            for element in &list.elements {
                walk(element, declared, scope, out);
            }
        }
        Expr::Map(map) => entries(&map.entries, declared, scope, out),
        Expr::Struct(s) => entries(&s.entries, declared, scope, out),
        Expr::Select(select) => walk(&select.operand, declared, scope, out),
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entries<'e>(
    entries: &'e [kube_cel::cel::common::ast::IdedEntryExpr],
    declared: &[&str],
    scope: &mut Vec<&'e str>,
    out: &mut Vec<Ident>,
) {
    for entry in entries {
        match &entry.expr {
            EntryExpr::StructField(field) => walk(&field.value, declared, scope, out),
            EntryExpr::MapEntry(e) => {
                walk(&e.key, declared, scope, out);
                walk(&e.value, declared, scope, out);
            }
        }
    }
}

/// A token of the source, with its 1-based line and character column.
#[derive(Debug, PartialEq)]
struct Token<'s> {
    text: &'s str,
    line: usize,
    column: usize,
}

/// A variable's token: its name and position.
#[derive(Debug, PartialEq)]
struct Variable<'s> {
    name: &'s str,
    line: usize,
    column: usize,
}

/// The identifier tokens of `source` that the parser makes variables of:
/// not a field (after `.`), not a function (before `(`), not a keyword,
/// not the variable a macro binds.
fn variable_tokens(source: &str) -> Vec<Variable<'_>> {
    let tokens = tokens(source);
    let text = |k: Option<usize>| k.and_then(|k| tokens.get(k)).map_or("", |t| t.text);
    let mut out = Vec::new();
    for (k, token) in tokens.iter().enumerate() {
        if !is_identifier(token.text) || KEYWORDS.contains(&token.text) {
            continue;
        }
        let before = |n: usize| text(k.checked_sub(n));
        let after = text(Some(k + 1));
        if before(1) == "." || after == "(" {
            continue;
        }
        let binds = before(1) == "(" && BINDING_MACROS.contains(&before(2)) && before(3) == "." && after == ",";
        if binds {
            continue;
        }
        out.push(Variable {
            name: token.text,
            line: token.line,
            column: token.column,
        });
    }
    out
}

fn is_identifier(text: &str) -> bool {
    text.starts_with(|c: char| c == '_' || c.is_ascii_alphabetic())
}

/// CEL's tokens, as far as finding identifiers needs: literals (strings and
/// bytes, raw or not, in any quotes; numbers) and comments are skipped
/// whole, so that no word inside them is taken for one.
fn tokens(source: &str) -> Vec<Token<'_>> {
    let chars: Vec<(usize, char)> = source.char_indices().collect();
    let mut out = Vec::new();
    let (mut line, mut line_start) = (1, 0);
    let mut k = 0;
    while let Some(&(at, c)) = chars.get(k) {
        let column = k - line_start + 1;
        let start = k;
        if c == '\n' {
            line += 1;
            line_start = k + 1;
            k += 1;
            continue;
        }
        if c.is_whitespace() {
            k += 1;
            continue;
        }
        if c == '/' && chars.get(k + 1).map(|p| p.1) == Some('/') {
            while chars.get(k).is_some_and(|p| p.1 != '\n') {
                k += 1;
            }
            continue;
        }
        let word = |k: usize| chars.get(k).is_some_and(|p| p.1 == '_' || p.1.is_ascii_alphanumeric());
        if c == '_' || c.is_ascii_alphabetic() {
            while word(k) {
                k += 1;
            }
            let text = &source[at..chars.get(k).map_or(source.len(), |p| p.0)];
            let prefix = text.len() <= 2 && text.chars().all(|c| "rRbB".contains(c));
            let quote = chars.get(k).map(|p| p.1).filter(|q| *q == '"' || *q == '\'');
            if let (true, Some(quote)) = (prefix, quote) {
                let raw = text.contains(['r', 'R']);
                k = skip_string(&chars, k, quote, raw, &mut line, &mut line_start);
                continue;
            }
            out.push(Token { text, line, column });
            continue;
        }
        if c == '"' || c == '\'' {
            k = skip_string(&chars, k, c, false, &mut line, &mut line_start);
            continue;
        }
        if c.is_ascii_digit() {
            while word(k)
                || (chars.get(k).is_some_and(|p| p.1 == '.') && chars.get(k + 1).is_some_and(|p| p.1.is_ascii_digit()))
            {
                k += 1;
            }
            continue;
        }
        if c == '`' {
            k += 1;
            while chars.get(k).is_some_and(|p| p.1 != '`' && p.1 != '\n') {
                k += 1;
            }
            k += 1;
            out.push(Token {
                text: "`",
                line,
                column,
            });
            continue;
        }
        k += 1;
        out.push(Token {
            text: &source[at..chars.get(k).map_or(source.len(), |p| p.0)],
            line,
            column,
        });
        debug_assert!(k > start);
    }
    out
}

/// The index past the string literal opening at `k` with `quote`, tripled
/// or not; lines inside it counted.
fn skip_string(
    chars: &[(usize, char)],
    mut k: usize,
    quote: char,
    raw: bool,
    line: &mut usize,
    line_start: &mut usize,
) -> usize {
    let is = |k: usize| chars.get(k).is_some_and(|p| p.1 == quote);
    let triple = is(k + 1) && is(k + 2);
    k += if triple { 3 } else { 1 };
    while let Some(&(_, c)) = chars.get(k) {
        if c == '\\' && !raw {
            k += 2;
            continue;
        }
        if c == '\n' {
            *line += 1;
            *line_start = k + 1;
        }
        if c == quote && (!triple || (is(k + 1) && is(k + 2))) {
            return k + if triple { 3 } else { 1 };
        }
        k += 1;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(source: &str) -> Vec<(&str, usize, usize)> {
        variable_tokens(source)
            .into_iter()
            .map(|v| (v.name, v.line, v.column))
            .collect()
    }

    #[test]
    fn variables_are_found_outside_literals_fields_calls_and_binders() {
        assert_eq!(names("foo.bar == baz"), [("foo", 1, 1), ("baz", 1, 12)]);
        assert_eq!(
            names("'a b' + r'c\\' + d + \"\"\"e\nf\"\"\" + g // h"),
            [("d", 1, 17), ("g", 2, 8)]
        );
        assert_eq!(
            names("size(foo) > 0 && x.exists(y, y == z)"),
            [("foo", 1, 6), ("x", 1, 18), ("y", 1, 30), ("z", 1, 35)]
        );
        assert_eq!(
            names("b'x' + 1.5e3 + 0x1fu + true + é"),
            Vec::<(&str, usize, usize)>::new()
        );
        assert_eq!(names("'é' + foo"), [("foo", 1, 7)]);
        assert_eq!(names("device.driver == 'a' &&\n a"), [("device", 1, 1), ("a", 2, 2)]);
    }
}
