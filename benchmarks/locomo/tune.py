"""Weight search on the tuning split (conversations 0–4): fast, ranking metrics only.

Signals are computed once per question; each weight setting is then a dot
product. Budget recall is approximated by recall at a depth of turns (the
real budget walk runs in ``locomo_recall.py``).

    .venv/bin/python -m benchmarks.locomo.tune
"""

from __future__ import annotations

import itertools
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from stratamem.retrieve import HybridIndex, Weights
from stratamem.store import SQLiteStore

from .embedcache import cached_embedder
from .protocol import load_conversations

SIGNALS = (
    "lexical",
    "lexical_window",
    "lexical_session",
    "vector",
    "vector_window",
    "vector_session",
    "lexical_prev",
    "lexical_next",
    "vector_prev",
    "vector_next",
    "speaker",
    "date",
    "substance",
    "substance_terms",
)


def collect(samples: list[int], weights: Weights, embedder: object | None) -> list[tuple[dict, np.ndarray, int]]:
    """Per question: raw signals (plus the turns' content-word counts as ``terms``), gold mask, category."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "t.db")
        for conv in load_conversations(store, samples=samples):
            index = HybridIndex(embedder=embedder, weights=weights)
            index.add_turns(conv.turns)
            terms = np.array([len(t) for t in index._corpus.terms], dtype=np.float64)
            for q in conv.questions:
                sig, _ = index.signals(q.text)
                sig["terms"] = terms
                gold = np.array([conv.dia_of[st.id] in q.gold for st in index.turns])
                out.append((sig, gold, q.category))
        store.close()
    return out


def _scaled(x: np.ndarray) -> np.ndarray:
    top = float(x.max())
    return x / top if top > 0 else x * 0


def evaluate(data: list, w: dict[str, float], depths: tuple[int, ...] = (10, 40)) -> tuple[float, ...]:
    """Mean recall at each depth for weights ``w``."""
    sums = np.zeros(len(depths))
    for sig, gold, _ in data:
        fused = sum(
            w.get(n, 0) * (v if n in ("speaker", "date") else _scaled(v)) for n, v in sig.items() if n != "terms"
        )
        prior = w.get("substance", 0) * (1 - np.exp(-sig["terms"] / w.get("substance_terms", 24.0)))
        fused = fused + np.where(fused > 0, prior, 0.0)
        order = np.argsort(-fused, kind="stable")
        for j, d in enumerate(depths):
            sums[j] += gold[order[:d]].sum() / gold.sum()
    return tuple(sums / len(data))


def main() -> None:
    """Grid over the main weights; prints the best settings."""
    window = int(sys.argv[1]) if len(sys.argv) > 1 else Weights().window
    emb = cached_embedder()
    data = collect([0, 1, 2, 3, 4], replace(Weights(), window=window), emb)
    if emb is not None:
        emb.save()
    base = {f: getattr(Weights(), f) for f in SIGNALS}
    print("default", base, evaluate(data, base))
    grid = {
        "lexical_session": [0.5, 0.8],
        "date": [0.3, 0.5],
        "substance": [0, 1.0, 1.3, 1.6],
        "substance_terms": [12.0, 24.0],
    }
    if emb is not None:
        grid.update({"vector": [1.0, 1.3], "vector_window": [0.7, 1.0]})
    rows = []
    for combo in itertools.product(*grid.values()):
        w = {**base, **dict(zip(grid, combo, strict=True))}
        rows.append((evaluate(data, w), combo))
    rows.sort(key=lambda r: -(r[0][0] + r[0][1]))
    print(list(grid))
    for r in rows[:10]:
        print(r)


if __name__ == "__main__":
    main()
