"""redis-py's Sentinel client in the matrix: a lock and a queue (rq) case
run through a Sentinel failover the test drives, the same assertions on
both legs. On coordis (run.sh's first leg) the group is `coordis-server
--replicas-local 1 --sentinels-local 1 --port 0` (a primary, a replica and
a Sentinel on one test clock, named in its ready line), and the failover's
timers run on that clock: the test moves it (`COORDIS.CLOCK ADVANCE` on
the replica) a second at a time. On the redis-server leg (--redis-url) it
is a redis-server primary and replica and a `redis-server --sentinel`
(down-after-milliseconds 1000), on the wall clock; mandatory under
COORDIS_REQUIRE_REDIS=1, skipped loudly without redis-server."""

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
import redis
from redis.sentinel import MasterNotFoundError, Sentinel
from rq import Queue, SimpleWorker

import jobs

pytestmark = pytest.mark.timeout(120)

# Longest real-time wait for a group to start or a failover to end.
WAIT_S = 60
# How far one step moves coordis's clock while a failover runs: Sentinel
# polls INFO every second of it during a failover.
STEP_MS = 1000


def on_redis(config):
    return bool(config.getoption("--redis-url", default=None))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(what, done, step=lambda: time.sleep(0.05)):
    deadline = time.time() + WAIT_S
    while True:
        value = done()
        if value:
            return value
        assert time.time() < deadline, f"timed out waiting for {what}"
        step()


def retried(call):
    """`call()` once the client reaches a primary: the failed-over
    connections error (refused, closed, READONLY) until redis-py has asked
    the Sentinel again."""
    deadline = time.time() + WAIT_S
    while True:
        try:
            return call()
        except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
            assert time.time() < deadline, "the client never reached the new primary"
            time.sleep(0.1)


class CoordisGroup:
    """coordis-server --replicas-local: everything in one process."""

    def __init__(self):
        binary = os.environ.get("COORDIS_SERVER_BIN", "coordis-server")
        self.proc = subprocess.Popen(
            [binary, "--replicas-local", "1", "--sentinels-local", "1", "--port", "0",
             "--enable-test-commands", "yes"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        ready = json.loads(self.proc.stdout.readline())
        self.name = ready["master_name"]
        self.primary = ("127.0.0.1", ready["primary"]["port"])
        self.replica = ("127.0.0.1", ready["replicas"][0]["port"])
        self.sentinel = ("127.0.0.1", ready["sentinels"][0]["port"])

    def kill_primary(self):
        # The primary dies now: every connection dropped, new ones closed.
        conn = redis.Redis(*self.primary)
        with pytest.raises(redis.ConnectionError):
            conn.execute_command("COORDIS.REPLICATION", "DIE")
        conn.close()

    def step(self):
        replica = redis.Redis(*self.replica)
        replica.execute_command("COORDIS.CLOCK", "ADVANCE", STEP_MS)
        replica.close()
        time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


class RedisGroup:
    """redis-server primary and replica, `redis-server --sentinel`."""

    def __init__(self):
        if not shutil.which("redis-server") or not shutil.which("redis-cli"):
            if os.environ.get("COORDIS_REQUIRE_REDIS") == "1":
                pytest.fail("COORDIS_REQUIRE_REDIS=1 but redis-server/redis-cli are not on PATH")
            print("\n*** SKIPPED: redis-server is not on PATH: no Sentinel group ***", file=sys.stderr)
            pytest.skip("redis-server is not on PATH")
        self.work = tempfile.mkdtemp()
        self.procs = {}
        self.name = "mymaster"
        self.primary = ("127.0.0.1", free_port())
        self.replica = ("127.0.0.1", free_port())
        self.sentinel = ("127.0.0.1", free_port())
        self.start("primary", [])
        self.start("replica", ["--replicaof", *map(str, self.primary), "--repl-diskless-sync-delay", "0"])
        until("the replica's link", lambda: b"master_link_status:up" in subprocess.run(
            ["redis-cli", "-p", str(self.replica[1]), "info", "replication"], capture_output=True).stdout)
        conf = os.path.join(self.work, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(f"sentinel monitor {self.name} 127.0.0.1 {self.primary[1]} 1\n"
                    f"sentinel down-after-milliseconds {self.name} 1000\n"
                    f"sentinel failover-timeout {self.name} 10000\n")
        self.start("sentinel", [], conf=conf)
        sentinel = redis.Redis(*self.sentinel, decode_responses=True)
        until("the Sentinel to see the replica", lambda: any(
            r.get("master-link-status") == "ok" for r in self.replicas_seen(sentinel)))
        sentinel.close()

    def replicas_seen(self, sentinel):
        try:
            return sentinel.sentinel_slaves(self.name)
        except redis.ConnectionError:
            return []

    def start(self, role, args, conf=None):
        port = {"primary": self.primary, "replica": self.replica, "sentinel": self.sentinel}[role][1]
        d = os.path.join(self.work, role)
        os.mkdir(d)
        cmd = ["redis-server"] + ([conf, "--sentinel"] if conf else []) + [
            "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--logfile", os.path.join(d, "log")]
        if not conf:
            cmd += ["--save", "", "--appendonly", "no"]
        self.procs[role] = subprocess.Popen(cmd + args)
        until(f"redis-server ({role}) on {port}", lambda: subprocess.run(
            ["redis-cli", "-p", str(port), "ping"], capture_output=True).stdout.strip() == b"PONG")

    def kill_primary(self):
        self.procs["primary"].kill()
        self.procs["primary"].wait()

    def step(self):
        time.sleep(0.1)

    def stop(self):
        for p in self.procs.values():
            p.terminate()
        for p in self.procs.values():
            p.wait(timeout=30)
        shutil.rmtree(self.work, ignore_errors=True)


@pytest.fixture
def group(request):
    g = RedisGroup() if on_redis(request.config) else CoordisGroup()
    try:
        yield g
    finally:
        g.stop()


def role(addr):
    """ROLE's first word from `addr`, or None while its connections are
    being killed (the Sentinel's CLIENT KILL can take ours too)."""
    conn = redis.Redis(*addr)
    try:
        return conn.role()[0]
    except redis.ConnectionError:
        return None
    finally:
        conn.close()


def tcp_port(client):
    """The port of the server the client's connection reached."""
    return client.info("server")["tcp_port"]


def failed_over(group, sentinel):
    """Moves the failover on (coordis: the clock; Redis: real time) until
    the Sentinel names the replica as the primary."""
    def names_the_replica():
        try:
            return sentinel.discover_master(group.name) == group.replica
        except MasterNotFoundError:
            # The primary is down and no replica promoted yet.
            return False

    until("the Sentinel to fail over", names_the_replica, step=group.step)


def test_redis_py_sentinel_lock_survives_the_primary_dying(group):
    sentinel = Sentinel([group.sentinel], socket_timeout=5)
    assert sentinel.discover_master(group.name) == group.primary
    assert sentinel.discover_slaves(group.name) == [group.replica]
    master = sentinel.master_for(group.name, socket_timeout=5)
    lock = master.lock("lock:job", timeout=300)
    assert lock.acquire(blocking=False)
    # The mitigation: the lock counts once the replica acknowledged it.
    assert master.execute_command("WAIT", 1, 5000) == 1
    replica = sentinel.slave_for(group.name, socket_timeout=5)
    assert replica.get("lock:job") == lock.local.token
    group.kill_primary()
    failed_over(group, sentinel)
    # The same client, through the Sentinel, now on the promoted replica:
    # the lock is there, still owned, still exclusive.
    assert retried(lock.owned)
    assert tcp_port(master) == group.replica[1]
    assert not master.lock("lock:job", timeout=300).acquire(blocking=False)
    assert lock.extend(60)
    lock.release()
    other = master.lock("lock:job", timeout=300)
    assert other.acquire(blocking=False)
    other.release()


def test_redis_py_sentinel_rq_queue_through_sentinel_failover(group):
    sentinel = Sentinel([group.sentinel], socket_timeout=5)
    master = sentinel.master_for(group.name, socket_timeout=5)
    queue = Queue(f"failover-{uuid.uuid4().hex[:8]}", connection=master)
    before = [queue.enqueue(jobs.add, i, 10) for i in range(3)]
    assert master.execute_command("WAIT", 1, 5000) == 1
    # The operator's failover: the old primary lives on as a replica.
    sentinel.sentinels[0].sentinel_failover(group.name)
    failed_over(group, sentinel)
    # Until the Sentinel turns the old primary into a replica (it waits to
    # see it still claim the role), it takes writes, on Redis too: clients
    # connected to it write there. Its CLIENT KILL then sends them on.
    until("the old primary to become a replica", lambda: role(group.primary) == b"slave", step=group.step)
    retried(lambda: master.set("probe", "after"))
    assert tcp_port(master) == group.replica[1]
    after = retried(lambda: queue.enqueue(jobs.add, 100, 1))
    worker = SimpleWorker([queue], connection=master)
    assert worker.work(burst=True)
    assert [job.latest_result().return_value for job in before + [after]] == [10, 11, 12, 101]
    assert len(queue) == 0
