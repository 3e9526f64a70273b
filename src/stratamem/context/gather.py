"""Gathering candidates from a memory: the reads a policy's sources make.

The facade (:class:`~stratamem.memory.Memory`) hands over its :class:`Parts`
(the store, the pyramid and item store, the recall index, the working state)
and a checked :class:`Request`; a policy's ``gather``
(:mod:`stratamem.context.policy`) calls the functions here for the sources it
draws on. Everything here only reads: item search tracks no access and
promotes nothing, so building a prompt never changes memory and works on a
read-only store.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import islice
from typing import Any

from ..config import Config
from ..records import Block, StoredTurn, TextBlock, ToolResultBlock
from ..retrieve.updates import find_updates, order_updates, update_labels
from ..tokens import Tokenizer
from .sources import SummaryIndex, checkpoint_block, project_blocks, system_blocks
from .units import FixedBlock, ItemUnit, Recalled

__all__ = [
    "Parts",
    "Request",
    "fixed_blocks",
    "item_units",
    "newest_turns",
    "recall_turns",
    "recent_turns",
    "topic_turns",
    "truncated",
]


@dataclass(frozen=True, slots=True)
class Request:
    """One context asked for, checked by the facade; ``budget`` is in the memory's tokenizer."""

    query: str | None
    """What the next call is about (none: no recall)."""
    budget: int
    """Tokens the assembled context may count (the facade converts a provider's counting)."""
    session: str | None
    """The current session (resolved: the latest one when the caller named none)."""
    fmt: str
    """``openai``, ``anthropic`` or ``text`` (``responses`` is assembled as ``openai``)."""
    policy: str
    """A registered policy name (:func:`stratamem.context.policies.policy_names`)."""
    now: datetime | None = None
    """When the query is asked: relative times in it are resolved against it."""
    project: str | os.PathLike[str] | None = None
    """Project whose instruction files and working state go in."""
    system_prompts: str = "session"
    """Whose system prompts go in: ``session`` (the current session's only) or ``namespace`` (every session's)."""
    cache: bool = False
    """Lay the prompt out for the provider's prompt cache (:mod:`stratamem.context.layout`)."""
    cache_min_tokens: int = 1024
    """The target model's shortest cacheable prefix, in the provider's counting."""
    cache_factor: float = 1.0
    """Provider tokens per counter token (the stable prefix is reported in the provider's counting)."""


@dataclass(frozen=True, slots=True)
class Parts:
    """The parts of one namespace's memory that gathering reads (made by the facade per call).

    The pyramid, the item store and the recall index are made on first use,
    so they are handed over as callables: a policy that does not draw on one
    never builds it.
    """

    store: Any
    """The :class:`~stratamem.store.Store`."""
    namespace: str
    """Whose memory."""
    tokenizer: Tokenizer
    """The memory's tokenizer."""
    config: Config
    """The memory's settings."""
    summary_index: SummaryIndex
    """The memory's ranking of pyramid summaries (kept current across calls)."""
    pyramid: Callable[[], Any]
    """The namespace's :class:`~stratamem.pyramid.Pyramid` (only called when the pyramid is enabled)."""
    items: Callable[[], Any]
    """The namespace's :class:`~stratamem.items.Items`."""
    recall_index: Callable[[], Any]
    """The namespace's recall index (a :class:`~stratamem.retrieve.HybridIndex`), kept current."""
    state: Callable[[str | os.PathLike[str]], Any]
    """The namespace's :class:`~stratamem.state.working.WorkingState` under a project directory."""
    lexical_note: str
    """The manifest note when recall is lexical only (why: no embedder, or the model missing)."""


def newest_turns(parts: Parts, session: str, page: int = 32) -> Iterator[StoredTurn]:
    """The session's turns, newest first, read page by page as they are consumed."""
    # The window usually stops after a few dozen turns: start with a small page
    # (every row read is decoded) and widen it while the window keeps asking.
    max_seq: int | None = None
    while True:
        rows = parts.store.turns(parts.namespace, session, max_seq=max_seq, newest_first=True, limit=page)
        yield from rows
        if len(rows) < page:
            return
        max_seq = rows[-1].seq - 1
        page = min(page * 4, 1024)


def recent_turns(parts: Parts, session: str | None) -> Iterable[StoredTurn]:
    """Candidates for the recent window: the session's newest turns, system turns left out.

    System turns are instructions: they come in through :func:`fixed_blocks`,
    never as history. The window considers at most ``short_buffer_turns``
    turns (seed 004's short buffer).
    """
    recent: Iterable[StoredTurn] = newest_turns(parts, session) if session else iter(())
    return islice((st for st in recent if st.role != "system"), parts.config.context.short_buffer_turns)


def recall_turns(parts: Parts, query: str, budget: int, now: datetime | None, notes: list[str]) -> list[Recalled]:
    """Older turns matching ``query``, best first, with their score breakdowns; notes go to ``notes``.

    Turns about the same thing said at different times come newest first,
    labelled (:mod:`stratamem.retrieve.updates`); relative times in the query
    are resolved against ``now`` and the date windows read are noted, and so is
    the query plan of a question that needs several turns.
    """
    index = parts.recall_index()
    if index.lexical_only:
        notes.append(parts.lexical_note)
    # Enough candidates to fill the budget with short turns, and never fewer than 25.
    k = max(25, budget // 12)
    facts = index.query_facts(query, now)
    notes += [f"time window: {w.describe()} (now {facts.now:%Y-%m-%d %H:%M} UTC)" for w in facts.windows]
    # A question needing several turns gathers or splits (retrieve/plan.py); the manifest says how.
    plan = index.plan(query, now)
    if plan.multi or plan.note:
        notes.append(f"query plan: {plan.describe()}")
    # A hit with no signal at all (fused score 0) is not a match.
    # System prompts are shown as instructions (fixed section), never as recalled history.
    hits = [
        h
        for h in index.search(query, k=k, now=now, plan=plan)
        if h.score.get("fused", 0.0) > 0 and index.turn(h.turn_ids[0]).role != "system"
    ]
    # An aggregation question asks for every instance: two adoptions are not an update of one fact.
    updates = (
        []
        if plan.shape == "aggregate"
        else find_updates(hits, index.turn, index.similarity, lexical=index.lexical_only)
    )
    hits, labels = order_updates(hits, updates)
    if labels:
        notes.append(f"knowledge updates: {update_labels(labels)}")
    return [Recalled(index.turn(h.turn_ids[0]), h.score, labels.get(h.turn_ids[0])) for h in hits]


def fixed_blocks(
    parts: Parts, session: str | None, project: str | os.PathLike[str] | None, system_prompts: str = "session"
) -> list[FixedBlock]:
    """System prompts (``session``'s own, or every session's with ``system_prompts="namespace"``),
    project instructions and working state (when a project is set), then the checkpoint."""
    fixed = checkpoint_block(parts.store, parts.namespace, session)
    if project is not None:
        fixed = project_blocks(project, parts.namespace, parts.tokenizer, parts.state(project)) + fixed
    return system_blocks(parts.store, parts.namespace, session, system_prompts) + fixed


def item_units(
    parts: Parts, query: str | None, session: str | None = None, vector_text: str | None = None
) -> list[ItemUnit]:
    """Hot memory items (kept in the prompt), then warm/cold items found for ``query``.

    Only items ``session`` sees: namespace-wide ones and its own (session-scoped
    items of other sessions never enter this session's context). The search
    tracks no access and promotes nothing (``Items.recall`` does). Extracted
    items waiting for review are recalled only with ``items.prompt_pending``.
    """
    items = parts.items()
    units = [
        ItemUnit(
            f"item:{it.id}",
            f"- ({it.type}) {it.content}",
            "hot_item",
            "hot",
            it.provenance,
            {"relevance": it.relevance},
        )
        for it in items.hot(session)
        if it.superseded_by is None and it.review != "rejected"
    ]
    if query and query.strip():
        found = items.search(query, limit=10, session=session, vector_text=vector_text)
        seen = {u.id for u in units}
        units += [
            ItemUnit(
                f"item:{it.id}",
                f"- ({it.type}) {it.content}",
                "recalled_item",
                it.tier,
                it.provenance,
                {"match": found.scores.get(it.id, 0.0)},
            )
            for it in found.items
            if f"item:{it.id}" not in seen and (it.review != "pending" or parts.config.items.prompt_pending)
        ]
    return units


def topic_turns(parts: Parts, session: str | None) -> list[StoredTurn]:
    """Seed 002's current topic: the session's turns since its last seal (right after a seal, the last topic's)."""
    if not session:
        return []
    pyramid = parts.pyramid()
    current = pyramid.open_turns(session)
    if not current:
        sealed = pyramid.nodes(level=1, session=session)
        current = pyramid.expand(sealed[-1].id) if sealed else []
    return current


def truncated(st: StoredTurn, limit: int) -> StoredTurn:
    """``st`` with text over ``limit`` characters cut and marked (seed 002's prompt view only).

    Plain content, text blocks and tool-result text are cut; tool calls, ids and
    images are kept whole, so tool pairing stays intact. The stored turn is untouched.
    """

    def cut(text: str) -> str:
        if len(text) <= limit:
            return text
        return text[:limit] + f" [truncated: {len(text) - limit:,} of {len(text):,} characters not shown]"

    content = st.turn.content
    if isinstance(content, str):
        new: str | tuple[Block, ...] = cut(content)
    else:
        new = tuple(
            TextBlock(cut(b.text))
            if isinstance(b, TextBlock)
            else dataclasses.replace(
                b, content=tuple(TextBlock(cut(p.text)) if isinstance(p, TextBlock) else p for p in b.content)
            )
            if isinstance(b, ToolResultBlock)
            else b
            for b in content
        )
    if new == content:
        return st
    return dataclasses.replace(st, turn=dataclasses.replace(st.turn, content=new))
