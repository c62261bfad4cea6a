//! `draguard completions SHELL` and `draguard man DIR`: shell completion
//! scripts and man pages, both generated from the command-line definition
//! (clap_complete, clap_mangen), so that they cannot drift from the flags.
//! scripts/release.sh puts both into the release archive.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to write the completion script for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// The folder to write the pages into (created when missing):
    /// draguard.1, and draguard-COMMAND.1 for each command and subcommand.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// Prints the completion script of `shell` on standard output.
pub fn completions(args: CompletionsArgs) -> ExitCode {
    let mut command = Cli::command();
    clap_complete::generate(args.shell, &mut command, "draguard", &mut std::io::stdout());
    ExitCode::SUCCESS
}

/// Writes a man page per command into the folder.
pub fn man(args: ManArgs) -> ExitCode {
    if let Err(e) = std::fs::create_dir_all(&args.dir) {
        eprintln!("draguard man: {}: {e}", args.dir.display());
        return ExitCode::from(2);
    }
    match write_pages(Cli::command(), &args.dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("draguard man: {}: {e}", args.dir.display());
            ExitCode::from(2)
        }
    }
}

/// The page of `command`, then those of its subcommands (clap_mangen names
/// them draguard-check.1, draguard-policy-lint.1, ...). `help` has none.
fn write_pages(command: clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    let command = command.disable_help_subcommand(true);
    clap_mangen::generate_to(command, dir)
}
