//! Shutdown end to end: for the shutdown delay the server keeps accepting
//! and answering with `/readyz` failing and HTTP/1.1 connections closed
//! after their answer; then the listener closes and in-flight reviews
//! finish within the shutdown timeout.

mod support {
    pub mod reviews;
    pub mod server;
}

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use support::reviews::valid_review;
use support::server::*;
use tokio::io::AsyncWriteExt;

async fn post_validate(stream: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>, uid: &str) -> Answer {
    let body = serde_json::to_vec(&valid_review(uid)).unwrap();
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    read_answer(stream).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_the_shutdown_delay_readyz_fails_and_calls_are_still_answered() {
    const DELAY: Duration = Duration::from_secs(2);
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| c.shutdown_delay = DELAY).await;
    let (connector, addr) = (connector(&server), server.local_addr());
    let mut kept_alive = tls(&connector, addr).await;
    let answer = post_validate(&mut kept_alive, "uid-before").await;
    assert_eq!((answer.status, answer.header("connection")), (200, None));
    let h2 = client(&server).build().unwrap();
    assert_eq!(
        h2.get(url(&server, "/healthz")).send().await.unwrap().version(),
        reqwest::Version::HTTP_2
    );

    let asked = Instant::now();
    server.shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let fresh = || client(&server).http1_only().build().unwrap();
    let readyz = fresh().get(url(&server, "/readyz")).send().await.unwrap();
    assert_eq!(readyz.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(readyz.text().await.unwrap(), "shutting down");
    // Liveness is not readiness: a draining replica is not restarted.
    let healthz = fresh().get(url(&server, "/healthz")).send().await.unwrap();
    assert_eq!(healthz.status(), StatusCode::OK);
    // A keep-alive connection from before: answered, then closed, so its
    // client's next connection goes through the updated endpoints.
    let answer = post_validate(&mut kept_alive, "uid-during").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.contains("\"uid\":\"uid-during\""), "{}", answer.body);
    assert_eq!(answer.header("connection"), Some("close"));
    assert!(closed(&mut kept_alive).await);
    // A new connection is still accepted and answered.
    let mut late = tls(&connector, addr).await;
    let answer = post_validate(&mut late, "uid-new-connection").await;
    assert_eq!((answer.status, answer.header("connection")), (200, Some("close")));
    // HTTP/2 keeps its connection until the delay is over (GOAWAY then).
    let response = h2.get(url(&server, "/healthz")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(asked.elapsed() < DELAY, "the checks above ran within the delay");

    // After the delay: the listener closes.
    let refused_at = loop {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            break asked.elapsed();
        }
        assert!(asked.elapsed() < DELAY + Duration::from_secs(3), "still accepting");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(refused_at >= DELAY, "stopped accepting after {refused_at:?}");
    tokio::time::timeout(Duration::from_secs(5), server.wait())
        .await
        .expect("drained: nothing was in flight")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_delay_in_flight_reviews_finish_while_nothing_new_is_accepted() {
    let (cluster, hold) = held_cluster();
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| {
        c.cluster = Arc::new(cluster);
        c.shutdown_delay = Duration::from_millis(300);
    })
    .await;
    let addr = server.local_addr();
    let http = client(&server).http1_only().build().unwrap();
    let in_flight = tokio::spawn(
        http.post(url(&server, "/validate"))
            .json(&valid_review("uid-in-flight"))
            .send(),
    );
    let hold = tokio::task::spawn_blocking(move || {
        hold.entered.recv().unwrap();
        hold
    })
    .await
    .unwrap();
    server.shutdown();
    let asked = Instant::now();
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        assert!(asked.elapsed() < Duration::from_secs(3), "still accepting");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    hold.release.send(()).unwrap();
    let answered = in_flight.await.unwrap().unwrap();
    assert_eq!(answered.status(), StatusCode::OK);
    let review: serde_json::Value = answered.json().await.unwrap();
    assert_eq!(review["response"]["uid"], "uid-in-flight");
    tokio::time::timeout(Duration::from_secs(5), server.wait())
        .await
        .expect("drained")
        .unwrap();
}

/// A review that never ends does not hold the process: the drain gives up
/// at the shutdown timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shutdown_timeout_bounds_the_drain() {
    const TIMEOUT: Duration = Duration::from_secs(1);
    let (cluster, hold) = held_cluster();
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| {
        c.cluster = Arc::new(cluster);
        c.shutdown_timeout = TIMEOUT;
    })
    .await;
    let http = client(&server).build().unwrap();
    let stuck = tokio::spawn(
        http.post(url(&server, "/validate?timeout=30s"))
            .json(&valid_review("uid-stuck"))
            .send(),
    );
    let hold = tokio::task::spawn_blocking(move || {
        hold.entered.recv().unwrap();
        hold
    })
    .await
    .unwrap();
    let asked = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), server.stop())
        .await
        .expect("the drain gives up")
        .unwrap();
    let took = asked.elapsed();
    assert!(took >= TIMEOUT, "gave up after {took:?}");
    assert!(took < TIMEOUT + Duration::from_secs(2), "gave up after {took:?}");
    // The stuck connection was dropped: its client sees an error.
    assert!(
        tokio::time::timeout(Duration::from_secs(5), stuck)
            .await
            .unwrap()
            .unwrap()
            .is_err()
    );
    hold.release.send(()).unwrap();
}
