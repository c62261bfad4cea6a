//! `draguard review [FILE|-] [--mutate]`: the AdmissionReview response the
//! server would send for one AdmissionReview request, from the same core,
//! without TLS.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::admission::Incoming;
use crate::review::Engine;
use crate::verdict::Phase;
use crate::view::NoCluster;

#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    /// AdmissionReview JSON file; `-` or nothing reads standard input.
    pub file: Option<PathBuf>,
    /// Answer as `/mutate` would (the JSON patch) instead of as `/validate`
    /// would after the mutation (the verdict).
    #[arg(long)]
    pub mutate: bool,
    /// Folder of toleration policies (or one policy file) to apply (none
    /// without it).
    #[arg(long, value_name = "PATH")]
    pub policies: Option<PathBuf>,
    #[command(flatten)]
    pub toleration_restriction: super::TolerationRestrictionArgs,
    #[command(flatten)]
    pub target: super::target::TargetArgs,
}

pub fn run(args: ReviewArgs) -> ExitCode {
    crate::logging::init_logging(false);
    let body = match read_input(args.file.as_ref()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("draguard review: {e}");
            return ExitCode::from(2);
        }
    };
    let incoming = match Incoming::parse(&body) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("draguard review: {e}");
            return ExitCode::from(2);
        }
    };
    let policies = match super::load_policies("draguard review", args.policies.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("draguard review: {e}");
            return ExitCode::from(2);
        }
    };
    let toleration_restriction = match args.toleration_restriction.load() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("draguard review: {e}");
            return ExitCode::from(2);
        }
    };
    let target = match args.target.target() {
        Ok(target) => target,
        Err(e) => {
            eprintln!("draguard review: {e}");
            return ExitCode::from(2);
        }
    };
    let phase = if args.mutate { Phase::Mutate } else { Phase::Both };
    let ctx = Engine::new(&policies, &NoCluster, target)
        .with_toleration_restriction(toleration_restriction.as_ref())
        .context(jiff::Timestamp::now(), phase, None);
    let decision = incoming.decide(&ctx);
    match serde_json::to_string_pretty(&incoming.answer_with(&decision, &ctx)) {
        Ok(text) => println!("{text}"),
        Err(e) => {
            eprintln!("draguard review: cannot print the response: {e}");
            return ExitCode::from(2);
        }
    }
    if decision.allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn read_input(file: Option<&PathBuf>) -> Result<Vec<u8>, String> {
    match file {
        Some(p) if p.as_os_str() != "-" => std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display())),
        _ => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| format!("cannot read standard input: {e}"))?;
            Ok(buf)
        }
    }
}
