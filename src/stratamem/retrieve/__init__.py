"""Hybrid recall: find the stored turns that matter for a query, and pack them.

* :mod:`~stratamem.retrieve.lexical` — word analysis and BM25.
* :mod:`~stratamem.retrieve.query` — speakers and dates a query names.
* :mod:`~stratamem.retrieve.weights` — :class:`Weights` and the fusion of signals.
* :mod:`~stratamem.retrieve.engine` — :class:`HybridIndex`, the fused ranking.
* :mod:`~stratamem.retrieve.render` — rendering and budget packing of turns.
"""

from .engine import Embedder, Hit, HybridIndex, Weights
from .lexical import BM25Index, analyze, stem
from .query import QueryFacts, read_query
from .render import CompactRenderer, Packed, PlainRenderer, TurnRenderer, pack_turns, render_turns

__all__ = [
    "BM25Index",
    "CompactRenderer",
    "Embedder",
    "Hit",
    "HybridIndex",
    "Packed",
    "PlainRenderer",
    "QueryFacts",
    "TurnRenderer",
    "Weights",
    "analyze",
    "pack_turns",
    "read_query",
    "render_turns",
    "stem",
]
