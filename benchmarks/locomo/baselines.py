"""The systems compared on LoCoMo: the baselines and our hybrid engine.

Each system indexes one conversation's stored turns (``fit``) and ranks them
for a question (``rank``). The runner packs the ranking into each budget with
the system's renderer, except for the recent window, which asks
:meth:`stratamem.Memory.context` itself, as an agent would today.

Baselines: the recent window, BM25 over turns (``bm25s``, English stop
words, no stemming, default parameters), dense MiniLM over turns (exact
cosine), and the two fused by reciprocal rank (k = 60).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from stratamem import Memory
from stratamem.records import StoredTurn
from stratamem.retrieve import CompactRenderer, HybridIndex, PlainRenderer, TurnRenderer

from .protocol import Conversation

__all__ = ["BM25Turns", "DenseTurns", "Hybrid", "RRFTurns", "RecentWindow", "System"]


class System(Protocol):
    """A retrieval system under test."""

    name: str
    """Label in the tables."""
    renderer: TurnRenderer
    """Framing used by the budget walk."""

    def fit(self, conv: Conversation, store: Any) -> None:
        """Index one conversation (its stored turns only)."""

    def rank(self, query: str, depth: int) -> list[StoredTurn]:
        """The best ``depth`` turns for ``query``, best first."""


def _rrf(rankings: Sequence[Sequence[int]], k: int = 60) -> list[int]:
    score: dict[int, float] = {}
    for ranking in rankings:
        for r, i in enumerate(ranking):
            score[i] = score.get(i, 0.0) + 1.0 / (k + r + 1)
    return sorted(score, key=lambda i: -score[i])


class RecentWindow:
    """What ``Memory.context`` returns today: the newest turns of the latest session."""

    name = "recent window"
    renderer: TurnRenderer = PlainRenderer()

    def fit(self, conv: Conversation, store: Any) -> None:
        """Remember the namespace; nothing to index."""
        self.memory = Memory(store, namespace=conv.namespace)
        self.by_id = {st.id: st for st in conv.turns}
        latest = conv.turns[-1].session
        self.newest = [st for st in reversed(conv.turns) if st.session == latest]

    def rank(self, query: str, depth: int) -> list[StoredTurn]:
        """Newest first; the query is ignored."""
        return self.newest[:depth]

    def budget_turns(self, query: str, budget: int) -> list[StoredTurn]:
        """The turns ``Memory.context(format="text")`` places within ``budget``."""
        ctx = self.memory.context(query, budget=budget, format="text")
        return [self.by_id[i] for item in ctx.manifest.items for i in item.turn_ids]


class BM25Turns:
    """BM25 over each turn's text (``bm25s`` defaults, English stop words)."""

    name = "BM25 turns"

    def __init__(self, renderer: TurnRenderer | None = None) -> None:
        self.renderer = renderer or PlainRenderer()

    def fit(self, conv: Conversation, store: Any) -> None:
        """Tokenize and index the turns."""
        import bm25s
        from bm25s.tokenization import Tokenizer

        self.turns = list(conv.turns)
        self.tokenizer = Tokenizer(stopwords="en", stemmer=None)
        ids = self.tokenizer.tokenize([st.text for st in self.turns], return_as="ids", show_progress=False)
        self.bm25 = bm25s.BM25()
        self.bm25.index(ids, show_progress=False)

    def order(self, query: str) -> list[int]:
        """Turn positions by descending score."""
        q = self.tokenizer.tokenize([query], return_as="ids", update_vocab=False, show_progress=False)[0]
        if not q:
            return list(range(len(self.turns)))
        scores = self.bm25.get_scores(q)
        return [int(i) for i in np.argsort(-scores, kind="stable")]

    def rank(self, query: str, depth: int) -> list[StoredTurn]:
        """Top turns by BM25."""
        return [self.turns[i] for i in self.order(query)[:depth]]


class DenseTurns:
    """Exact cosine over MiniLM embeddings of each turn's text."""

    name = "dense MiniLM turns"

    def __init__(self, embed: Callable[[list[str]], np.ndarray], renderer: TurnRenderer | None = None) -> None:
        self.embed = embed
        self.renderer = renderer or PlainRenderer()

    def fit(self, conv: Conversation, store: Any) -> None:
        """Embed the turns."""
        self.turns = list(conv.turns)
        self.matrix = self.embed([st.text for st in self.turns])

    def order(self, query: str) -> list[int]:
        """Turn positions by descending cosine."""
        q = self.embed([query])[0]
        return [int(i) for i in np.argsort(-(self.matrix @ q), kind="stable")]

    def rank(self, query: str, depth: int) -> list[StoredTurn]:
        """Top turns by cosine."""
        return [self.turns[i] for i in self.order(query)[:depth]]


class RRFTurns:
    """BM25 and dense rankings fused by reciprocal rank (k = 60)."""

    name = "BM25+dense RRF"

    def __init__(self, bm25: BM25Turns, dense: DenseTurns, renderer: TurnRenderer | None = None) -> None:
        self.bm25, self.dense = bm25, dense
        self.renderer = renderer or PlainRenderer()

    def fit(self, conv: Conversation, store: Any) -> None:
        """Reuse the fitted parts (the runner fits them first)."""
        self.turns = list(conv.turns)

    def rank(self, query: str, depth: int) -> list[StoredTurn]:
        """Top turns by fused rank."""
        return [self.turns[i] for i in _rrf([self.bm25.order(query), self.dense.order(query)])[:depth]]


class Hybrid:
    """Our engine: :class:`stratamem.retrieve.HybridIndex` with compact rendering."""

    name = "stratamem hybrid"

    def __init__(self, embedder: Any | None, renderer: TurnRenderer | None = None, **options: Any) -> None:
        self.embedder = embedder
        self.options = options
        self.renderer = renderer or CompactRenderer()

    def fit(self, conv: Conversation, store: Any) -> None:
        """Build the index from the stored turns."""
        self.index = HybridIndex(embedder=self.embedder, **self.options)
        self.index.add_turns(conv.turns)
        self.by_id = {st.id: st for st in conv.turns}

    def rank(self, query: str, depth: int) -> list[StoredTurn]:
        """Top turns of the engine's hits."""
        return [self.by_id[h.turn_ids[0]] for h in self.index.search(query, k=depth)]
