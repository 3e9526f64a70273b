"""The Prometheus text exposition format (0.0.4): label escaping and sample values.

What the item exporter (:func:`stratamem.items.metrics.to_prometheus`) and the
pyramid exporter (:func:`stratamem.pyramid.metrics.pyramid_prometheus`) share;
which families they export, and what they mean, is theirs.
"""

from __future__ import annotations

import math

__all__ = ["escape_label", "format_value"]


def escape_label(value: str) -> str:
    """A label value escaped for the text format (backslash, newline, double quote)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def format_value(v: float) -> str:
    """A sample value: ``+Inf``, an integer without a decimal point, else the shortest float form."""
    if math.isinf(v):
        return "+Inf"
    return f"{v:g}" if isinstance(v, float) and not v.is_integer() else str(int(v))
