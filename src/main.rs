//! The `draguard` binary: parse the command line, dispatch, exit.

use std::process::ExitCode;

use clap::Parser;
use draguard::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => draguard::cli::serve::run(args),
        Command::Review(args) => draguard::cli::review::run(args),
        Command::Check(args) => draguard::cli::check::run(args),
        Command::Policy(args) => draguard::cli::policy::run(args),
        Command::Crd => draguard::cli::print_crd(),
        Command::Explain(args) => draguard::cli::explain::run(args),
    }
}
