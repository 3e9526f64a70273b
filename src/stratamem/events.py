"""Events: what happened inside the engine, for hooks and for the record.

Components emit an :class:`Event` on an :class:`EventBus`; handlers subscribed
to its kind run synchronously, in subscription order. Event data carries ids
and counts, never message content (we log numbers, not text).

Kinds in use (each component documents its data): ``turns.added``,
``segment.sealed``, ``node.consolidated``, ``tier.changed``,
``summarizer.failed``, ``compaction.before``, ``compaction.after``,
``compaction.failed``, ``items.spilled``, ``items.promoted``.

``compaction.*`` (emitted by :class:`stratamem.agentloop.Compactor`): ``before``
carries ``session``, ``provider``, ``compaction_number``, ``message_indices``,
``turn_ids``, ``messages``, ``tokens_before``, ``tokens_compacted``,
``threshold``, ``split_turn``; a handler may return message indices to pin
(their turns stay verbatim) or raise ``CompactionCancelled``. ``after`` carries
``status``, ``messages_removed``, ``turn_ids``, ``tokens_before``/``tokens_after``,
``summary_calls``, ``summary_input_tokens``/``summary_output_tokens``, ``pinned``;
``failed`` the same plus ``error`` (the exception type). See docs/agentloop.md.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = ["Event", "EventBus", "Handler"]

log = logging.getLogger("stratamem.events")


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened."""

    kind: str
    """Dotted kind, e.g. ``compaction.before``."""
    data: Mapping[str, Any] = field(default_factory=dict)
    """Ids, counts and flags describing it (never message text)."""
    namespace: str | None = None
    """Namespace it happened in."""
    at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    """When."""


Handler = Callable[[Event], Any]
"""A subscriber; its return value is collected by :meth:`EventBus.emit`."""


class EventBus:
    """Synchronous publish/subscribe with a bounded history of recent events."""

    def __init__(self, history: int = 1000) -> None:
        self._handlers: dict[str, list[Handler]] = {}
        self._lock = threading.Lock()
        self._history: list[Event] = []
        self._limit = history

    def subscribe(self, kind: str, handler: Handler) -> Callable[[], None]:
        """Call ``handler`` for every event of ``kind`` (``"*"`` for all); returns an unsubscribe function."""
        with self._lock:
            self._handlers.setdefault(kind, []).append(handler)

        def unsubscribe() -> None:
            with self._lock:
                if handler in self._handlers.get(kind, []):
                    self._handlers[kind].remove(handler)
        return unsubscribe

    def emit(self, event: Event) -> list[Any]:
        """Record ``event`` and run its handlers; returns their results in order.

        A handler's exception propagates to the emitter: a hook that fails must
        not be silently ignored.
        """
        with self._lock:
            self._history.append(event)
            del self._history[:-self._limit]
            handlers = list(self._handlers.get(event.kind, ())) + list(self._handlers.get("*", ()))
        log.debug("event %s %s", event.kind, dict(event.data))
        return [h(event) for h in handlers]

    def recent(self, kind: str | None = None) -> list[Event]:
        """Recent events (oldest first), optionally of one kind."""
        with self._lock:
            return [e for e in self._history if kind is None or e.kind == kind]
