//! A chart whose dependencies are missing from `charts/` only where its
//! default values disable them, rendered anyway: in a temporary copy of
//! the chart, with an empty chart in `charts/` for each. helm refuses to
//! render a chart with a dependency missing, even one its values turn off
//! (helm pkg/action/dependency.go CheckDependencies runs before the
//! conditions are read), so a vendor's chart with an optional `nfd` or
//! `monitoring` dependency is never checked otherwise. A dependency its
//! defaults enable stays missing: its templates would render, and an empty
//! stand-in would hide them.
//!
//! Whether a dependency is disabled follows helm pkg/chart/v2/util/
//! dependencies.go (processDependencyConditions, processDependencyTags),
//! helm v3 and v4: the first path of its comma-separated `condition` that
//! holds a boolean in the chart's values decides; without one, its `tags`
//! decide when every tag it names is false in `tags:`; otherwise it is
//! enabled.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The most a chart's files may weigh to be copied.
const MAX_COPY: u64 = 256 << 20;
/// The most of `Chart.yaml` or `values.yaml` read.
const MAX_READ: u64 = 8 << 20;

/// A temporary copy of `chart` (a folder of the same name inside the
/// returned one) with stand-ins for the dependencies missing from its
/// `charts/`, and their names; `None` when none is missing, when one its
/// defaults enable is, or when the copy cannot be made.
pub fn stubbed_copy(chart: &Path) -> Option<(tempfile::TempDir, Vec<String>)> {
    let meta = read_yaml(&chart.join("Chart.yaml"))?;
    let values = read_yaml(&chart.join("values.yaml")).unwrap_or(Value::Null);
    let mut stubs: Vec<(String, String)> = Vec::new();
    for dependency in meta.get("dependencies")?.as_array()? {
        let name = dependency.get("name")?.as_str()?;
        if vendored(chart, name) {
            continue;
        }
        if enabled(dependency, &values) {
            return None;
        }
        let version = dependency
            .get("version")
            .and_then(Value::as_str)
            .filter(|v| {
                v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
            })
            .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
            .unwrap_or("0.0.0");
        stubs.push((name.to_owned(), version.to_owned()));
    }
    if stubs.is_empty() {
        return None;
    }
    let copy = tempfile::Builder::new().prefix("draguard-chart-").tempdir().ok()?;
    let inside = copy
        .path()
        .join(chart.file_name().unwrap_or_else(|| std::ffi::OsStr::new("chart")));
    let mut budget = MAX_COPY;
    copy_tree(chart, &inside, &mut budget).ok()?;
    for (name, version) in &stubs {
        let dir = inside.join("charts").join(name);
        std::fs::create_dir_all(&dir).ok()?;
        let text = format!(
            "apiVersion: v2\nname: {}\nversion: {version}\ndescription: an empty stand-in made by draguard check\n",
            serde_json::to_string(name).ok()?
        );
        std::fs::write(dir.join("Chart.yaml"), text).ok()?;
    }
    Some((copy, stubs.into_iter().map(|(n, _)| n).collect()))
}

/// Whether `charts/` holds the dependency: a folder or an archive
/// (`NAME-VERSION.tgz`, as `helm dependency build` leaves it).
fn vendored(chart: &Path, name: &str) -> bool {
    let charts = chart.join("charts");
    if charts.join(name).join("Chart.yaml").is_file() {
        return true;
    }
    std::fs::read_dir(&charts).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|f| f.starts_with(&format!("{name}-")) && f.ends_with(".tgz"))
        })
    })
}

/// Whether the chart's default values enable `dependency`.
fn enabled(dependency: &Value, values: &Value) -> bool {
    let condition = dependency.get("condition").and_then(Value::as_str).unwrap_or("");
    for path in condition.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let pointer = format!("/{}", path.replace('/', "~1").replace('.', "/"));
        if let Some(on) = values.pointer(&pointer).and_then(Value::as_bool) {
            return on;
        }
    }
    let tags: Vec<bool> = dependency
        .get("tags")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| values.get("tags")?.get(t.as_str()?)?.as_bool())
        .collect();
    // helm: enabled when any tag is true; disabled when all it finds are false.
    tags.is_empty() || tags.contains(&true)
}

/// A chart's `Chart.yaml` or `values.yaml`, at most [`MAX_READ`] of it.
pub(super) fn read_yaml(file: &Path) -> Option<Value> {
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_READ).read_to_string(&mut text))
        .ok()?;
    serde_saphyr::from_str_with_options::<Value>(&text, crate::yaml::yaml_options()).ok()
}

/// Copies the regular files and folders of `from` (not symlinks, not
/// `.git`) into `to`, within `budget` bytes.
fn copy_tree(from: &Path, to: &PathBuf, budget: &mut u64) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let target = to.join(&name);
        if kind.is_dir() {
            copy_tree(&entry.path(), &target, budget)?;
        } else if kind.is_file() {
            let size = entry.metadata()?.len();
            *budget = budget
                .checked_sub(size)
                .ok_or_else(|| std::io::Error::other("the chart is too large to copy"))?;
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_and_tags_follow_helm() {
        let values = serde_json::json!({"nfd": {"enabled": false}, "on": true, "tags": {"extra": false}});
        let dep = |d: Value| enabled(&d, &values);
        assert!(!dep(serde_json::json!({"name": "nfd", "condition": "nfd.enabled"})));
        assert!(dep(serde_json::json!({"name": "x", "condition": "missing.enabled,on"})));
        assert!(dep(serde_json::json!({"name": "x", "condition": "missing.enabled"})));
        assert!(!dep(serde_json::json!({"name": "x", "tags": ["extra"]})));
        assert!(dep(serde_json::json!({"name": "x"})));
    }
}
