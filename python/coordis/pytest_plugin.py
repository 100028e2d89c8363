"""The pytest plugin (entry point `pytest11`): a session-wide coordis-server
and per-test fixtures over it. With `--redis-url URL` (or
`$COORDIS_REDIS_URL`) the same tests run against that Redis instead: the
client fixtures connect there, and the fixtures and tests that need
coordis's test controls are skipped, saying why.

Fixtures: `coordis_server` (session: the `coordis.Server`), `coordis_url`
(session), `coordis_backend` (`"coordis"` or `"redis"`), `coordis` (a
redis-py client on a flushed database, per test), `coordis_async` (the same
with `redis.asyncio`, under pytest-asyncio), `coordis_clock` (the test
clock, reset after the test), `coordis_faults` (the fault rules, cleared
before and after the test). Override `coordis_server_options` (a dict of
`Server` keyword arguments) in a conftest to configure the server. Marker:
`@pytest.mark.coordis_only` for a test that needs the test controls without
taking one of their fixtures."""

from __future__ import annotations

import os
from typing import Any, AsyncIterator, Dict, Iterator, Optional

import pytest
import redis

from ._server import Clock, Faults, Server

#: The environment variable `--redis-url` defaults to.
REDIS_URL_ENV = "COORDIS_REDIS_URL"
MARKER = "coordis_only"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("coordis")
    group.addoption(
        "--redis-url",
        default=os.environ.get(REDIS_URL_ENV) or None,
        help=f"run against the Redis at this URL instead of coordis (default ${REDIS_URL_ENV}); "
        "each test flushes its database; tests needing coordis's test controls are skipped",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}: the test needs coordis's test controls (skipped on real Redis)")


def _redis_url(config: pytest.Config) -> Optional[str]:
    return config.getoption("redis_url")


def pytest_report_header(config: pytest.Config) -> str:
    url = _redis_url(config)
    if url:
        return f"coordis: running against real Redis at {url} (coordis-only tests skip)"
    return "coordis: running against coordis-server"


def _skip_reason(config: pytest.Config, what: str) -> str:
    return f"{what} needs coordis's test controls; this run is against the Redis at {_redis_url(config)}"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker(MARKER) is not None and _redis_url(item.config):
        pytest.skip(_skip_reason(item.config, f"@{MARKER}"))


@pytest.fixture(scope="session")
def coordis_server_options() -> Dict[str, Any]:
    """Keyword arguments for the session's `coordis.Server`; override in a
    conftest (`password`, `databases`, `directives`, ...)."""
    return {}


@pytest.fixture(scope="session")
def _coordis_process(request: pytest.FixtureRequest, coordis_server_options: Dict[str, Any]) -> Iterator[Optional[Server]]:
    if _redis_url(request.config):
        yield None
        return
    with Server(**coordis_server_options) as server:
        yield server


@pytest.fixture(scope="session")
def coordis_backend(request: pytest.FixtureRequest) -> str:
    """`"redis"` when the run is against `--redis-url`, else `"coordis"`."""
    return "redis" if _redis_url(request.config) else "coordis"


@pytest.fixture(scope="session")
def coordis_url(request: pytest.FixtureRequest, _coordis_process: Optional[Server]) -> str:
    """The URL the tests connect to: the session's coordis-server, or `--redis-url`."""
    if _coordis_process is None:
        url = _redis_url(request.config)
        assert url is not None
        return url
    return _coordis_process.url


@pytest.fixture
def coordis(coordis_url: str) -> Iterator["redis.Redis"]:
    """A redis-py client on a database flushed for this test."""
    client = redis.Redis.from_url(coordis_url)
    client.flushdb()
    yield client
    client.close()


def _controlled(request: pytest.FixtureRequest, server: Optional[Server], fixture: str) -> Server:
    if server is None:
        pytest.skip(_skip_reason(request.config, f"the {fixture} fixture"))
    return server


@pytest.fixture(scope="session")
def coordis_server(request: pytest.FixtureRequest, _coordis_process: Optional[Server]) -> Server:
    """The session's `coordis.Server` (skipped on real Redis)."""
    return _controlled(request, _coordis_process, "coordis_server")


@pytest.fixture
def coordis_clock(request: pytest.FixtureRequest, _coordis_process: Optional[Server]) -> Iterator[Clock]:
    """The test clock (`coordis.Clock`), back on real time after the test
    (skipped on real Redis)."""
    server = _controlled(request, _coordis_process, "coordis_clock")
    yield server.clock
    server.clock.reset()


@pytest.fixture
def coordis_faults(request: pytest.FixtureRequest, _coordis_process: Optional[Server]) -> Iterator[Faults]:
    """The fault rules (`coordis.Faults`), none before the test and none left
    after it (skipped on real Redis)."""
    server = _controlled(request, _coordis_process, "coordis_faults")
    server.faults.clear()
    yield server.faults
    server.faults.clear()


try:
    import pytest_asyncio
except ImportError:  # the async fixtures need pytest-asyncio (coordis[asyncio])

    @pytest.fixture
    def coordis_async() -> None:
        """Needs pytest-asyncio (`pip install coordis[asyncio]`)."""
        pytest.skip("the coordis_async fixture needs pytest-asyncio (pip install 'coordis[asyncio]')")

else:
    import redis.asyncio

    @pytest_asyncio.fixture
    async def coordis_async(coordis_url: str) -> AsyncIterator["redis.asyncio.Redis"]:
        """A `redis.asyncio` client on a database flushed for this test."""
        client = redis.asyncio.Redis.from_url(coordis_url)
        await client.flushdb()
        yield client
        await client.aclose()
