"""The server's limits (issue 24: findings 3, 6, 7 and 8a), over real sockets.

* ``stratamem serve`` as a real subprocess: half-open connections (silent,
  trickled headers, stalled body; with and without a token) are answered 408
  and closed after ``--header-timeout``; a body sent at a steady rate earns
  time; ``--max-connections`` answers the next connection 503 at once; with
  its open-file limit lowered to 64 the server never reaches ``EMFILE`` and
  its log does not grow.
* uvicorn in a thread (tests/webserver.py): body limits by route after
  authentication, answered before any body byte is read and with the
  connection closed; a 500 leaves the keep-alive connection usable; a long
  call holding the store's lock leaves ``/health`` and the import route's event
  loop free, waiting calls are bounded (503 + ``Retry-After``) and the work
  queue refuses what does not fit.

The timeouts are configured short (1 s) so each test takes a few seconds.
"""

from __future__ import annotations

import io
import json
import logging
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from webserver import Server, free_port, web_config

from stratamem import Memory
from stratamem.web import Security
from stratamem.web.limits import Limits
from stratamem.web.serving import RepeatFilter

TOKEN = "limits-token-0123456789abcdef"
HEALTH = "/api/v1/health"


# --- a real `stratamem serve` ------------------------------------------------------------------


class Serve:
    """``stratamem serve`` in a subprocess on a free port, its output in a log file."""

    def __init__(self, tmp: Path, *args: str, token: str | None = None, nofile: int | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"serve-{self.port}.log"
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        env = {"PATH": "/usr/bin:/bin", "STRATAMEM_EMBEDDING": "none"}
        env.update({k: v for k, v in os.environ.items() if k == "PYTHONPATH"})  # the tree under test
        if token:
            env["STRATAMEM_TOKEN"] = token

        def limit() -> None:
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self._out = open(self.log, "wb")  # open while the server runs
        cmd = [sys.executable, "-m", "stratamem", "--db", str(tmp / "m.db"), "serve", "--port", str(self.port), *args]
        self.proc = subprocess.Popen(cmd, env=env, stdout=self._out, stderr=subprocess.STDOUT, preexec_fn=limit)
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(self.url + HEALTH, headers=self.headers, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"serve did not start: {self.log.read_text()[-800:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)
        self._out.close()


@contextmanager
def serve(tmp: Path, *args: str, token: str | None = None, nofile: int | None = None) -> Iterator[Serve]:
    srv = Serve(tmp, *args, token=token, nofile=nofile)
    try:
        yield srv
    finally:
        srv.stop()


def half_open(port: int, kind: str, token: str | None = None) -> socket.socket:
    """A connection that never completes its request: ``silent``, ``header`` (stops mid-headers) or ``body``."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    if kind == "header":
        s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    elif kind == "body":
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        s.sendall(
            f"POST /api/v1/namespaces/default/turns HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
            'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"messa'.encode()
        )
    return s


def until_closed(s: socket.socket, timeout: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and when it closed (monotonic)."""
    s.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except TimeoutError:
            return data, float("inf")
        except ConnectionResetError:
            return data, time.monotonic()
        if not chunk:
            return data, time.monotonic()
        data += chunk


def status_line(data: bytes) -> str:
    return data.split(b"\r\n", 1)[0].decode()


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no-token", "token"])
def test_half_open_connections_get_408_and_are_closed_after_the_header_timeout(tmp_path: Path, token: str) -> None:
    with serve(tmp_path, "--header-timeout", "1", token=token) as srv:
        opened = time.monotonic()
        socks = [(kind, half_open(srv.port, kind, token)) for kind in ("silent", "header", "body") for _ in range(8)]
        t0 = time.monotonic()
        assert httpx.get(srv.url + HEALTH, headers=srv.headers, timeout=5).status_code == 200
        assert time.monotonic() - t0 < 1.0  # the server answers others meanwhile
        for kind, s in socks:
            data, closed = until_closed(s, 6)
            s.close()
            assert status_line(data) == "HTTP/1.1 408 Request Timeout", (kind, data[:80])
            assert 0.8 < closed - opened < 4.0, kind


def test_a_body_sent_at_a_steady_rate_outlasts_the_header_timeout(tmp_path: Path) -> None:
    text = "steady " * 7000  # ~48 KiB: at 16 KiB/s it earns 3 s beyond the 1 s header timeout
    body = json.dumps({"session": "steady", "messages": [{"role": "user", "content": text}]}).encode()
    with serve(tmp_path, "--header-timeout", "1", "--max-body-bytes", str(1 << 20)) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        s.sendall(
            f"POST /api/v1/namespaces/default/turns HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
        )
        step = len(body) // 6 + 1
        for i in range(0, len(body), step):  # six pieces over 1.8 s: ~27 KiB/s
            time.sleep(0.3)
            s.sendall(body[i : i + step])
        s.settimeout(10)
        assert status_line(s.recv(65536)) == "HTTP/1.1 201 Created"
        s.close()


def test_a_connection_over_the_cap_is_answered_503_at_once(tmp_path: Path) -> None:
    with serve(tmp_path, "--header-timeout", "5", "--max-connections", "3") as srv:
        held = [half_open(srv.port, "silent") for _ in range(3)]
        time.sleep(0.3)
        r = httpx.get(srv.url + HEALTH, timeout=2)
        assert r.status_code == 503 and r.headers["retry-after"] == "5"
        assert r.json()["error"]["type"] == "ServiceUnavailable"
        for s in held:
            s.close()
        time.sleep(0.3)
        assert httpx.get(srv.url + HEALTH, timeout=2).status_code == 200
        metrics = httpx.get(srv.url + "/api/v1/metrics", timeout=5).text
        assert "stratamem_http_connections_refused_total 1" in metrics


def test_at_an_open_file_limit_of_64_the_server_keeps_answering_and_its_log_stays_quiet(tmp_path: Path) -> None:
    with serve(tmp_path, "--header-timeout", "1", token=TOKEN, nofile=64) as srv:
        started = srv.log.read_text()
        cap = int(started.split("at most ")[1].split(" connections")[0])
        assert 1 <= cap < 64
        before = srv.log.stat().st_size
        socks = [half_open(srv.port, "header") for _ in range(80)]
        answers = [status_line(until_closed(s, 6)[0]) for s in socks]
        for s in socks:
            s.close()
        # Each one is refused cleanly: 503 at once over the cap, 408 at its deadline under it (which one a
        # socket gets depends on how fast the kernel hands the burst over); never an EMFILE, never silence.
        refusals = {"HTTP/1.1 503 Service Unavailable", "HTTP/1.1 408 Request Timeout"}
        assert len(answers) == 80 and set(answers) <= refusals
        t0 = time.monotonic()
        assert httpx.get(srv.url + HEALTH, headers=srv.headers, timeout=2).status_code == 200
        assert time.monotonic() - t0 < 1.0
        assert srv.log.stat().st_size == before, srv.log.read_text()[len(started) :][:500]


def test_a_flood_of_one_log_message_becomes_one_line_per_interval() -> None:
    logger = logging.getLogger("stratamem.test.flood")
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger.addHandler(handler)
    logger.propagate = False
    flt = RepeatFilter(every=0.3)
    logger.addFilter(flt)
    try:
        for _ in range(500):
            try:
                raise OSError(24, "Too many open files")
            except OSError:
                logger.exception("socket.accept() out of system resource")
        time.sleep(0.35)
        try:
            raise OSError(24, "Too many open files")
        except OSError:
            logger.exception("socket.accept() out of system resource")
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert lines.count("socket.accept() out of system resource") == 1  # the first, with its traceback
    assert lines[-1] == "socket.accept() out of system resource (499 more like it in the last 0.3 s)"
    assert sum("Traceback" in line for line in lines) == 1


# --- body limits by route, after authentication (finding 7) ----------------------------------------

BODY_LIMIT = 16384


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("limits_sec")
    sec = Security(tokens={TOKEN: None}, max_body_bytes=BODY_LIMIT, max_import_bytes=BODY_LIMIT * 64)
    srv = Server(tmp / "memory.db", security=sec)
    yield srv
    srv.stop()


def early_answer(port: int, head: str, size: int) -> tuple[str, bool]:
    """Send only the head of a request declaring ``size`` body bytes: the status line within 1 s, and whether
    the server then closed the connection."""
    s = socket.create_connection(("127.0.0.1", port), timeout=1)
    try:
        s.sendall(f"{head}Host: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n".encode())
        data, closed = until_closed(s, 1.0)
        return status_line(data), closed != float("inf")
    finally:
        s.close()


@pytest.mark.parametrize(
    ("head", "status"),
    [
        ("POST /static/x/import HTTP/1.1\r\n", "413"),
        ("POST /login/import HTTP/1.1\r\n", "413"),
        ("POST /login/x/import HTTP/1.1\r\n", "413"),
        ("POST /api/v1/namespaces/x/import HTTP/1.1\r\n", "401"),
        (f"POST /api/v1/namespaces/x/sessions/import HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n", "413"),
        (f"POST /api/v1/namespaces/x/turns HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n", "413"),
        (f"GET /api/v1/namespaces/x/status HTTP/1.1\r\nAuthorization: Bearer {TOKEN}\r\n", "413"),
    ],
    ids=["static", "login", "login-sub", "import-no-token", "not-the-import-route", "turns", "get-with-body"],
)
def test_a_large_body_is_refused_before_it_is_read_and_the_connection_closed(
    guarded: Server, head: str, status: str
) -> None:
    line, closed = early_answer(guarded.port, head, 512 * 1024)
    assert line.split(" ")[1] == status and closed


def test_only_the_import_route_takes_the_import_limit_and_only_with_a_token(guarded: Server) -> None:
    turns = [{"role": "user", "content": f"imported line {i} " + "x" * 200} for i in range(1500)]
    with Memory(":memory:", config=web_config(), embedder=None) as m:
        m.add(turns, session="big")
        out = io.StringIO()
        m.export(out)
    body = out.getvalue().encode()
    assert BODY_LIMIT < len(body) < BODY_LIMIT * 64
    with guarded.client(headers={"authorization": f"Bearer {TOKEN}"}) as c:
        r = c.post("/api/v1/namespaces/imp/import", content=body, headers={"content-type": "application/x-ndjson"})
        assert r.status_code == 201 and r.json()["turns"] == 1500
        # Just over the normal limit (a larger body would meet a closed connection before the answer).
        r = c.post("/api/v1/namespaces/imp/turns", json={"messages": [{"role": "user", "content": "y" * BODY_LIMIT}]})
        assert r.status_code == 413 and r.json()["error"]["type"] == "PayloadTooLarge"


def test_without_a_token_a_path_ending_in_import_gets_the_normal_limit(tmp_path: Path) -> None:
    srv = Server(tmp_path / "m.db", security=Security(max_body_bytes=BODY_LIMIT, max_import_bytes=BODY_LIMIT * 64))
    try:
        line, closed = early_answer(srv.port, "POST /api/v1/namespaces/x/nodes/import HTTP/1.1\r\n", 512 * 1024)
        assert line == "HTTP/1.1 413 Request Entity Too Large" and closed
    finally:
        srv.stop()


# --- a 500 keeps the connection (finding 8a) ---------------------------------------------------------


def test_after_a_500_the_same_keep_alive_connection_answers_the_next_request(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    srv = Server(tmp_path / "m.db")

    def boom() -> dict[str, Any]:
        raise RuntimeError("a bug in a route")

    srv.app.api.add_api_route("/api/v1/boom", boom)
    try:
        with caplog.at_level(logging.ERROR), socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            answers = []
            for path in ("/api/v1/boom", HEALTH, "/api/v1/boom", HEALTH):
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                answers.append(read_response(s))
        assert [a[0] for a in answers] == [500, 200, 500, 200]
        assert json.loads(answers[0][1])["error"]["type"] == "InternalError"
        logged = [r.getMessage() for r in caplog.records]
        assert logged.count("unexpected error on GET /api/v1/boom") == 2  # once each, with the traceback
        assert not any("Exception in ASGI application" in m for m in logged)
    finally:
        srv.stop()


def read_response(s: socket.socket) -> tuple[int, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
    while len(rest) < length:
        rest += s.recv(65536)
    return int(head.split(b" ")[1]), rest


# --- long work off the event loop (finding 3) ----------------------------------------------------------


def export_of(session: str, n: int) -> bytes:
    with Memory(":memory:", config=web_config(), embedder=None) as m:
        m.add([{"role": "user", "content": f"{session} line {i}"} for i in range(n)], session=session)
        out = io.StringIO()
        m.export(out)
    return out.getvalue().encode()


@contextmanager
def long_call(srv: Server) -> Iterator[threading.Event]:
    """A library call holding the store's lock until the yielded event is set (or 20 s pass)."""
    done = threading.Event()
    holder = threading.Thread(target=srv.spaces.call, args=(lambda: done.wait(20),))
    holder.start()
    time.sleep(0.1)
    try:
        yield done
    finally:
        done.set()
        holder.join(25)


def post_import(srv: Server, body: bytes, results: list[httpx.Response]) -> threading.Thread:
    def run() -> None:
        with srv.client() as c:
            results.append(
                c.post("/api/v1/namespaces/default/import", content=body, headers={"content-type": "text/plain"})
            )

    t = threading.Thread(target=run)
    t.start()
    return t


def test_health_answers_while_an_import_waits_for_a_long_call(tmp_path: Path) -> None:
    srv = Server(tmp_path / "m.db")
    try:
        results: list[httpx.Response] = []
        with long_call(srv) as done:
            importing = post_import(srv, export_of("waits", 5), results)
            time.sleep(0.3)
            with srv.client() as c:
                t0 = time.monotonic()
                assert c.get(HEALTH, timeout=2).json() == {"ok": True}
                assert time.monotonic() - t0 < 1.0
            assert not results  # still waiting for the store
            done.set()
            importing.join(20)
        assert results[0].status_code == 201 and results[0].json()["turns"] == 5
    finally:
        srv.stop()


def test_waiting_calls_are_bounded_and_a_full_work_queue_answers_503_with_retry_after(tmp_path: Path) -> None:
    limits = Limits(max_waiting=4, lock_wait=1.0, work_queue=0, retry_after=2)
    srv = Server(tmp_path / "m.db", limits=limits)
    srv.memory.add([{"role": "user", "content": "seed"}], session="seed")
    try:
        results: list[httpx.Response] = []
        with long_call(srv) as done:
            queued = post_import(srv, export_of("queued", 3), results)  # takes the one work slot
            time.sleep(0.3)
            with srv.client() as c:
                t0 = time.monotonic()
                second = c.post(
                    "/api/v1/namespaces/default/import", content=export_of("second", 2), headers={"content-type": "x"}
                )
                assert time.monotonic() - t0 < 1.0
                assert second.status_code == 503 and second.headers["retry-after"] == "2"
                assert second.json()["error"]["type"] == "Busy"
            reads: list[tuple[int, float]] = []

            def read() -> None:
                with srv.client() as c:
                    t = time.monotonic()
                    reads.append((c.get("/api/v1/namespaces/default/status").status_code, time.monotonic() - t))

            readers = [threading.Thread(target=read) for _ in range(6)]
            for t in readers:
                t.start()
            for t in readers:
                t.join(10)
            # Four slots: the long call and three reads that wait 1 s (then 503); three reads refused at once.
            # (The queued import waits on the work queue's thread, outside the slots and without a time limit.)
            fast = [code for code, took in reads if took < 0.8]
            slow = [code for code, took in reads if took >= 0.8]
            assert fast == [503] * 3 and slow == [503] * 3
            done.set()
            queued.join(20)
        assert results[0].status_code == 201 and results[0].json()["turns"] == 3
        with srv.client() as c:
            assert c.get("/api/v1/namespaces/default/status").status_code == 200
            names = {s["name"] for s in c.get("/api/v1/namespaces/default/sessions").json()["sessions"]}
            assert names == {"queued", "seed"}  # the refused import stored nothing
            assert "stratamem_http_calls_refused_total" in c.get("/api/v1/metrics").text
    finally:
        srv.stop()
