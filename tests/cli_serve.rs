//! `draguard serve` refuses to start on a policy folder it cannot use.

mod support {
    pub mod cli;
}

use support::cli::draguard;

#[test]
fn a_named_policy_folder_that_does_not_exist_stops_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    let out = draguard(
        &[
            "serve",
            "--no-cluster",
            "--listen",
            "127.0.0.1:0",
            "--certs-dir",
            certs.to_str().expect("utf-8"),
            "--policies",
            "/nonexistent",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.ends_with("draguard serve: invalid policies:\n/nonexistent:0:0: the policy folder does not exist\n"),
        "{stderr}"
    );
}
