"""Ingest cost: reading a Claude Code log, storing it with dedupe keys, and re-ingesting it.

Baseline, measured in the same run: ``Memory.add_sessions``, the store path
without dedupe keys (what ``stratamem ingest`` did before). Derived work
(pyramid, embeddings) is off in both, so the table shows the ingest path itself.

Usage::

    python benchmarks/ingest_bench.py [--episodes 200] [--repeat 5]

Prints medians over ``--repeat`` runs, each on a fresh SQLite file.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))

from make_claude_code_log import write_log  # noqa: E402

from stratamem import Config, Memory  # noqa: E402
from stratamem.ingest import read_file  # noqa: E402

CONFIG = Config().replace(pyramid={"enabled": False})


def _timed(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {"read_file (parse + validate)": [], "add_sessions (baseline, no keys)": [],
                                    "ingest, first time (keys written)": [], "ingest again (all skipped)": []}
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "session.jsonl"
        lines = write_log(log, episodes=args.episodes)
        turns = sum(len(s.turns) for s in read_file(log))
        for i in range(args.repeat):
            sessions = []
            rows["read_file (parse + validate)"].append(_timed(lambda: sessions.extend(read_file(log))))
            with Memory(Path(d) / f"base{i}.db", namespace="b", config=CONFIG) as base:
                rows["add_sessions (baseline, no keys)"].append(_timed(lambda: base.add_sessions(sessions)))
            with Memory(Path(d) / f"ing{i}.db", namespace="b", config=CONFIG) as mem:
                rows["ingest, first time (keys written)"].append(_timed(lambda: mem.ingest(sessions)))
                again = read_file(log)
                rows["ingest again (all skipped)"].append(_timed(lambda: mem.ingest(again)))
                assert mem.status().turns == turns
    base = statistics.median(rows["add_sessions (baseline, no keys)"])
    print(f"Claude Code log: {lines} lines, {turns} turns; median of {args.repeat} runs, fresh SQLite file each\n")
    print(f"| step | median s | turns/s | vs baseline |\n|---|---:|---:|---:|")
    for name, times in rows.items():
        med = statistics.median(times)
        print(f"| {name} | {med:.3f} | {turns / med:,.0f} | {med / base:.2f}x |")


if __name__ == "__main__":
    main()
