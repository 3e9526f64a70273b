"""One namespace's recall index in memory, kept in step with the turns the store holds.

:class:`LiveIndex` is what :class:`~stratamem.memory.Memory` keeps between
calls: the persisted index rows are written when turns are committed
(:meth:`LiveIndex.feed`, through :class:`~stratamem.retrieve.persisted.TurnIndexer`),
and the in-memory :class:`~stratamem.retrieve.engine.HybridIndex` is opened
on first use and caught up when another writer added turns
(:meth:`LiveIndex.current`). Everything here is derived from the turns and can
be rebuilt, so a failure never raises: it is reported through ``report``
(the facade's event, log line and status warning) and the index is reopened
on next use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ModelError, StratamemError
from ..records import StoredTurn
from .engine import HybridIndex
from .ivf import ScanSettings

__all__ = ["LiveIndex", "Report"]

Report = Callable[[str, BaseException, Sequence[StoredTurn]], None]
"""Called with a failure's kind (``recall.index_failed``, ``recall.embed_failed``), the error and the
turns concerned."""


class LiveIndex:
    """The recall index of ``namespace``: persisted rows written on add, the index opened and kept current.

    Args:
        store: The store (turns and their ``embeddings.turns`` rows).
        namespace: The namespace.
        embedder: Embeddings for the vector signals, or ``None`` (lexical recall).
        passages: Also embed the passages of long turns (``embedding.passages``).
        report: Told of every failure (never raised).
        sentences: Also embed the sentences of short turns (``embedding.sentences``).
        rewriter: Who plans each question (:mod:`stratamem.retrieve.rewrite`; ``None``: the rules).
        scan: When the index scans vectors approximately (:mod:`stratamem.retrieve.ivf`; ``None``: the default).
    """

    def __init__(
        self,
        store: Any,
        namespace: str,
        embedder: Any,
        *,
        passages: bool,
        report: Report,
        sentences: bool = False,
        rewriter: Any = None,
        scan: ScanSettings | None = None,
    ) -> None:
        self.store, self.namespace, self.embedder = store, namespace, embedder
        self.passages, self.sentences, self.rewriter = passages, sentences, rewriter
        self.scan = scan or ScanSettings()
        self.report = report
        self.index: HybridIndex | None = None
        """The open index (``None`` until first use, or after a failure: reopened on next use)."""
        self._indexer: Any = None
        # The store's data version when the open index was last found in step with its turns.
        self._verified: Any = None

    @property
    def indexer(self) -> Any:
        """The persisted recall index (a :class:`stratamem.retrieve.persisted.TurnIndexer`), made on first use."""
        if self._indexer is None:
            from .persisted import TurnIndexer

            self._indexer = TurnIndexer(
                self.store, self.namespace, self.embedder, passages=self.passages, sentences=self.sentences
            )
        return self._indexer

    def missing(self) -> list[int]:
        """Ids of turns without their index rows (without vectors, with an embedder): what a crash left undone."""
        return list(self.store.embeddings.turns.missing(self.namespace, vectors=self.embedder is not None))

    def reset(self) -> None:
        """Drop the open index (it may hold forgotten text); the next use reopens it from the store."""
        self.index = None
        self._verified = None

    def feed(self, stored: list[StoredTurn], progress: Callable[[int], object] | None = None) -> None:
        """Index newly committed turns; never raises.

        Their rows are embedded, analysed and stored beside the turns, so the
        first context of this or any later process opens the index instead of
        rebuilding it. The open index takes them only when they extend it
        exactly (no other writer in between); otherwise :meth:`current`
        catches up from the store.
        """
        try:
            batch = self.indexer.index(stored, progress)
        except Exception as exc:  # noqa: BLE001 - reported; rows missing are made when the index opens
            self.index = None
            self.report("recall.index_failed", exc, stored)
            batch = None
        if batch is not None and batch.error is not None:
            # The turns and their terms are stored; their vectors are made when the index next opens.
            self.index = None
            self.report("recall.embed_failed", batch.error, stored)
        index = self.index
        seen = self._version() if index is not None else None
        if (
            batch is not None
            and index is not None
            and (not len(index) or stored[0].id > index.turns[-1].id)
            and (
                (seen is not None and self._only_appended(seen, index, len(stored)))
                or self._in_step((len(index) + len(stored), stored[-1].id))
            )
        ):
            try:
                index.add_turns(
                    stored,
                    terms=batch.terms,
                    vectors=batch.vectors,
                    passages=batch.passages,
                    sentences=batch.sentences,
                    events=batch.events,
                )
            except Exception as exc:  # noqa: BLE001 - reported; the index is rebuilt on next use
                self.index = None
                self.report("recall.index_failed", exc, stored)

    def _in_step(self, expected: tuple[int, int]) -> bool:
        """Whether the store holds exactly ``(count, largest id)`` turns: the open index plus this batch."""
        try:
            return self._extent() == expected
        except StratamemError as exc:
            self.report("recall.index_failed", exc, [])
            return False

    def _extent(self) -> tuple[int, int]:
        """``(count, largest id)`` of the namespace's turns (a store without ``turn_extent``: its count only)."""
        extent = getattr(self.store, "turn_extent", None)
        if extent is None:
            return self.store.turn_count(self.namespace), -1
        count, top = extent(self.namespace)
        return int(count), int(top)

    def current(self) -> HybridIndex:
        """The namespace's recall index: built from the store on first use, kept current.

        :meth:`feed` adds this process's turns; turns written by another
        process or another ``Memory`` are picked up here (one ``COUNT`` and
        ``MAX(id)`` per call when nothing changed: the count alone would miss
        one turn forgotten and one added elsewhere), unless the store's data
        version (:mod:`stratamem.store.data_version`, bumped by every write of
        turns in its transaction) is the one seen when the index was last
        found in step: then nothing was written and the ``COUNT``, which reads
        every turn of the namespace (issue 28), is skipped. New turns after
        everything indexed are added; any other difference (turns deleted by
        retention or forget, out-of-order commits) rebuilds it. A forget
        elsewhere that keeps both (SQLite may give a new turn the id of a
        forgotten newest one) is caught by the facade's data version
        (:meth:`stratamem.memory.derived.Derived.stale`), which resets the index.
        """
        index = self.index
        seen = self._version()
        if index is not None and seen is not None and seen == self._verified:
            return index
        if index is not None and seen is not None and self._only_appended(seen, index, 0):
            self._verified = seen
            return index
        if index is not None and self._extent() != (len(index), index.turns[-1].id if len(index) else 0):
            indexed = index.turns.ids(range(len(index)))
            ids = self.store.turn_ids(self.namespace)
            new = ids[len(indexed) :] if ids[: len(indexed)] == indexed else None
            if new is None:
                index = None
            else:
                for start in range(0, len(new), 500):
                    # Written by another process: its rows are stored (or made now, when missing).
                    index = self._catch_up(index, self.store.turns(self.namespace, ids=new[start : start + 500]))
                    if index is None:
                        break
        if index is None:
            index = self.indexer.open(on_store_error=lambda exc: self.report("recall.index_failed", exc, []))
            if self.rewriter is not None:
                index.rewriter = self.rewriter
            index.scan = self.scan
            self.index = index
        # Read before the check: a write committed since makes the next call check again.
        self._verified = seen if self.index is index else None
        return index

    def _only_appended(self, seen: Any, index: HybridIndex, added: int) -> bool:
        """Whether the store holds exactly the index's turns and ``added`` more after them, known
        without counting every turn: nothing was taken away since the index was last in step (same
        epoch) and the store commits ids in increasing order (``ids_commit_in_order``: SQLite and
        PostgreSQL), so new turns are the ones above the newest indexed id (one read of the
        namespace's id index)."""
        if (
            self._verified is None
            or seen.epoch != self._verified.epoch
            or not getattr(self.store, "ids_commit_in_order", False)
        ):
            return False
        last = index.turns[-1].id if len(index) else 0
        try:
            count, _ = self.store.turns_after(self.namespace, last)
        except StratamemError as exc:
            # Reported; the caller falls back to the full count, which raises if the store is broken.
            self.report("recall.index_failed", exc, [])
            return False
        return bool(count == added)

    def _version(self) -> Any:
        """The store's data version of the namespace (``None``: a store without one, or it failed)."""
        read = getattr(self.store, "data_version", None)
        if read is None:
            return None
        try:
            return read(self.namespace)
        except StratamemError as exc:
            # Reported; with no version the index is checked against the store in full instead.
            self.report("recall.index_failed", exc, [])
            return None

    def _catch_up(self, index: HybridIndex, turns: list[StoredTurn]) -> HybridIndex | None:
        """Add turns another writer stored, from their persisted rows; ``None``: reopen the index instead."""
        rows = self.store.embeddings.turns.load(self.namespace, [st.id for st in turns]) if turns else {}
        if len(rows) != len(turns) or (self.embedder is not None and any(r.vector is None for r in rows.values())):
            return None
        from ..embed.quantize import is_turn_blob, turn_codes

        terms = [rows[st.id].terms.split() for st in turns]
        vectors = None
        if self.embedder is not None:
            blobs = [rows[st.id].vector for st in turns]
            dims = int(getattr(self.embedder, "dimensions", 0) or 0)
            if not all(is_turn_blob(b, dims) for b in blobs):
                return None  # made by another model (or an embedder without a size): reopen
            vectors = turn_codes(blobs, dims)
        # The turns are at hand: what their rows lack (event dates, sentence vectors) the index makes.
        try:
            index.add_turns(turns, terms=terms, vectors=vectors, events=[rows[st.id].events for st in turns])
        except ModelError:
            return None  # embedding their sentences failed: reopen (the open reports it as it always has)
        return index
