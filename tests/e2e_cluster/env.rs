//! Where the binaries are: the control plane's in `K8S_BIN` (etcd,
//! kube-apiserver, kube-controller-manager, kubectl; `bash
//! ../shared/k8s-bin/unpack.sh target/k8s-bin` makes such a folder), helm
//! on PATH (`scripts/ensure-renderers.sh` prints where to find one).

use std::path::{Path, PathBuf};

pub const BINARIES: [&str; 4] = ["etcd", "kube-apiserver", "kube-controller-manager", "kubectl"];

pub struct Tools {
    pub k8s_bin: PathBuf,
    /// None: not on PATH (the scenarios that need it say so, and fail in CI).
    pub helm: Option<PathBuf>,
    pub ci: bool,
}

/// Why the suite does not run here.
pub enum Unavailable {
    /// K8S_BIN is not set: nothing to run against (a laptop's `cargo test`).
    Unset,
    /// K8S_BIN is set but does not hold the binaries.
    Broken(String),
}

impl Tools {
    pub fn find() -> Result<Tools, Unavailable> {
        let Some(dir) = std::env::var_os("K8S_BIN").filter(|d| !d.is_empty()) else {
            return Err(Unavailable::Unset);
        };
        let k8s_bin = PathBuf::from(dir);
        let missing: Vec<&str> = BINARIES
            .into_iter()
            .filter(|b| !is_executable(&k8s_bin.join(b)))
            .collect();
        if !missing.is_empty() {
            return Err(Unavailable::Broken(format!(
                "K8S_BIN={} lacks {} (bash ../shared/k8s-bin/unpack.sh {0})",
                k8s_bin.display(),
                missing.join(", ")
            )));
        }
        Ok(Tools {
            k8s_bin,
            helm: on_path("helm"),
            ci: ci(),
        })
    }

    pub fn kubectl(&self) -> PathBuf {
        self.k8s_bin.join("kubectl")
    }
}

/// CI=true (or any value but false/0): what may skip on a laptop fails.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
