"""LoCoMo turn recall: our hybrid engine beside the baselines, in one run.

Usage::

    .venv/bin/python benchmarks/locomo_recall.py            # all ten conversations
    .venv/bin/python benchmarks/locomo_recall.py --samples 0 1 --no-dense

Reads ``../shared/data/locomo/locomo10.json`` at run time (never copied).
Weights are tuned on conversations 0–4; 5–9 are reported as held out.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.locomo.baselines import (  # noqa: E402
    BM25Turns, DenseTurns, Hybrid, MemoryContext, RecentWindow, RRFTurns)
from benchmarks.locomo.embedcache import cached_embedder  # noqa: E402
from benchmarks.locomo.protocol import LOCOMO_PATH, load_conversations  # noqa: E402
from benchmarks.locomo.runner import format_tables, run  # noqa: E402
from stratamem.retrieve import CompactRenderer  # noqa: E402
from stratamem.store import SQLiteStore  # noqa: E402

TUNE = range(0, 5)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, nargs="*", help="conversation positions (default: all)")
    ap.add_argument("--no-dense", action="store_true", help="skip every embedding-based system")
    ap.add_argument("--ours", action="store_true", help="only our engine and Memory.context (no baselines)")
    ap.add_argument("--data", type=Path, default=LOCOMO_PATH)
    ap.add_argument("--policies", nargs="+", default=["recall"],
                    help="Memory.context policies to run end to end (e.g. recall hybrid)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "locomo.db")
        convs = load_conversations(store, args.data, args.samples)
        embedder = None if args.no_dense else cached_embedder()
        bm25 = BM25Turns()
        systems: list = [RecentWindow(), bm25, BM25Turns(CompactRenderer())]
        systems[-1].name = "BM25 turns (compact render)"
        if args.ours:
            systems = []
        elif embedder is not None:
            dense = DenseTurns(embedder.embed_batch)
            systems += [dense, RRFTurns(bm25, dense), RRFTurns(bm25, dense, CompactRenderer())]
            systems[-1].name = "BM25+dense RRF (compact)"
        systems += [Hybrid(embedder)] + [MemoryContext(embedder, p) for p in args.policies]
        results = run(systems, convs, store)
        store.close()
        if embedder is not None:
            embedder.save()
    samples = [c.sample for c in convs]
    tuned = {s for i, s in enumerate(samples) if (args.samples or range(10))[i] in TUNE}
    print(f"LoCoMo: {len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
          f"{sum(len(c.questions) for c in convs)} questions scored "
          f"({sum(c.skipped for c in convs)} skipped: no existing evidence id)")
    print(format_tables(results, tuned_on=tuned or None, held_out=(set(samples) - tuned) or None))
    print("\nMemory.context marks per context (budget: knowledge-update labels / their tokens / excerpts)")
    for system in systems:
        if isinstance(system, MemoryContext):
            print(f"{system.name:<28}" + "  ".join(
                f"{b}: {n / c:.2f} / {t / c:.1f} / {e / c:.2f}" for b, (c, n, t, e) in sorted(system.marks.items())))
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
