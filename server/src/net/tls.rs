//! TLS for client connections and the links' client side: the rustls
//! configuration Redis's `tlsConfigure` builds from the `tls-*` directives
//! (ring provider, no OpenSSL), and the state the accept loops read it
//! from.
//!
//! What maps onto rustls and what does not:
//! - `tls-protocols`: TLSv1.2 and TLSv1.3 (rustls has nothing older). A
//!   list naming only `TLSv1`/`TLSv1.1` is refused with Redis's
//!   "Invalid tls-protocols" line; empty is both.
//! - `tls-ciphers` (TLSv1.2, OpenSSL's cipher-list syntax): the names of
//!   rustls's six ECDHE-GCM/CHACHA20 suites are taken, `!name`/`-name`
//!   removes one, keywords (`DEFAULT`, `HIGH`, `ALL`, `ECDHE`, ...) select
//!   all six; other names are skipped, as OpenSSL skips names it lacks, and
//!   a list that selects none is refused as OpenSSL refuses it.
//! - `tls-ciphersuites` (TLSv1.3): OpenSSL's names of the three suites
//!   rustls has; any other name is refused (the CCM suites included).
//! - `tls-prefer-server-ciphers`: rustls's server order.
//! - `tls-session-caching`, `tls-session-cache-size`: a session cache of
//!   that size and TLSv1.3 tickets (as OpenSSL issues them); `no`: neither.
//!   `tls-session-cache-timeout` is kept, rustls's own lifetimes apply.
//! - `tls-dh-params-file`: read and checked as Redis loads it, unused:
//!   rustls offers only ECDHE key exchange.
//! - `tls-key-file-pass`: encrypted PKCS#8 (`BEGIN ENCRYPTED PRIVATE KEY`);
//!   the legacy OpenSSL `Proc-Type: 4,ENCRYPTED` PEM is not read.
//!
//! A configuration is built whole or not at all, so a failed CONFIG SET
//! leaves the one in use untouched.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedCipherSuite, SupportedProtocolVersion};
use tokio_rustls::TlsAcceptor;

use crate::config::TlsConfig;
use crate::errors::tls as text;

/// OpenSSL's size 0 means "no limit"; rustls's cache needs a bound.
const UNLIMITED_SESSION_CACHE: usize = 1 << 20;

/// OpenSSL's TLSv1.2 names of the suites rustls has, with the suite.
fn tls12_suites() -> [(&'static str, SupportedCipherSuite); 6] {
    use ring::cipher_suite as s;
    [
        (
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            s::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            s::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            s::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
        ("ECDHE-RSA-AES256-GCM-SHA384", s::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
        ("ECDHE-RSA-AES128-GCM-SHA256", s::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
        (
            "ECDHE-RSA-CHACHA20-POLY1305",
            s::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
    ]
}

/// OpenSSL's TLSv1.3 names of the suites rustls has, with the suite.
fn tls13_suites() -> [(&'static str, SupportedCipherSuite); 3] {
    use ring::cipher_suite as s;
    [
        ("TLS_AES_256_GCM_SHA384", s::TLS13_AES_256_GCM_SHA384),
        ("TLS_AES_128_GCM_SHA256", s::TLS13_AES_128_GCM_SHA256),
        ("TLS_CHACHA20_POLY1305_SHA256", s::TLS13_CHACHA20_POLY1305_SHA256),
    ]
}

/// OpenSSL cipher-list keywords that select every suite rustls has.
const CIPHER_KEYWORDS: &[&str] = &[
    "DEFAULT",
    "ALL",
    "HIGH",
    "ECDHE",
    "EECDH",
    "kECDHE",
    "AESGCM",
    "AES",
    "AES128",
    "AES256",
    "CHACHA20",
    "ECDSA",
    "aECDSA",
    "RSA",
    "aRSA",
    "SHA256",
    "SHA384",
    "TLSv1.2",
    "SECURE",
    "SUITEB128",
    "SUITEB192",
];

/// `tls-auth-clients`, as a connection reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum AuthClients {
    No = 0,
    Yes = 1,
    Optional = 2,
}

impl AuthClients {
    pub(crate) fn parse(text: &str) -> AuthClients {
        match text {
            "no" => AuthClients::No,
            "optional" => AuthClients::Optional,
            _ => AuthClients::Yes,
        }
    }
}

/// One built configuration.
pub(crate) struct Acceptors {
    /// Without client certificates (`tls-auth-clients no`).
    no_auth: Arc<ServerConfig>,
    /// Certificates verified when presented (`optional`) and required
    /// (`yes`); `None` without a CA, where Redis's handshakes fail for want
    /// of one to verify with.
    optional: Option<Arc<ServerConfig>>,
    required: Option<Arc<ServerConfig>>,
    /// What the replication and cluster links connect with (their issues'
    /// code): the CA to trust and the certificate to present.
    #[allow(dead_code)]
    pub(crate) client: Arc<ClientConfig>,
}

/// The TLS state connections read (in [`crate::state::Shared`]).
#[derive(Default)]
pub(crate) struct TlsState {
    current: RwLock<Option<Arc<Acceptors>>>,
    auth: AtomicU8,
}

impl std::fmt::Debug for TlsState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsState")
            .field("configured", &self.is_configured())
            .finish()
    }
}

impl TlsState {
    /// Whether a configuration was built (Redis's `isTlsConfigured`).
    pub(crate) fn is_configured(&self) -> bool {
        self.current.read().is_some()
    }

    pub(crate) fn install(&self, acceptors: Acceptors) {
        *self.current.write() = Some(Arc::new(acceptors));
    }

    pub(crate) fn set_auth(&self, mode: AuthClients) {
        self.auth.store(mode as u8, Ordering::Relaxed);
    }

    /// The acceptor for a connection accepted now; `None` when its
    /// handshake cannot succeed (not configured, or no CA to verify
    /// client certificates with).
    pub(crate) fn acceptor(&self) -> Option<TlsAcceptor> {
        let current = self.current.read();
        let acceptors = current.as_ref()?;
        let config = match self.auth.load(Ordering::Relaxed) {
            m if m == AuthClients::No as u8 => Some(&acceptors.no_auth),
            m if m == AuthClients::Optional as u8 => acceptors.optional.as_ref(),
            _ => acceptors.required.as_ref(),
        };
        config.map(|c| TlsAcceptor::from(c.clone()))
    }
}

/// Whether the settings ask for TLS anywhere (Redis: `tls_port ||
/// tls_replication || tls_cluster`).
pub(crate) fn wanted(c: &TlsConfig) -> bool {
    c.port != 0 || c.free_port || c.replication || c.cluster
}

/// Builds the configuration, or returns the line Redis logs for why not.
pub(crate) fn configure(c: &TlsConfig) -> Result<Acceptors, String> {
    if c.cert_file.is_empty() {
        return Err(text::NO_CERT.into());
    }
    if c.key_file.is_empty() {
        return Err(text::NO_KEY.into());
    }
    let auth = AuthClients::parse(&c.auth_clients);
    let no_ca = c.ca_cert_file.is_empty() && c.ca_cert_dir.is_empty();
    if (auth != AuthClients::No || c.cluster || c.replication) && no_ca {
        return Err(text::NO_CA.into());
    }
    let versions = protocols(&c.protocols)?;
    let provider = Arc::new(provider(c)?);
    let chain = load_certs(&c.cert_file).map_err(|why| text::cert(&c.cert_file, &why))?;
    let key = load_key(&c.key_file, &c.key_file_pass).map_err(|why| text::key(&c.key_file, &why))?;
    let roots = Arc::new(load_roots(c).map_err(|why| text::ca(&why))?);
    if !c.dh_params_file.is_empty() {
        check_dh_params(&c.dh_params_file)?;
    }
    let server = |verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>| {
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| text::ciphers(&format!("{} ({e})", c.ciphers)))?;
        let builder = match verifier {
            Some(v) => builder.with_client_cert_verifier(v),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| text::key(&c.key_file, &e.to_string()))?;
        config.ignore_client_order = c.prefer_server_ciphers;
        if c.session_caching {
            let size = if c.session_cache_size == 0 {
                UNLIMITED_SESSION_CACHE
            } else {
                c.session_cache_size
            };
            config.session_storage = ServerSessionMemoryCache::new(size);
            config.ticketer = ring::Ticketer::new().map_err(|e| e.to_string())?;
        } else {
            config.session_storage = Arc::new(NoServerSessionStorage {});
            config.send_tls13_tickets = 0;
        }
        Ok::<_, String>(Arc::new(config))
    };
    let verifier = |optional: bool| -> Result<Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>, String> {
        if roots.is_empty() {
            return Ok(None);
        }
        let builder = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone());
        let builder = if optional {
            builder.allow_unauthenticated()
        } else {
            builder
        };
        builder.build().map(Some).map_err(|e| text::ca(&e.to_string()))
    };
    let no_auth = server(None)?;
    let optional = verifier(true)?.map(|v| server(Some(v))).transpose()?;
    let required = verifier(false)?.map(|v| server(Some(v))).transpose()?;
    let client = client_config(c, provider, &versions, roots, chain, key)?;
    Ok(Acceptors {
        no_auth,
        optional,
        required,
        client,
    })
}

/// The links' side: Redis's client context presents `tls-client-cert-file`
/// when both it and its key are set, the server's certificate otherwise.
fn client_config(
    c: &TlsConfig,
    provider: Arc<CryptoProvider>,
    versions: &[&'static SupportedProtocolVersion],
    roots: Arc<RootCertStore>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<ClientConfig>, String> {
    let (chain, key) = if !c.client_cert_file.is_empty() && !c.client_key_file.is_empty() {
        (
            load_certs(&c.client_cert_file).map_err(|why| text::cert(&c.client_cert_file, &why))?,
            load_key(&c.client_key_file, &c.client_key_file_pass).map_err(|why| text::key(&c.client_key_file, &why))?,
        )
    } else {
        (chain, key)
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| text::key(&c.client_key_file, &e.to_string()))?;
    Ok(Arc::new(config))
}

/// `tls-protocols` as Redis's `parseProtocolsConfig` reads it (any case,
/// split on spaces), limited to what rustls speaks.
fn protocols(list: &str) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    if list.is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let mut versions = vec![];
    for word in list.split(' ') {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1" | "tlsv1.1" => {}
            "tlsv1.2" => versions.push(&rustls::version::TLS12),
            "tlsv1.3" => versions.push(&rustls::version::TLS13),
            _ => return Err(text::BAD_PROTOCOLS.into()),
        }
    }
    if versions.is_empty() {
        return Err(text::BAD_PROTOCOLS.into());
    }
    Ok(versions)
}

/// The ring provider with the suites `tls-ciphers` and `tls-ciphersuites` select.
fn provider(c: &TlsConfig) -> Result<CryptoProvider, String> {
    let mut suites = vec![];
    if c.ciphersuites.is_empty() {
        suites.extend(tls13_suites().map(|(_, s)| s));
    } else {
        for name in c.ciphersuites.split(':') {
            let found = tls13_suites().into_iter().find(|(n, _)| *n == name);
            match found {
                Some((_, suite)) => suites.push(suite),
                None => return Err(text::ciphersuites(&c.ciphersuites)),
            }
        }
    }
    if c.ciphers.is_empty() {
        suites.extend(tls12_suites().map(|(_, s)| s));
    } else {
        let mut chosen: Vec<SupportedCipherSuite> = vec![];
        for word in c.ciphers.split([':', ' ', ',']).filter(|w| !w.is_empty()) {
            let (remove, name) = match word.strip_prefix(['!', '-']) {
                Some(rest) => (true, rest),
                None => (false, word.trim_start_matches('+')),
            };
            let named: Vec<SupportedCipherSuite> = if CIPHER_KEYWORDS.contains(&name) {
                tls12_suites().map(|(_, s)| s).to_vec()
            } else {
                tls12_suites()
                    .into_iter()
                    .filter(|(n, _)| *n == name)
                    .map(|(_, s)| s)
                    .collect()
            };
            for suite in named {
                let at = chosen.iter().position(|s| s.suite() == suite.suite());
                match (remove, at) {
                    (true, Some(i)) => {
                        chosen.remove(i);
                    }
                    (false, None) => chosen.push(suite),
                    _ => {}
                }
            }
        }
        if chosen.is_empty() {
            return Err(text::ciphers(&c.ciphers));
        }
        suites.extend(chosen);
    }
    Ok(CryptoProvider {
        cipher_suites: suites,
        ..ring::default_provider()
    })
}

/// Every certificate of a PEM file (the chain, leaf first).
fn load_certs(file: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = fs::read(file).map_err(|e| e.to_string())?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("no certificate found".into());
    }
    Ok(certs)
}

/// A PEM private key: PKCS#8, PKCS#1 or SEC1, or encrypted PKCS#8 opened
/// with `pass`.
fn load_key(file: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    const ENCRYPTED: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    let bytes = fs::read(file).map_err(|e| e.to_string())?;
    let pem = String::from_utf8_lossy(&bytes);
    if let Some(at) = pem.find(ENCRYPTED) {
        let (_, doc) = pkcs8::Document::from_pem(&pem[at..]).map_err(|e| e.to_string())?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes()).map_err(|e| e.to_string())?;
        let plain = info
            .decrypt(pass.as_bytes())
            .map_err(|_| "bad decrypt (wrong tls-key-file-pass?)".to_string())?;
        return Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()));
    }
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| e.to_string())
}

/// The CA certificates of `tls-ca-cert-file` and of every file in
/// `tls-ca-cert-dir` (OpenSSL looks them up by hashed names there; every
/// PEM certificate in the directory is trusted here).
fn load_roots(c: &TlsConfig) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if !c.ca_cert_file.is_empty() {
        for cert in load_certs(&c.ca_cert_file).map_err(|why| format!("{}: {why}", c.ca_cert_file))? {
            roots.add(cert).map_err(|e| format!("{}: {e}", c.ca_cert_file))?;
        }
    }
    if !c.ca_cert_dir.is_empty() {
        let entries = fs::read_dir(Path::new(&c.ca_cert_dir)).map_err(|e| format!("{}: {e}", c.ca_cert_dir))?;
        for entry in entries.flatten() {
            let Ok(bytes) = fs::read(entry.path()) else { continue };
            for cert in CertificateDer::pem_slice_iter(&bytes).flatten() {
                let _ = roots.add(cert);
            }
        }
    }
    Ok(roots)
}

/// Redis loads `tls-dh-params-file` and refuses one it cannot read.
fn check_dh_params(file: &str) -> Result<(), String> {
    const DH_PEM: &str = "-----BEGIN DH PARAMETERS-----";
    let bytes = fs::read(file).map_err(|e| text::dh_load(file, &e.to_string()))?;
    if !String::from_utf8_lossy(&bytes).contains(DH_PEM) {
        return Err(text::dh_read(file));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TlsConfig {
        TlsConfig {
            auth_clients: "yes".into(),
            session_caching: true,
            session_cache_size: 20480,
            ..TlsConfig::default()
        }
    }

    #[test]
    fn missing_files_are_refused_with_redis_lines() {
        let mut c = config();
        assert_eq!(configure(&c).err().unwrap(), text::NO_CERT);
        c.cert_file = "/nonexistent/cert.pem".into();
        assert_eq!(configure(&c).err().unwrap(), text::NO_KEY);
        c.key_file = "/nonexistent/key.pem".into();
        assert_eq!(configure(&c).err().unwrap(), text::NO_CA);
        c.auth_clients = "no".into();
        let why = configure(&c).err().unwrap();
        assert!(
            why.starts_with("Failed to load certificate: /nonexistent/cert.pem: "),
            "{why}"
        );
    }

    #[test]
    fn protocols_and_suites_map_as_documented() {
        assert_eq!(protocols("TLSv1.2 tlsv1.3").unwrap().len(), 2);
        assert_eq!(protocols("TLSv1.2").unwrap().len(), 1);
        assert_eq!(protocols("TLSv1 TLSv1.1").err().unwrap(), text::BAD_PROTOCOLS);
        assert_eq!(protocols("SSLv3").err().unwrap(), text::BAD_PROTOCOLS);
        let mut c = config();
        c.ciphers = "DEFAULT:!ECDHE-RSA-AES128-GCM-SHA256".into();
        assert_eq!(provider(&c).unwrap().cipher_suites.len(), 3 + 5);
        c.ciphers = "AES128-SHA:DES-CBC3-SHA".into();
        assert_eq!(provider(&c).err().unwrap(), text::ciphers("AES128-SHA:DES-CBC3-SHA"));
        c.ciphers = String::new();
        c.ciphersuites = "TLS_AES_128_GCM_SHA256".into();
        assert_eq!(provider(&c).unwrap().cipher_suites.len(), 1 + 6);
        c.ciphersuites = "TLS_AES_128_CCM_SHA256".into();
        assert_eq!(
            provider(&c).err().unwrap(),
            text::ciphersuites("TLS_AES_128_CCM_SHA256")
        );
    }
}
