//! A policy's finding about one object: which policy, in which mode, what
//! kind of rule, where. Decisions carry them and reports render them, so the
//! type lives with the vocabulary rather than with the policies that raise it.

use super::{Concept, Mode};
use crate::field::Path;

/// One toleration a policy does not admit (or a policy that cannot be
/// evaluated: `field` is then `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub policy: String,
    pub mode: Mode,
    /// The kind of rule broken, for reports that group by it.
    pub concept: Concept,
    pub field: Option<Path>,
    pub message: String,
}
