//! A sequence serialized as it is produced: JSON and SARIF reports write
//! each object or result as it is made, and never hold them all as trees
//! (a SARIF report of 100,000 findings took over a GB that way).

use std::cell::RefCell;

use serde::ser::{Error as _, Serialize, Serializer};

/// Items serialized as a sequence, once. An item may be an error (a
/// spool that cannot be read back): the sequence ends with it.
pub struct Streamed<I>(RefCell<Option<I>>);

impl<I> Streamed<I> {
    pub fn new(items: I) -> Self {
        Streamed(RefCell::new(Some(items)))
    }
}

impl<I, T, E> Serialize for Streamed<I>
where
    I: Iterator<Item = Result<T, E>>,
    T: Serialize,
    E: std::fmt::Display,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let Some(items) = self.0.borrow_mut().take() else {
            return Err(S::Error::custom("a streamed sequence is written once"));
        };
        let mut seq = serializer.serialize_seq(None)?;
        for item in items {
            seq.serialize_element(&item.map_err(S::Error::custom)?)?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_written_as_the_sequence_they_make() {
        let seq = Streamed::new((1..=3).map(|i| Ok::<_, std::io::Error>(serde_json::json!({"n": i}))));
        assert_eq!(
            serde_json::to_string_pretty(&seq).expect("serializes"),
            serde_json::to_string_pretty(&serde_json::json!([{"n": 1}, {"n": 2}, {"n": 3}])).expect("serializes")
        );
        assert!(serde_json::to_string(&seq).is_err(), "written once");
    }

    #[test]
    fn an_item_that_is_an_error_ends_the_sequence_with_it() {
        let items = [Ok(1), Err("the spool could not be read"), Ok(3)];
        let seq = Streamed::new(items.into_iter());
        let e = serde_json::to_string(&seq).expect_err("fails");
        assert_eq!(e.to_string(), "the spool could not be read");
    }
}
