//! A libtest-like runner for scenarios that share one control plane:
//! `test NAME ... ok` per scenario, failures with the logs' tails, a
//! summary line, exit status 101 when any failed. Arguments as libtest's:
//! substrings to select by (`cargo test --test e2e_cluster -- outage`),
//! `--exact`, `--skip S`, `--list`; the other libtest flags are accepted
//! and ignored.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use crate::cluster::Cluster;
use crate::env::{Tools, Unavailable};
use crate::{Outcome, Scenario};

struct Args {
    filters: Vec<String>,
    skips: Vec<String>,
    exact: bool,
    list: bool,
}

fn parse_args() -> Args {
    let mut args = Args {
        filters: Vec::new(),
        skips: Vec::new(),
        exact: false,
        list: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--exact" => args.exact = true,
            "--list" => args.list = true,
            "--skip" => args.skips.extend(it.next()),
            // libtest flags that take a value.
            "--test-threads" | "--format" | "--color" | "--logfile" | "-Z" | "--shuffle-seed" => {
                it.next();
            }
            s if s.starts_with('-') => {}
            s => args.filters.push(s.to_owned()),
        }
    }
    args
}

impl Args {
    fn selects(&self, name: &str) -> bool {
        let hit = |f: &String| {
            if self.exact {
                name == f
            } else {
                name.contains(f.as_str())
            }
        };
        (self.filters.is_empty() || self.filters.iter().any(hit))
            && !self.skips.iter().any(|s| name.contains(s.as_str()))
    }
}

/// Runs the selected scenarios; the process's exit status.
pub fn run(scenarios: &[(&str, Scenario)]) -> i32 {
    let args = parse_args();
    if args.list {
        for (name, _) in scenarios {
            println!("{name}: test");
        }
        return 0;
    }
    let selected: Vec<&(&str, Scenario)> = scenarios.iter().filter(|(n, _)| args.selects(n)).collect();
    let filtered_out = scenarios.len() - selected.len();
    if selected.is_empty() {
        println!("\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed; 0 ignored; {filtered_out} filtered out\n");
        return 0;
    }
    let tools = match Tools::find() {
        Ok(tools) => tools,
        Err(Unavailable::Unset) => {
            println!(
                "e2e_cluster: skipped: K8S_BIN is not set (the kube-apiserver v1.36.2 binaries; `bash ../shared/k8s-bin/unpack.sh target/k8s-bin` and K8S_BIN=target/k8s-bin run it)"
            );
            return 0;
        }
        Err(Unavailable::Broken(why)) if crate::env::ci() => {
            eprintln!("e2e_cluster: FAILED: {why}");
            return 101;
        }
        Err(Unavailable::Broken(why)) => {
            println!("e2e_cluster: skipped: {why}");
            return 0;
        }
    };

    let started = Instant::now();
    println!("\nrunning {} tests", selected.len());
    let cluster = catch_unwind(AssertUnwindSafe(|| Cluster::start(tools)));
    let Ok(mut cluster) = cluster else {
        println!("e2e_cluster: the control plane did not start (see the panic above)");
        return 101;
    };
    println!(
        "control plane v1.36.2 up in {:.1} s ({})",
        cluster.control_plane.started_in.as_secs_f64(),
        cluster.control_plane.dir().display()
    );

    let (mut passed, mut ignored) = (0, 0);
    let mut failed: Vec<(&str, String)> = Vec::new();
    for (name, scenario) in selected {
        let start = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| scenario(&mut cluster)));
        let took = start.elapsed().as_secs_f64();
        match outcome {
            Ok(Outcome::Passed) => {
                passed += 1;
                println!("test {name} ... ok ({took:.1} s)");
            }
            Ok(Outcome::Skipped(why)) if cluster.tools.ci => {
                println!("test {name} ... FAILED ({took:.1} s)");
                failed.push((name, format!("cannot run under CI=true: {why}")));
            }
            Ok(Outcome::Skipped(why)) => {
                ignored += 1;
                println!("test {name} ... ignored, {why}");
            }
            Err(panic) => {
                println!("test {name} ... FAILED ({took:.1} s)");
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                failed.push((name, format!("{message}\n{}", cluster.log_tails(25))));
                // What the scenario left running (a stopped serve) goes.
                cluster.stop_serve();
            }
        }
    }
    drop(cluster);

    if !failed.is_empty() {
        println!("\nfailures:\n");
        for (name, why) in &failed {
            println!("---- {name} ----\n{why}\n");
        }
        println!("failures:");
        for (name, _) in &failed {
            println!("    {name}");
        }
    }
    let result = if failed.is_empty() { "ok" } else { "FAILED" };
    println!(
        "\ntest result: {result}. {passed} passed; {} failed; {ignored} ignored; 0 measured; {filtered_out} filtered out; finished in {:.2}s\n",
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    if failed.is_empty() { 0 } else { 101 }
}
