"""Where a compaction now cuts: the messages that leave, the window that stays, the pinned turns.

:class:`_CutPlanning` is the part of :class:`~stratamem.agentloop.Compactor` that
turns the cut rules of :mod:`stratamem.agentloop.cut` into a plan for one
compaction (:class:`_Plan`): the cut at a real user turn, the recent window
kept, the newest turn's oldest tool steps moved out when it alone does not fit
(:class:`~stratamem.errors.BudgetError` when even its request and newest step
do not), the estimate of the request after it (the minimum-gain rule reads
it), and the whole turns a ``compaction.before`` handler pinned.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import CompactionConfig
from ..errors import BudgetError, ValidationError
from ..tokens import Calibration, Tokenizer, count_message
from .checkpoint import ACK_TEXT, files_section, track_files
from .cut import find_cut_point, holds_decision, is_synthetic, real_user_indices, tool_steps

if TYPE_CHECKING:
    from ..records.conversations import ConversationState

__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class _Plan:
    """Where a compaction would cut (see :meth:`Compactor._plan`)."""

    starts: list[int]
    cut: int
    old: list[int]
    kept_tail: list[int]
    split: bool
    estimate_after: int


class _CutPlanning:
    """Planning one compaction's cut and what it keeps (a part of ``Compactor``)."""

    if TYPE_CHECKING:  # set by Compactor.__init__; count is Compactor's
        config: CompactionConfig
        tokenizer: Tokenizer
        calibration: Calibration
        agent_model: str
        _state: ConversationState

        def count(self, messages: Sequence[Mapping[str, Any]], *, system: str | None = None) -> int: ...

    def _plan(self, messages: Sequence[Mapping[str, Any]], system: str | None) -> _Plan | None:
        """Where a compaction now would cut and what it would keep; ``None`` if nothing can go.

        Raises:
            BudgetError: The latest request with its newest step does not fit.
        """
        before = self.count(messages, system=system)
        budget = self.config.threshold - self.config.output_reserve
        starts = real_user_indices(messages)
        cut = find_cut_point(messages, self._keep_recent(messages, starts), self.tokenizer)
        old = [i for i in range(cut) if not self._kept_always(messages[i])]
        if not starts or (not old and before <= budget):
            return None
        read, modified = track_files([messages[i] for i in old], self._state.files_read, self._state.files_modified)
        reserve = self._prefix_estimate(read, modified)
        first = list(old)
        kept_tail, split = self._fit_newest_turn(messages, cut, starts[-1], old, budget, reserve, system)
        slack = int(self.config.min_gain_ratio * self.config.threshold)
        if split and slack:
            # The newest turn had to be cut into anyway: with the minimum-gain rule on, cut
            # that much deeper, so the request has room to grow before the next compaction
            # (hysteresis); if that cannot fit, the cut at the budget stands.
            try:
                trial = list(first)
                deeper = self._fit_newest_turn(messages, cut, starts[-1], trial, budget - slack, reserve, system)
                kept_tail, split = deeper
                old[:] = trial
            except BudgetError:
                pass
        head = [m for i, m in enumerate(messages[:cut]) if self._kept_always(m) and not is_synthetic(m)]
        after = self.count(head + [messages[i] for i in kept_tail], system=system) + reserve
        return _Plan(starts, cut, old, kept_tail, split, after)

    def _keep_recent(self, messages: Sequence[Mapping[str, Any]], starts: list[int]) -> int:
        """The recent window in tokens: ``keep_recent_tokens``, grown to hold the last
        ``keep_recent_turns`` user turns whole (seed 001 phase 4), at most twice the setting and
        what the threshold leaves after the checkpoint and the output reserve."""
        cfg = self.config
        base = cfg.keep_recent_tokens
        if cfg.keep_recent_turns <= 0 or not starts:
            return base
        first = starts[-min(cfg.keep_recent_turns, len(starts))]
        need = sum(count_message(m, self.tokenizer) for m in messages[first:])
        room = cfg.threshold - cfg.checkpoint_max_tokens - cfg.output_reserve
        return max(base, min(need, 2 * base, room))

    def _decision_turns(
        self, messages: Sequence[Mapping[str, Any]], old: list[int], starts: list[int], room: int
    ) -> set[int]:
        """Whole old turns holding a decision, newest first, within ``retain_decisions_tokens`` and ``room``
        (seed 001 phase 4: decisions are kept verbatim longer than the rest)."""
        budget = min(self.config.retain_decisions_tokens, room)
        if budget <= 0:
            return set()
        old_set = set(old)
        bounds = sorted(set([0] + starts + [len(messages)]))
        kept: set[int] = set()
        for a, b in reversed(list(zip(bounds, bounds[1:], strict=False))):
            turn = [i for i in range(a, b) if i in old_set]
            if not turn or len(turn) < sum(1 for i in range(a, b) if not self._kept_always(messages[i])):
                continue  # only turns that leave whole
            if not any(holds_decision(messages[i]) for i in turn):
                continue
            cost = sum(count_message(messages[i], self.tokenizer) for i in turn)
            if cost <= budget:
                kept.update(turn)
                budget -= cost
        return kept

    def _kept_always(self, message: Mapping[str, Any]) -> bool:
        """System messages stay; compaction's own messages are replaced, never summarized."""
        return message.get("role") in ("system", "developer") or is_synthetic(message)

    def _prefix_estimate(self, read: Sequence[str], modified: Sequence[str]) -> int:
        files = files_section(read, modified)
        body = self.config.checkpoint_max_tokens + self.tokenizer.count(files) + 64
        return self.calibration.adjust(
            self.agent_model, body + count_message({"role": "assistant", "content": ACK_TEXT}, self.tokenizer)
        )

    def _fit_newest_turn(
        self,
        messages: Sequence[Mapping[str, Any]],
        cut: int,
        last_start: int,
        old: list[int],
        budget: int,
        reserve: int,
        system: str | None,
    ) -> tuple[list[int], bool]:
        """Indices kept after the prefix; moves old steps of the newest turn into ``old`` if needed."""
        tail = list(range(cut, len(messages)))
        head = [m for i, m in enumerate(messages[:cut]) if self._kept_always(m) and not is_synthetic(m)]

        def fits(idx: list[int]) -> bool:
            return self.count(head + [messages[i] for i in idx], system=system) + reserve <= budget

        if fits(tail):
            return tail, False
        old.extend(i for i in range(cut, last_start) if not self._kept_always(messages[i]))
        steps = tool_steps(messages, last_start + 1, len(messages))
        if not steps and fits([last_start]):
            # The newest turn is the request alone (no step yet): it is all that must stay.
            old.sort()
            return [last_start], cut < last_start
        for k in range(len(steps)):
            keep = [last_start] + [i for a, b in steps[k:] for i in range(a, b)]
            if fits(keep):
                old.extend(i for a, b in steps[:k] for i in range(a, b))
                old.sort()
                return keep, k > 0 or cut < last_start
        need = (
            self.count(
                head + [messages[last_start]] + [messages[i] for i in range(*steps[-1])]
                if steps
                else head + [messages[last_start]],
                system=system,
            )
            + reserve
        )
        raise BudgetError(
            f"the latest user request and its newest tool step need {need:,} tokens with the "
            f"checkpoint; the budget is {budget:,} (threshold - output_reserve). Prune tool "
            f"output or raise the threshold"
        )

    def _pinned(
        self, messages: Sequence[Mapping[str, Any]], answers: list[Any], old: list[int], starts: list[int]
    ) -> set[int]:
        """Whole turns holding the indices handlers returned (only turns that were going to leave)."""
        wanted: set[int] = set()
        for answer in answers:
            if answer is None:
                continue
            if isinstance(answer, int) or not isinstance(answer, Iterable):
                raise ValidationError("a compaction.before handler must return None or message indices")
            wanted.update(int(i) for i in answer)
        if not wanted:
            return set()
        old_set = set(old)
        bounds = sorted(set([0] + starts + [len(messages)]))
        pinned: set[int] = set()
        for a, b in zip(bounds, bounds[1:], strict=False):
            turn = set(range(a, b))
            if turn & wanted and turn <= old_set | {i for i in turn if self._kept_always(messages[i])}:
                pinned |= turn & old_set
        return pinned
