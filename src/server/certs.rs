//! Development certificates: a CA and a serving certificate signed by it,
//! generated once into a folder and reused while they still fit.
//!
//! The CA key is not kept: when the names change the whole set is
//! regenerated, and the webhook's caBundle must be updated from `ca.crt`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use jiff::ToSpan as _;
use jiff::civil::Date;
use rcgen::{CertifiedIssuer, KeyPair};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::ServerError;
use super::tls::{load_pair, provider};
use crate::pki;

/// Names every development certificate is valid for.
const BUILT_IN_SANS: [&str; 2] = ["localhost", "127.0.0.1"];
const VALID_DAYS: i64 = 365;
/// A certificate expiring sooner than this is regenerated at start.
const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);

/// The files of a development certificate set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevCerts {
    /// The CA certificate: what the webhook's caBundle must hold.
    pub ca_cert: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Whether files already on disk were kept.
    pub reused: bool,
}

impl DevCerts {
    fn in_dir(dir: &Path) -> Self {
        DevCerts {
            ca_cert: dir.join("ca.crt"),
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            reused: false,
        }
    }
}

/// Reuses `ca.crt`, `tls.crt` and `tls.key` in `dir` when they parse, chain
/// to the CA, cover `localhost`, `127.0.0.1` and every extra SAN, and are
/// not about to expire; otherwise generates new ones.
pub fn ensure_dev_certs(dir: &Path, extra_sans: &[String]) -> Result<DevCerts, ServerError> {
    let sans = wanted_sans(extra_sans)?;
    let mut certs = DevCerts::in_dir(dir);
    match reusable(&certs, &sans) {
        Ok(()) => {
            certs.reused = true;
            return Ok(certs);
        }
        Err(reason) => {
            tracing::info!(dir = %dir.display(), %reason, "generating a development certificate")
        }
    }
    generate(&certs, &sans)?;
    Ok(certs)
}

/// The built-in names plus the extra ones, each once, each checked.
fn wanted_sans(extra: &[String]) -> Result<Vec<String>, ServerError> {
    let mut sans: Vec<String> = BUILT_IN_SANS.iter().map(|s| (*s).to_owned()).collect();
    for san in extra {
        let san = san.trim();
        if ServerName::try_from(san).is_err() {
            return Err(ServerError::BadSan(san.to_owned()));
        }
        if !sans.iter().any(|s| s == san) {
            sans.push(san.to_owned());
        }
    }
    Ok(sans)
}

/// Why the files on disk cannot be kept, if they cannot.
fn reusable(certs: &DevCerts, sans: &[String]) -> Result<(), String> {
    let ca_pem = std::fs::read(&certs.ca_cert).map_err(|e| format!("{}: {e}", certs.ca_cert.display()))?;
    let pair = load_pair(&certs.cert, &certs.key).map_err(|e| e.to_string())?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(&ca_pem) {
        let ca = ca.map_err(|e| format!("{}: {e}", certs.ca_cert.display()))?;
        roots.add(ca).map_err(|e| format!("{}: {e}", certs.ca_cert.display()))?;
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| format!("{}: {e}", certs.ca_cert.display()))?;
    let (leaf, intermediates) = pair
        .cert
        .split_first()
        .ok_or_else(|| format!("{}: no certificate", certs.cert.display()))?;
    let soon = UnixTime::since_unix_epoch(Duration::from_secs(UnixTime::now().as_secs()) + RENEW_BEFORE);
    for san in sans {
        let name = ServerName::try_from(san.as_str()).map_err(|e| format!("{san}: {e}"))?;
        verifier
            .verify_server_cert(leaf, intermediates, &name, &[], soon)
            .map_err(|e| {
                format!(
                    "{} does not serve {san} for the next 30 days: {e}",
                    certs.cert.display()
                )
            })?;
    }
    Ok(())
}

fn generate(certs: &DevCerts, sans: &[String]) -> Result<(), ServerError> {
    let failed = |e: rcgen::Error| ServerError::Generate(e.to_string());
    let (from, until) = valid_dates()?;
    let ca_params = pki::ca_params("draguard development CA", from, until);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(failed)?).map_err(failed)?;
    let server_key = KeyPair::generate().map_err(failed)?;
    let server_params = pki::server_params(sans, "draguard", from, until).map_err(failed)?;
    let server = server_params.signed_by(&server_key, &ca).map_err(failed)?;
    let dir = certs.cert.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| ServerError::Write {
        path: dir.to_owned(),
        source,
    })?;
    write_atomically(&certs.key, server_key.serialize_pem().as_bytes(), 0o600)?;
    write_atomically(&certs.cert, server.pem().as_bytes(), 0o644)?;
    write_atomically(&certs.ca_cert, ca.pem().as_bytes(), 0o644)?;
    Ok(())
}

/// From the start of today (UTC) for [`VALID_DAYS`].
fn valid_dates() -> Result<(Date, Date), ServerError> {
    let today = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date();
    let until = today
        .checked_add(VALID_DAYS.days())
        .map_err(|e| ServerError::Generate(e.to_string()))?;
    Ok((today, until))
}

/// Writes next to the target and renames, so a reader never sees half a
/// file; the mode is set at creation so a key is never world-readable.
fn write_atomically(path: &Path, contents: &[u8], mode: u32) -> Result<(), ServerError> {
    let failed = |source| ServerError::Write {
        path: path.to_owned(),
        source,
    };
    let mut tmp_name = path.file_name().unwrap_or_default().to_owned();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(failed(e)),
        _ => {}
    }
    let mut file = create_with_mode(&tmp, mode).map_err(failed)?;
    file.write_all(contents).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    std::fs::rename(&tmp, path).map_err(failed)
}

#[cfg(unix)]
fn create_with_mode(path: &Path, mode: u32) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
}

#[cfg(not(unix))]
fn create_with_mode(path: &Path, _mode: u32) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().write(true).create_new(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sans_are_checked_and_deduplicated() {
        let extra = vec![
            "127.0.0.1".to_owned(),
            "webhook.ns.svc".to_owned(),
            "10.0.0.1".to_owned(),
        ];
        assert_eq!(
            wanted_sans(&extra).unwrap(),
            ["localhost", "127.0.0.1", "webhook.ns.svc", "10.0.0.1"]
        );
        assert!(matches!(
            wanted_sans(&["not a name".to_owned()]),
            Err(ServerError::BadSan(_))
        ));
    }
}
