"""The state of one context assembly, handed from step to step.

:func:`stratamem.context.assemble.assemble` runs the steps in order (fixed
blocks, recent window, recalled history, summaries, render); each reads and
extends one :class:`Assembly`: the tokens left, the sections placed so far,
the manifest entries and near-misses, the :class:`~stratamem.context.dedup.Shown`
registry and the notes. The policy's :class:`Allocation` says how the tokens
left after the fixed blocks are shared out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import BudgetError
from ..records.manifests import ContextItem, NearMiss
from ..text import check_budget, check_format
from ..tokens import MESSAGE_TOKENS, REPLY_TOKENS, Tokenizer
from .dedup import Shown

__all__ = ["Allocation", "Assembly", "Budget"]


@dataclass
class Budget:
    """Tokens left to spend; :meth:`take` spends only an amount that fits whole."""

    left: int
    """Tokens not spent yet."""

    def take(self, n: int) -> bool:
        """Spend ``n`` tokens if they fit; whether they did."""
        if n <= self.left:
            self.left -= n
            return True
        return False


@dataclass(frozen=True, slots=True)
class Allocation:
    """How a policy shares out what the fixed blocks leave (sections with nothing to show give theirs away)."""

    current: float
    """Share of the recent window."""
    history: float
    """Share of recalled history (memory items and verbatim turns; ``topics``: topic summaries;
    ``pyramid``: the warm chunks)."""
    bulk: float
    """Share of summaries (``topics``: bulk summaries; ``pyramid``: macro summaries)."""
    after_fixed: int
    """Tokens left after the fixed blocks: what the shares divide."""
    reserve: int = 0
    """Tokens recalled turns leave for the last section (``pyramid``: its macro summaries)."""

    def tokens(self, share: float) -> int:
        """``share`` of :attr:`after_fixed`, in whole tokens."""
        return int(self.after_fixed * share)


@dataclass
class Assembly:
    """One context being assembled: what is spent, placed, shown and left out so far.

    Sections are system text placed in order (fixed blocks, memory items,
    recalled turns, summaries); ``section_ids`` holds, in step with them, the
    manifest ids each one shows, so the final guard can keep the manifest true
    when it drops a section. ``shown`` registers everything shown in priority
    order (:mod:`stratamem.context.dedup`): a later unit loses what an earlier
    one already shows.
    """

    budget: int
    """The whole budget, as asked."""
    tokenizer: Tokenizer
    """Exact tokenizer the budget is counted in."""
    fmt: str
    """``openai``, ``anthropic`` or ``text``."""
    query: str | None
    """What the next call is about (recorded in the manifest)."""
    dedup: bool
    """Show one copy of each fact."""
    left: Budget
    """Tokens left for everything not placed yet."""
    shown: Shown
    """Everything shown so far, in priority order."""
    sections: list[str] = field(default_factory=list)
    """System-text sections placed, in order."""
    section_ids: list[set[str]] = field(default_factory=list)
    """Manifest item ids each section holds, in step with :attr:`sections`."""
    items: list[ContextItem] = field(default_factory=list)
    """Manifest entries, in manifest order (the window's are added when it is rendered)."""
    misses: list[NearMiss] = field(default_factory=list)
    """What was considered and left out, and why."""
    notes: list[str] = field(default_factory=list)
    """Notes the steps add (window sizing, expansion failures, excerpts)."""

    @classmethod
    def start(cls, budget: int, tokenizer: Tokenizer, fmt: str, query: str | None, dedup: bool) -> Assembly:
        """An empty assembly with the request overhead already spent.

        Raises:
            BudgetError: ``budget`` is not a positive integer or below the request overhead.
            ValidationError: Unknown ``fmt``.
        """
        check_budget(budget)
        check_format(fmt)
        overhead = 0 if fmt == "text" else REPLY_TOKENS
        if overhead > budget:
            raise BudgetError(f"budget {budget} is below the fixed request overhead ({overhead} tokens)")
        return cls(budget, tokenizer, fmt, query, dedup, Budget(budget - overhead), Shown(enabled=dedup))

    def opening(self) -> int:
        """What a section costs beyond its text for being the first: the system message's framing."""
        if self.sections or self.fmt == "text":
            return 0
        return MESSAGE_TOKENS

    def place(self, text: str, ids: set[str]) -> None:
        """Add a section (already paid for) and the manifest ids it shows."""
        self.sections.append(text)
        self.section_ids.append(ids)
