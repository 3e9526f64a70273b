"""Memory-item metrics (seed 003): what is counted, and the Prometheus text export.

The counters of a namespace at one moment are a record,
:class:`~stratamem.records.ItemMetrics`; this module records a recall's latency
and renders metrics as Prometheus text.

Counters are persisted per namespace by the items store (in the same
transaction as the operation they count), so every process — the CLI, an MCP
server, the library — sees the same totals. Seed 003's metric names map to
the exported ones as follows:

==========================  ===============================================
seed 003                    exported (Prometheus text format 0.0.4)
==========================  ===============================================
``memory_hot_utilization``  ``stratamem_memory_hot_utilization`` (gauge, 0–1)
``memory_spill_count``      ``stratamem_memory_spills_total`` (operations) and
                            ``stratamem_memory_spilled_items_total``
``memory_recall_count``     ``stratamem_memory_recalls_total``
``memory_promotion_count``  ``stratamem_memory_promotions_total``
``memory_recall_latency_ms`` ``stratamem_memory_recall_latency_ms`` (histogram)
``memory_hit_rate``         ``stratamem_memory_hit_rate`` (gauge, 0–1) from
                            ``stratamem_memory_recall_hits_total``
==========================  ===============================================

Pyramid gauges and counters (seed 000's tiers and its "savings must exceed
cost") are rendered by :func:`pyramid_prometheus` from :class:`PyramidMetrics`:
segments, turns and tokens per tier, segments sealed (its rate is the seal
rate), summaries failed now, and the summarizer's model calls and tokens per
level beside the prompt tokens the summaries save.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..records.items import LATENCY_BUCKETS_MS, ItemMetrics, latency_bucket_name

if TYPE_CHECKING:
    from ..pyramid.spend import SummarySpend
    from ..records.nodes import TierStats

__all__ = ["PyramidMetrics", "latency_deltas", "pyramid_prometheus", "to_prometheus"]


def latency_deltas(ms: float) -> dict[str, float]:
    """Metric increments recording one recall that took ``ms`` milliseconds."""
    out = {"recall_latency_ms_sum": ms}
    for bound in LATENCY_BUCKETS_MS:
        if ms <= bound:
            out[latency_bucket_name(bound)] = 1.0
    return out


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(v: float) -> str:
    if math.isinf(v):
        return "+Inf"
    return f"{v:g}" if isinstance(v, float) and not v.is_integer() else str(int(v))


def to_prometheus(metrics: Iterable[ItemMetrics]) -> str:
    """Render metrics of one or more namespaces in the Prometheus text format (0.0.4).

    Each sample carries a ``namespace`` label; the output ends with a newline.
    """
    metrics = list(metrics)
    families: list[tuple[str, str, str, Any]] = [
        ("hot_utilization", "gauge", "Hot memory tokens over the hot token limit (0-1).",
         lambda m: m.hot_utilization),
        ("hot_tokens", "gauge", "Tokens held by hot memory items.", lambda m: m.hot_tokens),
        ("spills_total", "counter", "Spill operations.", lambda m: m.spills),
        ("spilled_items_total", "counter", "Items moved out of hot memory by spills.", lambda m: m.spilled_items),
        ("recalls_total", "counter", "Recall operations.", lambda m: m.recalls),
        ("recall_hits_total", "counter", "Recalls that returned at least one item.", lambda m: m.recall_hits),
        ("hit_rate", "gauge", "Share of recalls that returned at least one item (0-1).", lambda m: m.hit_rate),
        ("promotions_total", "counter", "Items promoted to hot memory.", lambda m: m.promotions),
        ("promotions_refused_total", "counter", "Promotions refused by hot capacity or the anti-thrash rules.",
         lambda m: m.promotions_refused),
    ]
    lines: list[str] = []
    for name, kind, help_text, get in families:
        full = f"stratamem_memory_{name}"
        lines += [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}"]
        lines += [f'{full}{{namespace="{_label(m.namespace)}"}} {_num(float(get(m)))}' for m in metrics]
    full = "stratamem_memory_recall_latency_ms"
    lines += [f"# HELP {full} Recall latency in milliseconds.", f"# TYPE {full} histogram"]
    for m in metrics:
        ns = _label(m.namespace)
        for bound, count in m.recall_latency_buckets:
            lines.append(f'{full}_bucket{{namespace="{ns}",le="{bound:g}"}} {count}')
        lines.append(f'{full}_bucket{{namespace="{ns}",le="+Inf"}} {m.recalls}')
        lines.append(f'{full}_sum{{namespace="{ns}"}} {_num(m.recall_latency_ms_sum)}')
        lines.append(f'{full}_count{{namespace="{ns}"}} {m.recalls}')
    return "\n".join(lines) + "\n"


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
        return {"namespace": self.namespace, "tiers": [t.to_dict() for t in self.tiers], "segments": self.segments,
                "failures": self.failures, "spend": self.spend.to_dict()}


def pyramid_prometheus(metrics: Iterable[PyramidMetrics]) -> str:
    """Render pyramid metrics of one or more namespaces in the Prometheus text format (0.0.4)."""
    metrics = list(metrics)
    lines: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        full = f"stratamem_pyramid_{name}"
        lines.extend([f"# HELP {full} {help_text}", f"# TYPE {full} {kind}"])
        lines.extend(f"{full}{{{labels}}} {_num(float(v))}" for labels, v in samples)

    def ns(m: PyramidMetrics, **extra: Any) -> str:
        return ",".join([f'namespace="{_label(m.namespace)}"'] + [f'{k}="{_label(str(v))}"' for k, v in extra.items()])

    for field_name, help_text in (("nodes", "Segments held in the tier (open: unsealed turns have none)."),
                                  ("turns", "Turns the tier covers."), ("tokens", "Exact tokens of those turns."),
                                  ("view_tokens", "Tokens of the tier's compact representation.")):
        family(f"tier_{field_name}", "gauge", help_text,
               [(ns(m, tier=t.tier), getattr(t, field_name)) for m in metrics for t in m.tiers])
    family("segments_sealed_total", "counter", "Segments sealed (rate() of it is the seal rate).",
           [(ns(m), m.segments) for m in metrics])
    family("summary_failures", "gauge", "Nodes whose summary failed (a local fallback stands in).",
           [(ns(m), m.failures) for m in metrics])
    for field_name, help_text in (("calls", "Summarizer model calls."),
                                  ("input_tokens", "Summarizer input tokens (provider usage)."),
                                  ("output_tokens", "Summarizer output tokens (provider usage).")):
        family(f"summary_{field_name}_total", "counter", help_text,
               [(ns(m, level=s.level), getattr(s, field_name)) for m in metrics for s in m.spend.levels])
    family("summary_tokens_saved", "gauge", "Prompt tokens one prompt saves by showing summaries instead of turns.",
           [(ns(m), m.spend.tokens_saved) for m in metrics])
    return "\n".join(lines) + "\n"
