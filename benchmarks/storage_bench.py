"""Bytes per 1,000 LoCoMo turns, everything included, this tree beside a baseline tree in one run.

Issue 28's storage target: at most 600 KB per 1,000 LoCoMo turns with
vectors, everything included — manifests at their default retention after one
context per question. Each tree (this one, and ``--baseline REV``, default
``main``, extracted with ``git archive`` into a temporary directory; the
repository is not touched) builds the same store in its own subprocess:

* all ten LoCoMo conversations, one namespace each (``locomo-<sample>``), one
  ``Memory.add`` per session, turns as ``benchmarks/peers/data.py`` gives
  them (the peer benchmark's protocol), the default configuration (local
  MiniLM, pyramid on, manifests recorded);
* then one ``Memory.context(question, budget=4000)`` per scored question
  (1,979), in that conversation's namespace.

Measured after the ingest ("at rest") and after the contexts ("after
contexts"): the database file + WAL (after a checkpoint) + the pyramid's
archive directory, per 1,000 turns, and the split by part (the tables of
``stratamem.store.part_bytes.PARTS`` of this tree, summed from SQLite's
``dbstat``; ``free`` is unused pages). Also the stored manifests' count and
mean bytes, and the contexts' wall time (p50, for a sanity check only; the
latency benchmarks are ``first_query.py`` and ``context_latency.py``).

    .venv/bin/python benchmarks/storage_bench.py [--baseline main] [--skip-baseline] [--conversations N]
        [--questions N] [--src PATH] [--json out.json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from stratamem.store.part_bytes import part_of  # noqa: E402

_BUILD = """
import json, statistics, sys, time
sys.path.insert(0, {peers!r})
import data
from stratamem import Memory

convs = data.conversations(count={count})
questions = data.question_texts(count={count}, limit={limit})
base = Memory({db!r})
t0 = time.perf_counter()
turns = 0
for sample, rows in convs:
    mem = base.for_namespace(f"locomo-{{sample}}")
    sessions = {{}}
    for t in rows:
        sessions.setdefault(t.session, []).append(t)
    for name, ts in sessions.items():
        mem.add([{{"role": t.role, "name": t.speaker, "content": t.text, "timestamp": t.timestamp.isoformat(),
                   "metadata": {{"dia_id": t.dia_id}}}} for t in ts], session=name, format="turns")
        turns += len(ts)
ingest = time.perf_counter() - t0
base.close()
print(json.dumps({{"phase": "ingest", "turns": turns, "seconds": ingest}}), flush=True)
input()  # the parent measures the store at rest, then lets the contexts run
base = Memory({db!r})
walls = []
for sample, qs in questions.items():
    mem = base.for_namespace(f"locomo-{{sample}}")
    for _, q in qs:
        t = time.perf_counter()
        mem.context(q, budget=4000)
        walls.append(time.perf_counter() - t)
base.close()
print(json.dumps({{"phase": "contexts", "contexts": len(walls), "p50_ms": 1000 * statistics.median(walls),
                  "seconds": sum(walls)}}), flush=True)
"""


def _tree(rev: str, tmp: Path) -> Path:
    """``src`` of ``rev`` (``git archive``; the repository is not touched)."""
    dest = tmp / rev.replace("/", "_")
    dest.mkdir()
    blob = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=blob, check=True)
    return dest / "src"


def _measure(db: Path) -> dict:
    """Bytes of everything the store occupies, per part, and its manifests."""
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE tbl_name IS NOT NULL").fetchall())
        parts: dict[str, int] = {}
        for name, size in conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            part = part_of(owner.get(name, name))
            parts[part] = parts.get(part, 0) + int(size)
        cols = [r[1] for r in conn.execute("PRAGMA table_info(manifests)")]
        body = "data" if "data" in cols else cols[-1]
        n, body_bytes = conn.execute(f"SELECT COUNT(*), COALESCE(SUM(LENGTH({body})), 0) FROM manifests").fetchone()
    conn.close()
    files = sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())
    parts["free"] = files - sum(parts.values())
    archive = Path(f"{db}.archive")
    if archive.is_dir():
        parts["archive"] = sum(p.stat().st_size for p in archive.rglob("*") if p.is_file())
    return {"bytes": sum(parts.values()), "parts": parts, "manifests": n, "manifest_bytes": body_bytes}


def _keep(db: Path, keep: Path | None, label: str) -> None:
    """Copy the store (checkpointed) to ``keep`` for a closer look (``sqlite3_analyzer``, ``dbstat``)."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(db) as conn, sqlite3.connect(keep / f"{label}.db") as out:
            conn.backup(out)
        conn.close()
        out.close()


def _run(name: str, src: Path, db: Path, count: int | None, limit: int | None, keep: Path | None = None) -> dict:
    code = textwrap.dedent(
        _BUILD.format(peers=str(ROOT / "benchmarks" / "peers"), db=str(db), count=count, limit=limit)
    )
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    print(f"  {name}: ingest ...", flush=True)
    ingest = json.loads(proc.stdout.readline())
    rest = _measure(db)
    _keep(db, keep, f"{name.replace(' ', '_')}-rest")
    print(f"  {name}: {ingest['turns']} turns in {ingest['seconds']:.0f} s; contexts ...", flush=True)
    proc.stdin.write("\n")
    proc.stdin.flush()
    ctx = json.loads(proc.stdout.readline())
    if proc.wait() != 0:
        raise SystemExit(f"{name}: subprocess failed")
    after = _measure(db)
    _keep(db, keep, f"{name.replace(' ', '_')}-ctx")
    print(f"  {name}: {ctx['contexts']} contexts, p50 {ctx['p50_ms']:.0f} ms", flush=True)
    return {"name": name, "turns": ingest["turns"], "ingest_s": ingest["seconds"], "rest": rest, "after": after, **ctx}


def _kb(r: dict, size: int) -> str:
    return f"{size / r['turns'] / 1.024:,.0f}"


def _table(rows: list[dict]) -> str:
    head = f"{'KB per 1,000 turns':<24}" + "".join(f"{r['name'] + ' ' + w:>24}" for r in rows for w in ("rest", "ctx"))
    lines = [head, "-" * len(head)]
    parts = sorted(
        {p for r in rows for m in (r["rest"], r["after"]) for p in m["parts"]},
        key=lambda p: -max(r["after"]["parts"].get(p, 0) for r in rows),
    )
    for p in ["TOTAL", *parts]:
        cells = []
        for r in rows:
            for m in (r["rest"], r["after"]):
                cells.append(_kb(r, m["bytes"] if p == "TOTAL" else m["parts"].get(p, 0)))
        lines.append(f"{p:<24}" + "".join(f"{c:>24}" for c in cells))
    lines.append("")
    for r in rows:
        m = r["after"]
        mean = m["manifest_bytes"] / m["manifests"] if m["manifests"] else 0
        lines.append(
            f"{r['name']}: {r['turns']:,} turns, ingest {r['turns'] / r['ingest_s']:.0f} turns/s; "
            f"{r['contexts']:,} contexts (p50 {r['p50_ms']:.0f} ms); {m['manifests']:,} manifests kept, "
            f"{mean / 1024:.1f} KB stored each; total {m['bytes'] / 1e6:.1f} MB"
        )
    lines.append(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())} (2 shared cores)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Build both stores, measure, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="main", help="git revision to run beside this tree")
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--only-baseline", action="store_true", help="run the baseline alone (e.g. beside a running run)")
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="this tree's src (e.g. a copy, to keep editing)")
    ap.add_argument("--conversations", type=int, default=None, help="first N conversations (default all ten)")
    ap.add_argument("--questions", type=int, default=None, help="at most N questions per conversation")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--keep", type=Path, help="copy each store (at rest, after contexts) into this directory")
    args = ap.parse_args(argv)
    print(f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="storage-bench-") as tmp:
        trees = [] if args.only_baseline else [("this tree", args.src)]
        if not args.skip_baseline:
            trees.append((args.baseline, _tree(args.baseline, Path(tmp))))
        for i, (name, src) in enumerate(trees):
            t0 = time.perf_counter()
            rows.append(_run(name, src, Path(tmp) / f"s{i}.db", args.conversations, args.questions, args.keep))
            print(f"  {name}: {time.perf_counter() - t0:.0f} s", flush=True)
    print(_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
