//! `draguard policy lint [PATH...]`, `draguard policy test DIR` and
//! `draguard policy schema`.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct PolicyArgs {
    #[command(subcommand)]
    pub command: PolicyCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Check policy folders and files; every error in every document,
    /// with file:line:column (exit 1).
    Lint {
        #[arg(default_value = "policies", value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Print the JSON Schema of policy files (for yaml-language-server).
    Schema,
}

pub fn run(args: PolicyArgs) -> ExitCode {
    match args.command {
        PolicyCommand::Lint { paths } => lint(&paths),
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

fn lint(paths: &[PathBuf]) -> ExitCode {
    use crate::policy::load;
    let mut set = crate::policy::PolicySet::default();
    let mut errors = Vec::new();
    for path in paths {
        if path.is_dir() {
            match load::load_dir(path) {
                Ok(folder) => {
                    for skipped in &folder.skipped {
                        println!("{skipped}");
                    }
                    set.policies.extend(folder.set.policies);
                }
                Err(e) => errors.extend(e.errors().iter().cloned()),
            }
            continue;
        }
        let name = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => match load::parse_file(&name, &text) {
                Ok(parsed) => {
                    for skipped in &parsed.skipped {
                        println!("{skipped}");
                    }
                    set.policies.extend(parsed.policies);
                }
                Err(e) => errors.extend(e),
            },
            Err(e) => {
                eprintln!("draguard policy lint: {name}: cannot read: {e}");
                return ExitCode::from(2);
            }
        }
    }
    errors.extend(load::duplicate_names(&set));
    if !errors.is_empty() {
        for e in &errors {
            println!("{e}");
        }
        eprintln!("{} error{}", errors.len(), if errors.len() == 1 { "" } else { "s" });
        return ExitCode::from(1);
    }
    let n = set.policies.len();
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    println!(
        "{}: {n} {} OK",
        shown.join(", "),
        if n == 1 { "policy" } else { "policies" }
    );
    if let Some(note) = crate::policy::namespace_guards::webhook_note(&set) {
        println!("note: {note}");
    }
    ExitCode::SUCCESS
}
