//! Certificate pieces shared by the development certificates
//! ([`crate::server::certs`]) and the managed webhook certificates
//! ([`crate::controllers::webhook_certs`]): the parameters of a CA and of a
//! serving certificate, and what is read back from a certificate (all X.509
//! parsing is here). Pure: no clock, no files; each caller picks its own
//! names and dates.

use jiff::civil::Date;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    PublicKeyData as _,
};
use x509_parser::certificate::X509Certificate;

/// A CA that signs only leaf certificates, valid from the start of
/// `not_before` to the start of `not_after` (UTC).
pub(crate) fn ca_params(common_name: &str, not_before: Date, not_after: Date) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    set_validity(&mut params, not_before, not_after);
    params
}

/// A TLS server certificate for `names`, valid from the start of
/// `not_before` to the start of `not_after` (UTC).
pub(crate) fn server_params(
    names: &[String],
    common_name: &str,
    not_before: Date,
    not_after: Date,
) -> Result<CertificateParams, rcgen::Error> {
    // `new` turns strings that parse as IP addresses into IP SANs, the rest
    // into DNS SANs.
    let mut params = CertificateParams::new(names.to_vec())?;
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, not_before, not_after);
    Ok(params)
}

/// Whole UTC days, instead of rcgen's 1975..4096.
fn set_validity(params: &mut CertificateParams, not_before: Date, not_after: Date) {
    let at = |d: Date| rcgen::date_time_ymd(i32::from(d.year()), d.month().unsigned_abs(), d.day().unsigned_abs());
    params.not_before = at(not_before);
    params.not_after = at(not_after);
}

/// A certificate's validity, in seconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
}

impl Validity {
    pub fn expired(&self, now: i64) -> bool {
        now >= self.not_after
    }
}

/// Why a certificate or key cannot be read, or the two do not go together.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("not an X.509 certificate: {0}")]
    NotX509(#[source] x509_parser::nom::Err<x509_parser::error::X509Error>),
    #[error("not a PEM private key: {0}")]
    NotPemKey(#[source] rcgen::Error),
    #[error("the key does not belong to the certificate")]
    KeyMismatch,
}

/// The validity of one DER certificate.
pub fn validity(der: &[u8]) -> Result<Validity, PkiError> {
    let cert = parse(der)?;
    let validity = cert.validity();
    Ok(Validity {
        not_before: validity.not_before.timestamp(),
        not_after: validity.not_after.timestamp(),
    })
}

/// Whether a DER certificate is a CA (basicConstraints cA).
pub(crate) fn is_ca(der: &[u8]) -> Result<bool, PkiError> {
    Ok(parse(der)?.is_ca())
}

/// Whether a PEM private key is the one of a DER certificate.
pub(crate) fn key_matches(der: &[u8], key_pem: &str) -> Result<KeyPair, PkiError> {
    let key = KeyPair::from_pem(key_pem).map_err(PkiError::NotPemKey)?;
    if parse(der)?.public_key().raw != key.subject_public_key_info().as_slice() {
        return Err(PkiError::KeyMismatch);
    }
    Ok(key)
}

fn parse(der: &[u8]) -> Result<X509Certificate<'_>, PkiError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(PkiError::NotX509)?;
    Ok(cert)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_whole_utc_days() {
        let params = ca_params("a CA", jiff::civil::date(2026, 1, 31), jiff::civil::date(2036, 2, 1));
        assert_eq!(params.not_before, rcgen::date_time_ymd(2026, 1, 31));
        assert_eq!(params.not_after, rcgen::date_time_ymd(2036, 2, 1));
        assert!(matches!(params.is_ca, IsCa::Ca(BasicConstraints::Constrained(0))));
        let names = ["localhost".to_owned(), "127.0.0.1".to_owned()];
        let params = server_params(
            &names,
            "draguard",
            jiff::civil::date(2026, 1, 31),
            jiff::civil::date(2027, 1, 31),
        )
        .unwrap();
        assert_eq!(params.subject_alt_names.len(), 2);
        assert_eq!(params.not_after, rcgen::date_time_ymd(2027, 1, 31));
    }

    /// A self-signed CA: its DER and its key as PEM.
    fn ca() -> (Vec<u8>, String) {
        let key = KeyPair::generate().expect("key");
        let params = ca_params("a CA", jiff::civil::date(2026, 1, 1), jiff::civil::date(2027, 1, 1));
        let cert = params.self_signed(&key).expect("self-signed");
        (cert.der().to_vec(), key.serialize_pem())
    }

    #[test]
    fn reads_back_what_it_made() {
        let (der, key) = ca();
        assert!(is_ca(&der).expect("parses"));
        let v = validity(&der).expect("parses");
        assert_eq!(v.not_after - v.not_before, 365 * 24 * 3600);
        assert!(key_matches(&der, &key).is_ok());
    }

    #[test]
    fn pki_error_messages() {
        let (der, _) = ca();
        let (_, other_key) = ca();
        let cases: [(Result<(), PkiError>, &str); 4] = [
            (
                validity(b"junk").map(drop),
                "not an X.509 certificate: Parsing Error: NomError(Eof)",
            ),
            (
                is_ca(b"").map(drop),
                "not an X.509 certificate: Parsing requires 1 bytes/chars",
            ),
            (
                key_matches(&der, "junk").map(drop),
                "not a PEM private key: PEM error: malformedframing",
            ),
            (
                key_matches(&der, &other_key).map(drop),
                "the key does not belong to the certificate",
            ),
        ];
        for (result, message) in cases {
            assert_eq!(result.expect_err("refused").to_string(), message);
        }
    }
}
