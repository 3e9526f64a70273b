"""The context policies and their registry: the one place policy names come from.

A policy names the order in which sections draw on the budget and their
shares; a section's unused share flows on to the next:

* ``hybrid`` (default): recent window 50%, recalled history (memory items and
  verbatim turns) 30%, summaries 20% — when the query is about the current
  thread. The window's share is sized by how well the query matches it
  (:func:`~stratamem.context.window.window_fraction`): a query whose best recalled turns lie
  outside the window (a question about the past) keeps only a small window, and recalled
  history then draws as under ``recall`` (verbatim turns before summaries and
  before memory items extracted from turns). Without a query the window keeps its share.
* ``topics`` (seed 002): the current topic's messages 50% (when the topic
  exceeds that share, oversized messages are truncated with a marker),
  historical topic summaries 30% (newest first; one not summarized yet is shown
  whole, as an excerpt or as a summary made on demand), bulk summaries 20%
  (newest first: when bulks do not fit, the oldest is dropped first);
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

:data:`POLICIES` maps each name to its :class:`~stratamem.context.policy.Policy`;
:func:`policy_names` is what every shell offers (the CLI's ``--policy``
choices, the MCP tool's and the HTTP API's schemas) and what
:class:`~stratamem.config.Config` validates ``context.policy`` against. A new
policy is a subclass here, registered with :func:`register`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from ..config import register_choices
from ..errors import ConfigError, ValidationError
from .assembly import Allocation, Assembly, Budget
from .gather import Parts, Request, fixed_blocks, topic_turns, truncated
from .policy import Policy
from .sources import topic_tiers
from .summaries import SummarySection
from .units import Candidates, Recalled, SummaryUnit
from .window import Window, shrink_window, window_fraction

if TYPE_CHECKING:
    from ..records.manifests import Context

__all__ = [
    "POLICIES",
    "HybridPolicy",
    "PolicyName",
    "PyramidPolicy",
    "RecallPolicy",
    "StateFirstPolicy",
    "TopicsPolicy",
    "get_policy",
    "policy_names",
    "register",
    "unregister",
]


class HybridPolicy(Policy):
    """The default: the window, recalled history and summaries, the window sized by the query."""

    name = "hybrid"
    description = (
        "recent window 50%, recalled history 30%, summaries 20%; the window shrinks for a question about the past"
    )

    def size_window(self, asm: Assembly, window: Window, alloc: Allocation, recalled: Sequence[Recalled]) -> None:
        """Shrink the window to the part of its share the query's match leaves it (:func:`window_fraction`)."""
        keep, match = window_fraction(asm.query, recalled, window.ids)
        if keep < 1:
            # The query is about older history: shrink the window to ``keep`` of its share.
            shrink_window(asm, window, alloc, keep, match)


class StateFirstPolicy(Policy):
    """Seed 004: instructions and working state, then the conversation window, then recalled history."""

    name = "state_first"
    description = "instructions and working state first, then the recent window, then recalled history"


class RecallPolicy(Policy):
    """No window: memory items and recalled verbatim turns first, summaries get what is left."""

    name = "recall"
    description = "no recent window: recalled turns and memory items first, summaries get what is left"
    window = False
    recall_first = True
    defer_extracted_items = True


class PyramidPolicy(Policy):
    """Seed 000: the hot window, the warm chunks most relevant to the query, macro summaries."""

    name = "pyramid"
    description = "hot window, the three most relevant warm chunks expanded, macro summaries; recall takes the rest"
    recall_first = True

    def summary_sources(
        self, parts: Parts, query: str | None, vector_text: str | None = None
    ) -> tuple[list[SummaryUnit], list[SummaryUnit]]:
        """The top-3 relevant warm chunks (expandable) and the macro summaries."""
        return parts.summary_index.pyramid_parts(parts.pyramid(), query, vector_text=vector_text)

    def present(self, cands: Candidates) -> tuple[bool, bool]:
        return bool(cands.summaries) or bool(cands.recalled) or bool(cands.items), bool(cands.bulks)

    def allocate(self, asm: Assembly, shares: tuple[float, float, float], cands: Candidates) -> Allocation:
        """The general shares, and the macros' reserve: their bulk share, or less when they need less."""
        alloc = super().allocate(asm, shares, cands)
        need = sum(asm.tokenizer.count(su.text) + 1 for su in cands.bulks)
        return dataclasses.replace(alloc, reserve=min(alloc.tokens(alloc.bulk), need))

    def recall_room(self, asm: Assembly, alloc: Allocation, cands: Candidates, strict: bool) -> int:
        """What the warm chunks (their history share) and the macros (their reserve) will not use."""
        warm_need = sum(
            su.expanded_tokens if su.expand is not None else asm.tokenizer.count(su.text) for su in cands.summaries
        )
        return max(0, asm.left.left - min(alloc.tokens(alloc.history), warm_need) - alloc.reserve)

    def reserved_turns(self, alloc: Allocation, cands: Candidates) -> set[int]:
        """Turns of a warm chunk that will be expanded are shown there, not recalled twice."""
        room = alloc.tokens(alloc.history)
        return {
            t for su in cands.summaries if su.expand is not None and 0 < su.expanded_tokens <= room for t in su.turn_ids
        }

    def fill_summaries(
        self, section: SummarySection, cands: Candidates, alloc: Allocation
    ) -> list[tuple[SummaryUnit, int]]:
        """Warm chunks first (leaving the macros their reserve), then macros, then any chunk
        that did not fit gets what is still free."""
        waiting = section.take(cands.summaries, Budget(max(0, section.asm.left.left - alloc.reserve)))
        return section.take(cands.bulks, section.room(), overlap=True) + section.take(
            [su for su, _ in waiting], section.room()
        )


class TopicsPolicy(Policy):
    """Seed 002's three tiers: the current topic's messages, topic summaries, bulk summaries."""

    name = "topics"
    description = "the current topic 50% (long messages truncated), topic summaries 30%, bulk summaries 20%"
    layout_window = "candidates"

    def gather(self, parts: Parts, request: Request) -> Candidates:
        """The current topic (escalation step 1: when its turns exceed the current share of the budget,
        a message over ``pyramid.max_message_chars`` is shown truncated with a marker), topic and bulk
        summaries, the fixed blocks; no recall, no items.

        Raises:
            ConfigError: The pyramid is disabled.
        """
        if not parts.config.pyramid.enabled:
            raise ConfigError("the topics policy needs the pyramid (pyramid.enabled = true)")
        current = [st for st in topic_turns(parts, request.session) if st.role != "system"]
        limit = parts.config.pyramid.max_message_chars
        # Seed 002: long messages are cut only "when the current topic exceeds its allocation".
        if sum(st.tokens for st in current) > parts.config.context.current_share * request.budget:
            current = [truncated(st, limit) for st in current]
        window = current[::-1]
        topics, bulks = parts.summary_index.topics(parts.pyramid(), request.session)
        return Candidates(
            fixed=fixed_blocks(parts, request.session, request.project, request.system_prompts),
            recent=window,
            summaries=topics,
            bulks=bulks,
        )

    def annotate(self, ctx: Context, cands: Candidates, parts: Parts) -> Context:
        """Seed 002's per-tier totals and the source tokens they stand for, in the manifest."""
        # A truncated turn keeps its stored token count: the tiers' source tokens are the stored turns'.
        turn_tokens = {st.id: st.tokens for st in cands.recent}
        tiers, source = topic_tiers(ctx.manifest, parts.pyramid(), turn_tokens)
        return dataclasses.replace(
            ctx, manifest=dataclasses.replace(ctx.manifest, tier_tokens=tiers, source_tokens=source)
        )

    def present(self, cands: Candidates) -> tuple[bool, bool]:
        return bool(cands.summaries), bool(cands.bulks)

    def fill_summaries(
        self, section: SummarySection, cands: Candidates, alloc: Allocation
    ) -> list[tuple[SummaryUnit, int]]:
        """Topics take their share, bulks the rest; what is still free then goes to the topics that did
        not fit their share (a topic not summarized yet shown whole, or degraded: never dropped while
        an excerpt or a summary of it fits)."""
        share = alloc.tokens(alloc.history) if alloc.history else 0
        # A topic not summarized yet that does not fit the share whole waits for the room left
        # after the bulks (it may fit there whole); only then is it degraded (an excerpt, a summary).
        waiting = section.take(cands.summaries, Budget(min(section.asm.left.left, share)), defer=True)
        return section.take(cands.bulks, section.room()) + section.take([su for su, _ in waiting], section.room())


_REGISTRY: dict[str, Policy] = {}

POLICIES: Mapping[str, Policy] = MappingProxyType(_REGISTRY)
"""Every registered policy by name, in registration order (a read-only view of the registry)."""


def register(policy: Policy) -> Policy:
    """Add ``policy`` under its name; returns it.

    Raises:
        ValidationError: The name is empty or already registered.
    """
    if not policy.name or not policy.name.isidentifier():
        raise ValidationError(f"a policy needs a name that is an identifier, got {policy.name!r}")
    if policy.name in _REGISTRY:
        raise ValidationError(f"policy {policy.name!r} is already registered")
    _REGISTRY[policy.name] = policy
    return policy


def unregister(name: str) -> None:
    """Remove a policy added with :func:`register` (tests; the built-in ones stay)."""
    if name in _BUILT_IN:
        raise ValidationError(f"policy {name!r} is built in")
    _REGISTRY.pop(name, None)


def policy_names() -> tuple[str, ...]:
    """The registered policy names, in registration order."""
    return tuple(_REGISTRY)


def get_policy(name: str) -> Policy:
    """The policy registered as ``name``.

    Raises:
        ValidationError: No policy has that name (the message lists the names).
    """
    policy = _REGISTRY.get(name) if isinstance(name, str) else None
    if policy is None:
        raise ValidationError(f"unknown policy {name!r} (expected one of {', '.join(_REGISTRY)})")
    return policy


for _policy in (HybridPolicy(), TopicsPolicy(), PyramidPolicy(), StateFirstPolicy(), RecallPolicy()):
    register(_policy)
_BUILT_IN = frozenset(_REGISTRY)

# ``context.policy`` in a Config is checked against the registry at validation time.
register_choices("ContextConfig", "policy", policy_names)

if TYPE_CHECKING:
    PolicyName = str
else:
    PolicyName = Literal[policy_names()]
    """The built-in policy names as a type, for the shells' request schemas (fixed when this module
    loads; a shell built per server reads :func:`policy_names` instead)."""
