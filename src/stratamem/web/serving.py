"""Running the app under uvicorn with the server's limits: the open-file limit, the connection cap, quiet logs.

:func:`uvicorn_config` is what ``stratamem serve`` runs (and what a test or an
embedding program can run too): uvicorn with :mod:`stratamem.web.protocol`'s
h11 protocol, the keep-alive timeout, a small listen backlog and h11's header
buffer bound, and no concurrency limit of uvicorn's own (the protocol's cap
refuses at connect time instead of after a request has been read).

At the open-file limit the asyncio accept loop logs one traceback per failed
``accept()`` (tens of megabytes a minute); :class:`RepeatFilter` keeps one
line per message every 10 s for the ``asyncio`` and ``uvicorn.error`` loggers.
"""

from __future__ import annotations

import logging
import os
import resource
import threading
import time
from typing import Any

from .limits import Limits

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "RESERVED_FILES",
    "RepeatFilter",
    "connection_cap",
    "quiet_logs",
    "uvicorn_config",
]

DEFAULT_MAX_CONNECTIONS = 1000
"""Connections served at once when the open-file limit leaves room for more."""

RESERVED_FILES = 32
"""File descriptors kept free beyond those open at start: store files, WAL, archive, PostgreSQL pool, logs."""


def connection_cap(requested: int | None = None) -> tuple[int, int]:
    """``(connections, backlog)`` this process can keep open: at most ``requested`` (default 1,000) connections.

    Raises the soft ``RLIMIT_NOFILE`` to the hard limit first (an unprivileged
    process may), then keeps :data:`RESERVED_FILES` descriptors beyond those
    already open free for the store and the logs. The listen backlog is sized
    from the same room: the event loop accepts up to ``backlog`` connections
    per wake-up before any of them can be refused, so two such batches must
    fit beside the cap, or ``accept()`` fails with ``EMFILE``.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
    if soft != resource.RLIM_INFINITY and want > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):  # a container may forbid it: keep the soft limit
            pass
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: assume a small process
        in_use = 64
    room = (1 << 20 if soft == resource.RLIM_INFINITY else soft) - in_use - RESERVED_FILES
    backlog = max(1, min(128, room // 4))
    return max(1, min(requested or DEFAULT_MAX_CONNECTIONS, room - 2 * backlog)), backlog


class RepeatFilter(logging.Filter):
    """Let one record per message template through every ``every`` seconds; count the rest.

    The record that passes after a quiet spell says how many were dropped, and
    a repeat drops its traceback (the first one showed it).
    """

    def __init__(self, every: float = 10.0) -> None:
        super().__init__()
        self.every = every
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = f"{record.name}:{str(record.msg)[:80]}"
        now = time.monotonic()
        with self._lock:
            last, dropped = self._seen.get(key, (float("-inf"), 0))
            if now - last < self.every:
                self._seen[key] = (last, dropped + 1)
                return False
            self._seen[key] = (now, 0)
        if last != float("-inf"):
            record.exc_info = None
            record.exc_text = None
            if dropped:
                record.msg = f"{record.msg} ({dropped} more like it in the last {self.every:g} s)"
        return True


def quiet_logs(every: float = 10.0) -> RepeatFilter:
    """Install one :class:`RepeatFilter` on the ``asyncio`` and ``uvicorn.error`` loggers; returns it."""
    flt = RepeatFilter(every)
    for name in ("asyncio", "uvicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RepeatFilter) for f in logger.filters):
            logger.addFilter(flt)
    return flt


def uvicorn_config(app: Any, host: str, port: int, limits: Limits, *, log_level: str = "warning") -> Any:
    """A ``uvicorn.Config`` serving ``app`` with ``limits`` (``limits.max_connections`` must be set)."""
    import uvicorn

    from .protocol import protocol_class

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_class(limits),
        log_level=log_level,
        server_header=False,
        timeout_keep_alive=limits.keep_alive_timeout,
        backlog=limits.backlog,
        h11_max_incomplete_event_size=limits.max_header_bytes,
    )
