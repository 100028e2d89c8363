"""The matrix runs on the coordis pytest plugin (python/coordis, loaded by
run.sh with `-p coordis.pytest_plugin`): run.sh runs it once on
coordis-server and once with --redis-url on a redis-server 7.0.15 it
starts, so every test that takes `url` runs on both."""

import pytest


@pytest.fixture
def url(coordis, coordis_url):
    """The backend's URL, its database flushed for this test (the plugin's
    `coordis` fixture flushes it)."""
    return coordis_url


@pytest.fixture
def backend(coordis_backend):
    return coordis_backend
