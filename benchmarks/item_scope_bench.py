"""Session-scoped memory items: what the session filter costs a search, and what a promotion spills.

Usage::

    .venv/bin/python benchmarks/item_scope_bench.py [--sizes 1000 10000] [--sessions 100] [--queries 50]

Parts:

* **search latency** (lexical, ``Items.search``, limit 10) with N cold items in one
  namespace. Baseline: every item namespace-wide, searched without a session (the
  pre-scope behaviour). Scoped: the same texts, 90 % of them scoped to one of
  ``--sessions`` sessions, searched from one session (it sees the namespace-wide 10 %
  plus its own). p50 / p95 in ms, and the mean number of hits returned.
* **promotion spill**: a full hot tier of 10 × 100-token items (limit 1,000); promote
  a 150-token item. Baseline: the batch rule ``add`` uses (at least ``spill_count``
  = 4 items); ours: the minimum run in spill order.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from stratamem import Config
from stratamem.items.api import Items
from stratamem.store import SQLiteStore
from stratamem.store.new_rows import NewItem
from stratamem.tokens import get_tokenizer

WORDS = (
    "budget invoice lisbon rocket vendor tea plan deadline hotel ferry contract launch review design "
    "market salary river garden piano server"
).split()
TOKENIZER = get_tokenizer()


def fill(store: SQLiteStore, n: int, sessions: int, scoped: bool, seed: int = 7) -> None:
    """N cold items, the same texts either way; with ``scoped`` 90 % belong to one of ``sessions``."""
    rng = random.Random(seed)
    with store.items.transaction():
        for i in range(n):
            text = " ".join(rng.choice(WORDS) for _ in range(8)) + f" note {i}"
            session = f"s{rng.randrange(sessions)}"
            scope = "session" if scoped and rng.random() < 0.9 else "namespace"
            store.items.insert(
                "bench",
                NewItem(
                    content=text,
                    type="fact",
                    tier="cold",
                    tokens=TOKENIZER.count(text),
                    relevance=1.0,
                    source="api",
                    created_at="2025-01-01T00:00:00.000000Z",
                    session=session,
                    scope=scope,
                ),
            )


def search_latency(n: int, sessions: int, queries: int, scoped: bool) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "b.db")
        fill(store, n, sessions, scoped)
        items = Items(store, "bench", tokenizer=TOKENIZER)
        rng = random.Random(11)
        times, hits = [], []
        for _ in range(queries):
            query = " ".join(rng.sample(WORDS, 2))
            started = time.perf_counter()
            found = items.search(query, limit=10, session="s0" if scoped else None)
            times.append((time.perf_counter() - started) * 1000)
            hits.append(len(found.items))
        store.close()
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))], statistics.mean(hits)


def promotion_spill(batch: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "p.db")
        cfg = Config().replace(items={"hot_token_limit": 1000, "spill_count": 4}).items
        items = Items(store, "bench", tokenizer=TOKENIZER, config=cfg)

        def exactly(n: int, head: str) -> str:
            while TOKENIZER.count(head) < n:
                head += " x"
            return head

        for i in range(10):
            items.add(exactly(100, f"hot item {i}"))
        big = items.add(exactly(150, "the big cold item"), tier="cold")
        if batch:  # the rule explicit promotions followed before issue 17: add's batch
            with store.items.transaction():
                spilled = items._make_room(big.tokens, batch=True)
            n = len(spilled.spilled) if spilled else 0
        else:
            before = {i.id for i in items.list(tier="hot")}
            items.promote(big.id)
            n = len(before - {i.id for i in items.list(tier="hot")})
        store.close()
        return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()
    print("search latency, lexical, limit 10 (ms)")
    print(f"{'N':>7} | {'baseline p50/p95':>17} | {'hits':>5} | {'scoped p50/p95':>15} | {'hits':>5}")
    for n in args.sizes:
        b50, b95, bh = search_latency(n, args.sessions, args.queries, scoped=False)
        s50, s95, sh = search_latency(n, args.sessions, args.queries, scoped=True)
        print(f"{n:>7} | {b50:>8.1f}/{b95:<8.1f} | {bh:>5.1f} | {s50:>7.1f}/{s95:<7.1f} | {sh:>5.1f}")
    print()
    print("promotion into a full hot tier (10 x 100 tokens, limit 1000) of a 150-token item: items spilled")
    print(f"baseline (batch of spill_count=4): {promotion_spill(True)}   ours (minimum): {promotion_spill(False)}")


if __name__ == "__main__":
    main()
