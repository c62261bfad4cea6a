//! Controllers: the loops that write to the cluster, as opposed to the
//! read-only view the core judges with (`cluster`). They sit above both
//! `cluster` and `server`, so neither depends on them and the house keeps
//! one direction: `cli` → `controllers` → `server`, `cluster`, `quota`.

pub mod admission_policies;
pub mod admission_policies_sync;
pub mod background_audit;
pub mod claims_selector;
pub mod lease;
pub mod lease_gauge;
pub mod mutate_conditions;
pub mod mutate_conditions_sync;
pub mod mutate_rules;
pub mod mutate_selector_entries;
pub mod quota_sync;
pub mod routing_sync;
pub mod routing_widened;
pub mod selection_cel;
pub mod selector_requirement;
pub mod standing_taint_rules;
pub mod standing_taint_rules_said;
pub mod validate_conditions;
pub mod validate_conditions_sync;
pub mod webhook_certs;
pub mod webhook_config_watch;
