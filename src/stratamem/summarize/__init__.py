"""Summarizers: the protocol and the three strategies.

A :class:`Summarizer` turns the turns of a segment into a
:class:`~stratamem.records.Summary` (a record, :mod:`stratamem.records.summaries`)
(summary text, key facts, themes) and merges child summaries into the summary
of a consolidation (with an executive summary for top levels). Strategies:

* :mod:`~stratamem.summarize.heuristic` — seed 000's free rule (first user requests).
* :mod:`~stratamem.summarize.extractive` — local, no network: central sentences and
  sentences carrying names, numbers and dates, each keeping its source turn id.
* :mod:`~stratamem.summarize.llm` — any :class:`~stratamem.llm.ChatModel`
  (OpenAI-compatible endpoints, local servers, Anthropic).

What to do when a summarizer fails (fallback, failure record, event) is the
pyramid's business, not the summarizer's: summarizers raise
:class:`~stratamem.errors.ModelError` and never return an error text as a summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..records import StoredTurn
from ..records.summaries import Summary

__all__ = ["MAX_KEY_FACTS", "Summarizer"]

MAX_KEY_FACTS = 10
"""Key facts kept per chunk (seed 000)."""


@runtime_checkable
class Summarizer(Protocol):
    """Summarizes segments and merges summaries."""

    name: str
    """Strategy name recorded with every summary (``heuristic``, ``extractive``, ``llm``)."""

    def summarize(self, turns: Sequence[StoredTurn], *, max_tokens: int) -> Summary:
        """Summarize consecutive turns within ``max_tokens`` tokens of summary text.

        Raises:
            ModelError: A model call failed (model-backed strategies only).
        """
        ...

    def merge(self, parts: Sequence[Summary], *, max_tokens: int, executive: bool = False) -> Summary:
        """Merge child summaries (oldest first) into one; ``executive`` adds an executive summary.

        Raises:
            ModelError: A model call failed (model-backed strategies only).
        """
        ...
