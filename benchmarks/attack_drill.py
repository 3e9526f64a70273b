"""Attack drill for issue 24: re-run each finding of the outside attack run and print a table.

Every probe goes through a public surface only: the ``stratamem`` CLI as
subprocesses, ``stratamem serve`` as a subprocess driven by httpx and raw
sockets, ``stratamem mcp`` over stdio with the real ``mcp`` client, and the
public ``stratamem.Memory`` API (run in a child process of this script, so
that this process never imports stratamem and one run can drive several
source trees). Everything is on loopback and in temporary directories.

Each row counts:

* **attempts** — attack attempts made (requests, files, kills, ...);
* **handled** — attempts answered as they should be: a clean 4xx/one-line
  refusal with nothing stored, a connection the server closed, a read that
  works, ... (``handled == attempts`` is the goal);
* **lost** — acknowledged writes missing afterwards;
* **leaked** — what got through although it should not: rows stored by a
  refused request, duplicate rows, body bytes read from an unauthenticated
  client, connections left open, manifests written by a read, log bytes;
* **served-after-forget** — answers that still carried forgotten text.

Trees: ``--src PATH`` (repeatable; default this repository's ``src``) and
``--baseline REV`` (``git archive REV src`` into a temporary directory) put
each tree first on ``PYTHONPATH`` of every subprocess, so a fix and today's
code run side by side in one run. ``--backend postgres`` (or ``both``) runs
the store findings again on a PostgreSQL from ``pgserver`` (as tests/pg.py).

    .venv/bin/python benchmarks/attack_drill.py [--quick] [--backend sqlite|postgres|both]
        [--src PATH ...] [--baseline REV] [--only 1,2,8g,D]

``--quick`` (SQLite, small sizes) takes about 2 minutes on the shared 2-core
box; the full run about 10. Kept small on purpose: the half-open connection
probe opens a few hundred sockets, and shows open-file exhaustion on a server
whose own limit is lowered to 64 descriptors (``RLIMIT_NOFILE`` in that child
only).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import ctypes
import hashlib
import io
import json
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
BIG = 2**64  # an integer no store column holds
SECRET_A = "QUILLFEATHER-7731"  # in a sealed, summarized segment
SECRET_B = "MARMOSET-4412"  # in the hot tail: reachable only verbatim (window, recall index)
TOKEN = "drill-token-0123456789abcdef"
NS = "default"


# --- trees, backends, subprocesses ------------------------------------------------------------


@dataclass(frozen=True)
class Tree:
    """A source tree to drill: its ``src`` goes first on every subprocess's PYTHONPATH."""

    label: str
    src: Path


@dataclass
class Sizes:
    """How big each probe is (``--quick`` shrinks them)."""

    quick: bool
    half_open: int = 200
    idle_wait: float = 12.0
    import_turns: int = 8000
    crash_turns: int = 8000
    race_rounds: int = 10
    race_facts: int = 10
    mcp_query_chars: int = 2_000_000
    serve_kills: int = 4
    ingest_kills: int = 4
    forget_kills: int = 4

    @classmethod
    def make(cls, quick: bool) -> Sizes:
        if not quick:
            return cls(False)
        return cls(
            True,
            half_open=60,
            idle_wait=11.0,
            import_turns=4000,
            crash_turns=2000,
            race_rounds=6,
            race_facts=5,
            mcp_query_chars=200_000,
            serve_kills=1,
            ingest_kills=1,
            forget_kills=1,
        )


class Env:
    """Where one (tree, backend) runs: the tree's environment, fresh store targets, a scratch directory."""

    _counter = 0

    def __init__(self, tree: Tree, backend: str, workdir: Path, pg_dsn: str | None, sizes: Sizes) -> None:
        self.tree, self.backend, self.workdir, self.pg_dsn, self.sizes = tree, backend, workdir, pg_dsn, sizes
        workdir.mkdir(parents=True, exist_ok=True)

    def env(self, **extra: str) -> dict[str, str]:
        """The subprocess environment: this tree first on PYTHONPATH, lexical recall, no inherited store."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("STRATAMEM_")}
        env["PYTHONPATH"] = os.pathsep.join([str(self.tree.src), *filter(None, [os.environ.get("PYTHONPATH")])])
        env["STRATAMEM_EMBEDDING"] = "none"
        env.update(extra)
        return env

    def target(self, name: str) -> str:
        """A fresh, empty store: a SQLite file, or a new PostgreSQL schema."""
        Env._counter += 1
        if self.backend == "postgres":
            assert self.pg_dsn is not None
            sep = "&" if "?" in self.pg_dsn else "?"
            return f"{self.pg_dsn}{sep}schema=drill_{os.getpid()}_{Env._counter}_{name}"
        d = self.workdir / f"{Env._counter:03d}-{name}"
        d.mkdir(parents=True, exist_ok=True)
        return str(d / "store.db")

    def file(self, name: str) -> Path:
        Env._counter += 1
        return self.workdir / f"{Env._counter:03d}-{name}"

    def cli(
        self,
        target: str,
        *args: str,
        ns: str = NS,
        timeout: float = 120,
        stdin: str | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``stratamem --db target -n ns ARGS`` to completion."""
        cmd = [PY, "-m", "stratamem", "--db", target, "-n", ns, *args]
        return subprocess.run(
            cmd, env=self.env(), capture_output=True, text=True, timeout=timeout, input=stdin, preexec_fn=preexec
        )

    def child(self, name: str, target: str, *args: Any, timeout: float = 300) -> Any:
        """Run one child function of this script (Memory API, this tree) and return its JSON answer."""
        cmd = [PY, str(Path(__file__).resolve()), "--child", name, target, *map(json.dumps, args)]
        out = subprocess.run(cmd, env=self.env(), capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"child {name} failed: {out.stderr.strip()[-600:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


_LIVE: list[Any] = []
"""Servers and MCP sessions still running: stopped on the way out, even after an interrupt."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``stratamem serve`` as a subprocess on a free loopback port; stopped by its pid."""

    def __init__(
        self, env: Env, target: str, *, token: str | None = None, max_body: int | None = None, nofile: int | None = None
    ) -> None:
        self.env, self.target, self.token = env, target, token
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = env.file("serve.log")
        args = ["serve", "--port", str(self.port)]
        if max_body:
            args += ["--max-body-bytes", str(max_body)]
        extra = {"STRATAMEM_TOKEN": token} if token else {}

        def limit() -> None:
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self._log = open(self.log, "wb")  # open while the server runs
        self.proc = subprocess.Popen(
            [PY, "-m", "stratamem", "--db", target, *args],
            env=env.env(**extra),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=limit,
        )
        _LIVE.append(self)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(self.base + "/api/v1/health", headers=self.headers, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve did not start: {self.log.read_text()[-800:]}")
            time.sleep(0.1)

    def api(self, ns: str = NS) -> str:
        return f"{self.base}/api/v1/namespaces/{ns}"

    def request(self, method: str, url: str, timeout: float = 60, **kw: Any) -> httpx.Response | str:
        """One request on a fresh connection; the exception's name when there is no answer."""
        try:
            with httpx.Client(timeout=timeout, headers=self.headers) as c:
                return c.request(method, url, **kw)
        except httpx.HTTPError as exc:
            return type(exc).__name__

    def kill(self) -> None:
        if self in _LIVE:
            _LIVE.remove(self)
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self._log.close()

    def stop(self) -> None:
        if self in _LIVE:
            _LIVE.remove(self)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def tail(text: str, target: str, width: int = 110) -> str:
    """The last line of a command's output, the store's path shortened to ``<store>``."""
    lines = text.strip().splitlines()
    return (lines[-1] if lines else "").replace(target, "<store>")[:width]


def status_of(r: httpx.Response | str) -> int | str:
    return r.status_code if isinstance(r, httpx.Response) else r


class McpSession:
    """``stratamem mcp`` over stdio, held open in a thread of its own; ``call`` runs one tool."""

    def __init__(self, env: Env, target: str) -> None:
        from mcp.client.stdio import StdioServerParameters

        # The server's stderr goes to a file (its startup line would interleave with the table).
        log = env.file("mcp.log")
        self.params = StdioServerParameters(
            command="/bin/sh",
            args=["-c", f'exec "$0" "$@" 2>>{log}', PY, "-m", "stratamem", "--db", target, "mcp"],
            env=env.env(),
        )
        _LIVE.append(self)
        self.loop = asyncio.new_event_loop()
        self.ready = concurrent.futures.Future()  # type: concurrent.futures.Future[None]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.main = asyncio.run_coroutine_threadsafe(self._run(), self.loop)
        self.ready.result(timeout=90)

    async def _run(self) -> None:
        from mcp import Client

        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        try:
            async with Client(self.params, read_timeout_seconds=120) as client:
                self.ready.set_result(None)
                while True:
                    item = await self.queue.get()
                    if item is None:
                        return
                    name, args, fut = item
                    try:
                        fut.set_result(await client.call_tool(name, args))
                    except Exception as exc:  # noqa: BLE001 - handed to the caller
                        fut.set_exception(exc)
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            raise

    def call(self, name: str, args: dict[str, Any], timeout: float = 120) -> tuple[bool, str, float]:
        """``(is_error, text, seconds)`` of one tool call."""
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        started = time.monotonic()
        self.loop.call_soon_threadsafe(self.queue.put_nowait, (name, args, fut))
        try:
            res = fut.result(timeout)
        except Exception as exc:  # noqa: BLE001 - a protocol failure is an answer too
            return True, f"{type(exc).__name__}: {exc}", time.monotonic() - started
        text = " ".join(getattr(c, "text", "") for c in res.content)
        return bool(res.is_error), text, time.monotonic() - started

    def close(self) -> None:
        if self in _LIVE:
            _LIVE.remove(self)
        if self.loop.is_closed() or not self.thread.is_alive():
            return
        self.loop.call_soon_threadsafe(self.queue.put_nowait, None)
        try:
            self.main.result(30)
        except Exception:  # noqa: BLE001 - closing a broken session
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


# --- data -------------------------------------------------------------------------------------

TOPICS = [
    "database migration",
    "retry policy",
    "hiking trip",
    "budget review",
    "cat adoption",
    "garden plans",
    "guitar lessons",
    "tax filing",
]


def conversation(n: int = 80, session: str = "s1") -> list[dict[str, Any]]:
    """``n`` plain turns; turn 6 holds SECRET_A (sealed and summarized), turn 74 SECRET_B (hot tail)."""
    out = []
    for i in range(n):
        topic = TOPICS[(i // 10) % len(TOPICS)]
        text = f"Message {i} about the {topic}: we went over the {topic} schedule and next steps for week {i // 10}."
        if i == 5:
            text = f"Decision: the vault passphrase for Zebraquokka is {SECRET_A}, chosen by Maria on Tuesday."
        if i == 73:
            text = f"Note: the locker combination at the gym is {SECRET_B}, Maria will keep it."
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": text, "session": session})
    return out


def write_jsonl(path: Path, rows: list[dict[str, Any]], prefix: bytes = b"") -> Path:
    path.write_bytes(prefix + "".join(json.dumps(r) + "\n" for r in rows).encode())
    return path


def nested(depth: int) -> dict[str, Any]:
    """A JSON object nested ``depth`` levels deep."""
    root: dict[str, Any] = {}
    cur = root
    for _ in range(depth - 1):
        cur["a"] = {}
        cur = cur["a"]
    return root


def export_text(sessions: dict[str, list[dict[str, Any]]], ns: str = NS) -> str:
    """A stratamem export (format version 1) holding ``sessions``' canonical turns."""
    stamp = "2025-01-01T00:00:00Z"
    lines = [
        {"format": "stratamem-export", "version": 1, "namespace": ns, "tokenizer": "o200k_base", "exported_at": stamp}
    ]
    lines += [{"type": "session", "name": s, "platform": None, "channel": None, "created_at": stamp} for s in sessions]
    out = "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in lines)
    digest = hashlib.sha256()
    n = 0
    for s, turns in sessions.items():
        for seq, t in enumerate(turns, 1):
            line = (
                json.dumps(
                    {"type": "turn", "session": s, "seq": seq, "turn": {"timestamp": stamp, **t}},
                    separators=(",", ":"),
                    ensure_ascii=False,
                )
                + "\n"
            )
            digest.update(line.encode())
            out += line
            n += 1
    return out + json.dumps({"type": "end", "sessions": len(sessions), "turns": n, "sha256": digest.hexdigest()}) + "\n"


def filler_turns(n: int, chars: int = 900, tag: str = "w") -> list[dict[str, Any]]:
    words = " ".join(f"{tag}{j % 997}" for j in range(chars // 5))
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"line {i} {words}"} for i in range(n)]


# --- rows -------------------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the table."""

    finding: str
    attempts: int = 0
    handled: int = 0
    lost: int = 0
    leaked: int = 0
    served: int = 0
    observed: list[str] = field(default_factory=list)
    tree: str = ""
    backend: str = ""
    seconds: float = 0.0

    def note(self, text: str) -> None:
        self.observed.append(text)


# --- 1: forgotten text served by open memories -----------------------------------------------


def probe_forget(e: Env) -> list[Row]:
    """``stratamem forget`` in another process while serve, the MCP server and a Memory are open."""
    target = e.target("forget")
    rows_file = write_jsonl(e.file("conv.jsonl"), conversation())
    e.cli(target, "ingest", str(rows_file)).check_returncode()
    watcher = subprocess.Popen(
        [PY, str(Path(__file__).resolve()), "--child", "watch", target],
        env=e.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the two servers start side by side
        pending = pool.submit(McpSession, e, target)
        srv = Server(e, target)
        mcp = pending.result()
    assert watcher.stdin is not None and watcher.stdout is not None

    def ask_watcher(queries: list[tuple[str, str]], secret: str) -> int:
        watcher.stdin.write(json.dumps({"queries": queries, "secret": secret}) + "\n")  # type: ignore[union-attr]
        watcher.stdin.flush()  # type: ignore[union-attr]
        return int(json.loads(watcher.stdout.readline())["carried"])  # type: ignore[union-attr]

    def carried(queries: list[tuple[str, str]], secret: str) -> dict[str, int]:
        http = sum(
            secret
            in srv.request(
                "GET", srv.api() + "/context", params={"query": q, "policy": p, "budget": 3000, "format": "text"}
            ).text
            for q, p in queries
        )
        via_mcp = sum(
            secret in mcp.call("get_context", {"query": q, "policy": p, "budget": 3000})[1] for q, p in queries
        )
        return {"serve": http, "mcp": via_mcp, "memory": ask_watcher(queries, secret)}

    rows = {
        k: Row(f"1 forget in another process, read via {label}")
        for k, label in (("serve", "`serve`"), ("mcp", "MCP stdio"), ("memory", "an open `Memory`"))
    }
    stale = {
        k: Row(f"1 forget N + add N elsewhere, recall via {label}")
        for k, label in (("serve", "`serve`"), ("mcp", "MCP stdio"), ("memory", "an open `Memory`"))
    }
    try:
        a_queries = [
            (q, p)
            for p in ("hybrid", "pyramid", "topics")
            for q in ("vault passphrase Zebraquokka", "guitar lessons week")
        ]
        before = carried(a_queries, SECRET_A)
        turns = srv.request("GET", srv.api() + "/sessions/s1/turns", params={"limit": 100}).json()["turns"]
        ids = {s: next(t["id"] for t in turns if s in json.dumps(t)) for s in (SECRET_A, SECRET_B)}
        forgot = e.cli(target, "forget", "--turn", str(ids[SECRET_A]), "--yes")
        after = carried(a_queries, SECRET_A)
        on_disk = _bytes_holding(target, SECRET_A)
        for k, row in rows.items():
            row.attempts, row.served = len(a_queries), after[k]
            row.handled = row.attempts - row.served
            row.note(
                f"{after[k]}/{len(a_queries)} contexts (hybrid/pyramid/topics) still carried it; before the "
                f"forget {before[k]}/{len(a_queries)}; files hold it {on_disk}; forget rc {forgot.returncode}"
            )
        # Phase B: the recall index counts turns; forget one, add one elsewhere, the count is unchanged.
        b_queries = [("locker combination gym", p) for p in ("recall", "hybrid", "pyramid")]
        carried(b_queries, SECRET_B)  # warm: every index holds the current turns
        e.cli(target, "forget", "--turn", str(ids[SECRET_B]), "--yes").check_returncode()
        e.cli(target, "add", "-s", "other", "-c", "An unrelated note about lunch plans.").check_returncode()
        after_b = carried(b_queries, SECRET_B)
        on_disk_b = _bytes_holding(target, SECRET_B)
        for k, row in stale.items():
            row.attempts, row.served = len(b_queries), after_b[k]
            row.handled = row.attempts - row.served
            row.note(
                f"{after_b[k]}/{len(b_queries)} contexts recalled the forgotten turn verbatim; "
                f"files hold it {on_disk_b}"
            )
    finally:
        watcher.stdin.close()
        watcher.wait(30)
        mcp.close()
        srv.stop()
    return [*rows.values(), *stale.values()]


def _bytes_holding(target: str, text: str) -> str:
    """How many times the store's files hold ``text`` (SQLite: the database, its WAL, the archive)."""
    if target.startswith("postgresql"):
        return "n/a (PostgreSQL)"
    base = Path(target)
    n = 0
    for p in base.parent.rglob("*"):
        if p.is_file() and p.name.startswith(base.name):
            n += p.read_bytes().count(text.encode())
    return f"{n}x"


# --- 2: deeply nested JSON ---------------------------------------------------------------------

DEPTH = 300


def probe_deep(e: Env) -> list[Row]:
    """A turn nested 300 levels deep, through every way in; then the reads of what was stored."""
    target = e.target("deep")
    write = Row(f"2 JSON nested {DEPTH} deep: HTTP/MCP/ingest/import")
    reads = Row("2 reads after a deep write")
    e.cli(target, "add", "-s", "ok", "-c", "a plain first turn").check_returncode()
    deep = nested(DEPTH)
    tool_msgs = [
        {"role": "user", "content": "please run the tool"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "running"},
                {"type": "tool_use", "id": "t9", "name": "x", "input": deep},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "ok"}]},
        {"role": "assistant", "content": "done"},
    ]
    with Server(e, target) as srv:
        outcomes: dict[str, str] = {}
        r = srv.request(
            "POST",
            srv.api() + "/turns",
            json={"session": "meta", "messages": [{"role": "user", "content": "deep metadata", "metadata": deep}]},
        )
        outcomes["HTTP metadata"] = str(status_of(r))
        r = srv.request(
            "POST", srv.api() + "/turns", json={"session": "tool", "format": "anthropic", "messages": tool_msgs}
        )
        outcomes["HTTP tool input"] = str(status_of(r))
        f = write_jsonl(
            e.file("deep.jsonl"),
            [
                {"role": "user", "content": "deep ingest", "metadata": deep, "session": "ingest"},
                {"role": "assistant", "content": "ok", "session": "ingest"},
            ],
        )
        outcomes["CLI ingest"] = f"rc {e.cli(target, 'ingest', str(f)).returncode}"
        exp = export_text({"imported": [{"role": "user", "content": "deep import", "metadata": deep}]}, "imp")
        r = srv.request(
            "POST",
            srv.api("imphttp") + "/import",
            content=exp.encode(),
            headers={"content-type": "application/x-ndjson"},
        )
        outcomes["HTTP import"] = str(status_of(r))
        fe = e.file("deep-export.jsonl")
        fe.write_text(exp)
        outcomes["CLI import"] = f"rc {e.cli(target, 'import', str(fe), ns='impcli').returncode}"
        mcp = McpSession(e, target)
        try:
            err, text, _ = mcp.call(
                "add_turns", {"session": "mcp", "messages": [{"role": "user", "content": "deep mcp", "metadata": deep}]}
            )
            outcomes["MCP add_turns"] = f"error '{text[:50]}'" if err else "ok"
            # What was stored: sessions of the default namespace, and the import namespaces.
            sessions = {s["name"] for s in srv.request("GET", srv.api() + "/sessions").json()["sessions"]}
            stored = {
                "HTTP metadata": "meta" in sessions,
                "HTTP tool input": "tool" in sessions,
                "CLI ingest": "ingest" in sessions,
                "MCP add_turns": "mcp" in sessions,
                "HTTP import": status_of(srv.request("GET", srv.api("imphttp") + "/sessions")) == 200,
                "CLI import": status_of(srv.request("GET", srv.api("impcli") + "/sessions")) == 200,
            }
            write.attempts = len(outcomes)
            refused = {k: not (v.startswith("2") or v in ("rc 0", "ok")) for k, v in outcomes.items()}
            write.handled = sum(refused[k] and not stored[k] for k in outcomes)
            write.leaked = sum(stored.values())
            write.note("; ".join(f"{k}: {v}{' + stored' if stored[k] else ''}" for k, v in outcomes.items()))
            # The reads, of deep rows as an older version stored them: where this tree refused the
            # write, the same rows are written straight into the store (the write's shape, 300 deep).
            missing = [
                s
                for s, k in (
                    ("meta", "HTTP metadata"),
                    ("tool", "HTTP tool input"),
                    ("ingest", "CLI ingest"),
                    ("mcp", "MCP add_turns"),
                )
                if not stored[k]
            ]
            if missing:
                e.child("seed_deep", target, missing)
                reads.note(f"seeded {len(missing)} deep session(s) as an older version stored them")
            checks: list[tuple[str, Any]] = []
            for s in ("meta", "tool", "ingest", "mcp", "ok"):
                checks.append((f"list {s}", srv.request("GET", srv.api() + f"/sessions/{s}/turns")))
            checks.append(("search", srv.request("GET", srv.api() + "/search", params={"q": "deep"})))
            for fmt in ("text", "openai", "anthropic", "responses"):
                checks.append(
                    (
                        f"context {fmt}",
                        srv.request("GET", srv.api() + "/context", params={"format": fmt, "session": "tool"}),
                    )
                )
            checks.append(("export", srv.request("GET", srv.api() + "/export")))
            failed = [name for name, r in checks if not isinstance(r, httpx.Response) or r.status_code >= 500]
            for fmt in ("anthropic", "responses"):
                err, text, _ = mcp.call("get_context", {"session": "tool", "format": fmt})
                if err:
                    failed.append(f"MCP context {fmt}")
            err, text, _ = mcp.call("search_memory", {"query": "deep"})
            if err:
                failed.append("MCP search")
            reads.attempts = len(checks) + 3
            reads.handled = reads.attempts - len(failed)
            reads.note(("failed (5xx/tool error): " + ", ".join(failed)) if failed else "every read answered")
        finally:
            mcp.close()
    return [write, reads]


# --- 3: import on the event loop ---------------------------------------------------------------

QUEUED = 45
"""Library calls queued behind an import in the second round: more than anyio's 40 worker threads."""


def probe_import_freeze(e: Env) -> list[Row]:
    """``/health`` latency while a large import holds the library lock.

    Round 1: a second import arrives and waits for the lock (its handler takes the
    lock on the event loop). Round 2: 45 ``GET /context`` calls queue behind the
    lock instead (sync routes: they fill the thread pool that ``/health`` needs too).
    """
    rows = [Row("3 import + a second import vs `/health`"), Row(f"3 import + {QUEUED} queued reads vs `/health`")]
    target = e.target("import")
    e.cli(target, "ingest", str(write_jsonl(e.file("c.jsonl"), conversation(40)))).check_returncode()
    sessions = {f"imp{i}": filler_turns(500, tag=f"s{i}") for i in range(e.sizes.import_turns // 500)}
    small = export_text({"small": filler_turns(2)}, "small").encode()
    with Server(e, target) as srv:
        idle = []
        for _ in range(5):
            t = time.monotonic()
            srv.request("GET", srv.base + "/api/v1/health")
            idle.append(time.monotonic() - t)
        for n, row in enumerate(rows):
            big = export_text(sessions, f"big{n}").encode()
            result: dict[str, Any] = {}

            def post(ns: str, body: bytes, result: dict[str, Any] = result) -> None:
                t = time.monotonic()
                r = srv.request(
                    "POST",
                    srv.api(ns) + "/import",
                    content=body,
                    timeout=900,
                    headers={"content-type": "application/x-ndjson"},
                )
                result[ns] = (status_of(r), time.monotonic() - t)

            def read(i: int) -> None:
                srv.request("GET", srv.api() + "/context", params={"query": f"week {i}"}, timeout=900)

            first = threading.Thread(target=post, args=(f"big{n}", big))
            first.start()
            time.sleep(0.3)
            others = (
                [threading.Thread(target=post, args=("small", small))]
                if n == 0
                else [threading.Thread(target=read, args=(i,)) for i in range(QUEUED)]
            )
            for t in others:
                t.start()
            time.sleep(0.3)
            lat: list[float] = []
            while first.is_alive() or not lat:
                t0 = time.monotonic()
                r = srv.request("GET", srv.base + "/api/v1/health", timeout=900)
                lat.append(time.monotonic() - t0 if isinstance(r, httpx.Response) else 900.0)
                time.sleep(0.1)
            first.join()
            for t in others:
                t.join()
            row.attempts = len(lat)
            row.handled = sum(x < 1.0 for x in lat)
            waiting = (
                f"a second import waiting ({result['small'][0]}, {result['small'][1]:.1f} s)"
                if n == 0
                else f"{QUEUED} GET /context queued"
            )
            row.note(
                f"/health max {max(lat):.2f} s (idle median {sorted(idle)[2] * 1000:.0f} ms) during a "
                f"{len(big) / 1e6:.1f} MB import ({result[f'big{n}'][0]}, {result[f'big{n}'][1]:.1f} s) with " + waiting
            )
    return rows


# --- 4: duplicate extracted items under several writers ----------------------------------------


def probe_item_race(e: Env) -> list[Row]:
    """Four processes extract the same facts at the same instant (``Items.extract_facts``)."""
    row = Row("4 extracted facts, 4 writers at once")
    target = e.target("items")
    e.cli(target, "ingest", str(write_jsonl(e.file("c.jsonl"), conversation(20)))).check_returncode()
    start = time.time() + 4.0  # every worker is up by then (each imports stratamem, ~1 s)
    cmd = [PY, str(Path(__file__).resolve()), "--child", "extract", target]
    procs = [
        subprocess.Popen(
            [*cmd, json.dumps(start), json.dumps(e.sizes.race_rounds), json.dumps(e.sizes.race_facts)],
            env=e.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    errors = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        if p.returncode != 0:
            errors.append(err.strip().splitlines()[-1] if err.strip() else f"rc {p.returncode}")
    found = e.child("facts", target)
    row.attempts = e.sizes.race_rounds * e.sizes.race_facts
    row.leaked = found["duplicates"]
    row.handled = found["distinct"] - found["facts_with_copies"]
    row.note(
        f"{found['items']} items for {row.attempts} facts ({found['duplicates']} duplicate copies; "
        f"{found['rounds_with_copies']} of {e.sizes.race_rounds} rounds raced)"
        + (f"; worker errors: {errors[0]}" if errors else "")
    )
    return [row]


# --- 5: crash in ingest's indexing phase -------------------------------------------------------


def probe_crash_repair(e: Env) -> list[Row]:
    """kill -9 of ``stratamem ingest`` after its commit, during indexing and summaries; then rerun."""
    row = Row("5 kill -9 in ingest's indexing phase")
    n = e.sizes.crash_turns
    big = write_jsonl(
        e.file("big.jsonl"), [{**t, "session": f"c{i // 500}"} for i, t in enumerate(filler_turns(n, 400, "k"))]
    )
    seed = write_jsonl(
        e.file("seed.jsonl"),
        [
            {"role": "user", "content": "seed", "session": "seed"},
            {"role": "assistant", "content": "ok", "session": "seed"},
        ],
    )
    clean = e.target("clean")
    e.cli(clean, "ingest", str(big), timeout=600).check_returncode()
    want = e.child("derived", clean, "k17 k18 k19 line")
    crashed = e.target("crashed")
    e.cli(crashed, "ingest", str(seed)).check_returncode()
    proc = subprocess.Popen(
        [PY, "-m", "stratamem", "--db", crashed, "ingest", str(big)],
        env=e.env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    committed = e.child("wait_turns", crashed, 3, 120)
    killed = proc.poll() is None
    if killed:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    rerun = e.cli(crashed, "ingest", str(big), timeout=600)
    got = e.child("derived", crashed, "k17 k18 k19 line")
    row.attempts = 1
    row.handled = int(killed and got["segments"] >= want["segments"] and got["turns"] == want["turns"] + 2)
    row.lost = max(0, want["turns"] + 2 - got["turns"])
    first_line = rerun.stdout.strip().splitlines()[0] if rerun.stdout.strip() else rerun.stderr.strip()[-120:]
    row.note(
        ("killed" if killed else "MISSED (ingest had finished)") + f" {committed['waited']:.1f} s after start, "
        f"{committed['turns'] - 2} turns committed; rerun: '{first_line}'; segments {got['segments']} "
        f"(clean ingest: {want['segments']}); first context {got['first_context_s']:.1f} s (clean: "
        f"{want['first_context_s']:.1f} s); status warnings: {len(got['warnings'])}"
    )
    return [row]


# --- 6: slow and half-open connections ---------------------------------------------------------


def _half_open(port: int, n: int, kind: str) -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.settimeout(3)
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            s.close()
            break
        if kind == "header":
            s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        elif kind == "body":
            s.sendall(
                b"POST /api/v1/namespaces/default/turns HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                + TOKEN.encode()
                + b'\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"messa'
            )
        socks.append(s)
    return socks


def _closed(socks: list[socket.socket]) -> int:
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            while True:
                data = s.recv(65536)
                if data == b"":
                    n += 1
                    break
        except BlockingIOError:
            pass
        except OSError:
            n += 1
        s.close()
    return n


def probe_connections(e: Env) -> list[Row]:
    """Half-open requests against a normal server; the same against one whose open-file limit is 64.

    Both servers carry a token: the silent and header-trickling clients never get
    as far as presenting it, and the slow-body clients present it and then stall.
    Finding 7 runs on the first server while the half-open connections wait.
    """
    slow = Row("6 half-open connections (headers, body, silent)")
    fd = Row("6 open-file limit (64) reached, token set")
    n = e.sizes.half_open
    started: dict[str, Server] = {}

    def start(name: str, **kw: Any) -> None:
        started[name] = Server(e, e.target(name), token=TOKEN, **kw)

    threads = [
        threading.Thread(target=start, args=("conn",), kwargs={"max_body": BODY_LIMIT}),
        threading.Thread(target=start, args=("fd",), kwargs={"nofile": 64}),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    srv, low = started["conn"], started["fd"]
    try:
        kinds = {k: _half_open(srv.port, m, k) for k, m in (("header", n // 2), ("body", n // 4), ("silent", n // 4))}
        size0 = low.log.stat().st_size
        exhaust = _half_open(low.port, 80, "header")
        waited = time.monotonic()
        bodies = _bodies(srv)
        time.sleep(max(0.0, e.sizes.idle_wait - (time.monotonic() - waited)))
        ok = status_of(srv.request("GET", srv.base + "/api/v1/health", timeout=5))
        probes = [status_of(low.request("GET", low.base + "/api/v1/health", timeout=2)) for _ in range(3)]
        grown = low.log.stat().st_size - size0
        closed = {k: _closed(v) for k, v in kinds.items()}
        _closed(exhaust)
    finally:
        srv.stop()
        low.stop()
    total = sum(len(v) for v in kinds.values())
    slow.attempts, slow.handled = total, sum(closed.values())
    slow.leaked = total - slow.handled
    slow.note(
        f"closed by the server after {e.sizes.idle_wait:.0f} s: "
        + ", ".join(f"{k} {closed[k]}/{len(v)}" for k, v in kinds.items())
        + f"; /health {ok}"
    )
    fd.attempts = len(probes)
    fd.handled = sum(p == 200 for p in probes)
    fd.leaked = grown
    fd.note(
        f"{len(exhaust)} half-open sockets; /health after {e.sizes.idle_wait:.0f} s: "
        f"{', '.join(map(str, probes))}; server log grew {grown / 1e6:.1f} MB ('leaked' = log bytes)"
    )
    return [slow, fd, bodies]


# --- 7: unauthenticated large bodies ---------------------------------------------------------

BODY_LIMIT = 16384
"""``--max-body-bytes`` of the finding-7 server: the import routes get 64 times that (1 MiB)."""


def _bodies(srv: Server) -> Row:
    """Bodies over the normal limit, under the import limit, without a token, on paths ending in /import."""
    row = Row("7 unauthenticated body to `*/import` paths")
    size = 512 * 1024
    seen = []
    for path in ("/static/x/import", "/login/import", "/login/x/import", "/api/v1/namespaces/x/import"):
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=2)
        s.sendall(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-ndjson\r\n"
            f"Content-Length: {size}\r\n\r\n".encode()
        )
        try:
            head = s.recv(200).split(b"\r\n")[0].decode()
            seen.append((path, head.split(" ", 2)[1] if head else "closed", 0))
        except TimeoutError:
            s.settimeout(20)
            try:
                s.sendall(b"x" * size)
                head = s.recv(200).split(b"\r\n")[0].decode()
            except OSError as exc:
                head = f"x {type(exc).__name__}"
            seen.append((path, head.split(" ", 2)[1] if head else "closed", size))
        s.close()
    row.attempts = len(seen)
    row.handled = sum(read == 0 for _, _, read in seen)
    row.leaked = sum(read for _, _, read in seen)
    row.note(
        "; ".join(
            f"{p}: {code}" + (f" after reading {read // 1024} KiB" if read else " at once") for p, code, read in seen
        )
        + " ('leaked' = body bytes read)"
    )
    return row


# --- 8: the smaller findings ------------------------------------------------------------------


def probe_small_http(e: Env) -> list[Row]:
    """8a keep-alive after a 500, 8b integers past 2^63, 8f wrong types, 8g manifests on GET, 8i retries."""
    target = e.target("small")
    e.cli(target, "ingest", str(write_jsonl(e.file("c.jsonl"), conversation(40)))).check_returncode()
    ints = Row("8b integers above 2^63 (HTTP, MCP)")
    alive = Row("8a next request on a keep-alive connection after a 500")
    types = Row("8f wrong JSON types coerced silently (HTTP)")
    manif = Row("8g `GET /context`, `/search` write manifests")
    idem = Row("8i retried `POST /turns` with `Idempotency-Key`")
    with Server(e, target) as srv:
        api = srv.api()
        big_urls = [
            f"/context?budget={BIG}",
            f"/context?budget={2**63}",
            f"/sessions/s1/turns?after_seq={BIG}",
            f"/sessions/s1/turns?after_seq={2**63 - 1}",
            f"/nodes?level={BIG}",
            f"/manifests/{BIG}",
            f"/items/{BIG}",
            f"/nodes/{BIG}",
            f"/nodes/{BIG}/expand",
        ]
        codes = [(u, status_of(srv.request("GET", api + u))) for u in big_urls]
        codes.append(("POST /context budget", status_of(srv.request("POST", api + "/context", json={"budget": BIG}))))
        codes.append(("POST /items/{big}/confirm", status_of(srv.request("POST", api + f"/items/{BIG}/confirm"))))
        # A turn nested too deep for the response serializer (finding 2): listing it is a 500 today.
        srv.request(
            "POST",
            api + "/turns",
            json={"session": "deep", "messages": [{"role": "user", "content": "deep", "metadata": nested(DEPTH)}]},
        )
        mcp = McpSession(e, target)
        try:
            mcp_calls = [
                ("forget", {"turns": [BIG]}),
                ("memory_promote", {"id": BIG}),
                ("get_context", {"budget": BIG}),
                ("search_memory", {"query": "x", "k": BIG}),
            ]
            mcp_out = [(n, *mcp.call(n, a)[:2]) for n, a in mcp_calls]
            # 8h rides on this session: a long query over MCP, beside HTTP's 20,000-character cap.
            long_q = ("budget " * (e.sizes.mcp_query_chars // 7 + 1))[: e.sizes.mcp_query_chars]
            big_q = [(n, *mcp.call(n, {"query": long_q}, timeout=900)) for n in ("search_memory", "get_context")]
        finally:
            mcp.close()
        http_q = status_of(srv.request("GET", api + "/search", params={"q": "x" * 20_001}))
        # A clean refusal is a 4xx; an MCP refusal is a library error class, not an unexpected crash.
        ok_http = [c for c in codes if isinstance(c[1], int) and 400 <= c[1] < 500]
        ok_mcp = [
            c
            for c in mcp_out
            if c[1]
            and c[2].split(":")[0].endswith("Error")
            and "unexpected" not in c[2].lower()
            and "Error executing" not in c[2]
        ]
        ints.attempts, ints.handled = len(codes) + len(mcp_out), len(ok_http) + len(ok_mcp)
        bad = [f"{u.split('?')[0]} {c}" for u, c in codes if (u, c) not in ok_http]
        bad += [f"MCP {n}: {t[:60]}" for n, err, t in mcp_out if (n, err, t) not in ok_mcp]
        ints.note("not a 4xx: " + "; ".join(bad) if bad else "every one refused")
        # 8a: a request that fails, then the next one on the same connection.
        for path in (f"/manifests/{BIG}", f"/items/{BIG}", "/sessions/deep/turns"):
            first, second = _keepalive_pair(srv.port, f"/api/v1/namespaces/default{path}")
            alive.attempts += 1
            alive.handled += second == "200"
            alive.note(f"{first} then {second}")
        alive.observed = [", ".join(alive.observed)]
        # 8f: lax coercion of wrong JSON types.
        coerced = []
        for name, body in (
            ('budget "500"', {"budget": "500"}),
            ("budget 500.0", {"budget": 500.0}),
            ("query 5", {"query": 5}),
            ("budget true", {"budget": True}),
        ):
            code = status_of(srv.request("POST", api + "/context", json=body))
            types.attempts += 1
            types.handled += code == 400
            if code != 400:
                coerced.append(f"{name}: {code}")
        code = status_of(
            srv.request(
                "POST",
                api + "/turns",
                json={
                    "session": "types",
                    "format": "openai",
                    "messages": [
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
                            ],
                        },
                        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                    ],
                },
            )
        )
        types.attempts += 1
        types.handled += code == 400
        if code != 400:
            coerced.append(f"OpenAI arguments as an object: {code}")
        types.note("accepted: " + "; ".join(coerced) if coerced else "every one refused")
        # 8g: reads that write.
        before = len(srv.request("GET", api + "/manifests", params={"limit": 1000}).json()["manifests"])
        for q in ("budget review", "hiking trip", "tax filing"):
            srv.request("GET", api + "/context", params={"query": q})
            srv.request("GET", api + "/search", params={"q": q})
        after = len(srv.request("GET", api + "/manifests", params={"limit": 1000}).json()["manifests"])
        manif.attempts, manif.leaked = 6, after - before
        manif.handled = 6 - min(6, after - before)
        manif.note(f"{after - before} manifests written by 6 GETs")
        # 8i: the client's connection drops before the answer; it retries with the same key.
        for k in range(3):
            key = f"drill-retry-{k}"
            body = json.dumps({"session": "retry", "messages": [{"role": "user", "content": f"retry {k} once"}]})
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            s.sendall(
                f"POST /api/v1/namespaces/default/turns HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                f"application/json\r\nIdempotency-Key: {key}\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode()
            )
            s.close()
            time.sleep(0.3)
            srv.request(
                "POST",
                api + "/turns",
                content=body,
                headers={"content-type": "application/json", "Idempotency-Key": key},
            )
        turns = srv.request("GET", api + "/sessions/retry/turns").json()["turns"]
        counts = Counter(t["content"] if isinstance(t["content"], str) else json.dumps(t["content"]) for t in turns)
        idem.attempts = 3
        idem.leaked = sum(n - 1 for n in counts.values())
        idem.handled = sum(n == 1 for n in counts.values())
        idem.note(f"{len(turns)} turns stored for 3 messages")
    mq = Row("8h long query over MCP")
    mq.attempts = len(big_q)
    mq.handled = sum(err for _, err, _, _ in big_q)
    mq.note(
        f"{len(long_q):,}-character query: "
        + "; ".join(f"{n} {'refused' if err else 'answered'} in {t:.1f} s" for n, err, _, t in big_q)
        + f" (HTTP /search with 20,001 characters: {http_q})"
    )
    return [alive, ints, types, manif, mq, idem]


def _keepalive_pair(port: int, path: str) -> tuple[str, str]:
    """Status of ``GET path`` and of ``GET /api/v1/health`` sent next on the same connection."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        first = _read_response(s)
        try:
            s.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            second = _read_response(s)
        except OSError as exc:
            second = type(exc).__name__
        return first, second
    finally:
        s.close()


def _read_response(s: socket.socket) -> str:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return "closed"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")), 0)
    while len(rest) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head.split(b" ")[1].decode()


def probe_small_cli(e: Env) -> list[Row]:
    """8c disk full, 8d corrupted schema, 8e read-only store, 8f BOM, 8k session count (SQLite files)."""
    rows = []
    conv = write_jsonl(e.file("c.jsonl"), conversation())
    big = write_jsonl(e.file("big.jsonl"), [{**t, "session": "full"} for t in filler_turns(2000, 900, "f")])
    source = e.target("source")
    e.cli(source, "ingest", str(conv)).check_returncode()

    def copy(name: str) -> str:
        """A copy of the 80-turn source store (closed, so its WAL is checkpointed into the file)."""
        t = e.target(name)
        shutil.copyfile(source, t)
        return t

    # 8c: the file-size limit stands in for a full disk (SQLITE_FULL / EFBIG on the next write).
    full = Row("8c disk full during ingest")
    target = copy("full")
    cap = max(p.stat().st_size for p in Path(target).parent.iterdir()) + 65536

    def fsize() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap, resource.RLIM_INFINITY))

    out = e.cli(target, "ingest", str(big), preexec=fsize)
    after = e.child("derived", target, "")
    err = out.stderr.strip().splitlines()
    full.attempts = 1
    full.handled = int(out.returncode != 0 and len(err) == 1 and "savepoint" not in err[0] and after["turns"] == 80)
    full.lost = max(0, 80 - after["turns"])
    full.leaked = max(0, after["turns"] - 80)
    full.note(f"rc {out.returncode}: '{tail(out.stderr, target)}'; turns after: {after['turns']} (80 before)")
    rows.append(full)
    # 8d: corrupted schema pages.
    corrupt = Row("8d corrupted schema page")
    shown = []
    commands = [["status"]] if e.sizes.quick else [["status"], ["context", "hello"]]
    for mode in ("schema-garbage", "schema-sql", "text-encoding", "truncated"):
        t = copy("corrupt")
        _corrupt(Path(t), mode)
        for cmd in commands:
            o = e.cli(t, *cmd)
            lines = o.stderr.strip().splitlines()
            corrupt.attempts += 1
            good = o.returncode != 0 and len(lines) <= 2 and "Traceback" not in o.stderr
            corrupt.handled += good
            if not good:
                shown.append(f"{mode}/{cmd[0]}: rc {o.returncode}, {len(lines)} stderr lines")
    corrupt.note("; ".join(shown) if shown else "every one a one-line error (not reproduced)")
    rows.append(corrupt)
    # 8e: a read-only store (file 0444 in a directory 0555), read with no override of file modes.
    ro = Row("8e read-only store: status/export/context/search")
    t = copy("ro")
    d = Path(t).parent
    for p in d.iterdir():
        p.chmod(0o444)
    d.chmod(0o555)
    failed = []
    try:
        for cmd in (["status"], ["export"], ["context", "hello"], ["search", "hello"], ["namespaces"]):
            o = e.cli(t, *cmd, preexec=_drop_file_override)
            ro.attempts += 1
            ro.handled += o.returncode == 0
            if o.returncode:
                failed.append(f"{cmd[0]}: {tail(o.stderr, t, 90)}")
    finally:
        d.chmod(0o755)
    by_error: dict[str, list[str]] = {}
    for f in failed:
        cmd, _, msg = f.partition(": ")
        by_error.setdefault(msg, []).append(cmd)
    ro.note("; ".join(f"{', '.join(cmds)}: {msg}" for msg, cmds in by_error.items()) if failed else "every read worked")
    rows.append(ro)
    # 8f: files starting with a UTF-8 byte order mark.
    bom = Row("8f UTF-8 BOM files (JSON Lines, JSON)")
    t = e.target("bom")
    plain = conversation(4)
    for name, f in (("jsonl", write_jsonl(e.file("bom.jsonl"), plain, b"\xef\xbb\xbf")), ("json", e.file("bom.json"))):
        if name == "json":
            f.write_bytes(
                b"\xef\xbb\xbf" + json.dumps([{k: v for k, v in r.items() if k != "session"} for r in plain]).encode()
            )
        o = e.cli(t, "ingest", str(f), "-s", f"bom{name}")
        bom.attempts += 1
        bom.handled += o.returncode == 0
        bom.note(f"{name}: " + ("accepted" if o.returncode == 0 else tail(o.stderr, str(f), 80)))
    rows.append(bom)
    # 8k: the session count ingest reports.
    count = Row("8k `ingest` reports its session count")
    inter = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"interleaved {i}", "session": f"r{i % 3}"}
        for i in range(30)
    ]
    o = e.cli(e.target("count"), "ingest", str(write_jsonl(e.file("inter.jsonl"), inter)))
    line = o.stdout.strip().splitlines()[0] if o.stdout.strip() else o.stderr.strip()
    count.attempts = 1
    count.handled = int(" 3 session(s)" in line)
    count.note(f"3 sessions, 30 lines: '{line[:90]}'")
    rows.append(count)
    return rows


def _corrupt(path: Path, mode: str) -> None:
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    pages = [i for i in range(len(data) // page) if data.find(b"CREATE TABLE", i * page, (i + 1) * page) >= 0]
    if mode == "schema-garbage":  # a sqlite_schema page (past its header) overwritten with noise
        rnd = random.Random(24)
        p = pages[0]
        data[p * page + 8 : (p + 1) * page] = bytes(rnd.randrange(256) for _ in range(page - 8))
    elif mode == "schema-sql":  # a table's CREATE statement no longer parses
        i = data.find(b"CREATE TABLE", pages[0] * page)
        data[i : i + 12] = b"CREATE TABXE"
    elif mode == "text-encoding":  # the header says UTF-16: every schema name reads as noise
        data[56:60] = (3).to_bytes(4, "big")
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))


def _drop_file_override() -> None:
    """In the child: root loses the capabilities that ignore file modes (so a 0444 file is read-only)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP: gone from the bounding set, so gone after exec


def probe_check_derived(e: Env) -> list[Row]:
    """8j ``check_derived`` right after forgets that it should find consistent."""
    row = Row("8j `check_derived` after a forget")
    target = e.target("derived")
    e.cli(target, "ingest", str(write_jsonl(e.file("c.jsonl"), conversation()))).check_returncode()
    out = e.child("forget_check", target, [15, 44, 76])
    row.attempts = len(out)
    row.handled = sum(not r["problems"] for r in out)
    row.note(
        "after each forget in turn (problems are cumulative): "
        + "; ".join(
            f"turn {r['turn']}: "
            + (f"{len(r['problems'])} problem(s), e.g. {r['problems'][0][:70]}" if r["problems"] else "ok")
            for r in out
        )
    )
    return [row]


# --- durability: kill -9 of serve, ingest, forget ---------------------------------------------

INGEST_TURNS = 1000
"""Turns per file of the durability drill's ingests (a run lasts ~2 s: kills land before, in and after it)."""


def probe_durability(e: Env) -> list[Row]:
    """Acknowledged writes under kill -9 of ``serve`` (adds), ``ingest`` and ``forget``."""
    row = Row("D 0 acked writes lost, kill -9 serve/ingest/forget")
    rnd = random.Random(24)
    target = e.target("dur")
    acked: set[str] = set()
    forgotten: set[str] = set()
    notes = []
    # serve: three clients add one turn each per request; the server dies under them.
    sent = 0
    for kill in range(e.sizes.serve_kills):
        srv = Server(e, target)
        stop = threading.Event()
        lock = threading.Lock()

        def client(c: int, srv: Server = srv, stop: threading.Event = stop) -> None:
            nonlocal sent
            with httpx.Client(timeout=10) as http:
                k = 0
                while not stop.is_set():
                    key = f"srv{c}-{kill}-{k}"
                    k += 1
                    try:
                        r = http.post(
                            srv.api() + "/turns",
                            json={"session": f"dur{c}", "messages": [{"role": "user", "content": f"{key} durable"}]},
                        )
                    except httpx.HTTPError:
                        return
                    with lock:
                        sent += 1
                        if r.status_code == 201:
                            acked.add(key)

        threads = [threading.Thread(target=client, args=(c,)) for c in range(3)]
        for t in threads:
            t.start()
        time.sleep(rnd.uniform(1.0, 3.0))
        srv.kill()
        stop.set()
        for t in threads:
            t.join(15)
    notes.append(f"serve: {e.sizes.serve_kills} kills under {sent} adds")
    # ingest: each file is acknowledged when its ingest exits 0; a killed one runs again. The first
    # run is timed; the kills land at even fractions of that time (start-up, commit, indexing).
    partial = kills = 0
    took = 0.0
    for i in range(e.sizes.ingest_kills + 1):
        rows = [
            {"role": "user" if j % 2 == 0 else "assistant", "content": f"ing{i}-{j} durable text", "session": f"ing{i}"}
            for j in range(INGEST_TURNS)
        ]
        f = write_jsonl(e.file(f"ing{i}.jsonl"), rows)
        cmd = [PY, "-m", "stratamem", "--db", target, "ingest", str(f)]
        if i > 0:
            p = subprocess.Popen(cmd, env=e.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(took * i / (e.sizes.ingest_kills + 1))
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                kills += 1
            p.wait(60)
            n = e.child("count_prefix", target, f"ing{i}-")["n"]
            partial += n not in (0, INGEST_TURNS)
        t0 = time.monotonic()
        if subprocess.run(cmd, env=e.env(), capture_output=True, timeout=300).returncode == 0:
            acked.update(r["content"].split()[0] for r in rows)
        took = took or time.monotonic() - t0
    notes.append(f"ingest: {kills} kills, {partial} partial")
    # forget: a session goes when its forget exits 0; a killed forget leaves all or nothing.
    half = kills = 0
    took = 0.0
    unacked_forgets: set[str] = set()

    def committed_kills(keys: set[str]) -> int:
        return len(keys) // INGEST_TURNS

    for i in range(e.sizes.forget_kills + 1):
        cmd = [PY, "-m", "stratamem", "--db", target, "forget", "--session", f"ing{i}", "--yes"]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=e.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if i > 0:
            time.sleep(took * i / (e.sizes.forget_kills + 1))
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                kills += 1
        rc = p.wait(120)
        took = took or time.monotonic() - t0
        n = e.child("count_prefix", target, f"ing{i}-")["n"]
        half += n not in (0, INGEST_TURNS)
        keys = {f"ing{i}-{j}" for j in range(INGEST_TURNS)}
        if rc == 0:
            forgotten.update(keys)
        elif n == 0:
            # Killed after its commit: gone without an acknowledgement, which is allowed; not a loss.
            unacked_forgets.update(keys)
    notes.append(f"forget: {kills} kills ({committed_kills(unacked_forgets)} after the commit), {half} partial")
    keys = Counter(e.child("keys", target)["keys"])
    live = acked - forgotten - unacked_forgets
    row.attempts = len(acked)
    row.lost = sum(1 for k in live if keys[k] == 0)
    dup = sum(1 for k, n in keys.items() if n > 1)
    back = sum(1 for k in forgotten if keys[k])
    row.leaked = dup + partial + half + back
    row.handled = len(acked) - row.lost
    row.note(", ".join(notes) + f"; {dup} duplicated, {back} forgotten turns back")
    return [row]


# --- children (run with the tree's stratamem) --------------------------------------------------


def _open(target: str, ns: str = NS) -> Any:
    from stratamem import Memory

    if target.startswith("postgresql"):
        from stratamem.store import open_store

        return Memory(open_store(target), namespace=ns, embedder=None)
    return Memory(target, namespace=ns, embedder=None)


def child_main(name: str, target: str, args: list[Any]) -> None:
    if name == "watch":
        # A Memory held open in another process: answers context queries until stdin closes.
        mem = _open(target)
        for line in sys.stdin:
            req = json.loads(line)
            n = sum(
                req["secret"] in mem.context(q, policy=p, budget=3000, format="text").text for q, p in req["queries"]
            )
            print(json.dumps({"carried": n}), flush=True)
        mem.close()
        return
    if name == "extract":
        start, rounds, facts = args
        mem = _open(target)
        turn = mem.turns(limit=1)[0].id
        for r in range(rounds):
            time.sleep(max(0.0, start + r * 0.5 - time.time()))
            mem.items.extract_facts(
                [
                    (f"Fact {r}-{k}: the {TOPICS[k % 8]} key opens door {k} in round {r}", "fact", [turn])
                    for k in range(facts)
                ]
            )
        mem.close()
        print(json.dumps({"ok": True}))
        return
    if name == "facts":
        mem = _open(target)
        seen = Counter(
            " ".join(i.content.lower().split()).rstrip(".")
            for i in mem.items.list(include_dead=True)
            if i.content.startswith("Fact ")
        )
        rounds = {k.split()[1].split("-")[0] for k, n in seen.items() if n > 1}
        print(
            json.dumps(
                {
                    "items": sum(seen.values()),
                    "distinct": len(seen),
                    "rounds_with_copies": len(rounds),
                    "duplicates": sum(n - 1 for n in seen.values()),
                    "facts_with_copies": sum(n > 1 for n in seen.values()),
                }
            )
        )
        return
    if name == "wait_turns":
        least, timeout = args
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < timeout:
            mem = _open(target)
            n = mem.status().turns
            mem.close()
            if n >= least:
                break
            time.sleep(0.05)
        print(json.dumps({"turns": n, "waited": time.monotonic() - t0}))
        return
    if name == "derived":
        mem = _open(target)
        st = mem.status()
        segments = len(mem.pyramid.nodes(level=1, limit=100_000)) if mem.config.pyramid.enabled else 0
        t0 = time.monotonic()
        if args and args[0]:
            mem.context(args[0], budget=2000)
        took = time.monotonic() - t0
        print(
            json.dumps(
                {"turns": st.turns, "segments": segments, "warnings": list(st.warnings), "first_context_s": took}
            )
        )
        return
    if name == "seed_deep":
        # Rows nested DEPTH deep, as versions before the JSON limit stored them (raw UPDATEs).
        mem = _open(target)
        deep = json.dumps(nested(DEPTH), separators=(",", ":"))
        for session in args[0]:
            if session == "tool":
                mem.add(
                    [
                        {"role": "user", "content": "please run the tool"},
                        {"role": "assistant", "content": [{"type": "tool_use", "id": "t9", "name": "x", "input": {}}]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "ok"}]},
                        {"role": "assistant", "content": "done"},
                    ],
                    session=session,
                    format="anthropic",
                )
                turn = mem.turns(session)[1]
                column, value = "content", f'[{{"type":"tool_use","id":"t9","name":"x","input":{deep}}}]'
            else:
                mem.add({"role": "user", "content": f"deep {session}", "metadata": {"a": 1}}, session=session)
                turn = mem.turns(session)[0]
                column, value = "metadata", deep
            with mem.store.sql.write() as w:
                w.execute(f"UPDATE turns SET {column} = ? WHERE id = ?", (value, turn.id))
        mem.close()
        print(json.dumps({"ok": True}))
        return
    if name == "forget_check":
        from stratamem.testing.consistency import check_derived

        mem = _open(target)
        out = []
        for turn in args[0]:
            mem.forget(turns=[turn])
            out.append({"turn": turn, "problems": list(check_derived(mem).problems)})
        print(json.dumps(out))
        return
    if name in ("count_prefix", "keys"):
        mem = _open(target)
        words = [t.turn.text.split()[0] for t in mem.turns() if t.turn.text.split()]
        if name == "keys":
            print(json.dumps({"keys": words}))
        else:
            print(json.dumps({"n": sum(w.startswith(args[0]) for w in words)}))
        return
    raise SystemExit(f"unknown child {name}")


# --- the run ----------------------------------------------------------------------------------

PROBES: list[tuple[str, Callable[[Env], list[Row]], tuple[str, ...]]] = [
    ("1", probe_forget, ("sqlite", "postgres")),
    ("2", probe_deep, ("sqlite", "postgres")),
    ("3", probe_import_freeze, ("sqlite",)),
    ("4", probe_item_race, ("sqlite", "postgres")),
    ("5", probe_crash_repair, ("sqlite", "postgres")),
    ("67", probe_connections, ("sqlite",)),
    ("8", probe_small_http, ("sqlite", "postgres")),
    ("8cli", probe_small_cli, ("sqlite",)),
    ("8j", probe_check_derived, ("sqlite", "postgres")),
    ("D", probe_durability, ("sqlite", "postgres")),
]


@contextmanager
def trees(srcs: list[str], baseline: str | None) -> Iterator[list[Tree]]:
    out = []
    for s in srcs:
        label, _, path = s.rpartition("=")
        p = Path(path).resolve()
        out.append(Tree(label or (p.parent.name if p.name == "src" else p.name), p))
    out = out or [Tree("this", ROOT / "src")]
    tmp = None
    if baseline:
        tmp = tempfile.mkdtemp(prefix="drill-base-")
        blob = subprocess.run(
            ["git", "-C", str(ROOT), "archive", baseline, "src"], check=True, capture_output=True
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
            tar.extractall(tmp, filter="data")
        out.insert(0, Tree(baseline, Path(tmp) / "src"))
    try:
        yield out
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child_main(sys.argv[2], sys.argv[3], [json.loads(a) for a in sys.argv[4:]])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller probes (about 2 minutes, SQLite)")
    ap.add_argument(
        "--backend",
        choices=["sqlite", "postgres", "both"],
        default=None,
        help="store backend (default: sqlite with --quick, both otherwise)",
    )
    ap.add_argument(
        "--src",
        action="append",
        default=[],
        help="a source tree's src directory, optionally LABEL=PATH (repeatable; default: this repository's src)",
    )
    ap.add_argument("--baseline", help="a git revision drilled beside the trees (git archive REV src)")
    ap.add_argument("--only", default="", help="comma-separated probe ids: 1,2,3,4,5,67,8,8cli,8j,D")
    args = ap.parse_args()
    backends = {"sqlite": ["sqlite"], "postgres": ["postgres"], "both": ["sqlite", "postgres"]}[
        args.backend or ("sqlite" if args.quick else "both")
    ]
    only = set(filter(None, args.only.split(",")))
    sizes = Sizes.make(args.quick)
    started = time.monotonic()
    load0 = os.getloadavg()
    rows: list[Row] = []
    pg = None
    with trees(args.src, args.baseline) as drilled, tempfile.TemporaryDirectory(prefix="drill24-") as tmp:
        try:
            if "postgres" in backends:
                pg = _start_pg()
            for backend in backends:
                for tree in drilled:
                    env = Env(tree, backend, Path(tmp) / f"{tree.label}-{backend}", pg.get_uri() if pg else None, sizes)
                    for pid, probe, where in PROBES:
                        if (only and pid not in only) or backend not in where:
                            continue
                        t0 = time.monotonic()
                        try:
                            got = probe(env)
                        except Exception as exc:  # noqa: BLE001 - one failed probe must not end the run
                            got = [Row(f"{pid} (probe failed)", observed=[f"{type(exc).__name__}: {exc}"[:300]])]
                        for r in got:
                            r.tree, r.backend, r.seconds = tree.label, backend, time.monotonic() - t0
                        rows += got
                        print(
                            f"[{time.monotonic() - started:6.0f} s] {tree.label}/{backend} probe {pid}: "
                            f"{time.monotonic() - t0:.0f} s",
                            file=sys.stderr,
                            flush=True,
                        )
        finally:
            for live in reversed(_LIVE):
                try:
                    live.close() if isinstance(live, McpSession) else live.stop()
                except Exception:  # noqa: BLE001 - best effort on the way out
                    pass
            if pg is not None:
                pg.cleanup()
    print_table(rows, len({r.tree for r in rows}) > 1)
    load1 = os.getloadavg()
    print(
        f"\n{'quick' if args.quick else 'full'} run, {time.monotonic() - started:.0f} s; load average "
        f"{load0[0]:.1f} at start, {load1[0]:.1f} at end; {os.cpu_count()} cores; trees: "
        + ", ".join(f"{t.label}={t.src}" for t in drilled)
    )


def _start_pg() -> Any:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

        return pgserver.get_server(Path(tempfile.mkdtemp(prefix="drpg-", dir="/tmp")), cleanup_mode="delete")


def print_table(rows: list[Row], with_tree: bool) -> None:
    index = {id(r): i for i, r in enumerate(rows)}
    rows = sorted(rows, key=lambda r: (_order(r.finding), r.backend, index[id(r)]))
    head = [
        "finding",
        *(["tree"] if with_tree else []),
        "backend",
        "attempts",
        "handled",
        "lost",
        "leaked",
        "served-after-forget",
        "observed",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for r in rows:
        cells = [
            r.finding,
            *([r.tree] if with_tree else []),
            r.backend,
            str(r.attempts),
            str(r.handled),
            str(r.lost),
            f"{r.leaked:,}",
            str(r.served),
            "; ".join(r.observed).replace("|", "/"),
        ]
        print("| " + " | ".join(cells) + " |")


def _order(finding: str) -> tuple[int, str]:
    head = finding.split()[0]
    return (99 if head == "D" else int("".join(ch for ch in head if ch.isdigit()) or 98), head)


if __name__ == "__main__":
    main()
