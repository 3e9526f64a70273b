"""The pyramid: segments, consolidation, tiers and summaries of one namespace.

:class:`Pyramid` turns stored turns into one tree of nodes:

* **level 1** — segments sealed by the configured :mod:`segmenter <stratamem.pyramid.segment>`
  (or by a manual :meth:`Pyramid.seal`), per session;
* **levels 2+** — consolidations of consecutive lower nodes, namespace-wide:
  seed 000's mini (25 turns) and macro (100 turns) chunks, or seed 002's bulks
  merging the 3 oldest topics once the topics' summaries exceed the
  historical-topic allocation.

Invariant (property-tested): every turn belongs to at most one node per level,
and the nodes of each level cover a gap-free prefix — per session at level 1,
of the level below otherwise. Seed 000 checked consolidation only on multiples
of 10 turns and so skipped intervals; here consolidation is decided from the
pending nodes themselves, so nothing is skipped or covered twice. The
``node_turns`` primary key makes the database refuse an overlap.

Structure (seal, consolidate, tier moves, archive writes) changes in one
transaction, which first takes the namespace's pyramid lock (an advisory lock
on PostgreSQL; ``BEGIN IMMEDIATE`` on SQLite), so concurrent writers of one
namespace queue instead of sealing the same turns. Summaries are written
after it, node by node, so a slow or failing model never holds the write
lock or loses a turn.

Nothing the summarizer, the embedder or an event handler raises leaves
:meth:`Pyramid.update`: any exception of the summarizer leaves the node with
an extractive summary, ``summary_status = 'failed'``, ``"<type>: <message>"``
in ``summary_error`` and a ``summarizer.failed`` event; an embedder failure
emits ``embed.failed`` and also marks the node ``failed``
(``embedding failed: …``); a failing handler is logged and reported as a
``hook.failed`` event. A ``failed`` node is not retried on later adds
(``summarize_pending`` takes ``pending`` nodes only): :meth:`Pyramid.retry_failed`
retries it. With ``auto_extract_facts``, a segment's key facts also become
memory items (auto-extracted, cold, awaiting review), where the store keeps items.

Tier rules are in :mod:`stratamem.pyramid.tiers`, the archive in :mod:`stratamem.pyramid.archive`,
retention in :mod:`stratamem.pyramid.retention`, the prompt view with seed 002's
escalation in :mod:`stratamem.pyramid.escalation`.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .archive import Archive, is_reference, reference_record
from ..config import Config
from ..embed import model_name
from ..embed.prefetch import PrefetchedEmbedder
from ..errors import ArchiveError, ConfigError, DecodeError, ModelError, StratamemError, ValidationError
from ..events import Event, EventBus
from ..items.search import embed_texts
from ..records.nodes import Node, TierStats
from ..records import StoredTurn
from .segment import FixedSegmenter, Seal, Segmenter, TopicSegmenter, UserTurnSegmenter
from .spend import LevelSpend, SummarySpend
from ..store.new_rows import NewNode
from ..records import Summary
from ..summarize import Summarizer
from ..summarize.extractive import ExtractiveSummarizer
from ..summarize.facts import item_facts
from ..summarize.heuristic import HeuristicSummarizer
from .tiers import decode_turns, encode_turns, plan_tiers, turn_from_record
from .turn_vectors import turn_mean_vectors
from ..tokens import Tokenizer

__all__ = ["Expansion", "LevelRule", "LevelStats", "Plan", "Pyramid", "make_summarizer", "plan_for"]

log = logging.getLogger("stratamem.pyramid")

_SUMMARY_GROUP = 64
"""Nodes of one level summarized before their texts to embed (summaries, key facts) go in one call."""

_MIN_SUMMARY_TOKENS = 24


@dataclass(frozen=True, slots=True)
class LevelRule:
    """When pending nodes of the level below are consolidated into one node of this level."""

    kind: str
    """Kind of the consolidation (``mini``, ``macro``, ``bulk``)."""
    min_turns: int = 0
    """Consolidate the oldest pending nodes as soon as they cover at least this many turns."""
    children: int = 0
    """Or: merge this many oldest pending nodes …"""
    over_tokens: int = 0
    """… once the pending nodes' summaries (estimated) exceed this many tokens (seed 002)."""

    def take(self, pending: Sequence[Node], estimate: Callable[[Node], int]) -> int:
        """How many of the oldest ``pending`` nodes to consolidate now (0: none)."""
        if self.min_turns:
            total = 0
            for i, node in enumerate(pending):
                total += node.turn_count
                if total >= self.min_turns:
                    return i + 1
            return 0
        if len(pending) >= self.children and sum(estimate(n) for n in pending) > self.over_tokens:
            return self.children
        return 0


@dataclass(frozen=True, slots=True)
class Plan:
    """How a configuration shapes the tree."""

    segmenter: Segmenter
    """Level-1 rule."""
    levels: tuple[LevelRule, ...]
    """Rules for levels 2, 3, …"""


@dataclass(frozen=True, slots=True)
class LevelStats:
    """Size and compression of one level."""

    level: int
    """Level (1 = segments)."""
    nodes: int
    """Nodes at the level."""
    turns: int
    """Turns they cover."""
    tokens: int
    """Exact tokens of those turns."""
    summarized: int
    """Nodes with a summary."""
    summarized_tokens: int
    """Turn tokens under the summarized nodes."""
    summary_tokens: int
    """Tokens of their summaries."""

    @property
    def compression_ratio(self) -> float:
        """Turn tokens per summary token over the summarized nodes (0.0 when none is summarized)."""
        return self.summarized_tokens / self.summary_tokens if self.summary_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        out = {k: getattr(self, k) for k in self.__slots__}  # type: ignore[attr-defined]
        out["compression_ratio"] = round(self.compression_ratio, 3)
        return out


@dataclass(frozen=True, slots=True)
class Expansion:
    """The full turns of a node and where each segment's turns were read from."""

    turns: list[StoredTurn]
    """The turns, in order."""
    sources: Mapping[int, str] = field(default_factory=dict)
    """Per segment expanded: ``turns`` (the canonical table), ``warm`` (its warm encoding) or ``archive``."""
    fallbacks: Mapping[int, str] = field(default_factory=dict)
    """Segments whose tier copy could not be read (the error), read from the canonical turns instead."""


def plan_for(config: Config) -> Plan:
    """The segmenter and consolidation rules a configuration asks for.

    ``pyramid``: fixed segments of ``micro_chunk_size`` turns, then mini and macro
    consolidations of at least ``mini_chunk_size`` / ``macro_chunk_size`` turns.
    ``topics``: topic segments, then bulks of ``bulk_merge_size`` topics once the
    topics' summaries exceed the historical-topic share of the context budget.
    ``custom``: the configured ``segmenter`` with mini and macro levels.
    """
    p, c = config.pyramid, config.context
    if p.preset == "topics" or (p.preset == "custom" and p.segmenter == "topic"):
        current = c.current_share * c.default_budget
        segmenter: Segmenter = TopicSegmenter(p.boundary_phrases, timedelta(minutes=p.silence_minutes),
                                              max(1, int(p.topic_token_threshold * current)))
    elif p.preset == "custom" and p.segmenter == "user_turn":
        segmenter = UserTurnSegmenter()
    else:
        segmenter = FixedSegmenter(p.micro_chunk_size)
    if p.preset == "topics":
        levels: tuple[LevelRule, ...] = (LevelRule("bulk", children=p.bulk_merge_size,
                                                   over_tokens=int(c.history_share * c.default_budget)),)
    else:
        levels = (LevelRule("mini", min_turns=p.mini_chunk_size), LevelRule("macro", min_turns=p.macro_chunk_size))
    return Plan(segmenter, levels)


def make_summarizer(config: Config, tokenizer: Tokenizer, *, summarizer: Summarizer | None = None) -> Summarizer:
    """The summarizer ``config.pyramid.summarizer`` names, or ``summarizer`` if given.

    The ``llm`` strategy needs a model, which is never built from a string:
    pass ``summarizer=LLMSummarizer(model, tokenizer)``.

    Raises:
        ConfigError: ``llm`` is configured but no summarizer instance was passed.
    """
    if summarizer is not None:
        return summarizer
    name = config.pyramid.summarizer
    if name == "heuristic":
        return HeuristicSummarizer(tokenizer)
    if name == "extractive":
        return ExtractiveSummarizer(tokenizer)
    raise ConfigError("pyramid.summarizer is 'llm': pass summarizer=LLMSummarizer(chat_model, tokenizer) "
                      "(the model named by pyramid.summarization_model or llm.model)")


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Pyramid:
    """Segments, consolidations, tiers and summaries of one namespace.

    Args:
        store: A store with a node feature store (``store.nodes``; SQLite today).
        namespace: Whose memory.
        config: Settings (``config.pyramid``; ``config.context`` for seed 002's allocations).
        tokenizer: Counts summary and view tokens.
        events: Bus for ``segment.sealed``, ``node.consolidated``, ``tier.changed``,
            ``summarizer.failed``, ``embed.failed``, ``items.extract_failed``,
            ``expand.fallback`` and ``hook.failed`` (plus the ``items.*`` events
            of auto-extracted memory items).
        summarizer: Strategy instance (default: the one the config names).
        embedder: Optional object with ``embed_batch(texts) -> np.ndarray``; summaries are embedded.
        archive_dir: Directory of the cold archive; ``None`` keeps cold content only
            in the canonical turns (no archive).
        clock: Wall clock for archive days, ``archived_at`` and retention (tests inject one).

    Raises:
        ConfigError: The store keeps no nodes, or ``llm`` is configured without a summarizer.
    """

    def __init__(self, store: Any, namespace: str, *, config: Config, tokenizer: Tokenizer,
                 events: EventBus | None = None, summarizer: Summarizer | None = None, embedder: Any = None,
                 archive_dir: str | os.PathLike[str] | None = None,
                 clock: Callable[[], datetime] = _utcnow) -> None:
        if not hasattr(store, "nodes"):
            raise ConfigError(f"the {getattr(store, 'backend', '?')} store keeps no pyramid nodes yet")
        self.store = store
        self.namespace = namespace
        self.config = config
        self.tokenizer = tokenizer
        self.events = events or EventBus()
        self.summarizer = make_summarizer(config, tokenizer, summarizer=summarizer)
        self.fallback = ExtractiveSummarizer(tokenizer)
        self.embedder = embedder
        # Summaries and key facts of a group of segments are embedded in one call (see summarize_pending).
        self._batched = PrefetchedEmbedder(embedder) if embedder is not None else None
        # The model name the recall index records for vectors this embedder made (TurnIndexer.model):
        # a summary's vector is derived from its turns' stored vectors of that model (turn_vectors).
        self._model = model_name(embedder) if embedder is not None else ""
        # Node id -> its vector derived in _prefetch, or None when it cannot have one (embed the text).
        self._derived: dict[int, np.ndarray | None] = {}
        self.archive = Archive(archive_dir, namespace) if archive_dir is not None else None
        self.clock = clock
        self.plan = plan_for(config)
        self._nodes = store.nodes
        self._item_api: Any = None
        # (id, timestamp) of the newest turn seen and the newest timestamp so far: see _reference().
        self._newest: tuple[int, datetime | None, datetime | None] = (0, None, None)

    # --- budgets -------------------------------------------------------------------------

    def summary_budget(self, node: Node) -> int:
        """Summary tokens allowed for a node: a share of its turns, capped by the level's target."""
        p = self.config.pyramid
        cap = p.topic_summary_tokens if node.level == 1 else p.bulk_summary_tokens
        return max(1, min(cap, max(_MIN_SUMMARY_TOKENS, math.ceil(node.tokens * p.summary_ratio))))

    def _estimate(self, node: Node) -> int:
        return node.summary_tokens if node.summary_tokens is not None else self.summary_budget(node)

    # --- writing -------------------------------------------------------------------------

    def update(self, sessions: Iterable[str] | None = None) -> list[int]:
        """Seal what the segmenter says, consolidate, move tiers, then summarize.

        Args:
            sessions: Sessions that received turns (default: every session of the namespace).

        Returns:
            Ids of the nodes created.

        Raises:
            BackendError: The store or the archive failed; the structure is as it was.
        """
        names = list(sessions) if sessions is not None else [s.name for s in self.store.sessions(self.namespace)]
        return self._run(names, manual=False)

    def seal(self, session: str) -> Node | None:
        """Seal the open turns of ``session`` into a segment now (reason ``manual``).

        Returns:
            The new segment, or ``None`` if nothing was open.

        Raises:
            NotFoundError: Unknown session.
        """
        self.store.session(self.namespace, session)
        created = self._run([session], manual=True)
        segments = [n for n in (self._nodes.get(self.namespace, i) for i in created) if n.level == 1]
        return segments[-1] if segments else None

    def _run(self, sessions: Sequence[str], *, manual: bool) -> list[int]:
        events: list[Event] = []
        created: list[int] = []
        with self.store.transaction():
            # Two writers of one namespace would both seal the same open turns
            # (a duplicate key) or deadlock on each other's node rows: queue them.
            self._nodes.lock(self.namespace)
            for s in sessions:
                created += self._seal(s, manual, events)
            if created:
                created += self._consolidate(sessions, events)
                self._move_tiers(events)
        for e in events:
            self._emit(e)
        self.summarize_pending()
        return created

    def _event(self, event_kind: str, **data: Any) -> Event:
        return Event(event_kind, data, namespace=self.namespace)

    def _emit(self, event: Event) -> None:
        """Emit an event; a failing handler is logged and reported, never raised.

        The pyramid's work is committed when it emits: a subscriber's error must
        not abort the summaries still to write or surface in ``Memory.add``.
        """
        try:
            self.events.emit(event)
        except Exception as exc:  # any subscriber bug; made visible below, not swallowed
            log.warning("a handler of %s failed: %s", event.kind, type(exc).__name__)
            if event.kind == "hook.failed":
                return
            self._emit(self._event("hook.failed", event=event.kind, error=type(exc).__name__,
                                   message=str(exc)[:200]))

    def _seal(self, session: str, manual: bool, events: list[Event]) -> list[int]:
        sealed = self._nodes.sealed_seq(self.namespace, session)
        open_turns = self.store.turns(self.namespace, session, min_seq=sealed + 1)
        if not open_turns:
            return []
        split = self.plan.segmenter.split(open_turns)
        seals = list(split.seals)
        if manual and split.open:
            seals.append(Seal(split.open, "manual"))
        out = []
        for seal in seals:
            if not seal.turns:
                continue
            turns = seal.turns
            # A segment's span starts right after the last sealed one: sequence numbers
            # of forgotten turns (stratamem.forget) stay accounted for, never a gap.
            lo, sealed = sealed + 1, turns[-1].seq
            node_id = self._nodes.insert(self.namespace, NewNode(
                level=1, kind=self.plan.segmenter.kind, session=session, seq_range=(lo, turns[-1].seq),
                turn_ids=tuple(t.id for t in turns), tokens=sum(t.tokens for t in turns),
                start=min(t.timestamp for t in turns), end=max(t.timestamp for t in turns),
                reason=seal.reason, tier="hot"))
            out.append(node_id)
            events.append(self._event("segment.sealed", node_id=node_id, session=session, turns=len(turns),
                                      reason=seal.reason))
        return out

    def _consolidate(self, sessions: Sequence[str], events: list[Event]) -> list[int]:
        """Consolidate pending nodes level by level: per session (default) or namespace-wide.

        Per session, a consolidation merges nodes of one session only and records
        that session, so a bulk never mixes conversations nor shows up in another
        session's view; ``consolidation_scope = "namespace"`` merges consecutive
        nodes of every session (seed 000's single-conversation pyramid).
        """
        if self.config.pyramid.consolidation_scope == "namespace":
            return self._consolidate_in(None, events)
        out: list[int] = []
        for s in dict.fromkeys(sessions):
            out += self._consolidate_in(s, events)
        return out

    def _consolidate_in(self, session: str | None, events: list[Event]) -> list[int]:
        out = []
        for level, rule in enumerate(self.plan.levels, start=2):
            if session is None:
                # Only nodes newer than the last consolidated child can be pending (the levels
                # are gap-free prefixes), so the read stays small however long the history is.
                pending = self._nodes.list(self.namespace, level=level - 1, unparented=True,
                                           after_id=self._nodes.last_child_id(self.namespace, level))
            else:
                pending = self._nodes.list(self.namespace, level=level - 1, unparented=True, session=session)
            while (n := rule.take(pending, self._estimate)) > 0:
                children, pending = pending[:n], pending[n:]
                ids = tuple(sorted(t for c in children for t in self._nodes.turn_ids(self.namespace, c.id)))
                node_id = self._nodes.insert(self.namespace, NewNode(
                    level=level, kind=rule.kind, session=session, seq_range=None, turn_ids=ids,
                    tokens=sum(c.tokens for c in children), start=min(c.start for c in children),
                    end=max(c.end for c in children), reason="consolidation", tier=None))
                self._nodes.set_parent(self.namespace, [c.id for c in children], node_id)
                out.append(node_id)
                events.append(self._event("node.consolidated", node_id=node_id, level=level, kind=rule.kind,
                                          children=[c.id for c in children], turns=len(ids)))
        return out

    def _move_tiers(self, events: list[Event]) -> None:
        p, ns = self.config.pyramid, self.namespace
        # Cold segments never move again, so only the others are read, plus the
        # newest hot_chunks (they claim the hot slots whatever their tier): the
        # cost of a seal does not grow with the namespace's history.
        live = self._nodes.list(ns, level=1, tier_not="cold")
        newest = self._nodes.list(ns, level=1, newest_first=True, limit=p.hot_chunks) if p.hot_chunks > 0 else []
        # Cold segments newer than the oldest live one still count in the warm window's depth.
        colder = self._nodes.list(ns, level=1, tier="cold", after_id=live[0].id) if live else []
        segments = sorted({n.id: n for n in (*live, *newest, *colder)}.values(), key=lambda n: n.id)
        reference = self._reference() or self.clock()
        covered_nodes: set[int] = set()
        if self.plan.levels:
            top = len(self.plan.levels) + 1
            covered = self._nodes.covered(ns, top, [n.first_turn_id for n in live])
            covered_nodes = {n.id for n in live if n.first_turn_id in covered}
        moves = plan_tiers(segments, hot_chunks=p.hot_chunks, hot_max_tokens=p.hot_max_tokens,
                           covered_by_top=covered_nodes, reference=reference,
                           warm_max_age=timedelta(hours=p.warm_max_age_hours), warm_max_turns=p.warm_max_turns)
        if not moves:
            return
        by_id = {n.id: n for n in segments}
        turns = {n_id: self.store.turns(ns, ids=self._nodes.turn_ids(ns, n_id)) for n_id in moves}
        cold = [i for i, tier in moves.items() if tier == "cold"]
        # One instant names the archive day file and stamps archived_at, so retention
        # expires a node together with the file that holds its content.
        at = self.clock().astimezone(timezone.utc)
        ref = None
        if cold and self.archive is not None and p.archive_cold_content:
            # References, not text: the turns table still holds every one of these turns.
            ref = self.archive.write({i: [reference_record(t.id) for t in turns[i]] for i in cold}, day=at.date())
        for node_id, tier in moves.items():
            node = by_id[node_id]
            if tier == "warm":
                fmt, content = encode_turns(turns[node_id], p.warm_format)
                self._nodes.set_tier(ns, node_id, "warm", at=at, view_tokens=self.tokenizer.count(content),
                                     warm=(fmt, content))
            else:
                self._nodes.set_tier(ns, node_id, "cold", at=at, view_tokens=self._cold_tokens(node.summary),
                                     archive_ref=ref)
            events.append(self._event("tier.changed", node_id=node_id, before=node.tier, after=tier))

    def _reference(self) -> datetime | None:
        """The namespace's newest turn time ("now" for tier ages), read incrementally.

        Turns are immutable and ids only grow, so only turns above the last id
        seen can raise it: one index range scan over the new turns instead of a
        scan of the whole history on every seal. If the last turn seen is gone
        or changed (a rolled-back write whose id was reused, a purge), it is
        recomputed from scratch.
        """
        last_id, last_ts, newest = self._newest
        if last_id and self._nodes.turn_time(self.namespace, last_id) != last_ts:
            last_id, last_ts, newest = 0, None, None
        found = self._nodes.newest_turn_after(self.namespace, last_id)
        if found is not None:
            max_id, ts = found
            newest = ts if newest is None or ts > newest else newest
            self._newest = (max_id, self._nodes.turn_time(self.namespace, max_id), newest)
        return newest

    def _cold_tokens(self, summary: Summary | None) -> int | None:
        if summary is None:
            return None
        return self.tokenizer.count(summary.text) + sum(self.tokenizer.count(f.text) for f in summary.key_facts)

    # --- summaries -------------------------------------------------------------------------

    def summarize_pending(self, *, include_hot: bool | None = None) -> int:
        """Summarize nodes that need a summary now; returns how many were summarized.

        With ``defer_summarization`` hot segments wait until they are demoted
        (or until a consolidation needs them); ``include_hot=True`` summarizes them too.
        """
        defer = self.config.pyramid.defer_summarization if include_hot is None else not include_hot
        if not self.config.pyramid.auto_summarize:
            return 0
        todo = [n for n in self._nodes.list(self.namespace, status="pending")
                if not (n.level == 1 and defer and n.tier == "hot")]
        segments = [n for n in todo if n.level == 1]
        done = 0
        # Segments first, in groups: every summary of a group is made, then all their
        # texts to embed (summaries, key facts) go to the encoder in one call, then each
        # node is written as before. Consolidations follow; they read their children's
        # summaries from the store, which are all written by then.
        for lo in range(0, len(segments), _SUMMARY_GROUP):
            made = [(n, self._make_summary(n)) for n in segments[lo:lo + _SUMMARY_GROUP]]
            done += self._finish_group(made)
        # Consolidations the same way, one level at a time (a merge reads its children's
        # summaries, so a level is written before the next is made): their summaries
        # were embedded one text per call, one encoder thread idle (issue 12).
        merges = sorted((n for n in todo if n.level > 1), key=lambda n: (n.level, n.id))
        for level in dict.fromkeys(n.level for n in merges):
            nodes = [n for n in merges if n.level == level]
            for lo in range(0, len(nodes), _SUMMARY_GROUP):
                made = []
                for node in nodes[lo:lo + _SUMMARY_GROUP]:
                    done_children, m = self._make_merge(node)
                    done += done_children
                    made.append((node, m))
                done += self._finish_group(made)
        return done

    def _finish_group(self, made: list[tuple[Node, tuple[Summary, list[str]] | None]]) -> int:
        """Embed a group's texts in one call, then write each node; returns how many were written."""
        self._prefetch(made)
        done = 0
        try:
            for node, m in made:
                if m is not None:
                    done += self._finish_summary(node, *m)
        finally:
            if self._batched is not None:
                self._batched.clear()
            self._derived.clear()
        return done

    def _prefetch(self, made: list[tuple[Node, tuple[Summary, list[str]] | None]]) -> None:
        """Embed, in one call, every text :meth:`_finish_summary` will embed for these nodes' summaries."""
        if self._batched is None:
            return
        if self.config.pyramid.auto_embed:
            # Summary vectors from the turns' stored vectors (one read for the group); only
            # the summaries that cannot have one are embedded from their text.
            wanted = {node.id: self._nodes.turn_ids(self.namespace, node.id)
                      for node, m in made if m is not None and m[0].text}
            got = turn_mean_vectors(self.store, self.namespace, self._model, wanted)
            self._derived = {node_id: got.get(node_id) for node_id in wanted}
        texts: list[str] = []
        for node, m in made:
            if m is None:
                continue
            summary, errors = m
            # Only segments are mined for items (see _finish_summary).
            if node.level == 1 and not errors and self.config.pyramid.auto_extract_facts:
                texts += [f.text for f in item_facts(summary)]
            if self.config.pyramid.auto_embed and summary.text and self._derived.get(node.id) is None:
                texts.append(summary.text)
        self._batched.fill(texts)

    def summarize_nodes(self, node_ids: Iterable[int]) -> int:
        """Summarize the given nodes again now (after a forget rebuilt them); returns how many were summarized.

        Nodes are taken lowest level first, so a consolidation merges its
        children's new summaries. Unknown ids are skipped.
        """
        wanted = set(node_ids)
        done = 0
        for node in sorted((n for n in self._nodes.list(self.namespace) if n.id in wanted),
                           key=lambda n: (n.level, n.id)):
            done += self._summarize(self._nodes.get(self.namespace, node.id), force=True)
        return done

    def retry_failed(self) -> int:
        """Summarize (and embed) again every ``failed`` node; returns how many now succeeded.

        This is the only retry: adds never re-run a failed node, so a model that
        keeps failing costs one failed call per node, not one per add.
        """
        ok = 0
        for node in self._nodes.list(self.namespace, status="failed"):
            self._summarize(node, force=True)
            ok += self._nodes.get(self.namespace, node.id).summary_status == "ok"
        return ok

    def _summarize(self, node: Node, *, force: bool = False) -> int:
        """Summarize one node (children first); returns the number of nodes summarized.

        Never raises for a summarizer, embedder or item failure: the node records
        it (``failed``, with the error) and an event says so. Only a store
        failure while writing the result propagates.
        """
        done = 0
        if node.level == 1:
            made = self._make_summary(node)
        else:
            done, made = self._make_merge(node)
        return done + (self._finish_summary(node, *made) if made is not None else 0)

    def _make_merge(self, node: Node) -> tuple[int, tuple[Summary, list[str]] | None]:
        """A consolidation's summary merged from its children's (pending children summarized first).

        Returns how many children were summarized on the way, and the summary
        with its errors (``None`` if none could be made, recorded).
        """
        done = 0
        children = self._nodes.list(self.namespace, parent_id=node.id)
        for child in children:
            # A child that already failed without a summary waits for retry_failed, like every failure.
            if child.summary is None and child.summary_status == "pending":
                done += self._summarize(child)
        parts = [p for p in (self._nodes.get(self.namespace, c.id).summary for c in children) if p is not None]
        budget, top = self.summary_budget(node), node.level == len(self.plan.levels) + 1
        return done, self._run_summarizer(node, lambda s: s.merge(parts, max_tokens=budget, executive=top))

    def _make_summary(self, node: Node) -> tuple[Summary, list[str]] | None:
        """A segment's summary and the errors met making it; ``None`` if none could be made (recorded)."""
        budget = self.summary_budget(node)
        try:
            turns = self.expand(node.id)
        except StratamemError as exc:
            self._failed(node, f"turns unavailable: {type(exc).__name__}: {exc}", exc)
            return None
        return self._run_summarizer(node, lambda s: s.summarize(turns, max_tokens=budget))

    def _run_summarizer(self, node: Node, run: Callable[[Summarizer], Summary]) -> tuple[Summary, list[str]] | None:
        """``run`` with the summarizer, else with the fallback; ``None`` (recorded) when both fail."""
        errors: list[str] = []
        try:
            summary = run(self.summarizer)
        except Exception as exc:  # any failure of a pluggable summarizer: fall back, keep it visible
            self._record_spend(node.level)  # a failed answer still cost its tokens
            errors.append(f"{type(exc).__name__}: {exc}")
            self._emit(self._event("summarizer.failed", node_id=node.id, level=node.level,
                                   summarizer=self.summarizer.name, error=type(exc).__name__))
            try:
                summary = run(self.fallback)
            except Exception as again:  # the fallback is ours, but add() must not see its bug either
                # Already reported as summarizer.failed just above: record it, no second event.
                self._nodes.set_status(self.namespace, node.id, "failed",
                                       f"{errors[0]}; fallback {type(again).__name__}: {again}")
                return None
        if not errors:
            self._record_spend(node.level)
        return summary, errors

    def _finish_summary(self, node: Node, summary: Summary, errors: list[str]) -> int:
        """Extract the segment's items, embed the summary and store it; returns 1."""
        errors = list(errors)
        if not errors and node.level == 1:
            # Only a summary that stands is mined for items: a fallback's facts would be
            # joined by the retry's, two wordings of the same knowledge.
            if (extract_error := self._extract_items(node, summary)) is not None:
                errors.append(extract_error)
        embedding, embed_error = self._embed(node, summary.text)
        if embed_error is not None:
            errors.append(embed_error)
        tokens = self.tokenizer.count(summary.text)
        view = self._cold_tokens(summary) if node.tier == "cold" else None
        self._nodes.set_summary(self.namespace, node.id, summary, tokens=tokens,
                                status="failed" if errors else "ok", error="; ".join(errors) or None,
                                view_tokens=view, embedding=embedding)
        return 1

    def _record_spend(self, level: int) -> None:
        """Add the summarizer's model usage since the last record to the level's spend."""
        take = getattr(self.summarizer, "take_usage", None)
        if take is None:
            return  # a local strategy: no model, no spend
        calls, n_in, n_out = take()
        if calls or n_in or n_out:
            self._nodes.add_spend(self.namespace, level, calls=calls, input_tokens=n_in, output_tokens=n_out)

    def spend(self) -> SummarySpend:
        """Model calls and tokens spent on summaries (per level), beside the prompt tokens they save."""
        turn_tokens, summary_tokens = self._nodes.summarized_tokens(self.namespace)
        return SummarySpend(self.namespace, tuple(LevelSpend(*row) for row in self._nodes.spend(self.namespace)),
                            turn_tokens, summary_tokens)

    def failed_count(self) -> int:
        """Nodes whose summary failed (an extractive fallback stands in until :meth:`retry_failed`)."""
        return self._nodes.failed_count(self.namespace)

    def _failed(self, node: Node, error: str, exc: BaseException) -> int:
        """Record that no summary could be made at all (the node keeps what it had); returns 0."""
        self._emit(self._event("summarizer.failed", node_id=node.id, level=node.level,
                               summarizer=self.summarizer.name, error=type(exc).__name__))
        self._nodes.set_status(self.namespace, node.id, "failed", error)
        return 0

    def _extract_items(self, node: Node, summary: Summary) -> str | None:
        """Store a segment's key facts as cold, auto-extracted memory items; returns the error, if any.

        Runs when ``auto_extract_facts`` is on. Each fact
        is typed by :func:`~stratamem.summarize.facts.fact_type` and keeps its
        source turn as provenance; ``Items.extract_facts`` skips facts the
        namespace already has, so re-summarizing or retrying adds nothing twice.
        A failure emits ``items.extract_failed`` and is recorded on the node
        (status ``failed``, so :meth:`retry_failed` tries again); the summary and
        the turns stay.
        """
        if not self.config.pyramid.auto_extract_facts:
            return None
        facts = [(f.text, f.type, (f.turn_id,)) for f in item_facts(summary)]
        if not facts:
            return None
        try:
            self._items().extract_facts(facts, session=node.session)
        except Exception as exc:  # the items store runs the pluggable embedder too; record, never raise
            self.events.emit(self._event("items.extract_failed", node_id=node.id, error=type(exc).__name__))
            return f"item extraction failed: {type(exc).__name__}: {exc}"
        return None

    def _items(self) -> Any:
        if self._item_api is None:
            from ..items.api import Items

            self._item_api = Items(self.store, self.namespace, tokenizer=self.tokenizer, config=self.config.items,
                                   embedder=self._batched, events=self.events)
        return self._item_api

    def _embed(self, node: Node, text: str) -> tuple[bytes | None, str | None]:
        """The summary's vector, or the error that stopped it (``embed.failed`` emitted).

        The vector is the direction of the node's turns' stored vectors when
        they all have one (:mod:`.turn_vectors`); otherwise the text is embedded.
        """
        if self._batched is None or not self.config.pyramid.auto_embed or not text:
            return None, None
        if node.id in self._derived:  # looked up with its group in _prefetch
            derived = self._derived.pop(node.id)
        else:  # a node written on its own (summarize_nodes, retry_failed)
            derived = turn_mean_vectors(self.store, self.namespace, self._model,
                                        {node.id: self._nodes.turn_ids(self.namespace, node.id)}).get(node.id)
        if derived is not None:
            return derived.tobytes(), None
        try:
            # The one wrapper for pluggable embedders: any failure, or a wrong shape, is a ModelError.
            vec = embed_texts(self._batched, [text])
        except ModelError as exc:
            self._emit(self._event("embed.failed", node_id=node.id, error=type(exc).__name__))
            return None, f"embedding failed: {exc}"
        return vec[0].tobytes(), None

    # --- reading ---------------------------------------------------------------------------

    def nodes(self, *, level: int | None = None, tier: str | None = None, session: str | None = None,
              newest_first: bool = False, limit: int | None = None) -> list[Node]:
        """Nodes of the namespace, filtered, in creation order (oldest first unless ``newest_first``).

        Raises:
            ValidationError: Unknown tier or a level below 1.
        """
        if tier is not None and tier not in ("hot", "warm", "cold"):
            raise ValidationError(f"unknown tier {tier!r} (expected hot, warm or cold)")
        if level is not None and level < 1:
            raise ValidationError("level must be at least 1")
        return self._nodes.list(self.namespace, level=level, tier=tier, session=session,
                                newest_first=newest_first, limit=limit)

    def node(self, node_id: int) -> Node:
        """One node.

        Raises:
            NotFoundError: No such node in this namespace.
        """
        return self._nodes.get(self.namespace, node_id)

    def children(self, node_id: int) -> list[Node]:
        """Nodes a consolidation merges, oldest first (empty for segments)."""
        self.node(node_id)
        return self._nodes.list(self.namespace, parent_id=node_id)

    def turn_ids(self, node_id: int) -> list[int]:
        """Provenance: ids of the turns a node covers, ascending."""
        self.node(node_id)
        return self._nodes.turn_ids(self.namespace, node_id)

    def embedding(self, node_id: int) -> np.ndarray | None:
        """The node's summary embedding (float32), or ``None``."""
        raw = self._nodes.embedding(self.namespace, self.node(node_id).id)
        return np.frombuffer(raw, dtype=np.float32) if raw else None

    def open_turns(self, session: str) -> list[StoredTurn]:
        """Turns of ``session`` not yet sealed into a segment (the current topic)."""
        return self.store.turns(self.namespace, session, min_seq=self._nodes.sealed_seq(self.namespace, session) + 1)

    def expand(self, node_id: int) -> list[StoredTurn]:
        """The full turns a node covers, from wherever its tier holds them (see :meth:`expansion`).

        Raises:
            NotFoundError: No such node.
            ArchiveError: Neither the tier's copy nor the canonical turns are complete.
        """
        return self.expansion(node_id).turns

    def expansion(self, node_id: int) -> Expansion:
        """The full turns a node covers, and where each segment's turns came from.

        Hot segments read the canonical turns, warm ones decode their warm
        content, cold ones read their archive frame; a consolidation expands
        its children in order. When a tier's copy cannot be read (archive file
        deleted, corrupt frame, undecodable warm content) the canonical turns
        are used if all of them are still in the store: ``sources`` then says
        ``turns``, ``fallbacks`` holds the error, and an ``expand.fallback``
        event is emitted.

        Raises:
            NotFoundError: No such node.
            ArchiveError: The tier's copy is gone or unreadable and the canonical
                turns were deleted by retention.
        """
        node = self.node(node_id)
        if node.level > 1:
            parts = [self.expansion(c.id) for c in self.children(node_id)]
            return Expansion([t for part in parts for t in part.turns],
                             {k: v for part in parts for k, v in part.sources.items()},
                             {k: v for part in parts for k, v in part.fallbacks.items()})
        ids = self._nodes.turn_ids(self.namespace, node_id)
        problem: StratamemError | None = None
        try:
            copy = self._tier_copy(node, ids)
        except (ArchiveError, DecodeError) as exc:
            copy, problem = None, exc
        if copy is not None:
            return Expansion(copy[1], {node_id: copy[0]})
        turns = self.store.turns(self.namespace, ids=ids)
        if len(turns) != len(ids):
            gone = (f"node {node_id}: {len(ids) - len(turns)} turns were deleted by retention and "
                    "their archived content is gone")
            if problem is not None:
                raise ArchiveError(f"{gone} ({problem})") from problem
            raise ArchiveError(gone)
        if problem is None:
            return Expansion(turns, {node_id: "turns"})
        self._emit(self._event("expand.fallback", node_id=node_id, tier=node.tier, error=type(problem).__name__))
        return Expansion(turns, {node_id: "turns"}, {node_id: f"{type(problem).__name__}: {problem}"})

    def _tier_copy(self, node: Node, ids: list[int]) -> tuple[str, list[StoredTurn]] | None:
        """``(source, turns)`` from a warm or cold segment's own copy; ``None`` when it has none."""
        if node.tier == "warm":
            warm = self._nodes.warm_content(self.namespace, node.id)
            if warm is not None:
                known = self.store.turns(self.namespace, ids=ids) if warm[0] == "ctf" else None
                return "warm", decode_turns(warm[0], warm[1], self.namespace, known)
        if node.tier == "cold" and node.archive_ref is not None and self.archive is not None:
            return "archive", self.archived_turns(self.archive.read_node(node.archive_ref, node.id))
        return None

    def archived_turns(self, records: Sequence[Mapping[str, Any]]) -> list[StoredTurn]:
        """The turns of a segment's archive records: references read from the turns table, full records decoded.

        Raises:
            ArchiveError: A referenced turn is no longer in the store.
            DecodeError: A full record is malformed.
        """
        ids: list[int | None] = []
        for r in records:
            raw = r.get("id") if is_reference(r) else None
            ids.append(raw if isinstance(raw, int) and not isinstance(raw, bool) else None)
            if is_reference(r) and ids[-1] is None:
                raise DecodeError(f"malformed archive reference {r!r}")
        wanted = [i for i in ids if i is not None]
        held = {st.id: st for st in self.store.turns(self.namespace, ids=wanted)} if wanted else {}
        out: list[StoredTurn] = []
        for r, turn_id in zip(records, ids, strict=True):
            if turn_id is None:
                out.append(turn_from_record(r, self.namespace))  # type: ignore[arg-type]
            elif turn_id in held:
                out.append(held[turn_id])
            else:
                raise ArchiveError(f"archived turn {turn_id} is no longer in the store")
        return out

    def stats(self) -> list[TierStats]:
        """Storage statistics per tier, plus ``open`` for turns not yet sealed."""
        raw = self._nodes.tier_raw_bytes(self.namespace)
        archive = self.archive.size_bytes() if self.archive is not None else 0
        out = []
        seen = {r[0]: r for r in self._nodes.tier_sizes(self.namespace)}
        for tier in ("hot", "warm", "cold"):
            _, nodes, turns, tokens, view, warm_bytes, summary_bytes = seen.get(tier, (tier, 0, 0, 0, 0, 0, 0))
            if tier == "hot":
                view, size = tokens, raw.get(tier, 0)
            elif tier == "warm":
                size = warm_bytes + summary_bytes
            else:
                size = archive + summary_bytes
            out.append(TierStats(tier, nodes, turns or 0, tokens or 0, view or 0, size, raw.get(tier, 0)))
        ns = self.store.stats(self.namespace)
        sealed_turns = sum(s.turns for s in out)
        sealed_tokens = sum(s.tokens for s in out)
        open_bytes = ns.text_bytes - sum(raw.values())
        out.append(TierStats("open", 0, ns.turns - sealed_turns, ns.tokens - sealed_tokens,
                             ns.tokens - sealed_tokens, open_bytes, open_bytes))
        return out

    def level_stats(self) -> list[LevelStats]:
        """Size and summary compression per level."""
        out = []
        for level in self._nodes.levels(self.namespace):
            nodes = self._nodes.list(self.namespace, level=level)
            done = [n for n in nodes if n.summary_tokens is not None]
            out.append(LevelStats(level, len(nodes), sum(n.turn_count for n in nodes), sum(n.tokens for n in nodes),
                                  len(done), sum(n.tokens for n in done), sum(n.summary_tokens or 0 for n in done)))
        return out

    def archive_path(self) -> Path | None:
        """Directory of this namespace's archive, if there is one."""
        return self.archive.dir if self.archive is not None else None
