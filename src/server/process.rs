//! Hand-written, not `procfs`: its parsers need every field of a file (one line missing loses the
//! metric), and its fd count leaves out the counting descriptor (issue 28 report).
//!
//! The standard `process_*` metrics, read from `/proc/self` at scrape time
//! (Linux only). Every read and parse may fail on an odd kernel or a
//! restricted `/proc`: a metric that cannot be read is left out, never
//! guessed and never a panic.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// `/proc/<pid>/stat` counts CPU time and start time in USER_HZ ticks. The
/// kernel fixes USER_HZ at 100 for user space on every architecture Linux
/// ships (it is not the internal HZ), so no `sysconf` call is needed.
const USER_HZ: f64 = 100.0;

/// Registers with the metrics registry; reads `/proc` on every scrape.
#[derive(Debug, Default)]
pub(crate) struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        let snapshot = ProcessSample::read(
            read("/proc/self/stat").as_deref(),
            read("/proc/self/status").as_deref(),
            read("/proc/self/limits").as_deref(),
            read("/proc/stat").as_deref(),
            open_fds(),
        );
        snapshot.encode(&mut encoder)
    }
}

fn open_fds() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    // read_dir itself holds one descriptor while counting; the Prometheus
    // Go and Python clients count the same way, so the numbers compare.
    u64::try_from(entries.count()).ok()
}

/// What one scrape found; `None` where a source was missing or malformed.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct ProcessSample {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessSample {
    /// Builds a snapshot from the texts of `/proc/self/stat`,
    /// `/proc/self/status`, `/proc/self/limits` and `/proc/stat`.
    pub(crate) fn read(
        stat: Option<&str>,
        status: Option<&str>,
        limits: Option<&str>,
        proc_stat: Option<&str>,
        open_fds: Option<u64>,
    ) -> Self {
        let stat = stat.and_then(Stat::parse);
        let boot = proc_stat.and_then(boot_time);
        ProcessSample {
            cpu_seconds: stat.as_ref().map(|s| (s.utime + s.stime) as f64 / USER_HZ),
            resident_bytes: status
                .and_then(|s| status_kib(s, "VmRSS"))
                .and_then(|k| k.checked_mul(1024)),
            // From stat, in bytes: VmSize in status says the same in KiB.
            virtual_bytes: stat.as_ref().map(|s| s.vsize),
            open_fds,
            max_fds: limits.and_then(max_open_files),
            start_time_seconds: stat
                .as_ref()
                .zip(boot)
                .map(|(s, boot)| boot as f64 + s.starttime as f64 / USER_HZ),
        }
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(v) = self.cpu_seconds {
            // Registered as `process_cpu_seconds`; the encoder adds `_total`.
            let metric = ConstCounter::new(v);
            metric.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                metric.metric_type(),
            )?)?;
        }
        gauge(
            encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            self.resident_bytes,
        )?;
        gauge(
            encoder,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            self.virtual_bytes,
        )?;
        gauge(
            encoder,
            "process_open_fds",
            "Number of open file descriptors.",
            self.open_fds,
        )?;
        gauge(
            encoder,
            "process_max_fds",
            "Maximum number of open file descriptors.",
            self.max_fds,
        )?;
        if let Some(v) = self.start_time_seconds {
            let metric = ConstGauge::new(v);
            metric.encode(encoder.encode_descriptor(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                None,
                metric.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: Option<u64>) -> Result<(), std::fmt::Error> {
    let Some(value) = value else { return Ok(()) };
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

/// The fields of `/proc/self/stat` the metrics need.
#[derive(Debug, Clone, PartialEq)]
struct Stat {
    utime: u64,
    stime: u64,
    starttime: u64,
    vsize: u64,
}

impl Stat {
    fn parse(text: &str) -> Option<Stat> {
        // `pid (comm) state ...`: comm may hold spaces and parentheses, so
        // the fields start after the *last* `)`.
        let (_, rest) = text.rsplit_once(')')?;
        let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
        // proc(5) numbers fields from 1; `state` (field 3) is fields[0].
        let field = |n: usize| fields.get(n.checked_sub(3)?)?.parse::<u64>().ok();
        Some(Stat {
            utime: field(14)?,
            stime: field(15)?,
            starttime: field(22)?,
            vsize: field(23)?,
        })
    }
}

/// A `Key:   123 kB` line of `/proc/self/status`, in KiB.
fn status_kib(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        let mut words = value.split_ascii_whitespace();
        let number = words.next()?.parse().ok()?;
        (words.next() == Some("kB")).then_some(number)
    })
}

/// The soft limit of `Max open files` in `/proc/self/limits`; `None` when
/// unlimited or unreadable.
fn max_open_files(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    let rest = line.strip_prefix("Max open files")?;
    rest.split_ascii_whitespace().next()?.parse().ok()
}

/// `btime` of `/proc/stat`: boot time, Unix seconds.
fn boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shape of a real line: comm `(draguard)`, 52 fields.
    const STAT: &str = "4242 (draguard) S 1 4242 4242 0 -1 4194560 2710 0 0 0 \
        150 75 0 0 20 0 9 0 123456 1048576000 5000 18446744073709551615 1 1 0 0 0 0 0 4096 17663 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn parses_stat_fields_by_position() {
        let stat = Stat::parse(STAT).unwrap();
        assert_eq!(
            stat,
            Stat {
                utime: 150,
                stime: 75,
                starttime: 123456,
                vsize: 1_048_576_000
            }
        );
    }

    #[test]
    fn comm_with_spaces_and_parentheses() {
        let odd = STAT.replace("(draguard)", "(a) b (c)");
        assert_eq!(Stat::parse(&odd).unwrap().utime, 150);
    }

    #[test]
    fn odd_stat_is_none_not_a_panic() {
        for text in [
            "",
            "4242",
            "4242 (draguard",
            "4242 (draguard) S 1 2 3",
            "4242 (x) S x y z",
        ] {
            assert_eq!(Stat::parse(text), None, "{text:?}");
        }
        let negative = STAT.replace(" 150 75 ", " -150 75 ");
        assert_eq!(Stat::parse(&negative), None);
    }

    #[test]
    fn status_limits_and_boot_time() {
        let status = "Name:\tdraguard\nVmSize:\t 1024000 kB\nVmRSS:\t   20480 kB\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(20480));
        assert_eq!(status_kib(status, "VmSwap"), None);
        assert_eq!(status_kib("VmRSS:\t20480 pages\n", "VmRSS"), None);
        assert_eq!(status_kib("VmRSSx:\t1 kB\n", "VmRSS"), None);

        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1048576              1048576              files     \n";
        assert_eq!(max_open_files(limits), Some(1_048_576));
        assert_eq!(
            max_open_files("Max open files            unlimited            unlimited            files\n"),
            None
        );
        assert_eq!(max_open_files(""), None);

        assert_eq!(
            boot_time("cpu  1 2 3\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
        assert_eq!(boot_time("btime soon\n"), None);
    }

    #[test]
    fn snapshot_combines_the_sources() {
        let snapshot = ProcessSample::read(
            Some(STAT),
            Some("VmRSS:\t   20480 kB\n"),
            Some("Max open files            1024                 4096                 files\n"),
            Some("btime 1700000000\n"),
            Some(12),
        );
        assert_eq!(
            snapshot,
            ProcessSample {
                cpu_seconds: Some(2.25),
                resident_bytes: Some(20480 * 1024),
                virtual_bytes: Some(1_048_576_000),
                open_fds: Some(12),
                max_fds: Some(1024),
                start_time_seconds: Some(1_700_000_000.0 + 1234.56),
            }
        );
        assert_eq!(
            ProcessSample::read(None, None, None, None, None),
            ProcessSample::default()
        );
    }

    #[test]
    fn encodes_only_what_was_read() {
        let mut registry = prometheus_client::registry::Registry::default();
        let snapshot = ProcessSample {
            cpu_seconds: Some(2.25),
            open_fds: Some(12),
            ..ProcessSample::default()
        };
        registry.register_collector(Box::new(Fixed(snapshot)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert_eq!(
            text,
            "# HELP process_cpu_seconds Total user and system CPU time spent in seconds.\n\
             # TYPE process_cpu_seconds counter\n\
             process_cpu_seconds_total 2.25\n\
             # HELP process_open_fds Number of open file descriptors.\n\
             # TYPE process_open_fds gauge\n\
             process_open_fds 12\n\
             # EOF\n"
        );
    }

    #[derive(Debug)]
    struct Fixed(ProcessSample);

    impl Collector for Fixed {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            self.0.encode(&mut encoder)
        }
    }

    #[test]
    fn reads_this_process() {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(ProcessCollector));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let value = |name: &str| -> Option<f64> {
            let line = text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))?;
            line.parse().ok()
        };
        // A test process may not have used a 10 ms tick of CPU yet.
        assert!(value("process_cpu_seconds_total").is_some_and(|v| v >= 0.0), "{text}");
        for name in [
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            assert!(value(name).is_some_and(|v| v > 0.0), "{name} in\n{text}");
        }
    }
}
