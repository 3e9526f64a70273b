"""What every system's worker shares: the network guard, the protocol loop and the result record.

A worker (``sys_stratamem.py``, ``sys_mem0.py``, ``sys_llamaindex.py``) runs
in the system's own interpreter and knows only how to open, write and search
its system; this module drives it the same way for all of them:

* ``build``: open the system (embedding model loaded: ``open_s``), ingest
  every conversation into a fresh namespace / user / index, session by
  session in order (timed: ingest turns/s), close it and measure every byte
  under its work directory (at rest), reopen it and ask every question (one
  untimed warm-up query per conversation first, so every timed query is
  warm), close it and measure the bytes again;
* ``first``: a fresh process imports the system, opens the built store and
  asks one question; the runner times the whole subprocess from outside.

Standard library only (the worker imports its own system after the guard is
on). The network guard is a :func:`sys.addaudithook` hook that refuses and
counts every ``socket.connect``/``getaddrinfo``/``sendto`` to a non-local
address: a system that tries to phone home (telemetry, a model hub) fails or
shows up in ``network_attempts``, which the runner requires to be zero.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))

import data  # stdlib-only sibling, importable from any interpreter

__all__ = ["System", "dir_bytes", "guard_network", "main"]

_NET_EVENTS = {"socket.connect", "socket.getaddrinfo", "socket.sendto", "socket.sendmsg"}
_LOCAL = ("127.", "::1", "localhost", "0.0.0.0")
attempts: list[str] = []


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event not in _NET_EVENTS:
        return
    target = args[1] if event != "socket.getaddrinfo" else args[0]
    if isinstance(target, tuple):
        target = target[0]
    if isinstance(target, bytes):
        target = target.decode(errors="replace")
    if isinstance(target, str) and (target.startswith(_LOCAL) or target.startswith("/")):
        return  # loopback or a UNIX socket: not the network
    attempts.append(f"{event} {target!r}")
    raise OSError(f"peer benchmark: network refused ({event} {target!r})")


def guard_network() -> None:
    """Refuse and record every non-local connection from now on (cannot be removed)."""
    sys.addaudithook(_hook)


class System(Protocol):
    """One memory system as the harness drives it."""

    name: str
    """Row label."""

    def open(self, workdir: Path, model_dir: str) -> None:
        """Open (or create) the store under ``workdir`` with the MiniLM weights in ``model_dir``."""

    def add_session(self, user: str, session: str, turns: Sequence[data.PeerTurn]) -> None:
        """Store one session's turns for ``user`` (a fresh namespace per conversation)."""

    def finish_user(self, user: str) -> None:
        """Called after a conversation's last session (persist, if the system needs it)."""

    def search(self, user: str, query: str) -> list[str]:
        """Top turns for ``query`` as ``dia_id``s, best first (at least 10 when there are)."""

    def close(self) -> None:
        """Release the store (files at rest: a SQLite WAL checkpointed, locks gone)."""

    def versions(self) -> dict[str, str]:
        """Exact versions of everything that shapes the figures."""


def dir_bytes(path: Path) -> tuple[int, dict[str, int]]:
    """Bytes of every file under ``path``, total and per top-level entry."""
    parts: dict[str, int] = {}
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            top = p.relative_to(path).parts[0]
            parts[top] = parts.get(top, 0) + p.stat().st_size
    return sum(parts.values()), parts


def _pct(values: Sequence[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))] if s else float("nan")


def _build(
    system: System, args: argparse.Namespace, extra: Callable[[System, dict, argparse.Namespace], None] | None
) -> dict:
    convs = data.conversations(args.data, args.conversations)
    questions = data.question_texts(args.data, args.conversations, args.questions)
    workdir = Path(args.workdir)
    t0 = time.perf_counter()
    system.open(workdir, args.model_dir)
    open_s = time.perf_counter() - t0
    ingest_s, n_turns = 0.0, 0
    per_conv = {}
    for sample, turns in convs:
        t0 = time.perf_counter()
        sessions: dict[str, list[data.PeerTurn]] = {}
        for t in turns:
            sessions.setdefault(t.session, []).append(t)
        for name, st in sessions.items():
            system.add_session(sample, name, st)
        system.finish_user(sample)
        dt = time.perf_counter() - t0
        per_conv[sample] = {"turns": len(turns), "ingest_s": dt}
        ingest_s += dt
        n_turns += len(turns)
        print(f"  {system.name}: {sample} {len(turns)} turns in {dt:.1f} s", file=sys.stderr, flush=True)
    # Bytes at rest: the store closed (a SQLite WAL is checkpointed and removed on close),
    # then reopened for the queries; the first query of each conversation below is untimed.
    system.close()
    bytes_ingest, parts = dir_bytes(workdir)
    system.open(workdir, args.model_dir)
    rankings: dict[str, dict[int, list[str]]] = {}
    latencies: list[float] = []
    for sample, qs in questions.items():
        if qs:
            system.search(sample, qs[0][1])  # warm-up: the conversation's index is loaded, not timed
        rankings[sample] = {}
        for index, text in qs:
            t0 = time.perf_counter()
            ranked = system.search(sample, text)
            latencies.append(time.perf_counter() - t0)
            rankings[sample][index] = ranked[:25]
    out = {
        "name": system.name,
        "turns": n_turns,
        "open_s": open_s,
        "ingest_s": ingest_s,
        "per_conversation": per_conv,
        "bytes_after_ingest": bytes_ingest,
        "bytes_parts": parts,
        "search_ms": [1000 * x for x in latencies],
        "search_p50_ms": 1000 * _pct(latencies, 0.5),
        "search_p95_ms": 1000 * _pct(latencies, 0.95),
        "rankings": rankings,
        "versions": system.versions(),
    }
    if extra is not None:
        extra(system, out, args)  # system-specific measurements (stratamem: contexts, as-returned search)
    system.close()
    out["bytes_final"], out["bytes_parts_final"] = dir_bytes(workdir)
    return out


def _first(system: System, args: argparse.Namespace, import_s: float) -> dict:
    """One fresh process: open the built store and ask one question."""
    system.fresh_process = True  # type: ignore[attr-defined]  # a system may load lazily, as a user's would
    t0 = time.perf_counter()
    system.open(Path(args.workdir), args.model_dir)
    opened = time.perf_counter()
    ranked = system.search(args.user, args.query)
    done = time.perf_counter()
    return {"import_s": import_s, "open_s": opened - t0, "query_s": done - opened, "top": ranked[:3]}


def main(
    make: Callable[[], System],
    import_s: float,
    extra: Callable[[System, dict, argparse.Namespace], None] | None = None,
    first_extra: Callable[[System, argparse.Namespace], dict] | None = None,
) -> None:
    """The worker's command line: ``build`` or ``first``; prints one JSON line on stdout."""
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["build", "first"])
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--data", type=Path, default=data.LOCOMO_PATH)
    ap.add_argument("--conversations", type=int)
    ap.add_argument("--questions", type=int, help="at most this many questions per conversation")
    ap.add_argument("--user", help="first: the namespace / user to query")
    ap.add_argument("--query", help="first: the question")
    ap.add_argument("--what", default="search", help="first: search, or a system-specific call (context)")
    args = ap.parse_args()
    system = make()
    if args.mode == "build":
        out = _build(system, args, extra)
    elif args.what == "search":
        out = _first(system, args, import_s)
    else:
        assert first_extra is not None, f"no first-query variant {args.what!r}"
        out = {"import_s": import_s, **first_extra(system, args)}
    out["network_attempts"] = list(attempts)
    out["pid"] = os.getpid()
    sys.stdout.write(json.dumps(out) + "\n")
