"""First query after ingest, ingest speed and bytes per turn: today's code beside the legacy code, in one run.

Two stores, each built twice — by this tree and by the legacy code of
``7bbc7e5`` (extracted with ``git archive`` into a temporary directory and
run from there):

* **LoCoMo**: all ten conversations (5,882 turns, 272 sessions) in ONE
  namespace, written with ``Memory.add_sessions`` and the default
  configuration (pyramid on). This tree: ``Memory(path)`` — the configured
  local MiniLM, embedding at write time. Legacy: the CLI's wiring,
  ``CachedEmbedder(LocalMiniLM(), store.embeddings)``, embedding at the first
  query.
* **synthetic N** (default 100,000 turns): LoCoMo turns cycled to N, in
  sessions of 300, pyramid off (the pyramid's summaries would dominate the
  build time and are not what is measured). Both builds take their vectors
  from a stand-in embedder (hash-seeded unit vectors under MiniLM's name and
  size): the build is not what is timed here, and the first query opens them
  with the real MiniLM, which then embeds only the query. The legacy build
  runs one context so its persistent cache holds every vector — its first
  query below is its best case (no embedding, only the rebuild).

Measured per store and code, each in its own subprocess:

* ``ingest``: wall time of the writes including embeddings → turns/s;
* ``first``: a fresh process opens ``Memory(path)`` and asks one
  ``context(question, budget=4000)``: time from before ``Memory()`` to the
  context (imports excluded), and the subprocess's whole wall time;
* ``warm``: the median of the next five contexts in that process;
* ``bytes``: database file + WAL + archive directory after the first query,
  per 1,000 turns, and the per-table split (SQLite ``dbstat``).

* ``rss MB``: the first-query process's peak resident memory (``ru_maxrss``).

``--baseline REV`` puts the code of a git revision (e.g. ``main``) beside
this tree instead of the legacy code: same stores, same wiring (REV's
``Memory(path)``). ``--keep DIR`` writes the stores into DIR and reuses one
found there (its build is not timed again: the ingest columns show the first
build's figures, saved beside it) — how the 1M-turn synthetic store is
measured more than once (it takes ~10-20 min to write on the 2-core box).
``--store PATH --namespace NS`` measures the first query on a store built
before (e.g. ``context_latency.py``'s 1M-turn SQLite store, pyramid off)
instead of building one: each code opens its own copy of it (made once in
``--keep``, so neither code opens what the other has written); the ingest
columns are then empty.
``--backend postgres`` writes the synthetic stores into a PostgreSQL database
instead (``STRATAMEM_FIRSTQ_DSN``, default a pgserver kept in
``/tmp/stratamem-firstq-pg``; one database per store; bytes are
``pg_database_size``); LoCoMo stays on SQLite.

LoCoMo recall with the stored int8 vectors beside float32 is
``benchmarks/locomo_recall.py --ours`` ("stratamem hybrid" is float32,
"Memory.context (recall)" opens the persisted int8 index).

    .venv/bin/python benchmarks/first_query.py [--synthetic 100000] [--skip-synthetic] [--skip-locomo]
        [--skip-legacy] [--json out.json]
    .venv/bin/python benchmarks/first_query.py --synthetic 1000000 --skip-locomo --baseline main --keep /tmp/firstq
    .venv/bin/python benchmarks/first_query.py --synthetic 1000000 --skip-locomo --baseline main --keep /tmp/firstq \
        --backend postgres
    .venv/bin/python benchmarks/first_query.py --skip-locomo --baseline main --keep /tmp/firstq \
        --store /tmp/stratamem-ctxlat-flat-1000000.db --namespace n1000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEGACY_COMMIT = "7bbc7e5"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
QUESTIONS = [
    "When did Caroline go to the LGBTQ support group?",
    "What did Melanie paint recently?",
    "Where did Jon go on his trip?",
    "What instrument does Calvin play?",
    "When did Gina open her store?",
    "What does Andrew want to adopt?",
]

# The code each subprocess runs; ``{legacy}`` selects how the embedder is wired.
_COMMON = """
import dataclasses, json, statistics, sys, time
from datetime import datetime, timedelta, timezone
from stratamem import Config, Memory
from stratamem.ingest import read_file
LEGACY = {legacy}
"""

_INGEST_LOCOMO = (
    _COMMON
    + """
sessions = read_file({locomo!r}, "locomo")
# One namespace: session names made unique by their conversation.
sessions = [dataclasses.replace(s, namespace=None, session=f"{{s.namespace}}-{{s.session}}") for s in sessions]
kw = {{}}
if LEGACY:
    from stratamem.embed import CachedEmbedder, LocalMiniLM
    from stratamem.store import SQLiteStore
    store = SQLiteStore({db!r})
    kw = dict(embedder=CachedEmbedder(LocalMiniLM(), store.embeddings))
    target = store
else:
    target = {db!r}
t0 = time.perf_counter()
mem = Memory(target, namespace="locomo", **kw)
n = len(mem.add_sessions(sessions))
dt = time.perf_counter() - t0
mem.close()
print(json.dumps({{"turns": n, "seconds": dt}}))
"""
)

_INGEST_SYNTHETIC = (
    _COMMON
    + """
import hashlib
import numpy as np
from stratamem.embed import CachedEmbedder, MemoryEmbeddingCache
from stratamem.records import Turn

class StandIn:
    # Vectors by text hash under MiniLM's name and size: the build is not what is timed,
    # and the first query below opens them with the real MiniLM (only the query is embedded).
    name, dimensions = "all-MiniLM-L6-v2", 384
    def embed_batch(self, texts):
        out = np.empty((len(texts), 384), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out

src = [t for s in read_file({locomo!r}, "locomo") for t in s.turns]
start = datetime(2023, 1, 1, tzinfo=timezone.utc)
config = Config().replace(pyramid={{"enabled": False}})
embedder = CachedEmbedder(StandIn(), MemoryEmbeddingCache())
t0 = time.perf_counter()
mem = Memory({db!r}, namespace="synthetic", config=config, embedder=embedder)
size, per = {size}, 300
for lo in range(0, size, 3000):
    chunk = []
    for i in range(lo, min(size, lo + 3000)):
        t = src[i % len(src)]
        chunk.append(Turn(role="user" if i % 2 == 0 else "assistant", content=t.text, name=t.name,
                          timestamp=start + timedelta(seconds=30 * i)))
    for s in range(0, len(chunk), per):
        mem.add(chunk[s:s + per], session=f"s{{(lo + s) // per}}")
dt = time.perf_counter() - t0
if LEGACY:
    # Legacy embeds at the first query: fill its persistent cache now, so the measured
    # first query is its best case (every vector cached, only the rebuild left).
    from stratamem.store import SQLiteStore
    store = SQLiteStore({db!r})
    Memory(store, namespace="synthetic", config=config,
           embedder=CachedEmbedder(StandIn(), store.embeddings)).context("warm up", budget=4000)
    store.close()
mem.close()
print(json.dumps({{"turns": size, "seconds": dt}}))
"""
)

_FIRST_QUERY = (
    _COMMON
    + """
t0 = time.perf_counter()
kw = {{}}
config = Config().replace(pyramid={{"enabled": {pyramid}}})
if LEGACY:
    from stratamem.embed import CachedEmbedder, LocalMiniLM
    from stratamem.store import SQLiteStore
    store = SQLiteStore({db!r})
    kw = dict(embedder=CachedEmbedder(LocalMiniLM(), store.embeddings))
    target = store
else:
    target = {db!r}
mem = Memory(target, namespace={ns!r}, config=config, **kw)
questions = {questions!r}
ctx = mem.context(questions[0], budget=4000)
first = time.perf_counter() - t0
warm = []
for q in questions[1:]:
    t = time.perf_counter()
    mem.context(q, budget=4000)
    warm.append(time.perf_counter() - t)
notes = list(ctx.manifest.notes) if hasattr(ctx.manifest, "notes") else []
mem.close()
import resource
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"first": first, "warm": statistics.median(warm), "notes": notes, "rss": rss}}))
"""
)


def _run(code: str, src: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"subprocess failed ({src}):\n{out.stderr[-3000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall"] = wall
    return result


def _legacy_src(tmp: Path, rev: str = LEGACY_COMMIT) -> Path:
    """A revision's ``src`` (``git archive`` of it; the repository is not touched)."""
    dest = tmp / "legacy"
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "src"


def _bytes(db: Path | str) -> tuple[int, dict[str, int]]:
    """Everything the store occupies (file, WAL, archive) after a checkpoint, and bytes per table."""
    if str(db).startswith("postgresql://"):
        import psycopg

        with psycopg.connect(str(db)) as pg:
            size = int(pg.execute("SELECT pg_database_size(current_database())").fetchone()[0])  # type: ignore[index]
            tables = dict(
                pg.execute(
                    "SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relkind = 'r' "
                    "AND relnamespace = 'public'::regnamespace"
                ).fetchall()
            )
        return size, tables
    db = Path(db)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        tables = dict(conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall())
    conn.close()
    total = sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())
    archive = Path(f"{db}.archive")
    if archive.is_dir():
        total += sum(p.stat().st_size for p in archive.rglob("*") if p.is_file())
        tables["(archive files)"] = sum(p.stat().st_size for p in archive.rglob("*") if p.is_file())
    return total, tables


def _pg_database(name: str) -> str:
    """A URL of database ``name`` (created when missing) on ``STRATAMEM_FIRSTQ_DSN`` or a kept pgserver."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    server = os.environ.get("STRATAMEM_FIRSTQ_DSN")
    if not server:
        import pgserver

        data = Path("/tmp/stratamem-firstq-pg")
        data.mkdir(exist_ok=True)
        server = str(pgserver.get_server(data, cleanup_mode=None).get_uri())
    with psycopg.connect(server, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(urlsplit(server)._replace(path=f"/{name}"))


def _given(store: Path, ns: str, copy: Path) -> dict:
    """A store built before, copied to ``copy`` (once; its WAL too): its turns, and no ingest figures."""
    if not copy.exists():
        print(f"  copying {store} to {copy} ...", flush=True)
        for suffix in ("", "-wal"):
            if Path(f"{store}{suffix}").exists():
                shutil.copyfile(f"{store}{suffix}", f"{copy}{suffix}")
    with sqlite3.connect(copy) as conn:
        turns = conn.execute(
            "SELECT COUNT(*) FROM turns t JOIN namespaces n ON n.id = t.namespace_id WHERE n.name = ?", (ns,)
        ).fetchone()[0]
    conn.close()
    return {"turns": turns, "seconds": float("nan")}


def _measure(
    name: str, build: str, src: Path, db: Path | str, ns: str, pyramid: bool, legacy: bool, **fmt: object
) -> dict:
    given = fmt.pop("given", None)
    saved = Path(f"{db}.build.json") if not str(db).startswith("postgresql://") else None
    if str(db).startswith("postgresql://"):
        saved = Path(fmt.pop("pg_saved"))  # type: ignore[arg-type]
    if given is not None:
        built = _given(Path(str(given)), ns, Path(db))
    elif saved is not None and saved.exists():
        built = json.loads(saved.read_text())
        print(f"  {name}: reusing the store built before ({built['turns']} turns in {built['seconds']:.1f} s)")
    else:
        print(f"  {name}: building ...", flush=True)
        built = _run(build.format(legacy=legacy, db=str(db), locomo=str(LOCOMO), **fmt), src)
        if saved is not None:
            saved.write_text(json.dumps(built))
    print(f"  {name}: {built['turns']} turns in {built['seconds']:.1f} s; first query ...", flush=True)
    first = _run(_FIRST_QUERY.format(legacy=legacy, db=str(db), ns=ns, pyramid=pyramid, questions=QUESTIONS), src)
    total, tables = _bytes(db)
    return {
        "name": name,
        "turns": built["turns"],
        "ingest_s": built["seconds"],
        "turns_per_s": built["turns"] / built["seconds"],
        "first_s": first["first"],
        "first_wall_s": first["wall"],
        "warm_ms": 1000 * first["warm"],
        "rss_mb": first.get("rss", 0.0),
        "bytes": total,
        "kb_per_1000": total / built["turns"] / 1.024,
        "tables": tables,
        "notes": first["notes"],
    }


def _table(rows: list[dict]) -> str:
    head = (
        f"{'store / code':<28} {'turns':>7} {'ingest s':>9} {'turns/s':>8} {'first ctx s':>11} "
        f"{'proc wall s':>11} {'warm ms':>8} {'KB/1k turns':>11} {'rss MB':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['name']:<28} {r['turns']:>7} {r['ingest_s']:>9.1f} {r['turns_per_s']:>8.0f} "
            f"{r['first_s']:>11.2f} {r['first_wall_s']:>11.2f} {r['warm_ms']:>8.0f} {r['kb_per_1000']:>11.0f} "
            f"{r.get('rss_mb', 0):>7.0f}"
        )
    return "\n".join(lines)


def _split(rows: list[dict]) -> str:
    names = sorted({t for r in rows for t in r["tables"]}, key=lambda t: -max(r["tables"].get(t, 0) for r in rows))
    head = f"{'table / index (KB per 1k turns)':<34}" + "".join(f"{r['name'][:22]:>24}" for r in rows)
    lines = [head, "-" * len(head)]
    for t in names[:14]:
        lines.append(f"{t:<34}" + "".join(f"{r['tables'].get(t, 0) / r['turns'] / 1.024:>24.0f}" for r in rows))
    return "\n".join(lines)


def _targets(rows: list[dict]) -> str:
    """Issue 12's targets, each with this tree's figure and the legacy one from the same run."""

    def pick(prefix: str, legacy: bool) -> dict | None:
        return next((r for r in rows if r["name"].startswith(prefix) and ("legacy" in r["name"]) == legacy), None)

    lines = [f"{'target':<50} {'this tree':>10} {'legacy':>10}  met", "-" * 78]
    checks = [
        ("first context, LoCoMo 5.9k (<= 1.5 s)", "LoCoMo", "first_s", 1.5, "{:.2f}", True),
        ("first context, synthetic (<= 3 s at 100k)", "", "first_s", 3.0, "{:.2f}", True),
        ("ingest incl. embeddings, LoCoMo (>= 150 turns/s)", "LoCoMo", "turns_per_s", 150, "{:.0f}", False),
        ("KB per 1,000 LoCoMo turns (<= 1,500)", "LoCoMo", "kb_per_1000", 1500, "{:.0f}", True),
    ]
    for label, prefix, key, limit, fmt, at_most in checks:
        ours = pick(prefix or next((r["name"].split(",")[0] for r in rows if "synthetic" in r["name"]), "?"), False)
        old = pick(prefix or next((r["name"].split(",")[0] for r in rows if "synthetic" in r["name"]), "?"), True)
        if ours is None:
            continue
        value = ours[key]
        met = value <= limit if at_most else value >= limit
        lines.append(
            f"{label:<50} {fmt.format(value):>10} {fmt.format(old[key]) if old else '-':>10}  {'yes' if met else 'NO'}"
        )
    lines.append(
        f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
        f"(2 shared cores; LoCoMo r@10 is benchmarks/locomo_recall.py)"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Build, measure and print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", type=int, default=100_000, help="turns of the synthetic store")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--skip-legacy", action="store_true")
    ap.add_argument("--skip-locomo", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--baseline", help="a git revision (e.g. main) beside this tree instead of the legacy code")
    ap.add_argument("--keep", type=Path, help="write the stores here and reuse those found (builds not redone)")
    ap.add_argument("--store", type=Path, help="measure a copy of this SQLite store (built before) instead of building")
    ap.add_argument("--namespace", default="synthetic", help="of --store")
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite", help="of the synthetic stores")
    args = ap.parse_args(argv)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="stratamem-firstq-") as tmp_name:
        tmp = Path(tmp_name)
        keep = args.keep or tmp
        keep.mkdir(parents=True, exist_ok=True)
        codes = [("this tree", ROOT / "src", False)]
        if args.baseline:
            codes.append((args.baseline, _legacy_src(tmp, args.baseline), False))
        elif not args.skip_legacy:
            codes.append((f"legacy {LEGACY_COMMIT}", _legacy_src(tmp), True))
        plan = []
        if args.store:
            plan += [
                (f"{args.store.stem}, {label}", _INGEST_SYNTHETIC, src, legacy, args.namespace, False)
                for label, src, legacy in codes
            ]
        elif not args.skip_synthetic:
            plan += [
                (f"{args.synthetic // 1000}k synthetic, {label}", _INGEST_SYNTHETIC, src, legacy, "synthetic", False)
                for label, src, legacy in codes
            ]
        if not args.skip_locomo:
            plan += [(f"LoCoMo, {label}", _INGEST_LOCOMO, src, legacy, "locomo", True) for label, src, legacy in codes]
        for i, (name, build, src, legacy, ns, pyramid) in enumerate(plan):
            key = f"{'synthetic' if ns == 'synthetic' else 'locomo'}-{args.synthetic if ns == 'synthetic' else 0}-{i}"
            extra: dict[str, object] = {}
            if args.store and ns == args.namespace:
                db: Path | str = keep / f"{args.store.stem}-{i}.db"
                extra["given"] = str(args.store)
            elif ns == "synthetic" and args.backend == "postgres":
                db = _pg_database(f"firstq_{key.replace('-', '_')}")
                extra["pg_saved"] = str(keep / f"{key}.pg.build.json")
            else:
                db = keep / f"{key}.db"
            rows.append(_measure(name, build, src, db, ns, pyramid, legacy, size=args.synthetic, **extra))
            print(_table(rows[-1:]).splitlines()[-1], flush=True)  # each row as soon as it is measured
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
        shutil.rmtree(tmp / "legacy", ignore_errors=True)
    print()
    print(_table(rows))
    print()
    print(_split(rows))
    print()
    print(_targets(rows))
    for r in rows:
        if r["notes"]:
            print(f"notes ({r['name']}): {'; '.join(r['notes'])}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
