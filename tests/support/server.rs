// Shared by the end-to-end server test crates.
#![allow(dead_code)]

//! The real HTTPS server in process, raw TLS sockets to talk to it byte by
//! byte (a client that stalls, a body that never ends), and its metrics.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use draguard::server::{self, RunningServer, ServerConfig, TlsSource};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// A server on loopback with a generated certificate in `dir`, and plain
/// `/metrics` on its own port (so that scraping opens no HTTPS connection).
pub async fn start(dir: &Path, adjust: impl FnOnce(&mut ServerConfig)) -> RunningServer {
    let tls = TlsSource::Generate {
        dir: dir.to_owned(),
        sans: vec![],
    };
    let mut config = ServerConfig::new(loopback(), tls);
    config.metrics_listen = Some(loopback());
    adjust(&mut config);
    server::start(config).await.expect("server starts")
}

pub fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().expect("address")
}

/// A reqwest client that trusts only the server's CA.
pub fn client(server: &RunningServer) -> reqwest::ClientBuilder {
    server::install_crypto_provider();
    let pem = std::fs::read(server.ca_file().expect("generated CA")).expect("CA file");
    let cert = reqwest::Certificate::from_pem(&pem).expect("CA");
    reqwest::Client::builder()
        .tls_certs_only([cert])
        .timeout(Duration::from_secs(30))
}

pub fn url(server: &RunningServer, path: &str) -> String {
    format!("https://127.0.0.1:{}{path}", server.local_addr().port())
}

/// The plain-HTTP scrape.
pub async fn scrape(server: &RunningServer) -> String {
    let addr = server.metrics_addr().expect("metrics listener");
    reqwest::get(format!("http://{addr}/metrics"))
        .await
        .expect("scrape")
        .text()
        .await
        .expect("scrape text")
}

/// The value of the series `series` (name and labels, as written) in a
/// scrape.
pub fn metric(scrape: &str, series: &str) -> Option<f64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
}

/// Makes TLS connections to the server, offering HTTP/1.1 only.
pub fn connector(server: &RunningServer) -> TlsConnector {
    connector_trusting(server.ca_file().expect("generated CA"))
}

pub fn connector_trusting(ca: &Path) -> TlsConnector {
    connector_with(ca, rustls::ALL_VERSIONS)
}

/// Makes TLS 1.2 connections that resume one session: after the first, a
/// handshake costs no key exchange and no signature. For a test that opens
/// thousands of connections and is about what happens after the handshake:
/// a full handshake costs about 6 ms of CPU in a debug build, both ends in
/// one process.
pub fn resuming_connector(server: &RunningServer) -> TlsConnector {
    connector_with(server.ca_file().expect("generated CA"), &[&rustls::version::TLS12])
}

fn connector_with(ca: &Path, versions: &[&'static rustls::SupportedProtocolVersion]) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(ca).expect("CA"))
        .expect("CA added");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    TlsConnector::from(Arc::new(config))
}

/// A TCP connection and a finished TLS handshake.
pub async fn tls(connector: &TlsConnector, addr: SocketAddr) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.expect("TCP connect");
    let name = ServerName::try_from("localhost").expect("name");
    connector.connect(name, tcp).await.expect("TLS handshake")
}

/// Writes a request head and the first `sent` bytes of a body of
/// `content_length` bytes, and stops there.
pub async fn send_partial_post(stream: &mut TlsStream<TcpStream>, path: &str, content_length: usize, sent: usize) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {content_length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.expect("write head");
    stream.write_all(&vec![b' '; sent]).await.expect("write body");
    stream.flush().await.expect("flush");
}

/// One HTTP/1.1 answer: status code, headers (names lowercase) and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// Reads one answer with a Content-Length body.
pub async fn read_answer(stream: &mut TlsStream<TcpStream>) -> Answer {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let n = stream.read(&mut chunk).await.expect("read answer");
        assert!(n > 0, "closed before an answer: {:?}", String::from_utf8_lossy(&buffer));
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buffer[..head_end].to_vec()).expect("UTF-8 head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .expect("code")
        .parse()
        .expect("numeric code");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map_or(0, |(_, v)| v.parse().expect("numeric length"));
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.expect("read body");
        assert!(n > 0, "closed mid-body");
        body.extend_from_slice(&chunk[..n]);
    }
    Answer {
        status,
        headers,
        body: String::from_utf8(body).expect("UTF-8 body"),
    }
}

/// True once the server has closed the connection (EOF or reset; TLS
/// without close_notify counts as closed).
pub async fn closed(stream: &mut TlsStream<TcpStream>) -> bool {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte).await {
        Ok(0) | Err(_) => true,
        Ok(_) => false,
    }
}

/// A cluster view whose namespace lookup waits until the test lets it go:
/// a review held in progress for exactly as long as a test needs.
pub struct HeldCluster {
    entered: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
}

/// The test's side of a [`HeldCluster`]: learns when a review is inside,
/// and lets one go.
pub struct Hold {
    pub entered: mpsc::Receiver<()>,
    pub release: mpsc::Sender<()>,
}

pub fn held_cluster() -> (HeldCluster, Hold) {
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    (
        HeldCluster {
            entered: Mutex::new(entered_tx),
            release: Mutex::new(release_rx),
        },
        Hold {
            entered: entered_rx,
            release: release_tx,
        },
    )
}

impl draguard::view::ClusterView for HeldCluster {
    fn namespace_labels(&self, _: &str) -> Option<std::collections::BTreeMap<String, String>> {
        let _ = self.entered.lock().expect("lock").send(());
        let _ = self.release.lock().expect("lock").recv();
        None
    }
}

/// A TLS connection to the server that chose HTTP/2 through ALPN.
pub async fn h2_tls(server: &RunningServer) -> TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(server.ca_file().expect("generated CA")).expect("CA"))
        .expect("CA added");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let stream = tls(&TlsConnector::from(Arc::new(config)), server.local_addr()).await;
    assert_eq!(
        stream.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "the server chose h2"
    );
    stream
}
