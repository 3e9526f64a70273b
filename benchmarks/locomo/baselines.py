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
from stratamem.context.render import recent_window
from stratamem.records import StoredTurn
from stratamem.retrieve import CompactRenderer, HybridIndex, PlainRenderer, TurnRenderer
from stratamem.tokens import get_tokenizer

from .protocol import Conversation

__all__ = ["BM25Turns", "DenseTurns", "Hybrid", "MemoryContext", "RRFTurns", "RecentWindow", "System"]


class System(Protocol):
    """A retrieval system under test."""

    name: str
    """Label in the tables."""
    renderer: TurnRenderer
    """Framing used by the budget walk."""

    def fit(self, conv: Conversation, store: Any) -> None:
        """Index one conversation (its stored turns only)."""

    def rank(self, query: str, depth: int, now: Any = None) -> list[StoredTurn]:
        """The best ``depth`` turns for ``query``, best first."""


def _rrf(rankings: Sequence[Sequence[int]], k: int = 60) -> list[int]:
    score: dict[int, float] = {}
    for ranking in rankings:
        for r, i in enumerate(ranking):
            score[i] = score.get(i, 0.0) + 1.0 / (k + r + 1)
    return sorted(score, key=lambda i: -score[i])


def _takes_now(fn: Callable[..., Any]) -> bool:
    import inspect

    return "now" in inspect.signature(fn).parameters


class RecentWindow:
    """The spine's context: the newest turns of the latest session (:func:`stratamem.context.recent_window`)."""

    name = "recent window"
    renderer: TurnRenderer = PlainRenderer()

    def fit(self, conv: Conversation, store: Any) -> None:
        """Keep the latest session's turns, newest first; nothing to index."""
        self.by_id = {st.id: st for st in conv.turns}
        latest = conv.turns[-1].session
        self.newest = [st for st in reversed(conv.turns) if st.session == latest]
        self.tokenizer = get_tokenizer("o200k_base")

    def rank(self, query: str, depth: int, now: Any = None) -> list[StoredTurn]:
        """Newest first; the query is ignored."""
        return self.newest[:depth]

    def budget_turns(self, query: str, budget: int, now: Any = None) -> list[StoredTurn]:
        """The turns the recent window places within ``budget`` (text format)."""
        ctx = recent_window(iter(self.newest), budget, self.tokenizer, "text", query=query)
        return [self.by_id[i] for item in ctx.manifest.items for i in item.turn_ids]


class MemoryContext:
    """The whole library path: ``Memory.context(query, budget, policy=..., format="text")``.

    ``now`` (the question date) is passed on when ``Memory.context`` accepts it.
    """

    renderer: TurnRenderer = CompactRenderer()

    def __init__(self, embedder: Any | None, policy: str = "recall", *, cache: bool = False) -> None:
        self.embedder, self.policy, self.cache = embedder, policy, cache
        self.name = f"Memory.context ({policy}{', cache layout' if cache else ''})"
        # Per budget: contexts, update labels shown, their tokens, excerpts shown.
        self.marks: dict[int, list[int]] = {}
        # Of the last context: (turn id, reason, duplicate_of) of turns left out as repeats.
        self.last_left_out: list[tuple[int, str, str | None]] = []
        # Of the last context: turns shown whole (not as excerpts) that lost fact sentences to de-duplication,
        # with those sentences (each near-repeats something shown above it).
        self.last_stripped: dict[int, list[str]] = {}

    def fit(self, conv: Conversation, store: Any) -> None:
        """A ``Memory`` on the conversation's namespace (its index builds on first query)."""
        self.memory = Memory(store, namespace=conv.namespace, embedder=self.embedder)
        self.by_id = {st.id: st for st in conv.turns}

    def rank(self, query: str, depth: int, now: Any = None) -> list[StoredTurn]:
        """The hits ``Memory`` recalls for ``query``."""
        index = self.memory._recall_index()
        extra = {"now": now} if now is not None and _takes_now(index.search) else {}
        return [self.by_id[h.turn_ids[0]] for h in index.search(query, k=depth, **extra)]

    def budget_turns(self, query: str, budget: int, now: Any = None) -> list[StoredTurn]:
        """The verbatim turns in the assembled context's manifest."""
        extra: dict[str, Any] = {"now": now} if now is not None and _takes_now(self.memory.context) else {}
        if self.cache:
            extra["cache"] = True  # the prompt-cache layout (issue 26); only trees that have it
        ctx = self.memory.context(query, budget=budget, format="text", policy=self.policy, **extra)
        tally = self.marks.setdefault(budget, [0, 0, 0, 0])
        newer, older = ctx.text.count(" (newer) "), ctx.text.count(" (superseded?) ")
        tally[0] += 1
        tally[1] += newer + older
        tally[2] += 4 * newer + 5 * older  # o200k tokens each label adds to its line
        tally[3] += sum(1 for i in ctx.manifest.items if i.format == "excerpt")
        self.last_left_out = [
            (int(m.id.split(":", 1)[1]), m.reason, m.duplicate_of)
            for m in ctx.manifest.near_misses
            if m.kind == "turn" and m.duplicate_of is not None and m.id.startswith("turn:")
        ]
        from stratamem.context.dedup import MIN_FACT_TOKENS, fact_tokens, sentences

        self.last_stripped = {}
        for item in ctx.manifest.items:
            if item.kind != "turn" or item.format == "excerpt":
                continue
            for i in item.turn_ids:
                gone = [
                    s.strip()
                    for s in sentences(self.by_id[i].text)
                    if len(fact_tokens(s)) >= MIN_FACT_TOKENS and s.strip() not in ctx.text
                ]
                if gone:
                    self.last_stripped[i] = gone
        return [self.by_id[i] for item in ctx.manifest.items if item.kind == "turn" for i in item.turn_ids]


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

    def rank(self, query: str, depth: int, now: Any = None) -> list[StoredTurn]:
        """Top turns by BM25."""
        return [self.turns[i] for i in self.order(query)[:depth]]


class DenseTurns:
    """Exact cosine over MiniLM embeddings of each turn's text."""

    name = "dense MiniLM turns"

    def __init__(
        self,
        embed: Callable[[list[str]], np.ndarray],
        renderer: TurnRenderer | None = None,
        speaker_prefix: bool = False,
    ) -> None:
        self.embed = embed
        self.renderer = renderer or PlainRenderer()
        self.speaker_prefix = speaker_prefix

    def fit(self, conv: Conversation, store: Any) -> None:
        """Embed the turns (as ``role: text`` with ``speaker_prefix``, the texts our engine embeds)."""
        self.turns = list(conv.turns)
        self.matrix = self.embed(
            [f"{st.turn.name or st.role}: {st.text}" if self.speaker_prefix else st.text for st in self.turns]
        )

    def order(self, query: str) -> list[int]:
        """Turn positions by descending cosine."""
        q = self.embed([query])[0]
        return [int(i) for i in np.argsort(-(self.matrix @ q), kind="stable")]

    def rank(self, query: str, depth: int, now: Any = None) -> list[StoredTurn]:
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

    def rank(self, query: str, depth: int, now: Any = None) -> list[StoredTurn]:
        """Top turns by fused rank."""
        return [self.turns[i] for i in _rrf([self.bm25.order(query), self.dense.order(query)])[:depth]]


class Hybrid:
    """Our engine: :class:`stratamem.retrieve.HybridIndex` with compact rendering."""

    name = "stratamem hybrid"

    def __init__(
        self,
        embedder: Any | None,
        renderer: TurnRenderer | None = None,
        fold_weights: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        self.embedder = embedder
        self.options = options
        self.fold_weights = fold_weights
        self.renderer = renderer or CompactRenderer()

    def fit(self, conv: Conversation, store: Any) -> None:
        """Build the index from the stored turns (with this conversation's fold weights, if any)."""
        options = dict(self.options)
        if self.fold_weights is not None:
            options["weights"] = self.fold_weights[conv.sample]
        self.index = HybridIndex(embedder=self.embedder, **options)
        self.index.add_turns(conv.turns)
        self.by_id = {st.id: st for st in conv.turns}

    def rank(self, query: str, depth: int, now: Any = None) -> list[StoredTurn]:
        """Top turns of the engine's hits."""
        extra = {"now": now} if now is not None and _takes_now(self.index.search) else {}
        return [self.by_id[h.turn_ids[0]] for h in self.index.search(query, k=depth, **extra)]
