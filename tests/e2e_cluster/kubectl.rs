//! kubectl v1.36.2 (from K8S_BIN) as one identity: a kubeconfig, and
//! optionally a user and groups the administrator impersonates. Every call
//! has a request timeout, so a hung apiserver fails the scenario instead
//! of hanging the suite.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[derive(Clone)]
pub struct Kubectl {
    program: PathBuf,
    kubeconfig: PathBuf,
    /// `--as` and `--as-group`.
    impersonate: Option<(String, Vec<String>)>,
}

/// One kubectl run.
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    /// The whole command, kubectl's own start included.
    pub wall: Duration,
}

/// One request kubectl made, as its `-v=6` log reports it.
#[derive(Debug, Clone)]
pub struct Request {
    pub verb: String,
    pub url: String,
    pub status: String,
    /// How long the apiserver took to answer, as kubectl timed it.
    pub took: Duration,
}

impl Kubectl {
    pub fn new(program: &Path, kubeconfig: &Path) -> Kubectl {
        Kubectl {
            program: program.to_owned(),
            kubeconfig: kubeconfig.to_owned(),
            impersonate: None,
        }
    }

    /// The same administrator, impersonating `user` in `groups` (the
    /// apiserver sees exactly that user; `system:authenticated` is added).
    pub fn impersonating(&self, user: &str, groups: &[&str]) -> Kubectl {
        Kubectl {
            impersonate: Some((user.to_owned(), groups.iter().map(|g| (*g).to_owned()).collect())),
            ..self.clone()
        }
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.program);
        command
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg("--request-timeout=30s");
        if let Some((user, groups)) = &self.impersonate {
            command.arg(format!("--as={user}"));
            for group in groups {
                command.arg(format!("--as-group={group}"));
            }
        }
        command.args(args);
        command
    }

    /// Runs `kubectl args`, with `stdin` piped in when given.
    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> Run {
        let mut command = self.command(args);
        command
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let start = Instant::now();
        let mut child = command.spawn().expect("kubectl runs");
        if let Some(text) = stdin {
            let mut pipe = child.stdin.take().expect("stdin piped");
            pipe.write_all(text.as_bytes()).expect("kubectl reads its input");
        }
        let out = child.wait_with_output().expect("kubectl exits");
        Run {
            success: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            wall: start.elapsed(),
        }
    }

    /// `kubectl args`, which must succeed: its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, None)
    }

    /// `kubectl args < stdin`, which must succeed.
    pub fn ok_with(&self, args: &[&str], stdin: Option<&str>) -> String {
        let run = self.run(args, stdin);
        assert!(
            run.success,
            "kubectl {} failed:\n{}{}",
            args.join(" "),
            run.stdout,
            run.stderr
        );
        run.stdout
    }

    /// `kubectl apply -f -` of `yaml` (server-side: no last-applied
    /// annotation to keep).
    pub fn apply(&self, yaml: &str) -> String {
        self.ok_with(&["apply", "--server-side", "--force-conflicts", "-f", "-"], Some(yaml))
    }

    /// `kubectl get args -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.ok(&all)).expect("kubectl prints JSON")
    }

    /// Whether `kubectl get args` finds the object.
    pub fn exists(&self, args: &[&str]) -> bool {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        let run = self.run(&all, None);
        if !run.success && !run.stderr.contains("NotFound") && !run.stderr.contains("not found") {
            panic!("kubectl {}: {}", all.join(" "), run.stderr);
        }
        run.success
    }

    /// `kubectl args` with `-v=6`: the run, and each request it made.
    pub fn traced(&self, args: &[&str], stdin: Option<&str>) -> (Run, Vec<Request>) {
        let mut all = vec!["-v=6"];
        all.extend_from_slice(args);
        let run = self.run(&all, stdin);
        let requests = run.stderr.lines().filter_map(parse_response_line).collect();
        // The log is noise in a failure message: keep the other lines.
        let stderr = run
            .stderr
            .lines()
            .filter(|l| !l.starts_with('I'))
            .collect::<Vec<_>>()
            .join("\n");
        (Run { stderr, ..run }, requests)
    }
}

/// `... "Response" verb="POST" url="..." status="201 Created" milliseconds=15`
fn parse_response_line(line: &str) -> Option<Request> {
    let rest = &line[line.find("\"Response\"")?..];
    let field = |name: &str| -> Option<String> {
        let start = rest.find(&format!("{name}=\""))? + name.len() + 2;
        let end = rest[start..].find('"')?;
        Some(rest[start..start + end].to_owned())
    };
    let ms_at = rest.find("milliseconds=")? + "milliseconds=".len();
    let ms: u64 = rest[ms_at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    Some(Request {
        verb: field("verb")?,
        url: field("url")?,
        status: field("status").unwrap_or_default(),
        took: Duration::from_millis(ms),
    })
}
