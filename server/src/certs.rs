//! Throw-away certificates for TLS tests ([`crate::Builder::tls`]): a CA,
//! a server certificate for 127.0.0.1, ::1 and localhost, and a client
//! certificate, both signed by the CA, as PEM text and as files in a temp
//! directory of their own (removed on drop), since the `tls-*` directives
//! and tools such as `redis-cli --tls` take file names.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The names the server certificate is valid for: where an embedded server listens.
const SERVER_NAMES: [&str; 3] = ["127.0.0.1", "::1", "localhost"];

/// Tells apart the directories of certificates made by one process.
static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

/// A CA and the certificates it signed, written to files (see the module docs).
pub struct TestCertificates {
    /// The CA certificate a client trusts (PEM).
    pub ca_cert_pem: String,
    /// The server's certificate (PEM), for 127.0.0.1, ::1 and localhost.
    pub server_cert_pem: String,
    /// Its private key (PKCS#8 PEM).
    pub server_key_pem: String,
    /// A client certificate the CA signed, for `tls-auth-clients yes`.
    pub client_cert_pem: String,
    /// The client certificate's private key.
    pub client_key_pem: String,
    /// Signs further certificates ([`TestCertificates::client_certificate`]).
    issuer: Issuer<'static, KeyPair>,
    dir: PathBuf,
}

impl std::fmt::Debug for TestCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCertificates").field("dir", &self.dir).finish()
    }
}

/// File names inside [`TestCertificates::dir`].
const CA_CERT: &str = "ca.crt";
const SERVER_CERT: &str = "server.crt";
const SERVER_KEY: &str = "server.key";
const CLIENT_CERT: &str = "client.crt";
const CLIENT_KEY: &str = "client.key";

fn other(e: rcgen::Error) -> io::Error {
    io::Error::other(e.to_string())
}

impl TestCertificates {
    /// Makes a fresh CA, server and client certificate and writes them to
    /// a new directory under the system's temp dir.
    pub fn generate() -> io::Result<TestCertificates> {
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(other)?;
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, "coordis test CA");
        ca.distinguished_name = name;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().map_err(other)?;
        let ca_cert = ca.self_signed(&ca_key).map_err(other)?;
        let issuer = Issuer::new(ca, ca_key);

        let mut server = CertificateParams::new(SERVER_NAMES.map(String::from).to_vec()).map_err(other)?;
        server
            .distinguished_name
            .push(DnType::CommonName, "coordis test server");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate().map_err(other)?;
        let server_cert = server.signed_by(&server_key, &issuer).map_err(other)?;

        let dir = std::env::temp_dir().join(format!(
            "coordis-tls-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        let mut certs = TestCertificates {
            ca_cert_pem: ca_cert.pem(),
            server_cert_pem: server_cert.pem(),
            server_key_pem: server_key.serialize_pem(),
            client_cert_pem: String::new(),
            client_key_pem: String::new(),
            issuer,
            dir,
        };
        (certs.client_cert_pem, certs.client_key_pem) = certs.client_certificate("coordis test client", false)?;
        if certs.dir.exists() {
            fs::remove_dir_all(&certs.dir)?;
        }
        fs::create_dir_all(&certs.dir)?;
        for (file, pem) in [
            (CA_CERT, &certs.ca_cert_pem),
            (SERVER_CERT, &certs.server_cert_pem),
            (SERVER_KEY, &certs.server_key_pem),
            (CLIENT_CERT, &certs.client_cert_pem),
            (CLIENT_KEY, &certs.client_key_pem),
        ] {
            fs::write(certs.dir.join(file), pem)?;
        }
        Ok(certs)
    }

    /// Another client certificate (PEM certificate and key) the CA signs
    /// for `common_name`; `expired`: valid only in the past.
    pub fn client_certificate(&self, common_name: &str, expired: bool) -> io::Result<(String, String)> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(other)?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        let key = KeyPair::generate().map_err(other)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(other)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// The directory of the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA certificate's file (`tls-ca-cert-file`, `redis-cli --cacert`).
    pub fn ca_cert_file(&self) -> PathBuf {
        self.dir.join(CA_CERT)
    }

    /// The server certificate's file (`tls-cert-file`).
    pub fn server_cert_file(&self) -> PathBuf {
        self.dir.join(SERVER_CERT)
    }

    /// The server key's file (`tls-key-file`).
    pub fn server_key_file(&self) -> PathBuf {
        self.dir.join(SERVER_KEY)
    }

    /// The client certificate's file (`redis-cli --cert`).
    pub fn client_cert_file(&self) -> PathBuf {
        self.dir.join(CLIENT_CERT)
    }

    /// The client key's file (`redis-cli --key`).
    pub fn client_key_file(&self) -> PathBuf {
        self.dir.join(CLIENT_KEY)
    }
}

impl Drop for TestCertificates {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}
