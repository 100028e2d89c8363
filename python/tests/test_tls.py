"""redis-py over TLS (`ssl=True`, `rediss://`): the lock recipe with a
client certificate; a client without one refused under `tls-auth-clients
yes` and served under `tls-auth-clients optional`. On the coordis run the
servers are coordis-servers (`coordis.Server` with the `tls-*`
directives); on the `--redis-url` run they are redis-servers started here
with the same directives and the same certificate files, so the same
assertions hold for both. The certificates are throw-away ones the openssl
CLI makes for the module: a CA, a server certificate for 127.0.0.1 and a
client certificate, both signed by the CA."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
import redis

import coordis

HOST = "127.0.0.1"
#: How long a server may take to listen, and a client to get an answer.
WAIT_SECONDS = 10.0
#: Days the throw-away certificates are valid.
CERT_DAYS = "2"
#: The lock's lease in ms: long enough for the test, never reached.
LEASE_MS = 30_000
#: Releases the lock only for its holder (the recipe's compare-and-delete).
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
#: Extends the lease only for its holder.
EXTEND = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end return 0"


def _required() -> bool:
    return os.environ.get("COORDIS_REQUIRE_REDIS") == "1" or os.environ.get("CI") == "true"


def _missing(what: str) -> None:
    if _required():
        pytest.fail(f"{what} (required under COORDIS_REQUIRE_REDIS=1 / CI=true)")
    pytest.skip(f"*** SKIPPED: {what}; the TLS tests did not run ***")


@dataclass(frozen=True)
class Certs:
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def _openssl(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    if shutil.which("openssl") is None:
        _missing("the openssl CLI is not on PATH (it makes the test certificates)")
    d = tmp_path_factory.mktemp("tls")
    _openssl(
        d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", CERT_DAYS, "-subj", "/CN=coordis-test-ca",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    extensions = {
        "server": "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        "client": "extendedKeyUsage=clientAuth\n",
    }
    for who, ext in extensions.items():
        (d / f"{who}.ext").write_text(ext)
        _openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key", "-out", f"{who}.csr",
                 "-subj", f"/CN=coordis-test-{who}")  # fmt: skip
        _openssl(d, "x509", "-req", "-in", f"{who}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{who}.crt", "-days", CERT_DAYS, "-extfile", f"{who}.ext")  # fmt: skip
    return Certs(
        ca=str(d / "ca.crt"),
        server_cert=str(d / "server.crt"),
        server_key=str(d / "server.key"),
        client_cert=str(d / "client.crt"),
        client_key=str(d / "client.key"),
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _tls_directives(certs: Certs, auth_clients: str) -> Dict[str, str]:
    return {
        "tls-cert-file": certs.server_cert,
        "tls-key-file": certs.server_key,
        "tls-ca-cert-file": certs.ca,
        "tls-auth-clients": auth_clients,
    }


def _start_redis(certs: Certs, auth_clients: str, directory: Path) -> "tuple[subprocess.Popen, int]":
    """A redis-server with a TLS port; the plain port is off (`port 0`)."""
    binary = shutil.which("redis-server")
    if binary is None:
        _missing("redis-server is not on PATH")
    assert binary is not None
    port = _free_port()
    argv = [binary, "--port", "0", "--tls-port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no",
            "--dir", str(directory), "--logfile", str(directory / "redis.log")]  # fmt: skip
    for name, value in _tls_directives(certs, auth_clients).items():
        argv += [f"--{name}", value]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            socket.create_connection((HOST, port), timeout=1).close()
            return proc, port
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                log = directory / "redis.log"
                raise RuntimeError(f"redis-server did not listen on {port}: {log.read_text() if log.exists() else ''}")
            time.sleep(0.05)


@pytest.fixture(scope="module")
def tls_ports(
    certs: Certs, coordis_backend: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Dict[str, int]]:
    """The TLS port of a server per `tls-auth-clients` setting (`yes`,
    `optional`), of the run's backend."""
    ports: Dict[str, int] = {}
    coordis_servers: List[coordis.Server] = []
    redis_servers: List[subprocess.Popen] = []
    try:
        for auth_clients in ("yes", "optional"):
            if coordis_backend == "coordis":
                directives = {"tls-port": 0, **_tls_directives(certs, auth_clients)}
                server = coordis.Server(directives=directives).start()
                coordis_servers.append(server)
                assert server.tls_port is not None, "the ready line names the TLS port"
                ports[auth_clients] = server.tls_port
            else:
                proc, port = _start_redis(certs, auth_clients, tmp_path_factory.mktemp(f"redis-{auth_clients}"))
                redis_servers.append(proc)
                ports[auth_clients] = port
        yield ports
    finally:
        for server in coordis_servers:
            server.stop()
        for proc in redis_servers:
            proc.terminate()
            try:
                proc.wait(timeout=WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _client(port: int, certs: Certs, with_certificate: bool) -> redis.Redis:
    extra = {"ssl_certfile": certs.client_cert, "ssl_keyfile": certs.client_key} if with_certificate else {}
    return redis.Redis(
        host=HOST,
        port=port,
        ssl=True,
        ssl_ca_certs=certs.ca,
        socket_timeout=WAIT_SECONDS,
        socket_connect_timeout=WAIT_SECONDS,
        decode_responses=True,
        **extra,
    )


def test_the_lock_recipe_over_tls_with_a_client_certificate(tls_ports, certs, coordis_backend):
    r = _client(tls_ports["yes"], certs, with_certificate=True)
    try:
        assert ("coordis_version" in r.info("server")) == (coordis_backend == "coordis")
        release, extend = r.register_script(RELEASE), r.register_script(EXTEND)
        r.delete("lock:tls")
        assert r.set("lock:tls", "holder-a", nx=True, px=LEASE_MS)
        assert r.set("lock:tls", "holder-b", nx=True, px=LEASE_MS) is None, "the lock is taken"
        assert release(keys=["lock:tls"], args=["holder-b"]) == 0, "only the holder releases"
        assert extend(keys=["lock:tls"], args=["holder-a", LEASE_MS]) == 1
        assert 0 < r.pttl("lock:tls") <= LEASE_MS
        assert release(keys=["lock:tls"], args=["holder-a"]) == 1
        assert r.set("lock:tls", "holder-b", nx=True, px=LEASE_MS), "free again"
        assert release(keys=["lock:tls"], args=["holder-b"]) == 1
    finally:
        r.close()


def test_a_rediss_url_with_a_client_certificate(tls_ports, certs):
    url = f"rediss://{HOST}:{tls_ports['yes']}/0"
    r = redis.Redis.from_url(
        url, ssl_ca_certs=certs.ca, ssl_certfile=certs.client_cert, ssl_keyfile=certs.client_key,
        socket_timeout=WAIT_SECONDS,
    )  # fmt: skip
    try:
        assert r.ping()
        with r.pipeline(transaction=True) as p:
            p.incr("tls:n").incr("tls:n").delete("tls:n")
            assert p.execute() == [1, 2, 1]
    finally:
        r.close()


def test_a_client_without_a_certificate_is_refused_under_tls_auth_clients_yes(tls_ports, certs):
    r = _client(tls_ports["yes"], certs, with_certificate=False)
    try:
        with pytest.raises((redis.ConnectionError, redis.TimeoutError, OSError)):
            r.ping()
    finally:
        r.close()


def test_a_client_without_a_certificate_is_served_under_optional(tls_ports, certs):
    for with_certificate in (False, True):
        r = _client(tls_ports["optional"], certs, with_certificate=with_certificate)
        try:
            assert r.set("tls:optional", "v", px=LEASE_MS)
            assert r.get("tls:optional") == "v"
            assert r.delete("tls:optional") == 1
        finally:
            r.close()


def test_a_client_that_does_not_trust_the_ca_is_refused(tls_ports, certs):
    r = redis.Redis(host=HOST, port=tls_ports["optional"], ssl=True, socket_timeout=WAIT_SECONDS)
    try:
        with pytest.raises((redis.ConnectionError, OSError)):
            r.ping()
    finally:
        r.close()
