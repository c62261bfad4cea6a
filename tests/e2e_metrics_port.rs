//! The plain metrics port (`--metrics-listen`) under a flood of idle
//! connections (issue 27, N3): beyond its small cap a connection is closed
//! at once, a silent one is closed after the webhook's first-request or
//! idle timeout, and the HTTPS `/healthz` answers throughout.
//! `scripts/metrics-flood.sh` does the same with 8,192 connections.

mod support {
    pub mod server;
}

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use draguard::server::limits::METRICS_MAX_CONNECTIONS;
use support::server::{client, metric, scrape, start, url};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const FIRST_REQUEST: Duration = Duration::from_secs(3);
const IDLE: Duration = Duration::from_secs(2);
const EXTRA: usize = 5;

/// Whether the server closed `stream` within `within`: a read that ends
/// (EOF or reset) rather than one still waiting.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut byte = [0u8; 256];
    loop {
        match tokio::time::timeout(within, stream.read(&mut byte)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // An answer's bytes: keep reading to the close.
            Ok(Ok(_)) => {}
        }
    }
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr)
        .await
        .expect("the kernel accepts the connection")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_cap_metrics_connections_are_closed_and_silent_ones_time_out() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| {
        c.limits.first_request_timeout = FIRST_REQUEST;
        c.limits.idle_timeout = IDLE;
    })
    .await;
    let addr = server.metrics_addr().unwrap();
    let https = client(&server).build().unwrap();
    let started = Instant::now();

    // The cap, held by connections that never send a byte.
    let mut held = Vec::new();
    for _ in 0..METRICS_MAX_CONNECTIONS {
        held.push(connect(addr).await);
    }
    // Let the server accept them in order before the extra ones come.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for _ in 0..EXTRA {
        let mut extra = connect(addr).await;
        assert!(
            closed_within(&mut extra, Duration::from_secs(1)).await,
            "a connection beyond the cap is closed at once"
        );
    }
    // The webhook's port does not care.
    let health = https.get(url(&server, "/healthz")).send().await.unwrap();
    assert_eq!(health.status(), reqwest::StatusCode::OK);
    // The held ones are still open (the first-request timeout has not passed)...
    assert!(started.elapsed() < FIRST_REQUEST, "the test ran too slowly to tell");
    assert!(!closed_within(&mut held[0], Duration::from_millis(100)).await);
    // ...and closed once it has.
    for stream in &mut held {
        assert!(
            closed_within(stream, FIRST_REQUEST + Duration::from_secs(2)).await,
            "a silent connection is closed after the first-request timeout"
        );
    }

    // A keep-alive connection that asked once is closed after the idle timeout.
    let mut keep_alive = connect(addr).await;
    keep_alive
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: metrics\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 12];
    keep_alive.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    let asked = Instant::now();
    assert!(closed_within(&mut keep_alive, IDLE + Duration::from_secs(3)).await);
    assert!(
        asked.elapsed() >= IDLE - Duration::from_millis(200),
        "{:?}",
        asked.elapsed()
    );

    // Scraping works again, and says what happened.
    let text = scrape(&server).await;
    let closed = |reason: &str| {
        metric(
            &text,
            &format!("draguard_metrics_connections_closed_total{{reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(closed("refused"), Some(EXTRA as f64), "{text}");
    assert_eq!(closed("first_request"), Some(METRICS_MAX_CONNECTIONS as f64), "{text}");
    assert_eq!(closed("idle"), Some(1.0), "{text}");
    // The webhook's own timeouts counted none of them.
    assert_eq!(
        metric(&text, "draguard_connection_timeouts_total{timeout=\"first_request\"}"),
        Some(0.0),
        "{text}"
    );
    server.stop().await.unwrap();
}
