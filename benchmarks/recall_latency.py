"""Recall latency at 1k, 10k and 100k turns in one session (query embedding included).

Turns are LoCoMo texts repeated into one session; their vectors come from the
/tmp LoCoMo embedding cache (filled by ``locomo_recall.py``) so that building a
100k index does not take minutes of MiniLM, while every *query* is embedded by
the real local MiniLM at search time, as in production.

    .venv/bin/python benchmarks/recall_latency.py
"""

from __future__ import annotations

import hashlib
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.locomo.embedcache import CachedEmbedder
from benchmarks.locomo.protocol import LOCOMO_PATH
from stratamem.embed import LocalMiniLM
from stratamem.ingest import read_file
from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import HybridIndex

QUERIES = [
    "When did Caroline go to the LGBTQ support group?",
    "What did Melanie paint?",
    "Which city have both Jean and John visited?",
    "How did Gina promote her clothes store?",
    "What is Jon's favorite style of dance?",
    "What did Caroline research?",
] * 5


def main() -> None:
    """Print p50/p95 search latency per index size, lexical only and hybrid."""
    texts = [(t.name, t.text) for s in read_file(LOCOMO_PATH, fmt="locomo") for t in s.turns]
    cache = CachedEmbedder(LocalMiniLM())
    start = datetime(2023, 1, 1, tzinfo=UTC)
    print(f"{'turns':>8} {'mode':<8} {'build s':>8} {'p50 ms':>8} {'p95 ms':>8}")
    for n in (1_000, 10_000, 100_000):
        turns = []
        for i in range(n):
            name, text = texts[i % len(texts)]
            turns.append(
                StoredTurn(
                    i + 1,
                    "bench",
                    "one",
                    i + 1,
                    1,
                    Turn(role="user", content=text, name=name, timestamp=start + timedelta(seconds=30 * i)),
                )
            )
        for mode, embedder in (("lexical", None), ("hybrid", cache)):
            index = HybridIndex(embedder=embedder)
            t0 = time.perf_counter()
            index.add_turns(turns)  # the index does its work as turns arrive
            index.search("warm up", k=10)
            build = time.perf_counter() - t0
            lat = []
            for q in QUERIES:
                cache.cache.pop(hashlib.sha256(q.encode()).hexdigest(), None)  # embed the query for real
                t0 = time.perf_counter()
                index.search(q, k=50)
                lat.append(time.perf_counter() - t0)
            print(
                f"{n:>8} {mode:<8} {build:>8.2f} {1000 * np.percentile(lat, 50):>8.1f} "
                f"{1000 * np.percentile(lat, 95):>8.1f}"
            )


if __name__ == "__main__":
    main()
