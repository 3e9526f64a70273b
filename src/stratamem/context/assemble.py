"""Budgeted context assembly: allocate, select, de-duplicate, order, render, explain.

A pure function of its inputs (:func:`assemble`): fixed blocks (instructions,
working state, checkpoint), the current session's recent turns, recalled turns
ranked by the retrieval engine, and summaries of older history ranked the same
way go in; a :class:`~stratamem.records.manifests.Context` comes out, rendered for one
provider and counted exactly, with every item's reason and score and the
near-misses. No I/O happens here; :class:`~stratamem.memory.Memory` gathers
the inputs.

Policies name the order in which sections draw on the budget and their shares;
a section's unused share flows on to the next:

* ``hybrid`` (default): recent window 50%, recalled history (memory items and
  verbatim turns) 30%, summaries 20% — when the query is about the current
  thread. The window's share is sized by how well the query matches it
  (:func:`window_fraction`): a query whose best recalled turns lie outside the
  window (a question about the past) keeps only a small window, and recalled
  history then draws as under ``recall`` (verbatim turns before summaries and
  before memory items extracted from turns). Without a query
  the window keeps its share.
* ``topics`` (seed 002): the current topic's messages 50% (oversized messages
  truncated with a marker), historical topic summaries 30% (newest first), bulk
  summaries 20% (newest first: when bulks do not fit, the oldest is dropped first);
  no verbatim recall and no memory items, as in the seed.
* ``pyramid`` (seed 000): the hot recent window (current share), the three
  warm chunks most relevant to the query, expanded to their turns when they fit
  (history share), and macro summaries for broad context (bulk share); recalled
  verbatim turns take what those parts leave. A part with nothing to show gives
  its share to the others.
* ``state_first`` (seed 004): instructions and working state, then the
  conversation window, then recalled history.
* ``recall``: no recent window; memory items, then recalled verbatim turns
  take what they need, and summaries get what is left (question answering
  over a long history).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..text import check_budget, check_format
from .render import attach_sections, render, snap_window, unit_cost
from .dedup import Shown, fact_tokens
from ..errors import BudgetError, StratamemError
from ..records.manifests import Context, ContextItem, Manifest, NearMiss
from ..records import StoredTurn
from ..retrieve.lexical import analyze
from ..retrieve.render import CompactRenderer, Packed, pack_turns
from ..tokens import MESSAGE_TOKENS, REPLY_TOKENS, Tokenizer, count_messages

__all__ = ["POLICIES", "FixedBlock", "ItemUnit", "Recalled", "SummaryUnit", "assemble", "is_follow_up",
           "window_fraction"]

POLICIES = ("hybrid", "topics", "pyramid", "state_first", "recall")

_ITEMS_TITLE = "## Remembered facts"
_HISTORY_TITLE = "## Earlier conversation (recalled, verbatim)"
_SUMMARY_TITLE = "## Summaries of older conversation"


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
    """No summary exists yet (a hot segment): show it expanded or not at all."""


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


@dataclass
class _Budget:
    left: int

    def take(self, n: int) -> bool:
        if n <= self.left:
            self.left -= n
            return True
        return False


def _shares(policy: str, shares: tuple[float, float, float], has_recall: bool,
            has_summaries: bool) -> tuple[float, float, float]:
    """Shares of the window, recalled history and summaries; empty sections give theirs away."""
    current, history, bulk = shares
    if policy == "recall":
        current = 0.0
    if not has_recall:
        history = 0.0
    if not has_summaries:
        bulk = 0.0
    total = current + history + bulk
    if total == 0:
        return (0.0, 0.0, 0.0) if policy == "recall" else (1.0, 0.0, 0.0)
    return current / total, history / total, bulk / total


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


_PAST_CUE = re.compile(r"\b(did|was|were|had|ago|last|previous(ly)?|earlier|before|remember|told|mentioned|used to|"
                       r"first|when)\b", re.IGNORECASE)


_THREAD_CUE = re.compile(r"\b(it|that|this|these|those|them|above|again|more|less|shorter|longer|continue|go on|"
                         r"next|then|instead|what about|how about|and)\b", re.IGNORECASE)


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


def assemble(*, budget: int, tokenizer: Tokenizer, fmt: str = "openai", policy: str = "hybrid",
             shares: tuple[float, float, float] = (0.5, 0.3, 0.2), fixed: Sequence[FixedBlock] = (),
             recent: Iterable[StoredTurn] = (), recalled: Sequence[Recalled] = (),
             summaries: Sequence[SummaryUnit] = (), bulks: Sequence[SummaryUnit] = (),
             items: Sequence[ItemUnit] = (), query: str | None = None, notes: Sequence[str] = (),
             dedup: bool = True) -> Context:
    """Fill ``budget`` from the sections in the policy's order and render the result.

    Args:
        budget: Token budget for the whole rendered context.
        tokenizer: Exact tokenizer the budget is counted in.
        fmt: ``openai``, ``anthropic`` or ``text``.
        policy: One of :data:`POLICIES`.
        shares: ``(current, history, bulk)`` shares of what the fixed blocks leave.
        fixed: Blocks included whole when they fit, in order.
        recent: The current session's turns, newest first.
        recalled: Older turns, best first.
        summaries: Summaries, best first. A summary that wins a slot is replaced by
            its verbatim turns when they fit what is left (lazy expansion).
        bulks: Bulk summaries for the ``topics`` policy, newest first (its 20% share); macro
            summaries for the ``pyramid`` policy (seed 000), whose ``summaries`` are then the
            relevant warm chunks (history share) and whose window keeps the current share.
        items: Memory items, hot ones first, then recalled ones best first; they
            draw on the history share before recalled turns.
        query: Recorded in the manifest.
        notes: Degradations to report (e.g. recall without an embedder).
        dedup: Show one copy of each fact (:mod:`stratamem.context.dedup`): a recalled
            turn, item or summary sentence already shown is left out, and its
            manifest entry says ``duplicate_of`` the kept copy.

    Raises:
        BudgetError: ``budget`` is not a positive integer or below the request overhead.
        ValidationError: Unknown ``fmt``.
    """
    check_budget(budget)
    check_format(fmt)
    overhead = 0 if fmt == "text" else REPLY_TOKENS
    if overhead > budget:
        raise BudgetError(f"budget {budget} is below the fixed request overhead ({overhead} tokens)")
    b = _Budget(budget - overhead)
    # The system message that carries the sections costs its framing once.
    section_overhead = 0 if fmt == "text" else MESSAGE_TOKENS
    out_items: list[ContextItem] = []
    notes_out: list[str] = []
    items_in: list[ContextItem] = []
    misses: list[NearMiss] = []
    sections: list[str] = []
    section_ids: list[set[str]] = []  # manifest item ids each section holds, in step with ``sections``
    # Everything shown, in priority order: fixed blocks and the window, recalled turns,
    # items, summaries; a later unit loses what an earlier one already shows.
    shown = Shown(enabled=dedup)

    for blk in fixed:
        body = f"{blk.title}\n{blk.text}"
        cost = tokenizer.count(body) + 2 + (0 if sections else section_overhead)
        if b.take(cost):
            sections.append(body)
            section_ids.append({blk.id})
            out_items.append(ContextItem(blk.id, blk.kind, cost, blk.reason, format=blk.format))
            shown.add(blk.id, blk.text)
        else:
            misses.append(NearMiss(blk.id, blk.kind, cost, "over_budget"))

    topics = policy == "topics"
    # seed 000 (pyramid): hot window, relevant warm chunks (``summaries``), macro summaries (``bulks``).
    seed000 = policy == "pyramid"
    if topics:
        has_history, has_bulk = bool(summaries), bool(bulks)
    elif seed000:
        has_history, has_bulk = bool(summaries) or bool(recalled) or bool(items), bool(bulks)
    else:
        has_history, has_bulk = bool(recalled) or bool(items), bool(summaries)
    current, history, bulk = _shares(policy, shares, has_history, has_bulk)
    after_fixed = b.left

    # 1. Recent window: contiguous from the newest turn back, within its share.
    window: list[StoredTurn] = []
    costs: dict[int, int] = {}
    past_query = False
    if current > 0:
        cap = _Budget(int(after_fixed * current))
        for st in recent:
            cost = unit_cost(st.turn, fmt, tokenizer)
            if not cap.take(cost):
                misses.append(NearMiss(f"turn:{st.id}", "turn", cost, "over_budget"))
                break
            window.append(st)
            costs[st.id] = cost
        if policy == "hybrid" and window:
            keep, match = window_fraction(query, recalled, {st.id for st in window})
            if keep < 1:
                # The query is about older history: shrink the window to ``keep`` of its share.
                past_query = True
                room, n = int(after_fixed * current * keep), 0
                while n < len(window) and costs[window[n].id] <= room:
                    room -= costs[window[n].id]
                    n += 1
                for st in window[n:]:
                    misses.append(NearMiss(f"turn:{st.id}", "turn", costs.pop(st.id), "window_shrunk_for_recall"))
                window = window[:n]
                notes_out.append(f"hybrid: window match {match:.2f} (1 - rank/{WINDOW_RANKS} of the best recalled turn "
                                 f"inside the window): window keeps {keep:.0%} of its share; recalled history draws first")
        window.reverse()
        window = snap_window(window, fmt)
        b.left -= sum(costs[st.id] for st in window)
    in_window = {st.id for st in window}
    window_texts = {st.text for st in window}
    for st in window:
        shown.add(f"turn:{st.id}", st.text)

    # 2. Recalled history: memory items first (compact facts), then verbatim turns
    #    packed compactly, skipping what the window holds.
    # pyramid and recall give recalled history strict priority over summaries: a
    # verbatim turn is evidence, a summary only points at it (summaries get the rest).
    strict = policy in ("pyramid", "recall") or past_query
    recall_cap = b.left if strict else int(b.left * history / (history + bulk)) if history else 0
    macro_reserve = 0
    if seed000:
        # The warm chunks keep their history share and the macros their bulk share:
        # recalled turns take what those parts will not use.
        warm_need = sum(su.expanded_tokens if su.expand is not None else tokenizer.count(su.text)
                        for su in summaries)
        macro_reserve = min(int(after_fixed * bulk), sum(tokenizer.count(su.text) + 1 for su in bulks))
        recall_cap = max(0, b.left - min(int(after_fixed * history), warm_need) - macro_reserve)
    item_lines: list[str] = []
    item_header = tokenizer.count(_ITEMS_TITLE) + 2 + (0 if sections else section_overhead)

    taken_items: list[ItemUnit] = []
    item_shown = Shown(enabled=dedup)  # items among themselves; turns beat items, so they are checked later

    def take_item(it: ItemUnit, cap: int) -> int:
        dup = shown.restates(it.text) or item_shown.restates(it.text) or _restated_by_turns(it, full_turns, dedup)
        if dup:
            misses.append(NearMiss(it.id, "item", 0, "duplicate", it.score, duplicate_of=dup))
            return 0
        cost = tokenizer.count(it.text) + 1 + (0 if item_lines else item_header)
        if cost > cap:
            misses.append(NearMiss(it.id, "item", cost, "over_budget", it.score))
            return 0
        b.left -= cost
        item_lines.append(it.text)
        items_in.append(ContextItem(it.id, "item", cost, it.reason, tier=it.tier, format="text",
                                    score=it.score, turn_ids=it.turn_ids))
        taken_items.append(it)
        item_shown.add(it.id, it.text)
        return cost

    # Under recall, an item extracted from turns (it has provenance) waits for the
    # packing: verbatim evidence comes first, and if its turns are shown the item
    # would only restate them (seed 004). Items added as knowledge go first.
    defer = policy == "recall" or past_query
    # Turns shown whole (window now, recalled turns once packed), by id: an item they restate goes.
    full_turns: dict[int, str] = {st.id: st.text for st in window}
    deferred: list[ItemUnit] = []
    for it in items:
        if it.turn_ids and set(it.turn_ids) <= in_window and not _new_value(it, full_turns):
            misses.append(NearMiss(it.id, "item", 0, "restates_window_turns", it.score,
                                   duplicate_of=f"turn:{min(it.turn_ids)}"))
        elif defer and it.turn_ids:
            deferred.append(it)
        else:
            recall_cap -= take_item(it, recall_cap)
    fresh: list[StoredTurn] = []
    score_of: dict[int, Mapping[str, float]] = {}
    labels: dict[int, str] = {}
    # seed 000: turns of a warm chunk that will be expanded are shown there, not recalled twice.
    chunk_turns = {t for su in summaries if seed000 and su.expand is not None
                   and 0 < su.expanded_tokens <= int(after_fixed * history) for t in su.turn_ids}
    for r in recalled:
        if r.turn.id in in_window or r.turn.text in window_texts:
            twin = r.turn.id if r.turn.id in in_window else next(st.id for st in window if st.text == r.turn.text)
            misses.append(NearMiss(f"turn:{r.turn.id}", "turn", 0, "duplicate_of_window", r.score,
                                   duplicate_of=f"turn:{twin}"))
            continue
        dup = shown.restates(r.turn.text)
        if dup:
            misses.append(NearMiss(f"turn:{r.turn.id}", "turn", 0, "duplicate", r.score, duplicate_of=dup))
            continue
        if r.turn.id in chunk_turns:
            misses.append(NearMiss(f"turn:{r.turn.id}", "turn", 0, "in_warm_chunk", r.score))
            continue
        fresh.append(r.turn)
        score_of[r.turn.id] = r.score
        if r.label:
            labels[r.turn.id] = r.label
    header_cost = tokenizer.count(_HISTORY_TITLE) + 2 + (0 if sections or item_lines else section_overhead)
    packed = None
    if fresh and recall_cap > header_cost:
        packed, shown, fresh = _pack_once(fresh, recall_cap - header_cost, tokenizer, query, labels, shown,
                                          misses, score_of)
        if packed.turns:
            b.left -= packed.tokens + header_cost
            full_turns.update((st.id, st.text) for st in packed.turns if st.id not in packed.excerpts)
        if dedup and taken_items:
            # Items taken before the packing lose to the verbatim turns that restate them:
            # they leave, and their tokens go back to what follows (deferred items, summaries).
            keep = []
            for it in taken_items:
                dup = shown.restates(it.text) or _restated_by_turns(it, full_turns, dedup)
                if dup:
                    misses.append(NearMiss(it.id, "item", 0, "duplicate", it.score, duplicate_of=dup))
                else:
                    keep.append(it)
            if len(keep) < len(taken_items):
                b.left += sum(i.tokens for i in items_in)
                old = {i.id: i for i in items_in}
                item_lines.clear()
                items_in.clear()
                taken_items.clear()
                for it in keep:
                    cost = tokenizer.count(it.text) + 1 + (0 if item_lines else item_header)
                    b.left -= cost
                    item_lines.append(it.text)
                    items_in.append(dataclasses.replace(old[it.id], tokens=cost))
                    taken_items.append(it)
    for it in taken_items:
        shown.add(it.id, it.text)
    kept_ids = {st.id for st in packed.turns} if packed else set()
    # A turn's cost is its rendered line as packed (counted once, during packing).
    line_cost = dict(packed.costs) if packed else {}
    for st in fresh:
        if st.id not in kept_ids and len(misses) < 50:
            cost = line_cost.get(st.id)
            misses.append(NearMiss(f"turn:{st.id}", "turn", tokenizer.count(st.text) if cost is None else cost,
                                   "over_budget", score_of[st.id]))
    for it in deferred:
        if set(it.turn_ids) <= kept_ids and not _new_value(it, {st.id: st.text for st in packed.turns}):
            misses.append(NearMiss(it.id, "item", 0, "restates_included_turns", it.score,
                                   duplicate_of=f"turn:{min(it.turn_ids)}"))
        elif take_item(it, b.left):
            shown.add(it.id, it.text)
    if item_lines:
        sections.append(_ITEMS_TITLE + "\n" + "\n".join(item_lines))
        section_ids.append({i.id for i in items_in})

    # 3. Summaries of older history, skipping those that only restate included turns.
    #    topics: historical topics take the history share, bulks what is left.
    included = in_window | kept_ids
    summary_lines: list[str] = []
    summary_items: list[ContextItem] = []
    sum_header = tokenizer.count(_SUMMARY_TITLE) + 2
    summarized: set[int] = set()
    as_summary: set[int] = set()  # turns under the units shown as summaries (not expanded)

    def take_summaries(units: Sequence[SummaryUnit], cap: _Budget,
                       overlap: bool = False) -> list[tuple[SummaryUnit, int]]:
        """Take what fits ``cap``; return the units left out for lack of room, with their cost.

        ``overlap``: a unit may cover turns of a unit already shown expanded (seed 000's
        macro summaries give the broad view around the warm chunks shown in full), never
        those of another summary.
        """
        left_out: list[tuple[SummaryUnit, int]] = []
        for su in units:
            covered = set(su.turn_ids)
            if covered and covered <= included:
                misses.append(NearMiss(su.id, su.kind, 0, "restates_included_turns", su.score,
                                       duplicate_of=f"turn:{min(covered)}"))
                continue
            if covered & (as_summary if overlap else summarized):
                # A consolidation and its own child segment say the same thing twice.
                holder = next(i.id for i in summary_items if covered & set(i.turn_ids))
                misses.append(NearMiss(su.id, su.kind, 0, "overlaps_included_summary", su.score, duplicate_of=holder))
                continue
            first = not summary_lines
            framing = (sum_header if first else 0) + (section_overhead if first and not sections and not kept_ids
                                                      else 0)
            # Expanding a unit whose turns are partly shown already would repeat them.
            expanded = None if covered & included else _expansion(su, cap.left - framing, tokenizer, notes_out)
            if su.expand_only and not expanded:
                misses.append(NearMiss(su.id, su.kind, su.expanded_tokens, "not_summarized_and_too_big", su.score))
                continue
            text, reason, fmt_name = (expanded, "expanded", "text") if expanded else (su.text, "summary", "summary")
            # A summary never restates what is shown: its sentences already shown go.
            cut = shown.strip(text)
            if cut.removed and not cut.facts_left:
                misses.append(NearMiss(su.id, su.kind, 0, "duplicate", su.score, duplicate_of=cut.duplicate_of[0]
                                       if cut.duplicate_of else su.id))
                continue
            text = cut.text
            cost = tokenizer.count(text) + 1 + framing
            if cap.take(cost):
                b.left -= cost
                summary_lines.append(text)
                summary_items.append(ContextItem(su.id, su.kind, cost, reason, tier=su.tier, format=fmt_name,
                                                 score=su.score, turn_ids=su.turn_ids,
                                                 duplicate_of=cut.duplicate_of))
                summarized.update(covered)
                shown.add(su.id, text)
                if reason == "summary":
                    as_summary.update(covered)
            else:
                left_out.append((su, cost))
        return left_out

    if topics:
        # Topics take their share, bulks the rest; what is still free then goes
        # to the topics that did not fit their share.
        waiting = take_summaries(summaries, _Budget(min(b.left, int(after_fixed * history) if history else 0)))
        left_out = take_summaries(bulks, _Budget(b.left)) + take_summaries([su for su, _ in waiting], _Budget(b.left))
    elif seed000:
        # Warm chunks first (leaving the macros their share), then macros, then any
        # chunk that did not fit gets what is still free.
        waiting = take_summaries(summaries, _Budget(max(0, b.left - macro_reserve)))
        left_out = (take_summaries(bulks, _Budget(b.left), overlap=True)
                    + take_summaries([su for su, _ in waiting], _Budget(b.left)))
    else:
        left_out = take_summaries(summaries, _Budget(b.left))
    misses.extend(NearMiss(su.id, su.kind, cost, "over_budget", su.score) for su, cost in left_out)

    out_items.extend(items_in)
    excerpt_notes: dict[str, str] = {}
    if packed and packed.turns:
        sections.append(f"{_HISTORY_TITLE}\n{packed.text}")
        section_ids.append({f"turn:{st.id}" for st in packed.turns})
        out_items.extend(ContextItem(f"turn:{st.id}", "turn", line_cost[st.id], "recalled",
                                     format="excerpt" if st.id in packed.excerpts else "text",
                                     score=score_of[st.id], turn_ids=(st.id,))
                         for st in sorted(packed.turns, key=lambda t: t.id))
        excerpt_notes = {f"turn:{tid}": f"turn:{tid} shown as an excerpt: {ex.tokens} of {ex.total_tokens} tokens "
                                        f"(characters {ex.start}–{ex.end}; expand the turn for the full text)"
                         for tid, ex in sorted(packed.excerpts.items())}
    if summary_lines:
        sections.append(_SUMMARY_TITLE + "\n" + "\n".join(summary_lines))
        section_ids.append({i.id for i in summary_items})
        out_items.extend(summary_items)
    out_items.extend(ContextItem(f"turn:{st.id}", "turn", costs[st.id], "recent_window", tier="hot",
                             turn_ids=(st.id,)) for st in window)

    system_text = "\n\n".join(sections)
    ctx = _render(window, system_text, fmt, tokenizer)
    # Item costs are upper bounds; this guard only trims if a count was ever low.
    while ctx[3] > budget and (window or sections):
        if window:
            window = snap_window(window[1:], fmt)
        else:
            sections.pop()
            section_ids.pop()
        ctx = _render(window, "\n\n".join(sections), fmt, tokenizer)
    # Keep the manifest true to what was rendered: drop items the guard removed.
    shown = set().union(*section_ids) | {f"turn:{st.id}" for st in window}
    for gone in [i for i in out_items if i.id not in shown]:
        misses.append(NearMiss(gone.id, gone.kind, gone.tokens, "over_budget", gone.score))
    out_items = [i for i in out_items if i.id in shown]
    misses = _resolve_duplicates(misses, shown)
    notes_out.extend(note for tid, note in excerpt_notes.items() if tid in shown)
    messages, system, text, total = ctx
    manifest = Manifest(budget=budget, total_tokens=total, items=tuple(out_items), near_misses=tuple(misses),
                        policy=policy, query=query, tokenizer=tokenizer.name, notes=tuple(notes) + tuple(notes_out))
    return Context(format=fmt, messages=messages, system=system, text=text, manifest=manifest)


def _resolve_duplicates(misses: list[NearMiss], shown: set[str]) -> list[NearMiss]:
    """Point every ``duplicate_of`` at a copy that is shown.

    A unit can lose to one that later loses in turn (an item to an earlier
    item that a recalled turn then restates): follow the chain to the kept copy.
    """
    link = {m.id: m.duplicate_of for m in misses if m.duplicate_of is not None}
    out = []
    for m in misses:
        target, steps = m.duplicate_of, 0
        while target is not None and target not in shown and target in link and steps < len(link):
            target, steps = link[target], steps + 1
        out.append(m if target == m.duplicate_of else dataclasses.replace(m, duplicate_of=target))
    return out


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


def _pack_once(fresh: list[StoredTurn], cap: int, tokenizer: Tokenizer, query: str | None,
               labels: Mapping[int, str], shown: Shown, misses: list[NearMiss],
               score_of: Mapping[int, Mapping[str, float]]) -> tuple[Packed, Shown, list[StoredTurn]]:
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
    for attempt in range(4):
        last = attempt == 3
        packed = pack_turns(checked if last and checked is not None else fresh, cap, tokenizer, CompactRenderer(),
                            query=query, labels=labels)
        trial = shown.copy()
        if not shown.enabled:
            return packed, trial, fresh
        replace: dict[int, StoredTurn | None] = {}
        ok: list[StoredTurn] = []
        for st in packed.turns:
            text = packed.texts.get(st.id, st.text)
            excerpted = st.id in packed.excerpts
            editable = isinstance(st.turn.content, str) and st.role != "tool"
            cut = trial.strip(st.text if editable else text)
            if cut.removed and not cut.facts_left:
                misses.append(NearMiss(f"turn:{st.id}", "turn", 0, "duplicate", score_of.get(st.id, {}),
                                       duplicate_of=cut.duplicate_of[0] if cut.duplicate_of else f"turn:{st.id}"))
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
            ok.append(st)
        if not replace:
            return packed, trial, fresh
        fresh = [replace.get(t.id, t) for t in fresh if replace.get(t.id, t) is not None]
        if last:
            # This round's own repeats leave too: pack only the turns that passed, as cut
            # (a subset of what just fitted, so nothing new comes in unchecked).
            packed = pack_turns(ok, cap, tokenizer, CompactRenderer(), query=query, labels=labels)
            return packed, trial, fresh
        checked = ok
    raise AssertionError("unreachable")


def _expansion(su: SummaryUnit, room: int, tokenizer: Tokenizer, notes: list[str]) -> str | None:
    """The unit's verbatim turns as compact lines, when they exist and fit ``room``.

    ``expanded_tokens`` (the turns' message tokens, which their compact lines
    rarely exceed) screens out units too big to expand before anything is
    fetched. A unit whose turns cannot be read is shown as its summary, and a
    note says why.
    """
    if su.expand is None or su.expanded_tokens <= 0 or su.expanded_tokens > room:
        return None
    try:
        turns = list(su.expand())
    except StratamemError as exc:
        notes.append(f"{su.id} not expanded: {type(exc).__name__}: {exc}")
        return None
    if not turns:
        return None
    renderer = CompactRenderer()
    lines = [su.text.split("]", 1)[0] + "] (expanded)"]
    lines += [renderer.line(st) for st in sorted(turns, key=lambda t: t.id)]
    text = "\n".join(lines)
    return text if tokenizer.count(text) + 1 <= room else None


def _render(window: list[StoredTurn], system_text: str, fmt: str,
            tokenizer: Tokenizer) -> tuple[tuple[dict, ...], str | None, str, int]:
    messages, system, text = render([st.turn for st in window], fmt)
    if fmt == "text":
        full = "\n\n".join(p for p in (system_text, text) if p)
        return (), None, full, tokenizer.count(full)
    messages, system = attach_sections(messages, system, system_text, fmt)
    full = "\n\n".join(p for p in (system_text, text) if p)
    return messages, system, full, count_messages(messages, tokenizer, system=system)
