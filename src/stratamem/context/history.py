"""Recalled history: memory items and recalled verbatim turns, de-duplicated against what is shown.

:func:`take_history` is the assembly step after the window. Memory items
come first (compact facts): hot ones, then recalled ones, each left out when
what is shown already says it. Recalled turns not in the window are then
packed compactly (:func:`~stratamem.retrieve.render.pack_turns`) into what is
left of the room; a packed turn that restates what is above it loses those
sentences or leaves (:func:`pack_checked`). Items the packed turns restate
leave after all, their tokens going back to what follows. Under ``recall``
(and for a query about the past) an item extracted from turns waits for the
packing: verbatim evidence comes first, and if its turns are shown it would
only restate them (seed 004).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..records import StoredTurn
from ..records.manifests import ContextItem, NearMiss
from ..retrieve.render import CompactRenderer, Packed, pack_turns
from ..tokens import Tokenizer
from .assembly import Allocation, Assembly
from .dedup import Shown, Stripped, fact_tokens
from .units import Candidates, ItemUnit, Recalled
from .window import Window

if TYPE_CHECKING:
    from .policy import Policy

__all__ = ["HISTORY_TITLE", "ITEMS_TITLE", "History", "pack_checked", "take_history"]

ITEMS_TITLE = "## Remembered facts"
HISTORY_TITLE = "## Earlier conversation (recalled, verbatim)"

MAX_UNPACKED_MISSES = 50
"""Recalled turns that did not fit are reported as near-misses only while fewer than this many misses are listed."""


@dataclass
class History:
    """What the recalled-history step placed."""

    kept_ids: set[int] = field(default_factory=set)
    """Ids of the recalled turns packed (shown whole or as an excerpt)."""
    excerpt_notes: dict[str, str] = field(default_factory=dict)
    """A note per turn shown as an excerpt, by manifest id (kept if the turn survives the final guard)."""


@dataclass
class _Screened:
    """Recalled turns that may be packed: not in the window, not restating what is shown."""

    turns: list[StoredTurn] = field(default_factory=list)
    scores: dict[int, Mapping[str, float]] = field(default_factory=dict)
    labels: dict[int, str] = field(default_factory=dict)


class _ItemSection:
    """The "Remembered facts" section as it fills: its lines, manifest entries and the items taken."""

    def __init__(self, asm: Assembly, full_turns: dict[int, str]) -> None:
        self.asm = asm
        self.header = asm.tokenizer.count(ITEMS_TITLE) + 2 + asm.opening()
        self.lines: list[str] = []
        self.entries: list[ContextItem] = []
        self.taken: list[ItemUnit] = []
        # Items among themselves; turns beat items, so they are checked against turns later.
        self.shown = Shown(enabled=asm.dedup)
        # Turns shown whole (window now, recalled turns once packed), by id: an item they restate goes.
        self.full_turns = full_turns

    def cost(self, it: ItemUnit) -> int:
        """Tokens ``it`` costs next: its line, and the section header if it is the first."""
        return self.asm.tokenizer.count(it.text) + 1 + (0 if self.lines else self.header)

    def take(self, it: ItemUnit, cap: int) -> int:
        """Place ``it`` if it is new and fits ``cap``; the tokens spent (0: left out, with a near-miss)."""
        asm = self.asm
        dup = (
            asm.shown.restates(it.text)
            or self.shown.restates(it.text)
            or _restated_by_turns(it, self.full_turns, asm.dedup)
        )
        if dup:
            asm.misses.append(NearMiss(it.id, "item", 0, "duplicate", it.score, duplicate_of=dup))
            return 0
        cost = self.cost(it)
        if cost > cap:
            asm.misses.append(NearMiss(it.id, "item", cost, "over_budget", it.score))
            return 0
        asm.left.left -= cost
        self.lines.append(it.text)
        self.entries.append(
            ContextItem(
                it.id, "item", cost, it.reason, tier=it.tier, format="text", score=it.score, turn_ids=it.turn_ids
            )
        )
        self.taken.append(it)
        self.shown.add(it.id, it.text)
        return cost

    def drop_restated(self) -> None:
        """Items taken before the packing lose to the verbatim turns that restate them.

        They leave, and their tokens go back to what follows (deferred items,
        summaries); the items that stay are re-counted (the header may move).
        """
        asm = self.asm
        keep = []
        for it in self.taken:
            dup = asm.shown.restates(it.text) or _restated_by_turns(it, self.full_turns, asm.dedup)
            if dup:
                asm.misses.append(NearMiss(it.id, "item", 0, "duplicate", it.score, duplicate_of=dup))
            else:
                keep.append(it)
        if len(keep) == len(self.taken):
            return
        asm.left.left += sum(i.tokens for i in self.entries)
        old = {i.id: i for i in self.entries}
        self.lines.clear()
        self.entries.clear()
        self.taken.clear()
        for it in keep:
            cost = self.cost(it)
            asm.left.left -= cost
            self.lines.append(it.text)
            self.entries.append(dataclasses.replace(old[it.id], tokens=cost))
            self.taken.append(it)

    def place(self) -> None:
        """Add the section, if any item was taken."""
        if self.lines:
            self.asm.place(ITEMS_TITLE + "\n" + "\n".join(self.lines), {i.id for i in self.entries})
            self.asm.items.extend(self.entries)


def take_history(asm: Assembly, cands: Candidates, alloc: Allocation, window: Window, policy: Policy) -> History:
    """Place memory items and recalled verbatim turns within the policy's recall room."""
    room = policy.recall_room(asm, alloc, cands, strict=policy.recall_first or window.past_query)
    section = _ItemSection(asm, {st.id: st.text for st in window.turns})
    defer = policy.defer_extracted_items or window.past_query
    in_window = window.ids
    deferred: list[ItemUnit] = []
    for it in cands.items:
        if it.turn_ids and set(it.turn_ids) <= in_window and not _new_value(it, section.full_turns):
            asm.misses.append(
                NearMiss(it.id, "item", 0, "restates_window_turns", it.score, duplicate_of=f"turn:{min(it.turn_ids)}")
            )
        elif defer and it.turn_ids:
            deferred.append(it)
        else:
            room -= section.take(it, room)
    screened = _screen(asm, cands.recalled, window, policy.reserved_turns(alloc, cands))
    header_cost = asm.tokenizer.count(HISTORY_TITLE) + 2 + (0 if section.lines else asm.opening())
    packed = None
    fresh = screened.turns
    if fresh and room > header_cost:
        packed, asm.shown, fresh = pack_checked(
            fresh, room - header_cost, asm.tokenizer, asm.query, screened.labels, asm.shown, asm.misses, screened.scores
        )
        if packed.turns:
            asm.left.left -= packed.tokens + header_cost
            section.full_turns.update((st.id, st.text) for st in packed.turns if st.id not in packed.excerpts)
        if asm.dedup and section.taken:
            section.drop_restated()
    for it in section.taken:
        asm.shown.add(it.id, it.text)
    kept_ids = {st.id for st in packed.turns} if packed else set()
    _report_unpacked(asm, fresh, kept_ids, packed, screened.scores)
    packed_texts = {st.id: st.text for st in packed.turns} if packed else {}
    for it in deferred:
        if set(it.turn_ids) <= kept_ids and not _new_value(it, packed_texts):
            asm.misses.append(
                NearMiss(it.id, "item", 0, "restates_included_turns", it.score, duplicate_of=f"turn:{min(it.turn_ids)}")
            )
        elif section.take(it, asm.left.left):
            asm.shown.add(it.id, it.text)
    section.place()
    return _place_turns(asm, packed, screened.scores)


def _screen(asm: Assembly, recalled: Sequence[Recalled], window: Window, reserved: set[int]) -> _Screened:
    """The recalled turns worth packing: not in the window (same id or same text), not restating what
    is shown, not among the ``reserved`` turns a later section shows (``pyramid``'s warm chunks)."""
    out = _Screened()
    in_window = window.ids
    window_texts = {st.text for st in window.turns}
    for r in recalled:
        if r.turn.id in in_window or r.turn.text in window_texts:
            twin = r.turn.id if r.turn.id in in_window else next(st.id for st in window.turns if st.text == r.turn.text)
            asm.misses.append(
                NearMiss(f"turn:{r.turn.id}", "turn", 0, "duplicate_of_window", r.score, duplicate_of=f"turn:{twin}")
            )
            continue
        dup = asm.shown.restates(r.turn.text)
        if dup:
            asm.misses.append(NearMiss(f"turn:{r.turn.id}", "turn", 0, "duplicate", r.score, duplicate_of=dup))
            continue
        if r.turn.id in reserved:
            asm.misses.append(NearMiss(f"turn:{r.turn.id}", "turn", 0, "in_warm_chunk", r.score))
            continue
        out.turns.append(r.turn)
        out.scores[r.turn.id] = r.score
        if r.label:
            out.labels[r.turn.id] = r.label
    return out


def _report_unpacked(
    asm: Assembly,
    fresh: Sequence[StoredTurn],
    kept_ids: set[int],
    packed: Packed | None,
    scores: Mapping[int, Mapping[str, float]],
) -> None:
    """Near-misses for the candidates the packing left out (their packed cost when it was counted)."""
    line_cost = packed.costs if packed else {}
    for st in fresh:
        if st.id not in kept_ids and len(asm.misses) < MAX_UNPACKED_MISSES:
            cost = line_cost.get(st.id)
            asm.misses.append(
                NearMiss(
                    f"turn:{st.id}",
                    "turn",
                    asm.tokenizer.count(st.text) if cost is None else cost,
                    "over_budget",
                    scores[st.id],
                )
            )


def _place_turns(asm: Assembly, packed: Packed | None, scores: Mapping[int, Mapping[str, float]]) -> History:
    """Add the recalled-turns section and its manifest entries (a turn's cost is its line as packed)."""
    if not packed or not packed.turns:
        return History()
    asm.place(f"{HISTORY_TITLE}\n{packed.text}", {f"turn:{st.id}" for st in packed.turns})
    asm.items.extend(
        ContextItem(
            f"turn:{st.id}",
            "turn",
            packed.costs[st.id],
            "recalled",
            format="excerpt" if st.id in packed.excerpts else "text",
            score=scores[st.id],
            turn_ids=(st.id,),
        )
        for st in sorted(packed.turns, key=lambda t: t.id)
    )
    notes = {
        f"turn:{tid}": f"turn:{tid} shown as an excerpt: {ex.tokens} of {ex.total_tokens} tokens "
        f"(characters {ex.start}–{ex.end}; expand the turn for the full text)"
        for tid, ex in sorted(packed.excerpts.items())
    }
    return History({st.id for st in packed.turns}, notes)


def _new_value(it: ItemUnit, texts: Mapping[int, str]) -> bool:
    """The item holds a number none of its source turns (those in ``texts``) says: a corrected or newer value."""
    said = set().union(*(fact_tokens(texts[t]) for t in it.turn_ids if t in texts))
    return any(any(c.isdigit() for c in t) and t not in said for t in fact_tokens(it.text))


def _restated_by_turns(it: ItemUnit, full_turns: Mapping[int, str], dedup: bool) -> str | None:
    """``turn:<id>`` when the item's source turns are all shown whole and hold every number it has.

    An item extracted from shown turns only restates them, unless it carries a
    value they lack (a corrected or newer figure): then it stays.
    """
    if not dedup or not it.turn_ids or not all(t in full_turns for t in it.turn_ids):
        return None
    return None if _new_value(it, full_turns) else f"turn:{min(it.turn_ids)}"


def pack_checked(
    fresh: list[StoredTurn],
    cap: int,
    tokenizer: Tokenizer,
    query: str | None,
    labels: Mapping[int, str],
    shown: Shown,
    misses: list[NearMiss],
    score_of: Mapping[int, Mapping[str, float]],
) -> tuple[Packed, Shown, list[StoredTurn]]:
    """Pack recalled turns so that none repeats a sentence shown before it.

    Packed turns are checked best ranked first against what is shown (fixed
    blocks, window) and the turns above them: a turn that only restates them
    leaves, one that partly does loses those sentences (plain-text turns, an
    excerpt being cut again from the shorter text; a turn of content blocks,
    e.g. a tool result, stays whole or leaves). The freed room is packed
    again, a few rounds at most; the last round packs only turns already checked.

    Returns:
        ``(packed, shown with the packed turns registered, the candidates left)``.
    """
    checked: list[StoredTurn] | None = None
    # A strip's result depends only on the registry and the text, and every round starts from
    # ``shown`` and mostly registers what the round before did: a registry is named by the
    # sequence of its additions (an interned id), and a text stripped against a registry seen
    # in an earlier round is not stripped again (issue 28: 4 rounds re-stripped ~60 turns each).
    states: dict[tuple[int, str, str], int] = {}
    cuts: dict[tuple[int, str], Stripped] = {}
    for attempt in range(4):
        last = attempt == 3
        packed = pack_turns(
            checked if last and checked is not None else fresh,
            cap,
            tokenizer,
            CompactRenderer(),
            query=query,
            labels=labels,
        )
        trial = shown.copy()
        if not shown.enabled:
            return packed, trial, fresh
        replace: dict[int, StoredTurn | None] = {}
        ok: list[StoredTurn] = []
        state = 0
        for st in packed.turns:
            text = packed.texts.get(st.id, st.text)
            excerpted = st.id in packed.excerpts
            editable = isinstance(st.turn.content, str) and st.role != "tool"
            asked = st.text if editable else text
            cut = cuts.get((state, asked))
            if cut is None:
                cut = cuts[state, asked] = trial.strip(asked)
            if cut.removed and not cut.facts_left:
                misses.append(
                    NearMiss(
                        f"turn:{st.id}",
                        "turn",
                        0,
                        "duplicate",
                        score_of.get(st.id, {}),
                        duplicate_of=cut.duplicate_of[0] if cut.duplicate_of else f"turn:{st.id}",
                    )
                )
                replace[st.id] = None
                continue
            if cut.removed and editable:
                st = dataclasses.replace(st, turn=dataclasses.replace(st.turn, content=cut.text))
                replace[st.id] = st
                # An excerpt is cut again from the shorter text by the next packing
                # (and checked then); until then what is shown is the old excerpt.
                if not excerpted:
                    text = f"{labels[st.id]} {cut.text}" if st.id in labels else cut.text
            trial.add(f"turn:{st.id}", text)
            state = states.setdefault((state, f"turn:{st.id}", text), len(states) + 1)
            ok.append(st)
        if not replace:
            return packed, trial, fresh
        fresh = [kept for kept in (replace.get(t.id, t) for t in fresh) if kept is not None]
        if last:
            # This round's own repeats leave too: pack only the turns that passed, as cut
            # (a subset of what just fitted, so nothing new comes in unchecked).
            packed = pack_turns(ok, cap, tokenizer, CompactRenderer(), query=query, labels=labels)
            return packed, trial, fresh
        checked = ok
    raise AssertionError("unreachable")
