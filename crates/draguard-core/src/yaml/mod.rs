//! YAML with positions: one parse gives the JSON value and the line and
//! column of every node, and field paths (`crate::field::Path`) resolve to
//! positions.
//! Shared by `check` (findings) and the policy loader (errors).

pub mod duplicates;
pub mod json_direct;
pub mod json_text;
pub mod locate;
pub mod messages;
pub mod node;

pub use locate::locate;
pub use node::{Node, Position};

/// Parser limits for manifests. The defaults (1,024 documents, 250,000
/// nodes, a million events, 64 MiB of scalars per input) are made for
/// configuration files; `helm template` of a whole platform exceeds them.
/// Alias and anchor limits, the guard against expansion bombs, stay as
/// they are.
///
/// Comments are not data: the parser is told not to emit them. Emitted,
/// it keeps at most 32 of them (`Budget::max_buffered_comment_events`)
/// while it looks ahead for the node after a `key:`, and refuses a file
/// with more ("too many buffered comments while looking ahead"), where
/// libyaml, PyYAML and kubectl read it (kuberay's Helm values have 40).
/// Not emitted, they are still scanned and validated but never kept, so
/// any number of them costs no memory.
pub fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_documents = 1_000_000;
    budget.max_nodes = 100_000_000;
    budget.max_events = 200_000_000;
    budget.max_total_scalar_bytes = 1 << 30;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.emit_comments = false;
    options
}

/// [`yaml_options`], with keys given twice in one mapping passed on to
/// the reader in order instead of refused: kubectl reads them (the last
/// one wins, as [`Node::to_value`] does), and
/// [`duplicates::duplicate_keys`] says where they are. Only for [`Node`]:
/// a struct or a JSON writer would see both.
pub fn yaml_options_last_wins() -> serde_saphyr::Options {
    let mut options = yaml_options();
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::PassThrough;
    options
}
