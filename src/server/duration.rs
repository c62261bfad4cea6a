//! The apiserver's `?timeout=` parameter: a Go `time.Duration` string.

use std::time::Duration;

/// What the apiserver sends when the webhook sets no timeoutSeconds.
pub(crate) const DEFAULT_REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// The apiserver never waits longer than 30 s for a webhook.
pub(crate) const MAX_REVIEW_TIMEOUT: Duration = Duration::from_secs(30);

/// The review deadline from a raw query string. A missing, unparseable or
/// zero `timeout` means the default: the parameter is advice, not input to
/// refuse a review over.
pub(crate) fn review_deadline(query: Option<&str>) -> Duration {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| pair.strip_prefix("timeout="))
        .and_then(parse_go_duration)
        .filter(|d| !d.is_zero())
        .map_or(DEFAULT_REVIEW_TIMEOUT, |d| d.min(MAX_REVIEW_TIMEOUT))
}

/// Parses `time.ParseDuration` syntax without a sign: `10s`, `500ms`,
/// `1m30s`, `1.5h`, `0`. Negative durations make no sense as a deadline.
pub(crate) fn parse_go_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let value: f64 = number.parse().ok()?;
        total += value * unit_seconds(unit)?;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).ok()
}

fn unit_seconds(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1e-9,
        "us" | "µs" | "μs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_go_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        for bad in ["", "10", "s", "10x", "-1s", "1..5s", "10 s"] {
            assert_eq!(parse_go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn deadlines_default_and_cap() {
        assert_eq!(review_deadline(None), DEFAULT_REVIEW_TIMEOUT);
        assert_eq!(review_deadline(Some("timeout=5s")), Duration::from_secs(5));
        assert_eq!(review_deadline(Some("a=b&timeout=2s")), Duration::from_secs(2));
        assert_eq!(review_deadline(Some("timeout=5m")), MAX_REVIEW_TIMEOUT);
        assert_eq!(review_deadline(Some("timeout=soon")), DEFAULT_REVIEW_TIMEOUT);
        assert_eq!(review_deadline(Some("timeout=0s")), DEFAULT_REVIEW_TIMEOUT);
    }
}
