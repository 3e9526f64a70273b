"""Events: what happened inside the engine, for hooks and for the record.

Components emit an :class:`Event` on an :class:`EventBus`; handlers subscribed
to its kind run in subscription order. Event data carries ids and counts,
never message content (we log numbers, not text).

Handlers may be plain functions or ``async def`` coroutine functions, and both
kinds mix freely. Whatever a handler returns is *resolved* before the emitter
sees it: an awaitable result is awaited.

* :meth:`EventBus.aemit` (async emitters, e.g. ``Compactor.aprepare_messages``)
  awaits it on the running loop.
* :meth:`EventBus.emit` (sync emitters) runs it to completion: on the loop
  given by :func:`bind_loop` when the emitter runs in a worker thread of an
  async program (``asyncio.to_thread`` carries the binding), else with
  ``asyncio.run`` — in a helper thread if this thread already runs a loop,
  because a loop cannot block on itself.

So an ``async def`` hook behaves like a sync one everywhere: its return value
(e.g. indices to pin) counts and its exception propagates to the emitter.

Kinds in use (each component documents its data): ``turns.added``,
``segment.sealed``, ``node.consolidated``, ``tier.changed``,
``summarizer.failed``, ``compaction.before``, ``compaction.after``,
``compaction.failed``, ``compaction.feed_failed``, ``items.spilled``, ``items.promoted``.

``compaction.*`` (emitted by :class:`stratamem.agentloop.Compactor`): ``before``
carries ``session``, ``provider``, ``compaction_number``, ``message_indices``,
``turn_ids``, ``messages``, ``tokens_before``, ``tokens_compacted``,
``threshold``, ``split_turn``; a handler may return message indices to pin
(their turns stay verbatim) or raise ``CompactionCancelled``. ``after`` carries
``status``, ``messages_removed``, ``turn_ids``, ``tokens_before``/``tokens_after``,
``summary_calls``, ``summary_input_tokens``/``summary_output_tokens``, ``pinned``;
``failed`` the same plus ``error`` (the exception type); ``feed_failed`` carries
``session`` and ``errors`` (sealing the pyramid segment or extracting items after a
compaction failed). See docs/agentloop.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["Event", "EventBus", "Handler", "bind_loop", "run_to_completion"]

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
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    """When."""


Handler = Callable[[Event], Any]
"""A subscriber (a function or an ``async def``); its resolved return value is collected by :meth:`EventBus.emit`."""

_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "stratamem_event_loop", default=None
)


@contextlib.contextmanager
def bind_loop(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Within this block (and threads started by ``asyncio.to_thread`` from it), sync
    :meth:`EventBus.emit` runs async handlers on ``loop`` and waits for them.

    Used by async entry points that do their blocking work in a worker thread,
    so that ``async def`` hooks run on the caller's loop, where their own
    resources (clients, locks, queues) live.
    """
    token = _LOOP.set(loop)
    try:
        yield
    finally:
        _LOOP.reset(token)


def run_to_completion(awaitable: Any) -> Any:
    """Run ``awaitable`` to completion from synchronous code and return its result.

    On the loop bound by :func:`bind_loop` when called from a worker thread of it;
    else with ``asyncio.run``, in a helper thread if this thread already runs a loop.
    Its exception propagates.
    """
    loop = _LOOP.get()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is not None and loop.is_running() and loop is not running:

        async def wrapped() -> Any:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wrapped(), loop).result()

    async def main() -> Any:
        return await awaitable

    if running is None:
        return asyncio.run(main())
    # This thread runs a loop that is blocked in our caller: run the handler elsewhere.
    box: dict[str, Any] = {}

    def worker() -> None:
        try:
            box["value"] = asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the emitting thread
            box["error"] = exc

    t = threading.Thread(target=worker, name="stratamem-async-handler")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


class EventBus:
    """Publish/subscribe with a bounded history of recent events; sync and async handlers."""

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

    def _record(self, event: Event) -> list[Handler]:
        with self._lock:
            self._history.append(event)
            del self._history[: -self._limit]
            handlers = list(self._handlers.get(event.kind, ())) + list(self._handlers.get("*", ()))
        log.debug("event %s %s", event.kind, dict(event.data))
        return handlers

    def emit(self, event: Event) -> list[Any]:
        """Record ``event`` and run its handlers; returns their results in order.

        An ``async def`` handler is run to completion before the next handler
        starts (see the module docstring for which loop runs it), so its result
        is returned like a sync handler's. A handler's exception propagates to
        the emitter: a hook that fails must not be silently ignored.
        """
        out = []
        for h in self._record(event):
            result = h(event)
            if inspect.isawaitable(result):
                result = run_to_completion(result)
            out.append(result)
        return out

    async def aemit(self, event: Event) -> list[Any]:
        """:meth:`emit` for async code: awaitable results are awaited on the running loop."""
        out = []
        for h in self._record(event):
            result = h(event)
            if inspect.isawaitable(result):
                result = await result
            out.append(result)
        return out

    def recent(self, kind: str | None = None) -> list[Event]:
        """Recent events (oldest first), optionally of one kind."""
        with self._lock:
            return [e for e in self._history if kind is None or e.kind == kind]
