"""``Memory.context`` latency at 1k, 10k and 100k turns in one session, as a user feels it.

Each size is one namespace with one session of LoCoMo turns (read at run
time from ``../shared/data``, cycled to the size, each turn with its own
timestamp 30 s apart), written through the real :class:`stratamem.Memory`
with the default config (pyramid on: segments, summaries, tiers, items).
The embedder is the store's persistent cache around the local MiniLM,
``CachedEmbedder(LocalMiniLM(), store.embeddings)``, so the repeated LoCoMo
texts are embedded once; every *query*, though, is embedded by MiniLM at
call time (the cache is bypassed for query strings), as in production.

Measured per size, hybrid (MiniLM) and lexical only (no embedder):

* ``cold``: the first ``context()`` of a fresh ``Memory`` (index build from the store);
* ``static``: ``context(question, budget=4000)`` repeated over 30 questions on an unchanged store;
* ``loop``: the agent loop — ``add`` one new turn, then ``context()`` (30 steps;
  ``add`` and ``context`` timed apart). The loop runs on a copy of the store.

The stores are built once under /tmp (``/tmp/stratamem-ctxlat.db``) and reused.

``--baseline REV`` runs the same measurement on the code of a git revision
beside this tree's, in one run: the revision is extracted with ``git
archive`` into a temporary directory, each (tree, size) runs in its own
process with that tree's ``src`` first on ``PYTHONPATH`` and its own store
file (built by that tree), and the trees alternate for ``--rounds`` rounds;
the table gives medians over the rounds and the ratio this/baseline.

    .venv/bin/python benchmarks/context_latency.py [--sizes 1000 10000 100000] [--profile 100000]
    .venv/bin/python benchmarks/context_latency.py --sizes 1000 10000 --baseline 0f20cb3 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.locomo.protocol import LOCOMO_PATH
from stratamem import Memory
from stratamem.embed import CachedEmbedder, LocalMiniLM
from stratamem.ingest import read_file
from stratamem.records import Turn
from stratamem.store import SQLiteStore

STORE = Path(os.environ.get("STRATAMEM_CTXLAT_STORE", "/tmp/stratamem-ctxlat.db"))
START = datetime(2023, 1, 1, tzinfo=UTC)
BUDGET = 4000
STEPS = 30


class FreshQueries:
    """The store's cached embedder, except that a query string is embedded by the model the
    first time it is asked in this run (the persistent cache may hold it from an earlier run).

    Later asks for the same query in the run (item recall embeds the query again
    within one ``context()``) are answered from memory, as the real cache would.
    """

    def __init__(self, cached: CachedEmbedder, model: LocalMiniLM, queries: set[str]) -> None:
        self.cached, self.model, self.queries = cached, model, queries
        self.name, self.dimensions = cached.name, cached.dimensions
        self._seen: dict[str, np.ndarray] = {}

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Queries from MiniLM (once per run); everything else through the persistent cache."""
        if len(texts) == 1 and texts[0] in self.queries:
            if texts[0] not in self._seen:
                self._seen[texts[0]] = np.asarray(self.model.embed_batch(texts), dtype=np.float32)
            return self._seen[texts[0]]
        return self.cached.embed_batch(texts)

    def forget(self) -> None:
        """Embed every query afresh again (between measurements)."""
        self._seen.clear()


def _corpus() -> tuple[list[tuple[str, str]], list[str]]:
    sessions = read_file(LOCOMO_PATH, fmt="locomo")
    texts = [(t.name or "someone", t.text) for s in sessions for t in s.turns]
    import json

    data = json.loads(LOCOMO_PATH.read_text())
    questions = [q["question"] for conv in data for q in conv["qa"]]
    return texts, questions


def _turn(texts: list[tuple[str, str]], i: int) -> Turn:
    name, text = texts[i % len(texts)]
    role = "user" if i % 2 == 0 else "assistant"
    return Turn(role=role, content=text, name=name, timestamp=START + timedelta(seconds=30 * i))


def build(size: int, texts: list[tuple[str, str]], embedder: Any, path: Path = STORE) -> None:
    """Write ``size`` turns into namespace ``n<size>`` unless it is already there."""
    store = SQLiteStore(path)
    ns = f"n{size}"
    have = store.stats(ns).turns if store.has_namespace(ns) else 0
    if have >= size:
        store.close()
        return
    mem = Memory(store, namespace=ns, embedder=embedder)
    t0 = time.perf_counter()
    for lo in range(have, size, 1000):
        mem.add([_turn(texts, i) for i in range(lo, min(size, lo + 1000))], session="one")
        print(f"  built {min(size, lo + 1000):>7} turns of {ns} ({time.perf_counter() - t0:.0f} s)", flush=True)
    # Fill the persistent cache with the turns' vectors, so "cold" below measures an
    # index build over an embedded store, not first-time embedding.
    mem.context("warm up", budget=BUDGET)
    store.close()


def _copy(src: Path, dst: Path) -> None:
    """A consistent copy of a live SQLite file (the WAL included), via the backup API."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def _pct(values: list[float], p: float) -> float:
    return 1000 * float(np.percentile(values, p))


def measure(size: int, texts: list[tuple[str, str]], questions: list[str], embedder: Any) -> dict[str, float]:
    """Cold, static and loop latencies (ms) for one size and mode."""
    loop_path = STORE.with_name(f"{STORE.stem}-loop-{size}.db")
    out: dict[str, float] = {}
    if embedder is not None:
        embedder.forget()
    store = SQLiteStore(STORE)
    mem = Memory(store, namespace=f"n{size}", embedder=embedder)
    t0 = time.perf_counter()
    mem.context(questions[0], budget=BUDGET)
    out["cold"] = 1000 * (time.perf_counter() - t0)
    lat = []
    for q in questions[1 : STEPS + 1]:
        t0 = time.perf_counter()
        mem.context(q, budget=BUDGET)
        lat.append(time.perf_counter() - t0)
    out["static p50"], out["static p95"] = _pct(lat, 50), _pct(lat, 95)
    store.close()
    _copy(STORE, loop_path)
    store = SQLiteStore(loop_path)
    mem = Memory(store, namespace=f"n{size}", embedder=embedder)
    mem.context(questions[0], budget=BUDGET)
    adds, lat = [], []
    for step, q in enumerate(questions[STEPS + 1 : 2 * STEPS + 1]):
        t0 = time.perf_counter()
        mem.add(_turn(texts, size + step), session="one")
        t1 = time.perf_counter()
        mem.context(q, budget=BUDGET)
        t2 = time.perf_counter()
        adds.append(t1 - t0)
        lat.append(t2 - t1)
    out["loop p50"], out["loop p95"] = _pct(lat, 50), _pct(lat, 95)
    out["add p50"], out["add p95"] = _pct(adds, 50), _pct(adds, 95)
    store.close()
    loop_path.unlink()
    return out


def profile(size: int, texts: list[tuple[str, str]], questions: list[str], embedder: Any) -> None:
    """cProfile of the agent loop at ``size`` turns (top functions by cumulative time)."""
    import cProfile
    import pstats

    loop_path = Path(f"/tmp/stratamem-ctxlat-loop-{size}.db")
    _copy(STORE, loop_path)
    store = SQLiteStore(loop_path)
    mem = Memory(store, namespace=f"n{size}", embedder=embedder)
    mem.context(questions[0], budget=BUDGET)
    prof = cProfile.Profile()
    prof.enable()
    for step, q in enumerate(questions[1:11]):
        mem.add(_turn(texts, size + step), session="one")
        mem.context(q, budget=BUDGET)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(35)
    store.close()
    loop_path.unlink()


COLUMNS = ["cold", "static p50", "static p95", "loop p50", "loop p95", "add p50", "add p95"]


def compare(baseline: str, sizes: list[int], rounds: int) -> None:
    """This tree beside ``baseline`` (a git revision): one process per (round, tree, size), alternating."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="ctxlat-") as tmp:
        base_dir = Path(tmp) / "baseline"
        base_dir.mkdir()
        archive = subprocess.run(["git", "-C", str(root), "archive", baseline], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(base_dir)], input=archive.stdout, check=True)
        trees = {"baseline": base_dir / "src", "this": root / "src"}
        runs: dict[tuple[str, int, str], list[dict[str, float]]] = {}
        for r in range(rounds):
            for tree, src in trees.items():
                for size in sizes:
                    env = dict(
                        os.environ,
                        PYTHONPATH=str(src),
                        STRATAMEM_CTXLAT_STORE=f"/tmp/stratamem-ctxlat-{tree}-{baseline}.db",
                    )
                    load = os.getloadavg()[0]
                    done = subprocess.run(
                        [sys.executable, __file__, "--sizes", str(size), "--json"],
                        env=env,
                        check=True,
                        capture_output=True,
                        text=True,
                        cwd=root,
                    )
                    rows = json.loads(done.stdout.strip().splitlines()[-1])[str(size)]
                    for mode, row in rows.items():
                        runs.setdefault((tree, size, mode), []).append(row)
                    print(f"  round {r + 1} {tree:<8} {size:>7} turns done (load {load:.1f})", flush=True)
    print(f"\n{'turns':>8} {'mode':<8} {'code':<9}" + "".join(f"{c:>12}" for c in COLUMNS) + "   (ms)")
    for size in sizes:
        for mode in ("lexical", "hybrid"):
            med = {
                tree: {c: statistics.median(r[c] for r in runs[(tree, size, mode)]) for c in COLUMNS} for tree in trees
            }
            for tree in trees:
                print(f"{size:>8} {mode:<8} {tree:<9}" + "".join(f"{med[tree][c]:>12.1f}" for c in COLUMNS))
            print(
                f"{size:>8} {mode:<8} {'ratio':<9}"
                + "".join(f"{med['this'][c] / max(med['baseline'][c], 1e-9):>12.2f}" for c in COLUMNS)
            )
    print(f"(medians of {rounds} rounds, each of {STEPS} calls a column; baseline {baseline}; machine: 2 shared cores)")


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) the stores, then print the latency table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    ap.add_argument("--profile", type=int, help="profile the agent loop at this size instead")
    ap.add_argument("--baseline", help="a git revision to measure beside this tree")
    ap.add_argument("--rounds", type=int, default=3, help="rounds with --baseline")
    ap.add_argument("--json", action="store_true", help="print the rows as one JSON line (used by --baseline)")
    args = ap.parse_args(argv)
    if args.baseline:
        compare(args.baseline, args.sizes, args.rounds)
        return
    texts, questions = _corpus()
    model = LocalMiniLM()
    store = SQLiteStore(STORE)
    cached = CachedEmbedder(model, store.embeddings)
    for size in args.sizes if args.profile is None else [args.profile]:
        build(size, texts, cached)
    embedder = FreshQueries(cached, model, set(questions))
    if args.profile is not None:
        profile(args.profile, texts, questions, embedder)
        return
    rows: dict[int, dict[str, dict[str, float]]] = {}
    if not args.json:
        print(f"\n{'turns':>8} {'mode':<8}" + "".join(f"{c:>12}" for c in COLUMNS) + "   (ms)")
    for size in args.sizes:
        for mode, emb in (("lexical", None), ("hybrid", embedder)):
            row = rows.setdefault(size, {})[mode] = measure(size, texts, questions, emb)
            if not args.json:
                print(f"{size:>8} {mode:<8}" + "".join(f"{row[c]:>12.1f}" for c in COLUMNS), flush=True)
    store.close()
    if args.json:
        print(json.dumps(rows))
    else:
        print(f"(median of {STEPS} calls each; budget {BUDGET}; machine: 2 shared cores)")


if __name__ == "__main__":
    main()
