//! draguard: a Kubernetes admission webhook and CI checker for taints,
//! tolerations and Dynamic Resource Allocation device requests.
//!
//! One pure decision core ([`review::review`]) answers every question; the
//! HTTPS server ([`server`]) and the command line are doors into it.

pub mod admission;
pub mod build_info;
pub mod check;
pub mod cli;
pub mod cluster;
pub mod controllers;
pub mod explain;
pub mod field;
pub mod impact;
pub mod interner;
pub mod kinds;
pub mod kubernetes;
pub mod log_field;
pub(crate) mod log_quiet;
pub mod mutate;
pub mod objects;
pub mod pki;
pub mod policy;
pub mod policy_files;
pub mod quota;
pub mod report;
pub mod review;
pub mod rules;
pub mod server;
pub mod verdict;
pub mod view;
pub mod yaml;
