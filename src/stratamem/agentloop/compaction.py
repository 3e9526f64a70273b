"""History compaction: replace the old part of a live conversation by a checkpoint.

Layer 2 of seed 001. When system prompt + history + output reserve exceed
``threshold`` tokens (exact tokenizer, scaled by a :class:`~stratamem.tokens.Calibration`
learned from the provider's reported usage), :meth:`Compactor.compact`:

1. stores every message not yet stored, when a :class:`~stratamem.Memory` is
   attached — so nothing compaction removes from the prompt is ever lost;
2. picks the cut: the earliest *real* user turn (never a tool-result message,
   which Anthropic sends with role ``user``) after which at most
   ``keep_recent_tokens`` remain — the latest user request is always kept;
3. emits ``compaction.before``; a handler may return message indices to pin
   (their whole turns stay verbatim) or raise :class:`~stratamem.errors.CompactionCancelled`;
4. asks the model for a structured checkpoint (an update of the previous one
   from the second compaction on), in parts if the input is large;
5. rebuilds the list in place: system messages, a checkpoint user message and
   an acknowledging assistant message, pinned turns, the recent window — valid
   for the provider (alternation; every tool result beside its call);
6. persists the :class:`~stratamem.records.conversations.ConversationState` and emits
   ``compaction.after``.

If the model fails or times out, the prompt is truncated to the same recent
window (after a short note and the previous checkpoint, if any), so the request
still fits; ``compaction.failed`` is emitted and the state records the
failure. If the newest turn alone does not fit, its oldest complete tool steps
(each call with its results) move into the checkpoint too; if even the latest
user request plus its newest step do not fit, :class:`~stratamem.errors.BudgetError`.

Where a cut may go is decided in :mod:`stratamem.agentloop.cut`; what a compaction
feeds the memory (pyramid seal, extracted items) in :mod:`stratamem.agentloop.feed`;
how stored turns are recognised and rebuilt after a restart in
:mod:`stratamem.agentloop.replay`. :meth:`Compactor.prepare_messages` also applies
the minimum-gain rule (``min_gain_ratio``, cooldown, ``hard_limit``).

This module owns the compactor's state, its token trigger, the gate before
each model call and the compaction itself (events, fallback, the rebuilt
list). Its parts live beside it: the live list's stored ids, sync, replay
matching and resume in :mod:`stratamem.agentloop.live_list`; the plan of one
cut in :mod:`stratamem.agentloop.plan`; the model calls and the checkpoint
messages in :mod:`stratamem.agentloop.writer`; what it returns in
:mod:`stratamem.agentloop.results`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..config import CompactionConfig, LLMConfig, PruningConfig
from ..envvars import section_from_env
from ..errors import BudgetError, CompactionCancelled, ConfigError, ValidationError
from ..events import Event, EventBus, bind_loop
from ..llm import ChatModel
from ..records.conversations import ConversationState
from ..records.usage import PromptUsage
from ..store.base import ConversationStore
from ..tokens import Calibration, Tokenizer, count_message, count_messages, get_tokenizer
from .cache_gate import _CacheGate
from .checkpoint import files_section, missing_sections, track_files
from .cut import capped_start, history_text, is_synthetic
from .feed import feed_memory
from .live_list import _LiveList
from .plan import _CutPlanning
from .pruning import prune_tool_results
from .replay import ReplayMatcher
from .results import CompactionResult, PrepareResult
from .writer import prefix_messages, write_checkpoint

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["Compactor"]

log = logging.getLogger("stratamem.agentloop.compaction")


def _now() -> datetime:
    return datetime.now(UTC)


class Compactor(_LiveList, _CutPlanning, _CacheGate):
    """Prunes and compacts one live conversation's provider messages; keeps its state.

    Args:
        model: Writes checkpoints. ``None`` truncates instead (status ``truncated``).
        provider: ``openai`` or ``anthropic``: the shape of the message lists.
        memory: If given, every message is stored as a turn of ``session`` before
            anything leaves the prompt; its store, event bus, tokenizer, namespace
            and config are the defaults for the arguments below.
        namespace: Owner of the conversation state (default: the memory's, else ``default``).
        session: Conversation (session) name.
        config: Compaction settings (default: ``memory.config.compaction`` or the seed's, with the
            ``STRATAMEM_COMPACTION_*`` variables applied; given here, they are used as they are).
        pruning: Pruning settings used by :meth:`prepare_messages` (default as for ``config``,
            with the ``STRATAMEM_PRUNING_*`` variables).
        llm: Chat settings; ``max_input_tokens`` bounds one summarizer call.
        tokenizer: Counts every message (default ``o200k_base``).
        calibration: Learned correction for ``agent_model`` (restored from the state if saved).
        agent_model: Name of the model the agent calls (the calibration key).
        events: Bus for ``compaction.*`` events.
        states: Where the state is persisted (default: the memory's SQLite store, if any).

    Raises:
        ConfigError: Unknown provider, or a threshold that cannot hold ``keep_recent_tokens``.
    """

    def __init__(
        self,
        model: ChatModel | None,
        *,
        provider: str,
        memory: Memory | None = None,
        namespace: str | None = None,
        session: str = "default",
        config: CompactionConfig | None = None,
        pruning: PruningConfig | None = None,
        llm: LLMConfig | None = None,
        tokenizer: Tokenizer | None = None,
        calibration: Calibration | None = None,
        agent_model: str = "default",
        events: EventBus | None = None,
        states: ConversationStore | None = None,
    ) -> None:
        if provider not in ("openai", "anthropic"):
            raise ConfigError(f"provider must be 'openai' or 'anthropic', got {provider!r}")
        base = memory.config if memory is not None else None
        self.model = model
        self.provider = provider
        self.memory = memory
        self.namespace = namespace or (memory.namespace if memory is not None else "default")
        self.session = session
        # Explicit settings win; otherwise the memory's (or the seed's), with the
        # STRATAMEM_COMPACTION_* / STRATAMEM_PRUNING_* variables applied, as in the shells.
        self.config = config or section_from_env("compaction", base.compaction if base else CompactionConfig())
        self.pruning = pruning or section_from_env("pruning", base.pruning if base else PruningConfig())
        self.llm = llm or (base.llm if base else LLMConfig())
        self.tokenizer = tokenizer or (memory.tokenizer if memory is not None else get_tokenizer())
        self.agent_model = agent_model
        self.events = events or (memory.events if memory is not None else EventBus())
        if states is None and memory is not None:
            states = getattr(memory.store, "conversations", None)
        self.states = states
        if (
            self.config.keep_recent_tokens + self.config.checkpoint_max_tokens + self.config.output_reserve
            > self.config.threshold
        ):
            raise ConfigError(
                "compaction: keep_recent_tokens + checkpoint_max_tokens + output_reserve must not exceed threshold"
            )
        if not 0 <= self.config.min_gain_ratio < 1:
            raise ConfigError("compaction: min_gain_ratio must be in [0, 1)")
        if self.config.hard_limit is not None and self.config.hard_limit < self.config.threshold:
            raise ConfigError("compaction: hard_limit must not be below threshold")
        saved = states.get(self.namespace, self.session) if states is not None else None
        self._state = saved or ConversationState(self.namespace, self.session)
        self.calibration = calibration or Calibration.from_dict(self._state.calibration)
        self._ids: list[int | None] = []
        self._seqs: list[int | None] = []
        self._seen = 0
        self._replay: ReplayMatcher | None = None
        self._replay_checked = False
        # Cooldown bookkeeping of the minimum-gain rule (per process: a restart starts fresh).
        self._calls_since: int | None = None
        self._tokens_after_last = 0
        # The cache-aware gate's growth estimate (tokens a call adds; per process too).
        self._prev_after: int | None = None
        self._growth: float | None = None

    # --- state ------------------------------------------------------------------------

    @property
    def state(self) -> ConversationState:
        """The conversation's current state (as last persisted)."""
        return self._state

    def _save(self, **changes: Any) -> None:
        self._state = dataclasses.replace(
            self._state, updated_at=_now(), calibration=self.calibration.to_dict(), **changes
        )
        if self.states is not None:
            self.states.put(self._state)

    def history_text(self, messages: Iterable[Mapping[str, Any]], *, last: int = 20) -> str:
        """Reflection text: the saved checkpoint, then the last ``last`` messages."""
        return history_text(messages, self._state.summary, last=last)

    # --- counting ---------------------------------------------------------------------

    def count(self, messages: Sequence[Mapping[str, Any]], *, system: str | None = None) -> int:
        """Calibrated tokens of a request with these messages (output reserve not included)."""
        return self.calibration.adjust(self.agent_model, count_messages(messages, self.tokenizer, system=system))

    def should_compact(self, messages: Sequence[Mapping[str, Any]], *, system: str | None = None) -> bool:
        """Whether system + history + output reserve exceed the threshold (and compaction is enabled)."""
        if not self.config.enabled:
            return False
        return self.count(messages, system=system) + self.config.output_reserve > self.config.threshold

    def observe_usage(
        self,
        messages: Sequence[Mapping[str, Any]],
        input_tokens: int,
        *,
        system: str | None = None,
        output_tokens: int | None = None,
        cache: PromptUsage | None = None,
    ) -> float:
        """Learn from the input tokens the provider reported for a request of ``messages``.

        ``input_tokens`` is the whole request's: with prompt caching, Anthropic's
        ``input_tokens`` plus its cache reads and writes. The usage is also
        recorded as the state's ``last_usage`` (``conversation show``), with
        ``cache``'s split (tokens read from and written to the cache) when the
        provider cached anything.

        Returns:
            The new correction factor for ``agent_model``.
        """
        estimate = count_messages(messages, self.tokenizer, system=system)
        factor = self.calibration.observe(self.agent_model, estimate, input_tokens)
        usage: dict[str, Any] = {"input_tokens": int(input_tokens), "estimated": estimate, "model": self.agent_model}
        if output_tokens is not None:
            usage["output_tokens"] = int(output_tokens)
        if cache is not None and (cache.cached_read or cache.cache_written):
            usage.update(cached_read=cache.cached_read, cache_written=cache.cache_written, source=cache.source)
        self._save(last_usage=usage)
        return factor

    # --- the gate ---------------------------------------------------------------------

    def prepare_messages(
        self, messages: list[dict[str, Any]], *, system: str | None = None, aligned: list[Any] | None = None
    ) -> PrepareResult:
        """Run before every model call: store new messages, prune tool output, compact if needed.

        With compaction disabled, the seed's legacy cap applies instead: only the
        newest ``legacy_max_messages`` messages are sent (status ``capped``; cut at a
        real user turn; with a memory attached they stay stored).

        Args:
            messages: The live list; changed in place.
            system: Anthropic system prompt (OpenAI keeps it in ``messages``).
            aligned: Optional per-message side data, kept aligned as in :meth:`compact`.

        Raises:
            ValidationError: ``aligned`` has the wrong length.
            BudgetError: Even the latest request with its newest step does not fit.
            CompactionCancelled: Never — a cancelling handler yields status ``cancelled``.
        """
        if aligned is not None and len(aligned) != len(messages):
            raise ValidationError("aligned must have one entry per message", path="aligned")
        self.sync(messages)
        if self.config.cache_aware:
            self._observe_growth(self.count(messages, system=system))
        stats = prune_tool_results(messages, self.pruning, tokenizer=self.tokenizer, system=system)
        if self._calls_since is not None:
            self._calls_since += 1
        result: CompactionResult | None = None
        stats = self._force_held_back(messages, system, stats)
        if not self.config.enabled:
            result = self._cap(messages, system, aligned)
        elif self.should_compact(messages, system=system):
            result = self._defer(messages, system)
            if result is None:
                result = self.compact(messages, system=system, aligned=aligned)
        if result is None:
            n = self.count(messages, system=system)
            result = CompactionResult("not_needed", self._state.compaction_count, n, n, len(messages), len(messages))
        after = self.count(messages, system=system)
        self._prev_after = after
        return PrepareResult(stats, result, after)

    async def aprepare_messages(
        self, messages: list[dict[str, Any]], *, system: str | None = None, aligned: list[Any] | None = None
    ) -> PrepareResult:
        """:meth:`prepare_messages` for async agent loops.

        The blocking work (token counting, the store, the summarizer call) runs in
        a worker thread; ``async def`` event handlers run on the calling loop and
        are awaited (their results, e.g. indices to pin, count as a sync handler's).
        """
        with bind_loop(asyncio.get_running_loop()):
            return await asyncio.to_thread(self.prepare_messages, messages, system=system, aligned=aligned)

    def _cap(self, messages: list[dict[str, Any]], system: str | None, aligned: list[Any] | None) -> CompactionResult:
        """Seed 001's legacy behaviour with compaction off: the newest ``legacy_max_messages`` messages."""
        before, count_before = self.count(messages, system=system), len(messages)
        start = capped_start(messages, self.config.legacy_max_messages)
        if start == 0:
            return CompactionResult(
                "not_needed", self._state.compaction_count, before, before, count_before, count_before
            )
        keep = [i for i in range(start) if messages[i].get("role") in ("system", "developer")]
        keep += range(start, len(messages))
        kept = set(keep)
        removed = tuple(i for i in range(count_before) if i not in kept)
        turn_ids = tuple(t for t in (self._ids[i] for i in removed) if t is not None)
        resume = next((self._seqs[i] for i in keep if self._seqs[i] is not None), self._state.resume_seq)
        messages[:] = [messages[i] for i in keep]
        if aligned is not None:
            aligned[:] = [aligned[i] for i in keep]
        self._ids, self._seqs = [self._ids[i] for i in keep], [self._seqs[i] for i in keep]
        self._seen = len(messages)
        self._save(last_status="capped", resume_seq=resume)
        after = self.count(messages, system=system)
        return CompactionResult(
            "capped", self._state.compaction_count, before, after, count_before, len(messages), removed, turn_ids
        )

    async def acompact(
        self, messages: list[dict[str, Any]], *, system: str | None = None, aligned: list[Any] | None = None
    ) -> CompactionResult:
        """:meth:`compact` for async code (same rules as :meth:`aprepare_messages`)."""
        with bind_loop(asyncio.get_running_loop()):
            return await asyncio.to_thread(self.compact, messages, system=system, aligned=aligned)

    @property
    def hard_limit(self) -> int:
        """Requests (with the output reserve) above this are compacted whatever the gain or cooldown."""
        cfg = self.config
        return cfg.hard_limit if cfg.hard_limit is not None else int(cfg.threshold * (1 + cfg.min_gain_ratio))

    def _defer(self, messages: list[dict[str, Any]], system: str | None) -> CompactionResult | None:
        """A ``deferred`` result if the minimum-gain rule or the cooldown puts this compaction off.

        Every compaction is a paid summarizer call, so one that would free only
        a little (the request hovers just over the threshold) is not worth it.
        The estimate uses the checkpoint's upper bound, so the real gain is at
        least the estimated one. Above :attr:`hard_limit` nothing is deferred.
        """
        cfg = self.config
        before = self.count(messages, system=system)
        if before + cfg.output_reserve > self.hard_limit:
            return None
        reason = None
        if self._calls_since is not None and (
            (cfg.cooldown_calls and self._calls_since < cfg.cooldown_calls)
            or (cfg.cooldown_tokens and before - self._tokens_after_last < cfg.cooldown_tokens)
        ):
            reason = (
                f"cooldown: {self._calls_since} call(s) and {before - self._tokens_after_last:,} tokens "
                f"since the last compaction"
            )
        elif cfg.min_gain_ratio > 0 or cfg.cache_aware:
            try:
                plan = self._plan(messages, system)
            except BudgetError:
                return None  # compact() raises it with the full story
            if plan is None:
                return None
            gain = before - plan.estimate_after
            need = int(cfg.min_gain_ratio * cfg.threshold)
            if gain < need:
                reason = f"min gain: would free about {gain:,} tokens, the rule asks for {need:,}"
            elif cfg.cache_aware:
                reason = self._cache_reason(gain, plan.estimate_after)
        if reason is None:
            return None
        self._save(deferred=self._state.deferred + 1)
        log.info("compaction of %s/%s deferred (%s)", self.namespace, self.session, reason)
        return CompactionResult(
            "deferred", self._state.compaction_count, before, before, len(messages), len(messages), reason=reason
        )

    # --- compaction -------------------------------------------------------------------

    def compact(
        self, messages: list[dict[str, Any]], *, system: str | None = None, aligned: list[Any] | None = None
    ) -> CompactionResult:
        """Compact ``messages`` in place now (whether or not the threshold is reached).

        Args:
            messages: The live list; replaced in place by the compacted one.
            system: Anthropic system prompt (counted, never compacted).
            aligned: Optional per-message side data (e.g. turn contexts), same length
                as ``messages``; kept aligned (``None`` for inserted messages).

        Returns:
            What happened; ``not_needed`` if there is nothing old to compact.

        Raises:
            ValidationError: ``aligned`` has the wrong length.
            BudgetError: The latest user request with its newest step exceeds the budget.
            InvalidTurnError: A message could not be stored (nothing was changed).
        """
        if aligned is not None and len(aligned) != len(messages):
            raise ValidationError("aligned must have one entry per message", path="aligned")
        self.sync(messages)
        number = self._state.compaction_count + 1
        before = self.count(messages, system=system)
        plan = self._plan(messages, system)
        if plan is None:
            return CompactionResult("not_needed", number, before, before, len(messages), len(messages))
        starts, cut, old, kept_tail, split = plan.starts, plan.cut, plan.old, plan.kept_tail, plan.split
        old_ids = tuple(i for i in (self._ids[i] for i in old) if i is not None)
        try:
            answers = self.events.emit(
                Event(
                    "compaction.before",
                    {
                        "session": self.session,
                        "provider": self.provider,
                        "compaction_number": number,
                        "message_indices": tuple(old),
                        "turn_ids": old_ids,
                        "messages": len(old),
                        "tokens_before": before,
                        "tokens_compacted": sum(count_message(messages[i], self.tokenizer) for i in old),
                        "threshold": self.config.threshold,
                        "split_turn": split,
                    },
                    namespace=self.namespace,
                )
            )
        except CompactionCancelled as exc:
            self._save(last_status="cancelled", last_error=str(exc) or None)
            self.events.emit(
                Event(
                    "compaction.after",
                    {"session": self.session, "status": "cancelled", "compaction_number": number},
                    namespace=self.namespace,
                )
            )
            return CompactionResult(
                "cancelled", number, before, before, len(messages), len(messages), error=str(exc) or None
            )
        pinned = self._pinned(messages, answers, old, starts)
        room = self.config.threshold - self.config.output_reserve - plan.estimate_after
        room -= sum(count_message(messages[i], self.tokenizer) for i in pinned)
        pinned |= self._decision_turns(messages, [i for i in old if i not in pinned], starts, room)
        old = [i for i in old if i not in pinned]
        read, modified = track_files([messages[i] for i in old], self._state.files_read, self._state.files_modified)
        old_ids = tuple(i for i in (self._ids[i] for i in old) if i is not None)
        calls = n_in = n_out = 0
        missing: tuple[str, ...] = ()
        error: str | None = None
        if self.model is None:
            status, checkpoint = "truncated", None
        else:
            try:
                checkpoint, calls, n_in, n_out = write_checkpoint(
                    self.model,
                    [messages[i] for i in old],
                    self._state.summary,
                    config=self.config,
                    llm=self.llm,
                    tokenizer=self.tokenizer,
                )
                missing = tuple(missing_sections(checkpoint))
                # Tracked files are facts we know, so they are appended, not left to the model.
                checkpoint = "\n\n".join(p for p in (checkpoint, files_section(read, modified)) if p)
                status = "compacted"
            except Exception as exc:  # noqa: BLE001 - any summarizer failure falls back, visibly
                # A ChatModel may raise anything (our clients raise ModelError or, for
                # oversized input, ValidationError). Whatever it is, compaction still
                # bounds the prompt: the fallback is recorded in the state, the
                # compaction.failed event and the log, and no stored message is lost.
                status, checkpoint, error = "fallback", None, f"{type(exc).__name__}: {exc}"
                log.error(
                    "compaction %d of %s/%s: summarizer failed (%s); truncating to the recent window",
                    number,
                    self.namespace,
                    self.session,
                    type(exc).__name__,
                )
        prefix = prefix_messages(checkpoint, read, modified, status, len(old), self._state.summary)
        head = [i for i in range(cut) if self._kept_always(messages[i]) and not is_synthetic(messages[i])]
        middle = sorted(pinned)
        order = head + middle + kept_tail
        new = [messages[i] for i in head] + prefix + [messages[i] for i in middle + kept_tail]
        new_ids = [self._ids[i] for i in head] + [None] * len(prefix) + [self._ids[i] for i in middle + kept_tail]
        if aligned is not None:
            aligned[:] = [aligned[i] for i in head] + [None] * len(prefix) + [aligned[i] for i in middle + kept_tail]
        kept = set(order)
        removed = tuple(i for i in range(len(messages)) if i not in kept)
        count_before = len(messages)
        resume = next((self._seqs[i] for i in kept_tail if self._seqs[i] is not None), self._state.resume_seq)
        new_seqs = [self._seqs[i] for i in head] + [None] * len(prefix) + [self._seqs[i] for i in middle + kept_tail]
        messages[:] = new
        self._ids, self._seqs, self._seen = new_ids, new_seqs, len(new)
        after = self.count(messages, system=system)
        if status == "compacted":
            summary = checkpoint
            self._save(
                summary=summary,
                compaction_count=number,
                files_read=read,
                files_modified=modified,
                compacted_messages=self._state.compacted_messages + len(removed),
                last_status=status,
                last_error=None,
                resume_seq=resume,
            )
        else:
            self._save(
                compacted_messages=self._state.compacted_messages + len(removed),
                last_status=status,
                last_error=error,
                failures=self._state.failures + (status == "fallback"),
                files_read=read,
                files_modified=modified,
                resume_seq=resume,
            )
        sealed, extracted = self._after_compaction(status, checkpoint, old_ids, after)
        result = CompactionResult(
            status,
            number,
            before,
            after,
            count_before,
            len(messages),
            removed,
            old_ids,
            tuple(sorted(pinned)),
            split,
            calls,
            n_in,
            n_out,
            missing,
            error,
            sealed_segment=sealed,
            items_extracted=extracted,
        )
        data = {
            "session": self.session,
            "status": status,
            "compaction_number": number,
            "messages_removed": len(removed),
            "turn_ids": old_ids,
            "tokens_before": before,
            "tokens_after": after,
            "summary_calls": calls,
            "summary_input_tokens": n_in,
            "summary_output_tokens": n_out,
            "split_turn": split,
            "pinned": result.pinned_indices,
            "sealed_segment": sealed,
            "items_extracted": extracted,
        }
        if status == "fallback":
            # The error's type only: its message may quote model output.
            self.events.emit(
                Event("compaction.failed", {**data, "error": (error or "").split(":", 1)[0]}, namespace=self.namespace)
            )
        self.events.emit(Event("compaction.after", data, namespace=self.namespace))
        log.info(
            "compaction %d of %s/%s: %s, %d messages out, tokens %d -> %d",
            number,
            self.namespace,
            self.session,
            status,
            len(removed),
            before,
            after,
        )
        return result

    # --- internals --------------------------------------------------------------------

    def _after_compaction(
        self, status: str, checkpoint: str | None, old_ids: tuple[int, ...], after: int
    ) -> tuple[int | None, int]:
        """Restart the cooldown and feed the memory (:func:`~stratamem.agentloop.feed.feed_memory`)."""
        self._calls_since, self._tokens_after_last = 0, after
        if self.memory is None or status == "cancelled":
            return None, 0
        sealed, extracted, problems = feed_memory(self.memory, self.session, self.config, checkpoint, old_ids)
        if problems:
            self._save(last_error="; ".join(problems)[:500])
            self.events.emit(
                Event(
                    "compaction.feed_failed",
                    {"session": self.session, "errors": [":".join(p.split(":", 2)[:2]) for p in problems]},
                    namespace=self.namespace,
                )
            )
        return sealed, extracted
