"""Pyramid metrics: tier sizes, seals, summary failures and summarization spend, as Prometheus text.

:class:`PyramidMetrics` reads a namespace's pyramid at one moment (seed 000's
tiers and its "savings must exceed cost"); :func:`pyramid_prometheus` renders
it: segments, turns and tokens per tier, segments sealed (its rate is the seal
rate), summaries failed now, and the summarizer's model calls and tokens per
level beside the prompt tokens the summaries save. The memory-item families
are :mod:`stratamem.items.metrics`; the text format's escaping is
:mod:`stratamem.formats.prometheus`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..formats.prometheus import escape_label, format_value
from ..records.nodes import TierStats
from .spend import SummarySpend

__all__ = ["PyramidMetrics", "pyramid_prometheus"]


@dataclass(frozen=True, slots=True)
class PyramidMetrics:
    """A namespace's pyramid at one moment: tier sizes, seals, failures and summarization spend."""

    namespace: str
    """The namespace."""
    tiers: tuple[TierStats, ...]
    """Per tier (``hot``, ``warm``, ``cold``, ``open``), as :meth:`Pyramid.stats` gives them."""
    failures: int
    """Nodes whose summary is ``failed`` now."""
    spend: SummarySpend
    """Model spend per level and the tokens saved."""

    @property
    def segments(self) -> int:
        """Segments sealed so far (every sealed segment is in one of the three tiers)."""
        return sum(t.nodes for t in self.tiers if t.tier != "open")

    @classmethod
    def of(cls, pyramid: Any) -> PyramidMetrics:
        """Read them from a :class:`~stratamem.pyramid.Pyramid`."""
        return cls(pyramid.namespace, tuple(pyramid.stats()), pyramid.failed_count(), pyramid.spend())

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "namespace": self.namespace,
            "tiers": [t.to_dict() for t in self.tiers],
            "segments": self.segments,
            "failures": self.failures,
            "spend": self.spend.to_dict(),
        }


def pyramid_prometheus(metrics: Iterable[PyramidMetrics]) -> str:
    """Render pyramid metrics of one or more namespaces in the Prometheus text format (0.0.4)."""
    metrics = list(metrics)
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        full = f"stratamem_pyramid_{name}"
        lines.extend([f"# HELP {full} {help_text}", f"# TYPE {full} {kind}"])
        lines.extend(f"{full}{{{labels}}} {format_value(float(v))}" for labels, v in samples)

    def ns(m: PyramidMetrics, **extra: Any) -> str:
        return ",".join(
            [f'namespace="{escape_label(m.namespace)}"'] + [f'{k}="{escape_label(str(v))}"' for k, v in extra.items()]
        )

    for field_name, help_text in (
        ("nodes", "Segments held in the tier (open: unsealed turns have none)."),
        ("turns", "Turns the tier covers."),
        ("tokens", "Exact tokens of those turns."),
        ("view_tokens", "Tokens of the tier's compact representation."),
    ):
        family(
            f"tier_{field_name}",
            "gauge",
            help_text,
            [(ns(m, tier=t.tier), getattr(t, field_name)) for m in metrics for t in m.tiers],
        )
    family(
        "segments_sealed_total",
        "counter",
        "Segments sealed (rate() of it is the seal rate).",
        [(ns(m), m.segments) for m in metrics],
    )
    family(
        "summary_failures",
        "gauge",
        "Nodes whose summary failed (a local fallback stands in).",
        [(ns(m), m.failures) for m in metrics],
    )
    for field_name, help_text in (
        ("calls", "Summarizer model calls."),
        ("input_tokens", "Summarizer input tokens (provider usage)."),
        ("output_tokens", "Summarizer output tokens (provider usage)."),
    ):
        family(
            f"summary_{field_name}_total",
            "counter",
            help_text,
            [(ns(m, level=s.level), getattr(s, field_name)) for m in metrics for s in m.spend.levels],
        )
    family(
        "summary_tokens_saved",
        "gauge",
        "Prompt tokens one prompt saves by showing summaries instead of turns.",
        [(ns(m), m.spend.tokens_saved) for m in metrics],
    )
    return "\n".join(lines) + "\n"
