"""A minimal RESP2 connection for the test-control plane. The controls use
their own socket rather than redis-py so that `coordis.Server` needs no
client library and so that no retry layer ever sends a command twice (a
retried `COORDIS.SERVER RESTART` would restart the server again)."""

from __future__ import annotations

import socket
from typing import List, Optional, Union

Reply = Union[None, int, bytes, str, "ReplyError", List["Reply"]]


class ReplyError(Exception):
    """An error reply (`-ERR ...`) from the server; `str()` is its text."""


class ConnectionClosed(Exception):
    """The server closed the connection before a whole reply arrived."""


class Connection:
    """One blocking connection speaking RESP2: `call(*args)` sends a command
    and reads exactly one reply."""

    def __init__(self, host: str, port: int, password: Optional[str], timeout: float) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout)
        self._buf = b""
        if password is not None:
            self.call("AUTH", password)

    def close(self) -> None:
        self._sock.close()

    def send(self, *args: Union[str, int, float, bytes]) -> None:
        parts = [b"*%d\r\n" % len(args)]
        for arg in args:
            data = arg if isinstance(arg, bytes) else str(arg).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
        self._sock.sendall(b"".join(parts))

    def call(self, *args: Union[str, int, float, bytes]) -> Reply:
        """Sends one command; returns its reply, raising `ReplyError` for an
        error reply and `ConnectionClosed` if the server closed first."""
        self.send(*args)
        reply = self.read()
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    def read(self) -> Reply:
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return ReplyError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self._exactly(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            return [self.read() for _ in range(n)]
        raise ConnectionClosed(f"unexpected reply line {line!r}")

    def expect_close(self) -> None:
        """Waits for the server to close this connection (DOWN and RESTART
        drop the caller without a reply); an error reply raises."""
        try:
            reply = self.read()
        except (ConnectionClosed, OSError):
            return
        if isinstance(reply, ReplyError):
            raise reply
        raise ConnectionClosed(f"expected the server to drop the connection, got {reply!r}")

    def _fill(self) -> None:
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ConnectionClosed("the server closed the connection")
        self._buf += chunk

    def _line(self) -> bytes:
        while b"\r\n" not in self._buf:
            self._fill()
        line, self._buf = self._buf.split(b"\r\n", 1)
        return line

    def _exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        data, self._buf = self._buf[:n], self._buf[n:]
        return data
