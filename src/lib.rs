//! draguard: a Kubernetes admission webhook and CI checker for taints,
//! tolerations and Dynamic Resource Allocation device requests.
//!
//! One pure decision core, the `draguard-core` crate ([`review::review`]),
//! answers every question; the HTTPS server ([`server`]) and the command
//! line are doors into it. The core's modules are re-exported here under
//! their own names, so a door reads `crate::review` wherever it lives.

pub use draguard_core::{
    admission, field, impact, interner, kinds, kubernetes, mutate, objects, pod_specs, policy, quota, review, rules,
    verdict, view, yaml,
};

pub mod allocator;
pub mod build_info;
pub mod check;
pub mod cli;
pub mod cluster;
pub mod controllers;
pub mod explain;
pub mod log_field;
pub(crate) mod log_quiet;
pub mod logging;
pub mod pki;
pub mod policy_files;
pub mod report;
pub mod server;
