"""The plumbing the fake HTTP endpoints share: a threaded server on 127.0.0.1 and a JSON handler.

:class:`~stratamem.testing.llm_server.FakeLLMServer` and
:class:`~stratamem.testing.embed_server.FakeEmbeddingServer` differ in what they
answer, not in how they serve: both bind a free loopback port, serve from a
daemon thread, stop idempotently, answer JSON, and can drop a connection to
imitate a network failure. That lives here once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["JSONHandler", "LocalHTTPServer"]


class JSONHandler(BaseHTTPRequestHandler):
    """A request handler that reads bodies, answers JSON and stays quiet on stderr."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's signature
        """Silence the default per-request stderr line."""

    def read_body(self) -> bytes:
        """The request body (``Content-Length`` bytes)."""
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def send_json(self, status: int, payload: Mapping[str, Any]) -> None:
        """Answer ``payload`` as JSON with HTTP ``status``."""
        data = json.dumps(payload).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # The client stopped waiting (a timeout test makes it do so on purpose): there is
            # no one to answer, and the request is already recorded for the test to inspect.
            self.close_connection = True

    def drop_connection(self) -> None:
        """Close the socket without an answer (what a crashed server or a cut network looks like)."""
        self.close_connection = True
        self.connection.close()


class LocalHTTPServer:
    """A :class:`ThreadingHTTPServer` on 127.0.0.1 served from a daemon thread.

    Subclasses implement :meth:`_handler`. Use as a context manager, or call
    :meth:`start` and :meth:`close`.

    Args:
        port: Port to bind on 127.0.0.1; 0 picks a free one.
        thread_name: Name of the serving thread (shows in thread dumps).
    """

    def __init__(self, *, port: int = 0, thread_name: str = "stratamem-fake-server") -> None:
        self._port = port
        self._thread_name = thread_name
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        """The handler class that answers for this server."""
        raise NotImplementedError

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``.

        Raises:
            RuntimeError: The server is not running.
        """
        if self._httpd is None:
            raise RuntimeError("the server is not running; call start() or use it as a context manager")
        host, port = self._httpd.server_address[:2]
        if isinstance(host, bytes):  # typeshed allows a bytes address (AF_UNIX); TCP gives a str
            host = host.decode()
        return f"http://{host}:{port}"

    def start(self) -> Self:
        """Bind and serve in a daemon thread (no-op if already serving). Returns ``self``."""
        if self._httpd is not None:
            return self
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=self._thread_name, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port. Idempotent."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
