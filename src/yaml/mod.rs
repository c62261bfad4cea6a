//! YAML with positions: one parse gives the JSON value and the line and
//! column of every node, and field paths (`crate::field::Path`) resolve to
//! positions.
//! Shared by `check` (findings) and the policy loader (errors).

pub mod json_text;
pub mod locate;
pub mod messages;
pub mod node;

pub use locate::locate;
pub use node::{Node, Position};
