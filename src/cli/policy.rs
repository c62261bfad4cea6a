//! `draguard policy lint [DIR]` and `draguard policy schema`.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Check a policy folder; every error with file:line:column (exit 1).
    Lint {
        #[arg(default_value = "policies", value_name = "DIR")]
        dir: PathBuf,
    },
    /// Print the JSON Schema of policy files (for yaml-language-server).
    Schema,
}

pub fn run(args: PolicyArgs) -> ExitCode {
    match args.command {
        PolicyCommand::Lint { dir } => lint(&dir),
        PolicyCommand::Schema => match serde_json::to_string_pretty(&crate::policy::schema::schema()) {
            Ok(s) => {
                println!("{s}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("draguard policy schema: {e}");
                ExitCode::from(2)
            }
        },
    }
}

fn lint(dir: &std::path::Path) -> ExitCode {
    if !dir.is_dir() {
        eprintln!("draguard policy lint: {}: not a folder", dir.display());
        return ExitCode::from(2);
    }
    match crate::policy::load::load_dir(dir) {
        Ok(folder) => {
            for skipped in &folder.skipped {
                println!("{skipped}");
            }
            let n = folder.set.policies.len();
            println!(
                "{}: {n} {} OK",
                dir.display(),
                if n == 1 { "policy" } else { "policies" }
            );
            if let Some(note) = crate::policy::namespace_guards::webhook_note(&folder.set) {
                println!("note: {note}");
            }
            ExitCode::SUCCESS
        }
        Err(load) => {
            let errors = load.errors();
            for e in errors {
                println!("{e}");
            }
            eprintln!("{} error{}", errors.len(), if errors.len() == 1 { "" } else { "s" });
            ExitCode::from(1)
        }
    }
}
