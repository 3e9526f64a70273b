"""The HTTP shell's cost: ``context`` and ``add`` over ``stratamem serve`` vs the library call, same run.

Each size (default 1k and 100k turns) is two identical namespaces (``lib<size>``
for the library, ``web<size>`` for the server) with one session of LoCoMo
turns (read at run time from ``../shared/data``, cycled to the size),
written with the store's batch path (``Store.append`` with ``TurnBatch``es of
1,000 exact-counted turns). Both sides use the same file and configuration:
pyramid off and no embedder (lexical recall), so what differs is only the
shell: JSON parsing and validation, the security middleware, the lock,
serialization, and a loopback HTTP round trip (httpx keep-alive client).

Per size and operation, 40 timed calls after a warm-up, library and HTTP
calls interleaved so that load from other processes hits both alike:

* ``context``: ``Memory.context(question, budget=4000)`` vs ``POST .../context``;
* ``add``: ``Memory.add(one message)`` vs ``POST .../turns``;
* ``health``: ``GET /api/v1/health``, no library call: the round-trip floor.

The server is a real ``stratamem serve`` subprocess on a free 127.0.0.1 port.
The store is built once under /tmp (``/tmp/stratamem-apibench.db``) and reused.

    .venv/bin/python benchmarks/api_bench.py [--sizes 1000 100000] [--calls 40]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.locomo.protocol import LOCOMO_PATH
from stratamem import Config, Memory
from stratamem.ingest import read_file
from stratamem.records import Turn
from stratamem.store import SQLiteStore, TurnBatch
from stratamem.tokens import count_turn, get_tokenizer

STORE = Path("/tmp/stratamem-apibench.db")
START = datetime(2023, 1, 1, tzinfo=UTC)
BUDGET = 4000
CONFIG = {"pyramid": {"enabled": False}}


def _corpus() -> tuple[list[tuple[str, str]], list[str]]:
    texts = [(t.name or "someone", t.text) for s in read_file(LOCOMO_PATH, fmt="locomo") for t in s.turns]
    questions = [q["question"] for conv in json.loads(LOCOMO_PATH.read_text()) for q in conv["qa"]]
    return texts, questions


def _turn(texts: list[tuple[str, str]], i: int) -> Turn:
    name, text = texts[i % len(texts)]
    return Turn(
        role="user" if i % 2 == 0 else "assistant", content=text, name=name, timestamp=START + timedelta(seconds=30 * i)
    )


def build(size: int, texts: list[tuple[str, str]], ns: str) -> None:
    """Write ``size`` turns into namespace ``ns`` with the batch path, unless already there."""
    store = SQLiteStore(STORE)
    have = store.stats(ns).turns if store.has_namespace(ns) else 0
    tok = get_tokenizer("o200k_base")
    t0 = time.perf_counter()
    for lo in range(have, size, 1000):
        turns = [_turn(texts, i) for i in range(lo, min(size, lo + 1000))]
        store.append(ns, [TurnBatch("one", turns, [count_turn(t, tok) for t in turns], None, None)])
    if size > have:
        print(f"  built {size:,} turns of {ns} in {time.perf_counter() - t0:.0f} s", flush=True)
    store.close()


def _ms(values: list[float], p: float) -> float:
    return 1000 * float(np.percentile(values, p))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(
    size: int, texts: list[tuple[str, str]], questions: list[str], calls: int, config_path: Path
) -> dict[str, list[float]]:
    """Latencies (s) of library and HTTP calls, interleaved, against a ``stratamem serve`` subprocess."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stratamem",
            "--db",
            str(STORE),
            "--namespace",
            f"web{size}",
            "--config",
            str(config_path),
            "--embedding",
            "none",
            "serve",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/api/v1/namespaces/web{size}"
    out: dict[str, list[float]] = {k: [] for k in ("lib context", "lib add", "web context", "web add", "web health")}
    mem = Memory(STORE, namespace=f"lib{size}", config=Config.from_dict(CONFIG))
    try:
        with httpx.Client(timeout=120) as c:
            deadline = time.monotonic() + 60
            while True:
                try:
                    c.get(f"http://127.0.0.1:{port}/api/v1/health")
                    break
                except httpx.TransportError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise
                    time.sleep(0.1)
            # Warm-up (not timed): both sides build their recall index.
            mem.context(questions[0], budget=BUDGET)
            c.post(f"{base}/context", json={"query": questions[0], "budget": BUDGET}).raise_for_status()
            for i in range(calls):
                q = questions[1 + i]
                t0 = time.perf_counter()
                mem.context(q, budget=BUDGET)
                out["lib context"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                c.post(f"{base}/context", json={"query": q, "budget": BUDGET}).raise_for_status()
                out["web context"].append(time.perf_counter() - t0)
                t = _turn(texts, size + i)
                t0 = time.perf_counter()
                mem.add(t, session="one")
                out["lib add"].append(time.perf_counter() - t0)
                msg = {"role": t.role, "content": t.text, "name": t.name}
                t0 = time.perf_counter()
                c.post(f"{base}/turns", json={"session": "one", "messages": [msg]}).raise_for_status()
                out["web add"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                c.get(f"http://127.0.0.1:{port}/api/v1/health").raise_for_status()
                out["web health"].append(time.perf_counter() - t0)
    finally:
        mem.close()
        proc.terminate()
        proc.wait(20)
    return out


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) the store, then print library vs HTTP latencies."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1_000, 100_000])
    ap.add_argument("--calls", type=int, default=40)
    args = ap.parse_args(argv)
    texts, questions = _corpus()
    for size in args.sizes:
        build(size, texts, f"lib{size}")
        build(size, texts, f"web{size}")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text(json.dumps(CONFIG))  # JSON is YAML
        rows = []
        for size in args.sizes:
            got = measure(size, texts, questions, args.calls, cfg)
            for op in ("context", "add"):
                lib, web = got[f"lib {op}"], got[f"web {op}"]
                rows.append((size, op, _ms(lib, 50), _ms(lib, 95), _ms(web, 50), _ms(web, 95)))
            floor = got["web health"]
            rows.append((size, "health", 0.0, 0.0, _ms(floor, 50), _ms(floor, 95)))
    print(f"\n{args.calls} calls each, budget {BUDGET}, lexical recall, pyramid off; ms")
    print(
        f"{'turns':>8} {'op':<8} {'library p50':>12} {'library p95':>12} {'HTTP p50':>10} {'HTTP p95':>10} "
        f"{'overhead p50':>13} {'ratio p50':>10}"
    )
    for size, op, lp50, lp95, hp50, hp95 in rows:
        if op == "health":  # the round-trip floor: GET /health, no library call
            print(f"{size:>8,} {op:<8} {'-':>12} {'-':>12} {hp50:>10.2f} {hp95:>10.2f} {'-':>13} {'-':>10}")
            continue
        print(
            f"{size:>8,} {op:<8} {lp50:>12.2f} {lp95:>12.2f} {hp50:>10.2f} {hp95:>10.2f} {hp50 - lp50:>13.2f} "
            f"{hp50 / lp50:>9.2f}x"
        )
    import os

    print(f"load average at the end: {os.getloadavg()[0]:.1f} ({os.cpu_count()} CPUs)")


if __name__ == "__main__":
    main()
