"""The ``Memory`` class: one namespace's memory, wired from the parts.

``Memory`` validates at the boundary, counts tokens exactly, writes each call
in one transaction, and delegates everything else to the modules that own it:
storage (:mod:`stratamem.store`), context assembly (:mod:`stratamem.context`,
one call: :func:`~stratamem.context.assemble.build_context`), export/import
(:mod:`stratamem.exchange`), file reading and write checks (:mod:`stratamem.ingest`),
the recall index and the pyramid kept in step (:mod:`stratamem.memory.derived`).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

from ..config import Config
from ..context.assemble import build_context
from ..context.gather import Parts, Request
from ..context.sources import SummaryIndex
from ..errors import BudgetError, ConfigError, ValidationError
from ..events import EventBus
from ..expand import expand as expand_id
from ..ingest import IngestReport, IngestSession, parse_messages
from ..ingest import dedupe as _dedupe
from ..records import StoredTurn, Turn, check_name
from ..records.manifests import Context
from ..records.nodes import Node
from ..records.usage import PromptUsage
from ..retrieve import HybridIndex
from ..store import SQLiteStore, Store
from ..store.base import NamespaceStats
from ..text import check_budget, check_context_format, check_now
from ..tokens import Calibration, Counting, Tokenizer, get_tokenizer
from .batches import checked_batch, session_batch
from .caching import as_requested, report_usage, with_cache
from .derived import Derived, check_models, needed_features
from .once import Once, request_digest
from .requests import check_arguments, check_counting, current_session, lexical_note, record_manifest
from .status import Status, namespace_status
from .transfer import export_from, import_into

if TYPE_CHECKING:
    from ..forget import ForgetReport
    from ..items.extract import Extractor
    from ..pyramid.consolidate import Pyramid
    from ..retrieve.rewrite import QueryRewriter
    from ..search import SearchHit
    from ..state.working import WorkingState
    from ..summarize import Summarizer

__all__ = ["Memory"]

_CONFIGURED: Any = object()
"""Default of ``Memory(embedder=...)``: the embedder the configuration names (``None`` means none)."""


class Memory:
    """Memory for one namespace: store turns, assemble contexts, report status.

    Args:
        store: A :class:`~stratamem.store.Store`, or a path to a SQLite file
            (created if missing).
        namespace: Whose memory this is. Nothing crosses namespaces; use
            :meth:`for_namespace` for another one on the same store.
        config: Settings (default: the seeds' defaults).
        tokenizer: Token counter (default: the exact one named by ``config.tokenizer``).
        events: Event bus for hooks (default: a new one, at :attr:`events`).
        embedder: Embeddings for semantic recall (anything with ``embed_batch``,
            e.g. ``stratamem.embed.LocalMiniLM()``). Default: the one
            ``config.embedding`` names (local MiniLM, shared by the process and
            loaded on first use), wrapped in the store's persistent cache;
            ``None`` turns embeddings off. Without one (``None``, or the
            ``embed`` extra missing), recall is lexical and every manifest says so.
            New turns are embedded when they are written.
        summarizer: Summarizer for the pyramid (default: the one ``config.pyramid.summarizer``
            names; required for ``llm``).
        extractor: What turns segments into memory items (default: the offline rules;
            required when ``config.items.extractor`` is ``llm``, e.g. ``LLMExtractor(model, tokenizer)``).
        project_dir: A project directory whose instruction files (``STRATAMEM.md``,
            ``STRATAMEM.local.md``) and working state go into every context.
        query_rewriter: Who plans recall queries (:mod:`stratamem.retrieve.rewrite`); default the rules.
            A ``ModelRewriter`` asks a chat model, falling back to the rules on any failure (an event).

    Raises:
        ValidationError: Invalid namespace name.
        ConfigError: The pyramid is enabled but the store keeps no pyramid nodes,
            the store's token counts were made with another tokenizer, or the
            configured embedding provider is ``openai`` without ``embedding.dimensions``.
        BackendError: The store cannot be opened.
        MigrationError: The store was written by a newer stratamem.
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str] = "stratamem.db",
        *,
        namespace: str = "default",
        config: Config | None = None,
        tokenizer: Tokenizer | None = None,
        events: EventBus | None = None,
        embedder: Any = _CONFIGURED,
        summarizer: Summarizer | None = None,
        extractor: Extractor | None = None,
        project_dir: str | os.PathLike[str] | None = None,
        query_rewriter: QueryRewriter | None = None,
    ) -> None:
        self.config = config or Config()
        self.project_dir = project_dir
        self._summary_index = SummaryIndex()
        self.events = events or EventBus()
        self._summarizer, self._extractor = summarizer, extractor
        self.tokenizer = tokenizer or get_tokenizer(self.config.tokenizer)
        self.namespace = check_name(namespace, "namespace")
        opened: Store = (
            SQLiteStore(store, busy_timeout_ms=self.config.store.busy_timeout_ms, tokenizer=self.tokenizer.name)
            if isinstance(store, str | os.PathLike)
            else store
        )
        # A store object opened elsewhere records its own tokenizer; counting new
        # turns with another would mix incomparable token counts in one store.
        if opened.tokenizer != self.tokenizer.name:
            raise ConfigError(
                f"the store keeps token counts made with {opened.tokenizer!r}, but this Memory "
                f"counts with {self.tokenizer.name!r}; use the store's tokenizer"
            )
        # A store missing a feature store the configuration uses is refused here,
        # rather than that feature being skipped silently after turns are committed.
        missing = [f for f in needed_features(self.config) if not hasattr(opened, f)]
        if missing:
            raise ConfigError(
                f"the {opened.backend} store has no {', '.join(missing)} feature store(s) this configuration uses"
            )
        check_models(self.config, summarizer, extractor)
        self.store: Store = opened
        self._configured = embedder is _CONFIGURED
        if self._configured:
            from ..embed.default import configured_embedders

            embedder, self._derived_embedder = configured_embedders(self.config, opened)
        else:
            self._derived_embedder = embedder
        self._embedder: Any = embedder
        derived = (summarizer, self._derived_embedder, query_rewriter)
        self._derived = Derived(opened, self.namespace, self.config, self.tokenizer, self.events, *derived).logging_to(
            project_dir
        )
        self._derived.extractor = extractor

    @property
    def embedder(self) -> Any:
        """The embedder used for recall queries (``None``: recall is lexical)."""
        return self._embedder

    @embedder.setter
    def embedder(self, value: Any) -> None:
        # Everything built with the old embedder is rebuilt with the new one on next use.
        self._embedder = self._derived_embedder = value
        self._configured = False
        self._derived.use_embedder(value)
        self.__dict__.pop("_items", None)

    def for_namespace(self, namespace: str) -> Memory:
        """A ``Memory`` for another namespace on the same store and settings."""
        return Memory(
            self.store,
            namespace=namespace,
            config=self.config,
            tokenizer=self.tokenizer,
            events=self.events,
            embedder=_CONFIGURED if self._configured else self.embedder,
            summarizer=self._summarizer,
            extractor=self._extractor,
            project_dir=self.project_dir,
        )

    @property
    def items(self) -> Any:
        """This namespace's long-term memory items (a :class:`stratamem.items.Items`, made on first use)."""
        cached = self.__dict__.get("_items")
        if cached is None:
            from ..items.api import Items

            # Without an embedder, item recall is lexical and reports mode "lexical".
            cached = self.__dict__["_items"] = Items(
                self.store,
                self.namespace,
                tokenizer=self.tokenizer,
                config=self.config.items,
                embedder=self._derived_embedder,
                events=self.events,
            )
        return cached

    # --- writing ----------------------------------------------------------------------

    def add(
        self,
        messages: Turn | dict[str, Any] | Sequence[Turn | dict[str, Any]],
        *,
        session: str = "default",
        format: str = "auto",
        platform: str | None = None,
        channel: str | None = None,
        timestamp: datetime | None = None,
        idempotency_key: str | None = None,
    ) -> list[StoredTurn]:
        """Store messages as turns of ``session``, in one transaction.

        Args:
            messages: A :class:`Turn`, a message dict, or a list of either. Dicts may
                be canonical turns, OpenAI Chat Completions messages or Anthropic
                Messages (``format`` says which; ``auto`` detects).
            session: Session name (created on first use).
            format: ``auto``, ``turns``, ``openai`` or ``anthropic``.
            platform: Platform label for a new session.
            channel: Channel label for a new session.
            timestamp: Timestamp for messages that carry none (default: now).
            idempotency_key: A retry with this key and the same arguments (within 24 h)
                stores nothing and returns the first call's turns (:mod:`stratamem.memory.once`).

        Returns:
            The stored turns with ids, sequence numbers and exact token counts.

        Raises:
            InvalidTurnError: A message is malformed, too large, or a tool result
                answers no earlier tool call. Nothing is stored.
            ValidationError: Invalid session name, format or idempotency key.
            ConflictError: ``idempotency_key`` was used with other arguments. Nothing is stored.
            BackendError: The store failed. Nothing is stored.
        """
        check_name(session, "session")
        args = (messages, session, format, platform, channel, timestamp)
        once = Once(self.store, self.namespace, idempotency_key, request_digest("add", *args))
        if (done := once.replay()) is not None:
            return done
        turns = parse_messages(messages, format, timestamp=timestamp)
        batch = checked_batch(self, session, turns, platform, channel)
        self._fresh()
        stored, fresh = once.append([batch])
        if fresh:
            self._derived.after_add(stored)
        return stored

    @property
    def indexer(self) -> Any:
        """The persisted recall index of this namespace (a :class:`stratamem.retrieve.persisted.TurnIndexer`)."""
        return self._derived.live.indexer

    # --- pyramid ----------------------------------------------------------------------

    @property
    def pyramid(self) -> Pyramid:
        """Segments, consolidations, tiers and summaries of this namespace (:mod:`stratamem.pyramid`).

        Raises:
            ConfigError: The store keeps no pyramid nodes, or the ``llm`` summarizer
                is configured without a ``summarizer`` instance.
        """
        return self._derived.pyramid

    def seal(self, session: str = "default") -> Node | None:
        """Seal the open turns of ``session`` into a segment now (a manual topic boundary).

        Returns:
            The new segment, or ``None`` if no turn was open.

        Raises:
            NotFoundError: Unknown session.
            ConfigError: The store keeps no pyramid nodes.
        """
        self._fresh()
        return self.pyramid.seal(session)

    def add_sessions(
        self, sessions: Iterable[IngestSession], *, progress: Callable[[int], object] | None = None
    ) -> list[StoredTurn]:
        """Store several sessions' turns in one transaction (used by ``ingest``).

        Sessions that name another namespace are refused: use :meth:`for_namespace`.
        ``progress`` is called with a count of turns each time a batch of the
        stored turns has been embedded and indexed.

        Raises:
            ValidationError: A session belongs to another namespace or has a bad name.
            InvalidTurnError: A turn is too large or a tool result is unpaired.
        """
        stored = self._append_sessions(sessions)
        self._derived.after_add(stored, progress)
        return stored

    def ingest(
        self, sessions: Iterable[IngestSession], *, dedupe: bool = True, progress: Callable[[int], object] | None = None
    ) -> IngestReport:
        """Store imported sessions in one transaction, skipping turns already stored (idempotent).

        A turn is already stored when its session holds a turn with the same
        dedupe key (:attr:`IngestSession.keys`: the source's message id, else
        its position and content), so ingesting a file twice, or a log that
        has grown, stores only what is new.

        Args:
            sessions: Sessions as read by :func:`stratamem.ingest.read_file`.
            dedupe: ``False`` stores every turn again.
            progress: Called with a count of turns each time a batch of the
                stored turns has been embedded and indexed.

        Raises:
            ValidationError: A session belongs to another namespace or has a bad name.
            InvalidTurnError: A turn is too large or a tool result is unpaired. Nothing is stored.
            BackendError: The store failed. Nothing is stored.
        """
        with self.store.transaction():
            plan = _dedupe.plan_ingest(self.store.ingest_keys, self.namespace, sessions, dedupe=dedupe)
            stored = self._append_sessions(plan.sessions)
            self.store.ingest_keys.record(self.namespace, _dedupe.key_rows(plan, stored))
            self._derived.mark_pending(list(plan.stored))
        self._derived.after_ingest(stored, list(plan.stored), progress)
        return _dedupe.report(plan, stored)

    def _append_sessions(self, sessions: Iterable[IngestSession]) -> list[StoredTurn]:
        """Validate and store sessions' turns in one transaction, without updating derived data."""
        self._fresh()
        batches = []
        for s in sessions:
            if s.namespace not in (None, self.namespace):
                raise ValidationError(
                    f"session {s.session!r} belongs to namespace {s.namespace!r}, not {self.namespace!r}"
                )
            batches.append(session_batch(self, s))
        return self.store.append(self.namespace, batches)

    # --- reading ----------------------------------------------------------------------

    def turns(
        self, session: str | None = None, *, limit: int | None = None, newest_first: bool = False
    ) -> list[StoredTurn]:
        """Stored turns of the namespace (or one session), in order.

        Raises:
            NotFoundError: ``session`` is given and does not exist.
        """
        if session is not None:
            self.store.session(self.namespace, session)
        return self.store.turns(self.namespace, session, limit=limit, newest_first=newest_first)

    def context(
        self,
        query: str | None = None,
        *,
        budget: int | None = None,
        session: str | None = None,
        format: str = "openai",
        policy: str | None = None,
        now: datetime | None = None,
        provider: str | None = None,
        model: str | None = None,
        calibration: Calibration | None = None,
        project_dir: str | os.PathLike[str] | None = None,
        system_prompts: str = "session",
        cache: bool | None = None,
        record: bool | None = None,
    ) -> Context:
        """Assemble the context for the next model call within ``budget`` tokens.

        The current session's most recent turns form the window; older turns
        that match ``query`` are recalled verbatim (hybrid lexical + vector +
        structure ranking); the sections share the budget by ``policy``. The
        result is rendered for ``format``, counted exactly (never above
        ``budget``), structurally valid for the provider, and explained by its
        manifest.

        Args:
            query: What the next call is about; drives recall (none: window only).
            budget: Token budget (default: ``config.context.default_budget``).
            session: The current session (default: the most recently written one).
            format: ``openai`` (Chat Completions messages), ``responses`` (OpenAI
                Responses input items), ``anthropic`` or ``text``.
            policy: A registered policy: ``hybrid``, ``topics``, ``pyramid``,
                ``state_first`` or ``recall`` (:func:`stratamem.context.policy_names`;
                default: ``config.context.policy``).
            now: When the query is asked: relative times in it ("two weeks ago",
                "last Saturday") are resolved against it (default: the time of the
                namespace's newest turn; a naive datetime is UTC). The manifest
                notes the windows read.
            provider: Whose token counting the budget is in: ``openai`` or
                ``anthropic`` (default: the format's provider; none for ``text``).
                Counts are exact ``o200k_base`` tokens times the provider's factor
                (:data:`~stratamem.tokens.PROVIDER_FACTORS`), rounded up; the
                manifest's ``counting`` says which counter and factor were used.
            model: The target model: the key of a learned ``calibration`` factor.
            calibration: Factors learned from reported usage
                (:class:`~stratamem.tokens.Calibration`, e.g. a wrapped client's);
                one learned for ``model`` replaces the provider's factor.
            project_dir: Project whose instruction files and working state go in
                (default: the one this ``Memory`` was made with, if any). Every
                shell (CLI, MCP, HTTP) passes its project directory here.
            system_prompts: ``session``: the current session's system prompts only, never another's;
                ``namespace``: every session's (the current session's first, then the others' newest first).
            record: Store the manifest (default: ``config.context.record_manifests``);
                ``False`` for a look that must write nothing (the HTTP GET routes).
            cache: Lay the prompt out for the provider's cache (docs/context.md); default ``context.cache_layout``.

        Raises:
            BudgetError: ``budget`` is not a positive integer, or too small once
                converted to the provider's counting.
            ValidationError: Unknown format, policy, provider or ``system_prompts``,
                ``query`` not a string, ``model`` not a string or ``now`` not a datetime.
            NotFoundError: Unknown namespace or session.
        """
        budget = check_budget(self.config.context.default_budget if budget is None else budget)
        check_context_format(format)
        now = check_now(now)
        policy = policy or self.config.context.policy
        check_arguments(query, policy, project_dir, system_prompts)
        counting = self.counting(format, provider, model, calibration)
        room = counting.room(budget)
        if room < 1:
            raise BudgetError(f"budget {budget} is below one token in {counting.provider}'s counting", path="budget")
        session = current_session(self.store, self.namespace, session)
        self._fresh(repair=True)
        # Responses items carry the same text and framing as Chat Completions messages: the
        # context is assembled and counted as those, then re-shaped (see providers.to_responses).
        fmt = "openai" if format == "responses" else format
        project = self.project_dir if project_dir is None else project_dir
        request = Request(query, room, session, fmt, policy, now, project, system_prompts)
        request = with_cache(request, self.config.context, counting, cache)
        ctx = as_requested(build_context(self._parts(), request), format, budget, counting)
        record_manifest(self.store, self.namespace, session, ctx, self.config.context, self._derived.failed, record)
        return ctx

    def report_usage(self, usage: Any, *, session: str | None = None) -> PromptUsage:
        """Record a provider's ``usage`` (Anthropic, OpenAI Chat, Responses) on the newest manifest's ``cache``.

        Raises:
            ValidationError: Not a provider usage.
            NotFoundError: No manifest recorded for the session.
        """
        return report_usage(self.store, self.namespace, session, usage)

    def counting(
        self,
        format: str = "openai",
        provider: str | None = None,
        model: str | None = None,
        calibration: Calibration | None = None,
    ) -> Counting:
        """How :meth:`context` counts a budget for ``provider``/``model`` (see its arguments).

        Raises:
            ValidationError: Unknown format or provider, or ``model`` not a string.
        """
        return check_counting(self.tokenizer.name, format, provider, model, calibration)

    def _parts(self) -> Parts:
        """What context gathering reads from this memory (:mod:`stratamem.context.gather`)."""
        return Parts(
            self.store,
            self.namespace,
            self.tokenizer,
            self.config,
            self._summary_index,
            pyramid=lambda: self.pyramid,
            items=lambda: self.items,
            # Once per context: its index is checked against the store once (a round trip on PostgreSQL).
            recall_index=functools.cache(self._recall_index),
            state=self.state,
            lexical_note=lexical_note(self._configured and self.config.embedding.provider == "local"),
        )

    def _recall_index(self) -> HybridIndex:
        """The namespace's recall index, kept current (:meth:`stratamem.retrieve.live.LiveIndex.current`)."""
        return self._derived.live.current()

    def status(self) -> Status:
        """Counts, tokens and bytes of this namespace."""
        return namespace_status(self.tokenizer.name, self._derived)

    def state(self, project_dir: str | os.PathLike[str] = ".") -> WorkingState:
        """The working state of this namespace, kept under ``project_dir`` (see ``docs/state.md``).

        Raises:
            ValidationError: Invalid namespace name.
        """
        from ..state.working import WorkingState  # local: keeps toon_format out of the facade's import

        return WorkingState(project_dir, self.namespace, config=self.config.state, tokenizer=self.tokenizer)

    # --- export / import --------------------------------------------------------------

    def export(self, out: IO[str]) -> tuple[int, int]:
        """Write this namespace's sessions and turns as JSON Lines; returns ``(sessions, turns)``."""
        return export_from(self, out)

    def import_(self, source: IO[str], *, dedupe: bool = True) -> tuple[int, int, int]:
        """Import an export into this namespace, in one transaction; returns ``(sessions, turns, skipped)``.

        The whole file is parsed and verified before anything is written. Turns a
        session already holds (same seq and content) are skipped and counted: a
        second import adds nothing; a later export of a grown session adds its new turns.

        Args:
            source: The export (see :mod:`stratamem.exchange`).
            dedupe: ``False`` refuses sessions that already exist instead.

        Raises:
            DecodeError: Truncated, corrupt or unsupported file.
            ConflictError: An existing session holds different turns than the
                file (or, without ``dedupe``, exists at all).
            BackendError: The store failed; nothing was stored.
        """
        return import_into(self, source, dedupe=dedupe)

    # --- forget, search, namespaces (stratamem.forget, stratamem.search) ----------------

    def forget(
        self,
        *,
        turns: Sequence[int | str] | None = None,
        session: str | None = None,
        all_namespace: bool = False,
        vacuum: bool = False,
    ) -> ForgetReport:
        """Delete turns and everything derived from them, leaving no copy (see :mod:`stratamem.forget`).

        Exactly one target: ``turns`` (ids as shown: ``turn:N`` or a bare number, ``node:N``,
        ``system:<hash>``), ``session`` (a session name) or ``all_namespace=True``.
        ``vacuum`` also rebuilds the storage files.

        Raises:
            ValidationError: No target, several, or a malformed one.
            NotFoundError: A turn, the session or the namespace does not exist; nothing was forgotten.
            BackendError: The store failed; nothing was forgotten.
            ArchiveError: Committed, but an archive file is not finished yet (the next open finishes it).
        """
        from ..forget import forget

        self._fresh()
        return forget(self, turns=turns, session=session, all_namespace=all_namespace, vacuum=vacuum)

    def expand(self, id: int | str) -> list[StoredTurn]:
        """The stored turns an id stands for (see :mod:`stratamem.expand`): ``turn:N`` itself,
        ``node:N`` (or a bare number) the turns the node covers, ``system:<hash>`` every copy of that prompt.

        Raises:
            ValidationError: Not such an id. NotFoundError: Nothing here has it.
        """
        return expand_id(self, id)

    def search(self, query: str, *, k: int = 10, session: str | None = None) -> list[SearchHit]:
        """The ``k`` best turns and summaries for ``query``, with score breakdowns (see :mod:`stratamem.search`).

        Raises:
            ValidationError: Empty query or ``k`` outside 1–1,000.
            NotFoundError: Unknown namespace or session.
        """
        from ..search import search

        self._fresh(repair=True)
        return search(self, query, k=k, session=session)

    def namespaces(self) -> list[NamespaceStats]:
        """Every namespace of the store with its counts, sorted by name."""
        return self.store.namespace_stats()

    def _reset_derived(self) -> None:
        """Drop the in-memory indexes (recall, summaries, items): they may hold forgotten text."""
        self._derived.reset()
        self._summary_index = SummaryIndex()
        self.__dict__.pop("_items", None)

    def _fresh(self, *, repair: bool = False) -> None:
        """Drop what other writers made stale (:meth:`Derived.stale`); ``repair``: :meth:`Derived.repair_once` too."""
        if self._derived.stale():
            self._reset_derived()
        if repair:
            self._derived.repair_once()

    def close(self) -> None:
        """Close the store."""
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Memory({self.store!r}, namespace={self.namespace!r})"
