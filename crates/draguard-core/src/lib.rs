//! draguard's judgement, without IO: decode an admission request, judge it
//! by the Kubernetes release's rules, the policies and what is known of the
//! cluster, and answer. No network, no files, no async runtime and no
//! command line reach it; this crate's Cargo.toml is the proof. The
//! `draguard` package holds the doors (server, `check`, CLI) around it.
//!
//! Imports run one way, from the bottom:
//! `field`/`kubernetes` → `objects` → `verdict` → `rules`/`mutate`/`impact`
//! → `policy` → `quota` → `view` → `kinds` → `review` → `pod_specs`
//! → `admission`
//! (tests/import_graph.rs in the draguard package keeps it so).

pub mod admission;
pub mod field;
pub mod impact;
pub mod interner;
pub mod kinds;
pub mod kubernetes;
pub mod mutate;
pub mod objects;
pub mod pod_specs;
pub mod policy;
pub mod quota;
pub mod review;
pub mod rules;
pub mod verdict;
pub mod view;
pub mod yaml;
