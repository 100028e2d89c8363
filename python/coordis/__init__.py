"""coordis for Python: `Server` starts the coordis-server this wheel
carries on a free port and reaches its test clock, fault rules and
server-wide faults; `coordis.pytest_plugin` (loaded by pytest from the
`pytest11` entry point) gives the fixtures."""

from ._resp import ConnectionClosed, ReplyError
from ._server import BINARY_ENV, Clock, ClockState, CoordisError, FaultRule, Faults, Server, find_binary

__all__ = [
    "BINARY_ENV",
    "Clock",
    "ClockState",
    "ConnectionClosed",
    "CoordisError",
    "FaultRule",
    "Faults",
    "ReplyError",
    "Server",
    "find_binary",
]
