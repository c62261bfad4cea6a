//! `draguard serve` (being written).

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

pub fn run(_args: ServeArgs) -> ExitCode {
    ExitCode::FAILURE
}
