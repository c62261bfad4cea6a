//! The control plane's PKI, made with rcgen as the shared test bed's
//! pki.sh makes it with openssl: a CA; the apiserver's serving certificate
//! (127.0.0.1, localhost and the `kubernetes` Service names); client
//! certificates for an administrator (group `system:masters`), the
//! controller manager and a kubelet (`system:node:NAME`, group
//! `system:nodes`); the service-account signing key pair; and kubeconfigs
//! for each identity. ECDSA P-256 throughout (the apiserver takes it for
//! TLS and for service-account tokens, ES256).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

/// The node the kubelet identity is for.
pub const NODE: &str = "e2e-node";

pub struct Pki {
    pub dir: PathBuf,
    pub ca_pem: String,
}

/// A client identity: certificate and key, PEM.
pub struct Client {
    cert: String,
    key: String,
}

impl Pki {
    /// Writes every file into `dir`: `ca.crt`, `apiserver.{crt,key}`,
    /// `sa.{key,pub}`, and one kubeconfig per identity (`admin`, `kcm`,
    /// `kubelet`) for the apiserver at `https://127.0.0.1:{port}`.
    pub fn create(dir: &Path, apiserver_port: u16) -> Pki {
        std::fs::create_dir_all(dir).expect("pki folder");
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::default();
        ca.distinguished_name.push(DnType::CommonName, "e2e-cluster-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_pem = ca.self_signed(&ca_key).expect("CA certificate").pem();
        let issuer = Issuer::new(ca, ca_key);
        let pki = Pki {
            dir: dir.to_owned(),
            ca_pem,
        };
        pki.write("ca.crt", &pki.ca_pem);

        let names = [
            "127.0.0.1",
            "localhost",
            "10.0.0.1",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
        ];
        let serving = sign(
            &issuer,
            &names.map(str::to_owned),
            "kube-apiserver",
            None,
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        pki.write("apiserver.crt", &serving.cert);
        pki.write("apiserver.key", &serving.key);

        let sa = KeyPair::generate().expect("service-account key");
        pki.write("sa.key", &sa.serialize_pem());
        pki.write("sa.pub", &sa.public_key_pem());

        let server = format!("https://127.0.0.1:{apiserver_port}");
        let client = |cn: &str, org: Option<&str>| sign(&issuer, &[], cn, org, ExtendedKeyUsagePurpose::ClientAuth);
        pki.kubeconfig("admin", &server, &client("kubernetes-admin", Some("system:masters")));
        pki.kubeconfig("kcm", &server, &client("system:kube-controller-manager", None));
        pki.kubeconfig(
            "kubelet",
            &server,
            &client(&format!("system:node:{NODE}"), Some("system:nodes")),
        );
        pki
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The kubeconfig of identity `name` (admin, kcm, kubelet).
    pub fn kubeconfig_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.kubeconfig"))
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.dir.join(name), text).unwrap_or_else(|e| panic!("{name}: {e}"));
    }

    fn kubeconfig(&self, name: &str, server: &str, client: &Client) {
        let user = format!(
            "client-certificate-data: {}\n    client-key-data: {}",
            b64(&client.cert),
            b64(&client.key)
        );
        self.write(&format!("{name}.kubeconfig"), &kubeconfig(server, &self.ca_pem, &user));
    }
}

/// A kubeconfig for `server`, trusting `ca_pem`, with `user_fields` (YAML
/// of the `user:` map, indented by four spaces after the first line).
pub fn kubeconfig(server: &str, ca_pem: &str, user_fields: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {server}\n    \
         certificate-authority-data: {}\ncontexts:\n- name: e2e\n  context: {{cluster: e2e, user: e2e}}\n\
         current-context: e2e\nusers:\n- name: e2e\n  user:\n    {user_fields}\n",
        b64(ca_pem)
    )
}

/// A kubeconfig that authenticates with a bearer token.
pub fn token_kubeconfig(server: &str, ca_pem: &str, token: &str) -> String {
    kubeconfig(server, ca_pem, &format!("token: {token}"))
}

fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn sign(
    issuer: &Issuer<'_, KeyPair>,
    names: &[String],
    common_name: &str,
    organization: Option<&str>,
    usage: ExtendedKeyUsagePurpose,
) -> Client {
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(names.to_vec()).expect("names");
    if let Some(org) = organization {
        params.distinguished_name.push(DnType::OrganizationName, org);
    }
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![usage];
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, issuer).expect("signed certificate");
    Client {
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}
