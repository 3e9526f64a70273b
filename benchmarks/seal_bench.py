"""Cost of one seal as the namespace's history grows (review finding #21).

Run from the repository root::

    .venv/bin/python benchmarks/seal_bench.py                  # histories of 2,000 and 20,000 turns
    .venv/bin/python benchmarks/seal_bench.py --sizes 2000 20000 50000 --seals 30

For each size, one fresh SQLite file gets that many turns (sessions of 500
turns through ``Memory.add_sessions``, pyramid preset with the heuristic
summarizer so the setup is quick), then ``--seals`` adds of 10 turns to a live
session, each sealing one segment and moving tiers. Reported: the median
milliseconds of such an add, and beside it the baseline of the same run: the
reads the previous ``_move_tiers`` made on every seal (every level-1 node plus
the whole top-level coverage map), timed on the same file.

Wall-clock on whatever machine runs it (a shared 2-core box here: expect noise).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from stratamem import Config, Memory
from stratamem.ingest import IngestSession
from stratamem.records import Turn


def _history(mem: Memory, turns: int) -> None:
    sessions = []
    for j in range(turns // 500):
        sessions.append(IngestSession(f"bulk{j}", [
            Turn(role="user" if k % 2 == 0 else "assistant", content=f"turn {k} of session {j}: words about lot {k}")
            for k in range(500)]))
    mem.add_sessions(sessions)


def measure(size: int, seals: int, folder: Path) -> dict[str, float]:
    """Median ms of a sealing add, and of the old full-scan reads, at ``size`` turns of history."""
    config = Config().replace(pyramid={"summarizer": "heuristic", "auto_extract_facts": False})
    with Memory(folder / f"seal{size}.db", namespace="bench", config=config) as mem:
        t = time.perf_counter()
        _history(mem, size)
        setup = time.perf_counter() - t
        adds, scans = [], []
        for i in range(seals):
            batch = [{"role": "user" if k % 2 == 0 else "assistant", "content": f"live {i}.{k} about the thing"}
                     for k in range(10)]
            t = time.perf_counter()
            mem.add(batch, session="live")
            adds.append(time.perf_counter() - t)
            nodes, top = mem.store.nodes, len(mem.pyramid.plan.levels) + 1
            t = time.perf_counter()
            nodes.list("bench", level=1)
            nodes.coverage("bench", top)
            scans.append(time.perf_counter() - t)
        segments = len(mem.pyramid.nodes(level=1))
    return {"turns": size, "segments": segments, "setup_s": round(setup, 1),
            "seal_add_ms": round(statistics.median(adds) * 1000, 2),
            "old_full_scan_ms": round(statistics.median(scans) * 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--seals", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(size, args.seals, Path(tmp)) for size in args.sizes]
    print(f"{'turns':>7} {'segments':>8} {'seal add ms':>12} {'old full-scan reads ms':>23}")
    for r in rows:
        print(f"{r['turns']:>7} {r['segments']:>8} {r['seal_add_ms']:>12} {r['old_full_scan_ms']:>23}")
    if len(rows) > 1:
        print(f"ratio largest/smallest: seal add {rows[-1]['seal_add_ms'] / rows[0]['seal_add_ms']:.2f}x, "
              f"old full-scan reads {rows[-1]['old_full_scan_ms'] / rows[0]['old_full_scan_ms']:.2f}x")


if __name__ == "__main__":
    main()
