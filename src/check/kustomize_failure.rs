//! What kustomize's message for a failed build says, read so that no
//! build is run only to learn what another one already said:
//! - the message for a kustomization that failed inside the wrapper
//!   [`super::render`] builds it through (for origin marks), as kustomize
//!   prints it for the kustomization built alone: the wrapper's layer
//!   taken out ([`unwrapped`]), so that a failed build is not run a
//!   second time just for its message;
//! - the folders the failure lies inside ([`failed_inside`]): each would
//!   fail alone for the same reason, so none is built alone in place of
//!   the overlay that failed ([`super::bases_alone`]).
//!
//! kustomize (as kubectl v1.36.2 prints it, read off reproductions: the
//! tests below hold them) wraps a failure of a folder named in
//! `resources` as
//!
//! ```text
//! accumulating resources: accumulation err='accumulating resources from 'REF': 'ABS' must resolve to a file': recursed accumulation of path 'ABS': INNER
//! ```
//!
//! (or `couldn't make target for path 'ABS': INNER` when its own
//! kustomization file does not read), and a failure of a folder named in
//! `components` as
//!
//! ```text
//! accumulating components: accumulateDirectory: "recursed accumulation of path 'ABS': INNER"
//! ```
//!
//! with INNER Go-quoted. INNER is what `kubectl kustomize ABS` prints
//! after its `error: `; whatever is before the layer (`error: `, helm's
//! `Error: `, klog's header) and after it is kept. ABS is the folder with
//! its links resolved, as kustomize names it in either run.

use std::path::{Path, PathBuf};

/// `stderr` (the wrapper build's error output, as printed) with the
/// wrapper's layer taken out, for the folder `canonical` named as
/// `reference` in the wrapper's `components` (when `component`) or
/// `resources`; `None` when the layer is not there as expected (the
/// caller then runs the build alone for its message).
pub fn unwrapped(stderr: &str, reference: &str, canonical: &Path, component: bool) -> Option<String> {
    let abs = canonical.to_str()?;
    if component {
        let layer = format!("accumulating components: accumulateDirectory: \"recursed accumulation of path '{abs}': ");
        let start = stderr.find(&layer)?;
        let (inner, rest) = go_unquoted(&stderr[start + layer.len()..])?;
        return Some(format!("{}{inner}{rest}", &stderr[..start]));
    }
    let head = format!(
        "accumulating resources: accumulation err='accumulating resources from '{reference}': '{abs}' must resolve to a file': "
    );
    let start = stderr.find(&head)?;
    let after = &stderr[start + head.len()..];
    let inner = [
        format!("recursed accumulation of path '{abs}': "),
        format!("couldn't make target for path '{abs}': "),
    ]
    .iter()
    .find_map(|marker| after.strip_prefix(marker.as_str()))?;
    Some(format!("{}{inner}", &stderr[..start]))
}

/// The folders (with links resolved, as kustomize names them) whose own
/// build failed in `stderr`: the failure lies inside each of them, as
/// kustomize says for a folder it accumulates (`recursed accumulation of
/// path 'ABS': `) or whose kustomization file it could not read
/// (`couldn't make target for path 'ABS': `). Building one of them alone
/// reaches the same failure.
pub fn failed_inside(stderr: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for marker in ["recursed accumulation of path '", "couldn't make target for path '"] {
        for (at, _) in stderr.match_indices(marker) {
            let rest = &stderr[at + marker.len()..];
            if let Some(end) = rest.find("': ") {
                out.push(PathBuf::from(&rest[..end]));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The rest of a Go-quoted string (`strconv.Quote`, as `%q` prints it)
/// whose opening quote is already read: its text and what follows its
/// closing quote. `None` for an escape other than `\"`, `\\`, `\n` and
/// `\t`, or no closing quote.
fn go_unquoted(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &text[i + 1..])),
            '\\' => match chars.next()?.1 {
                '"' => out.push('"'),
                '\\' => out.push('\\'),
                'n' => out.push('\n'),
                't' => out.push('\t'),
                _ => return None,
            },
            c => out.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    // What kubectl v1.36.2 printed for /tmp/r41/k/overlay (resources:
    // ../base) whose base names a missing.yaml, built through a wrapper in
    // /tmp/r41/w, and built alone.
    const INNER: &str = "accumulating resources: accumulation err='accumulating resources from '../base': '/tmp/r41/k/base' must resolve to a file': recursed accumulation of path '/tmp/r41/k/base': accumulating resources: accumulation err='accumulating resources from 'missing.yaml': evalsymlink failure on '/tmp/r41/k/base/missing.yaml' : lstat /tmp/r41/k/base/missing.yaml: no such file or directory': must build at directory: not a valid directory: evalsymlink failure on '/tmp/r41/k/base/missing.yaml' : lstat /tmp/r41/k/base/missing.yaml: no such file or directory";

    #[test]
    fn a_resource_folders_failure_is_what_it_prints_built_alone() {
        let wrapped = format!(
            "error: accumulating resources: accumulation err='accumulating resources from '../k/overlay': '/tmp/r41/k/overlay' must resolve to a file': recursed accumulation of path '/tmp/r41/k/overlay': {INNER}\n"
        );
        assert_eq!(
            unwrapped(&wrapped, "../k/overlay", Path::new("/tmp/r41/k/overlay"), false),
            Some(format!("error: {INNER}\n"))
        );
        // Another folder's layer, or none: run alone for the message.
        assert_eq!(
            unwrapped(&wrapped, "../k/base", Path::new("/tmp/r41/k/base"), false),
            None
        );
        assert_eq!(unwrapped(INNER, "../k/x", Path::new("/tmp/r41/k/x"), false), None);
    }

    #[test]
    fn the_folders_a_failure_lies_inside_are_named() {
        let wrapped = format!(
            "error: accumulating resources: accumulation err='accumulating resources from '../k/overlay': '/tmp/r41/k/overlay' must resolve to a file': recursed accumulation of path '/tmp/r41/k/overlay': {INNER}\n"
        );
        assert_eq!(
            failed_inside(&wrapped),
            [PathBuf::from("/tmp/r41/k/base"), PathBuf::from("/tmp/r41/k/overlay")]
        );
        assert_eq!(
            failed_inside(
                "error: accumulating resources: accumulation err='accumulating resources from '../bad': '/tmp/r41/bad' must resolve to a file': couldn't make target for path '/tmp/r41/bad': invalid Kustomization"
            ),
            [PathBuf::from("/tmp/r41/bad")]
        );
        // A missing file names no folder that fails.
        assert!(failed_inside("error: accumulating resources: accumulation err='accumulating resources from 'missing.yaml': no such file").is_empty());
    }

    #[test]
    fn a_kustomization_file_that_does_not_read_is_what_it_prints_alone() {
        let wrapped = "error: accumulating resources: accumulation err='accumulating resources from '../bad': '/tmp/r41/bad' must resolve to a file': couldn't make target for path '/tmp/r41/bad': invalid Kustomization: yaml: line 1: did not find expected node content\n";
        assert_eq!(
            unwrapped(wrapped, "../bad", Path::new("/tmp/r41/bad"), false).as_deref(),
            Some("error: invalid Kustomization: yaml: line 1: did not find expected node content\n")
        );
    }

    #[test]
    fn a_components_failure_is_unquoted() {
        let wrapped = "error: accumulating components: accumulateDirectory: \"recursed accumulation of path '/tmp/r41/comp': accumulating resources: accumulation err='accumulating resources from 'a \\\"b\\\".yaml': no such file\"\n";
        assert_eq!(
            unwrapped(wrapped, "../comp", Path::new("/tmp/r41/comp"), true).as_deref(),
            Some(
                "error: accumulating resources: accumulation err='accumulating resources from 'a \"b\".yaml': no such file\n"
            )
        );
        let odd = "error: accumulating components: accumulateDirectory: \"recursed accumulation of path '/tmp/r41/comp': \\u00e9\"\n";
        assert_eq!(unwrapped(odd, "../comp", Path::new("/tmp/r41/comp"), true), None);
    }
}
