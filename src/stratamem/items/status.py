"""The suggestions of ``Items.status`` (seed 003): when to spill, recall or prune.

A pure function of the tiers' contents and the configuration, so the rules can
be read (and tested) apart from the store. :mod:`stratamem.items` gathers the
inputs and wraps the result in an :class:`~stratamem.records.items.ItemStatus`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..config import ItemsConfig
from ..records.items import MemoryItem, Suggestion

__all__ = ["SPILL_AT", "RECALL_BELOW", "suggest"]

SPILL_AT = 0.9
"""Suggest a spill when hot holds more than this share of its limit (seed 003: 90 %)."""

RECALL_BELOW = 0.5
"""Suggest promoting busy warm items only while hot holds less than this share."""


def suggest(
    config: ItemsConfig,
    hot: Sequence[MemoryItem],
    warm: Sequence[MemoryItem],
    cold_count: int,
    cold_in_prune_order: Callable[[], Sequence[MemoryItem]],
) -> list[Suggestion]:
    """Suggestions for one namespace.

    Args:
        config: Limits and thresholds.
        hot: Hot items in spill order (lowest relevance, then oldest, first).
        warm: Live warm items.
        cold_count: Number of cold items.
        cold_in_prune_order: Loads the cold items, least accessed and oldest first
            (called only when a prune is due, since it reads the whole cold tier).

    Returns:
        ``spill``, ``recall`` and ``prune`` suggestions, in that order, each when due.
    """
    out: list[Suggestion] = []
    limit = config.hot_token_limit
    hot_tokens = sum(i.tokens for i in hot)
    if limit and hot_tokens > SPILL_AT * limit:
        out.append(
            Suggestion(
                "spill",
                f"hot memory is at {100 * hot_tokens / limit:.0f}% of its {limit}-token limit",
                tuple(i.id for i in hot[: config.spill_count]),
            )
        )
    room = limit - hot_tokens
    fits = []
    for item in sorted(
        (i for i in warm if i.access_count > config.warm_access_threshold), key=lambda i: (-i.access_count, i.id)
    ):
        if item.tokens <= room:
            fits.append(item.id)
            room -= item.tokens
    if fits and hot_tokens < RECALL_BELOW * limit:
        out.append(
            Suggestion(
                "recall", f"{len(fits)} warm item(s) are accessed often and fit in hot: promote them", tuple(fits)
            )
        )
    if cold_count > config.max_cold_items:
        cold = cold_in_prune_order()
        # Superseded and rejected items go first: they are already out of recall.
        ordered = [i for i in cold if not i.live] + [i for i in cold if i.live]
        out.append(
            Suggestion(
                "prune",
                f"cold storage holds {cold_count} items, more than {config.max_cold_items}",
                tuple(i.id for i in ordered[: cold_count - config.max_cold_items]),
            )
        )
    return out
