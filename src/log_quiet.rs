//! Library warnings the default log filter hides, and counts.
//!
//! Two libraries warn once per event that any client or any missing
//! permission repeats without end (issue 27):
//! - rustls warns on every TLS handshake whose SNI is an IP address
//!   (rustls 0.23.46, `src/msgs/handshake.rs`, `ServerNamePayload::read`:
//!   "Illegal SNI extension: ignoring IP address presented as hostname"):
//!   any pod that connects to the webhook's address wrote 10,449 lines in
//!   12 s, and the handshake goes on as without SNI, so the line says
//!   nothing an operator can act on;
//! - kube-runtime's watcher warns on every retry of a forbidden list or
//!   watch (kube-runtime 5.0.0, `src/watcher.rs`, "watch list error with
//!   403"), about once every 1.2 s per watch. The same error reaches
//!   draguard's own watch loop, which says what is missing at most once a
//!   minute (`cluster::index`).
//!
//! So the default filter shows only these targets' errors, unless
//! `RUST_LOG` names the crate itself; and a layer counts their warnings,
//! shown or not, for `draguard_library_warnings_total`.

use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer};

/// The targets quieted, as `RUST_LOG` names them; the crate is the part
/// before the first `::`.
pub(crate) const QUIETED: [&str; 2] = ["rustls", "kube_runtime::watcher"];

static WARNINGS: [AtomicU64; QUIETED.len()] = [AtomicU64::new(0), AtomicU64::new(0)];

/// The filter directives for `rust_log` (the `RUST_LOG` value, `None`
/// when unset or empty: `info`), with each quieted target at `error`
/// unless the directives name its crate already (whoever writes
/// `rustls=debug` wants rustls's lines).
pub(crate) fn directives(rust_log: Option<&str>) -> String {
    let base = rust_log.map(str::trim).filter(|s| !s.is_empty()).unwrap_or("info");
    let named: Vec<&str> = base
        .split(',')
        .filter_map(|directive| {
            let target = directive.split(['=', '[']).next()?.trim();
            Some(target.split("::").next().unwrap_or(target))
        })
        .collect();
    let mut out = base.to_owned();
    for target in QUIETED {
        let krate = target.split("::").next().unwrap_or(target);
        if !named.contains(&krate) {
            out.push_str(&format!(",{target}=error"));
        }
    }
    out
}

/// Counts the quieted targets' warnings, whatever the log filter shows.
pub(crate) struct CountWarnings;

impl CountWarnings {
    /// Sees only what it counts: the quieted targets at warn and above,
    /// so that it raises no callsite's interest beyond that.
    pub(crate) fn filter() -> Targets {
        QUIETED.iter().fold(Targets::new(), |targets, target| {
            targets.with_target(*target, Level::WARN)
        })
    }
}

impl<S: Subscriber> Layer<S> for CountWarnings {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let metadata = event.metadata();
        if *metadata.level() != Level::WARN {
            return;
        }
        // rustls logs through the `log` crate: tracing-log hands such a
        // record over under the target `log`, with the record's own
        // target in the field `log.target` (tracing-log 0.2.0,
        // `src/lib.rs`, `dispatch_record`).
        let quieted = if metadata.target() == "log" {
            let mut field = LogTarget(None);
            event.record(&mut field);
            field.0
        } else {
            quieted(metadata.target())
        };
        if let Some(i) = quieted {
            WARNINGS[i].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Which quieted target `target` is within, if one.
fn quieted(target: &str) -> Option<usize> {
    QUIETED.iter().position(|module| is_within(target, module))
}

/// Reads a `log` record's target, as the index of the quieted one.
struct LogTarget(Option<usize>);

impl Visit for LogTarget {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "log.target" {
            self.0 = quieted(value);
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

/// `target` is `module` or a module inside it.
fn is_within(target: &str, module: &str) -> bool {
    target
        .strip_prefix(module)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

/// Each quieted target and the warnings it logged so far, for `/metrics`.
pub(crate) fn warnings() -> [(&'static str, u64); QUIETED.len()] {
    std::array::from_fn(|i| (QUIETED[i], WARNINGS[i].load(Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quieted_targets_are_added_unless_rust_log_names_their_crate() {
        let quiet = ",rustls=error,kube_runtime::watcher=error";
        assert_eq!(directives(None), format!("info{quiet}"));
        assert_eq!(directives(Some("  ")), format!("info{quiet}"));
        assert_eq!(directives(Some("debug")), format!("debug{quiet}"));
        assert_eq!(
            directives(Some("info,rustls=warn")),
            "info,rustls=warn,kube_runtime::watcher=error"
        );
        assert_eq!(
            directives(Some("kube_runtime=debug,draguard=trace")),
            "kube_runtime=debug,draguard=trace,rustls=error"
        );
        assert_eq!(
            directives(Some("rustls::server[handshake]=trace,kube_runtime::watcher=warn")),
            "rustls::server[handshake]=trace,kube_runtime::watcher=warn"
        );
    }

    #[test]
    fn within_a_module_means_the_module_or_below() {
        assert!(is_within("rustls", "rustls"));
        assert!(is_within("rustls::msgs::handshake", "rustls"));
        assert!(!is_within("rustls_pemfile", "rustls"));
        assert!(is_within("kube_runtime::watcher", "kube_runtime::watcher"));
        assert!(!is_within("kube_runtime::reflector", "kube_runtime::watcher"));
    }
}
