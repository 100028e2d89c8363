"""`Server`: one coordis-server child process on a free loopback port
(started with `--port 0`; its JSON ready line says which), and typed
wrappers over its test-control commands (`COORDIS.CLOCK`, `COORDIS.FAULT`,
`COORDIS.SERVER`)."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

from ._resp import Connection, Reply

if TYPE_CHECKING:  # redis-py is needed only by `Server.client`.
    import redis

BINARY_NAME = "coordis-server"
#: The environment variable that names the coordis-server binary to run,
#: ahead of the one installed with this package.
BINARY_ENV = "COORDIS_SERVER_BIN"
#: How long `stop()` waits after SIGTERM (coordis drains for up to 5 s)
#: before it kills the process.
STOP_GRACE_SECONDS = 10.0
#: How much of the server's log a start failure quotes.
LOG_TAIL_BYTES = 4000

Directive = Union[str, int]


class CoordisError(Exception):
    """coordis-server could not be found, started, or reached."""


def find_binary() -> str:
    """The coordis-server to run: `$COORDIS_SERVER_BIN` if set, else the one
    the wheel installed into this interpreter's scripts directory (or the
    user scheme's, after `pip install --user`), else one on `PATH`."""
    explicit = os.environ.get(BINARY_ENV)
    if explicit:
        return explicit
    exe = BINARY_NAME + (".exe" if os.name == "nt" else "")
    dirs = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    try:
        dirs.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    for directory in dirs:
        candidate = os.path.join(directory, exe)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(BINARY_NAME)
    if found:
        return found
    raise CoordisError(f"{BINARY_NAME} not found (pip install coordis, or set {BINARY_ENV})")


@dataclass(frozen=True)
class ClockState:
    """`COORDIS.CLOCK GET`: the test clock's time in unix ms, whether it is
    frozen, and (running) its offset from real time in ms."""

    now_ms: int
    frozen: bool
    offset_ms: int


@dataclass(frozen=True)
class FaultRule:
    """One fault rule as `COORDIS.FAULT LIST` reports it, with how many
    commands it matched and how often it fired."""

    id: int
    command: Optional[str]
    key: Optional[str]
    client: Optional[str]
    after: int
    times_left: Optional[int]
    probability: Optional[float]
    action: str
    matched: int
    fired: int


def _text(value: Reply) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _int(value: Reply) -> int:
    if isinstance(value, int):
        return value
    raise CoordisError(f"expected an integer reply, got {value!r}")


class Clock:
    """The server's test clock (`COORDIS.CLOCK`). Every move settles the
    server before it returns: keys due by the new time have expired (with
    their keyspace events) and blocked clients past their timeout are
    answered. Each move returns the clock's new time in unix ms."""

    def __init__(self, server: "Server") -> None:
        self._server = server

    def get(self) -> ClockState:
        """The clock's time, whether it is frozen, and its offset from real time."""
        reply = self._server.command("COORDIS.CLOCK", "GET")
        if not (isinstance(reply, list) and len(reply) == 3):
            raise CoordisError(f"unexpected COORDIS.CLOCK GET reply {reply!r}")
        now, mode, offset = reply
        return ClockState(now_ms=_int(now), frozen=_text(mode) == "frozen", offset_ms=_int(offset))

    def now_ms(self) -> int:
        """The clock's time in unix ms."""
        return self.get().now_ms

    def freeze(self) -> int:
        """Stops the clock: from now on time moves only by `advance`, `jump` and `set`."""
        return _int(self._server.command("COORDIS.CLOCK", "FREEZE"))

    def advance(self, ms: int) -> int:
        """Moves the clock forward by `ms` (frozen or running)."""
        return _int(self._server.command("COORDIS.CLOCK", "ADVANCE", int(ms)))

    def jump(self, ms: int) -> int:
        """Steps the clock by `ms`, forwards or (negative) backwards, as a wall-clock jump."""
        return _int(self._server.command("COORDIS.CLOCK", "JUMP", int(ms)))

    def set(self, unix_ms: int) -> int:
        """Sets the clock to `unix_ms`."""
        return _int(self._server.command("COORDIS.CLOCK", "SET", int(unix_ms)))

    def resume(self) -> int:
        """Lets a frozen clock run on from where it stands."""
        return _int(self._server.command("COORDIS.CLOCK", "RESUME"))

    def reset(self) -> int:
        """Back to real time, running."""
        return _int(self._server.command("COORDIS.CLOCK", "RESET"))


class Faults:
    """The server's fault rules (`COORDIS.FAULT`)."""

    def __init__(self, server: "Server") -> None:
        self._server = server

    def add(
        self,
        *,
        command: Optional[str] = None,
        key: Optional[str] = None,
        client: Optional[str] = None,
        after: Optional[int] = None,
        times: Optional[int] = None,
        probability: Optional[float] = None,
        error: Optional[str] = None,
        drop: bool = False,
        lose_reply: bool = False,
        hang: bool = False,
        delay: Optional[int] = None,
        jitter: Optional[int] = None,
        slice: Optional[int] = None,
        pause: Optional[int] = None,
    ) -> int:
        """Adds a rule and returns its id.

        The match: `command` (a command-name glob), `key` (a key glob),
        `client` (a client-name glob), `after` (fire only after this many
        matches), `times` (fire this many times, then stop), `probability`
        (0..1, drawn from the generator `seed` seeds).

        The action, exactly one: `error="LOADING ..."` (answer this error
        instead of running), `drop=True` (close before running),
        `lose_reply=True` (run, then close without the reply), `hang=True`
        (no answer until the rule is removed, then it runs), `delay=ms`
        (with `jitter=ms`: up to that much more), `slice=bytes` (write the
        replies a few bytes at a time, with `pause=ms` between pieces).
        """
        args: List[Any] = []
        for word, value in (("COMMAND", command), ("KEY", key), ("CLIENT", client)):
            if value is not None:
                args += [word, value]
        for word, number in (("AFTER", after), ("TIMES", times)):
            if number is not None:
                args += [word, int(number)]
        if probability is not None:
            args += ["PROBABILITY", repr(float(probability))]
        actions: List[List[Any]] = []
        if error is not None:
            actions.append(["ERROR", error])
        if drop:
            actions.append(["DROP"])
        if lose_reply:
            actions.append(["LOSE-REPLY"])
        if hang:
            actions.append(["HANG"])
        if delay is not None:
            actions.append(["DELAY", int(delay)] + (["JITTER", int(jitter)] if jitter is not None else []))
        elif jitter is not None:
            raise ValueError("jitter= goes with delay=")
        if slice is not None:
            actions.append(["SLICE", int(slice)] + (["PAUSE", int(pause)] if pause is not None else []))
        elif pause is not None:
            raise ValueError("pause= goes with slice=")
        if len(actions) != 1:
            raise ValueError(
                "a fault rule takes exactly one action: error=, drop=, lose_reply=, hang=, delay= or slice="
            )
        return _int(self._server.command("COORDIS.FAULT", "ADD", *args, *actions[0]))

    def list(self) -> List[FaultRule]:
        """The rules, in the order they were added, with their counts."""
        reply = self._server.command("COORDIS.FAULT", "LIST")
        if not isinstance(reply, list):
            raise CoordisError(f"unexpected COORDIS.FAULT LIST reply {reply!r}")
        rules = []
        for entry in reply:
            if not isinstance(entry, list):
                raise CoordisError(f"unexpected COORDIS.FAULT LIST entry {entry!r}")
            fields = {_text(entry[i]): entry[i + 1] for i in range(0, len(entry), 2)}
            times_left = fields["times-left"]
            probability = fields["probability"]
            rules.append(
                FaultRule(
                    id=_int(fields["id"]),
                    command=_text(fields["command"]),
                    key=_text(fields["key"]),
                    client=_text(fields["client"]),
                    after=_int(fields["after"]),
                    times_left=None if times_left is None else _int(times_left),
                    probability=None if probability is None else float(_text(probability) or 0),
                    action=_text(fields["action"]) or "",
                    matched=_int(fields["matched"]),
                    fired=_int(fields["fired"]),
                )
            )
        return rules

    def delete(self, rule_id: int) -> bool:
        """Removes one rule; False if there was none with that id. Commands a
        `hang` rule held then run."""
        return _int(self._server.command("COORDIS.FAULT", "DEL", int(rule_id))) == 1

    def clear(self) -> None:
        """Removes every rule."""
        self._server.command("COORDIS.FAULT", "CLEAR")

    def seed(self, n: int) -> None:
        """Seeds the generator `probability` draws from (a failing run replays)."""
        self._server.command("COORDIS.FAULT", "SEED", int(n))


class Server:
    """A coordis-server child process on a free port of `host`, with the
    test-control commands on for loopback clients (`enable-test-commands
    local`, as the Rust `Builder` has it).

    >>> with Server(password="secret") as server:
    ...     server.clock.freeze()
    ...     url = server.url
    """

    def __init__(
        self,
        *,
        password: Optional[str] = None,
        databases: Optional[int] = None,
        maxclients: Optional[int] = None,
        host: str = "127.0.0.1",
        test_commands: str = "local",
        directives: Optional[Mapping[str, Directive]] = None,
        binary: Optional[str] = None,
        startup_timeout: float = 10.0,
    ) -> None:
        """`directives` are any further redis.conf directives
        (`{"notify-keyspace-events": "KEA"}`), passed as `--name value`;
        `test_commands` is `enable-test-commands` (`local`, `yes` or `no`);
        `binary` overrides `find_binary()`."""
        self.password = password
        self.host = host
        self._argv = [binary or find_binary(), "--port", "0", "--bind", host]
        # A test server keeps no files unless `directives` ask for them
        # (`save`, `appendonly`, `dir`): coordis-server, like redis-server,
        # would otherwise save dump.rdb into the working directory.
        settings: Dict[str, Directive] = {"enable-test-commands": test_commands, "save": ""}
        if password is not None:
            settings["requirepass"] = password
        if databases is not None:
            settings["databases"] = databases
        if maxclients is not None:
            settings["maxclients"] = maxclients
        settings.update(directives or {})
        for name, value in settings.items():
            self._argv += [f"--{name}", str(value)]
        self._startup_timeout = startup_timeout
        self._proc: Optional[subprocess.Popen] = None
        self._log: Optional[IO[bytes]] = None
        self._port: Optional[int] = None
        # Set when `directives` open a TLS port (`{"tls-port": 0, ...}`):
        # the ready line names the port chosen.
        self._tls_port: Optional[int] = None
        self.clock = Clock(self)
        self.faults = Faults(self)

    # Lifecycle

    def start(self) -> "Server":
        """Starts the server and returns once it listens (its ready line)."""
        if self._proc is not None:
            raise CoordisError("already started")
        self._log = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(self._argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log)
        try:
            ready = json.loads(self._ready_line())
            self._port = int(ready["port"])
            self._tls_port = int(ready["tls_port"]) if "tls_port" in ready else None
        except BaseException:
            log = self.log_tail()
            self.stop()
            raise CoordisError(f"{self._argv[0]} did not start:\n{log}") from None
        return self

    def _ready_line(self) -> bytes:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + self._startup_timeout
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise CoordisError("no ready line in time")
            readable, _, _ = select.select([fd], [], [], left)
            if readable:
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise CoordisError("exited before it was ready")
                line += chunk
        return line

    def stop(self) -> None:
        """Stops the server (SIGTERM, then SIGKILL after a grace period)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self) -> str:
        """The end of the server's log so far (for failure messages)."""
        if self._log is None:
            return ""
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - LOG_TAIL_BYTES))
        return self._log.read().decode("utf-8", "replace")

    # Where it listens

    @property
    def port(self) -> int:
        """The port the server chose."""
        if self._port is None or self._proc is None:
            raise CoordisError("not started")
        return self._port

    @property
    def tls_port(self) -> Optional[int]:
        """The TLS port, when `directives` open one (`tls-port`, with
        `tls-cert-file`, `tls-key-file` and `tls-ca-cert-file`; `0` lets
        the server choose), else None."""
        if self._proc is None:
            raise CoordisError("not started")
        return self._tls_port

    @property
    def tls_url(self) -> Optional[str]:
        """`rediss://[:password@]host:tls_port/0` when there is a TLS port
        (redis-py: `Redis.from_url(url, ssl_ca_certs=..., ssl_certfile=...,
        ssl_keyfile=...)`), else None."""
        port = self.tls_port
        if port is None:
            return None
        auth = "" if self.password is None else ":" + urllib.parse.quote(self.password, safe="") + "@"
        return f"rediss://{auth}{self.host}:{port}/0"

    @property
    def pid(self) -> int:
        """The server process's id."""
        if self._proc is None:
            raise CoordisError("not started")
        return self._proc.pid

    @property
    def url(self) -> str:
        """`redis://[:password@]host:port/0`."""
        auth = "" if self.password is None else ":" + urllib.parse.quote(self.password, safe="") + "@"
        return f"redis://{auth}{self.host}:{self.port}/0"

    def client(self, **kwargs: Any) -> "redis.Redis":
        """A redis-py client for this server (`kwargs` go to `Redis.from_url`)."""
        import redis

        return redis.Redis.from_url(self.url, **kwargs)

    # Test controls

    def command(self, *args: Union[str, int, float, bytes]) -> Reply:
        """Sends one command on a fresh control connection and returns its
        reply (an error reply raises `coordis.ReplyError`)."""
        conn = self._connect()
        try:
            return conn.call(*args)
        finally:
            conn.close()

    def _connect(self) -> Connection:
        return Connection(self.host, self.port, self.password, timeout=self._startup_timeout)

    def _dropped_by(self, *args: Union[str, int]) -> None:
        conn = self._connect()
        try:
            conn.send(*args)
            conn.expect_close()
        finally:
            conn.close()

    def pause(self, ms: int) -> None:
        """A stop-the-world pause for `ms` of real time (`COORDIS.SERVER
        PAUSE`): no command runs, nothing expires, no waiter times out;
        clients see only silence, as from a GC pause or SIGSTOP."""
        self.command("COORDIS.SERVER", "PAUSE", int(ms))

    def down(self, ms: int) -> None:
        """Plays a dead server for `ms` of real time (`COORDIS.SERVER DOWN`):
        every connection dropped, new ones closed at once; then it is back
        with its data."""
        self._dropped_by("COORDIS.SERVER", "DOWN", int(ms))

    def restart(self, lose_data: bool = False) -> None:
        """Drops every connection, as a crash and restart does
        (`COORDIS.SERVER RESTART`); with `lose_data` every key and script is
        lost too, as by a Redis without persistence."""
        self._dropped_by("COORDIS.SERVER", "RESTART", "FLUSH" if lose_data else "KEEPDATA")

    def seed(self, n: int) -> None:
        """Seeds every random choice the server makes (SPOP, SRANDMEMBER,
        ZRANDMEMBER, HRANDFIELD, RANDOMKEY) so a test that uses them replays."""
        self.command("COORDIS.SERVER", "SEED", int(n))
