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
retries it. With ``auto_extract_facts``, a segment's statements worth keeping
also become memory items (auto-extracted, cold, awaiting review), where the
store keeps items (:mod:`stratamem.pyramid.extraction`).

This module owns the structure: :class:`Pyramid` itself and its one write
transaction (seal, consolidate, tier moves with their archive writes). Its
other parts live beside it: the plan a configuration asks for in
:mod:`stratamem.pyramid.plan`, summaries in :mod:`stratamem.pyramid.summaries`,
the read API (nodes, expansion, statistics) in :mod:`stratamem.pyramid.reads`.
Tier rules are in :mod:`stratamem.pyramid.tiers`, the archive in :mod:`stratamem.pyramid.archive`,
retention in :mod:`stratamem.pyramid.retention`, the prompt view with seed 002's
escalation in :mod:`stratamem.pyramid.escalation`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from ..config import Config
from ..embed import model_name
from ..embed.prefetch import PrefetchedEmbedder
from ..errors import ConfigError
from ..events import Event, EventBus
from ..items.extract import Extractor, rule_extractor
from ..records import Summary
from ..records.candidates import Candidate
from ..records.nodes import Node
from ..store.new_rows import NewNode
from ..summarize import Summarizer
from ..summarize.extractive import ExtractiveSummarizer
from ..tokens import Tokenizer
from .archive import Archive, reference_record
from .plan import make_summarizer, plan_for
from .reads import _Reads
from .segment import Seal
from .summaries import _Summaries
from .tiers import encode_turns, plan_tiers
from .turn_vectors import stored_turn_vectors

__all__ = ["Pyramid"]

log = logging.getLogger("stratamem.pyramid")


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Pyramid(_Summaries, _Reads):
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
        extractor: What turns segments into memory items (default: the offline rules,
            :class:`~stratamem.items.extract.RuleExtractor` at ``items.min_salience``).
        embedder: Optional object with ``embed_batch(texts) -> np.ndarray``; summaries are embedded.
        archive_dir: Directory of the cold archive; ``None`` keeps cold content only
            in the canonical turns (no archive).
        clock: Wall clock for archive days, ``archived_at`` and retention (tests inject one).

    Raises:
        ConfigError: The store keeps no nodes, or ``llm`` is configured without a summarizer.
    """

    def __init__(
        self,
        store: Any,
        namespace: str,
        *,
        config: Config,
        tokenizer: Tokenizer,
        events: EventBus | None = None,
        summarizer: Summarizer | None = None,
        extractor: Extractor | None = None,
        embedder: Any = None,
        archive_dir: str | os.PathLike[str] | None = None,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
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
        self.extractor: Extractor = extractor if extractor is not None else rule_extractor(config.items)
        # Node id -> the candidates its segment gave, between _extract_group and _store_items.
        self._candidates: dict[int, list[Candidate]] = {}
        # (id, timestamp) of the newest turn seen and the newest timestamp so far: see _reference().
        self._newest: tuple[int, datetime | None, datetime | None] = (0, None, None)
        # Session -> time of its newest unsealed turn, for _seal_idle (None: not read yet in this process).
        self._tails: dict[str, datetime] | None = None

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
        try:
            with self.store.transaction():
                # Two writers of one namespace would both seal the same open turns
                # (a duplicate key) or deadlock on each other's node rows: queue them.
                self._nodes.lock(self.namespace)
                for s in sessions:
                    created += self._seal(s, manual, events)
                if not manual:
                    created += self._seal_idle(sessions, events)
                if created:
                    created += self._consolidate(sessions, events)
                    self._move_tiers(events)
        except BaseException:
            self._tails = None  # it followed seals that were rolled back: read the open tails again
            raise
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
        except Exception as exc:  # noqa: BLE001 - any subscriber bug; made visible below, not swallowed
            log.warning("a handler of %s failed: %s", event.kind, type(exc).__name__)
            if event.kind == "hook.failed":
                return
            self._emit(self._event("hook.failed", event=event.kind, error=type(exc).__name__, message=str(exc)[:200]))

    def _seal_idle(self, updated: Sequence[str], events: list[Event]) -> list[int]:
        """Seal the open turns of other sessions that have been quiet ``seal_idle_minutes`` (reason ``idle``).

        A segmenter seals a session's last turns only when a later turn of the
        same session arrives, so a finished conversation kept its tail unsealed
        for ever: no summary, no items. The namespace's newest turn is the clock
        (imported histories carry their own times), and which sessions have
        open turns is read once per process, then kept up to date by ``_seal``;
        the seal itself re-reads the open turns under the pyramid lock, so a
        session another writer has just continued is left open.
        """
        minutes = self.config.pyramid.seal_idle_minutes
        if minutes <= 0:
            return []
        newest = self._reference()
        if newest is None:
            return []
        if self._tails is None:
            self._tails = {}
            for session in self.store.sessions(self.namespace):
                sealed = self._nodes.sealed_seq(self.namespace, session.name)
                tail = self.store.turns(self.namespace, session.name, min_seq=sealed + 1)
                if tail:
                    self._tails[session.name] = tail[-1].timestamp
        cutoff = newest - timedelta(minutes=minutes)
        quiet = sorted(s for s, last in self._tails.items() if last <= cutoff and s not in updated)
        created: list[int] = []
        for session in quiet:
            created += self._seal(session, False, events, idle_before=cutoff)
        return created

    def _seal(self, session: str, manual: bool, events: list[Event], idle_before: datetime | None = None) -> list[int]:
        sealed = self._nodes.sealed_seq(self.namespace, session)
        open_turns = self.store.turns(self.namespace, session, min_seq=sealed + 1)
        if not open_turns:
            if self._tails is not None:
                self._tails.pop(session, None)
            return []
        vectors = None
        if getattr(self.plan.segmenter, "similarity", 0) > 0:
            # The topic segmenter reads a change of subject from the vectors the recall index stored.
            vectors = stored_turn_vectors(self.store, self.namespace, self._model, [t.id for t in open_turns])
        split = self.plan.segmenter.split(open_turns, vectors)
        seals = list(split.seals)
        if manual and split.open:
            seals.append(Seal(split.open, "manual"))
        elif idle_before is not None and split.open and split.open[-1].timestamp <= idle_before:
            seals.append(Seal(split.open, "idle"))
        elif split.open and self._tails is not None:
            self._tails[session] = split.open[-1].timestamp
        if self._tails is not None and seals and seals[-1].turns and seals[-1].turns[-1].seq == open_turns[-1].seq:
            self._tails.pop(session, None)
        out = []
        for seal in seals:
            if not seal.turns:
                continue
            turns = seal.turns
            # A segment's span starts right after the last sealed one: sequence numbers
            # of forgotten turns (stratamem.forget) stay accounted for, never a gap.
            lo, sealed = sealed + 1, turns[-1].seq
            node_id = self._nodes.insert(
                self.namespace,
                NewNode(
                    level=1,
                    kind=self.plan.segmenter.kind,
                    session=session,
                    seq_range=(lo, turns[-1].seq),
                    turn_ids=tuple(t.id for t in turns),
                    tokens=sum(t.tokens for t in turns),
                    start=min(t.timestamp for t in turns),
                    end=max(t.timestamp for t in turns),
                    reason=seal.reason,
                    tier="hot",
                ),
            )
            out.append(node_id)
            events.append(
                self._event("segment.sealed", node_id=node_id, session=session, turns=len(turns), reason=seal.reason)
            )
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
                pending = self._nodes.list(
                    self.namespace,
                    level=level - 1,
                    unparented=True,
                    after_id=self._nodes.last_child_id(self.namespace, level),
                )
            else:
                pending = self._nodes.list(self.namespace, level=level - 1, unparented=True, session=session)
            while (n := rule.take(pending, self._estimate)) > 0:
                children, pending = pending[:n], pending[n:]
                ids = tuple(sorted(t for c in children for t in self._nodes.turn_ids(self.namespace, c.id)))
                node_id = self._nodes.insert(
                    self.namespace,
                    NewNode(
                        level=level,
                        kind=rule.kind,
                        session=session,
                        seq_range=None,
                        turn_ids=ids,
                        tokens=sum(c.tokens for c in children),
                        start=min(c.start for c in children),
                        end=max(c.end for c in children),
                        reason="consolidation",
                        tier=None,
                    ),
                )
                self._nodes.set_parent(self.namespace, [c.id for c in children], node_id)
                out.append(node_id)
                events.append(
                    self._event(
                        "node.consolidated",
                        node_id=node_id,
                        level=level,
                        kind=rule.kind,
                        children=[c.id for c in children],
                        turns=len(ids),
                    )
                )
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
        moves = plan_tiers(
            segments,
            hot_chunks=p.hot_chunks,
            hot_max_tokens=p.hot_max_tokens,
            covered_by_top=covered_nodes,
            reference=reference,
            warm_max_age=timedelta(hours=p.warm_max_age_hours),
            warm_max_turns=p.warm_max_turns,
        )
        if not moves:
            return
        by_id = {n.id: n for n in segments}
        turns = {n_id: self.store.turns(ns, ids=self._nodes.turn_ids(ns, n_id)) for n_id in moves}
        cold = [i for i, tier in moves.items() if tier == "cold"]
        # One instant names the archive day file and stamps archived_at, so retention
        # expires a node together with the file that holds its content.
        at = self.clock().astimezone(UTC)
        ref = None
        if cold and self.archive is not None and p.archive_cold_content:
            # References, not text: the turns table still holds every one of these turns.
            ref = self.archive.write({i: [reference_record(t.id) for t in turns[i]] for i in cold}, day=at.date())
        for node_id, tier in moves.items():
            node = by_id[node_id]
            if tier == "warm":
                fmt, content = encode_turns(turns[node_id], p.warm_format)
                self._nodes.set_tier(
                    ns, node_id, "warm", at=at, view_tokens=self.tokenizer.count(content), warm=(fmt, content)
                )
            elif p.cold_format == "ctf":
                # Seed 000's cold_format: ctf — the turns stay in the node, CTF-encoded, beside the archive.
                _, content = encode_turns(turns[node_id], "ctf")
                view = self.tokenizer.count(content)
                self._nodes.set_tier(
                    ns, node_id, "cold", at=at, view_tokens=view, warm=("ctf", content), archive_ref=ref
                )
            else:
                self._nodes.set_tier(
                    ns, node_id, "cold", at=at, view_tokens=self._cold_tokens(node.summary), archive_ref=ref
                )
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
