//! `serve --manage-webhook-certs`: draguard keeps its own webhook CA and
//! serving certificate in a Secret and the CA in its webhook configurations'
//! `caBundle`, so no one has to paste a CA by hand and no cert-manager is
//! needed.
//!
//! - The Secret (type `kubernetes.io/tls`) holds `tls.crt`/`tls.key` (the
//!   serving certificate), `ca.crt` (every CA to trust: the signing CA
//!   first, then a retired one during a rotation) and `ca.key` (the signing
//!   CA's key). It is created when absent; when two replicas race, the
//!   apiserver's 409 picks the winner and the loser uses the winner's.
//!   Renewals are written with the Secret's resourceVersion, so of two
//!   replicas renewing at once one wins and the other re-reads.
//! - A certificate is renewed when less than a third of its life or less
//!   than 30 days remain. The CA (10 years) is rotated the same way; the old
//!   CA stays in `ca.crt`, hence in `caBundle`, so replicas still serving a
//!   certificate from the old CA keep working until they pick up the new one.
//! - `caBundle` is patched (a JSON patch guarded by a `test` of the entry's
//!   name) only into webhook entries whose service is ours, and only when it
//!   differs.
//! - A replica serves a certificate from a new CA only once `caBundle` holds
//!   that CA (or when it has nothing better to serve).
//! - Both configurations are watched (`webhook_config_watch`): a `caBundle`
//!   removed or changed is put back within a second or so, and a periodic
//!   check (every `ca_bundle_every`) remains for when the watch is down.
//! - `/readyz` fails, with the entry named, while some entry's `caBundle`
//!   does not trust the certificate this replica serves ([`ca_bundle_trust`]):
//!   the apiserver cannot call it then.
//!
//! The pure parts (generate, parse, decide, build the patch) are separate
//! from the API calls and tested on their own.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use jiff::ToSpan as _;
use jiff::civil::Date;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use rcgen::{Issuer, KeyPair};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier as _;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use serde_json::{Value, json};

use super::webhook_config_watch::{self, Seen};
use crate::cluster::error_log::{ERROR_LINE_EVERY, ErrorLineAction, ErrorLog};
use crate::pki::{self, PkiError, is_ca, key_matches};
pub use crate::pki::{Validity, validity};
use crate::server::ManagedCert;

/// Secret keys. `tls.crt`, `tls.key` and `ca.crt` are the usual ones of a
/// `kubernetes.io/tls` Secret; `ca.key` is draguard's.
pub const TLS_CERT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
pub const CA_CERT: &str = "ca.crt";
pub const CA_KEY: &str = "ca.key";
const SECRET_TYPE: &str = "kubernetes.io/tls";

const CA_VALID_DAYS: i64 = 3650;
const SERVING_VALID_DAYS: i64 = 365;
/// Renew when less than this remains, whatever the lifetime.
const MIN_REMAINING_SECS: i64 = 30 * 24 * 3600;
const MUTATING: &str = "MutatingWebhookConfiguration";
const VALIDATING: &str = "ValidatingWebhookConfiguration";
/// How many times one check re-reads the Secret after losing a race.
const RACE_RETRIES: usize = 3;
/// Repairs a watch event asks for are this far apart at least: someone
/// (a GitOps tool) resetting `caBundle` on every change of ours must not
/// make a loop of writes.
const REPAIR_AT_MOST_EVERY: Duration = Duration::from_secs(1);

/// What the controller manages, and how often it looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertSettings {
    /// The Secret holding the CA and the serving certificate.
    pub secret: String,
    /// Namespace of the Secret and of the Service.
    pub namespace: String,
    /// The Service the apiserver calls; the certificate's DNS names follow it.
    pub service: String,
    /// Name of both the MutatingWebhookConfiguration and the
    /// ValidatingWebhookConfiguration.
    pub webhook_config: String,
    /// How often the Secret is re-read (renewals by other replicas, expiry).
    pub secret_every: Duration,
    /// How often `caBundle` is checked (a `kubectl apply` may reset it).
    pub ca_bundle_every: Duration,
}

impl CertSettings {
    /// The Secret re-read every 10 minutes, `caBundle` checked every minute.
    pub fn new(secret: &str, namespace: &str, service: &str, webhook_config: &str) -> Self {
        CertSettings {
            secret: secret.to_owned(),
            namespace: namespace.to_owned(),
            service: service.to_owned(),
            webhook_config: webhook_config.to_owned(),
            secret_every: Duration::from_secs(600),
            ca_bundle_every: Duration::from_secs(60),
        }
    }

    /// `<svc>`, `<svc>.<ns>`, `<svc>.<ns>.svc`, `<svc>.<ns>.svc.cluster.local`.
    pub fn dns_names(&self) -> Vec<String> {
        let (svc, ns) = (&self.service, &self.namespace);
        vec![
            svc.clone(),
            format!("{svc}.{ns}"),
            format!("{svc}.{ns}.svc"),
            format!("{svc}.{ns}.svc.cluster.local"),
        ]
    }
}

/// Where draguard runs when `--webhook-namespace` is not given: the pod's
/// namespace from `POD_NAMESPACE` (the caller reads it) or the service
/// account's namespace file, else `draguard`.
pub fn default_namespace(pod_namespace: Option<&str>, service_account_file: Option<&str>) -> String {
    [pod_namespace, service_account_file]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|ns| !ns.is_empty())
        .unwrap_or("draguard")
        .to_owned()
}

/// Where Kubernetes mounts the pod's namespace.
pub const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The label that marks the Secret as draguard's to renew.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

fn created_by_draguard(secret: &Secret) -> bool {
    secret
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(MANAGED_BY))
        .is_some_and(|by| by == "draguard")
}

/// What goes wrong; every error is retried by [`WebhookCerts::run`].
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("cannot generate a certificate: {0}")]
    Generate(String),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0} changed under us {RACE_RETRIES} times in a row")]
    Contended(String),
    #[error("Secret {secret} holds no usable certificate: {source}")]
    Unusable { secret: String, source: BundleError },
    #[error(
        "Secret {secret} needs a new certificate ({reason}), but draguard did not create it (no label {MANAGED_BY}=draguard) and will not overwrite it: delete it to let draguard create its own, label it to hand it over, or serve cert-manager's certificate with --tls-cert instead of --manage-webhook-certs"
    )]
    NotOurs { secret: String, reason: String },
    #[error("cannot serve the certificate from Secret {secret}: {reason}")]
    Serve { secret: String, reason: String },
    #[error(
        "neither MutatingWebhookConfiguration nor ValidatingWebhookConfiguration {config} has a webhook calling service {namespace}/{service}"
    )]
    NoWebhook {
        config: String,
        namespace: String,
        service: String,
    },
}

fn generate_failed(e: impl std::fmt::Display) -> CertError {
    CertError::Generate(e.to_string())
}

/// Why a Secret's data is not the four PEM texts of a [`Bundle`]; the
/// Secret is then regenerated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BundleError {
    #[error("no {0}")]
    Missing(&'static str),
    #[error("{0} is not PEM text")]
    NotText(&'static str),
}

/// Why a PEM text yields no certificate.
#[derive(Debug, thiserror::Error)]
pub enum PemCertsError {
    #[error("not PEM certificates: {0}")]
    Pem(#[source] rustls::pki_types::pem::Error),
    #[error("no CERTIFICATE block")]
    Empty,
}

/// Why the Secret's signing CA or serving certificate cannot be kept:
/// [`assess`] turns it into the reason of a renewal.
#[derive(Debug, thiserror::Error)]
pub enum CertCheckError {
    /// `ca.crt` holds no certificate ([`assess`] says "CA: " before it).
    #[error(transparent)]
    CaPem(PemCertsError),
    /// A certificate or key does not parse, or the CA's key is not its own.
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error("the first certificate of ca.crt is not a CA")]
    NotCa,
    #[error("expired at {}", show_time(*.0))]
    Expired(i64),
    #[error("{TLS_CERT}: {0}")]
    ServingPem(PemCertsError),
    #[error("{TLS_KEY}: {0}")]
    ServingKey(PkiError),
    #[error("{CA_CERT}: no certificate")]
    NoSigningCa,
    /// The CA is not usable as a trust anchor.
    #[error("{CA_CERT}: {0}")]
    BadCa(#[source] rustls::Error),
    #[error("{CA_CERT}: {0}")]
    Verifier(#[source] rustls::client::VerifierBuilderError),
    /// A name to serve is neither a DNS name nor an IP address.
    #[error("{name}: {source}")]
    BadName {
        name: String,
        source: rustls::pki_types::InvalidDnsNameError,
    },
    /// A client trusting only the CA would refuse the certificate for `name`.
    #[error("the certificate does not serve {name}: {source}")]
    NotServed { name: String, source: rustls::Error },
}

// ---------------------------------------------------------------- pure parts

/// The four PEM texts of the Secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Bundle {
    /// Every CA to trust: the signing CA first, then retired ones.
    pub ca_cert: String,
    /// The signing CA's key.
    pub ca_key: String,
    pub tls_cert: String,
    pub tls_key: String,
}

impl std::fmt::Debug for Bundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bundle")
            .field("ca_cert", &self.ca_cert)
            .field("tls_cert", &self.tls_cert)
            .finish_non_exhaustive()
    }
}

impl Bundle {
    /// The four keys of a Secret's data, each present and UTF-8.
    pub fn from_data(data: &BTreeMap<String, ByteString>) -> Result<Bundle, BundleError> {
        let text = |key: &'static str| -> Result<String, BundleError> {
            let bytes = data.get(key).ok_or(BundleError::Missing(key))?;
            String::from_utf8(bytes.0.clone()).map_err(|_| BundleError::NotText(key))
        };
        Ok(Bundle {
            ca_cert: text(CA_CERT)?,
            ca_key: text(CA_KEY)?,
            tls_cert: text(TLS_CERT)?,
            tls_key: text(TLS_KEY)?,
        })
    }

    pub fn to_data(&self) -> BTreeMap<String, ByteString> {
        [
            (CA_CERT, &self.ca_cert),
            (CA_KEY, &self.ca_key),
            (TLS_CERT, &self.tls_cert),
            (TLS_KEY, &self.tls_key),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
        .collect()
    }

    /// The DER of the CA that signs (the first of `ca.crt`).
    fn signing_ca(&self) -> Option<CertificateDer<'static>> {
        parse_certs(&self.ca_cert).ok()?.into_iter().next()
    }
}

/// The renewal rule of the managed certificates; [`Validity`] itself, like
/// all reading of certificates, is in [`crate::pki`].
impl Validity {
    /// When to renew: once less than a third of the lifetime, or less than
    /// 30 days, remains.
    pub fn renew_at(&self) -> i64 {
        let third = (self.not_after - self.not_before) / 3;
        self.not_after - third.max(MIN_REMAINING_SECS)
    }

    pub fn needs_renewal(&self, now: i64) -> bool {
        now >= self.renew_at()
    }
}

/// The certificates of a PEM text, in order.
/// Never empty.
pub fn parse_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, PemCertsError> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(PemCertsError::Pem)?;
    if certs.is_empty() {
        return Err(PemCertsError::Empty);
    }
    Ok(certs)
}

/// What to do with the Secret's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretAction {
    Keep,
    /// A new serving certificate from the same CA.
    RenewServing(String),
    /// A new CA, kept next to the old one in `ca.crt`, and a new serving
    /// certificate signed by it.
    RotateCa(String),
    /// Nothing worth keeping: a new CA and serving certificate.
    Regenerate(String),
}

impl SecretAction {
    /// Why the Secret must change (empty for [`SecretAction::Keep`]).
    pub fn reason(&self) -> &str {
        match self {
            SecretAction::Keep => "",
            SecretAction::RenewServing(r) | SecretAction::RotateCa(r) | SecretAction::Regenerate(r) => r,
        }
    }
}

/// Judges the Secret's data at `now` (Unix seconds) for `names`.
pub fn assess(data: &BTreeMap<String, ByteString>, names: &[String], now: i64) -> SecretAction {
    let bundle = match Bundle::from_data(data) {
        Ok(bundle) => bundle,
        Err(reason) => return SecretAction::Regenerate(reason.to_string()),
    };
    let ca = match check_ca(&bundle, now) {
        Ok(ca) => ca,
        Err(reason) => return SecretAction::Regenerate(format!("CA: {reason}")),
    };
    if ca.needs_renewal(now) {
        return SecretAction::RotateCa(format!("the CA expires at {}", show_time(ca.not_after)));
    }
    match check_serving(&bundle, names, now) {
        Ok(serving) if serving.needs_renewal(now) => {
            SecretAction::RenewServing(format!("the certificate expires at {}", show_time(serving.not_after)))
        }
        Ok(_) => SecretAction::Keep,
        Err(reason) => SecretAction::RenewServing(reason.to_string()),
    }
}

fn show_time(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map_or_else(|_| secs.to_string(), |t| t.to_string())
}

/// The signing CA's validity, if it parses, has its key and is in force.
fn check_ca(bundle: &Bundle, now: i64) -> Result<Validity, CertCheckError> {
    let certs = parse_certs(&bundle.ca_cert).map_err(CertCheckError::CaPem)?;
    // parse_certs never returns an empty list; were it to, that is its
    // "no CERTIFICATE block".
    let signing = certs.first().ok_or(CertCheckError::CaPem(PemCertsError::Empty))?;
    key_matches(signing, &bundle.ca_key)?;
    if !is_ca(signing)? {
        return Err(CertCheckError::NotCa);
    }
    let validity = validity(signing)?;
    if validity.expired(now) {
        return Err(CertCheckError::Expired(validity.not_after));
    }
    Ok(validity)
}

/// The serving certificate's validity, if its key matches, the signing CA
/// signed it and it is valid now for every name.
fn check_serving(bundle: &Bundle, names: &[String], now: i64) -> Result<Validity, CertCheckError> {
    let chain = parse_certs(&bundle.tls_cert).map_err(CertCheckError::ServingPem)?;
    let (leaf, intermediates) = chain
        .split_first()
        .ok_or(CertCheckError::ServingPem(PemCertsError::Empty))?;
    key_matches(leaf, &bundle.tls_key).map_err(CertCheckError::ServingKey)?;
    let ca = bundle.signing_ca().ok_or(CertCheckError::NoSigningCa)?;
    verify(&ca, leaf, intermediates, names, now)?;
    Ok(validity(leaf)?)
}

/// Verifies `leaf` as a server certificate for every name, as a client
/// trusting only `ca` would at `now`.
pub fn verify(
    ca: &CertificateDer<'_>,
    leaf: &CertificateDer<'_>,
    intermediates: &[CertificateDer<'_>],
    names: &[String],
    now: i64,
) -> Result<(), CertCheckError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone().into_owned()).map_err(CertCheckError::BadCa)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(CertCheckError::Verifier)?;
    let at = UnixTime::since_unix_epoch(Duration::from_secs(u64::try_from(now).unwrap_or(0)));
    for name in names {
        let server = ServerName::try_from(name.as_str()).map_err(|source| CertCheckError::BadName {
            name: name.clone(),
            source,
        })?;
        verifier
            .verify_server_cert(leaf, intermediates, &server, &[], at)
            .map_err(|source| CertCheckError::NotServed {
                name: name.clone(),
                source,
            })?;
    }
    Ok(())
}

/// A brand-new CA and serving certificate.
pub fn generate(names: &[String], now: jiff::Timestamp) -> Result<Bundle, CertError> {
    let (ca_cert, ca_key) = new_ca(now)?;
    let (tls_cert, tls_key) = issue(&ca_cert, &ca_key, names, now)?;
    Ok(Bundle {
        ca_cert,
        ca_key,
        tls_cert,
        tls_key,
    })
}

/// What the Secret should hold after `verdict` (`None` for [`SecretAction::Keep`]).
pub fn renew(
    data: &BTreeMap<String, ByteString>,
    verdict: &SecretAction,
    names: &[String],
    now: jiff::Timestamp,
) -> Result<Option<Bundle>, CertError> {
    let old = Bundle::from_data(data);
    match (verdict, old) {
        (SecretAction::Keep, _) => Ok(None),
        (SecretAction::RenewServing(_), Ok(old)) => {
            let signing_pem = first_pem(&old.ca_cert).ok_or_else(|| generate_failed("ca.crt: no certificate"))?;
            let (tls_cert, tls_key) = issue(&signing_pem, &old.ca_key, names, now)?;
            Ok(Some(Bundle {
                ca_cert: retain_unexpired(&old.ca_cert, now.as_second()),
                ca_key: old.ca_key,
                tls_cert,
                tls_key,
            }))
        }
        (SecretAction::RotateCa(_), Ok(old)) => {
            let (ca_cert, ca_key) = new_ca(now)?;
            let (tls_cert, tls_key) = issue(&ca_cert, &ca_key, names, now)?;
            // The old signing CA stays trusted until it expires; older
            // retired ones go.
            let previous = first_pem(&old.ca_cert)
                .filter(|pem| retain_unexpired(pem, now.as_second()) == *pem)
                .unwrap_or_default();
            Ok(Some(Bundle {
                ca_cert: format!("{ca_cert}{previous}"),
                ca_key,
                tls_cert,
                tls_key,
            }))
        }
        _ => generate(names, now).map(Some),
    }
}

/// The first certificate of a PEM text, as PEM.
fn first_pem(pem: &str) -> Option<String> {
    parse_certs(pem).ok()?.into_iter().next().map(|der| to_pem(&der))
}

fn to_pem(der: &CertificateDer<'_>) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

/// The certificates of `pem` that have not expired at `now`, as PEM.
fn retain_unexpired(pem: &str, now: i64) -> String {
    parse_certs(pem)
        .unwrap_or_default()
        .iter()
        .filter(|der| validity(der).is_ok_and(|v| !v.expired(now)))
        .map(|der| to_pem(der))
        .collect()
}

fn new_ca(now: jiff::Timestamp) -> Result<(String, String), CertError> {
    let (from, until) = valid_dates(now, CA_VALID_DAYS, None)?;
    let params = pki::ca_params(&format!("draguard webhook CA {}", now.as_second()), from, until);
    let key = KeyPair::generate().map_err(generate_failed)?;
    let cert = params.self_signed(&key).map_err(generate_failed)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A serving certificate for `names`, signed by the CA `ca_pem`/`ca_key`,
/// never outliving the CA.
fn issue(ca_pem: &str, ca_key: &str, names: &[String], now: jiff::Timestamp) -> Result<(String, String), CertError> {
    let ca_der = parse_certs(ca_pem).map_err(generate_failed)?;
    let ca_der = ca_der.first().ok_or_else(|| generate_failed("no CA certificate"))?;
    let ca_until = validity(ca_der).map_err(generate_failed)?.not_after;
    let signing_key = KeyPair::from_pem(ca_key).map_err(generate_failed)?;
    let issuer = Issuer::from_ca_cert_der(ca_der, signing_key).map_err(generate_failed)?;
    let common_name = names.get(2).or(names.first()).cloned().unwrap_or_default();
    let (from, until) = valid_dates(now, SERVING_VALID_DAYS, Some(ca_until))?;
    let params = pki::server_params(names, &common_name, from, until).map_err(generate_failed)?;
    let key = KeyPair::generate().map_err(generate_failed)?;
    let cert = params.signed_by(&key, &issuer).map_err(generate_failed)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// From the start of yesterday (UTC; replicas' clocks differ a little) to
/// `days` after today, but not past `cap` (Unix seconds).
fn valid_dates(now: jiff::Timestamp, days: i64, cap: Option<i64>) -> Result<(Date, Date), CertError> {
    let today = now.to_zoned(jiff::tz::TimeZone::UTC).date();
    let from = today.checked_sub(1.day()).map_err(generate_failed)?;
    let mut until = today.checked_add(days.days()).map_err(generate_failed)?;
    if let Some(cap) = cap {
        let cap = jiff::Timestamp::from_second(cap)
            .map_err(generate_failed)?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date();
        until = until.min(cap);
    }
    Ok((from, until))
}

/// One webhook entry of a configuration, as far as `caBundle` goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEntry {
    pub name: String,
    /// `(namespace, name)` of the service it calls, if it calls a service.
    pub service: Option<(String, String)>,
    /// `None` when the field is absent (the apiserver omits an empty one).
    pub ca_bundle: Option<Vec<u8>>,
}

impl WebhookEntry {
    fn new(name: &str, config: &WebhookClientConfig) -> Self {
        WebhookEntry {
            name: name.to_owned(),
            service: config.service.as_ref().map(|s| (s.namespace.clone(), s.name.clone())),
            ca_bundle: config.ca_bundle.as_ref().map(|b| b.0.clone()),
        }
    }
}

/// The entries of a MutatingWebhookConfiguration, in order.
pub fn mutating_entries(config: &MutatingWebhookConfiguration) -> Vec<WebhookEntry> {
    let webhooks = config.webhooks.iter().flatten();
    webhooks.map(|w| WebhookEntry::new(&w.name, &w.client_config)).collect()
}

/// The entries of a ValidatingWebhookConfiguration, in order.
pub fn validating_entries(config: &ValidatingWebhookConfiguration) -> Vec<WebhookEntry> {
    let webhooks = config.webhooks.iter().flatten();
    webhooks.map(|w| WebhookEntry::new(&w.name, &w.client_config)).collect()
}

/// What a configuration needs for its entries calling our service.
#[derive(Debug, Clone, PartialEq)]
pub struct CaBundlePlan {
    /// How many entries call our service.
    pub ours: usize,
    /// JSON patch operations; empty when every such entry already has `ca`.
    pub ops: Vec<Value>,
}

/// Sets `caBundle` to `ca` (PEM) in the entries calling `namespace/service`,
/// each guarded by a `test` of the entry's name (a list reordered in the
/// meantime fails the patch instead of touching another entry) and of the
/// `caBundle` seen (a replica that just put a newer CA there is not
/// overwritten by one that read the Secret before it changed).
pub fn ca_bundle_plan(entries: &[WebhookEntry], namespace: &str, service: &str, ca: &[u8]) -> CaBundlePlan {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(ca);
    let mut plan = CaBundlePlan { ours: 0, ops: vec![] };
    for (i, entry) in entries.iter().enumerate() {
        let ours = entry
            .service
            .as_ref()
            .is_some_and(|(ns, name)| ns == namespace && name == service);
        if !ours {
            continue;
        }
        plan.ours += 1;
        if entry.ca_bundle.as_deref() != Some(ca) {
            plan.ops
                .push(json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": entry.name}));
            if let Some(seen) = &entry.ca_bundle {
                let seen = base64::engine::general_purpose::STANDARD.encode(seen);
                plan.ops
                    .push(json!({"op": "test", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": seen}));
            }
            plan.ops
                .push(json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": encoded}));
        }
    }
    plan
}

/// Whether the apiserver can call this replica: every entry of both
/// configurations (`[mutating, validating]`, `None` for one that is absent)
/// that calls `namespace/service` has a `caBundle` with a CA that verifies
/// `served` (the PEM chain served) for `<service>.<namespace>.svc`, the
/// name the apiserver checks (k8s.io/apiserver pkg/util/webhook/client.go,
/// `serverName := svc.Name + "." + svc.Namespace + ".svc"`). `Err` names the
/// first entry that does not, for `/readyz`.
pub fn ca_bundle_trust(
    configs: &[Option<Vec<WebhookEntry>>; 2],
    settings: &CertSettings,
    served: &str,
    now: i64,
) -> Result<(), String> {
    let (namespace, service) = (&settings.namespace, &settings.service);
    let config = &settings.webhook_config;
    let chain = parse_certs(served).map_err(|e| format!("the served certificate: {e}"))?;
    let (leaf, intermediates) = chain.split_first().ok_or("the served certificate: no certificate")?;
    let server_name = [format!("{service}.{namespace}.svc")];
    // Entries mostly share one caBundle: each distinct one is verified once.
    let mut judged: Vec<(&[u8], bool)> = Vec::new();
    let mut ours = 0;
    for (kind, entries) in [MUTATING, VALIDATING].into_iter().zip(configs) {
        let ours_here = entries.iter().flatten().filter(|entry| {
            entry
                .service
                .as_ref()
                .is_some_and(|(ns, name)| ns == namespace && name == service)
        });
        for entry in ours_here {
            ours += 1;
            let ca_bundle = entry.ca_bundle.as_deref().unwrap_or_default();
            if ca_bundle.is_empty() {
                return Err(format!("{kind} {config}: webhook {} has no caBundle", entry.name));
            }
            let trusted = match judged.iter().find(|(bundle, _)| *bundle == ca_bundle) {
                Some((_, trusted)) => *trusted,
                None => {
                    let cas = parse_certs(&String::from_utf8_lossy(ca_bundle)).unwrap_or_default();
                    let trusted = cas
                        .iter()
                        .any(|ca| verify(ca, leaf, intermediates, &server_name, now).is_ok());
                    judged.push((ca_bundle, trusted));
                    trusted
                }
            };
            if !trusted {
                return Err(format!(
                    "{kind} {config}: the caBundle of webhook {} does not trust the served certificate",
                    entry.name
                ));
            }
        }
    }
    if ours == 0 {
        let none = CertError::NoWebhook {
            config: config.clone(),
            namespace: namespace.clone(),
            service: service.clone(),
        };
        return Err(none.to_string());
    }
    Ok(())
}

// ------------------------------------------------------------------- the IO

/// What the last look at the configurations found: [`ca_bundle_trust`]'s
/// verdict on the certificate served, shared with `/readyz`.
type Trust = Arc<Mutex<Result<(), String>>>;

/// Tells `/readyz` whether a managed certificate is served and every entry
/// of ours trusts it, as far as the controller last saw.
#[derive(Clone)]
pub struct Readiness {
    cert: ManagedCert,
    trust: Trust,
}

impl Readiness {
    /// `Err` says what is missing.
    pub fn check(&self) -> Result<(), String> {
        if !self.cert.is_serving() {
            return Err("the webhook certificate is not served yet".to_owned());
        }
        // A poisoned lock still holds the last verdict written whole.
        self.trust.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub fn is_ready(&self) -> bool {
        self.check().is_ok()
    }
}

/// The controller: one per replica.
pub struct WebhookCerts {
    secrets: Api<Secret>,
    mutating: Api<MutatingWebhookConfiguration>,
    validating: Api<ValidatingWebhookConfiguration>,
    settings: CertSettings,
    cert: ManagedCert,
    trust: Trust,
    /// Both configurations' entries as last read, patched or watched
    /// (`[mutating, validating]`; `None`: absent, or not read yet).
    seen: [Option<Vec<WebhookEntry>>; 2],
    /// What the Secret held at the last read.
    desired: Option<Bundle>,
    /// What is being served.
    served: Option<Bundle>,
    /// The `ca.crt` last found in every entry's `caBundle`.
    in_ca_bundle: Option<String>,
    secret_read_at: Option<Instant>,
}

impl WebhookCerts {
    pub fn new(client: Client, settings: CertSettings, cert: ManagedCert) -> Self {
        WebhookCerts {
            secrets: Api::namespaced(client.clone(), &settings.namespace),
            mutating: Api::all(client.clone()),
            validating: Api::all(client),
            settings,
            cert,
            trust: Arc::new(Mutex::new(Err("caBundle not checked yet".to_owned()))),
            seen: [None, None],
            desired: None,
            served: None,
            in_ca_bundle: None,
            secret_read_at: None,
        }
    }

    pub fn readiness(&self) -> Readiness {
        Readiness {
            cert: self.cert.clone(),
            trust: self.trust.clone(),
        }
    }

    /// What is being served, if anything.
    pub fn served(&self) -> Option<&Bundle> {
        self.served.as_ref()
    }

    fn secret_ref(&self) -> String {
        format!("{}/{}", self.settings.namespace, self.settings.secret)
    }

    fn api_error(&self, what: &str) -> impl FnOnce(kube::Error) -> CertError {
        let what = format!("{what} Secret {}", self.secret_ref());
        move |source| CertError::Api { what, source }
    }

    /// Reads the Secret, creates or renews it if needed, and returns what it
    /// holds in the end (ours, or the winner's after a lost race).
    pub async fn ensure_secret(&self) -> Result<Bundle, CertError> {
        let names = self.settings.dns_names();
        for _ in 0..RACE_RETRIES {
            let now = jiff::Timestamp::now();
            let found = self.secrets.get_opt(&self.settings.secret).await;
            let Some(secret) = found.map_err(self.api_error("cannot read"))? else {
                let bundle = generate(&names, now)?;
                match self
                    .secrets
                    .create(&PostParams::default(), &self.new_secret(&bundle))
                    .await
                {
                    Ok(_) => {
                        tracing::info!(secret = %self.secret_ref(), "created the webhook CA and serving certificate");
                        return Ok(bundle);
                    }
                    Err(kube::Error::Api(status)) if status.is_already_exists() => {
                        tracing::info!(secret = %self.secret_ref(), "another replica created the webhook certificate first; using theirs");
                        continue;
                    }
                    Err(e) => return Err(self.api_error("cannot create")(e)),
                }
            };
            let data = secret.data.clone().unwrap_or_default();
            let verdict = assess(&data, &names, now.as_second());
            let Some(bundle) = renew(&data, &verdict, &names, now)? else {
                return Bundle::from_data(&data).map_err(|source| CertError::Unusable {
                    secret: self.secret_ref(),
                    source,
                });
            };
            // A Secret someone else made (cert-manager's, after switching
            // overlays) is read, never overwritten: two writers would fight.
            if !created_by_draguard(&secret) {
                return Err(CertError::NotOurs {
                    secret: self.secret_ref(),
                    reason: verdict.reason().to_owned(),
                });
            }
            let mut updated = secret;
            // The resourceVersion read above makes the write conditional:
            // if another replica renewed meanwhile, ours is refused.
            // The type cannot change; a Secret made without one gets ours.
            updated.type_.get_or_insert_with(|| SECRET_TYPE.to_owned());
            updated.data = Some(bundle.to_data());
            updated.string_data = None;
            match self
                .secrets
                .replace(&self.settings.secret, &PostParams::default(), &updated)
                .await
            {
                Ok(_) => {
                    let action = match &verdict {
                        SecretAction::RotateCa(_) => "rotated the webhook CA",
                        SecretAction::RenewServing(_) => "renewed the webhook serving certificate",
                        SecretAction::Regenerate(_) => "regenerated the webhook CA and certificate",
                        SecretAction::Keep => "rewrote the webhook certificate",
                    };
                    tracing::info!(secret = %self.secret_ref(), reason = verdict.reason(), "{action}");
                    return Ok(bundle);
                }
                Err(kube::Error::Api(status)) if status.is_conflict() => {
                    tracing::info!(secret = %self.secret_ref(), "another replica changed the webhook certificate first; using theirs");
                }
                Err(e) => return Err(self.api_error("cannot update")(e)),
            }
        }
        Err(CertError::Contended(format!("Secret {}", self.secret_ref())))
    }

    fn new_secret(&self, bundle: &Bundle) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(self.settings.secret.clone()),
                namespace: Some(self.settings.namespace.clone()),
                labels: Some(BTreeMap::from([(MANAGED_BY.to_owned(), "draguard".to_owned())])),
                ..ObjectMeta::default()
            },
            type_: Some(SECRET_TYPE.to_owned()),
            data: Some(bundle.to_data()),
            ..Secret::default()
        }
    }

    /// The entries of both configurations (`None` for one that is absent).
    async fn read_configs(&self) -> Result<[Option<Vec<WebhookEntry>>; 2], CertError> {
        let name = &self.settings.webhook_config;
        let failed = |kind: &str| {
            let what = format!("cannot read {kind} {name}");
            move |source| CertError::Api { what, source }
        };
        let mutating = self.mutating.get_opt(name).await.map_err(failed(MUTATING))?;
        let validating = self.validating.get_opt(name).await.map_err(failed(VALIDATING))?;
        Ok([
            mutating.as_ref().map(mutating_entries),
            validating.as_ref().map(validating_entries),
        ])
    }

    fn plans(&self, configs: &[Option<Vec<WebhookEntry>>; 2], ca: &str) -> [Option<CaBundlePlan>; 2] {
        let (ns, svc) = (&self.settings.namespace, &self.settings.service);
        [
            configs[0].as_ref().map(|e| ca_bundle_plan(e, ns, svc, ca.as_bytes())),
            configs[1].as_ref().map(|e| ca_bundle_plan(e, ns, svc, ca.as_bytes())),
        ]
    }

    /// Puts the Secret's `ca.crt` into every entry of both configurations
    /// that calls our service. `Ok` once at least one such entry exists and
    /// all have it.
    ///
    /// Before writing, the Secret is read again (after the configurations):
    /// another replica may have rotated the CA and put the new one in
    /// `caBundle` since we last read it, and we must not put the old back.
    async fn ensure_ca_bundle(&mut self) -> Result<(), CertError> {
        for _ in 0..RACE_RETRIES {
            match self.try_ca_bundle().await {
                // A `test` op failed: someone changed the configuration
                // between our read and our patch. Read it again.
                Err(CertError::Api {
                    source: kube::Error::Api(status),
                    ..
                }) if status.is_invalid() => {
                    tracing::debug!("caBundle changed while we patched it; reading it again");
                }
                done => return done,
            }
        }
        Err(CertError::Contended(format!(
            "webhook configurations {}",
            self.settings.webhook_config
        )))
    }

    async fn try_ca_bundle(&mut self) -> Result<(), CertError> {
        let Some(mut ca) = self.desired.as_ref().map(|d| d.ca_cert.clone()) else {
            return Ok(());
        };
        let configs = self.read_configs().await?;
        self.seen = configs.clone();
        let mut plans = self.plans(&configs, &ca);
        if plans.iter().flatten().any(|p| !p.ops.is_empty()) {
            let fresh = self.ensure_secret().await?;
            self.secret_read_at = Some(Instant::now());
            ca = fresh.ca_cert.clone();
            self.desired = Some(fresh);
            plans = self.plans(&configs, &ca);
        }
        let name = &self.settings.webhook_config;
        let mut ours = 0;
        for (i, (kind, plan)) in [MUTATING, VALIDATING].into_iter().zip(plans).enumerate() {
            let Some(plan) = plan else {
                tracing::debug!(kind, name, "no such webhook configuration to patch");
                continue;
            };
            ours += plan.ours;
            if plan.ops.is_empty() {
                continue;
            }
            let failed = |source| CertError::Api {
                what: format!("cannot patch caBundle into {kind} {name}"),
                source,
            };
            let patch: json_patch::Patch =
                serde_json::from_value(Value::Array(plan.ops)).map_err(|e| failed(kube::Error::SerdeError(e)))?;
            let patch = Patch::Json::<()>(patch);
            let written = if kind == MUTATING {
                let patched = self.mutating.patch(name, &PatchParams::default(), &patch).await;
                patched.map(|config| mutating_entries(&config))
            } else {
                let patched = self.validating.patch(name, &PatchParams::default(), &patch).await;
                patched.map(|config| validating_entries(&config))
            };
            // The answer is the configuration as stored: `/readyz` follows
            // it at once, without waiting for the watch to echo it.
            self.seen[i] = Some(written.map_err(failed)?);
            tracing::info!(kind, name, "put the webhook CA into caBundle");
        }
        if ours == 0 {
            return Err(CertError::NoWebhook {
                config: name.clone(),
                namespace: self.settings.namespace.clone(),
                service: self.settings.service.clone(),
            });
        }
        self.in_ca_bundle = Some(ca);
        Ok(())
    }

    /// One pass: the Secret (when due: at first, then every
    /// `secret_every`), then `caBundle`, then the certificate served.
    pub async fn sync(&mut self) -> Result<(), CertError> {
        let due = self
            .secret_read_at
            .is_none_or(|at| at.elapsed() >= self.settings.secret_every);
        if due {
            self.desired = Some(self.ensure_secret().await?);
            self.secret_read_at = Some(Instant::now());
        }
        let bundle_result = self.ensure_ca_bundle().await;
        let served = match self.desired.clone() {
            Some(desired) => self.serve(&desired),
            None => Ok(()),
        };
        self.publish();
        served?;
        bundle_result
    }

    /// Judges what was last seen of the configurations against what is
    /// served, for `/readyz`, and logs when the verdict turns.
    fn publish(&self) {
        let verdict = match &self.served {
            Some(served) => ca_bundle_trust(
                &self.seen,
                &self.settings,
                &served.tls_cert,
                jiff::Timestamp::now().as_second(),
            ),
            None => Err("the webhook certificate is not served yet".to_owned()),
        };
        let mut trust = self.trust.lock().unwrap_or_else(PoisonError::into_inner);
        if *trust == verdict {
            return;
        }
        match (&*trust, &verdict) {
            (_, Ok(())) => tracing::info!("every webhook caBundle trusts the served certificate"),
            (Ok(()), Err(reason)) => tracing::warn!(
                reason = reason.as_str(),
                "a webhook caBundle does not trust the served certificate: /readyz fails until it is repaired"
            ),
            (Err(_), Err(reason)) => tracing::debug!(reason = reason.as_str(), "webhook caBundle not trusted yet"),
        }
        *trust = verdict;
    }

    /// Takes in what the watch saw; `true` when that configuration needs
    /// the CA put back.
    fn observe(&mut self, seen: Seen) -> bool {
        let i = seen.kind.index();
        self.seen[i] = seen.entries;
        self.publish();
        let (Some(desired), Some(entries)) = (&self.desired, &self.seen[i]) else {
            return false;
        };
        let (ns, svc) = (&self.settings.namespace, &self.settings.service);
        let plan = ca_bundle_plan(entries, ns, svc, desired.ca_cert.as_bytes());
        if !plan.ops.is_empty() {
            tracing::info!(
                kind = seen.kind.name(),
                name = %self.settings.webhook_config,
                "caBundle changed under us; putting the webhook CA back"
            );
        }
        !plan.ops.is_empty()
    }

    /// Serves `desired` unless it comes from a CA that `caBundle` does not
    /// hold yet while we still serve something else.
    fn serve(&mut self, desired: &Bundle) -> Result<(), CertError> {
        if self.served.as_ref() == Some(desired) {
            return Ok(());
        }
        let same_ca = self
            .served
            .as_ref()
            .is_some_and(|served| served.signing_ca() == desired.signing_ca());
        let trusted = self.in_ca_bundle.as_deref() == Some(desired.ca_cert.as_str());
        if self.served.is_some() && !same_ca && !trusted {
            tracing::info!("waiting for caBundle to hold the new CA before serving its certificate");
            return Ok(());
        }
        self.cert
            .install(desired.tls_cert.as_bytes(), desired.tls_key.as_bytes())
            .map_err(|e| CertError::Serve {
                secret: self.secret_ref(),
                reason: e.to_string(),
            })?;
        let first = self.served.is_none();
        self.served = Some(desired.clone());
        if first {
            tracing::info!(secret = %self.secret_ref(), "serving the webhook certificate");
        } else {
            tracing::info!(secret = %self.secret_ref(), "serving the renewed webhook certificate");
        }
        Ok(())
    }

    /// Runs forever: the Secret every `secret_every`, `caBundle` every
    /// `ca_bundle_every` and whenever the watch of the configurations sees
    /// it changed from the CA (at most once per [`REPAIR_AT_MOST_EVERY`]);
    /// after a failure, again after a backoff (1 s doubling to
    /// `ca_bundle_every`). Failures are logged as the watches' are
    /// (`ErrorLog`): the first, then at most one line a minute with how
    /// many were left out, and a line when it works again.
    pub async fn run(mut self) {
        let changes = webhook_config_watch::changes(
            self.mutating.clone(),
            self.validating.clone(),
            &self.settings.webhook_config,
        );
        futures::pin_mut!(changes);
        let mut watching = true;
        let mut failures: u32 = 0;
        let mut log = ErrorLog::new(ERROR_LINE_EVERY);
        loop {
            let synced_at = tokio::time::Instant::now();
            let delay = match self.sync().await {
                Ok(()) => {
                    if let Some(errors) = log.succeeded() {
                        tracing::info!(failures = errors, "webhook certificate sync works again");
                    }
                    failures = 0;
                    self.settings.ca_bundle_every
                }
                Err(e) => {
                    failures = failures.saturating_add(1);
                    let delay = backoff(failures, self.settings.ca_bundle_every);
                    match log.failed(Instant::now()) {
                        ErrorLineAction::Log { suppressed } => tracing::warn!(
                            error = %e,
                            failures,
                            suppressed,
                            retry_in = ?delay,
                            "webhook certificate sync failed (at most one line a minute; `suppressed` failures since the last)"
                        ),
                        ErrorLineAction::Quiet => {
                            tracing::debug!(error = %e, failures, retry_in = ?delay, "webhook certificate sync failed")
                        }
                    }
                    delay
                }
            };
            // Until the next check is due, or the watch sees a caBundle
            // that needs the CA back.
            let next_check = tokio::time::sleep(delay);
            futures::pin_mut!(next_check);
            loop {
                tokio::select! {
                    () = &mut next_check => break,
                    seen = changes.next(), if watching => match seen {
                        Some(seen) => {
                            if self.observe(seen) {
                                tokio::time::sleep_until(synced_at + REPAIR_AT_MOST_EVERY).await;
                                break;
                            }
                        }
                        // The watcher never ends; were it to, the periodic
                        // check is left.
                        None => watching = false,
                    },
                }
            }
        }
    }
}

/// 1 s, 2 s, 4 s … up to `max` (at least 1 s).
pub fn backoff(failures: u32, max: Duration) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    Duration::from_secs(1u64 << exp).min(max.max(Duration::from_secs(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 24 * 3600;

    fn settings() -> CertSettings {
        CertSettings::new("draguard-tls", "draguard", "draguard", "draguard")
    }

    fn at(text: &str) -> jiff::Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn names_follow_the_service() {
        assert_eq!(
            settings().dns_names(),
            [
                "draguard",
                "draguard.draguard",
                "draguard.draguard.svc",
                "draguard.draguard.svc.cluster.local"
            ]
        );
    }

    #[test]
    fn namespace_defaults() {
        assert_eq!(default_namespace(Some("a"), Some("b")), "a");
        assert_eq!(default_namespace(Some(" "), Some("b\n")), "b");
        assert_eq!(default_namespace(None, None), "draguard");
    }

    #[test]
    fn renewal_window() {
        let year = Validity {
            not_before: 0,
            not_after: 365 * DAY,
        };
        // A third of a year remains from day 244 on (365 - 121.67).
        assert!(!year.needs_renewal(243 * DAY));
        assert!(year.needs_renewal(244 * DAY));
        let short = Validity {
            not_before: 0,
            not_after: 60 * DAY,
        };
        // 30 days beat a third of 60.
        assert!(!short.needs_renewal(29 * DAY));
        assert!(short.needs_renewal(30 * DAY));
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let max = Duration::from_secs(60);
        let delays: Vec<u64> = (1..=8).map(|n| backoff(n, max).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff(u32::MAX, max), max);
    }

    #[test]
    fn a_fresh_bundle_is_kept_and_verifies() {
        let names = settings().dns_names();
        let now = at("2026-11-23T08:00:00Z");
        let bundle = generate(&names, now).unwrap();
        assert_eq!(assess(&bundle.to_data(), &names, now.as_second()), SecretAction::Keep);
        let ca = parse_certs(&bundle.ca_cert).unwrap();
        let leaf = parse_certs(&bundle.tls_cert).unwrap();
        verify(&ca[0], &leaf[0], &[], &names, now.as_second()).unwrap();
        let serving = validity(&leaf[0]).unwrap();
        assert_eq!(serving.not_after - serving.not_before, 366 * DAY);
        let ca = validity(&ca[0]).unwrap();
        assert_eq!(ca.not_after - ca.not_before, 3651 * DAY);
    }

    #[test]
    fn an_aging_serving_certificate_is_renewed_from_the_same_ca() {
        let names = settings().dns_names();
        let then = at("2026-01-01T00:00:00Z");
        let old = generate(&names, then).unwrap();
        let now = at("2026-10-01T00:00:00Z");
        let verdict = assess(&old.to_data(), &names, now.as_second());
        assert!(matches!(verdict, SecretAction::RenewServing(_)), "{verdict:?}");
        let new = renew(&old.to_data(), &verdict, &names, now).unwrap().unwrap();
        assert_eq!(new.ca_cert, old.ca_cert);
        assert_eq!(new.ca_key, old.ca_key);
        assert_ne!(new.tls_cert, old.tls_cert);
        assert_eq!(assess(&new.to_data(), &names, now.as_second()), SecretAction::Keep);
    }

    #[test]
    fn other_names_or_a_foreign_key_renew_the_serving_certificate() {
        let names = settings().dns_names();
        let now = at("2026-11-23T08:00:00Z");
        let bundle = generate(&names, now).unwrap();
        let moved = CertSettings::new("s", "elsewhere", "draguard", "draguard").dns_names();
        assert!(matches!(
            assess(&bundle.to_data(), &moved, now.as_second()),
            SecretAction::RenewServing(r) if r.contains("draguard.elsewhere")
        ));
        let other = generate(&names, now).unwrap();
        let mut mixed = bundle.clone();
        mixed.tls_key = other.tls_key.clone();
        assert!(matches!(
            assess(&mixed.to_data(), &names, now.as_second()),
            SecretAction::RenewServing(r) if r.contains("does not belong")
        ));
        // Signed by another CA.
        let mut foreign = bundle;
        foreign.tls_cert = other.tls_cert;
        foreign.tls_key = other.tls_key;
        assert!(matches!(
            assess(&foreign.to_data(), &names, now.as_second()),
            SecretAction::RenewServing(_)
        ));
    }

    #[test]
    fn garbage_or_a_missing_key_regenerates() {
        let names = settings().dns_names();
        let now = at("2026-11-23T08:00:00Z");
        let bundle = generate(&names, now).unwrap();
        let mut data = bundle.to_data();
        data.remove(CA_KEY);
        let verdict = assess(&data, &names, now.as_second());
        assert_eq!(verdict, SecretAction::Regenerate("no ca.key".into()));
        let mut data = bundle.to_data();
        data.insert(
            CA_CERT.into(),
            ByteString(b"-----BEGIN CERTIFICATE-----\nAAAA\n".to_vec()),
        );
        assert!(matches!(
            assess(&data, &names, now.as_second()),
            SecretAction::Regenerate(_)
        ));
        let mut data = bundle.to_data();
        data.insert(CA_KEY.into(), ByteString(vec![0xff, 0xfe]));
        let verdict = assess(&data, &names, now.as_second());
        assert!(matches!(verdict, SecretAction::Regenerate(_)));
        let new = renew(&data, &verdict, &names, now).unwrap().unwrap();
        assert_ne!(new.ca_cert, bundle.ca_cert);
        assert_eq!(assess(&new.to_data(), &names, now.as_second()), SecretAction::Keep);
        // The serving certificate is not a CA.
        let mut data = bundle.to_data();
        data.insert(CA_CERT.into(), ByteString(bundle.tls_cert.clone().into_bytes()));
        data.insert(CA_KEY.into(), ByteString(bundle.tls_key.clone().into_bytes()));
        assert!(
            matches!(assess(&data, &names, now.as_second()), SecretAction::Regenerate(r) if r.contains("not a CA"))
        );
    }

    #[test]
    fn an_aging_ca_is_rotated_and_the_old_one_stays_trusted() {
        let names = settings().dns_names();
        let then = at("2020-01-01T00:00:00Z");
        let old = generate(&names, then).unwrap();
        let now = at("2027-01-01T00:00:00Z");
        let verdict = assess(&old.to_data(), &names, now.as_second());
        assert!(matches!(verdict, SecretAction::RotateCa(_)), "{verdict:?}");
        let new = renew(&old.to_data(), &verdict, &names, now).unwrap().unwrap();
        let cas = parse_certs(&new.ca_cert).unwrap();
        assert_eq!(cas.len(), 2, "new CA, then the old one");
        assert_eq!(to_pem(&cas[1]), old.ca_cert);
        assert_ne!(new.ca_key, old.ca_key);
        let leaf = parse_certs(&new.tls_cert).unwrap();
        verify(&cas[0], &leaf[0], &[], &names, now.as_second()).unwrap();
        assert_eq!(assess(&new.to_data(), &names, now.as_second()), SecretAction::Keep);
        // The old one goes once it has expired.
        let later = at("2030-06-01T00:00:00Z");
        assert_eq!(retain_unexpired(&new.ca_cert, later.as_second()), to_pem(&cas[0]));
    }

    #[test]
    fn an_expired_ca_regenerates() {
        let names = settings().dns_names();
        let old = generate(&names, at("2010-01-01T00:00:00Z")).unwrap();
        let now = at("2026-11-23T08:00:00Z");
        assert!(matches!(
            assess(&old.to_data(), &names, now.as_second()),
            SecretAction::Regenerate(r) if r.contains("expired")
        ));
    }

    #[test]
    fn the_serving_certificate_never_outlives_its_ca() {
        let names = settings().dns_names();
        let ca = generate(&names, at("2017-01-01T00:00:00Z")).unwrap();
        let now = at("2026-10-01T00:00:00Z");
        let (cert, _) = issue(&ca.ca_cert, &ca.ca_key, &names, now).unwrap();
        let ca_until = validity(&parse_certs(&ca.ca_cert).unwrap()[0]).unwrap().not_after;
        let until = validity(&parse_certs(&cert).unwrap()[0]).unwrap().not_after;
        assert!(until <= ca_until);
    }

    fn entry(name: &str, service: Option<(&str, &str)>, ca: Option<&str>) -> WebhookEntry {
        WebhookEntry {
            name: name.into(),
            service: service.map(|(ns, n)| (ns.into(), n.into())),
            ca_bundle: ca.map(|c| c.as_bytes().to_vec()),
        }
    }

    #[test]
    fn the_patch_touches_only_our_entries_that_differ() {
        let entries = [
            entry("other.example", Some(("other", "draguard")), None),
            entry("mutate.draguard.dev", Some(("draguard", "draguard")), Some("")),
            entry("url.example", None, Some("x")),
            entry("done.draguard.dev", Some(("draguard", "draguard")), Some("CA")),
            entry("bare.draguard.dev", Some(("draguard", "draguard")), None),
        ];
        let plan = ca_bundle_plan(&entries, "draguard", "draguard", b"CA");
        assert_eq!(plan.ours, 3);
        assert_eq!(
            plan.ops,
            [
                json!({"op": "test", "path": "/webhooks/1/name", "value": "mutate.draguard.dev"}),
                json!({"op": "test", "path": "/webhooks/1/clientConfig/caBundle", "value": ""}),
                json!({"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "Q0E="}),
                json!({"op": "test", "path": "/webhooks/4/name", "value": "bare.draguard.dev"}),
                json!({"op": "add", "path": "/webhooks/4/clientConfig/caBundle", "value": "Q0E="}),
            ]
        );
        // The ops parse as a JSON patch and do what they say.
        let mut doc = json!({"webhooks": [
            {"name": "other.example", "clientConfig": {}},
            {"name": "mutate.draguard.dev", "clientConfig": {"caBundle": ""}},
            {"name": "url.example", "clientConfig": {"caBundle": "eA=="}},
            {"name": "done.draguard.dev", "clientConfig": {"caBundle": "Q0E="}},
            {"name": "bare.draguard.dev", "clientConfig": {}},
        ]});
        let before = doc.clone();
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(plan.ops.clone())).unwrap();
        json_patch::patch(&mut doc, &patch).unwrap();
        for i in 0..5 {
            let expected = if i == 1 || i == 4 {
                json!("Q0E=")
            } else {
                before["webhooks"][i]["clientConfig"]["caBundle"].clone()
            };
            assert_eq!(doc["webhooks"][i]["clientConfig"]["caBundle"], expected, "entry {i}");
        }
        // Reordered meanwhile: the name test fails, nothing is written.
        let mut reordered = before.clone();
        reordered["webhooks"].as_array_mut().unwrap().swap(0, 1);
        assert!(json_patch::patch(&mut reordered, &patch).is_err());
        let done = ca_bundle_plan(&entries[3..4], "draguard", "draguard", b"CA");
        assert_eq!((done.ours, done.ops.len()), (1, 0), "nothing to write twice");
        // A caBundle changed since it was read fails the patch.
        let mut doc = json!({"webhooks": [{}, {"name": "mutate.draguard.dev", "clientConfig": {"caBundle": "TkVX"}}]});
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(plan.ops[..3].to_vec())).unwrap();
        assert!(json_patch::patch(&mut doc, &patch).is_err());
    }

    #[test]
    fn ca_bundle_trust_follows_what_the_apiserver_would_accept() {
        let settings = settings();
        let names = settings.dns_names();
        let now = at("2026-11-23T08:00:00Z");
        let served = generate(&names, now).unwrap();
        let other = generate(&names, now).unwrap();
        let ours = |ca: Option<&str>| entry("mutate.draguard.dev", Some(("draguard", "draguard")), ca);
        let foreign = entry("other.example", Some(("other", "draguard")), Some("junk"));
        let judge = |configs: [Option<Vec<WebhookEntry>>; 2]| {
            ca_bundle_trust(&configs, &settings, &served.tls_cert, now.as_second())
        };
        assert_eq!(
            judge([Some(vec![foreign.clone(), ours(Some(&served.ca_cert))]), None]),
            Ok(())
        );
        // During a rotation caBundle holds the new CA first, then the old.
        let both = format!("{}{}", other.ca_cert, served.ca_cert);
        assert_eq!(judge([Some(vec![ours(Some(&both))]), Some(vec![])]), Ok(()));
        assert_eq!(
            judge([Some(vec![ours(Some(&served.ca_cert))]), Some(vec![ours(None)])]),
            Err("ValidatingWebhookConfiguration draguard: webhook mutate.draguard.dev has no caBundle".into())
        );
        assert_eq!(
            judge([Some(vec![ours(Some(""))]), None]),
            Err("MutatingWebhookConfiguration draguard: webhook mutate.draguard.dev has no caBundle".into())
        );
        let untrusted = Err(
            "MutatingWebhookConfiguration draguard: the caBundle of webhook mutate.draguard.dev does not trust the served certificate"
                .into(),
        );
        assert_eq!(judge([Some(vec![ours(Some(&other.ca_cert))]), None]), untrusted);
        assert_eq!(judge([Some(vec![ours(Some("not PEM"))]), None]), untrusted);
        assert_eq!(
            judge([Some(vec![foreign]), None]),
            Err("neither MutatingWebhookConfiguration nor ValidatingWebhookConfiguration draguard has a webhook calling service draguard/draguard".into())
        );
        // Expired: the apiserver would refuse it too.
        let later = at("2040-01-01T00:00:00Z").as_second();
        let configs = [Some(vec![ours(Some(&served.ca_cert))]), None];
        assert_eq!(ca_bundle_trust(&configs, &settings, &served.tls_cert, later), untrusted);
    }

    /// Every way the Secret's contents are judged unusable, as the reason
    /// the renewal is logged with.
    #[test]
    fn cert_check_error_messages() {
        let names = settings().dns_names();
        let now = at("2026-11-23T08:00:00Z");
        let good = generate(&names, now).unwrap();
        let other = generate(&names, now).unwrap();
        let with = |change: &dyn Fn(&mut Bundle)| {
            let mut b = good.clone();
            change(&mut b);
            b
        };
        let ca = parse_certs(&good.ca_cert).unwrap();
        let leaf = parse_certs(&good.tls_cert).unwrap();
        let later = at("2040-01-01T00:00:00Z").as_second();
        let cases: Vec<(Result<(), CertCheckError>, &str)> = vec![
            (
                check_ca(&with(&|b| b.ca_cert = String::new()), now.as_second()).map(drop),
                "no CERTIFICATE block",
            ),
            (
                check_ca(
                    &with(&|b| b.ca_cert = "-----BEGIN CERTIFICATE-----\nAAAA\n".into()),
                    now.as_second(),
                )
                .map(drop),
                "not PEM certificates: missing section end marker: [67, 69, 82, 84, 73, 70, 73, 67, 65, 84, 69]",
            ),
            (
                check_ca(&with(&|b| b.ca_key = other.ca_key.clone()), now.as_second()).map(drop),
                "the key does not belong to the certificate",
            ),
            (
                check_ca(&with(&|b| b.ca_key = "junk".into()), now.as_second()).map(drop),
                "not a PEM private key: PEM error: malformedframing",
            ),
            (
                check_ca(
                    &with(&|b| {
                        b.ca_cert = good.tls_cert.clone();
                        b.ca_key = good.tls_key.clone();
                    }),
                    now.as_second(),
                )
                .map(drop),
                "the first certificate of ca.crt is not a CA",
            ),
            (check_ca(&good, later).map(drop), "expired at 2036-11-20T00:00:00Z"),
            (
                check_serving(&with(&|b| b.tls_cert = String::new()), &names, now.as_second()).map(drop),
                "tls.crt: no CERTIFICATE block",
            ),
            (
                check_serving(&with(&|b| b.tls_key = other.tls_key.clone()), &names, now.as_second()).map(drop),
                "tls.key: the key does not belong to the certificate",
            ),
            (
                check_serving(&with(&|b| b.ca_cert = String::new()), &names, now.as_second()).map(drop),
                "ca.crt: no certificate",
            ),
            (
                check_serving(&good, &["elsewhere.example".into()], now.as_second()).map(drop),
                "the certificate does not serve elsewhere.example: invalid peer certificate: certificate not valid for name \"elsewhere.example\"; certificate is only valid for DnsName(\"draguard\"), DnsName(\"draguard.draguard\"), DnsName(\"draguard.draguard.svc\") or DnsName(\"draguard.draguard.svc.cluster.local\")",
            ),
            (
                verify(&ca[0], &leaf[0], &[], &["not a name!".into()], now.as_second()),
                "not a name!: invalid dns name",
            ),
            (
                verify(
                    &CertificateDer::from(vec![1, 2, 3]),
                    &leaf[0],
                    &[],
                    &names,
                    now.as_second(),
                ),
                "ca.crt: invalid peer certificate: BadEncoding",
            ),
        ];
        for (result, message) in cases {
            assert_eq!(result.expect_err("refused").to_string(), message);
        }
        let bundle_cases = [
            (CA_KEY, BundleError::Missing(CA_KEY), "no ca.key"),
            (TLS_CERT, BundleError::NotText(TLS_CERT), "tls.crt is not PEM text"),
        ];
        for (key, error, message) in bundle_cases {
            let mut data = good.to_data();
            match &error {
                BundleError::Missing(_) => drop(data.remove(key)),
                BundleError::NotText(_) => drop(data.insert(key.into(), ByteString(vec![0xff]))),
            }
            assert_eq!(Bundle::from_data(&data), Err(error));
            assert_eq!(Bundle::from_data(&data).unwrap_err().to_string(), message);
        }
        let unusable = CertError::Unusable {
            secret: "draguard/draguard-tls".into(),
            source: BundleError::Missing(TLS_KEY),
        };
        assert_eq!(
            unusable.to_string(),
            "Secret draguard/draguard-tls holds no usable certificate: no tls.key"
        );
    }
}
