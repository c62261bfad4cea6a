//! Policies as files: the doors between the policy folder on disk and the
//! pure policy core. `load` reads the folder, `reload` watches it and swaps
//! the set in force, `suite` runs `draguard policy test` over manifests and
//! `toleration_restriction` reads PodTolerationRestriction's configuration.
//! Parsing and linting their text stay in `policy/`, which reads no file.

pub mod load;
pub mod reload;
pub mod suite;
pub mod toleration_restriction;
