"""Cost of one seal as the namespace's history grows (review finding #21).

Run from the repository root::

    .venv/bin/python benchmarks/seal_bench.py                  # histories of 2,000 and 20,000 turns
    .venv/bin/python benchmarks/seal_bench.py --sizes 2000 20000 50000 --seals 30

For each size, one fresh SQLite file gets that many turns (sessions of 500
turns through ``Memory.add_sessions``, pyramid preset with the heuristic
summarizer so the setup is quick), then ``--seals`` adds of 10 turns to a live
session, each sealing one segment and moving tiers: every other one through
``Memory.add`` (store, recall index, pyramid), the others stored first and
then only ``Pyramid.update`` timed (the seal itself). Reported: the medians,
and beside them the baseline of the same run: the reads the previous
``_move_tiers`` made on every seal (every level-1 node plus the whole
top-level coverage map), timed on the same file.

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
from stratamem.store import TurnBatch


def _history(mem: Memory, turns: int) -> None:
    sessions = []
    for j in range(turns // 500):
        sessions.append(
            IngestSession(
                f"bulk{j}",
                [
                    Turn(
                        role="user" if k % 2 == 0 else "assistant",
                        content=f"turn {k} of session {j}: words about lot {k}",
                    )
                    for k in range(500)
                ],
            )
        )
    mem.add_sessions(sessions)


def measure(size: int, seals: int, folder: Path) -> dict[str, float]:
    """Median ms of a sealing add, and of the old full-scan reads, at ``size`` turns of history."""
    config = Config().replace(pyramid={"summarizer": "heuristic", "auto_extract_facts": False})
    with Memory(folder / f"seal{size}.db", namespace="bench", config=config, embedder=None) as mem:
        t = time.perf_counter()
        _history(mem, size)
        setup = time.perf_counter() - t
        adds, updates, scans = [], [], []
        for i in range(2 * seals):
            batch = [
                {"role": "user" if k % 2 == 0 else "assistant", "content": f"live {i}.{k} about the thing"}
                for k in range(10)
            ]
            if i % 2 == 0:  # the whole add: store, recall index, pyramid
                t = time.perf_counter()
                mem.add(batch, session="live")
                adds.append(time.perf_counter() - t)
            else:  # the seal alone: the same turns stored first, then the pyramid's update timed
                stored = mem.store.append(
                    "bench",
                    [
                        TurnBatch(
                            "live",
                            [Turn.from_dict(m) for m in batch],
                            [mem.tokenizer.count(m["content"]) for m in batch],
                        )
                    ],
                )
                t = time.perf_counter()
                mem.pyramid.update(["live"])
                updates.append(time.perf_counter() - t)
                assert stored
            nodes, top = mem.store.nodes, len(mem.pyramid.plan.levels) + 1
            t = time.perf_counter()
            nodes.list("bench", level=1)
            nodes.coverage("bench", top)
            scans.append(time.perf_counter() - t)
        segments = len(mem.pyramid.nodes(level=1))
    return {
        "turns": size,
        "segments": segments,
        "setup_s": round(setup, 1),
        "seal_add_ms": round(statistics.median(adds) * 1000, 2),
        "seal_update_ms": round(statistics.median(updates) * 1000, 2),
        "old_full_scan_ms": round(statistics.median(scans) * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    parser.add_argument("--seals", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(size, args.seals, Path(tmp)) for size in args.sizes]
    print(
        f"{'turns':>7} {'segments':>8} {'sealing add ms':>15} {'pyramid update ms':>18} {'old full-scan reads ms':>23}"
    )
    for r in rows:
        print(
            f"{r['turns']:>7} {r['segments']:>8} {r['seal_add_ms']:>15} {r['seal_update_ms']:>18} "
            f"{r['old_full_scan_ms']:>23}"
        )
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print(
            f"ratio largest/smallest: sealing add {b['seal_add_ms'] / a['seal_add_ms']:.2f}x, pyramid update "
            f"{b['seal_update_ms'] / a['seal_update_ms']:.2f}x, old full-scan reads "
            f"{b['old_full_scan_ms'] / a['old_full_scan_ms']:.2f}x"
        )


if __name__ == "__main__":
    main()
