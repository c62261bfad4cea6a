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
