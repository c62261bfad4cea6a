//! A sequence serialized as it is produced: JSON and SARIF reports write
//! each object or result as it is made, and never hold them all as trees
//! (a SARIF report of 100,000 findings took over a GB that way).

use std::cell::RefCell;

use serde::ser::{Error as _, Serialize, Serializer};

/// Items serialized as a sequence, once.
pub struct Streamed<I>(RefCell<Option<I>>);

impl<I> Streamed<I> {
    pub fn new(items: I) -> Self {
        Streamed(RefCell::new(Some(items)))
    }
}

impl<I, T> Serialize for Streamed<I>
where
    I: Iterator<Item = T>,
    T: Serialize,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0.borrow_mut().take() {
            Some(items) => serializer.collect_seq(items),
            None => Err(S::Error::custom("a streamed sequence is written once")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_written_as_the_sequence_they_make() {
        let seq = Streamed::new((1..=3).map(|i| serde_json::json!({"n": i})));
        assert_eq!(
            serde_json::to_string_pretty(&seq).expect("serializes"),
            serde_json::to_string_pretty(&serde_json::json!([{"n": 1}, {"n": 2}, {"n": 3}])).expect("serializes")
        );
        assert!(serde_json::to_string(&seq).is_err(), "written once");
    }
}
