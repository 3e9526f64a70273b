"""What a ``Memory`` derives from its namespace's turns and keeps in step with them.

Turns are the canonical record; the recall index and the pyramid are derived
from them and can be rebuilt. :class:`Derived` feeds them each batch of newly
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
from ..errors import StratamemError
from ..events import Event, EventBus
from ..records import StoredTurn
from ..retrieve.live import LiveIndex
from ..tokens import Tokenizer

if TYPE_CHECKING:
    from ..pyramid.consolidate import Pyramid
    from ..summarize import Summarizer

__all__ = ["Derived"]

log = logging.getLogger("stratamem.memory")

MAX_WARNINGS = 20
"""Failures kept for ``status().warnings`` (the newest)."""


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
        self.warnings: list[str] = []
        """Recent failures, newest last (at most :data:`MAX_WARNINGS`)."""
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

    def after_add(self, stored: list[StoredTurn], progress: Callable[[int], object] | None = None) -> None:
        """Feed newly committed turns to the recall index and the pyramid; never raises."""
        if not stored:
            return
        self.live.feed(stored, progress)
        if self.config.pyramid.enabled:
            try:
                self.pyramid.update(dict.fromkeys(t.session for t in stored))
            except Exception as exc:  # noqa: BLE001 - reported below; the next update resumes from the last seal
                self.failed("pyramid.failed", exc, stored)

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
