"""The pyramid's summaries: making, merging, embedding and storing them, and what they cost.

:class:`_Summaries` is the part of :class:`~stratamem.pyramid.consolidate.Pyramid`
that writes summaries after the structure is committed, node by node, so a
slow or failing model never holds the write lock or loses a turn. Segments are
summarized from their turns, consolidations merged from their children's
summaries; a group's texts to embed go to the encoder in one call, and a
summary's vector is derived from its turns' stored vectors when they all have
one (:mod:`stratamem.pyramid.turn_vectors`). A failing summarizer falls back to
the extractive one (``summary_status = 'failed'``, ``summarizer.failed``); a
failing embedder or item store is recorded on the node the same way.
With ``auto_extract_facts`` a segment's turns give memory items
(:mod:`stratamem.pyramid.extraction`).
Spend per level is :mod:`stratamem.pyramid.spend`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..config import Config
from ..embed.prefetch import PrefetchedEmbedder
from ..errors import ModelError, StratamemError
from ..events import Event, EventBus
from ..items.search import embed_texts
from ..records import StoredTurn, Summary
from ..records.nodes import Node
from ..summarize import Summarizer
from ..tokens import Tokenizer
from .extraction import _Extraction
from .plan import Plan
from .spend import LevelSpend, SummarySpend
from .turn_vectors import turn_mean_vectors

__all__: list[str] = []

_SUMMARY_GROUP = 64
"""Nodes of one level summarized before their texts to embed (summaries, key facts) go in one call."""

_MIN_SUMMARY_TOKENS = 24


class _Summaries(_Extraction):
    """Summaries of a namespace's nodes: make, merge, embed, store, retry (a part of ``Pyramid``)."""

    if TYPE_CHECKING:  # set by Pyramid.__init__; the methods are Pyramid's and _Reads'
        store: Any
        namespace: str
        config: Config
        tokenizer: Tokenizer
        events: EventBus
        summarizer: Summarizer
        fallback: Summarizer
        plan: Plan
        _batched: PrefetchedEmbedder | None
        _model: str
        _derived: dict[int, np.ndarray | None]
        _nodes: Any

        def _event(self, event_kind: str, **data: Any) -> Event: ...

        def _emit(self, event: Event) -> None: ...

        def _cold_tokens(self, summary: Summary | None) -> int | None: ...

        def expand(self, node_id: int | str) -> list[StoredTurn]: ...

    def summary_budget(self, node: Node) -> int:
        """Summary tokens allowed for a node: a share of its turns, capped by the level's target."""
        p = self.config.pyramid
        cap = p.topic_summary_tokens if node.level == 1 else p.bulk_summary_tokens
        return max(1, min(cap, max(_MIN_SUMMARY_TOKENS, math.ceil(node.tokens * p.summary_ratio))))

    def summarize_pending(self, *, include_hot: bool | None = None) -> int:
        """Summarize nodes that need a summary now; returns how many were summarized.

        With ``defer_summarization`` hot segments wait until they are demoted
        (or until a consolidation needs them); ``include_hot=True`` summarizes them too.
        """
        defer = self.config.pyramid.defer_summarization if include_hot is None else not include_hot
        if not self.config.pyramid.auto_summarize:
            return 0
        todo = [
            n
            for n in self._nodes.list(self.namespace, status="pending")
            if not (n.level == 1 and defer and n.tier == "hot")
        ]
        segments = [n for n in todo if n.level == 1]
        done = 0
        # Segments first, in groups: every summary of a group is made, then all their
        # texts to embed (summaries, key facts) go to the encoder in one call, then each
        # node is written as before. Consolidations follow; they read their children's
        # summaries from the store, which are all written by then.
        for lo in range(0, len(segments), _SUMMARY_GROUP):
            made = [(n, self._make_summary(n)) for n in segments[lo : lo + _SUMMARY_GROUP]]
            done += self._finish_group(made)
        # Consolidations the same way, one level at a time (a merge reads its children's
        # summaries, so a level is written before the next is made): their summaries
        # were embedded one text per call, one encoder thread idle (issue 12).
        merges = sorted((n for n in todo if n.level > 1), key=lambda n: (n.level, n.id))
        for level in dict.fromkeys(n.level for n in merges):
            nodes = [n for n in merges if n.level == level]
            for lo in range(0, len(nodes), _SUMMARY_GROUP):
                made = []
                for node in nodes[lo : lo + _SUMMARY_GROUP]:
                    done_children, m = self._make_merge(node)
                    done += done_children
                    made.append((node, m))
                done += self._finish_group(made)
        return done

    def _finish_group(self, made: list[tuple[Node, tuple[Summary, list[str]] | None]]) -> int:
        """Extract the group's items, embed its texts in one call, then write each node; returns how many."""
        # Only a segment whose summary stands is mined: a failed one is, once, when its retry succeeds.
        self._extract_group([node for node, m in made if node.level == 1 and m is not None and not m[1]])
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
            self._candidates.clear()
        return done

    def _prefetch(self, made: list[tuple[Node, tuple[Summary, list[str]] | None]]) -> None:
        """Embed, in one call, every text :meth:`_finish_summary` will embed for these nodes' summaries."""
        if self._batched is None:
            return
        if self.config.pyramid.auto_embed:
            # Summary vectors from the turns' stored vectors (one read for the group); only
            # the summaries that cannot have one are embedded from their text.
            wanted = {
                node.id: self._nodes.turn_ids(self.namespace, node.id)
                for node, m in made
                if m is not None and m[0].text
            }
            got = turn_mean_vectors(self.store, self.namespace, self._model, wanted)
            self._derived = {node_id: got.get(node_id) for node_id in wanted}
        texts: list[str] = []
        for node, m in made:
            if m is None:
                continue
            summary = m[0]
            texts += self._candidate_texts(node)  # the segment's items (see _finish_group)
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
        for node in sorted(
            (n for n in self._nodes.list(self.namespace) if n.id in wanted), key=lambda n: (n.level, n.id)
        ):
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
        except Exception as exc:  # noqa: BLE001 - any failure of a pluggable summarizer: fall back, keep it visible
            self._record_spend(node.level)  # a failed answer still cost its tokens
            errors.append(f"{type(exc).__name__}: {exc}")
            self._emit(
                self._event(
                    "summarizer.failed",
                    node_id=node.id,
                    level=node.level,
                    summarizer=self.summarizer.name,
                    error=type(exc).__name__,
                )
            )
            try:
                summary = run(self.fallback)
            except Exception as again:  # noqa: BLE001 - the fallback is ours, but add() must not see its bug either
                # Already reported as summarizer.failed just above: record it, no second event.
                self._nodes.set_status(
                    self.namespace, node.id, "failed", f"{errors[0]}; fallback {type(again).__name__}: {again}"
                )
                return None
        if not errors:
            self._record_spend(node.level)
        return summary, errors

    def _finish_summary(self, node: Node, summary: Summary, errors: list[str]) -> int:
        """Extract the segment's items, embed the summary and store it; returns 1."""
        errors = list(errors)
        if not errors and node.level == 1:
            # Only a summary that stands is mined for items: a failed one is, once, when its retry succeeds.
            if (extract_error := self._store_items(node)) is not None:
                errors.append(extract_error)
        embedding, embed_error = self._embed(node, summary.text)
        if embed_error is not None:
            errors.append(embed_error)
        tokens = self.tokenizer.count(summary.text)
        # A cold node's view is its summary, unless it keeps its CTF (cold_format: ctf; that view stands).
        view = self._cold_tokens(summary) if node.tier == "cold" and self.config.pyramid.cold_format != "ctf" else None
        self._nodes.set_summary(
            self.namespace,
            node.id,
            summary,
            tokens=tokens,
            status="failed" if errors else "ok",
            error="; ".join(errors) or None,
            view_tokens=view,
            embedding=embedding,
        )
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
        return SummarySpend(
            self.namespace,
            tuple(LevelSpend(*row) for row in self._nodes.spend(self.namespace)),
            turn_tokens,
            summary_tokens,
        )

    def failed_count(self) -> int:
        """Nodes whose summary failed (an extractive fallback stands in until :meth:`retry_failed`)."""
        return self._nodes.failed_count(self.namespace)

    def _failed(self, node: Node, error: str, exc: BaseException) -> int:
        """Record that no summary could be made at all (the node keeps what it had); returns 0."""
        self._emit(
            self._event(
                "summarizer.failed",
                node_id=node.id,
                level=node.level,
                summarizer=self.summarizer.name,
                error=type(exc).__name__,
            )
        )
        self._nodes.set_status(self.namespace, node.id, "failed", error)
        return 0

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
            derived = turn_mean_vectors(
                self.store, self.namespace, self._model, {node.id: self._nodes.turn_ids(self.namespace, node.id)}
            ).get(node.id)
        if derived is not None:
            return derived.tobytes(), None
        try:
            # The one wrapper for pluggable embedders: any failure, or a wrong shape, is a ModelError.
            vec = embed_texts(self._batched, [text])
        except ModelError as exc:
            self._emit(self._event("embed.failed", node_id=node.id, error=type(exc).__name__))
            return None, f"embedding failed: {exc}"
        return vec[0].tobytes(), None
