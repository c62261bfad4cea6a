//! Certificate pieces shared by the development certificates
//! ([`crate::server::certs`]) and the managed webhook certificates
//! ([`crate::cluster::webhook_certs`]): the parameters of a CA and of a
//! serving certificate. Pure: no clock, no files, no keys; each caller picks
//! its own names and dates.

use jiff::civil::Date;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyUsagePurpose};

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
}
