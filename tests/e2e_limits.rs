//! Connection and review bounds, end to end over TLS: silent connections
//! are closed, slow bodies get 408, the review cap and the review memory
//! budget answer 503 at once, a body over the limit gets 413 over HTTP/1.1
//! and HTTP/2 alike, the connection cap holds new connections in
//! the backlog, and `/healthz` answers through all of it.

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

/// The flood of the attack run: 2,000 TLS connections that say
/// nothing after the handshake and 100 requests whose bodies stall. While
/// they are held, `/healthz` answers on a new connection in under 100 ms
/// (what a kubelet probe does), a review is answered, and then every idle
/// connection is closed at the first-request timeout and every slow body
/// gets 408 at the body timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_2000_idle_connections_and_100_slow_bodies_are_held() {
    const IDLE: usize = 2000;
    const SLOW: usize = 100;
    // Long enough to open the whole flood before the first ones close.
    const FIRST_REQUEST: Duration = Duration::from_secs(10);
    const BODY: Duration = Duration::from_secs(10);
    // Each connection is two descriptors here: the client's and the server's.
    let needed = 2 * (IDLE + SLOW) as u64 + 512;
    let limit = draguard::server::raise_fd_limit().expect("open-file limit");
    assert!(
        limit.soft.is_none_or(|soft| soft >= needed),
        "this test needs {needed} open files; the hard limit allows {limit:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| {
        c.limits.max_connections = Some(IDLE + SLOW + 100);
        c.limits.first_request_timeout = FIRST_REQUEST;
        c.limits.body_timeout = BODY;
        // The slow bodies declare 1 MiB each: all of them are held, as in
        // the attack, rather than refused by the budget.
        c.limits.review_memory = 512 << 20;
    })
    .await;
    let addr = server.local_addr();
    // TLS 1.2 resuming one session: this test is about what happens after
    // the handshake, and 2,000 full handshakes take ~12 s of a debug build.
    let connector = Arc::new(resuming_connector(&server));

    // The idle flood, 50 handshakes at a time; each task reports when the
    // server closed its connection, counted from its handshake.
    let opened = Instant::now();
    let limiter = Arc::new(tokio::sync::Semaphore::new(50));
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        let (connector, limiter) = (connector.clone(), limiter.clone());
        let permit = limiter.acquire_owned().await.unwrap();
        idle.push(tokio::spawn(async move {
            let mut stream = tls(&connector, addr).await;
            drop(permit);
            let shaken = Instant::now();
            assert!(closed(&mut stream).await);
            shaken.elapsed()
        }));
    }
    while limiter.available_permits() < 50 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut slow = Vec::with_capacity(SLOW);
    for _ in 0..SLOW {
        let mut stream = tls(&connector, addr).await;
        send_partial_post(&mut stream, "/validate", 1 << 20, 64 << 10).await;
        let sent = Instant::now();
        slow.push(tokio::spawn(async move {
            let answer = read_answer(&mut stream).await;
            let waited = sent.elapsed();
            (answer, waited, closed(&mut stream).await)
        }));
    }
    let flood_took = opened.elapsed();
    assert!(
        flood_took < FIRST_REQUEST - Duration::from_secs(3),
        "opening the flood took {flood_took:?}; the probes below would miss it"
    );

    // A kubelet probe: a new connection each time.
    for _ in 0..5 {
        let probe = client(&server).build().unwrap();
        let asked = Instant::now();
        let response = probe.get(url(&server, "/healthz")).send().await.unwrap();
        let took = asked.elapsed();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.text().await.unwrap(), "ok");
        assert!(
            took < Duration::from_millis(100),
            "/healthz took {took:?} under the flood"
        );
    }
    let review = client(&server)
        .build()
        .unwrap()
        .post(url(&server, "/validate"))
        .json(&valid_review("uid-under-flood"))
        .send()
        .await
        .unwrap();
    assert_eq!(review.status(), StatusCode::OK);
    let scraped = scrape(&server).await;
    let open = metric(&scraped, "draguard_connections_open").unwrap();
    assert!(open >= (IDLE + SLOW) as f64, "{open} open while the flood is held");

    for task in idle {
        let held = task.await.unwrap();
        // Measured from when the client's task saw its handshake done,
        // which a busy runtime may run a little late: not before the
        // timeout, give or take that.
        assert!(
            held >= FIRST_REQUEST - Duration::from_millis(500),
            "closed after {held:?}"
        );
        assert!(held < FIRST_REQUEST + Duration::from_secs(5), "closed after {held:?}");
    }
    for task in slow {
        let (answer, waited, closed) = task.await.unwrap();
        assert_eq!(answer.status, 408, "{answer:?}");
        assert_eq!(answer.body, "request body did not arrive within 10s");
        assert_eq!(answer.header("connection"), Some("close"));
        assert!(closed, "the slow client's connection is closed after the 408");
        assert!(waited >= BODY - Duration::from_millis(500), "408 after {waited:?}");
        assert!(waited < BODY + Duration::from_secs(5), "408 after {waited:?}");
    }
    let scraped = scrape(&server).await;
    assert_eq!(
        metric(
            &scraped,
            "draguard_connection_timeouts_total{timeout=\"first_request\"}"
        ),
        Some(IDLE as f64),
        "{scraped}"
    );
    assert_eq!(
        metric(&scraped, "draguard_reviews_rejected_total{reason=\"body_timeout\"}"),
        Some(SLOW as f64)
    );
    server.stop().await.unwrap();
}

/// An HTTP/1.1 keep-alive connection stays open between requests, and is
/// closed once it has been idle for the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http1_keep_alive_connection_is_closed_after_the_idle_timeout() {
    const IDLE: Duration = Duration::from_millis(1500);
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| c.limits.idle_timeout = IDLE).await;
    let mut stream = tls(&connector(&server), server.local_addr()).await;
    let mut last_answer = Instant::now();
    for _ in 0..2 {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        let answer = read_answer(&mut stream).await;
        last_answer = Instant::now();
        assert_eq!((answer.status, answer.body.as_str()), (200, "ok"));
        assert_eq!(answer.header("connection"), None, "kept alive");
        // Well within the idle timeout: the next request is served.
        tokio::time::sleep(IDLE / 3).await;
    }
    assert!(closed(&mut stream).await);
    let idle_for = last_answer.elapsed();
    assert!(
        idle_for >= IDLE - Duration::from_millis(300),
        "closed after {idle_for:?}"
    );
    assert!(idle_for < IDLE + Duration::from_secs(2), "closed after {idle_for:?}");
    let scraped = scrape(&server).await;
    assert_eq!(
        metric(&scraped, "draguard_connection_timeouts_total{timeout=\"idle\"}"),
        Some(1.0)
    );
    assert_eq!(metric(&scraped, "draguard_connections_open"), Some(0.0));
    server.stop().await.unwrap();
}

/// An HTTP/2 connection with no open stream is closed (GOAWAY) after the
/// idle timeout; the client's next request opens a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_http2_connection_is_closed_after_the_idle_timeout() {
    const IDLE: Duration = Duration::from_millis(1500);
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| c.limits.idle_timeout = IDLE).await;
    let h2 = client(&server).build().unwrap();
    let response = h2.get(url(&server, "/healthz")).send().await.unwrap();
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.text().await.unwrap(), "ok");
    tokio::time::sleep(IDLE / 2).await;
    let scraped = scrape(&server).await;
    assert_eq!(metric(&scraped, "draguard_connections_open"), Some(1.0), "still open");
    tokio::time::sleep(IDLE).await;
    let scraped = scrape(&server).await;
    assert_eq!(
        metric(&scraped, "draguard_connection_timeouts_total{timeout=\"idle\"}"),
        Some(1.0)
    );
    assert_eq!(metric(&scraped, "draguard_connections_open"), Some(0.0), "{scraped}");
    let again = h2.get(url(&server, "/healthz")).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::OK, "the client reconnects");
    server.stop().await.unwrap();
}

/// Past the review cap the answer is 503 at once, with Retry-After, and
/// counted; `/healthz` and `/readyz` are not behind the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_review_cap_reviews_get_503_at_once_and_health_still_answers() {
    let (cluster, hold) = held_cluster();
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| {
        c.cluster = Arc::new(cluster);
        c.limits.max_reviews = 1;
    })
    .await;
    let http = client(&server).build().unwrap();
    let first = tokio::spawn(
        http.post(url(&server, "/validate"))
            .json(&valid_review("uid-held"))
            .send(),
    );
    // The first review is inside the cluster view: its slot is taken.
    let hold = tokio::task::spawn_blocking(move || {
        hold.entered.recv().unwrap();
        hold
    })
    .await
    .unwrap();
    for path in ["/validate", "/mutate"] {
        let asked = Instant::now();
        let refused = http
            .post(url(&server, path))
            .json(&valid_review("uid-refused"))
            .send()
            .await
            .unwrap();
        assert!(asked.elapsed() < Duration::from_secs(1), "answered at once");
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.headers()["retry-after"], "1");
        assert_eq!(
            refused.text().await.unwrap(),
            "overloaded: the cap of 1 reviews in progress is reached; retry shortly"
        );
    }
    for path in ["/healthz", "/readyz"] {
        let response = http.get(url(&server, path)).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(response.text().await.unwrap(), "ok");
    }
    let scraped = scrape(&server).await;
    assert_eq!(metric(&scraped, "draguard_reviews_in_flight"), Some(1.0));
    assert_eq!(metric(&scraped, "draguard_reviews_max"), Some(1.0));
    assert_eq!(
        metric(&scraped, "draguard_reviews_rejected_total{reason=\"overloaded\"}"),
        Some(2.0)
    );
    hold.release.send(()).unwrap();
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.status(), StatusCode::OK, "the held review is answered");
    let answer: serde_json::Value = first.json().await.unwrap();
    assert_eq!(answer["response"]["uid"], "uid-held");
    // Its slot is back: the next review is answered (let go in advance).
    hold.release.send(()).unwrap();
    let after = http
        .post(url(&server, "/validate"))
        .json(&valid_review("uid-after"))
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), StatusCode::OK);
    server.stop().await.unwrap();
}

/// Reviews in progress share a memory budget, each charged what it will
/// hold (at least 16 KiB and 4 bytes per body byte, from its
/// Content-Length): a review that would pass it is refused with 503 before
/// a byte of its body is held, and the budget is free again once the review
/// that held it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_review_memory_budget_reviews_get_503_until_it_frees() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| {
        c.max_body = 1 << 20;
        // Below the least charge of a 1 MiB body: raised to it, 4,210,688.
        c.limits.review_memory = 1 << 20;
    })
    .await;
    let connector = connector(&server);
    // 1 MiB declared, 1 KiB sent: the whole budget is reserved.
    let mut holder = tls(&connector, server.local_addr()).await;
    send_partial_post(&mut holder, "/validate", 1 << 20, 1024).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let scraped = scrape(&server).await;
    assert_eq!(metric(&scraped, "draguard_review_memory_bytes"), Some(4_210_688.0));
    assert_eq!(
        metric(&scraped, "draguard_review_memory_budget_bytes"),
        Some(4_210_688.0)
    );
    let http = client(&server).http1_only().build().unwrap();
    let refused = http
        .post(url(&server, "/validate"))
        .json(&valid_review("uid-over-budget"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "1");
    assert_eq!(
        refused.text().await.unwrap(),
        "overloaded: reviews in progress hold the 4210688-byte review memory budget; retry shortly"
    );
    assert_eq!(
        metric(
            &scrape(&server).await,
            "draguard_reviews_rejected_total{reason=\"review_memory\"}"
        ),
        Some(1.0)
    );
    // The holder finishes its (not JSON) body: 400, and the budget is free.
    holder.write_all(&vec![b' '; (1 << 20) - 1024]).await.unwrap();
    let answer = read_answer(&mut holder).await;
    assert_eq!(answer.status, 400, "{answer:?}");
    let answered = http
        .post(url(&server, "/validate"))
        .json(&valid_review("uid-after-budget"))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), StatusCode::OK);
    assert_eq!(
        metric(&scrape(&server).await, "draguard_review_memory_bytes"),
        Some(0.0),
        "every charge given back once its answer was written"
    );
    server.stop().await.unwrap();
}

/// A body whose elements alone would take more than the whole budget is
/// refused with 413 as soon as its charge passes the budget, within the
/// body limit: 400,000 empty claim requests are 800 KB of JSON and would
/// hold about 100 MB (`tests/review_memory.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_would_take_more_than_the_whole_budget_gets_413() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| c.limits.review_memory = 24 << 20).await;
    let http = client(&server).build().unwrap();
    let requests = vec![serde_json::json!({}); 400_000];
    let refused = http
        .post(url(&server, "/mutate"))
        .json(&support::reviews::claim_review(
            "uid-dense",
            serde_json::Value::from(requests),
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(
        refused.text().await.unwrap(),
        "request body would take more than the 25165824-byte review memory budget to review"
    );
    let scraped = scrape(&server).await;
    assert_eq!(metric(&scraped, "draguard_bad_requests_total"), Some(1.0));
    assert_eq!(metric(&scraped, "draguard_review_memory_bytes"), Some(0.0));
    let answered = http
        .post(url(&server, "/mutate"))
        .json(&valid_review("uid-after-dense"))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), StatusCode::OK);
    server.stop().await.unwrap();
}

/// HTTP/2 clients get the same 413 as HTTP/1.1 ones, refused on the
/// Content-Length, for a body within the flow-control window and one far
/// past it. (hyper's client copes with the stream reset of issue 27; the
/// test below sees it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_gets_413_over_http2() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| c.max_body = 1024).await;
    let h2 = client(&server).build().unwrap();
    for size in [4096, 1 << 20] {
        let response = h2
            .post(url(&server, "/validate"))
            .header("content-type", "application/json")
            .body(vec![b' '; size])
            .send()
            .await
            .unwrap_or_else(|e| panic!("{size} bytes: {e:?}"));
        assert_eq!(response.version(), reqwest::Version::HTTP_2);
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE, "{size} bytes");
        assert_eq!(
            response.text().await.unwrap(),
            "request body is larger than the limit of 1024 bytes"
        );
    }
    // The connection still serves.
    let after = h2
        .post(url(&server, "/validate"))
        .json(&valid_review("after"))
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), StatusCode::OK);
    server.stop().await.unwrap();
}

/// Over HTTP/2 the refused body's stream is not reset while the client
/// still sends it: the client sends its whole 1 MiB after the 413 came,
/// and reads the answer. A reset there made curl report "Stream error in
/// the HTTP/2 framing layer" and lose the 413 (issue 27).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_body_over_the_limit_is_not_reset_while_it_is_sent() {
    use axum::body::Bytes;
    use std::future::poll_fn;
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| c.max_body = 1024).await;
    let (mut h2, connection) = h2::client::handshake(h2_tls(&server).await).await.unwrap();
    tokio::spawn(connection);
    const BODY: usize = 1 << 20;
    let request = axum::http::Request::post(url(&server, "/validate"))
        .header("content-type", "application/json")
        .header("content-length", BODY.to_string())
        .body(())
        .unwrap();
    let (response, mut send) = h2.send_request(request, false).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), 413);
    let mut left = BODY;
    while left > 0 {
        send.reserve_capacity(left.min(64 << 10));
        let granted = poll_fn(|cx| send.poll_capacity(cx))
            .await
            .expect("the stream is open")
            .expect("capacity, not a reset");
        let n = granted.min(left);
        send.send_data(Bytes::from(vec![b' '; n]), n == left)
            .expect("sent, not reset");
        left -= n;
    }
    let mut body = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.expect("the answer, not a reset");
        let _ = body.flow_control().release_capacity(chunk.len());
        text.extend_from_slice(&chunk);
    }
    assert_eq!(text, b"request body is larger than the limit of 1024 bytes");
    server.stop().await.unwrap();
}

/// A body over the limit is refused on its Content-Length without being
/// read, or, sent in chunks without one, as soon as it passes the limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_gets_413_by_its_length_or_as_it_streams() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| c.max_body = 1024).await;
    let connector = connector(&server);
    let mut declared = tls(&connector, server.local_addr()).await;
    // Only the head: the answer comes without the body.
    send_partial_post(&mut declared, "/validate", 4096, 0).await;
    let answer = read_answer(&mut declared).await;
    assert_eq!(answer.status, 413, "{answer:?}");
    assert_eq!(answer.body, "request body is larger than the limit of 1024 bytes");

    let mut chunked = tls(&connector, server.local_addr()).await;
    chunked
        .write_all(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    for _ in 0..3 {
        chunked.write_all(b"200\r\n").await.unwrap();
        chunked.write_all(&[b' '; 512]).await.unwrap();
        chunked.write_all(b"\r\n").await.unwrap();
    }
    let answer = read_answer(&mut chunked).await;
    assert_eq!(answer.status, 413, "{answer:?}");
    assert_eq!(answer.body, "request body is larger than the limit of 1024 bytes");
    assert_eq!(metric(&scrape(&server).await, "draguard_bad_requests_total"), Some(2.0));
    server.stop().await.unwrap();
}

/// At the connection cap the listener stops accepting: a new connection
/// waits in the backlog (its handshake does not finish) until one of the
/// open ones closes, and is then served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_connection_cap_new_connections_wait_until_one_closes() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), |c| c.limits.max_connections = Some(2)).await;
    let connector = connector(&server);
    let addr = server.local_addr();
    let first = tls(&connector, addr).await;
    let _second = tls(&connector, addr).await;
    let scraped = scrape(&server).await;
    assert_eq!(metric(&scraped, "draguard_connections_open"), Some(2.0));
    assert_eq!(metric(&scraped, "draguard_connections_max"), Some(2.0));
    let waiting = tokio::spawn({
        let connector = connector.clone();
        async move {
            let mut third = tls(&connector, addr).await;
            third
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
                .await
                .unwrap();
            (read_answer(&mut third).await, Instant::now())
        }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!waiting.is_finished(), "not accepted while at the cap");
    let freed = Instant::now();
    drop(first);
    let (answer, answered) = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("accepted once a connection closed")
        .unwrap();
    assert_eq!((answer.status, answer.body.as_str()), (200, "ok"));
    assert!(answered > freed);
    server.stop().await.unwrap();
}
