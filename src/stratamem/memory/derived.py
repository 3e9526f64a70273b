"""What a ``Memory`` derives from its namespace's turns and keeps in step with them.

Turns are the canonical record; the recall index, the pyramid and (with a
project directory) the session logs are derived from them and can be rebuilt.
:class:`Derived` feeds them each batch of newly
committed turns (:meth:`Derived.after_add`), so a failure there must not turn
a successful write into an error: it is reported (an event such as
``recall.index_failed`` or ``pyramid.failed``, a log line, and one of the
last 20 ``status().warnings``) and the structure catches up on a later call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..errors import ConfigError, StratamemError
from ..events import Event, EventBus
from ..records import StoredTurn
from ..retrieve.ivf import ScanSettings
from ..retrieve.live import LiveIndex
from ..tokens import Tokenizer
from .status import unindexed_turns

if TYPE_CHECKING:
    from ..items.extract import Extractor
    from ..pyramid.consolidate import Pyramid
    from ..summarize import Summarizer

__all__ = ["Derived", "check_models", "needed_features"]

log = logging.getLogger("stratamem.memory")

MAX_WARNINGS = 20
"""Failures kept for ``status().warnings`` (the newest)."""

REPAIR_BATCH = 1000
"""Turns read and indexed per step of :meth:`Derived.repair` (each step commits its rows)."""


def needed_features(config: Config) -> list[str]:
    """Feature stores a configuration uses (see :class:`~stratamem.store.base.Store`)."""
    needed = ["items", "conversations"]  # item search and the checkpoint feed every context
    if config.pyramid.enabled:
        needed.append("nodes")
    if config.context.record_manifests:
        needed.append("manifests")
    return needed


def check_models(config: Config, summarizer: Summarizer | None, extractor: Extractor | None) -> None:
    """Refuse a configuration naming a model-powered part without its instance (none is built from a string).

    Raises:
        ConfigError: ``pyramid.summarizer`` is ``llm`` without ``summarizer``, or
            ``items.extractor`` is ``llm`` without ``extractor``.
    """
    if config.pyramid.enabled and config.pyramid.summarizer == "llm" and summarizer is None:
        raise ConfigError(
            "pyramid.summarizer is 'llm': pass summarizer=LLMSummarizer(chat_model, tokenizer) "
            "(the library never builds a model from configuration)"
        )
    if config.items.extractor == "llm" and extractor is None:
        raise ConfigError(
            "items.extractor is 'llm': pass extractor=LLMExtractor(chat_model, tokenizer) "
            "(the library never builds a model from configuration)"
        )


class Derived:
    """The recall index and the pyramid of one namespace, made on first use and fed every committed batch.

    Args:
        store: The store.
        namespace: The namespace.
        config: The memory's settings.
        tokenizer: The memory's tokenizer.
        events: Where failures (and the pyramid's events) are emitted.
        summarizer: The pyramid's summarizer (``None``: the one the configuration names).
        embedder: Embeddings for turns and summaries (``None``: lexical recall, no summary vectors).
        rewriter: Who plans each recall query (:mod:`stratamem.retrieve.rewrite`; ``None``: the rules).
    """

    def __init__(
        self,
        store: Any,
        namespace: str,
        config: Config,
        tokenizer: Tokenizer,
        events: EventBus,
        summarizer: Summarizer | None,
        embedder: Any,
        rewriter: Any = None,
    ) -> None:
        self.store, self.namespace, self.config, self.tokenizer = store, namespace, config, tokenizer
        self.events, self.summarizer = events, summarizer
        self.rewriter = rewriter
        if rewriter is not None and hasattr(rewriter, "on_failure") and rewriter.on_failure is None:
            # A model rewriter's failures are this memory's to report (event, log line, status warning).
            rewriter.on_failure = lambda exc: self.failed("recall.rewrite_failed", exc, [])
        self.extractor: Extractor | None = None
        """What the pyramid extracts items with (``None``: the offline rules); set by the facade."""
        self.project_dir: Any = None
        """With a project directory, every committed batch is appended to its session logs (seed 004)."""
        self._logs: Any = None
        self.warnings: list[str] = []
        """Recent failures, newest last (at most :data:`MAX_WARNINGS`)."""
        self._seen: Any = None  # the store's data version at the last public call (see stale)
        self.repairing = 0
        """Turns :meth:`repair` is still to index in this process (0 when no repair runs)."""
        self.repaired = False
        """Whether this memory ran :meth:`repair` once already (the first context does)."""
        self.use_embedder(embedder)

    def use_embedder(self, embedder: Any) -> None:
        """Rebuild everything made with the old embedder with this one, on next use."""
        self.embedder = embedder
        self.live = LiveIndex(
            self.store,
            self.namespace,
            embedder,
            passages=self.config.embedding.passages,
            sentences=self.config.embedding.sentences,
            scan=ScanSettings(self.config.embedding.approximate_from, self.config.embedding.probe),
            report=self.failed,
            rewriter=self.rewriter,
        )
        self._pyramid: Pyramid | None = None

    @property
    def pyramid(self) -> Pyramid:
        """The namespace's pyramid, made on first use (finishing a forget a crash left undone)."""
        if self._pyramid is None:
            from ..pyramid.consolidate import Pyramid

            path = getattr(self.store, "path", None)
            archive = f"{path}.archive" if isinstance(path, str) and path != ":memory:" else None
            self._pyramid = Pyramid(
                self.store,
                self.namespace,
                config=self.config,
                tokenizer=self.tokenizer,
                events=self.events,
                summarizer=self.summarizer,
                extractor=self.extractor,
                embedder=self.embedder,
                archive_dir=archive,
            )
            self._finish_forget(self._pyramid)
        return self._pyramid

    def _finish_forget(self, pyramid: Pyramid) -> None:
        """Finish archive files a forget committed but a crash left undone (never raises)."""
        from ..forget import finish_pending

        try:
            finish_pending(self.store, pyramid.archive, self.namespace)
        except StratamemError as exc:
            self.failed("forget.finish_failed", exc, [])

    def after_add(
        self,
        stored: list[StoredTurn],
        progress: Callable[[int], object] | None = None,
        *,
        sessions: Sequence[str] = (),
    ) -> bool:
        """Feed newly committed turns to the recall index and the pyramid; never raises.

        ``sessions`` are more sessions to bring the pyramid up to date in (an
        ingest's sessions whose turns were all stored before: a crash may have
        left them unsegmented). Returns whether the pyramid was updated (or is off).
        """
        if stored:
            self.live.feed(stored, progress)
            if self.project_dir is not None:
                self._log(stored)
        names = list(dict.fromkeys([*(t.session for t in stored), *sessions]))
        if not names or not self.config.pyramid.enabled:
            return True
        try:
            # A run the database rolled back under contention is run again: it resumes from the last seal.
            self.store.retrying(lambda: self.pyramid.update(names))
        except Exception as exc:  # noqa: BLE001 - reported below; the next update resumes from the last seal
            self.failed("pyramid.failed", exc, stored)
            return False
        return True

    def mark_pending(self, sessions: Sequence[str]) -> None:
        """Mark an ingest's sessions as waiting for their derived data, in the caller's transaction.

        The mark is cleared once their segments and summaries exist
        (:meth:`after_ingest`); a crash before that leaves it for :meth:`repair`.
        """
        self.store.ingest_keys.mark_pending(self.namespace, sessions)

    def after_ingest(
        self, stored: list[StoredTurn], sessions: Sequence[str], progress: Callable[[int], object] | None = None
    ) -> None:
        """:meth:`after_add` for an ingest's ``sessions`` (those it skipped included), then :meth:`repair`."""
        done = self.after_add(stored, progress, sessions=sessions)
        self.repair(progress, done=sessions if done else ())

    def repair_once(self) -> None:
        """:meth:`repair` at this memory's first read that needs derived data (never on a read-only store)."""
        if not self.repaired:
            self.repaired = True
            if not getattr(self.store, "read_only", False):
                self.repair()

    def _unindexed(self) -> int:
        """Turns without an index row (or vector, with an embedder)."""
        return unindexed_turns(self.store, self.namespace, embedded=self.embedder is not None)

    def repair(self, progress: Callable[[int], object] | None = None, *, done: Sequence[str] = ()) -> int:
        """Make the derived data a crash left unmade; never raises. Returns the turns it indexed.

        Two cheap reads find the work: turns without a recall index row (or
        vector, with an embedder) — a process killed after its commit, before
        indexing — and the sessions an ingest marked pending and never
        finished (:meth:`stratamem.store.ingest_keys.IngestKeys.pending`).
        Turns are indexed in batches that each commit (``progress`` is told),
        then the pending sessions' segments and summaries are made, so a
        repair killed in turn resumes where it stopped. ``done``: sessions the
        caller has just brought up to date. While it runs,
        :attr:`repairing` says how many turns are left (``status`` shows it).
        """
        try:
            missing = self.live.missing() if self._unindexed() else []
            pending = [s for s in self.store.ingest_keys.pending(self.namespace) if s not in set(done)]
        except StratamemError as exc:
            self.failed("repair.failed", exc, [])
            return 0
        self.repairing = len(missing)
        try:
            for lo in range(0, len(missing), REPAIR_BATCH):
                turns = self.store.turns(self.namespace, ids=missing[lo : lo + REPAIR_BATCH])
                self.live.feed(turns, progress)
                self.repairing = max(0, len(missing) - lo - REPAIR_BATCH)
            known = {s.name for s in self.store.sessions(self.namespace)} if pending else set()
            if self.after_add([], sessions=[s for s in pending if s in known]):
                self.store.ingest_keys.clear_pending(self.namespace, [*pending, *done])
        except StratamemError as exc:
            self.failed("repair.failed", exc, [])
        finally:
            self.repairing = 0
        return len(missing)

    def logging_to(self, project_dir: Any) -> Derived:
        """Append every committed batch to the session logs under ``project_dir`` (``None``: no logs); returns self."""
        self.project_dir, self._logs = project_dir, None
        return self

    def _log(self, stored: list[StoredTurn]) -> None:
        """Append the batch to its sessions' logs under the project directory (``sessionlog.failed`` if not)."""
        try:
            if self._logs is None:
                from ..state.sessionlog import SessionLogs

                self._logs = SessionLogs(self.project_dir, self.namespace, workdir=self.config.state.workdir)
            self._logs.append(stored)
        except StratamemError as exc:
            self.failed("sessionlog.failed", exc, stored)

    def failed(self, kind: str, exc: BaseException, stored: Sequence[StoredTurn]) -> None:
        """Report a failure of derived work: a log line, a status warning and a ``kind`` event."""
        detail = f"{type(exc).__name__}: {exc}"
        first, last = (stored[0].id, stored[-1].id) if stored else (None, None)
        log.warning("%s in namespace %r (turns %s-%s): %s", kind, self.namespace, first, last, detail)
        self.warnings.append(f"{kind}: {detail}")
        del self.warnings[:-MAX_WARNINGS]
        self.events.emit(
            Event(kind, {"error": detail, "first_turn_id": first, "last_turn_id": last}, namespace=self.namespace)
        )

    def reset(self) -> None:
        """Drop the open recall index and the pyramid object (they may hold forgotten text)."""
        self.live.reset()
        self._pyramid = None
        self._seen = None

    def stale(self) -> bool:
        """Whether another writer took away or rewrote data since the last call; one cheap read.

        A forget, retention or item deletion by another process (or another
        ``Memory`` on this store) bumps the namespace's epoch
        (:mod:`stratamem.store.data_version`): the recall index, the ranked
        summaries, the items cache and the pyramid object built before it may
        hold what was taken away, so the facade drops them all and they are
        rebuilt from the store on next use. Appends and new summaries bump only
        the version: those structures catch up with them incrementally.
        """
        read = getattr(self.store, "data_version", None)
        if read is None:  # a store of another implementation: no version to compare
            return False
        seen = read(self.namespace)
        changed = self._seen is not None and seen.epoch != self._seen.epoch
        self._seen = seen
        return changed
