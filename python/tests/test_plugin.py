"""The plugin's fixtures on whichever backend this run has (coordis, or the
real Redis at --redis-url), and inner pytest sessions that show the
backend switch: the same tests, with the coordis-only ones skipped loudly."""

import os

import pytest
import redis

INNER_INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"

INNER_TESTS = """
import pytest

def test_writes(coordis):
    coordis.set("leak", "1")

def test_each_test_gets_a_flushed_database(coordis):
    assert coordis.get("leak") is None

def test_clock(coordis_clock):
    coordis_clock.freeze()

def test_server(coordis_server):
    assert coordis_server.port > 0

@pytest.mark.coordis_only
def test_marked(coordis):
    coordis.execute_command("COORDIS.CLOCK", "GET")
"""


def test_the_backend_is_the_one_the_run_asked_for(coordis, coordis_backend):
    expected = os.environ.get("COORDIS_EXPECT_BACKEND")
    if expected:
        assert coordis_backend == expected
    assert ("coordis_version" in coordis.info("server")) == (coordis_backend == "coordis")


def test_a_redis_py_lock_on_the_flushed_database(coordis):
    assert coordis.dbsize() == 0
    lock = coordis.lock("lock:job", timeout=5)
    assert lock.acquire(blocking=False)
    assert not coordis.lock("lock:job", timeout=5).acquire(blocking=False)
    lock.release()


@pytest.mark.asyncio
async def test_the_async_client(coordis_async):
    assert await coordis_async.dbsize() == 0
    lock = coordis_async.lock("lock:async", timeout=5)
    assert await lock.acquire(blocking=False)
    await coordis_async.publish("events", "x")
    await lock.release()
    assert await coordis_async.get("lock:async") is None


def run_inner(pytester, *args):
    pytester.makeini(INNER_INI)
    pytester.makepyfile(test_inner=INNER_TESTS)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", *args)


def test_on_coordis_every_inner_test_runs(pytester, monkeypatch):
    monkeypatch.delenv("COORDIS_REDIS_URL", raising=False)
    result = run_inner(pytester)
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["coordis: running against coordis-server"])


@pytest.mark.parametrize("how", ["flag", "env"])
def test_redis_url_runs_the_same_tests_and_skips_the_coordis_only_ones_loudly(pytester, monkeypatch, coordis_url, how):
    # Any Redis will do as the inner run's "real Redis": this run's own backend.
    if how == "flag":
        monkeypatch.delenv("COORDIS_REDIS_URL", raising=False)
        result = run_inner(pytester, "--redis-url", coordis_url)
    else:
        monkeypatch.setenv("COORDIS_REDIS_URL", coordis_url)
        result = run_inner(pytester)
    result.assert_outcomes(passed=2, skipped=3)
    result.stdout.fnmatch_lines(
        [
            f"coordis: running against real Redis at {coordis_url}*",
            f"SKIPPED*the coordis_clock fixture needs coordis's test controls; this run is against the Redis at {coordis_url}",
            "SKIPPED*the coordis_server fixture needs coordis's test controls*",
            "SKIPPED*@coordis_only needs coordis's test controls*",
        ],
        consecutive=False,
    )


def test_server_options_come_from_an_overridden_fixture(pytester, monkeypatch):
    monkeypatch.delenv("COORDIS_REDIS_URL", raising=False)
    pytester.makeconftest(
        """
import pytest

@pytest.fixture(scope="session")
def coordis_server_options():
    return {"password": "pw", "databases": 3}
"""
    )
    pytester.makepyfile(
        """
def test_configured(coordis, coordis_server):
    assert coordis_server.url.startswith("redis://:pw@")
    assert coordis.config_get("databases") == {"databases": "3"}
"""
    )
    pytester.makeini(INNER_INI)
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
