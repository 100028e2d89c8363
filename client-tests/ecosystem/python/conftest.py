"""Starts each server the tests run against: coordis-server (the binary
cargo built) and redis-server 7.0.15, each on a free loopback port, stopped
afterwards. Every test that takes the `url` fixture runs on both."""

import json
import os
import shutil
import socket
import subprocess
import time

import pytest
import redis

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def coordis_binary():
    explicit = os.environ.get("COORDIS_SERVER_BIN")
    if explicit:
        return explicit
    for profile in ("debug", "release"):
        path = os.path.join(ROOT, "target", profile, "coordis-server")
        if os.path.exists(path):
            return path
    pytest.fail("coordis-server is not built (cargo build --bin coordis-server)")


def start_coordis():
    """coordis-server picks a free port itself with --port 0 and says which on
    its first stdout line (README: "Port 0 in a test fixture")."""
    argv = [coordis_binary(), "--port", "0", "--bind", "127.0.0.1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail("coordis-server exited before it was ready")
    port = json.loads(line)["port"]
    return wait_for_ping(proc, argv, port), port


def start(argv, port):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return wait_for_ping(proc, argv, port)


def wait_for_ping(proc, argv, port):
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            if redis.Redis(port=port, socket_timeout=1).ping():
                return proc
        except redis.ConnectionError:
            time.sleep(0.05)
    proc.kill()
    pytest.fail(f"{argv[0]} did not start on port {port}")


@pytest.fixture(scope="session", params=["coordis", "redis"])
def server(request):
    if request.param == "coordis":
        proc, port = start_coordis()
    else:
        if shutil.which("redis-server") is None:
            if os.environ.get("COORDIS_REQUIRE_REDIS") == "1":
                pytest.fail("COORDIS_REQUIRE_REDIS=1 but redis-server is not on PATH")
            pytest.skip("SKIPPED: redis-server is not on PATH")
        port = free_port()
        argv = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"]
        proc = start(argv + ["--bind", "127.0.0.1"], port)
    yield request.param, port
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def url(server):
    name, port = server
    redis.Redis(port=port).flushall()
    return f"redis://127.0.0.1:{port}/0"


@pytest.fixture
def backend(server):
    return server[0]
