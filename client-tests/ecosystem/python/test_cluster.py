"""redis-py's RedisCluster in the matrix: a lock, a queue and pub/sub case
against a cluster. On coordis (run.sh's first leg) the cluster is
`coordis-server --cluster-local 3 --port 0` (its ready line names the
nodes); on the redis-server leg (--redis-url) it is three redis-server
processes joined by `redis-cli --cluster create`, which is mandatory under
COORDIS_REQUIRE_REDIS=1 and skipped loudly without redis-server."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
from redis.cluster import ClusterNode, RedisCluster

# Longest wait for a cluster to form.
FORM_TIMEOUT_S = 30
# Ports below this leave room for the bus port (+10000).
MAX_CLIENT_PORT = 55000

RELEASE = """if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1]) else return 0 end"""


def on_redis(config):
    return bool(config.getoption("--redis-url", default=None))


def cluster_ports(n):
    """n free client ports below 55000 whose bus ports are free too."""
    ports = []
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p >= MAX_CLIENT_PORT or p in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p + 10000))
            except OSError:
                continue
        ports.append(p)
    return ports


def coordis_cluster():
    binary = os.environ.get("COORDIS_SERVER_BIN", "coordis-server")
    proc = subprocess.Popen(
        [binary, "--cluster-local", "3", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    ready = json.loads(proc.stdout.readline())
    assert ready["cluster_state"] == "ok", ready
    return proc, [("127.0.0.1", n["port"]) for n in ready["nodes"]], [proc]


def redis_cluster():
    if not shutil.which("redis-server") or not shutil.which("redis-cli"):
        if os.environ.get("COORDIS_REQUIRE_REDIS") == "1":
            pytest.fail("COORDIS_REQUIRE_REDIS=1 but redis-server/redis-cli are not on PATH")
        print("\n*** SKIPPED: redis-server is not on PATH: no Redis cluster ***", file=sys.stderr)
        pytest.skip("redis-server is not on PATH")
    work = tempfile.mkdtemp()
    procs = []
    ports = cluster_ports(3)
    for p in ports:
        d = os.path.join(work, str(p))
        os.mkdir(d)
        procs.append(subprocess.Popen(
            ["redis-server", "--port", str(p), "--cluster-enabled", "yes", "--dir", d,
             "--save", "", "--appendonly", "no", "--logfile", os.path.join(d, "log")]))
    for p in ports:
        deadline = time.time() + FORM_TIMEOUT_S
        while subprocess.run(["redis-cli", "-p", str(p), "ping"], capture_output=True).stdout.strip() != b"PONG":
            assert time.time() < deadline, f"redis-server on {p} did not start"
            time.sleep(0.05)
    subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports], "--cluster-yes"],
                   check=True, capture_output=True)
    for p in ports:
        deadline = time.time() + FORM_TIMEOUT_S
        while b"cluster_state:ok" not in subprocess.run(
                ["redis-cli", "-p", str(p), "cluster", "info"], capture_output=True).stdout:
            assert time.time() < deadline, f"redis-server on {p} never reached cluster_state:ok"
            time.sleep(0.05)
    return work, [("127.0.0.1", p) for p in ports], procs


@pytest.fixture(scope="module")
def cluster(request):
    if on_redis(request.config):
        work, nodes, procs = redis_cluster()
    else:
        work, nodes, procs = None, *coordis_cluster()[1:]
    client = RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in nodes], decode_responses=True)
    try:
        yield client, nodes
    finally:
        client.close()
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
        if work:
            shutil.rmtree(work, ignore_errors=True)


def test_cluster_has_three_primaries(cluster):
    client, _ = cluster
    assert len(client.get_primaries()) == 3
    assert client.cluster_info()["cluster_state"] == "ok"


def test_cluster_lock_on_every_shard(cluster):
    client, _ = cluster
    release = client.register_script(RELEASE)
    # Keys of different shards: redis-py follows the slot map to each
    # one's primary (asserted below: at least two owners).
    for key in ["lock:foo", "lock:{bar}", "lock:{baz}x"]:
        token = uuid.uuid4().hex
        assert client.set(key, token, nx=True, px=10_000)
        assert not client.set(key, "other", nx=True, px=10_000)
        assert release(keys=[key], args=["other"]) == 0
        assert release(keys=[key], args=[token]) == 1
        assert client.set(key, "next", nx=True, px=10_000)
        client.delete(key)
    slots = {client.keyslot(k) for k in ["lock:foo", "lock:{bar}", "lock:{baz}x"]}
    owners = {client.nodes_manager.get_node_from_slot(s).name for s in slots}
    assert len(owners) >= 2, owners


def test_cluster_queue_with_a_hash_tag(cluster):
    client, _ = cluster
    jobs, done = "{queue}:jobs", "{queue}:done"
    client.delete(jobs, done)
    for i in range(5):
        client.lpush(jobs, f"job{i}")
    moved = [client.lmove(jobs, done, "RIGHT", "LEFT") for _ in range(5)]
    assert moved == [f"job{i}" for i in range(5)]
    assert client.brpop([jobs], timeout=0.1) is None
    assert client.llen(done) == 5
    # Keys of two slots in one command, sent to the queue's node (redis-py
    # itself refuses it before sending): CROSSSLOT, as Redis words it.
    node = client.get_node_from_key(done).redis_connection
    with pytest.raises(Exception) as err:
        node.execute_command("RENAME", done, "{other}:done")
    assert str(err.value) == "Keys in request don't hash to the same slot", err.value
    client.delete(jobs, done)


def test_cluster_pubsub_reaches_a_subscriber_on_another_node(cluster):
    client, nodes = cluster
    sub = RedisCluster(host=nodes[0][0], port=nodes[0][1], decode_responses=True).pubsub(
        node=ClusterNode(*nodes[0]))
    sub.subscribe("news")
    deadline = time.time() + 5
    while sub.get_message(timeout=0.1) is None:
        assert time.time() < deadline
    # Published on another node: the bus carries it to every node.
    other = RedisCluster(host=nodes[2][0], port=nodes[2][1], decode_responses=True)
    other.get_node(*nodes[2]).redis_connection.publish("news", "hello")
    message = None
    while message is None and time.time() < deadline:
        message = sub.get_message(timeout=0.1)
    assert message and message["data"] == "hello", message
    sub.close()
    other.close()
