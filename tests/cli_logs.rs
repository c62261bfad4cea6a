//! Log output of the real binary: JSON lines a collector can parse, text
//! without escape codes when nobody is looking at a terminal.

mod support {
    pub mod json;
    pub mod kubeconfig;
    pub mod serve_process;
}

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use support::json::top_level_keys;
use support::serve_process::{self, free_port};

/// `draguard serve` that fails at start (a broken policy file) after
/// logging a few lines; stderr is a pipe, not a terminal.
fn failing_serve(format: &str, no_color: bool) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    std::fs::write(policies.join("broken.yaml"), "kind: [\n").unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_draguard"));
    command
        .args([
            "serve",
            "--no-cluster",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            format,
        ])
        .arg("--policies")
        .arg(&policies)
        .arg("--certs-dir")
        .arg(dir.path().join("certs"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if no_color {
        command.env("NO_COLOR", "1");
    } else {
        command.env_remove("NO_COLOR");
    }
    command.output().expect("draguard runs")
}

/// How many top-level `message` keys a JSON log line has, repeats counted
/// (a map would keep only the last).
fn message_keys(line: &str) -> usize {
    top_level_keys(line).iter().filter(|key| *key == "message").count()
}

#[test]
fn json_logs_are_one_object_per_line_with_one_message() {
    let out = failing_serve("json", true);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.len() >= 2, "{stderr}");
    for line in &lines {
        assert_eq!(message_keys(line), 1, "{line}");
    }
    let last: serde_json::Value = serde_json::from_str(lines[lines.len() - 1]).unwrap();
    assert_eq!(last["message"], "draguard serve cannot start");
    assert_eq!(last["level"], "ERROR");
    let error = last["error"].as_str().unwrap();
    assert!(error.starts_with("invalid policies:"), "{error}");
    assert!(error.contains("broken.yaml"), "{error}");
}

#[test]
fn text_logs_to_a_pipe_have_no_escape_codes() {
    // NO_COLOR unset: a pipe alone turns colour off.
    let out = failing_serve("text", false);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("--no-cluster: running without a cluster"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

fn watch_errors(text: &str, cache: &str) -> u64 {
    let prefix = format!("draguard_cache_watch_errors_total{{cache=\"{cache}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// With the apiserver unreachable every watch fails again and again; the
/// log gets one line per watch, not one per failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cluster_is_logged_once_per_watch() {
    let dead = free_port();
    let serve = serve_process::spawn(
        format!("127.0.0.1:{dead}"),
        &["--policies", concat!(env!("CARGO_MANIFEST_DIR"), "/policies")],
    );

    // Until every watch has failed at least twice (backoff starts below 1 s).
    let caches = ["namespaces", "resourceclaims", "resourcequotas"];
    let text = serve
        .scrape_until(150, |text| caches.iter().all(|c| watch_errors(text, c) >= 2))
        .await;
    let log = serve.stop();
    for cache in caches {
        assert!(watch_errors(&text, cache) >= 2, "{cache}: {text}");
    }

    let (stderr, lines) = (&log.stderr, log.lines());
    for cache in caches {
        let said = lines
            .iter()
            .filter(|l| l["what"] == cache && l["message"].as_str().is_some_and(|m| m.starts_with("watch error")))
            .count();
        assert_eq!(said, 1, "{cache}:\n{stderr}");
    }
    let first = lines.iter().find(|l| l["what"] == "namespaces").unwrap();
    assert_eq!(first["level"], "WARN");
    assert_eq!(first["suppressed"], 0);
}

/// A TLS ClientHello whose SNI host_name is `name`, which no TLS library
/// sends for an IP address (RFC 6066 forbids it) but any client can.
fn client_hello_with_sni(name: &str) -> Vec<u8> {
    fn u16_be(n: usize) -> [u8; 2] {
        u16::try_from(n).unwrap().to_be_bytes()
    }
    let name = name.as_bytes();
    let mut list = u16_be(3 + name.len()).to_vec();
    list.push(0); // host_name
    list.extend_from_slice(&u16_be(name.len()));
    list.extend_from_slice(name);
    let mut extensions = vec![0, 0]; // server_name
    extensions.extend_from_slice(&u16_be(list.len()));
    extensions.extend_from_slice(&list);
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7; 32]); // random
    body.push(0); // no session id
    body.extend_from_slice(&[0, 2, 0x13, 0x01]); // TLS_AES_128_GCM_SHA256
    body.extend_from_slice(&[1, 0]); // no compression
    body.extend_from_slice(&u16_be(extensions.len()));
    body.extend_from_slice(&extensions);
    let mut handshake = vec![1]; // client_hello
    handshake.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes()[1..]);
    handshake.extend_from_slice(&body);
    let mut record = vec![0x16, 3, 1];
    record.extend_from_slice(&u16_be(handshake.len()));
    record.extend_from_slice(&handshake);
    record
}

/// `draguard serve` sent `handshakes` ClientHellos with an IP-address SNI;
/// its log, once the metric shows rustls warned about each.
async fn serve_log_after_ip_sni_handshakes(rust_log: Option<&str>, handshakes: u64) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let metrics = format!("127.0.0.1:{}", free_port());
    let mut command = Command::new(env!("CARGO_BIN_EXE_draguard"));
    command
        .args([
            "serve",
            "--no-cluster",
            "--listen",
            &listen,
            "--metrics-listen",
            &metrics,
        ])
        .arg("--certs-dir")
        .arg(dir.path().join("certs"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    match rust_log {
        Some(value) => command.env("RUST_LOG", value),
        None => command.env_remove("RUST_LOG"),
    };
    let child = command.spawn().expect("draguard runs");
    let warned = format!("draguard_library_warnings_total{{target=\"rustls\"}} {handshakes}");
    draguard::server::install_crypto_provider();
    let client = reqwest::Client::new();
    let mut sent = 0;
    let mut text = String::new();
    for _ in 0..150 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        while sent < handshakes {
            let Ok(mut tcp) = tokio::net::TcpStream::connect(&listen).await else {
                break;
            };
            tcp.write_all(&client_hello_with_sni("127.0.0.1")).await.unwrap();
            // The server answers (an alert) and closes; what it says does
            // not matter here.
            let mut answer = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut answer)).await;
            sent += 1;
        }
        let scrape = client
            .get(format!("http://{metrics}/metrics"))
            .timeout(Duration::from_secs(2));
        if let Ok(response) = scrape.send().await {
            text = response.text().await.unwrap_or_default();
            if text.lines().any(|l| l == warned) {
                break;
            }
        }
    }
    let mut child = child;
    child.kill().expect("stop draguard");
    let out = child.wait_with_output().expect("draguard exits");
    assert!(text.lines().any(|l| l == warned), "missing {warned:?} in\n{text}");
    String::from_utf8(out.stderr).unwrap()
}

/// Any client can send an IP address as SNI; rustls warns on each such
/// handshake. By default that is a counter, not a log line per handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ip_address_sni_handshakes_are_counted_not_logged_by_default() {
    let (quiet, asked) = tokio::join!(
        serve_log_after_ip_sni_handshakes(None, 3),
        serve_log_after_ip_sni_handshakes(Some("info,rustls=warn"), 3),
    );
    assert!(!quiet.contains("Illegal SNI"), "{quiet}");
    assert!(
        quiet.contains("serving admission reviews"),
        "the log itself is there: {quiet}"
    );
    // The same handshakes, with rustls's warnings asked for by name.
    assert_eq!(asked.matches("Illegal SNI").count(), 3, "{asked}");
}
