//! How much one replica takes on at once, and for how long it waits on a
//! client. Every bound here is there because an attack run took a replica
//! down without it (issue 16): idle TLS connections up to the descriptor
//! limit, request bodies that stall, no cap on connections or reviews.

use std::time::Duration;

/// A TCP connection must finish its TLS handshake within this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// After the handshake, the first request's headers must arrive within
/// this. The apiserver and the kubelet send their request the moment the
/// connection is up, so seconds are plenty; a connection that says nothing
/// is not a client.
pub const DEFAULT_FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A keep-alive connection (HTTP/1.1, or HTTP/2 with no open stream) with
/// no request for this long is closed. Longer than the 90 s after which
/// the apiserver's Go client closes its idle connections
/// (`IdleConnTimeout`), so the client closes first: a server closing an
/// idle HTTP/1.1 connection races the client's next request on it, and Go
/// does not retry a POST that lost that race.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The whole request body must arrive within this, counted from the
/// headers. The apiserver writes its 3 MiB at most at once; its default
/// webhook deadline is 10 s, after which an answer helps nobody.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// Reviews (`/validate`, `/mutate`) in progress at once, body reading
/// included; beyond it the answer is 503 at once. A review takes
/// microseconds to milliseconds, so even a burst of creates seldom has more
/// than a few dozen in flight; the cap bounds the blocking threads and CPU
/// a flood can take, while `/healthz` and `/readyz` are never behind it.
pub const DEFAULT_MAX_REVIEWS: usize = 256;

/// Bytes the reviews in flight may hold together, each charged what it
/// will really hold from its first body byte to its written answer
/// ([`super::review_memory`]: 16 KiB, 4 per body byte, 256 per JSON
/// element and 448 per object, read off the body as it arrives); beyond it
/// the answer is 503 at once. A typical review is charged 50 to 110 KiB, so
/// a burst of hundreds fits; the 10,000-request claim of issue 27 (1.47 MB)
/// is charged 47.4 MiB, so two run at once and the rest are told to retry.
/// 96 MiB with the process's own ~30 MiB and the cluster caches fits the
/// Deployment's 256 MiB (docs/src/operating/memory.md). Never below the charge of an
/// element-free body at the body limit, or such a body could never be read.
pub const DEFAULT_REVIEW_MEMORY: usize = 96 << 20;

/// Connections the plain metrics port (`--metrics-listen`) keeps open at
/// most; beyond it a new connection is closed at once. Prometheus holds
/// one keep-alive connection per scraper (two in an HA pair), so 16 leaves
/// room for an operator's curl. The default HTTPS cap is sized below the
/// open-file limit minus this share (`fd_limit`), so that the metrics port
/// can never take a descriptor the webhook, `/healthz` or a policy reload
/// needs. An idle one is closed after the same first-request and idle
/// timeouts as a webhook connection.
pub const METRICS_MAX_CONNECTIONS: usize = 16;

/// Connection and review bounds of a server. [`ServerLimits::default`] holds the
/// defaults above, and a connection cap derived from the open-file limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Open connections at most; at the cap the listener stops accepting
    /// (new connections wait in the kernel's backlog) until one closes.
    /// `None`: [`super::fd_limit`]'s default, below the open-file limit.
    pub max_connections: Option<usize>,
    pub first_request_timeout: Duration,
    pub idle_timeout: Duration,
    pub body_timeout: Duration,
    pub max_reviews: usize,
    /// The review memory budget, in bytes.
    pub review_memory: usize,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: None,
            first_request_timeout: DEFAULT_FIRST_REQUEST_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_reviews: DEFAULT_MAX_REVIEWS,
            review_memory: DEFAULT_REVIEW_MEMORY,
        }
    }
}
