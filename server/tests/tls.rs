//! TLS (`tls-port` and the `tls-*` directives): redis-cli `--tls` against
//! embedded coordis and against a real `redis-server --tls-port` started
//! with the same generated certificates (the same replies); the redis
//! crate with `tls-rustls` with and without a client certificate under each
//! `tls-auth-clients` mode; untrusted and expired certificates refused; a
//! plain-text client on the TLS port dropped as Redis drops it; a stalled
//! handshake closed by `timeout` without holding up other clients; CONFIG
//! SET errors and reloading the certificate; the binary's start-up
//! failure lines and its ready line's `tls_port`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use coordis::testing::{free_port, RedisServer};
use coordis::{Builder, Server, TestCertificates};
use redis::{ClientTlsConfig, TlsCertificates};

const BIN: &str = env!("CARGO_BIN_EXE_coordis-server");

/// How long a connection attempt or a read may take before the test fails.
const WAIT: Duration = Duration::from_secs(10);

fn path(p: std::path::PathBuf) -> String {
    p.to_string_lossy().into_owned()
}

/// The `tls-*` flags pointing at `certs`, for redis-server.
fn redis_tls_args(certs: &TestCertificates, tls_port: u16) -> Vec<String> {
    vec![
        "--tls-port".into(),
        tls_port.to_string(),
        "--tls-cert-file".into(),
        path(certs.server_cert_file()),
        "--tls-key-file".into(),
        path(certs.server_key_file()),
        "--tls-ca-cert-file".into(),
        path(certs.ca_cert_file()),
    ]
}

/// A client certificate for the redis crate.
fn client_tls(cert: &str, key: &str) -> Option<ClientTlsConfig> {
    Some(ClientTlsConfig {
        client_cert: cert.as_bytes().to_vec(),
        client_key: key.as_bytes().to_vec(),
    })
}

/// PING over TLS with the redis crate: `Ok("PONG")`, or why not.
async fn tls_ping(port: u16, ca: &str, client: Option<ClientTlsConfig>) -> Result<String, String> {
    let certs = TlsCertificates {
        client_tls: client,
        root_cert: Some(ca.as_bytes().to_vec()),
    };
    let client =
        redis::Client::build_with_tls(format!("rediss://127.0.0.1:{port}"), certs).map_err(|e| e.to_string())?;
    let attempt = async {
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .map_err(|e| e.to_string())
    };
    tokio::time::timeout(WAIT, attempt)
        .await
        .map_err(|_| "timed out".to_string())?
}

async fn tls_server(mode: &str) -> Server {
    Builder::default().tls().tls_auth_clients(mode).start().await.unwrap()
}

#[tokio::test]
async fn redis_crate_with_and_without_client_certificates_per_auth_mode() {
    for (mode, without_cert_ok) in [("yes", false), ("optional", true), ("no", true)] {
        let server = tls_server(mode).await;
        let port = server.tls_port().expect("a TLS port");
        let certs = server.tls_certificates().expect("generated certificates");
        let with = tls_ping(
            port,
            &certs.ca_cert_pem,
            client_tls(&certs.client_cert_pem, &certs.client_key_pem),
        )
        .await;
        assert_eq!(
            with,
            Ok("PONG".to_string()),
            "tls-auth-clients {mode} with a certificate"
        );
        let without = tls_ping(port, &certs.ca_cert_pem, None).await;
        assert_eq!(
            without.is_ok(),
            without_cert_ok,
            "tls-auth-clients {mode} without: {without:?}"
        );
        // The plain port serves too.
        let mut plain = coordis::testing::RawClient::connect(server.addr()).unwrap();
        assert_eq!(plain.command(&["PING"]).unwrap(), b"+PONG\r\n");
        server.shutdown().await;
    }
}

#[tokio::test]
async fn untrusted_and_expired_certificates_are_refused() {
    let server = tls_server("yes").await;
    let port = server.tls_port().unwrap();
    let certs = server.tls_certificates().unwrap();
    // A client certificate of another CA.
    let other = TestCertificates::generate().unwrap();
    let r = tls_ping(
        port,
        &certs.ca_cert_pem,
        client_tls(&other.client_cert_pem, &other.client_key_pem),
    )
    .await;
    assert!(r.is_err(), "a certificate of another CA was accepted: {r:?}");
    // An expired one of the right CA.
    let (cert, key) = certs.client_certificate("expired client", true).unwrap();
    let r = tls_ping(port, &certs.ca_cert_pem, client_tls(&cert, &key)).await;
    assert!(r.is_err(), "an expired certificate was accepted: {r:?}");
    // A fresh one of the right CA is fine.
    let (cert, key) = certs.client_certificate("another client", false).unwrap();
    assert_eq!(
        tls_ping(port, &certs.ca_cert_pem, client_tls(&cert, &key)).await,
        Ok("PONG".into())
    );
    // A client that does not trust the server's CA refuses the server.
    let r = tls_ping(
        port,
        &other.ca_cert_pem,
        client_tls(&certs.client_cert_pem, &certs.client_key_pem),
    )
    .await;
    assert!(
        r.is_err(),
        "a server certificate of an untrusted CA was accepted: {r:?}"
    );
    server.shutdown().await;
}

/// Sends plain text to the TLS port and returns what came back before the
/// server closed the connection (panics if it stays open).
fn plain_text_on_tls_port(port: u16) -> Vec<u8> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut got = vec![];
    match s.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the TLS port kept a plain-text client open: {e}"),
    }
    got
}

#[tokio::test]
async fn plain_text_on_the_tls_port_is_dropped_as_redis_drops_it() {
    let server = tls_server("no").await;
    let port = server.tls_port().unwrap();
    let ours = plain_text_on_tls_port(port);
    assert!(
        !ours.starts_with(b"+") && !ours.starts_with(b"-"),
        "a RESP reply: {ours:?}"
    );
    // Other clients are unaffected.
    let certs = server.tls_certificates().unwrap();
    assert_eq!(tls_ping(port, &certs.ca_cert_pem, None).await, Ok("PONG".into()));
    let certs = TestCertificates::generate().unwrap();
    let tls_port = free_port().unwrap();
    let args = redis_tls_args(&certs, tls_port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let Some(_redis) = RedisServer::start(&args).unwrap() else {
        return;
    };
    let theirs = plain_text_on_tls_port(tls_port);
    assert!(
        !theirs.starts_with(b"+") && !theirs.starts_with(b"-"),
        "Redis: {theirs:?}"
    );
    // Both answer with a TLS alert record (content type 21) or nothing.
    for (who, got) in [("coordis", &ours), ("redis", &theirs)] {
        assert!(got.is_empty() || got[0] == 21, "{who}: {got:?}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_stalled_handshake_is_closed_by_timeout_and_holds_up_nobody() {
    let mut builder = Builder::default().tls().tls_auth_clients("no");
    builder.config_mut().timeout = 1;
    let server = builder.start().await.unwrap();
    let port = server.tls_port().unwrap();
    let mut stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stalled.set_read_timeout(Some(WAIT)).unwrap();
    let started = Instant::now();
    // Another TLS client is served meanwhile.
    let certs = server.tls_certificates().unwrap();
    assert_eq!(tls_ping(port, &certs.ca_cert_pem, None).await, Ok("PONG".into()));
    // As in Redis, the client exists from the accept: CLIENT LIST shows it.
    let mut plain = coordis::testing::RawClient::connect(server.addr()).unwrap();
    let list = String::from_utf8(plain.command(&["CLIENT", "LIST"]).unwrap()).unwrap();
    assert!(list.contains(&format!("laddr=127.0.0.1:{port}")), "{list}");
    let mut buf = [0u8; 16];
    let read = stalled.read(&mut buf);
    assert!(matches!(read, Ok(0)) || read.is_err(), "{read:?}");
    let waited = started.elapsed();
    assert!(waited < WAIT, "the stalled handshake stayed open {waited:?}");
    server.shutdown().await;
}

/// Runs redis-cli over TLS against `port` with `args` and returns stdout.
fn cli(port: u16, certs: &TestCertificates, client_cert: bool, args: &[&str]) -> String {
    let mut command = Command::new("redis-cli");
    command.args(["-h", "127.0.0.1", "-p", &port.to_string(), "--tls", "--cacert"]);
    command.arg(certs.ca_cert_file());
    if client_cert {
        command.arg("--cert").arg(certs.client_cert_file());
        command.arg("--key").arg(certs.client_key_file());
    }
    let out = command
        .args(args)
        .stderr(Stdio::piped())
        .output()
        .expect("redis-cli runs");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test]
async fn redis_cli_tls_gets_the_replies_redis_gives() {
    if Command::new("redis-cli").arg("--version").output().is_err() {
        assert!(
            !coordis::testing::require_redis(),
            "COORDIS_REQUIRE_REDIS=1 but redis-cli is not on PATH"
        );
        eprintln!("\n*** SKIPPED: redis-cli is not on PATH ***\n");
        return;
    }
    let certs = TestCertificates::generate().unwrap();
    let tls_port = free_port().unwrap();
    let args = redis_tls_args(&certs, tls_port);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let Some(_redis) = RedisServer::start(&args).unwrap() else {
        return;
    };
    let mut builder = Builder::default();
    let tls = &mut builder.config_mut().tls;
    tls.free_port = true;
    tls.cert_file = path(certs.server_cert_file());
    tls.key_file = path(certs.server_key_file());
    tls.ca_cert_file = path(certs.ca_cert_file());
    tls.auth_clients = "yes".into();
    let server = builder.start().await.unwrap();
    let ours = server.tls_port().unwrap();
    let cert_file = path(certs.server_cert_file());
    let script: &[&[&str]] = &[
        &["PING"],
        &["SET", "lock:a", "token-1", "NX", "PX", "30000"],
        &["SET", "lock:a", "token-2", "NX", "PX", "30000"],
        &["GET", "lock:a"],
        &["INCR", "lock:a"],
        &["DEL", "lock:a"],
        &["CONFIG", "GET", "tls-auth-clients"],
        &["CONFIG", "GET", "tls-protocols"],
        &["CONFIG", "GET", "tls-session-cache-size"],
        &["CONFIG", "SET", "tls-cert-file", "/nonexistent/server.crt"],
        &["CONFIG", "SET", "tls-protocols", "SSLv3"],
        &["CONFIG", "SET", "tls-auth-clients", "maybe"],
        &["CONFIG", "SET", "tls-cert-file", &cert_file],
        &["CONFIG", "SET", "tls-auth-clients", "optional"],
        &["CONFIG", "GET", "tls-auth-clients"],
        &["CONFIG", "SET", "tls-auth-clients", "yes"],
        &["CONFIG", "GET", "tls-cert-file"],
    ];
    for args in script {
        let theirs = cli(tls_port, &certs, true, args);
        let got = cli(ours, &certs, true, args);
        let theirs = theirs.replace(&tls_port.to_string(), "<port>");
        let got = got.replace(&ours.to_string(), "<port>");
        assert_eq!(got, theirs, "{args:?}");
    }
    // Without a client certificate both refuse redis-cli.
    let theirs = cli(tls_port, &certs, false, &["PING"]);
    let got = cli(ours, &certs, false, &["PING"]);
    assert!(
        !theirs.contains("PONG") && !got.contains("PONG"),
        "redis: {theirs} coordis: {got}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn config_set_tls_cert_file_reloads_and_failures_roll_back() {
    let server = tls_server("no").await;
    let port = server.tls_port().unwrap();
    let certs = server.tls_certificates().unwrap();
    let mut plain = coordis::testing::RawClient::connect(server.addr()).unwrap();
    let refused = plain
        .command(&["CONFIG", "SET", "tls-key-file", "/nonexistent/server.key"])
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&refused),
        "-ERR CONFIG SET failed (possibly related to argument 'tls-key-file') - Unable to update TLS configuration. Check server logs.\r\n"
    );
    // Rolled back: the old value is shown and still served.
    let key = String::from_utf8(plain.command(&["CONFIG", "GET", "tls-key-file"]).unwrap()).unwrap();
    assert!(key.contains(&path(certs.server_key_file())), "{key}");
    assert_eq!(tls_ping(port, &certs.ca_cert_pem, None).await, Ok("PONG".into()));
    // New files under the same names, and CONFIG SET of the same names, reload.
    let other = TestCertificates::generate().unwrap();
    std::fs::write(certs.server_cert_file(), &other.server_cert_pem).unwrap();
    std::fs::write(certs.server_key_file(), &other.server_key_pem).unwrap();
    assert_eq!(
        tls_ping(port, &certs.ca_cert_pem, None).await,
        Ok("PONG".into()),
        "before CONFIG SET"
    );
    let cert = path(certs.server_cert_file());
    let key = path(certs.server_key_file());
    let ok = plain
        .command(&["CONFIG", "SET", "tls-cert-file", &cert, "tls-key-file", &key])
        .unwrap();
    assert_eq!(ok, b"+OK\r\n");
    assert!(
        tls_ping(port, &certs.ca_cert_pem, None).await.is_err(),
        "still the old certificate"
    );
    assert_eq!(tls_ping(port, &other.ca_cert_pem, None).await, Ok("PONG".into()));
    // CONFIG SET tls-port moves the TLS listener.
    let moved = free_port().unwrap();
    let ok = plain
        .command(&["CONFIG", "SET", "tls-port", &moved.to_string()])
        .unwrap();
    assert_eq!(ok, b"+OK\r\n");
    assert_eq!(tls_ping(moved, &other.ca_cert_pem, None).await, Ok("PONG".into()));
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the old TLS port still listens"
    );
    server.shutdown().await;
}

/// Runs the binary with `args` until it exits (it must, within [`WAIT`]);
/// returns its exit code and stderr and stdout together.
fn run_until_exit(program: &str, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut text = String::new();
            child.stdout.take().unwrap().read_to_string(&mut text).unwrap();
            child.stderr.take().unwrap().read_to_string(&mut text).unwrap();
            return (status.code(), text);
        }
        if started.elapsed() > WAIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{program} {args:?} kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_missing_certificate_stops_the_start_as_redis_does() {
    let dir = std::env::temp_dir().join(format!("coordis-tls-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir_text = path(dir.clone());
    let port = free_port().unwrap().to_string();
    let tls_port = free_port().unwrap().to_string();
    let args = [
        "--port",
        &port,
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        "/nonexistent/server.crt",
        "--tls-key-file",
        "/nonexistent/server.key",
        "--tls-ca-cert-file",
        "/nonexistent/ca.crt",
        "--save",
        "",
        "--dir",
        &dir_text,
    ];
    let (code, ours) = run_until_exit(BIN, &args);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, Some(1), "{ours}");
    for line in [
        "Failed to load certificate: /nonexistent/server.crt: ",
        "Failed to configure TLS. Check logs for more info.",
    ] {
        assert!(ours.contains(line), "coordis-server lacks {line:?}:\n{ours}");
    }
    if Command::new("redis-server").arg("--version").output().is_err() {
        assert!(
            !coordis::testing::require_redis(),
            "COORDIS_REQUIRE_REDIS=1 but redis-server is not on PATH"
        );
        eprintln!("\n*** SKIPPED: redis-server is not on PATH; the real-Redis leg did not run ***\n");
        return;
    }
    std::fs::create_dir_all(&dir).unwrap();
    let (code, theirs) = run_until_exit("redis-server", &args);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, Some(1), "{theirs}");
    for line in [
        "Failed to load certificate: /nonexistent/server.crt: ",
        "Failed to configure TLS. Check logs for more info.",
    ] {
        assert!(theirs.contains(line), "redis-server lacks {line:?}:\n{theirs}");
    }
    // No CA with client authentication on: the same line from both.
    let no_ca = [
        "--port",
        &port,
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        "/nonexistent/server.crt",
        "--tls-key-file",
        "/nonexistent/server.key",
        "--save",
        "",
    ];
    let line = "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!";
    for program in [BIN, "redis-server"] {
        let (code, text) = run_until_exit(program, &no_ca);
        assert_eq!(code, Some(1), "{program}: {text}");
        assert!(text.contains(line), "{program}:\n{text}");
    }
}

#[test]
fn the_ready_line_names_the_tls_port_and_port_0_with_a_tls_port_is_tls_only() {
    let certs = TestCertificates::generate().unwrap();
    let dir = certs.dir().join("data");
    std::fs::create_dir_all(&dir).unwrap();
    let tls_args = |tls_port: &str| -> Vec<String> {
        [
            "--port",
            "0",
            "--tls-port",
            tls_port,
            "--tls-cert-file",
            &path(certs.server_cert_file()),
            "--tls-key-file",
            &path(certs.server_key_file()),
            "--tls-ca-cert-file",
            &path(certs.ca_cert_file()),
            "--save",
            "",
            "--dir",
            &path(dir.clone()),
        ]
        .map(String::from)
        .to_vec()
    };
    for (tls_port, plain_too) in [("0".to_string(), true), (free_port().unwrap().to_string(), false)] {
        let mut child = Command::new(BIN)
            .args(tls_args(&tls_port))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        let field = |name: &str| -> Option<u16> {
            let at = line.find(&format!("\"{name}\":"))? + name.len() + 3;
            line[at..].split([',', '}']).next()?.parse().ok()
        };
        let tls = field("tls_port").unwrap_or_else(|| panic!("no tls_port in {line}"));
        assert_ne!(tls, 0, "{line}");
        if tls_port != "0" {
            assert_eq!(tls.to_string(), tls_port, "{line}");
        }
        let port = field("port").unwrap();
        assert_eq!(port != tls, plain_too, "{line}");
    }
}

#[tokio::test]
async fn an_encrypted_pkcs8_key_opens_with_tls_key_file_pass_as_in_redis() {
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("\n*** SKIPPED: the openssl tool is not on PATH (it encrypts the key) ***\n");
        return;
    }
    let certs = TestCertificates::generate().unwrap();
    let encrypted = certs.dir().join("server-encrypted.key");
    let made = Command::new("openssl")
        .args([
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-passout",
            "pass:s3cret",
            "-in",
        ])
        .arg(certs.server_key_file())
        .arg("-out")
        .arg(&encrypted)
        .status()
        .unwrap();
    assert!(made.success());
    assert!(std::fs::read_to_string(&encrypted)
        .unwrap()
        .contains("BEGIN ENCRYPTED PRIVATE KEY"));
    let builder = |pass: &str| {
        let mut builder = Builder::default();
        let tls = &mut builder.config_mut().tls;
        tls.free_port = true;
        tls.cert_file = path(certs.server_cert_file());
        tls.key_file = path(encrypted.clone());
        tls.key_file_pass = pass.into();
        tls.auth_clients = "no".into();
        builder
    };
    assert!(
        builder("wrong").start().await.is_err(),
        "a wrong password opened the key"
    );
    let server = builder("s3cret").start().await.unwrap();
    let port = server.tls_port().unwrap();
    assert_eq!(tls_ping(port, &certs.ca_cert_pem, None).await, Ok("PONG".into()));
    server.shutdown().await;
    // Redis opens the same file with the same password.
    let tls_port = free_port().unwrap();
    let (port_text, key) = (tls_port.to_string(), path(encrypted.clone()));
    let cert = path(certs.server_cert_file());
    let args = [
        "--tls-port",
        &port_text,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-key-file-pass",
        "s3cret",
        "--tls-auth-clients",
        "no",
    ];
    let Some(_redis) = RedisServer::start(&args).unwrap() else {
        return;
    };
    assert_eq!(tls_ping(tls_port, &certs.ca_cert_pem, None).await, Ok("PONG".into()));
}
