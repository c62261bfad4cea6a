//! The open-file limit, and the default connection cap sized below it.
//!
//! Every connection is a file descriptor. A process that runs out of them
//! cannot accept, but also cannot open a policy file, reach the apiserver
//! or answer a probe: an attacker holding idle connections up to the limit
//! made `/healthz` time out. So `serve` raises its soft limit to the hard
//! one at start (many runtimes start processes at a soft 1024 under a much
//! higher hard limit), and the connection cap stays below the limit with a
//! reserve for everything else.

/// Descriptors kept free for what is not a client connection: the
/// listeners, the runtime's own, the cluster client's connections, policy
/// and certificate files being read, `/proc` reads for the metrics.
pub const FD_RESERVE: u64 = 128;

/// The default cap never goes above this, whatever the descriptor limit:
/// each open TLS connection costs memory (about 11 KiB idle, more with
/// buffers in use), and the Deployment's memory limit is 256 MiB. The
/// apiservers need a handful of connections each.
pub const MAX_DEFAULT_CONNECTIONS: usize = 4096;

/// What the open-file limit is, after [`raise_fd_limit`] tried to raise it.
/// `None` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit before.
    pub was: Option<u64>,
    /// The soft limit now: what the process may open.
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

/// Raises the soft open-file limit to the hard limit. An error (a platform
/// that refuses) leaves the limit as it was and says why.
#[cfg(unix)]
pub fn raise_fd_limit() -> Result<FdLimit, String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let before = getrlimit(Resource::Nofile);
    let limit = |soft| FdLimit {
        was: before.current,
        soft,
        hard: before.maximum,
    };
    // An unlimited hard limit cannot be the soft one on Linux (the kernel
    // caps files at fs.nr_open): keep what we have.
    let Some(hard) = before.maximum else {
        return Ok(limit(before.current));
    };
    if before.current.is_some_and(|soft| soft >= hard) {
        return Ok(limit(before.current));
    }
    let raised = Rlimit {
        current: Some(hard),
        maximum: Some(hard),
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => Ok(limit(Some(hard))),
        Err(e) => Err(format!("cannot raise the open-file limit to {hard}: {e}")),
    }
}

#[cfg(not(unix))]
pub fn raise_fd_limit() -> Result<FdLimit, String> {
    Err("raising the open-file limit is only supported on Unix".into())
}

/// The soft open-file limit now (`None`: unlimited or unknown).
pub(crate) fn soft_fd_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The connection cap when none is configured: [`FD_RESERVE`] below the
/// soft limit (at least half of a small limit), at most
/// [`MAX_DEFAULT_CONNECTIONS`].
pub(crate) fn default_max_connections(soft_limit: Option<u64>) -> usize {
    let Some(soft) = soft_limit else {
        return MAX_DEFAULT_CONNECTIONS;
    };
    let usable = soft.saturating_sub(FD_RESERVE).max(soft / 2).max(1);
    usize::try_from(usable).map_or(MAX_DEFAULT_CONNECTIONS, |n| n.min(MAX_DEFAULT_CONNECTIONS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_keeps_a_reserve_below_the_limit() {
        assert_eq!(default_max_connections(Some(1024)), 1024 - 128);
        assert_eq!(default_max_connections(Some(1_048_576)), MAX_DEFAULT_CONNECTIONS);
        assert_eq!(default_max_connections(None), MAX_DEFAULT_CONNECTIONS);
        // A tiny limit still leaves half of it to everything else.
        assert_eq!(default_max_connections(Some(200)), 100);
        assert_eq!(default_max_connections(Some(1)), 1);
        assert_eq!(default_max_connections(Some(0)), 1);
    }

    #[cfg(unix)]
    #[test]
    fn raising_reaches_the_hard_limit_or_says_why() {
        match raise_fd_limit() {
            Ok(limit) => {
                if let Some(hard) = limit.hard {
                    assert_eq!(limit.soft, Some(hard), "{limit:?}");
                }
                assert_eq!(soft_fd_limit(), limit.soft);
            }
            Err(reason) => assert!(reason.starts_with("cannot raise the open-file limit"), "{reason}"),
        }
    }
}
