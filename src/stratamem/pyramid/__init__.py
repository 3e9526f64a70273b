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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .archive import Archive
    from .consolidate import Pyramid
    from .escalation import PromptView, ViewItem, prompt_view
    from .metrics import PyramidMetrics, pyramid_prometheus
    from .plan import LevelRule, Plan, make_summarizer, plan_for
    from .reads import Expansion, LevelStats
    from .retention import RetentionReport, apply_retention
    from .segment import FixedSegmenter, Seal, Segmenter, Split, TopicSegmenter, UserTurnSegmenter
    from .spend import LevelSpend, SummarySpend

# Imported on first use (PEP 562): reading the spend (``stratamem status``) does not import the
# whole pyramid, its summarizers and the event bus.
_LAZY = {
    "Archive": ".archive",
    "Pyramid": ".consolidate",
    "PromptView": ".escalation",
    "ViewItem": ".escalation",
    "prompt_view": ".escalation",
    "PyramidMetrics": ".metrics",
    "pyramid_prometheus": ".metrics",
    "LevelRule": ".plan",
    "Plan": ".plan",
    "make_summarizer": ".plan",
    "plan_for": ".plan",
    "Expansion": ".reads",
    "LevelStats": ".reads",
    "RetentionReport": ".retention",
    "apply_retention": ".retention",
    "FixedSegmenter": ".segment",
    "Seal": ".segment",
    "Segmenter": ".segment",
    "Split": ".segment",
    "TopicSegmenter": ".segment",
    "UserTurnSegmenter": ".segment",
    "LevelSpend": ".spend",
    "SummarySpend": ".spend",
}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module when first asked for."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
