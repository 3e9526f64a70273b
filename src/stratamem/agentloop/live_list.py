"""The live list's bookkeeping: which messages are stored, syncing new ones, adopting replays, resuming.

:class:`_LiveList` is the part of :class:`~stratamem.agentloop.Compactor` that
follows the caller's live message list between calls: how far it has been
seen, the stored turn id and sequence number of each message, storing new
messages (with a :class:`~stratamem.Memory`), adopting messages that repeat
stored turns after a restart (:class:`~stratamem.agentloop.replay.ReplayMatcher`),
and rebuilding the list to continue with from the stored state
(:meth:`_LiveList.resume_messages`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ValidationError
from .checkpoint import ACK_TEXT, CHECKPOINT_HEADER
from .cut import is_synthetic, real_user_indices
from .replay import ReplayMatcher, stored_messages

if TYPE_CHECKING:
    from ..memory import Memory
    from ..records.conversations import ConversationState
    from .results import CompactionResult

__all__: list[str] = []


class _LiveList:
    """Stored ids of the live list's messages; sync, replay matching and resume (a part of ``Compactor``)."""

    if TYPE_CHECKING:  # set by Compactor.__init__; the methods are Compactor's
        provider: str
        session: str
        memory: Memory | None
        _state: ConversationState
        _ids: list[int | None]
        _seqs: list[int | None]
        _seen: int
        _replay: ReplayMatcher | None
        _replay_checked: bool

        def _save(self, **changes: Any) -> None: ...

        def should_compact(self, messages: Sequence[Mapping[str, Any]], *, system: str | None = None) -> bool: ...

        def compact(
            self, messages: list[dict[str, Any]], *, system: str | None = None, aligned: list[Any] | None = None
        ) -> CompactionResult: ...

    def resume_messages(self, *, system: str | None = None) -> list[dict[str, Any]]:
        """The live list to continue with after a restart: the checkpoint, then the recent turns.

        Without a memory: the saved checkpoint pair (empty if there is none).
        With one: the checkpoint pair, then the stored turns the latest
        compaction kept verbatim and every turn stored since (all stored turns
        if there was no compaction), in this compactor's provider shape, tool
        calls and results intact; OpenAI system turns stored before the cut come
        first. The compactor adopts the list (it is already stored, so nothing
        is stored twice); append to it and pass it to :meth:`prepare_messages`.
        If it would exceed the budget it is compacted before it is returned
        (``threshold - output_reserve``), so the first call fits.

        Args:
            system: Anthropic system prompt, counted against the budget.

        Raises:
            BudgetError: The latest request with its newest tool step alone does not fit.
        """
        prefix = (
            [
                {"role": "user", "content": f"{CHECKPOINT_HEADER}\n\n{self._state.summary}"},
                {"role": "assistant", "content": ACK_TEXT},
            ]
            if self._state.summary
            else []
        )
        if self.memory is None:
            return prefix
        try:
            stored = self.memory.turns(self.session)
        except NotFoundError:  # no such session yet: nothing stored to resume
            stored = []
        cut = self._state.resume_seq
        head = [t for t in stored if t.seq < cut and t.role == "system"] if self.provider == "openai" else []
        recent = [t for t in stored if t.seq >= cut]
        messages: list[dict[str, Any]] = []
        ids: list[int | None] = []
        seqs: list[int | None] = []
        for group in (head, None, recent):
            if group is None:
                messages += prefix
                ids += [None] * len(prefix)
                seqs += [None] * len(prefix)
                continue
            for t in group:
                rendered = stored_messages([t], self.provider)
                messages += rendered
                ids += [t.id] * len(rendered)
                seqs += [t.seq] * len(rendered)
        # The list is adopted as already stored; whatever is appended to it is new.
        self._ids, self._seqs, self._seen = ids, seqs, len(messages)
        self._replay, self._replay_checked = None, True
        if self.should_compact(messages, system=system) and real_user_indices(messages):
            self.compact(messages, system=system)
        return messages

    def sync(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Store (when a memory is attached) and count the messages added since the last call.

        The compactor remembers how far it has seen the live list; append to the
        list between calls, do not rewrite it. Compaction's own messages are not stored.
        Messages that repeat stored turns of the session (a history fed back after a
        restart) take those turns' ids instead of being stored again (see
        :class:`~stratamem.agentloop.replay.ReplayMatcher`).

        Returns:
            Stored turn ids of the new messages (empty without a memory).

        Raises:
            InvalidTurnError: A message cannot be stored (nothing is stored then).
        """
        if len(messages) < self._seen:
            raise ValidationError(
                f"the message list shrank from {self._seen} to {len(messages)} outside compaction", path="messages"
            )
        new = [(i, m) for i, m in enumerate(messages[self._seen :], self._seen) if not is_synthetic(m)]
        self._ids.extend([None] * (len(messages) - self._seen))
        self._seqs.extend([None] * (len(messages) - self._seen))
        ids: list[int] = []
        count = self._state.turn_count + len(new)
        if self.memory is not None and new:
            new = self._match_replayed(new)
        if self.memory is not None and new:
            stored = self.memory.add([dict(m) for _, m in new], session=self.session, format=self.provider)
            for (i, _), st in zip(new, stored, strict=True):
                self._ids[i], self._seqs[i] = st.id, st.seq
            ids = [st.id for st in stored]
            # The store is the truth: a crash between the add above and the save below
            # must not leave the count short for good (sequences run 1..n per session).
            count = stored[-1].seq
        self._seen = len(messages)
        if new:
            self._save(turn_count=count)
        return ids

    def _match_replayed(self, new: list[tuple[int, Mapping[str, Any]]]) -> list[tuple[int, Mapping[str, Any]]]:
        """Adopt messages that repeat stored turns (same content, same order); returns the rest.

        A restarted agent that feeds its stored history (or :meth:`resume_messages`)
        back must not store it twice. On the first sync the session's stored turns
        are loaded once; the leading new messages that match a run of them take
        their ids, and matching continues on later syncs until the run ends or a
        message differs (a fork: from there on everything is stored as new).
        """
        if not self._replay_checked:
            self._replay_checked = True
            assert self.memory is not None
            try:
                stored = self.memory.turns(self.session)
            except NotFoundError:  # unknown session: nothing to match
                stored = []
            self._replay = ReplayMatcher(stored, self.provider) if stored else None
        if self._replay is None:
            return new
        matched, rest = self._replay.match(new)
        for (i, _), st in matched:
            self._ids[i], self._seqs[i] = st.id, st.seq
        if self._replay.done:
            self._replay = None
        return rest
