//! Where a write's admission time goes, by the apiserver's own count: its
//! `/metrics` read before and after a batch of one setup's creates, alone,
//! and the admission histograms' sums and counts diffed, per write. Unlike
//! wall-clock medians this does not drift with the machine's load as much:
//! each series is the time the apiserver itself measured around one
//! admission step, one webhook entry's matchConditions or one policy.
//!
//! Families read (kube-apiserver v1.36.2,
//! staging/src/k8s.io/apiserver/pkg/admission/metrics/metrics.go and
//! staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating/metrics/metrics.go):
//! the step and per-plugin durations, each webhook entry's call duration
//! and its matchConditions' evaluation time, and each admission policy's
//! check duration.

use std::collections::BTreeMap;

/// The metric families whose sums and counts are diffed.
const FAMILIES: [&str; 8] = [
    "apiserver_admission_step_admission_duration_seconds",
    "apiserver_admission_controller_admission_duration_seconds",
    "apiserver_admission_webhook_admission_duration_seconds",
    "apiserver_admission_match_condition_evaluation_seconds",
    "apiserver_admission_match_condition_exclusions_total",
    "apiserver_validating_admission_policy_check_duration_seconds",
    "apiserver_validating_admission_policy_check_total",
    "apiserver_cel_evaluation_duration_seconds",
];

/// The `_sum`, `_count` and `_total` series of [`FAMILIES`] in one
/// exposition, by their full name and labels.
pub fn read(exposition: &str) -> BTreeMap<String, f64> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| FAMILIES.iter().any(|f| l.starts_with(f)))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let name = series.split('{').next()?;
            let kept = name.ends_with("_sum") || name.ends_with("_count") || name.ends_with("_total");
            kept.then(|| Some((series.to_owned(), value.parse::<f64>().ok()?)))?
        })
        .collect()
}

/// Prints, per write, what changed between `before` and `after` over
/// `writes` writes: a histogram as its evaluations per write and its mean
/// per evaluation and per write; a counter as its increments per write.
/// Series that moved less than once every other write are left out.
pub fn print(setup: &str, writes: usize, before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) {
    println!("  {setup}: {writes} creates alone, apiserver /metrics diffed");
    let delta = |series: &str| after.get(series).copied().unwrap_or(0.0) - before.get(series).copied().unwrap_or(0.0);
    for (series, _) in after.iter() {
        let name = series.split('{').next().unwrap_or(series);
        let labels = &series[name.len()..];
        if let Some(family) = name.strip_suffix("_count") {
            let count = delta(series);
            // Under one evaluation every other write is the apiserver's own
            // background (its controllers' UPDATEs), not this setup's.
            if count < writes as f64 / 2.0 {
                continue;
            }
            let sum = delta(&format!("{family}_sum{labels}"));
            println!(
                "    {:<62} {:>5.2}/write {:>8.4} ms each {:>8.4} ms/write  {}",
                family,
                count / writes as f64,
                sum / count * 1e3,
                sum / writes as f64 * 1e3,
                labels
            );
        } else if name.ends_with("_total") {
            let count = delta(series);
            if count >= writes as f64 / 2.0 {
                println!("    {:<62} {:>5.2}/write  {}", name, count / writes as f64, labels);
            }
        }
    }
}
