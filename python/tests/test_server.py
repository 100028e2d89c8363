"""coordis.Server on its own: options, start and stop, the binary override,
and a start that fails saying why."""

import os
import stat

import pytest
import redis

import coordis

pytestmark = pytest.mark.coordis_only


def test_start_reads_the_ready_line_and_stop_ends_the_process():
    with coordis.Server() as server:
        assert server.url == f"redis://127.0.0.1:{server.port}/0"
        assert server.client().ping()
        pid = server.pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(coordis.CoordisError):
        server.port


def test_password_databases_and_directives():
    options = {"notify-keyspace-events": "KEA", "maxmemory-policy": "allkeys-lru"}
    with coordis.Server(password="s3 cret", databases=2, directives=options) as server:
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=server.port).ping()
        client = server.client(decode_responses=True)
        assert client.ping()
        assert client.config_get("databases") == {"databases": "2"}
        assert client.config_get("notify-keyspace-events")["notify-keyspace-events"] in ("AKE", "KEA")
        with pytest.raises(redis.ResponseError, match="DB index is out of range"):
            client.execute_command("SELECT", 2)
        assert server.clock.freeze() > 0, "the controls authenticate too"


def test_test_commands_off_refuses_the_controls():
    with coordis.Server(test_commands="no") as server:
        with pytest.raises(coordis.ReplyError, match="enable-test-commands"):
            server.clock.freeze()


def test_a_bad_directive_fails_the_start_with_the_servers_own_words():
    with pytest.raises(coordis.CoordisError, match="(?s)did not start.*no-such-directive"):
        coordis.Server(directives={"no-such-directive": "1"}).start()


def test_the_binary_env_var_wins(tmp_path, monkeypatch):
    wrapper = tmp_path / "wrapped-server"
    marker = tmp_path / "ran"
    wrapper.write_text(f'#!/bin/sh\necho "$@" > {marker}\nexec {coordis.find_binary()} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(coordis.BINARY_ENV, str(wrapper))
    assert coordis.find_binary() == str(wrapper)
    with coordis.Server(databases=3) as server:
        assert server.client().ping()
    assert "--port 0" in marker.read_text() and "--databases 3" in marker.read_text()
