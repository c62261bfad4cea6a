//! Command-line interface: one module per subcommand.

pub mod check;
pub mod policy;
pub mod review;
pub mod serve;

use clap::{Parser, Subcommand};

/// Admission webhook and CI checker for taints, tolerations and DRA device requests.
#[derive(Debug, Parser)]
#[command(name = "draguard", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTPS admission webhook server.
    Serve(serve::ServeArgs),
    /// Print the AdmissionReview response the server would send for one request.
    Review(review::ReviewArgs),
    /// Check manifests as the webhook would judge them (for CI).
    Check(check::CheckArgs),
    /// Lint policy files, or print their JSON Schema.
    Policy(policy::PolicyArgs),
}

/// PodTolerationRestriction compatibility, shared by serve, review and check.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PtrArgs {
    /// Honour PodTolerationRestriction's namespace annotations
    /// (scheduler.alpha.kubernetes.io/defaultTolerations and
    /// .../tolerationsWhitelist) as an extra policy source, to migrate from
    /// the in-tree plugin.
    #[arg(long)]
    pub pod_toleration_restriction: bool,
    /// The plugin's configuration file (cluster default and whitelist);
    /// implies --pod-toleration-restriction.
    #[arg(long, value_name = "FILE")]
    pub pod_toleration_restriction_config: Option<std::path::PathBuf>,
}

impl PtrArgs {
    /// The configuration to apply, or `None` when compatibility is off.
    pub fn load(&self) -> Result<Option<crate::policy::ptr::PtrConfig>, String> {
        match &self.pod_toleration_restriction_config {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
                serde_saphyr::from_str(&text)
                    .map(Some)
                    .map_err(|e| format!("{}: {}", path.display(), e.without_snippet()))
            }
            None if self.pod_toleration_restriction => Ok(Some(Default::default())),
            None => Ok(None),
        }
    }
}

/// Log output for every subcommand: human-readable on a terminal, JSON lines
/// when asked (for log collectors). `RUST_LOG` overrides the level.
pub fn init_logging(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
