"""``Memory.context`` latency at 1k, 10k, 100k and 1M turns in one session, as a user feels it.

Each size is one namespace with one session of LoCoMo turns (read at run
time from ``../shared/data``, cycled to the size, each turn with its own
timestamp 30 s apart), written through the real :class:`stratamem.Memory`
with the default config (pyramid on: segments, summaries, tiers, items), in
batches of 1,000 turns. The embedder is the store's persistent cache around
the local MiniLM, ``CachedEmbedder(LocalMiniLM(), store.embeddings)``, so the
repeated LoCoMo texts are embedded once; every text a ``context()`` embeds
(the question, the question without the speaker names it mentions, its
sub-queries) is embedded by MiniLM the first time the run asks for it (the
cache is bypassed), as a fresh question is in production. No row is written below the public API: 1M turns are 1M
``Memory.add`` turns (~40 min on the 2-core box once the 5,882 LoCoMo texts are
cached; the first 6k turns embed them).

Measured per size, hybrid (MiniLM) and lexical only (no embedder):

* ``cold``: the first ``context()`` of a fresh ``Memory`` (index build from the store);
* ``static``: ``context(question, budget=4000)`` repeated over 30 questions on an unchanged store
  (``cpu``: the process's CPU time in those calls, ``time.process_time``: the work done,
  which a busy shared box does not stretch as it stretches wall time);
* ``loop``: the agent loop — ``add`` one new turn, then ``context()`` (30 steps;
  ``add`` and ``context`` timed apart; ``loop cpu``: the CPU time of those
  ``context()`` calls). The loop runs on a copy of the store (``--loop-in-place``:
  on the store itself, right after ``static`` in the same process: no copy and
  no second index build, which at 1M turns take minutes; each run then leaves
  30 more turns, 0.003 % of 1M);
* ``rss MB``: the measuring process's peak resident memory (``ru_maxrss``) at the
  end of the size; with ``--baseline`` each (tree, size) is its own process, so
  it is that size's peak (model, index, pyramid and all).

``--pyramid off`` measures the same with the pyramid disabled (recall, items
and the window only; its own stores, suffixed ``-flat``): what the 1M-turn
ratio was measured on, since a pyramid-on 1M store takes hours to write on
this box (docs/benchmarks.md).

Stores (built once, reused): SQLite ``/tmp/stratamem-ctxlat.db`` for sizes up to
100k (one namespace ``n<size>`` each) and ``/tmp/stratamem-ctxlat-<size>.db``
for larger ones (``STRATAMEM_CTXLAT_STORE`` moves them). ``--backend postgres``
builds the same namespaces the same way in one database per size of the server
``STRATAMEM_CTXLAT_DSN`` names (default: a pgserver kept in
``/tmp/stratamem-ctxlat-pg``); its loop always runs in place (see
``--loop-in-place``).

``--baseline REV`` runs the same measurement on the code of a git revision
beside this tree's, in one run: the revision is extracted with ``git
archive`` into a temporary directory, each (tree, size) runs in its own
process with that tree's ``src`` first on ``PYTHONPATH``, and the trees
alternate for ``--rounds`` rounds; the table gives medians over the rounds and
the ratio this/baseline. Both trees read the same stores (built by whichever
runs first), so REV must share this tree's schema (no migration between
them: the older tree refuses a newer store, and the run stops).

    .venv/bin/python benchmarks/context_latency.py [--sizes 1000 10000 100000] [--profile 100000]
    .venv/bin/python benchmarks/context_latency.py --sizes 1000 10000 --baseline 0f20cb3 --rounds 3
    .venv/bin/python benchmarks/context_latency.py --sizes 1000000 --modes hybrid --baseline main --rounds 1
    .venv/bin/python benchmarks/context_latency.py --backend postgres --sizes 1000 10000 100000 --baseline main
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.locomo.protocol import LOCOMO_PATH
from stratamem import Config, Memory
from stratamem.embed import CachedEmbedder, LocalMiniLM
from stratamem.ingest import read_file
from stratamem.records import Turn
from stratamem.store import open_store

STORE = Path(os.environ.get("STRATAMEM_CTXLAT_STORE", "/tmp/stratamem-ctxlat.db"))
PG_DATA = Path("/tmp/stratamem-ctxlat-pg")
SHARED_UP_TO = 100_000  # sizes up to this share one SQLite file; larger ones get their own
IN_PLACE = False  # --loop-in-place
CONFIG = Config()  # --pyramid off: Config().replace(pyramid={"enabled": False}), stores named "-flat"
START = datetime(2023, 1, 1, tzinfo=UTC)
BUDGET = 4000
STEPS = 30


class FreshQueries:
    """The store's cached embedder for the turns ``add`` stores; the model for everything a
    ``context()`` embeds, the first time this run asks for it (the persistent cache may hold it
    from an earlier run).

    A context embeds more than the question as asked: the question without the speaker names
    it mentions and its sub-queries (one batch), then the question again for item and summary
    ranking. Each distinct text costs one model call per run, as a fresh question would; a
    repeat within the run is answered from memory, as the real cache would.
    """

    def __init__(self, cached: CachedEmbedder, model: LocalMiniLM) -> None:
        self.cached, self.model = cached, model
        self.name, self.dimensions = cached.name, cached.dimensions
        self._seen: dict[str, np.ndarray] = {}
        # Production puts a cache in front of the model, and recall then sends the question as asked
        # along with its stripped form (item ranking re-embeds it); ``_seen`` is that cache here.
        self.cache = self._seen
        self._adding = False

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Turns being added through the persistent cache; anything else from MiniLM once per run."""
        if self._adding:
            return self.cached.embed_batch(texts)
        fresh = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if fresh:
            for text, vec in zip(fresh, np.asarray(self.model.embed_batch(fresh), dtype=np.float32), strict=True):
                self._seen[text] = vec
        return np.stack([self._seen[t] for t in texts])

    @contextmanager
    def adding(self) -> Iterator[None]:
        """Within: texts are turns being stored (their vectors come from the cache)."""
        self._adding = True
        try:
            yield
        finally:
            self._adding = False

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


def build(size: int, texts: list[tuple[str, str]], embedder: Any, path: Path | str | None = None) -> None:
    """Write ``size`` turns into namespace ``n<size>`` of ``path`` (default: :func:`target`) unless there."""
    store = open_store(target(size) if path is None else path)
    ns = f"n{size}"
    have = store.stats(ns).turns if store.has_namespace(ns) else 0
    if have >= size:
        store.close()
        return
    mem = Memory(store, namespace=ns, embedder=embedder, config=CONFIG)
    t0 = time.perf_counter()
    for lo in range(have, size, 1000):
        mem.add([_turn(texts, i) for i in range(lo, min(size, lo + 1000))], session="one")
        print(f"  built {min(size, lo + 1000):>7} turns of {ns} ({time.perf_counter() - t0:.0f} s)", flush=True)
    # Fill the persistent cache with the turns' vectors, so "cold" below measures an
    # index build over an embedded store, not first-time embedding.
    mem.context("warm up", budget=BUDGET)
    store.close()


def target(size: int, backend: str = "sqlite") -> str:
    """The store of ``size``: a SQLite file (shared up to :data:`SHARED_UP_TO` turns) or a PostgreSQL URL."""
    flat = "" if CONFIG.pyramid.enabled else "-flat"
    if backend == "postgres":
        return _pg_url(f"ctxlat{flat.replace('-', '_')}_n{size}")
    stem = STORE.stem + flat
    return str(STORE.with_name(f"{stem}.db") if size <= SHARED_UP_TO else STORE.with_name(f"{stem}-{size}.db"))


def _pg_server_url() -> str:
    """The PostgreSQL server: ``STRATAMEM_CTXLAT_DSN``, else a pgserver kept in :data:`PG_DATA`."""
    if os.environ.get("STRATAMEM_CTXLAT_DSN"):
        return os.environ["STRATAMEM_CTXLAT_DSN"]
    import pgserver

    PG_DATA.mkdir(exist_ok=True)
    return str(pgserver.get_server(PG_DATA, cleanup_mode=None).get_uri())


def _pg_url(database: str) -> str:
    """The server's URL on ``database`` (created empty when missing)."""
    import psycopg

    server = _pg_server_url()
    with psycopg.connect(server, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone():
            conn.execute(f'CREATE DATABASE "{database}"')
    parts = urlsplit(server)
    return urlunsplit(parts._replace(path=f"/{database}"))


def _copy(src: Path, dst: Path) -> None:
    """A consistent copy of a live SQLite file (the WAL included), via the backup API."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    a.close()
    b.close()


def _pct(values: list[float], p: float) -> float:
    return 1000 * float(np.percentile(values, p))


def measure(
    size: int, texts: list[tuple[str, str]], questions: list[str], embedder: Any, backend: str = "sqlite"
) -> dict[str, float]:
    """Cold, static and loop latencies (ms) for one size and mode, and the process's peak RSS (MB)."""
    out: dict[str, float] = {}
    if embedder is not None:
        embedder.forget()
    store = open_store(target(size, backend))
    mem = Memory(store, namespace=f"n{size}", embedder=embedder, config=CONFIG)
    t0 = time.perf_counter()
    mem.context(questions[0], budget=BUDGET)
    out["cold"] = 1000 * (time.perf_counter() - t0)
    lat, cpu = [], []
    for q in questions[1 : STEPS + 1]:
        t0, c0 = time.perf_counter(), time.process_time()
        mem.context(q, budget=BUDGET)
        lat.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    out["static p50"], out["static p95"] = _pct(lat, 50), _pct(lat, 95)
    # CPU time of the same calls (all the process's threads): the work, without the waits of a busy box.
    out["cpu p50"], out["cpu p95"] = _pct(cpu, 50), _pct(cpu, 95)
    if IN_PLACE or backend == "postgres":
        # PostgreSQL: in place too (a TEMPLATE copy needs no other session on the database, and the
        # embedder's cache holds one open).
        loop_target: str = target(size, backend)
    else:
        store.close()
        loop_path = Path(target(size)).with_name(f"{STORE.stem}-loop-{size}.db")
        _copy(Path(target(size)), loop_path)
        loop_target = str(loop_path)
    if not IN_PLACE and backend != "postgres":
        store = open_store(loop_target)
        mem = Memory(store, namespace=f"n{size}", embedder=embedder, config=CONFIG)
        mem.context(questions[0], budget=BUDGET)
    adds, lat, cpu = [], [], []
    for step, q in enumerate(questions[STEPS + 1 : 2 * STEPS + 1]):
        t0 = time.perf_counter()
        with embedder.adding() if embedder is not None else nullcontext():
            mem.add(_turn(texts, size + step), session="one")
        t1, c1 = time.perf_counter(), time.process_time()
        mem.context(q, budget=BUDGET)
        t2, c2 = time.perf_counter(), time.process_time()
        adds.append(t1 - t0)
        lat.append(t2 - t1)
        cpu.append(c2 - c1)
    out["loop p50"], out["loop p95"] = _pct(lat, 50), _pct(lat, 95)
    out["loop cpu p50"], out["loop cpu p95"] = _pct(cpu, 50), _pct(cpu, 95)
    out["add p50"], out["add p95"] = _pct(adds, 50), _pct(adds, 95)
    store.close()
    if backend != "postgres" and not IN_PLACE:
        for p in loop_path.parent.glob(loop_path.name + "*"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()  # the file, its WAL and its archive directory
    out["rss MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def profile(size: int, texts: list[tuple[str, str]], questions: list[str], embedder: Any) -> None:
    """cProfile of the agent loop at ``size`` turns (top functions by cumulative time)."""
    import cProfile
    import pstats

    loop_path = Path(f"/tmp/stratamem-ctxlat-loop-{size}.db")
    _copy(Path(target(size)), loop_path)
    store = open_store(loop_path)
    mem = Memory(store, namespace=f"n{size}", embedder=embedder, config=CONFIG)
    mem.context(questions[0], budget=BUDGET)
    prof = cProfile.Profile()
    prof.enable()
    for step, q in enumerate(questions[1:11]):
        with embedder.adding():
            mem.add(_turn(texts, size + step), session="one")
        mem.context(q, budget=BUDGET)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(35)
    store.close()
    loop_path.unlink()


COLUMNS = [
    "cold",
    "static p50",
    "static p95",
    "cpu p50",
    "cpu p95",
    "loop p50",
    "loop p95",
    "loop cpu p50",
    "loop cpu p95",
    "add p50",
    "add p95",
    "rss MB",
]


def compare(baseline: str, sizes: list[int], rounds: int, backend: str, modes: list[str], pyramid: str) -> None:
    """This tree beside ``baseline`` (a git revision): one process per (round, tree, size), alternating."""
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="ctxlat-") as tmp:
        base_dir = Path(tmp) / "baseline"
        base_dir.mkdir()
        archive = subprocess.run(["git", "-C", str(root), "archive", baseline], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(base_dir)], input=archive.stdout, check=True)
        trees = {"baseline": base_dir / "src", "this": root / "src"}
        runs: dict[tuple[str, int, str], list[dict[str, float]]] = {}
        loads: list[float] = []
        for r in range(rounds):
            for tree, src in trees.items():
                for size in sizes:
                    env = dict(os.environ, PYTHONPATH=str(src))
                    load = os.getloadavg()[0]
                    done = subprocess.run(
                        [sys.executable, __file__, "--sizes", str(size), "--json", "--backend", backend]
                        + ["--modes", *modes, "--pyramid", pyramid]
                        + (["--loop-in-place"] if IN_PLACE else []),
                        env=env,
                        check=True,
                        capture_output=True,
                        text=True,
                        cwd=root,
                    )
                    rows = json.loads(done.stdout.strip().splitlines()[-1])[str(size)]
                    for mode, row in rows.items():
                        runs.setdefault((tree, size, mode), []).append(row)
                    loads.append(load)
                    print(f"  round {r + 1} {tree:<8} {size:>7} turns done (load {load:.1f})", flush=True)
    print(f"\n{'turns':>8} {'mode':<8} {'code':<9}" + "".join(f"{c:>12}" for c in COLUMNS) + "   (ms)")
    for size in sizes:
        for mode in modes:
            med = {
                tree: {c: statistics.median(r[c] for r in runs[(tree, size, mode)]) for c in COLUMNS} for tree in trees
            }
            for tree in trees:
                print(f"{size:>8} {mode:<8} {tree:<9}" + "".join(f"{med[tree][c]:>12.1f}" for c in COLUMNS))
            print(
                f"{size:>8} {mode:<8} {'ratio':<9}"
                + "".join(f"{med['this'][c] / max(med['baseline'][c], 1e-9):>12.2f}" for c in COLUMNS)
            )
    print(
        f"(medians of {rounds} rounds, each of {STEPS} calls a column; {backend}; pyramid {pyramid}; baseline {baseline}; "
        f"load {min(loads):.1f}-{max(loads):.1f}; machine: 2 shared cores)"
    )


def main(argv: list[str] | None = None) -> None:
    """Build (or reuse) the stores, then print the latency table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    ap.add_argument("--profile", type=int, help="profile the agent loop at this size instead")
    ap.add_argument("--baseline", help="a git revision to measure beside this tree")
    ap.add_argument("--rounds", type=int, default=3, help="rounds with --baseline")
    ap.add_argument("--json", action="store_true", help="print the rows as one JSON line (used by --baseline)")
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--modes", nargs="*", choices=["lexical", "hybrid"], default=["lexical", "hybrid"])
    ap.add_argument("--pyramid", choices=["on", "off"], default="on", help="off: no pyramid (stores named -flat)")
    ap.add_argument("--loop-in-place", action="store_true", help="the loop adds its turns to the store itself")
    args = ap.parse_args(argv)
    global CONFIG, IN_PLACE
    IN_PLACE = args.loop_in_place
    if args.pyramid == "off":
        CONFIG = Config().replace(pyramid={"enabled": False})
    if args.baseline:
        compare(args.baseline, args.sizes, args.rounds, args.backend, args.modes, args.pyramid)
        return
    texts, questions = _corpus()
    model = LocalMiniLM()
    stores = []
    cached = None
    for size in args.sizes if args.profile is None else [args.profile]:
        store = open_store(target(size, args.backend))
        stores.append(store)
        cached = CachedEmbedder(model, store.embeddings)
        build(size, texts, cached, target(size, args.backend))
    assert cached is not None
    embedder = FreshQueries(cached, model)
    if args.profile is not None:
        profile(args.profile, texts, questions, embedder)
        return
    rows: dict[int, dict[str, dict[str, float]]] = {}
    if not args.json:
        print(f"\n{'turns':>8} {'mode':<8}" + "".join(f"{c:>12}" for c in COLUMNS) + "   (ms)")
    for size in args.sizes:
        for mode in args.modes:
            # A query is embedded by the model; a turn's vector comes from the cache of the store measured.
            emb = FreshQueries(CachedEmbedder(model, stores[args.sizes.index(size)].embeddings), model)
            row = rows.setdefault(size, {})[mode] = measure(
                size, texts, questions, emb if mode == "hybrid" else None, args.backend
            )
            if not args.json:
                print(f"{size:>8} {mode:<8}" + "".join(f"{row[c]:>12.1f}" for c in COLUMNS), flush=True)
    for store in stores:
        store.close()
    if args.json:
        print(json.dumps(rows))
    else:
        print(f"(median of {STEPS} calls each; budget {BUDGET}; machine: 2 shared cores)")


if __name__ == "__main__":
    main()
