"""The cache layout: a prompt whose first tokens stay the same from call to call.

Providers bill a prompt prefix they have seen recently at a fraction of the
input price (Anthropic reads 0.1x, OpenAI 0.1-0.5x), but only an *exact*
prefix. Today's assembly puts what it recalled for the query first, so every
call changes its first tokens. This step, shared by every policy, lays the
same kinds of material out in layers, the most stable first:

====  =====================  ===============================================================
L0    instructions           system prompts, project instruction files
L1    standing state         working state, hot memory items (oldest first), the checkpoint
L2    summary ledger         settled summaries before the window, oldest first (:mod:`.ledger`)
L3    anchored window        the session's turns from the anchor on (:mod:`.anchor`)
L4    per call               items, turns and summaries recalled for this message
====  =====================  ===============================================================

L0-L2 change only when what they show really changes (an instruction file,
a state edit, a promoted item, a compaction), or when the window's anchor
jumps; L3 grows by appending; L4 is placed last, after the newest message
(:mod:`.cache_render`). Everything is a function
of the stored data and the request, so every shell gets the same prompt.

A *conversational* message gets at most ``recall_share`` of the budget for L4,
which keeps the per-call part small. A *question* (:func:`is_question`: one
sentence ending with a question mark) is the one deviation: it is answered
from what the policy selects for it without the layout (the window as the
policy sizes it, recall first for a question about the past, ranked
summaries), placed after L0-L1, so recall gives nothing up; the next call
returns to the layout, and the provider still holds the prefix of the call
before the question.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..records import StoredTurn
from ..records.manifests import Context, ContextItem
from ..tokens import MESSAGE_TOKENS, Tokenizer
from .anchor import grid_points, jumped_at, run_start
from .assembly import Allocation, Assembly, Budget
from .cache_inputs import CacheInputs
from .cache_render import LEAD, RECALL_TITLE, Layers, finish_cached, stub_tokens
from .fixed import place_fixed
from .history import History, _ItemSection, take_history
from .ledger import LedgerEntry, select_ledger
from .render import opens_window, snap_step_window, unit_cost
from .step_cut import MIN_KEEP, cut_turn, fit_turn
from .summaries import take_summaries
from .units import Candidates, ItemUnit
from .window import Window, take_window

if TYPE_CHECKING:
    from .policy import Policy

__all__ = ["LEAD", "LEDGER_TITLE", "RECALL_TITLE", "Anchored", "assemble_cached", "is_question", "newest_step"]

LEDGER_TITLE = "## Summaries of older conversation (oldest first)"

_BREAK = re.compile(r"([.!?]+)\s+")
_ABBREVIATION = re.compile(r"[A-Z][a-z]{0,3}")  # "Dr.", "Mrs.", "St." do not end a sentence


def is_question(query: str | None) -> bool:
    """A query asked as one question: a single sentence ending with ``?``, at most 40 words.

    "When did Caroline go to the support group?" and "Would Caroline have
    Dr. Seuss books?" are questions; a conversational message ("Hey Mel! How
    have you been? I painted a lake last week.") is not.
    """
    if not query:
        return False
    text = query.strip()
    if not text.endswith("?") or len(text.split()) > 40:
        return False
    for m in _BREAK.finditer(text):
        word = text[: m.start()].rsplit(None, 1)[-1] if text[: m.start()].strip() else ""
        if not (m.group(1) == "." and _ABBREVIATION.fullmatch(word)):
            return False
    return True


@dataclasses.dataclass(frozen=True, slots=True)
class Anchored:
    """The anchored window: where it starts and when its start last moved."""

    window: Window
    """The window's turns, oldest first, and their costs."""
    anchor: int | None
    """Id of the window's first turn (``None``: no window)."""
    jumped_at: int | None
    """Id of the turn whose arrival moved the anchor there (``None``: no window)."""
    note: str | None = None
    """Why the window could not be anchored, if it could not."""
    ledger_before: int | None = None
    """Id of the turn before which the ledger's summaries lie (``None``: the anchor)."""
    ledger_as_of: int | None = None
    """Id of the turn as of which the ledger takes summaries (``None``: ``jumped_at``)."""


def _sizes(turns: Sequence, fmt: str) -> list[int]:
    """A turn's estimated cost in the window, from its stored count (a text line adds its stamp and name)."""
    extra = 10 if fmt == "text" else 2
    return [st.tokens + extra for st in turns]


def _cost(window: Sequence[StoredTurn], costs: dict[int, int], fmt: str, tokenizer: Tokenizer) -> int:
    """What ``window`` costs in a request: its turns, and the stub an Anthropic window opening on a tool step needs."""
    stub = stub_tokens(tokenizer) if fmt == "anthropic" and window and window[0].role != "user" else 0
    return sum(costs[st.id] for st in window) + stub


def anchor_window(
    asm: Assembly, inputs: CacheInputs, room: int, extra: Callable[[Sequence[StoredTurn]], int] | None = None
) -> Anchored:
    """The window of ``inputs.turns`` from the anchor on, within ``room`` (see :mod:`stratamem.context.anchor`).

    The window may open at a user turn or at the start of a tool step (an
    assistant turn that calls tools, its results after it;
    :func:`~stratamem.context.render.opens_window`), in every format. A tool
    result larger than ``inputs.cut_share`` of the room is shown cut to that
    share (head and tail, :mod:`stratamem.context.step_cut`), the same bytes on
    every call, so a tool loop's window holds several steps and grows by
    appending. The grid is laid on the turns' sizes as shown; the window found is
    then costed exactly, and if the estimate was low its start moves on to the
    next grid point. When no grid point fits (a turn larger than half the room
    lies between the last grid point and the newest turn), the window is the
    newest turns that fit from the oldest opening turn that allows it: that
    start, too, only moves forward as turns arrive. When even the newest step
    does not fit, its results are cut further, to what the room leaves after the
    call (:func:`newest_step`): the model always sees its newest step, unless
    the call itself or a user's message is larger than the room.

    ``extra(window)``: what else the window carries (the recall blocks that stay after its
    requests' words), counted when a grid point's window is checked against the room.
    """
    turns = list(inputs.turns)
    if room <= 0 or not turns:
        return Anchored(Window(), None, None)
    cap = max(1, int(room * inputs.cut_share))
    # The agent's own work (its calls and the tools' results) is shown cut to the cap; a person's words whole.
    sizes = [
        min(size, cap) if _agent_work(st) else size for st, size in zip(turns, _sizes(turns, asm.fmt), strict=True)
    ]
    step = max(1, int(room * inputs.anchor_step))
    known: dict[int, int] = {}
    forms: dict[int, StoredTurn] = {}

    def full_cost(st: StoredTurn) -> int:
        return unit_cost(st.turn, asm.fmt, asm.tokenizer)

    def form(st: StoredTurn) -> StoredTurn:
        # The turn as the window shows it: a tool turn over the cap cut to it (itself if it cannot be).
        if st.id not in forms:
            forms[st.id] = (fit_turn(st, cap, full_cost) or st) if _agent_work(st) else st
        return forms[st.id]

    def cost_of(st: StoredTurn) -> int:
        if st.id not in known:
            known[st.id] = full_cost(form(st))
        return known[st.id]

    def shown(window: Sequence[StoredTurn]) -> Window:
        return Window([form(st) for st in window], {st.id: cost_of(st) for st in window})

    def opens(i: int) -> bool:
        return opens_window(turns[i].turn)

    start = run_start(sizes, room, step, opens=opens, max_units=inputs.max_turns)
    later = [p for p in grid_points(sizes, step, opens) if start is not None and p > start]
    while start is not None:
        window = snap_step_window(turns[start:])
        costs = {st.id: cost_of(st) for st in window}
        more = extra(window) if extra is not None else 0
        if window and _cost(window, costs, asm.fmt, asm.tokenizer) + more <= room:
            jump = jumped_at(sizes, start, room, step, opens=opens, max_units=inputs.max_turns)
            # The ledger moves at every ledger_batch-th grid point only: at the grid point of the
            # last multiple, as of the jump that brought the window's start there.
            points = grid_points(sizes, step, opens)
            batch = points[points.index(start) // inputs.ledger_batch * inputs.ledger_batch]
            batch_jump = jumped_at(sizes, batch, room, step, opens=opens, max_units=inputs.max_turns)
            note = _cut_note(forms, window)
            return Anchored(shown(window), window[0].id, turns[jump].id, note, turns[batch].id, turns[batch_jump].id)
        start = later.pop(0) if later else None
    # No grid point fits: the newest turns that do, contiguous, from the oldest opening turn that fits.
    # That start depends only on the turns, and moves forward only when the run from it no longer fits.
    cap_left, kept = Budget(room), []
    for st in reversed(turns[-inputs.max_turns :] if inputs.max_turns else turns):
        if not cap_left.take(cost_of(st)):
            break
        kept.append(st)
    newest = kept[::-1]
    window_turns: list[StoredTurn] = []
    for i, st in enumerate(newest):
        if not opens_window(st.turn):
            continue
        candidate = snap_step_window(newest[i:])
        if candidate and _cost(candidate, known, asm.fmt, asm.tokenizer) <= room:
            window_turns = candidate
            break
    if window_turns:
        win = shown(window_turns)
        note = "cache layout: no window start on the grid fits the window's room; the newest turns that fit are shown"
    else:
        win = newest_step(asm, turns, room, form, full_cost)
        note = (
            "cache layout: the newest tool step is larger than the window's room; it is shown with its "
            "results cut to fit (head and tail; the whole results are stored)"
            if win.turns
            else "cache layout: the newest step's call or the newest message is larger than the window's room; "
            "no window is shown"
        )
    first = win.turns[0].id if win.turns else None
    return Anchored(win, first, first, note)


def kept_blocks(inputs: CacheInputs) -> dict[int, str]:
    """The kept recall blocks this call may show, by request turn id (``cache_recall_stays``).

    A request's block stays after its words while they are in the window: always the current
    request's (the newest person's words) once something follows them, an earlier request's only
    when a tool step followed it (the block then sits before that loop's steps, and dropping it
    would re-send them). After a plain reply the block goes, as the per-call part always did (a
    chat's next message). A call whose newest turn is the request recalls anew, as without the
    setting, so the request's first call does not depend on earlier calls.
    """
    turns = inputs.turns
    if not inputs.kept_recall or not turns:
        return {}
    current = next((st.id for st in reversed(turns) if st.role == "user"), None)
    out: dict[int, str] = {}
    for i, st in enumerate(turns):
        text = inputs.kept_recall.get(st.id)
        if text is None or st.role != "user":
            continue
        after = turns[i + 1] if i + 1 < len(turns) else None
        if after is None:
            continue  # the request's own call: it recalls anew (and its block is recorded again)
        if st.id == current or (after.role == "assistant" and bool(after.turn.tool_use_ids)):
            out[st.id] = text
    return out


def _agent_work(st: StoredTurn) -> bool:
    """A tool call or a tool's result: the window may show it cut (a person's words and a plain reply whole)."""
    return st.role == "tool" or (st.role == "assistant" and bool(st.turn.tool_use_ids))


def _cut_note(forms: dict[int, StoredTurn], window: Sequence[StoredTurn]) -> str | None:
    """The manifest note naming the window's turns whose tool results are shown cut."""
    cut = [st.id for st in window if forms.get(st.id, st) is not st]
    if not cut:
        return None
    return "cache layout: tool results cut to fit the window (head and tail kept) in turn " + ", ".join(
        f"turn:{i}" for i in cut
    )


def newest_step(
    asm: Assembly,
    turns: Sequence[StoredTurn],
    room: int,
    form: Callable[[StoredTurn], StoredTurn],
    full_cost: Callable[[StoredTurn], int],
) -> Window:
    """The newest complete step cut to fit ``room``, then the turns before it that fit, back to an opening turn.

    Every turn of the step gets one limit, the largest with which the step fits (turns under it
    stay whole), and is cut to it (:func:`~stratamem.context.step_cut.fit_turn`); empty only
    when what cannot be cut (ids, keys, short texts) is alone larger than the room.

    The newest opening turn whose step is complete is taken (a call still waiting for its result
    belongs to the next request, :func:`~stratamem.context.render.snap_end`).
    """
    opening = [i for i, st in enumerate(turns) if opens_window(st.turn)]
    step: list[StoredTurn] = []
    at = len(turns)
    for i in reversed(opening):
        step = snap_step_window(list(turns[i:]))
        if step:
            at = i
            break
    if not step:
        return Window()
    stub = stub_tokens(asm.tokenizer) if asm.fmt == "anthropic" and step[0].role != "user" else 0
    whole = [form(st) for st in step]
    full = [full_cost(st) for st in whole]
    # The least each turn can cost: cut as far as it goes (a cut of short texts can cost more: then whole).
    least = [min(c, full_cost(cut_turn(st, MIN_KEEP))) for st, c in zip(whole, full, strict=True)]
    left = room - stub
    if sum(least) > left:
        return Window()
    # One limit for every turn of the step: the largest with which the step fits (turns under it stay whole).
    lo, hi = 0, max(full)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(max(m, min(c, mid)) for m, c in zip(least, full, strict=True)) <= left:
            lo = mid
        else:
            hi = mid - 1
    shown = [
        st if c <= lo else (fit_turn(st, max(lo, m), full_cost) or cut_turn(st, MIN_KEEP))
        for st, c, m in zip(whole, full, least, strict=True)
    ]
    costs = {st.id: full_cost(st) for st in shown}
    if _cost(shown, costs, asm.fmt, asm.tokenizer) > room:
        return Window()
    left = room - sum(costs.values()) - stub
    # The turns before the step, as the room allows, back to a turn a window may open with.
    before: list[StoredTurn] = []
    for st in reversed(turns[:at]):
        c = full_cost(form(st))
        if c > left:
            break
        left -= c
        before.append(form(st))
        costs[st.id] = c
    before.reverse()
    lead = next((j for j, st in enumerate(before) if opens_window(st.turn)), len(before))
    window = before[lead:] + shown
    if _cost(window, costs, asm.fmt, asm.tokenizer) > room:
        window = shown
    return Window(window, {st.id: costs[st.id] for st in window})


def _item_num(it: ItemUnit) -> int:
    tail = it.id.split(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _place_standing(asm: Assembly, cands: Candidates, layers: Layers) -> list[ItemUnit]:
    """L0 and L1: instructions, then working state, hot items (oldest first) and the checkpoint.

    Each block whole when it fits (else a near-miss); the hot items are one
    section. Returns the other (recalled) items, for L4.
    """
    hot = sorted((it for it in cands.items if it.reason == "hot_item"), key=_item_num)
    rest = [it for it in cands.items if it.reason != "hot_item"]
    ordered = [b for b in cands.fixed if b.kind == "instructions"] + [b for b in cands.fixed if b.kind == "state"]
    late = [b for b in cands.fixed if b.kind not in ("instructions", "state")]
    for blk in ordered + [None] + late:  # None: where the hot items go
        if blk is None:
            section = _ItemSection(asm, {})
            for it in hot:
                section.take(it, asm.left.left)
            before = len(asm.sections)
            section.place()
            if len(asm.sections) > before:
                layers.add("state", len(asm.sections) - 1)
                for it in section.taken:
                    asm.shown.add(it.id, it.text)
            continue
        if place_fixed(asm, blk):
            layers.add("instructions" if blk.kind == "instructions" else "state", len(asm.sections) - 1)
    return rest


def _place_ledger(asm: Assembly, entries: Sequence[LedgerEntry], layers: Layers) -> list[LedgerEntry]:
    """L2: the ledger's lines as one section (already chosen to fit its room); returns those placed."""
    if not entries:
        return []
    header = asm.tokenizer.count(LEDGER_TITLE) + 2 + asm.opening()
    lines = [e.unit.text for e in entries]
    costs = [asm.tokenizer.count(t) + 1 for t in lines]
    while lines and header + sum(costs) > asm.left.left:
        lines, costs, entries = lines[1:], costs[1:], entries[1:]  # what the fixed blocks left is less
    if not lines:
        return []
    asm.left.left -= header + sum(costs)
    asm.place(LEDGER_TITLE + "\n" + "\n".join(lines), {e.unit.id for e in entries})
    layers.add("ledger", len(asm.sections) - 1)
    asm.items.extend(
        ContextItem(
            e.unit.id,
            e.unit.kind,
            cost + (header if i == 0 else 0),
            "ledger",
            tier=e.unit.tier,
            format="summary",
            turn_ids=e.unit.turn_ids,
        )
        for i, (e, cost) in enumerate(zip(entries, costs, strict=True))
    )
    return list(entries)


def _per_call(
    asm: Assembly,
    cands: Candidates,
    items: list[ItemUnit],
    window: Window,
    policy: Policy,
    room: int,
    ledger: Sequence[LedgerEntry],
) -> History:
    """L4 within ``room``: recalled items and turns, then summaries neither the ledger nor the window shows."""
    in_ledger = {t for e in ledger for t in e.unit.turn_ids}
    summaries = [su for su in cands.summaries if not set(su.turn_ids) & in_ledger]
    own = Candidates(recalled=cands.recalled, items=items, summaries=summaries)
    saved = asm.left.left - room
    asm.left.left = room
    alloc = Allocation(0.0, 1.0, 0.0, room)
    history = take_history(asm, own, alloc, window, policy)
    # Recalled turns are evidence: they never give way to a ledger line that restates them;
    # summaries recalled for this message do.
    for e in ledger:
        asm.shown.add(e.unit.id, e.unit.text)
    take_summaries(asm, own, alloc, window.ids | history.kept_ids | in_ledger, policy)
    asm.left.left += saved
    return history


def assemble_cached(
    cands: Candidates,
    inputs: CacheInputs,
    *,
    budget: int,
    tokenizer: Tokenizer,
    fmt: str,
    policy: Policy,
    query: str | None,
    dedup: bool,
) -> Context:
    """Place the candidates in the cache layout's layers and render them (see the module docstring).

    Raises:
        BudgetError: ``budget`` is not a positive integer or below the request overhead.
        ValidationError: Unknown ``fmt``.
    """
    asm = Assembly.start(budget, tokenizer, fmt, query, dedup)
    layers = Layers()
    items = _place_standing(asm, cands, layers)
    after_fixed = asm.left.left
    if is_question(query):
        # A question is answered from what the policy selects for it, as without the layout (its
        # recall must not give way to the ledger); only L0-L1 stay in place for the cache.
        rest = dataclasses.replace(cands, items=items)
        alloc = policy.allocate(asm, inputs.shares, rest)
        layers.per_call_from = len(asm.sections)
        window = take_window(asm, rest.recent, alloc, policy, rest.recalled)
        history = take_history(asm, rest, alloc, window, policy)
        take_summaries(asm, rest, alloc, window.ids | history.kept_ids, policy)
        deviation = "a question: selected as without the layout, after the instructions and standing state"
        return finish_cached(asm, layers, window, history, policy.name, cands.notes, inputs, deviation, None)
    window_room = int(after_fixed * (1 - inputs.ledger_share - inputs.recall_share)) if policy.window else 0
    kept = kept_blocks(inputs)
    kept_cost = {t: tokenizer.count(text) + MESSAGE_TOKENS for t, text in kept.items() if text}

    current = next((st.id for st in reversed(inputs.turns) if st.role == "user"), None)
    asks = [st.id for st in inputs.turns if st.role == "user" and st.id in kept]

    def lead(turns: Sequence[StoredTurn]) -> int | None:
        # The block of the newest request before the window's start leads it: a loop that went on
        # past its request's words keeps that request's recall in view, fixed until the next jump.
        if not turns:
            return None
        i = bisect.bisect_left(asks, turns[0].id)
        return asks[i - 1] if i else None

    def extra(turns: Sequence[StoredTurn]) -> int:
        first = lead(turns)
        return sum(kept_cost.get(st.id, 0) for st in turns) + (kept_cost.get(first, 0) if first is not None else 0)

    anchored = anchor_window(asm, inputs, window_room, extra)
    if anchored.note:
        asm.notes.append(anchored.note)
    window = anchored.window
    stays = {st.id: kept[st.id] for st in window.turns if st.id in kept}
    first = lead(window.turns)
    if first is not None:
        stays[LEAD] = stays[first] = kept[first]
    asm.left.left -= sum(window.costs.values()) + extra(window.turns)
    for st in window.turns:
        asm.shown.add(f"turn:{st.id}", st.text)
    ledger = select_ledger(
        inputs.ledger,
        anchored.ledger_before if anchored.ledger_before is not None else anchored.anchor,
        anchored.ledger_as_of if anchored.ledger_as_of is not None else anchored.jumped_at,
        int(after_fixed * inputs.ledger_share),
        tokenizer,
    )
    ledger = _place_ledger(asm, ledger, layers)
    layers.per_call_from = len(asm.sections)
    layers.recall_title = True
    header = tokenizer.count(RECALL_TITLE) + 2 + (0 if fmt == "text" else MESSAGE_TOKENS)
    left = max(0, asm.left.left - header)
    strict = policy.recall_first or not policy.window
    room = left if strict else min(left, int(after_fixed * inputs.recall_share))
    if current in stays:
        # The request's recall was sent with its first call and stays there: nothing recalled anew.
        room = 0
        asm.notes.append(
            f"cache layout: the recall sent with request turn:{current} stays after its words (cache_recall_stays)"
        )
    elif not inputs.step_recall and inputs.turns and inputs.turns[-1].role == "tool":
        # A step of a tool loop: the request's first call had its recall. Without L4 after the
        # newest step, the next call re-sends only its own newest step.
        room = 0
        asm.notes.append("cache layout: a tool loop's step; recall was given with the request (cache_step_recall off)")
    history = History()
    if room > 0:
        asm.left.left -= header
        history = _per_call(asm, cands, items, window, policy, room, ledger)
        if len(asm.sections) == layers.per_call_from:
            asm.left.left += header  # nothing recalled: no title either
    # A request's first call keeps what it recalls (an empty block too: its steps then recall nothing).
    keeps = current if inputs.recall_stays and current is not None and inputs.turns[-1].id == current else None
    return finish_cached(
        asm, layers, window, history, policy.name, cands.notes, inputs, None, anchored, stays=stays, keeps=keeps
    )
