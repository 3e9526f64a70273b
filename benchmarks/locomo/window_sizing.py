"""The default ``hybrid`` policy beside ``recall`` at 2,048 tokens, for settings of the window sizing.

``hybrid`` gives part of the budget to the recent window; for a question
about the past :func:`stratamem.context.window.window_fraction` shrinks it. This
walks both policies end to end (``Memory.context``) on LoCoMo and the
assistant-chat set and prints budget recall at 2,048 tokens for the shipped
sizing constants and for the alternatives given, so the gap to ``recall``
is measured in one run.

    .venv/bin/python -m benchmarks.locomo.window_sizing [--samples 0 1] [--floors 0.1 0.05]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from stratamem.context import window
from stratamem.store import SQLiteStore

from .baselines import MemoryContext
from .embedcache import CACHE, SYNTH_CACHE, cached_embedder
from .protocol import load_conversations
from .synth import load_synth


def _recall(system: MemoryContext, convs: list, budget: int) -> float:
    vals = []
    for conv in convs:
        system.fit(conv, system_store[0])
        for q in conv.questions:
            kept = {conv.dia_of[st.id] for st in system.budget_turns(q.text, budget, now=q.question_date)}
            vals.append(len(kept & set(q.gold)) / len(q.gold))
    return float(np.mean(vals))


system_store: list = []


def main(argv: list[str] | None = None) -> None:
    """Print hybrid vs recall at one budget for each window-floor setting."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="*", default=["locomo", "synth"])
    ap.add_argument("--samples", type=int, nargs="*")
    ap.add_argument("--floors", type=float, nargs="*", default=[])
    ap.add_argument("--budget", type=int, default=2048)
    args = ap.parse_args(argv)
    shipped = window.WINDOW_FLOOR
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "w.db")
        system_store.append(store)
        for name in args.datasets:
            t0 = time.perf_counter()
            if name == "locomo":
                convs = load_conversations(store, samples=args.samples)
                emb = cached_embedder(CACHE)
            else:
                from benchmarks.data.make_recall_chats import load_or_generate

                convs = load_synth(store, load_or_generate(), args.samples)
                emb = cached_embedder(SYNTH_CACHE)
            rec = _recall(MemoryContext(emb, "recall"), convs, args.budget)
            row = [f"recall {rec:.3f}"]
            for floor in [shipped, *args.floors]:
                window.WINDOW_FLOOR = floor
                hyb = _recall(MemoryContext(emb, "hybrid"), convs, args.budget)
                row.append(f"hybrid(floor={floor:g}) {hyb:.3f} (gap {rec - hyb:+.3f})")
            window.WINDOW_FLOOR = shipped
            if emb is not None:
                emb.save()
            print(f"{name} b@{args.budget}: " + "   ".join(row) + f"   [{time.perf_counter() - t0:.0f} s]", flush=True)
        store.close()


if __name__ == "__main__":
    main()
