"""The typed test controls against the session's coordis-server: each
wrapper reaches the COORDIS.* subcommand it names and does what it says."""

import threading
import time

import pytest
import redis

from coordis import ClockState, ReplyError


def test_clock_freeze_advance_jump_set_resume(coordis, coordis_clock):
    frozen_at = coordis_clock.freeze()
    assert coordis_clock.get() == ClockState(now_ms=frozen_at, frozen=True, offset_ms=0)
    coordis.set("lock", "me", px=30_000)
    assert coordis_clock.advance(30_000) == frozen_at + 30_000
    assert coordis.get("lock") == b"me", "alive at its deadline, as in Redis"
    coordis_clock.advance(1)
    assert coordis.get("lock") is None, "expired 1 ms after it"
    assert coordis_clock.jump(-5_001) == frozen_at + 25_000
    assert coordis_clock.set(2_000_000_000_000) == 2_000_000_000_000
    assert int(coordis.time()[0]) == 2_000_000_000, "TIME reads the test clock"
    coordis_clock.resume()
    state = coordis_clock.get()
    assert not state.frozen and state.offset_ms > 10**11, state
    assert abs(coordis_clock.reset() - time.time() * 1000) < 5_000
    assert coordis_clock.get().offset_ms == 0


def test_clock_advance_answers_a_blocked_client(coordis, coordis_clock, coordis_url):
    coordis_clock.freeze()
    got = []
    waiter = threading.Thread(target=lambda: got.append(redis.Redis.from_url(coordis_url).blpop("q", timeout=10)))
    waiter.start()
    while int(coordis.info("clients")["blocked_clients"]) == 0:
        time.sleep(0.01)
    coordis_clock.advance(10_001)  # a timeout is due once passed, as in Redis
    waiter.join(5)
    assert got == [None], "timed out by the test clock, not by real time"


def test_faults_add_list_delete_clear(coordis, coordis_faults):
    loading = coordis_faults.add(command="get", key="job:*", times=1, error="LOADING Redis is loading the dataset in memory")
    coordis_faults.add(command="set", probability=0.5, delay=5, jitter=2)
    with pytest.raises(redis.BusyLoadingError):
        coordis.get("job:1")
    assert coordis.get("job:1") is None, "only once"
    rules = coordis_faults.list()
    assert [r.id for r in rules][0] == loading
    first, second = rules
    assert (first.command, first.key, first.times_left, first.matched, first.fired) == ("get", "job:*", 0, 2, 1)
    assert first.action == "error LOADING Redis is loading the dataset in memory"
    assert (second.probability, second.action) == (0.5, "delay 5 jitter 2")
    assert coordis_faults.delete(loading) and not coordis_faults.delete(loading)
    coordis_faults.clear()
    assert coordis_faults.list() == []


def test_fault_lose_reply_runs_the_command_and_drops_the_connection(coordis, coordis_faults, coordis_url):
    coordis_faults.add(command="set", key="lock:*", times=1, lose_reply=True)
    victim = redis.Redis.from_url(coordis_url, retry_on_error=[])
    with pytest.raises(redis.ConnectionError):
        victim.set("lock:job", "me", nx=True)
    assert coordis.get("lock:job") == b"me", "the SET ran; only its reply was lost"


def test_fault_rules_take_exactly_one_action(coordis_faults):
    with pytest.raises(ValueError, match="exactly one action"):
        coordis_faults.add(command="get")
    with pytest.raises(ValueError, match="exactly one action"):
        coordis_faults.add(drop=True, hang=True)
    with pytest.raises(ValueError, match="jitter= goes with delay="):
        coordis_faults.add(drop=True, jitter=3)
    with pytest.raises(ReplyError):
        coordis_faults.add(probability=2, drop=True)
    assert coordis_faults.list() == []


def test_fault_seed_replays_probability_draws(coordis, coordis_faults):
    def run():
        coordis_faults.clear()
        coordis_faults.seed(7)
        # redis-py sends INCR as INCRBY.
        coordis_faults.add(command="incr*", probability=0.5, error="ERR injected")
        fired = []
        for _ in range(32):
            try:
                coordis.incr("n")
                fired.append(False)
            except redis.ResponseError:
                fired.append(True)
        return fired

    first = run()
    assert any(first) and not all(first)
    assert run() == first


def test_pause_stops_the_world_for_that_long(coordis, coordis_server):
    coordis_server.pause(300)
    started = time.monotonic()
    assert coordis.ping()
    assert 0.2 < time.monotonic() - started < 5


def test_down_drops_connections_then_comes_back_with_the_data(coordis, coordis_server):
    coordis.set("kept", "1")
    coordis_server.down(300)
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=coordis_server.port, retry_on_error=[]).ping()
    deadline = time.monotonic() + 5
    while True:
        try:
            assert coordis.get("kept") == b"1"
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_restart_keeps_or_loses_the_data(coordis, coordis_server):
    coordis.set("k", "v")
    coordis_server.restart()
    assert coordis.get("k") == b"v"
    coordis_server.restart(lose_data=True)
    assert coordis.get("k") is None


def test_seed_makes_random_choices_replay(coordis, coordis_server):
    coordis.sadd("s", *range(100))

    def draw():
        coordis_server.seed(42)
        return [coordis.srandmember("s") for _ in range(10)]

    assert draw() == draw()
