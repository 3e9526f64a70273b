"""Memory-item metrics (seed 003): what is counted, and their Prometheus text export.

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

The pyramid's families are :mod:`stratamem.pyramid.metrics`; the text
format's escaping is :mod:`stratamem.formats.prometheus`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..formats.prometheus import escape_label, format_value
from ..records.items import LATENCY_BUCKETS_MS, ItemMetrics, latency_bucket_name

__all__ = ["latency_deltas", "to_prometheus"]


def latency_deltas(ms: float) -> dict[str, float]:
    """Metric increments recording one recall that took ``ms`` milliseconds."""
    out = {"recall_latency_ms_sum": ms}
    for bound in LATENCY_BUCKETS_MS:
        if ms <= bound:
            out[latency_bucket_name(bound)] = 1.0
    return out


def to_prometheus(metrics: Iterable[ItemMetrics]) -> str:
    """Render metrics of one or more namespaces in the Prometheus text format (0.0.4).

    Each sample carries a ``namespace`` label; the output ends with a newline.
    """
    metrics = list(metrics)
    families: list[tuple[str, str, str, Any]] = [
        ("hot_utilization", "gauge", "Hot memory tokens over the hot token limit (0-1).", lambda m: m.hot_utilization),
        ("hot_tokens", "gauge", "Tokens held by hot memory items.", lambda m: m.hot_tokens),
        ("spills_total", "counter", "Spill operations.", lambda m: m.spills),
        ("spilled_items_total", "counter", "Items moved out of hot memory by spills.", lambda m: m.spilled_items),
        ("recalls_total", "counter", "Recall operations.", lambda m: m.recalls),
        ("recall_hits_total", "counter", "Recalls that returned at least one item.", lambda m: m.recall_hits),
        ("hit_rate", "gauge", "Share of recalls that returned at least one item (0-1).", lambda m: m.hit_rate),
        ("promotions_total", "counter", "Items promoted to hot memory.", lambda m: m.promotions),
        (
            "promotions_refused_total",
            "counter",
            "Promotions refused by hot capacity or the anti-thrash rules.",
            lambda m: m.promotions_refused,
        ),
    ]
    lines: list[str] = []
    for name, kind, help_text, get in families:
        full = f"stratamem_memory_{name}"
        lines += [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}"]
        lines += [f'{full}{{namespace="{escape_label(m.namespace)}"}} {format_value(float(get(m)))}' for m in metrics]
    full = "stratamem_memory_recall_latency_ms"
    lines += [f"# HELP {full} Recall latency in milliseconds.", f"# TYPE {full} histogram"]
    for m in metrics:
        ns = escape_label(m.namespace)
        for bound, count in m.recall_latency_buckets:
            lines.append(f'{full}_bucket{{namespace="{ns}",le="{bound:g}"}} {count}')
        lines.append(f'{full}_bucket{{namespace="{ns}",le="+Inf"}} {m.recalls}')
        lines.append(f'{full}_sum{{namespace="{ns}"}} {format_value(m.recall_latency_ms_sum)}')
        lines.append(f'{full}_count{{namespace="{ns}"}} {m.recalls}')
    return "\n".join(lines) + "\n"
