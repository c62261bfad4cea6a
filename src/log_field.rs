//! Request-derived text in a log line is cut to a few KiB.
//!
//! A denial's reason, an audit violation or an error can echo the request
//! (a 10 KB CEL expression, ten thousand tolerations). The answer is bounded
//! where it is rendered; a log line must be bounded too, or one request
//! writes megabytes to every log collector. The cut keeps the start, which
//! says what went wrong, and says how much was left out.

use std::borrow::Cow;

/// The most bytes of one request-derived field a log line carries.
pub const MAX_LOG_FIELD: usize = 4 << 10;

/// `text` itself when it fits in [`MAX_LOG_FIELD`] bytes, else its first
/// bytes (cut at a character boundary) and how many bytes were left out.
pub fn clip(text: &str) -> Cow<'_, str> {
    clip_to(text, MAX_LOG_FIELD)
}

fn clip_to(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Cow::Owned(format!("{}… ({} more bytes)", &text[..cut], text.len() - cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_kept_whole() {
        assert!(matches!(clip("denied: no"), Cow::Borrowed("denied: no")));
        let exact = "x".repeat(MAX_LOG_FIELD);
        assert_eq!(clip(&exact), exact.as_str());
    }

    #[test]
    fn long_text_keeps_its_start_and_counts_the_rest() {
        let long = format!("{}{}", "a".repeat(MAX_LOG_FIELD), "b".repeat(100));
        let clipped = clip(&long);
        assert_eq!(clipped, format!("{}… (100 more bytes)", "a".repeat(MAX_LOG_FIELD)));
    }

    #[test]
    fn the_cut_never_splits_a_character() {
        // "é" is two bytes: a cut at 3 would land inside the second one.
        assert_eq!(clip_to("éééé", 3), "é… (6 more bytes)");
        assert_eq!(clip_to("éééé", 4), "éé… (4 more bytes)");
    }
}
