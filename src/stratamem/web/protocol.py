"""The HTTP/1.1 protocol ``stratamem serve`` runs: uvicorn's h11 protocol with a receipt deadline and a connection cap.

uvicorn (0.54) bounds the idle time between requests (keep-alive) but not the
time a client takes to *send* one: a client that opens a connection and sends
nothing, or trickles its headers or its body, holds a socket and a file
descriptor for ever. This subclass adds, per connection:

* **a receipt deadline**: a request must arrive whole within
  :attr:`Limits.header_timeout` seconds, plus ``1 / min_body_rate`` seconds per
  byte received (so an upload at a normal speed is never cut). It is armed when
  the connection opens and again after each response, and disarmed while a
  complete request is being handled. On expiry the server answers 408 (when no
  answer has started) and closes the connection;
* **a connection cap**: a connection beyond :attr:`Limits.max_connections` is
  answered 503 and closed at once, so the process never runs out of file
  descriptors (at ``EMFILE`` the event loop's accept loop would spin and log).

It overrides only ``connection_made``, ``data_received``, ``on_response_complete``
and ``connection_lost``, and reads uvicorn's ``cycle``, ``connections``,
``transport`` and ``loop`` attributes: internals, so uvicorn is pinned
(``constraints.txt``) and ``tests/test_web_limits.py`` fails on a release that
changes them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from .limits import COUNTERS, Limits

__all__ = ["GuardedH11Protocol", "protocol_class"]


def _raw_response(status: str, message: str, extra: str = "") -> bytes:
    body = json.dumps({"error": {"type": status.split(" ", 1)[1].replace(" ", ""), "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"connection: close\r\n{extra}\r\n"
    )
    return head.encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-receipt deadline and a connection cap (see the module)."""

    limits: Limits = Limits(max_connections=1000)
    """The limits; :func:`protocol_class` makes a subclass carrying a server's own."""

    _timer: asyncio.TimerHandle | None = None
    _deadline = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        cap = self.limits.max_connections
        if cap is not None and len(self.connections) > cap:
            COUNTERS.add("connections_refused")
            transport.write(
                _raw_response(
                    "503 Service Unavailable",
                    "too many open connections; retry later",
                    f"retry-after: {self.limits.retry_after}\r\n",
                )
            )
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        # Every byte received earns time at the minimum rate (see Limits.min_body_rate).
        self._deadline += len(data) / self.limits.min_body_rate
        super().data_received(data)
        self._settle()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            # The next request on this connection gets a deadline of its own.
            self._arm()
            self._settle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    # --- the deadline ----------------------------------------------------------------------

    def _receiving(self) -> bool:
        """Whether a request is still being received (none yet, or its body is incomplete)."""
        cycle = self.cycle
        return cycle is None or cycle.response_complete or cycle.more_body

    def _settle(self) -> None:
        """Disarm once the current request is complete: handling it may take as long as it takes."""
        if not self._receiving():
            self._disarm()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.time() + self.limits.header_timeout
        self._timer = self.loop.call_at(self._deadline, self._expired)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self) -> None:
        self._timer = None
        if self.transport.is_closing() or not self._receiving():
            return
        if self.loop.time() < self._deadline:  # data arrived meanwhile and earned more time
            self._timer = self.loop.call_at(self._deadline, self._expired)
            return
        COUNTERS.add("requests_timed_out")
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(_raw_response("408 Request Timeout", "the request was not received in time"))
        self.transport.close()


def protocol_class(limits: Limits) -> type[Any]:
    """A :class:`GuardedH11Protocol` subclass with ``limits`` (uvicorn builds one instance per connection)."""
    return type("StratamemH11Protocol", (GuardedH11Protocol,), {"limits": limits})
