// Shared by the test crates that run `draguard serve` against a cluster.
#![allow(dead_code)]

//! A kubeconfig for a plain-HTTP API server on loopback, no credentials.

use std::path::Path;

/// Writes a kubeconfig at `path` whose one cluster is `http://{addr}`.
pub fn write(path: &Path, addr: impl std::fmt::Display) {
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"http://{addr}\"}}\n\
             contexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user: {{}}\n"
        ),
    )
    .expect("kubeconfig written");
}
