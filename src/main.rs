//! The `draguard` binary: parse the command line, dispatch, exit.

use std::process::ExitCode;

use clap::Parser;
use draguard::cli::{Cli, Command};

/// glibc's malloc fragments once the watches have listed a large cluster:
/// at 100,000 claims a third of each review went to `unlink_chunk` and
/// `malloc_consolidate`, and throughput fell to 0.72x of an empty
/// cluster's (`scripts/scale.sh`). mimalloc's per-thread free lists keep
/// a review's short-lived allocations cheap whatever the heap holds.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => draguard::cli::serve::run(*args),
        Command::Review(args) => draguard::cli::review::run(args),
        Command::Check(args) => draguard::cli::check::run(*args),
        Command::Policy(args) => draguard::cli::policy::run(args),
        Command::Crd => draguard::cli::print_crd(),
        Command::Rules => draguard::cli::print_rules(),
        Command::Explain(args) => draguard::cli::explain::run(args),
        Command::Impact(args) => draguard::cli::impact::run(args),
        Command::Audit(args) => draguard::cli::audit::run(*args),
        Command::Completions(args) => draguard::cli::completions::completions(args),
        Command::Man(args) => draguard::cli::completions::man(args),
    }
}
