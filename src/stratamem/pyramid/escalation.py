"""The prompt view of seed 002: current topic, historical topics, bulks — with escalation.

:func:`prompt_view` lays the pyramid of one session out for a token budget
split 50/30/20 (``config.context`` shares): the open (current) topic's turns,
summaries of sealed topics not yet merged, and summaries of the merged
(consolidated) nodes. When a part is over its allocation, seed 002's steps are
applied in order and recorded in :attr:`PromptView.steps`:

1. ``truncate`` — current-topic messages (hot segments and open turns) over ``max_message_chars`` are cut,
   with a ``[truncated]`` marker; if still over, the oldest current turns leave the view;
2. ``summarize`` — topics are shown by their summaries (pending ones are summarized now);
3. ``merge`` — topics that do not fit are left to their bulk (older topics are
   merged by the pyramid's consolidation rule; the view omits the overflow);
4. ``drop_bulk`` — the oldest bulks leave the view.

Everything here is a *view*: nothing is deleted from the store. Canonical turns
stay until retention (:mod:`stratamem.pyramid.retention`) removes them. Assembling the
final model context (recall, rendering, manifest) is :mod:`stratamem.context.assemble`'s job.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records.nodes import Node
from ..text import check_budget
from .consolidate import Pyramid

__all__ = ["PromptView", "ViewItem", "prompt_view"]

TRUNCATION_MARKER = " [truncated]"


@dataclass(frozen=True, slots=True)
class ViewItem:
    """One entry of the view."""

    kind: str
    """``turn`` (current topic), ``topic`` (sealed topic summary) or ``bulk`` (consolidation summary)."""
    text: str
    """What the prompt shows."""
    tokens: int
    """Tokens of ``text``."""
    turn_ids: tuple[int, ...]
    """Provenance."""
    node_id: int | None = None
    """Node shown (summaries only)."""
    role: str | None = None
    """Role of a current-topic turn."""
    truncated: bool = False
    """Whether the text was cut (step 1)."""


@dataclass(frozen=True, slots=True)
class PromptView:
    """The three parts of the view and what escalation did to fit them."""

    current: tuple[ViewItem, ...]
    """Current-topic turns, oldest first."""
    topics: tuple[ViewItem, ...]
    """Sealed topics' summaries, oldest first."""
    bulks: tuple[ViewItem, ...]
    """Consolidations' summaries, oldest first."""
    steps: tuple[str, ...]
    """Escalation steps applied (``truncate``, ``summarize``, ``merge``, ``drop_bulk``)."""
    omitted_turns: tuple[int, ...]
    """Current-topic turns left out of the view (still stored)."""
    omitted_nodes: tuple[int, ...]
    """Topics and bulks left out of the view (still stored)."""

    @property
    def tokens(self) -> int:
        """Tokens of every item shown."""
        return sum(i.tokens for i in (*self.current, *self.topics, *self.bulks))


def _fit_newest(items: list[ViewItem], budget: int) -> tuple[list[ViewItem], list[ViewItem]]:
    """Keep the newest items that fit ``budget`` (kept oldest first) and return the rest."""
    kept: list[ViewItem] = []
    used = 0
    for item in reversed(items):
        if used + item.tokens > budget:
            break
        kept.append(item)
        used += item.tokens
    kept.reverse()
    return kept, items[: len(items) - len(kept)]


def prompt_view(pyramid: Pyramid, session: str, budget: int) -> PromptView:
    """Lay out ``session``'s history within ``budget`` tokens, escalating as seed 002 does.

    With per-session consolidation (``consolidation_scope = "session"``) only the
    session's own topics and bulks are listed; namespace-wide, every session's.

    Raises:
        NotFoundError: Unknown session.
        BudgetError: ``budget`` is not a positive integer.
    """
    budget = check_budget(budget)
    pyramid.store.session(pyramid.namespace, session)
    tok, cfg = pyramid.tokenizer, pyramid.config
    shares = cfg.context
    alloc = [int(budget * s) for s in (shares.current_share, shares.history_share, shares.bulk_share)]
    steps: list[str] = []

    # The current topic is held in full: the session's hot segments and its open turns.
    hot = [t for n in pyramid.nodes(level=1, tier="hot", session=session) for t in pyramid.expand(n.id)]
    current = [
        ViewItem("turn", t.text, tok.count(t.text), (t.id,), role=t.role) for t in (*hot, *pyramid.open_turns(session))
    ]
    if sum(i.tokens for i in current) > alloc[0]:
        steps.append("truncate")
        limit = cfg.pyramid.max_message_chars
        current = [
            ViewItem(
                "turn",
                i.text[:limit] + TRUNCATION_MARKER,
                tok.count(i.text[:limit] + TRUNCATION_MARKER),
                i.turn_ids,
                role=i.role,
                truncated=True,
            )
            if len(i.text) > limit
            else i
            for i in current
        ]
    current, dropped_turns = _fit_newest(current, alloc[0])

    # Per-session consolidation (the default): the view holds this session's history only.
    every = cfg.pyramid.consolidation_scope != "session"

    def roots_now() -> list[Node]:
        return [n for n in pyramid.nodes() if n.parent_id is None and (every or n.session == session)]

    roots = roots_now()
    pending = [n for n in roots if n.summary is None]
    if pending:
        steps.append("summarize")
        pyramid.summarize_pending(include_hot=True)
        roots = roots_now()

    def item(kind: str, n: Node) -> ViewItem:
        text = n.summary.text if n.summary else ""
        return ViewItem(kind, text, tok.count(text), tuple(pyramid.turn_ids(n.id)), node_id=n.id)

    topics = [item("topic", n) for n in roots if n.level == 1 and n.tier != "hot"]
    topics, dropped_topics = _fit_newest(topics, alloc[1])
    if dropped_topics:
        steps.append("merge")
    bulks = [item("bulk", n) for n in roots if n.level > 1]
    bulks, dropped_bulks = _fit_newest(bulks, alloc[2])
    if dropped_bulks:
        steps.append("drop_bulk")
    return PromptView(
        tuple(current),
        tuple(topics),
        tuple(bulks),
        tuple(steps),
        tuple(t for i in dropped_turns for t in i.turn_ids),
        tuple(i.node_id for i in (*dropped_topics, *dropped_bulks) if i.node_id is not None),
    )
