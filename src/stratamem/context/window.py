"""The recent window: the current session's newest turns, and how much of its share it keeps.

:func:`take_window` fills the window's share from the newest turn back
(contiguous), snaps it to a valid request (:func:`~stratamem.context.render.snap_window`)
and registers it as shown. Under ``hybrid`` the share is sized by how well the
query matches the window (:func:`window_fraction`): a question about the past
keeps only a small window (:func:`shrink_window`) and recalled history then
draws first. A follow-up query (:func:`is_follow_up`) recalls nothing and keeps
the whole window.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..records import StoredTurn
from ..records.blocks import ToolResultBlock
from ..records.manifests import NearMiss
from ..retrieve.lexical import analyze
from .assembly import Allocation, Assembly, Budget
from .render import opens_window, snap_window, stub_tokens, unit_cost
from .step_cut import is_cut
from .units import Recalled

if TYPE_CHECKING:
    from .policy import Policy

__all__ = [
    "WINDOW_DROP",
    "WINDOW_FLOOR",
    "WINDOW_KEEP",
    "WINDOW_RANKS",
    "Window",
    "is_follow_up",
    "shrink_window",
    "take_window",
    "window_fraction",
]


WINDOW_RANKS = 10
"""Rank (0-based, by fused score among the recalled turns) at which a window turn no longer
counts as a match: the window match is ``1 - rank / WINDOW_RANKS`` of the best-ranked
turn inside the window (0 when none is recalled)."""
WINDOW_KEEP = 0.8
"""Window match at and above which the hybrid window keeps its whole share (a window
turn among the top 3 recalled)."""
WINDOW_DROP = 0.5
"""Window match at and below which the hybrid window shrinks to :data:`WINDOW_FLOOR` (no
window turn among the top 5 recalled)."""
WINDOW_FLOOR = 0.1
"""Fraction of its share a hybrid window keeps for a query about the past (the last
exchange or so stays for continuity)."""


_PAST_CUE = re.compile(
    r"\b(did|was|were|had|ago|last|previous(ly)?|earlier|before|remember|told|mentioned|used to|"
    r"first|when)\b",
    re.IGNORECASE,
)


_THREAD_CUE = re.compile(
    r"\b(it|that|this|these|those|them|above|again|more|less|shorter|longer|continue|go on|"
    r"next|then|instead|what about|how about|and)\b",
    re.IGNORECASE,
)


def is_follow_up(query: str) -> bool:
    """A short turn-of-the-conversation query: "go on", "make it shorter", "what about the second option?".

    Such a query has fewer than three content words, names nothing
    (no capitalised word after the first), has no past cue ("did", "last",
    "ago", "remember", …) and either no content word at all or a word that
    points at the thread ("it", "that", "again", "what about", …). Its words
    say little about which history it needs, so the window, where the thread
    is, keeps its share. "What is the vault code?" is not one.
    """
    words = query.split()
    if any(w[:1].isupper() for w in words[1:]) or _PAST_CUE.search(query):
        return False
    terms = analyze(query)
    return not terms or (len(terms) < 3 and bool(_THREAD_CUE.search(query)))


def window_fraction(query: str | None, recalled: Sequence[Recalled], window_ids: set[int]) -> tuple[float, float]:
    """How much of its share the hybrid window keeps, and the window match it was read from.

    The match is read from the rank of the best-ranked recalled turn that
    lies in the prospective window: 1 when the query's best evidence is in
    the window (a follow-up about the current thread), falling by
    ``1 / WINDOW_RANKS`` per rank, 0 when no window turn is among the top
    :data:`WINDOW_RANKS` (a question about the past). Ranks, not score
    ratios: with vectors every turn scores something, so the ratio of the
    window's best score to the overall best stayed above one half for most
    questions about the past, and the window kept a quarter of a 2,048-token
    budget on LoCoMo. No query, nothing recalled, or a follow-up
    (:func:`is_follow_up`) keeps the whole window.
    """
    if not query or not recalled or not window_ids or is_follow_up(query):
        return 1.0, 1.0
    scores = sorted((r.score.get("fused", 0.0) for r in recalled), reverse=True)
    if scores[0] <= 0:
        return 1.0, 1.0
    inside = max((r.score.get("fused", 0.0) for r in recalled if r.turn.id in window_ids), default=None)
    # Rank of the best window turn: how many recalled turns score strictly above it.
    rank = WINDOW_RANKS if inside is None else sum(1 for v in scores if v > inside)
    match = max(0.0, 1.0 - rank / WINDOW_RANKS)
    if match >= WINDOW_KEEP:
        return 1.0, match
    if match <= WINDOW_DROP:
        return WINDOW_FLOOR, match
    return WINDOW_FLOOR + (1 - WINDOW_FLOOR) * (match - WINDOW_DROP) / (WINDOW_KEEP - WINDOW_DROP), match


StepCutter = Callable[..., "Window"]
"""Cuts the newest step to a room (:func:`~stratamem.context.layout.newest_step`; passed in: layout imports us)."""


@dataclass
class Window:
    """The recent window as placed: its turns, oldest first, and what each costs."""

    turns: list[StoredTurn] = field(default_factory=list)
    """The window's turns, oldest first (snapped to a valid request)."""
    costs: dict[int, int] = field(default_factory=dict)
    """Tokens each turn costs, by turn id."""
    past_query: bool = False
    """The query is about older history (``hybrid`` shrank the window): recalled history draws first."""

    @property
    def ids(self) -> set[int]:
        """Ids of the window's turns."""
        return {st.id for st in self.turns}


def take_window(
    asm: Assembly,
    recent: Iterable[StoredTurn],
    alloc: Allocation,
    policy: Policy,
    recalled: Sequence[Recalled],
    cut_step: StepCutter | None = None,
) -> Window:
    """Fill the window's share from the newest turn back, contiguous; the policy may then shrink it.

    ``recent`` is read lazily, newest first: the first turn that does not fit
    ends the window (and is the one near-miss it reports).
    """
    window = Window()
    if alloc.current > 0:
        cap = Budget(alloc.tokens(alloc.current))
        room = cap.left
        it = iter(recent)
        for st in it:
            cost = unit_cost(st.turn, asm.fmt, asm.tokenizer)
            if not cap.take(cost):
                asm.misses.append(NearMiss(f"turn:{st.id}", "turn", cost, "over_budget"))
                if cut_step is not None and not any(opens_window(t.turn) for t in window.turns):
                    # The newest step does not fit whole: show it cut rather than drop it.
                    cut = _cut_step(asm, [*window.turns, st], it, room, cut_step)
                    if cut.turns:
                        asm.misses.pop()
                        window.turns, window.costs = cut.turns[::-1], cut.costs
                break
            window.turns.append(st)
            window.costs[st.id] = cost
        if window.turns and not any(is_cut(st) for st in window.turns):
            policy.size_window(asm, window, alloc, recalled)
        window.turns.reverse()
        window.turns = snap_window(window.turns, asm.fmt)
        used = sum(window.costs[st.id] for st in window.turns) + _stub(asm, window.turns)
        if used > room and cut_step is not None:
            # The stub an Anthropic window opening on a tool step needs did not fit: cut the step for it.
            cut = _cut_step(asm, window.turns[::-1], iter(()), room, cut_step)
            if cut.turns:
                window.turns, window.costs = cut.turns, cut.costs
                used = sum(window.costs[st.id] for st in window.turns) + _stub(asm, window.turns)
        while window.turns and used > room:
            # Still too large (no cutter, or nothing left to cut): give up turns, oldest first.
            window.turns = snap_window(window.turns[1:], asm.fmt)
            used = sum(window.costs[st.id] for st in window.turns) + _stub(asm, window.turns)
        asm.left.left -= used
    for st in window.turns:
        asm.shown.add(f"turn:{st.id}", st.text)
    return window


def _cut_step(
    asm: Assembly, read: list[StoredTurn], rest: Iterable[StoredTurn], room: int, newest_step: StepCutter
) -> Window:
    """The newest step, its long tool texts cut (:mod:`~stratamem.context.step_cut`), and the turns before it that fit.

    ``read`` is newest first; ``rest`` is read on back to the step's opening turn. Empty when
    the step cannot fit even cut, or when a cut would touch a person's words (a user turn that
    is not a tool result).
    """
    for st in rest:
        read.append(st)
        if opens_window(st.turn):
            break
    if not any(_is_result(st) or st.turn.tool_use_ids for st in read):
        # Only a tool step is cut: a long reply in a chat gives way to recall, as before (chats b@2048).
        return Window()
    turns = read[::-1]
    cut = newest_step(asm, turns, room, lambda st: st, lambda st: unit_cost(st.turn, asm.fmt, asm.tokenizer))
    spoken = [st for st in cut.turns if st.role == "user" and is_cut(st) and not _has_result(st)]
    return Window() if spoken else cut


def _stub(asm: Assembly, turns: Sequence[StoredTurn]) -> int:
    """Tokens of the :data:`~stratamem.context.render.STEP_STUB` the window opens with (Anthropic, no user turn first).

    Counted although sections, when there are any, take the stub's place: an upper bound, like every cost.
    """
    return stub_tokens(asm.tokenizer) if asm.fmt == "anthropic" and turns and turns[0].role != "user" else 0


def newest_step_size(turns: Sequence[StoredTurn]) -> int:
    """How many of ``turns`` (newest first) form a tool step still in progress: 0 when the newest is not a result.

    When the newest turn is a tool result, the model's next output answers it,
    so the turns back to the call that asked for it (the step's opening turn)
    must stay in the window, whatever the query.
    """
    if not turns or not _is_result(turns[0]):
        return 0
    for n, st in enumerate(turns, 1):
        if st.role == "assistant" and st.turn.tool_use_ids:
            return n
    return 0


def _is_result(st: StoredTurn) -> bool:
    return st.role == "tool" or _has_result(st)


def _has_result(st: StoredTurn) -> bool:
    return not isinstance(st.turn.content, str) and any(isinstance(b, ToolResultBlock) for b in st.turn.content)


def shrink_window(asm: Assembly, window: Window, alloc: Allocation, keep: float, match: float) -> None:
    """Keep the newest turns that fit ``keep`` of the window's share (``window.turns`` is newest first here).

    The turns let go are near-misses (``window_shrunk_for_recall``) and a note
    says why; recalled history then draws before summaries.
    """
    window.past_query = True
    # The newest tool step stays (it is what the model answers next); only older turns give way.
    n = newest_step_size(window.turns)
    room = int(alloc.after_fixed * alloc.current * keep) - sum(window.costs[st.id] for st in window.turns[:n])
    while n < len(window.turns) and window.costs[window.turns[n].id] <= room:
        room -= window.costs[window.turns[n].id]
        n += 1
    for st in window.turns[n:]:
        asm.misses.append(NearMiss(f"turn:{st.id}", "turn", window.costs.pop(st.id), "window_shrunk_for_recall"))
    window.turns = window.turns[:n]
    asm.notes.append(
        f"hybrid: window match {match:.2f} (1 - rank/{WINDOW_RANKS} of the best recalled turn "
        f"inside the window): window keeps {keep:.0%} of its share; recalled history draws first"
    )
