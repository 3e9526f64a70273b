"""The pyramid: turns sealed into segments, consolidated into summaries, held in tiers.

:class:`Pyramid` (:mod:`~stratamem.pyramid.consolidate`) seals and
consolidates one namespace, summarizes its nodes
(:mod:`~stratamem.pyramid.summaries`) and reads its tree back
(:mod:`~stratamem.pyramid.reads`) following the configuration's plan
(:mod:`~stratamem.pyramid.plan`); its parts are the
segmenters (:mod:`~stratamem.pyramid.segment`), the tier rules and warm
encoding (:mod:`~stratamem.pyramid.tiers`), the zstd archive of cold turns
(:mod:`~stratamem.pyramid.archive`), retention
(:mod:`~stratamem.pyramid.retention`), seed 002's prompt view
(:mod:`~stratamem.pyramid.escalation`), the summarization spend
(:mod:`~stratamem.pyramid.spend`) and its Prometheus metrics
(:mod:`~stratamem.pyramid.metrics`). The nodes it stores are records
(:class:`~stratamem.records.Node`).
"""

from __future__ import annotations

from .archive import Archive
from .consolidate import Pyramid
from .escalation import PromptView, ViewItem, prompt_view
from .metrics import PyramidMetrics, pyramid_prometheus
from .plan import LevelRule, Plan, make_summarizer, plan_for
from .reads import Expansion, LevelStats
from .retention import RetentionReport, apply_retention
from .segment import FixedSegmenter, Seal, Segmenter, Split, TopicSegmenter, UserTurnSegmenter
from .spend import LevelSpend, SummarySpend

__all__ = [
    "Archive",
    "Expansion",
    "FixedSegmenter",
    "LevelRule",
    "LevelSpend",
    "LevelStats",
    "Plan",
    "PromptView",
    "Pyramid",
    "PyramidMetrics",
    "RetentionReport",
    "Seal",
    "Segmenter",
    "Split",
    "SummarySpend",
    "TopicSegmenter",
    "UserTurnSegmenter",
    "ViewItem",
    "apply_retention",
    "make_summarizer",
    "plan_for",
    "prompt_view",
    "pyramid_prometheus",
]
