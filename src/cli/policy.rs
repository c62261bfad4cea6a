//! `draguard policy lint [PATH...]`, `draguard policy test DIR`,
//! `draguard policy schema` and `draguard policy compile --policies DIR`.

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
    /// Run suites of expected verdicts (PolicyTest files under PATH): each
    /// case's resource, requester and expected verdict, policy and patch.
    /// Exit 1 when a case fails, 2 when a suite cannot be run.
    Test {
        #[arg(value_name = "PATH")]
        path: PathBuf,
        /// `text` (a line per case, a diff per failure) or `junit`.
        #[arg(long, short = 'o', value_enum, default_value_t = TestFormat::Text)]
        output: TestFormat,
    },
    /// Print the JSON Schema of policy files (for yaml-language-server).
    Schema,
    /// Print the ValidatingAdmissionPolicies and bindings the apiserver
    /// can run itself for the policies' toleration allow and deny lists
    /// (YAML, one document each); `--explain` says instead what stays in
    /// the webhook, and why.
    Compile {
        /// Folder of toleration policies (or one policy file).
        #[arg(long, value_name = "PATH")]
        policies: PathBuf,
        /// The Kubernetes version the output is for (1.32 or later;
        /// default 1.36).
        #[arg(long, value_name = "VERSION", value_parser = parse_minor)]
        kubernetes_version: Option<u64>,
        /// draguard's namespace, which no compiled policy judges (as no
        /// draguard entry does).
        #[arg(long, value_name = "NAMESPACE", default_value = "draguard")]
        draguard_namespace: String,
        /// Print, per policy, what is compiled and what stays in the webhook.
        #[arg(long)]
        explain: bool,
    },
}

/// `1.36`, `v1.36` or `v1.36.2`: the minor version.
fn parse_minor(text: &str) -> Result<u64, String> {
    let t = text.strip_prefix('v').unwrap_or(text);
    let mut parts = t.split('.');
    match (parts.next(), parts.next().map(str::parse::<u64>)) {
        (Some("1"), Some(Ok(minor))) if parts.clone().count() <= 1 => Ok(minor),
        _ => Err(format!("{text:?} is not a Kubernetes version (1.36, v1.36.2)")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TestFormat {
    Text,
    Junit,
}

pub fn run(args: PolicyArgs) -> ExitCode {
    match args.command {
        PolicyCommand::Lint { paths } => lint(&paths),
        PolicyCommand::Test { path, output } => test(&path, output),
        PolicyCommand::Compile {
            policies,
            kubernetes_version,
            draguard_namespace,
            explain,
        } => compile(&policies, kubernetes_version, draguard_namespace, explain),
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

fn compile(dir: &std::path::Path, minor: Option<u64>, draguard_namespace: String, explain: bool) -> ExitCode {
    use crate::policy::compile;
    let set = match super::load_policies("draguard policy compile", Some(dir)) {
        Ok(set) => set,
        Err(e) => {
            eprintln!("draguard policy compile: {e}");
            return ExitCode::from(2);
        }
    };
    let mut options = compile::Options {
        draguard_namespace,
        ..compile::Options::default()
    };
    if let Some(minor) = minor {
        options.minor = minor;
    }
    let compiled = match compile::compile(&set, &options) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("draguard policy compile: {e}");
            return ExitCode::from(2);
        }
    };
    if explain {
        print!("{}", compile::explain(&compiled));
        return ExitCode::SUCCESS;
    }
    // The hash serve's --compiled-policies-applied recognises them by.
    let objects = crate::controllers::admission_policies::with_hash(compiled.objects);
    match compile::to_yaml(&objects) {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("draguard policy compile: {e}");
            ExitCode::from(2)
        }
    }
}

fn lint(paths: &[PathBuf]) -> ExitCode {
    use crate::policy::load;
    let mut set = crate::policy::PolicySet::default();
    let mut errors = Vec::new();
    for path in paths {
        if path.is_dir() {
            match crate::policy_files::load::load_dir(path) {
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

fn test(path: &std::path::Path, output: TestFormat) -> ExitCode {
    use crate::policy_files::suite;
    let suites = match suite::load(path) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("draguard policy test: {e}");
            return ExitCode::from(2);
        }
    };
    let mut results = Vec::new();
    for s in &suites {
        match suite::run(s) {
            Ok(mut r) => results.append(&mut r),
            Err(e) => {
                eprintln!("draguard policy test: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let failed = results.iter().filter(|r| !r.passed()).count();
    match output {
        TestFormat::Text => {
            for r in &results {
                println!("{} {} / {}", if r.passed() { "PASS" } else { "FAIL" }, r.suite, r.case);
                for line in &r.differences {
                    println!("    {line}");
                }
            }
            println!(
                "{} {}, {failed} failed",
                results.len(),
                if results.len() == 1 { "case" } else { "cases" }
            );
        }
        TestFormat::Junit => print!("{}", junit(&results)),
    }
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// A testcase per case, a failure with the differences.
fn junit(results: &[crate::policy_files::suite::CaseResult]) -> String {
    let failed = results.iter().filter(|r| !r.passed()).count();
    let time: f64 = results.iter().map(|r| r.seconds).sum();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"draguard policy test\" tests=\"{}\" failures=\"{failed}\" time=\"{time:.6}\">\n",
        results.len()
    );
    let mut suites: Vec<&str> = results.iter().map(|r| r.suite.as_str()).collect();
    suites.dedup();
    for name in suites {
        let cases: Vec<_> = results.iter().filter(|r| r.suite == name).collect();
        let failed = cases.iter().filter(|r| !r.passed()).count();
        out.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\">\n",
            crate::report::xml_escape(name),
            cases.len()
        ));
        for r in cases {
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.6}\"",
                crate::report::xml_escape(&r.suite),
                crate::report::xml_escape(&r.case),
                r.seconds
            ));
            if r.passed() {
                out.push_str("/>\n");
            } else {
                out.push_str(&format!(
                    ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                    crate::report::xml_escape(r.differences.first().map_or("", String::as_str)),
                    crate::report::xml_escape(&r.differences.join("\n"))
                ));
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}
