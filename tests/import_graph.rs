//! The import graph of the top-level modules, read from the source text.
//!
//! A Cargo workspace forbids cycles between crates, so the core can only move
//! into a crate of its own once no import cycle spans two top-level modules
//! (SEAL-THE-CORE, "One direction"). This test reads every `crate::…` and
//! crate-root-climbing `super::…` path in `src/**/*.rs` (and in
//! `crates/*/src/**/*.rs`, one graph per crate), builds the graph of
//! top-level modules and fails on any cycle that is not made only of edges in
//! [`STILL_TO_BREAK`]. That list may only shrink: an entry whose edge no longer
//! exists fails the test too, so the list always says what remains.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Edges (from → to, in the `draguard` package) that still close a cycle and
/// are waiting for a later move of issue 28. Remove an entry when its edge is
/// gone; never add one.
const STILL_TO_BREAK: &[(&str, &str)] = &[];

/// One edge and the places that make it: file and line.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

#[test]
fn no_import_cycle_spans_two_top_level_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut crates = vec![("draguard".to_owned(), root.join("src"))];
    if let Ok(entries) = std::fs::read_dir(root.join("crates")) {
        for entry in entries.flatten() {
            let src = entry.path().join("src");
            if src.is_dir() {
                crates.push((entry.file_name().to_string_lossy().into_owned(), src));
            }
        }
    }
    let mut failures = String::new();
    for (name, src) in &crates {
        let edges = crate_edges(src);
        let allowed: BTreeSet<(String, String)> = if name == "draguard" {
            STILL_TO_BREAK
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect()
        } else {
            BTreeSet::new()
        };
        for edge in &allowed {
            if !edges.contains_key(edge) {
                let _ = writeln!(
                    failures,
                    "{name}: the edge {} -> {} is gone; remove it from STILL_TO_BREAK",
                    edge.0, edge.1
                );
            }
        }
        let kept: Edges = edges
            .iter()
            .filter(|(edge, _)| !allowed.contains(*edge))
            .map(|(edge, places)| (edge.clone(), places.clone()))
            .collect();
        for component in cycles(&kept) {
            let _ = writeln!(failures, "{name}: import cycle through {}:", component.join(", "));
            for ((from, to), places) in &kept {
                if component.contains(from) && component.contains(to) {
                    let _ = writeln!(failures, "  {from} -> {to}: {}", list(places));
                }
            }
        }
        if std::env::var_os("IMPORT_GRAPH_PRINT").is_some() {
            print_graph(name, &edges);
        }
    }
    assert!(failures.is_empty(), "\n{failures}");
}

/// The whole graph and its cycles, for the record (`IMPORT_GRAPH_PRINT=1
/// cargo test --test import_graph -- --nocapture`).
fn print_graph(name: &str, all: &Edges) {
    let production: Edges = all
        .iter()
        .map(|(edge, places)| {
            let kept: BTreeSet<String> = places.iter().filter(|p| !p.ends_with("(test)")).cloned().collect();
            (edge.clone(), kept)
        })
        .filter(|(_, places)| !places.is_empty())
        .collect();
    for (label, edges) in [("all code", all), ("without #[cfg(test)] code", &production)] {
        print_cycles(&format!("{name}, {label}"), edges);
    }
}

fn print_cycles(name: &str, edges: &Edges) {
    println!("== {name}: {} edges between top-level modules", edges.len());
    for component in cycles(edges) {
        let files: BTreeSet<&str> = edges
            .iter()
            .filter(|((from, to), _)| component.contains(from) && component.contains(to))
            .flat_map(|(_, places)| places.iter().map(|p| p.split(':').next().unwrap_or(p)))
            .collect();
        println!(
            "cycle through {} modules ({}), {} files:",
            component.len(),
            component.join(", "),
            files.len()
        );
        for ((from, to), places) in edges {
            if component.contains(from) && component.contains(to) {
                println!("  {from} -> {to}: {}", list(places));
            }
        }
    }
}

fn list(places: &BTreeSet<String>) -> String {
    places.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// Every edge between two top-level modules of the crate rooted at `src`.
fn crate_edges(src: &Path) -> Edges {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|file| module_path(src, file).into_iter().next())
        .collect();
    let mut edges = Edges::new();
    for file in &files {
        let path = module_path(src, file);
        let Some(top) = path.first() else {
            continue; // lib.rs and main.rs: the root declares modules, it is no module
        };
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let shown = file.strip_prefix(src).unwrap_or(file).display().to_string();
        for Reference { module, line, test } in references(&path, &text) {
            if &module != top && modules.contains(&module) {
                let tag = if test { " (test)" } else { "" };
                edges
                    .entry((top.clone(), module))
                    .or_default()
                    .insert(format!("{shown}:{line}{tag}"));
            }
        }
    }
    edges
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file defines: `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).unwrap_or(file);
    let mut path: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let Some(last) = path.pop() {
        let stem = last.trim_end_matches(".rs");
        if !matches!(stem, "mod" | "lib" | "main") {
            path.push(stem.to_owned());
        }
    }
    path
}

/// A name of another module, where it is, and whether only tests use it
/// (under `#[cfg(test)]`).
struct Reference {
    module: String,
    line: usize,
    test: bool,
}

/// One `{ … }` scope: the inline module it opens, if any, and whether it is
/// test code.
struct Scope {
    module: Option<String>,
    test: bool,
}

/// The top-level modules a file's code names, with the line of each name.
/// Comments and literals are blanked first, so a doc link is no import.
fn references(file_module: &[String], text: &str) -> Vec<Reference> {
    let tokens = tokens(&code_only(text));
    let mut found = Vec::new();
    // Inline modules open a scope that `super::` climbs out of.
    let mut scopes: Vec<Scope> = Vec::new();
    // After `#[cfg(test)]`, the next item up to its `;` or `{ … }` is a test's.
    let mut pending_test = false;
    let mut i = 0;
    while i < tokens.len() {
        let (token, line) = (&tokens[i].0, tokens[i].1);
        match token.as_str() {
            "#" if ["[", "cfg", "(", "test", ")", "]"]
                .iter()
                .enumerate()
                .all(|(k, want)| tokens.get(i + 1 + k).is_some_and(|t| t.0 == *want)) =>
            {
                pending_test = true;
                i += 7;
                continue;
            }
            "{" => {
                let inline_mod = i >= 2 && tokens[i - 2].0 == "mod";
                let test = pending_test || scopes.last().is_some_and(|s| s.test);
                pending_test = false;
                scopes.push(Scope {
                    module: inline_mod.then(|| tokens[i - 1].0.clone()),
                    test,
                });
            }
            "}" => {
                scopes.pop();
            }
            ";" => pending_test = false,
            "crate" | "super" if tokens.get(i + 1).is_some_and(|t| t.0 == "::") => {
                let mut here: Vec<String> = file_module.to_vec();
                here.extend(scopes.iter().filter_map(|s| s.module.clone()));
                let test = pending_test || scopes.last().is_some_and(|s| s.test);
                let mut j = i;
                let mut at_root = token == "crate";
                if !at_root {
                    while tokens.get(j).is_some_and(|t| t.0 == "super")
                        && tokens.get(j + 1).is_some_and(|t| t.0 == "::")
                    {
                        here.pop();
                        j += 2;
                    }
                    j -= 2;
                    at_root = here.is_empty();
                }
                if at_root {
                    found.extend(first_segments(&tokens, j + 2).into_iter().map(|module| Reference {
                        module,
                        line,
                        test,
                    }));
                }
                i = j + 2;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// The first segment of each path at `tokens[at]`: `a` for `a::b`, `a` and
/// `c` for `{a::b, c}`.
fn first_segments(tokens: &[(String, usize)], at: usize) -> Vec<String> {
    let Some((first, _)) = tokens.get(at) else {
        return Vec::new();
    };
    if first != "{" {
        return vec![first.clone()];
    }
    let mut out = Vec::new();
    let mut depth = 0;
    let mut expect_item = true;
    for (token, _) in &tokens[at..] {
        match token.as_str() {
            "{" => {
                depth += 1;
                expect_item = depth == 1;
            }
            "}" => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            "," if depth == 1 => expect_item = true,
            _ if expect_item && depth == 1 => {
                out.push(token.clone());
                expect_item = false;
            }
            _ => {}
        }
    }
    out
}

/// Identifiers, `::` and single punctuation characters, each with its line.
fn tokens(code: &str) -> Vec<(String, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((chars[start..i].iter().collect(), line));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(("::".to_owned(), line));
            i += 2;
        } else {
            out.push((c.to_string(), line));
            i += 1;
        }
    }
    out
}

/// The text with comments, strings and character literals blanked, newlines
/// kept so that lines still count.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            // r"…" or r#"…"#: the closing quote needs as many hashes.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            while j < chars.len() {
                if chars[j] == '"' && (0..hashes).all(|h| chars.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                blank(&mut out, chars[j]);
                j += 1;
            }
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                if let Some(&skipped) = chars.get(i) {
                    blank(&mut out, skipped);
                }
                i += 1;
            }
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
            out.push(' ');
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// The strongly connected components with more than one module (Tarjan).
fn cycles(edges: &Edges) -> Vec<Vec<String>> {
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        graph.entry(from).or_default().push(to);
        graph.entry(to).or_default();
    }
    struct Tarjan<'g> {
        graph: &'g BTreeMap<&'g str, Vec<&'g str>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for &w in &self.graph[v] {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        graph: &graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &v in graph.keys() {
        if !tarjan.index.contains_key(v) {
            tarjan.visit(v);
        }
    }
    tarjan.found
}

/// The scanner itself: grouped imports, `super::` out of the crate's root,
/// inline modules, and names in comments and strings that are no imports.
#[test]
fn the_scan_reads_grouped_super_and_inline_module_paths() {
    let text = r#"
        use crate::{alpha::A, beta::{B, C}, self};
        // crate::comment::Nothing
        const S: &str = "crate::string::Nothing";
        fn f<'a>(c: char) -> char { let _ = 'x'; crate::gamma::g(); c }
        #[cfg(test)]
        use crate::zeta::Z;
        #[cfg(test)]
        mod tests {
            use super::super::delta::D;
            use super::*;
        }
    "#;
    let found: Vec<(String, bool)> = references(&["epsilon".to_owned()], text)
        .into_iter()
        .map(|r| (r.module, r.test))
        .collect();
    let want = [
        ("alpha", false),
        ("beta", false),
        ("self", false),
        ("gamma", false),
        ("zeta", true),
        ("delta", true),
    ];
    assert_eq!(found, want.map(|(m, t)| (m.to_owned(), t)));
    // In `a/b.rs`, `super::super::x` is the root's `x`; in `a/mod.rs` one `super` is enough.
    let nested = ["a".to_owned(), "b".to_owned()];
    let found: Vec<String> = references(&nested, "use super::super::x; use super::y;")
        .into_iter()
        .map(|r| r.module)
        .collect();
    assert_eq!(found, ["x"]);
}

/// The cycle finder reports a component of three and leaves a chain alone.
#[test]
fn cycles_are_strongly_connected_components() {
    let mut edges = Edges::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")] {
        edges.entry((a.into(), b.into())).or_default().insert(String::new());
    }
    assert_eq!(cycles(&edges), vec![vec!["a".to_owned(), "b".into(), "c".into()]]);
}
