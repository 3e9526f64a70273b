"""How much a server gives one client: time to send a request, connections, waiting calls, long work.

The values live in one frozen :class:`Limits` that ``stratamem serve`` builds
from its flags and hands to :func:`~stratamem.web.create_app` (body deadline,
waiting library calls, the work queue) and to the HTTP protocol
(:mod:`stratamem.web.protocol`: receipt deadline, connection cap). What was
refused or timed out is counted in :data:`COUNTERS` and shown by ``/api/v1/metrics``,
not logged line by line: a flood of refusals must not become a flood of log lines.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["COUNTERS", "Counters", "Limits"]


@dataclass(frozen=True)
class Limits:
    """The server's limits (see ``docs/web.md``, *Limits*).

    Args:
        header_timeout: Seconds a client has to send a request line and its
            headers, counted from the connection (or from the previous response
            on a kept-alive one). Past it the server answers 408 and closes.
        min_body_rate: Bytes per second a body must average: each byte received
            extends the deadline by ``1 / min_body_rate`` seconds, so a large upload
            at a normal speed finishes and a trickle does not hold the connection.
        keep_alive_timeout: Seconds an idle kept-alive connection stays open.
        max_connections: Open connections at most; one more is answered 503 and
            closed at once. ``None``: derived from the open-file limit at start
            (:func:`stratamem.web.serving.connection_cap`).
        max_header_bytes: Largest request line plus headers (h11's buffer).
        backlog: Connections the kernel queues before the server accepts them.
        max_waiting: Library calls running or waiting for the store at once;
            one more is answered 503 at once (keeps threads free for the rest).
        lock_wait: Seconds a call waits for the store before it is answered 503.
        work_queue: Long jobs (import, seal) waiting behind the one that runs;
            one more is answered 503.
        retry_after: Seconds a 503 asks the client to wait (``Retry-After``).
    """

    header_timeout: float = 10.0
    min_body_rate: int = 16 * 1024
    keep_alive_timeout: int = 5
    max_connections: int | None = None
    max_header_bytes: int = 16 * 1024
    backlog: int = 128
    max_waiting: int = 32
    lock_wait: float = 30.0
    work_queue: int = 2
    retry_after: int = 5

    def receipt_deadline(self, body_bytes: int) -> float:
        """Seconds allowed to receive a request whose body is ``body_bytes`` long."""
        return self.header_timeout + body_bytes / self.min_body_rate


class Counters:
    """Process-wide counts of what the server refused (thread-safe; read by ``/api/v1/metrics``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.connections_refused = 0
        """Connections closed at once because :attr:`Limits.max_connections` were open."""
        self.requests_timed_out = 0
        """Connections closed because a request was not received in time (408)."""
        self.calls_refused = 0
        """Requests answered 503 because the store was busy or the work queue full."""

    def add(self, name: str, n: int = 1) -> None:
        """Add ``n`` to the counter ``name``."""
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def prometheus(self) -> str:
        """The counters as Prometheus text."""
        lines = []
        for name, help_text in (
            ("connections_refused", "Connections closed at once: the connection cap was reached."),
            ("requests_timed_out", "Connections closed: a request was not received within its deadline."),
            ("calls_refused", "Requests answered 503: the store was busy or the work queue full."),
        ):
            lines += [
                f"# HELP stratamem_http_{name}_total {help_text}",
                f"# TYPE stratamem_http_{name}_total counter",
                f"stratamem_http_{name}_total {getattr(self, name)}",
            ]
        return "\n".join(lines) + "\n"


COUNTERS = Counters()
"""The counters of this process's server."""
