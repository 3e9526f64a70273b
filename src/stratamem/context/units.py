"""What competes for a place in a prompt: the candidates a policy gathers and the assembly places.

Each kind of candidate is one record: a :class:`FixedBlock` (instructions,
working state, checkpoint), a :class:`Recalled` turn, a :class:`SummaryUnit`
(a pyramid node, expandable to its turns) and an :class:`ItemUnit` (a memory
item). :class:`Candidates` holds one context's worth of them, in the order
each section will consider them; a policy's ``gather``
(:mod:`stratamem.context.policies`) produces it, :func:`stratamem.context.assemble.assemble`
consumes it. Records, no I/O (a summary's ``expand`` is called only when it wins a slot).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..records import StoredTurn

__all__ = ["Candidates", "FixedBlock", "ItemUnit", "Recalled", "SummaryUnit"]


@dataclass(frozen=True, slots=True)
class FixedBlock:
    """A block included whole when it fits: instructions, working state, checkpoint."""

    id: str
    """Item id, e.g. ``instructions``, ``state``, ``checkpoint:s1``."""
    kind: str
    """``instructions``, ``state`` or ``checkpoint``."""
    title: str
    """Section header, e.g. ``## Working state``."""
    text: str
    """Body."""
    format: str = "text"
    """``text``, ``toon`` or ``json``."""
    reason: str = "always_included"
    """Why it is there."""
    fit: Callable[[int], FixedBlock] | None = None
    """A block that can shrink (the working state): the block re-rendered with a body of at most
    that many tokens, saying what it left out; raises :class:`~stratamem.errors.BudgetError` when
    nothing useful fits. Without it the block is shown whole or not at all."""


@dataclass(frozen=True, slots=True)
class Recalled:
    """A recalled turn with its score breakdown."""

    turn: StoredTurn
    """The verbatim turn."""
    score: Mapping[str, float] = field(default_factory=dict)
    """Per-signal scores and ``fused``."""
    label: str | None = None
    """Shown before the turn's text, e.g. ``(newer)`` (:mod:`stratamem.retrieve.updates`)."""


@dataclass(frozen=True, slots=True)
class SummaryUnit:
    """A summary of older history (a pyramid node)."""

    id: str
    """Item id, e.g. ``node:12``."""
    kind: str
    """``segment`` or ``consolidation``."""
    text: str
    """The summary line as it will be shown."""
    turn_ids: tuple[int, ...]
    """Turns it covers."""
    tier: str | None = None
    """``hot``, ``warm`` or ``cold``."""
    score: Mapping[str, float] = field(default_factory=dict)
    """Score breakdown."""
    expand: Callable[[], Sequence[StoredTurn]] | None = None
    """Fetches its full turns (warm CTF or cold archive); called only when the unit
    wins a slot and ``expanded_tokens`` fits what is left."""
    expanded_tokens: int = 0
    """Tokens of the covered turns (an upper bound of their packed rendering)."""
    expand_only: bool = False
    """No summary exists yet (a hot segment): shown expanded, else degraded (:attr:`excerpt_chars`,
    :attr:`summarize`), never as a placeholder."""
    excerpt_chars: int = 0
    """``expand_only``: when the whole turns do not fit, each is cut at this many characters with a
    marker (seed 002's escalation step 1); 0: no excerpt."""
    summarize: Callable[[], str] | None = None
    """``expand_only``: a summary line made on demand from the turns (local, not stored), for when
    not even the excerpt fits (seed 002's escalation step 2)."""


@dataclass(frozen=True, slots=True)
class ItemUnit:
    """A long-term memory item: hot ones are kept in the prompt, others recalled."""

    id: str
    """Item id, e.g. ``item:7``."""
    text: str
    """The line as shown, e.g. ``- (decision) Use PostgreSQL for orders``."""
    reason: str
    """``hot_item`` or ``recalled_item``."""
    tier: str
    """``hot``, ``warm`` or ``cold``."""
    turn_ids: tuple[int, ...] = ()
    """Provenance turns (empty for items added through the API)."""
    score: Mapping[str, float] = field(default_factory=dict)
    """Score breakdown."""


@dataclass(frozen=True, slots=True)
class Candidates:
    """Everything one context may show, gathered for one query, each section best first."""

    fixed: Sequence[FixedBlock] = ()
    """Blocks included whole when they fit, in order."""
    recent: Iterable[StoredTurn] = ()
    """The current session's turns, newest first (read lazily: the window stops early)."""
    recalled: Sequence[Recalled] = ()
    """Older turns, best first."""
    summaries: Sequence[SummaryUnit] = ()
    """Summaries, best first (``topics``: topic summaries, newest first; ``pyramid``: the warm chunks)."""
    bulks: Sequence[SummaryUnit] = ()
    """``topics``: bulk summaries, newest first; ``pyramid``: macro summaries; else empty."""
    items: Sequence[ItemUnit] = ()
    """Memory items, hot ones first, then recalled ones best first."""
    notes: Sequence[str] = ()
    """Degradations met while gathering (e.g. recall without an embedder), for the manifest."""
