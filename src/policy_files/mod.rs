//! Policies as files: the doors between the policy folder on disk and the
//! pure policy core. `reload` watches the folder and swaps the set in
//! force; `suite` runs `draguard policy test` over manifests. Parsing and
//! linting a policy's text stay in `policy/`, which reads no file.

pub mod reload;
pub mod suite;
