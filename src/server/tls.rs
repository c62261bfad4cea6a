//! rustls setup and certificate hot reload.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;

use super::ServerError;

pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// TLS 1.2 and 1.3 only, ALPN h2 then http/1.1, certificate from `store`.
pub(crate) fn server_config(store: Arc<CertStore>) -> Result<rustls::ServerConfig, ServerError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| ServerError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(store);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// The certificate every new handshake gets; swapped on reload, so
/// connections already open keep theirs.
#[derive(Debug)]
pub(crate) struct CertStore {
    current: RwLock<Arc<CertifiedKey>>,
    /// notAfter (Unix seconds) of the leaf in `current`, parsed once per
    /// load so a scrape does not parse DER; [`UNKNOWN_EXPIRY`] when the
    /// leaf could not be parsed.
    not_after: AtomicI64,
}

/// [`CertStore::not_after`] of a leaf x509-parser cannot read.
const UNKNOWN_EXPIRY: i64 = i64::MIN;

impl CertStore {
    /// A store for files that are never reloaded.
    pub(crate) fn load(cert: &Path, key: &Path) -> Result<Arc<Self>, ServerError> {
        Ok(Arc::new(CertStore::new(load_pair(cert, key)?)))
    }

    fn new(key: CertifiedKey) -> Self {
        CertStore {
            not_after: AtomicI64::new(leaf_not_after(&key)),
            current: RwLock::new(Arc::new(key)),
        }
    }

    /// A throwaway certificate that only answers probes until the real one
    /// arrives: its expiry is nobody's concern, so the metric stays absent.
    fn placeholder(key: CertifiedKey) -> Self {
        let store = CertStore::new(key);
        store.not_after.store(UNKNOWN_EXPIRY, Ordering::Relaxed);
        store
    }

    fn replace(&self, key: CertifiedKey) {
        let not_after = leaf_not_after(&key);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(key);
        self.not_after.store(not_after, Ordering::Relaxed);
    }

    /// When the certificate new handshakes get expires (Unix seconds), or
    /// `None` when its notAfter could not be read.
    pub(crate) fn not_after(&self) -> Option<i64> {
        let at = self.not_after.load(Ordering::Relaxed);
        (at != UNKNOWN_EXPIRY).then_some(at)
    }
}

fn leaf_not_after(key: &CertifiedKey) -> i64 {
    key.end_entity_cert()
        .ok()
        .and_then(|leaf| not_after(leaf))
        .unwrap_or(UNKNOWN_EXPIRY)
}

/// notAfter of a DER certificate, in Unix seconds; `None` when it is not
/// a certificate x509-parser can read.
pub(crate) fn not_after(der: &[u8]) -> Option<i64> {
    crate::pki::validity(der).ok().map(|v| v.not_after)
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.read().unwrap_or_else(PoisonError::into_inner).clone())
    }
}

/// Reads a PEM certificate chain and its private key, and checks they match.
pub(crate) fn load_pair(cert: &Path, key: &Path) -> Result<CertifiedKey, ServerError> {
    let cert_pem = read(cert)?;
    let key_pem = read(key)?;
    parse_pair(&cert_pem, &key_pem, cert, key)
}

/// A certificate handed over in memory (by the `--manage-webhook-certs`
/// controller): no file is read or written.
///
/// Until the first [`ManagedCert::install`] it serves a throwaway
/// self-signed certificate, so `/healthz` answers (kubelet probes do not
/// verify certificates) while [`ManagedCert::is_serving`] keeps `/readyz`
/// false. Cheap to clone; every clone swaps the same store.
#[derive(Debug, Clone)]
pub struct ManagedCert {
    store: Arc<CertStore>,
    installed: Arc<AtomicBool>,
}

impl ManagedCert {
    pub fn new() -> Result<Self, ServerError> {
        let placeholder = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
            .map_err(|e| ServerError::Generate(e.to_string()))?;
        let cert = placeholder.cert.pem();
        let key = placeholder.signing_key.serialize_pem();
        let pair = parse_pem_pair(cert.as_bytes(), key.as_bytes())
            .map_err(|reason| ServerError::Generate(format!("placeholder certificate: {reason}")))?;
        Ok(ManagedCert {
            store: Arc::new(CertStore::placeholder(pair)),
            installed: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Serves `cert_pem` (a chain, leaf first) with `key_pem` from the next
    /// handshake on; connections already open keep their certificate. An
    /// unusable pair is refused and the current certificate stays.
    pub fn install(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<(), ServerError> {
        let pair = parse_pem_pair(cert_pem, key_pem).map_err(|e| ServerError::Tls(e.to_string()))?;
        self.store.replace(pair);
        self.installed.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether a certificate was installed (not the placeholder).
    pub fn is_serving(&self) -> bool {
        self.installed.load(Ordering::Acquire)
    }

    pub(crate) fn store(&self) -> Arc<CertStore> {
        self.store.clone()
    }

    pub(crate) fn same(&self, other: &ManagedCert) -> bool {
        Arc::ptr_eq(&self.store, &other.store)
    }
}

/// Why a certificate chain and key cannot be served, by culprit.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PairError {
    #[error("certificate: {0}")]
    Cert(String),
    #[error("private key: {0}")]
    Key(String),
    #[error("the key does not belong to the certificate: {0}")]
    Mismatch(String),
}

/// A PEM chain (leaf first) and the leaf's PEM key, checked to match.
fn parse_pem_pair(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, PairError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PairError::Cert(format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(PairError::Cert("no CERTIFICATE block found".into()));
    }
    let private_key =
        PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| PairError::Key(format!("not a PEM private key: {e}")))?;
    CertifiedKey::from_der(chain, private_key, &provider()).map_err(|e| PairError::Mismatch(e.to_string()))
}

fn read(path: &Path) -> Result<Vec<u8>, ServerError> {
    std::fs::read(path).map_err(|source| ServerError::Read {
        path: path.to_owned(),
        source,
    })
}

fn parse_pair(cert_pem: &[u8], key_pem: &[u8], cert: &Path, key: &Path) -> Result<CertifiedKey, ServerError> {
    let bad = |path: &Path, reason: String| ServerError::BadCertificate {
        path: path.to_owned(),
        reason,
    };
    parse_pem_pair(cert_pem, key_pem).map_err(|e| match e {
        PairError::Cert(reason) => bad(cert, reason),
        PairError::Key(reason) => bad(key, reason),
        PairError::Mismatch(reason) => bad(key, format!("unusable with {}: {reason}", cert.display())),
    })
}

/// What tells a changed file: Kubernetes swaps Secret mounts by symlink, so
/// the target's mtime and size change; metadata follows the symlink.
type Stamp = Option<(SystemTime, u64)>;

async fn stamp(path: &Path) -> Stamp {
    let meta = tokio::fs::metadata(path).await.ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Polls the certificate files and swaps in new ones when they change.
pub(crate) struct Reloader {
    cert: PathBuf,
    key: PathBuf,
    store: Arc<CertStore>,
    seen: (Stamp, Stamp),
}

impl Reloader {
    /// Loads the files once (a startup error if they are unusable).
    pub(crate) fn load(cert: &Path, key: &Path) -> Result<(Arc<CertStore>, Reloader), ServerError> {
        let seen = (std_stamp(cert), std_stamp(key));
        let store = CertStore::load(cert, key)?;
        let reloader = Reloader {
            cert: cert.to_owned(),
            key: key.to_owned(),
            store: store.clone(),
            seen,
        };
        Ok((store, reloader))
    }

    pub(crate) async fn run(mut self, every: Duration, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.check().await,
                () = super::stopped(&mut stop) => return,
            }
        }
    }

    async fn check(&mut self) {
        let now = (stamp(&self.cert).await, stamp(&self.key).await);
        if now == self.seen {
            return;
        }
        // Remember the stamps even on failure: a bad pair is reported once,
        // and retried as soon as either file changes again.
        self.seen = now;
        let (cert, key) = (self.cert.clone(), self.key.clone());
        let loaded = tokio::task::spawn_blocking(move || load_pair(&cert, &key)).await;
        match loaded {
            Ok(Ok(pair)) => {
                self.store.replace(pair);
                tracing::info!(cert = %self.cert.display(), "reloaded the TLS certificate");
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "new TLS certificate is unusable; still serving the previous one")
            }
            Err(e) => tracing::warn!(error = %e, "certificate reload task failed"),
        }
    }
}

fn std_stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate valid until `until` (Unix seconds).
    fn cert_until(until: i64) -> (Vec<u8>, CertifiedKey) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(1970, 1, 1) + time_from_secs(until);
        let cert = params.self_signed(&key).unwrap();
        let der = cert.der().to_vec();
        let pair = parse_pair(
            cert.pem().as_bytes(),
            key.serialize_pem().as_bytes(),
            Path::new("c.pem"),
            Path::new("k.pem"),
        )
        .unwrap();
        (der, pair)
    }

    fn time_from_secs(secs: i64) -> std::time::Duration {
        std::time::Duration::from_secs(u64::try_from(secs).unwrap())
    }

    #[test]
    fn reads_not_after_and_refuses_garbage() {
        // 2031-03-04T05:06:07Z
        let (der, _) = cert_until(1_930_453_567);
        assert_eq!(not_after(&der), Some(1_930_453_567));
        assert_eq!(not_after(b"not a certificate"), None);
        assert_eq!(not_after(&[]), None);
        assert_eq!(not_after(&der[..der.len() / 2]), None);
    }

    #[test]
    fn store_follows_the_served_certificate() {
        let (_, first) = cert_until(1_900_000_000);
        let (_, second) = cert_until(2_000_000_000);
        let store = CertStore::new(first);
        assert_eq!(store.not_after(), Some(1_900_000_000));
        store.replace(second);
        assert_eq!(store.not_after(), Some(2_000_000_000));
    }

    #[test]
    fn a_placeholder_has_no_expiry_until_the_real_certificate_arrives() {
        let (_, placeholder) = cert_until(1_900_000_000);
        let store = CertStore::placeholder(placeholder);
        assert_eq!(
            store.not_after(),
            None,
            "the throwaway certificate's date is nobody's concern"
        );
        let (_, real) = cert_until(2_000_000_000);
        store.replace(real);
        assert_eq!(store.not_after(), Some(2_000_000_000));
    }
}
