//! What a policy does with what it finds: deny, warn or record. It is part
//! of a policy's text and of every violation it raises, and the decision
//! turns it into a denial, a warning or an audit entry.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
pub enum Mode {
    /// Deny (HTTP 403).
    #[default]
    Enforce,
    /// Admit with a warning.
    Warn,
    /// Admit; log and count.
    Audit,
}
