//! draguard's logs: the tracing subscriber every command installs (text
//! or JSON lines on standard error, the default filter of `log_quiet`), and
//! for tests, a capture of what code logged.

/// Log output for every subcommand: human-readable text, or JSON lines when
/// asked (for log collectors). `RUST_LOG` overrides the level; the
/// per-event warnings of rustls and kube-runtime's watcher stay at error
/// unless it names their crate (`crate::log_quiet`).
///
/// JSON lines carry the event's text as the one top-level `message` key,
/// next to the event's fields (which therefore are never named `message`).
/// Text is coloured only on a terminal and never with `NO_COLOR` set, so
/// redirected logs and `kubectl logs` hold no escape codes.
pub fn init_logging(json: bool) {
    use std::io::IsTerminal as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let ansi = colour_wanted(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR"));
    let _ = log_subscriber(json, ansi, env_filter(), std::io::stderr).try_init();
}

fn env_filter() -> tracing_subscriber::EnvFilter {
    use crate::log_quiet::directives;
    use tracing_subscriber::EnvFilter;
    let rust_log = std::env::var("RUST_LOG").ok();
    // Directives that do not parse: the default, as before.
    EnvFilter::try_new(directives(rust_log.as_deref())).unwrap_or_else(|_| EnvFilter::new(directives(None)))
}

/// The subscriber [`init_logging`] installs, writing to `writer` (tests
/// give it a buffer).
pub(crate) fn log_subscriber<W>(
    json: bool,
    ansi: bool,
    filter: tracing_subscriber::EnvFilter,
    writer: W,
) -> Box<dyn tracing::Subscriber + Send + Sync>
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    let layer = tracing_subscriber::fmt::layer().with_writer(writer);
    let output = if json {
        // Without flattening, the text sits in a nested `fields` object
        // that collectors do not look in for the message.
        layer.json().flatten_event(true).boxed()
    } else {
        layer.with_ansi(ansi).boxed()
    };
    // Each layer its own filter: the counter sees the warnings `filter`
    // hides.
    let counter = crate::log_quiet::CountWarnings.with_filter(crate::log_quiet::CountWarnings::filter());
    Box::new(
        tracing_subscriber::registry()
            .with(output.with_filter(filter))
            .with(counter),
    )
}

/// <https://no-color.org>: set and not empty means no colour.
fn colour_wanted(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Shared with tests/cli_logs.rs, so both read a JSON log line the same way.
#[cfg(test)]
#[path = "../tests/support/json.rs"]
mod json;

#[cfg(test)]
pub(crate) mod log_capture {
    //! Runs code under [`super::log_subscriber`] writing into a buffer.

    use std::io::Write;
    use std::sync::{Arc, Mutex, PoisonError};

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What `f` logged (at debug and above), as text.
    pub(crate) fn capture(json: bool, ansi: bool, f: impl FnOnce()) -> String {
        capture_with("debug", json, ansi, f)
    }

    /// What `f` logged under the filter `directives`, as text.
    pub(crate) fn capture_with(directives: &str, json: bool, ansi: bool, f: impl FnOnce()) -> String {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let filter = tracing_subscriber::EnvFilter::new(directives);
        let subscriber = super::log_subscriber(json, ansi, filter, move || writer.clone());
        tracing::subscriber::with_default(subscriber, f);
        let bytes = buffer.0.lock().unwrap_or_else(PoisonError::into_inner).clone();
        String::from_utf8(bytes).expect("logs are UTF-8")
    }

    pub(crate) use super::json::top_level_keys;
}

#[cfg(test)]
mod tests {
    use super::log_capture::{capture, top_level_keys};

    #[test]
    fn json_lines_have_one_top_level_message() {
        let logged = capture(true, false, || {
            tracing::info!(reason = "a \"quoted\" reason", count = 3, "admission review denied");
            tracing::warn!(error = "boom", "second line");
        });
        let lines: Vec<&str> = logged.lines().collect();
        assert_eq!(lines.len(), 2, "{logged}");
        let keys = top_level_keys(lines[0]);
        assert_eq!(keys.iter().filter(|k| *k == "message").count(), 1, "{keys:?}");
        assert!(!keys.iter().any(|k| k == "fields"), "flattened: {keys:?}");
        let first: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(first["message"], "admission review denied");
        assert_eq!(first["reason"], "a \"quoted\" reason");
        assert_eq!(first["count"], 3);
        assert_eq!(first["level"], "INFO");
        let second: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(
            (&second["message"], &second["error"]),
            (&"second line".into(), &"boom".into())
        );
    }

    /// The warnings rustls writes per handshake and kube-runtime's watcher
    /// per retry are hidden by default, and counted.
    #[test]
    fn the_default_filter_hides_per_event_library_warnings_and_counts_them() {
        use super::log_capture::capture_with;
        use crate::log_quiet::{directives, warnings};
        let count = |target: &str| warnings().iter().find(|(t, _)| *t == target).map(|(_, n)| *n);
        let emit = || {
            // As rustls 0.23.46 and kube-runtime 5.0.0 write them.
            tracing::warn!(
                target: "rustls::msgs::handshake",
                "Illegal SNI extension: ignoring IP address presented as hostname ([49, 50, 55])"
            );
            tracing::warn!(target: "kube_runtime::watcher", "watch list error with 403: Api(...)");
            tracing::error!(target: "rustls::server", "an error still shows");
            tracing::warn!("draguard's own warning");
        };
        // Other tests may log through these targets too: compare counts.
        let (rustls, watcher) = (count("rustls"), count("kube_runtime::watcher"));
        let logged = capture_with(&directives(None), false, false, emit);
        assert!(!logged.contains("Illegal SNI"), "{logged}");
        assert!(!logged.contains("watch list error"), "{logged}");
        assert!(logged.contains("an error still shows"), "{logged}");
        assert!(logged.contains("draguard's own warning"), "{logged}");
        assert!(count("rustls") > rustls, "counted although hidden");
        assert!(count("kube_runtime::watcher") > watcher, "counted although hidden");
        // Asked for by name, they show.
        let logged = capture_with(
            &directives(Some("info,rustls=warn,kube_runtime=warn")),
            false,
            false,
            emit,
        );
        assert!(logged.contains("Illegal SNI"), "{logged}");
        assert!(logged.contains("watch list error"), "{logged}");
    }

    #[test]
    fn text_has_no_escape_codes_without_colour() {
        let plain = capture(false, false, || tracing::warn!(what = "namespaces", "watch error"));
        assert!(plain.contains("watch error"), "{plain}");
        assert!(!plain.contains('\u{1b}'), "{plain:?}");
        let coloured = capture(false, true, || tracing::warn!("watch error"));
        assert!(coloured.contains('\u{1b}'), "the switch does something: {coloured:?}");
    }

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        use super::colour_wanted;
        assert!(colour_wanted(true, None));
        assert!(colour_wanted(true, Some("".into())), "empty NO_COLOR is unset");
        assert!(!colour_wanted(true, Some("1".into())));
        assert!(!colour_wanted(false, None));
        assert!(!colour_wanted(false, Some("1".into())));
    }
}
