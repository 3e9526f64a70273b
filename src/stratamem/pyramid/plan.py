"""How a configuration shapes the pyramid: the segmenter, the consolidation rules, the summarizer.

:func:`plan_for` turns ``config.pyramid`` (its preset) into a :class:`Plan`: the
level-1 segmenter (:mod:`stratamem.pyramid.segment`) and one :class:`LevelRule`
per higher level, which says when pending nodes of the level below are merged.
:func:`make_summarizer` picks the summarization strategy. Applying the plan to
stored turns is :class:`~stratamem.pyramid.consolidate.Pyramid`'s work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from ..config import Config
from ..errors import ConfigError
from ..records.nodes import Node
from ..summarize import Summarizer
from ..summarize.extractive import ExtractiveSummarizer
from ..summarize.heuristic import HeuristicSummarizer
from ..tokens import Tokenizer
from .segment import FixedSegmenter, Segmenter, TopicSegmenter, UserTurnSegmenter

__all__ = ["LevelRule", "Plan", "make_summarizer", "plan_for"]


@dataclass(frozen=True, slots=True)
class LevelRule:
    """When pending nodes of the level below are consolidated into one node of this level."""

    kind: str
    """Kind of the consolidation (``mini``, ``macro``, ``bulk``)."""
    min_turns: int = 0
    """Consolidate the oldest pending nodes as soon as they cover at least this many turns."""
    children: int = 0
    """Or: merge this many oldest pending nodes …"""
    over_tokens: int = 0
    """… once the pending nodes' summaries (estimated) exceed this many tokens (seed 002)."""

    def take(self, pending: Sequence[Node], estimate: Callable[[Node], int]) -> int:
        """How many of the oldest ``pending`` nodes to consolidate now (0: none)."""
        if self.min_turns:
            total = 0
            for i, node in enumerate(pending):
                total += node.turn_count
                if total >= self.min_turns:
                    return i + 1
            return 0
        if len(pending) >= self.children and sum(estimate(n) for n in pending) > self.over_tokens:
            return self.children
        return 0


@dataclass(frozen=True, slots=True)
class Plan:
    """How a configuration shapes the tree."""

    segmenter: Segmenter
    """Level-1 rule."""
    levels: tuple[LevelRule, ...]
    """Rules for levels 2, 3, …"""


def plan_for(config: Config) -> Plan:
    """The segmenter and consolidation rules a configuration asks for.

    ``pyramid``: fixed segments of ``micro_chunk_size`` turns, then mini and macro
    consolidations of at least ``mini_chunk_size`` / ``macro_chunk_size`` turns.
    ``topics``: topic segments, then bulks of ``bulk_merge_size`` topics once the
    topics' summaries exceed the historical-topic share of the context budget.
    ``custom``: the configured ``segmenter`` with mini and macro levels.
    """
    p, c = config.pyramid, config.context
    if p.preset == "topics" or (p.preset == "custom" and p.segmenter == "topic"):
        current = c.current_share * c.default_budget
        segmenter: Segmenter = TopicSegmenter(
            p.boundary_phrases,
            timedelta(minutes=p.silence_minutes),
            max(1, int(p.topic_token_threshold * current)),
            similarity=p.subject_change_similarity,
        )
    elif p.preset == "custom" and p.segmenter == "user_turn":
        segmenter = UserTurnSegmenter()
    else:
        segmenter = FixedSegmenter(p.micro_chunk_size)
    if p.preset == "topics":
        levels: tuple[LevelRule, ...] = (
            LevelRule("bulk", children=p.bulk_merge_size, over_tokens=int(c.history_share * c.default_budget)),
        )
    else:
        levels = (LevelRule("mini", min_turns=p.mini_chunk_size), LevelRule("macro", min_turns=p.macro_chunk_size))
    return Plan(segmenter, levels)


def make_summarizer(config: Config, tokenizer: Tokenizer, *, summarizer: Summarizer | None = None) -> Summarizer:
    """The summarizer ``config.pyramid.summarizer`` names, or ``summarizer`` if given.

    The ``llm`` strategy needs a model, which is never built from a string:
    pass ``summarizer=LLMSummarizer(model, tokenizer)``.

    Raises:
        ConfigError: ``llm`` is configured but no summarizer instance was passed.
    """
    if summarizer is not None:
        return summarizer
    name = config.pyramid.summarizer
    if name == "heuristic":
        return HeuristicSummarizer(tokenizer)
    if name == "extractive":
        return ExtractiveSummarizer(tokenizer)
    raise ConfigError(
        "pyramid.summarizer is 'llm': pass summarizer=LLMSummarizer(chat_model, tokenizer) "
        "(the model named by pyramid.summarization_model or llm.model)"
    )
