//! What the replica that holds the standing rules' Lease has said: for each
//! rule now past its caps, a digest of the `ReachExceedsCaps` Event it
//! published. It decides which Event a count calls for ([`Said::say`]) and
//! travels in an annotation of the Lease ([`NOTE`]), so that the replica
//! that takes the Lease over neither repeats an Event its predecessor
//! published for the same state nor misses a change it did not.
//!
//! The holder publishes first and notes after, and writes the note to the
//! Lease at the end of the round: a holder that dies in between (a few
//! seconds at most) leaves its successor to publish that Event once more.
//! So an Event is repeated at most once per take-over, never lost.
//!
//! Bounded: entries only for tracked rules past their caps (at most
//! `cluster::taint_rules::MAX_RULES`, 1,000), each a uid (36 bytes) and a
//! 16-hex-digit digest, about 60 bytes in the note: 60 KB at most, inside
//! the 256 KiB an object's annotations may hold
//! (k8s.io/apimachinery pkg/api/validation/objectmeta.go,
//! `TotalAnnotationSizeLimitB`, v0.34.0).

use std::collections::BTreeMap;

use crate::cluster::taint_rules::MAX_RULES;

/// The Lease annotation that holds the note.
pub const NOTE: &str = "draguard.dev/standing-taint-rules-said";

/// Which Event a count calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Say {
    /// `ReachExceedsCaps`: past the caps, and not with this summary before.
    Exceeds,
    /// `ReachWithinCaps`: within them again after an `Exceeds`.
    Within,
    /// Nothing new.
    Nothing,
}

/// Rule (uid, else name) → digest of the summary last said past the caps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Said(BTreeMap<String, String>);

impl Said {
    /// The note read from the Lease. Unreadable (written by hand, or by a
    /// future draguard) is taken as nothing said, with the reason: the
    /// rules past their caps are said once more.
    pub fn parse(note: Option<&str>) -> (Said, Option<String>) {
        let Some(note) = note else {
            return (Said::default(), None);
        };
        match serde_json::from_str::<BTreeMap<String, String>>(note) {
            Ok(mut said) => {
                // A hand-written note may be longer than any draguard wrote.
                while said.len() > MAX_RULES {
                    said.pop_last();
                }
                (Said(said), None)
            }
            Err(e) => (Said::default(), Some(e.to_string())),
        }
    }

    /// The note to write.
    pub fn note(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "{}".to_owned())
    }

    /// What to publish for `rule` whose count says `exceeded` (the
    /// summary while past the caps, `None` within them).
    pub fn say(&self, rule: &str, exceeded: Option<&str>) -> Say {
        match (exceeded, self.0.get(rule)) {
            (Some(summary), said) if said != Some(&digest(summary)) => Say::Exceeds,
            (None, Some(_)) => Say::Within,
            _ => Say::Nothing,
        }
    }

    /// Notes what was published for `rule`; `true` when the note changed.
    pub fn note_said(&mut self, rule: &str, exceeded: Option<&str>) -> bool {
        match exceeded {
            Some(summary) => self.0.insert(rule.to_owned(), digest(summary)).as_deref() != Some(&digest(summary)),
            None => self.0.remove(rule).is_some(),
        }
    }

    /// Forgets the rules `keep` refuses (deleted, or no longer standing);
    /// `true` when the note changed.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) -> bool {
        let before = self.0.len();
        self.0.retain(|rule, _| keep(rule));
        self.0.len() != before
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// 64-bit FNV-1a of the summary, in hex: the same in every replica and
/// every build (std's hashers promise neither), and enough to tell two
/// summaries of one rule apart.
fn digest(summary: &str) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = summary
        .bytes()
        .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME));
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_for_each_change_of_what_is_past_the_caps_and_none_for_the_same() {
        let mut said = Said::default();
        assert_eq!(said.say("uid-a", None), Say::Nothing, "within, never past");
        assert_eq!(said.say("uid-a", Some("2 pods")), Say::Exceeds);
        assert!(said.note_said("uid-a", Some("2 pods")));
        assert_eq!(said.say("uid-a", Some("2 pods")), Say::Nothing, "the same state");
        assert!(!said.note_said("uid-a", Some("2 pods")), "the note is unchanged");
        assert_eq!(said.say("uid-a", Some("3 pods")), Say::Exceeds, "a new state");
        assert!(said.note_said("uid-a", Some("3 pods")));
        assert_eq!(said.say("uid-b", Some("3 pods")), Say::Exceeds, "per rule");
        assert_eq!(said.say("uid-a", None), Say::Within);
        assert!(said.note_said("uid-a", None));
        assert_eq!(said.say("uid-a", None), Say::Nothing, "said once");
        assert!(said.is_empty());
    }

    #[test]
    fn the_successor_reads_what_its_predecessor_said() {
        let mut before = Said::default();
        before.note_said("uid-a", Some("2 pods"));
        before.note_said("uid-b", Some("9 pods"));
        let note = before.note();
        assert_eq!(
            note,
            format!(r#"{{"uid-a":"{}","uid-b":"{}"}}"#, digest("2 pods"), digest("9 pods"))
        );
        let (after, error) = Said::parse(Some(&note));
        assert_eq!((&after, error), (&before, None));
        assert_eq!(after.say("uid-a", Some("2 pods")), Say::Nothing, "not repeated");
        assert_eq!(after.say("uid-b", None), Say::Within, "a change it missed is said");
    }

    #[test]
    fn an_unreadable_or_oversized_note_is_taken_as_nothing_said_or_cut() {
        assert_eq!(Said::parse(None), (Said::default(), None));
        let (said, error) = Said::parse(Some("not json"));
        assert!(said.is_empty());
        assert!(error.is_some_and(|e| e.contains("expected")));
        let (said, error) = Said::parse(Some(r#"{"uid-a": 7}"#));
        assert!(said.is_empty() && error.is_some(), "a digest is a string");
        let huge: BTreeMap<String, String> = (0..MAX_RULES + 5)
            .map(|i| (format!("uid-{i:05}"), "x".into()))
            .collect();
        let (said, error) = Said::parse(Some(&serde_json::to_string(&huge).expect("JSON")));
        assert_eq!((said.len(), error), (MAX_RULES, None));
    }

    #[test]
    fn a_full_note_fits_the_apiservers_annotation_limit() {
        let mut said = Said::default();
        for i in 0..MAX_RULES {
            let uid = format!("{:08x}-0000-4000-8000-{i:012x}", i);
            said.note_said(&uid, Some(&format!("reaches {i} pods")));
        }
        let bytes = NOTE.len() + said.note().len();
        assert!(bytes <= 64 * 1024, "{bytes}");
        assert!(bytes < 256 * 1024);
    }

    #[test]
    fn the_digest_is_fnv_1a_64() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(digest(""), "cbf29ce484222325");
        assert_eq!(digest("a"), "af63dc4c8601ec8c");
        assert_eq!(digest("foobar"), "85944171f73967e8");
    }
}
