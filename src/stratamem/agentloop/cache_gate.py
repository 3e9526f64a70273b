"""The agent loop's prompt-cache rules: when held-back results must go, and when a compaction pays.

:class:`_CacheGate` is the part of :class:`~stratamem.agentloop.Compactor` that
weighs the provider's prompt cache (``compaction.cache_aware``,
``pruning.epoch``; docs/agentloop.md, "Prompt caching in the loop"): it learns
how much a request grows per call, forces the results that pruning in epochs
held back once the budget needs them, and says why a compaction below
``hard_limit`` would cost more at cache prices than it saves.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from ..records.usage import cache_rules
from .pruning import PruneStats, prune_tool_results

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..config import CompactionConfig, PruningConfig
    from ..tokens import Tokenizer

__all__: list[str] = []


class _CacheGate:
    """The cache-aware gate and the epochs' forced pass (a part of ``Compactor``)."""

    if TYPE_CHECKING:  # set by Compactor.__init__; count, should_compact and hard_limit are Compactor's
        config: CompactionConfig
        pruning: PruningConfig
        tokenizer: Tokenizer
        provider: str
        agent_model: str
        _prev_after: int | None
        _growth: float | None

        def count(self, messages: Sequence[Mapping[str, Any]], *, system: str | None = None) -> int: ...

        def should_compact(self, messages: Sequence[Mapping[str, Any]], *, system: str | None = None) -> bool: ...

        @property
        def hard_limit(self) -> int: ...

    def _force_held_back(self, messages: list[dict[str, Any]], system: str | None, stats: PruneStats) -> PruneStats:
        """``stats`` plus a forced pruning pass when epochs held results back and the budget now needs them."""
        if not (
            self.pruning.epoch and self.should_compact(messages, system=system) and self._must_act(messages, system)
        ):
            return stats
        more = prune_tool_results(messages, self.pruning, tokenizer=self.tokenizer, system=system, force=True)
        return dataclasses.replace(
            stats,
            soft_trimmed=stats.soft_trimmed + more.soft_trimmed,
            hard_cleared=stats.hard_cleared + more.hard_cleared,
            chars_after=more.chars_after,
        )

    def _must_act(self, messages: list[dict[str, Any]], system: str | None) -> bool:
        """Over the threshold, whether something must go now: always, unless the cache-aware gate may
        still put a compaction off (the request is below :attr:`hard_limit`)."""
        if not self.config.cache_aware:
            return True
        return self.count(messages, system=system) + self.config.output_reserve > self.hard_limit

    def _observe_growth(self, now: int) -> None:
        """Learn how much the request grows from one call to the next (the cache-aware gate's estimate)."""
        if self._prev_after is not None and now > self._prev_after:
            step = now - self._prev_after
            self._growth = step if self._growth is None else (self._growth + step) / 2

    def _cache_reason(self, gain: int, after: int) -> str | None:
        """Why compacting now costs more than it saves at cache prices, or ``None``.

        A compaction rewrites the cached prefix: the next request writes its
        ``after`` tokens again (``write`` x the input price) where it would have
        read them (``read`` x). Over a run that grows ``g`` tokens a call, with
        compactions ``gain`` tokens apart, a call costs about
        ``write * after * g / gain + read * gain / 2`` beyond the request's own
        growth, least at ``gain = sqrt(2 * g * write * after / read)``. Below that,
        put it off (``hard_limit`` still forces it).
        """
        if self._growth is None or self._growth <= 0:
            return None
        rules = cache_rules(self.provider, self.agent_model)
        best = math.sqrt(2 * self._growth * rules.write * after / rules.read)
        if gain >= best:
            return None
        return (
            f"cache: would free about {gain:,} tokens; at cache prices compacting pays from about "
            f"{best:,.0f} (the request grows about {self._growth:,.0f} tokens a call)"
        )
