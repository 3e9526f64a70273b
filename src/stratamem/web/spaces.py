"""The memories a server holds open: one :class:`~stratamem.Memory` per namespace, on one store.

Library calls go through :meth:`Spaces.call`, which holds one lock: the
request handlers run on a thread pool, and a ``Memory`` (its recall index, its
pyramid) is not meant to be driven by two threads at once. Reads of another
namespace open it lazily with :meth:`Memory.for_namespace`, which writes nothing.

The lock is never taken on the event loop, and never waited for without
bound (:class:`~stratamem.web.limits.Limits`): at most ``max_waiting`` calls
run or wait at once and each waits at most ``lock_wait`` seconds, so a long
import cannot use up the thread pool; a call past either gets
:class:`~stratamem.web.errors.Busy` (503 with ``Retry-After``). Long work
(import, seal) runs through :meth:`Spaces.long`: one job at a time off the
event loop, ``work_queue`` more waiting, the next one refused.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import NotFoundError
from .errors import Busy, Forbidden
from .limits import COUNTERS, Limits
from .security import Principal, allowed

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["Spaces"]

_T = TypeVar("_T")


class Spaces:
    """Open memories by namespace, with the access check, the call lock and the long-work queue.

    Args:
        memory: The memory the server was started with (its store, settings and
            models are shared by every namespace).
        project_dir: Where working state files live (``None``: no working state).
        limits: Waiting calls, lock wait and work queue (default: :class:`Limits` ``()``).
    """

    def __init__(
        self, memory: Memory, project_dir: str | os.PathLike[str] | None = None, limits: Limits | None = None
    ) -> None:
        self.default = memory
        self.project_dir = project_dir
        self.limits = limits or Limits()
        self.lock = threading.RLock()
        self._waiting = threading.BoundedSemaphore(self.limits.max_waiting)
        self._held = threading.local()
        self._open: dict[str, Memory] = {memory.namespace: memory}
        self._queue_lock = threading.Lock()
        self._queued = 0
        self._limiter: Any = None

    def _busy(self, message: str) -> Busy:
        COUNTERS.add("calls_refused")
        return Busy(message, self.limits.retry_after)

    @contextmanager
    def locked(self, *, bounded: bool = True) -> Iterator[None]:
        """Hold the lock, waiting at most ``lock_wait`` seconds (re-entrant within one thread).

        ``bounded=False`` (the long-work thread, already bounded by its queue)
        takes no waiting slot and waits as long as it takes.

        Raises:
            Busy: ``max_waiting`` calls already run or wait, or the lock stayed taken.
        """
        if getattr(self._held, "depth", 0):
            self._held.depth += 1
            try:
                yield
            finally:
                self._held.depth -= 1
            return
        if bounded and not self._waiting.acquire(blocking=False):
            raise self._busy(f"{self.limits.max_waiting} calls are already waiting for the store; retry later")
        try:
            if not self.lock.acquire(timeout=self.limits.lock_wait if bounded else -1):
                raise self._busy(f"the store stayed busy for {self.limits.lock_wait:g} s (a long import?); retry later")
            self._held.depth = 1
            try:
                yield
            finally:
                self._held.depth = 0
                self.lock.release()
        finally:
            if bounded:
                self._waiting.release()

    def call(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` holding the lock (one library call at a time).

        Raises:
            Busy: See :meth:`locked`.
        """
        with self.locked():
            return fn()

    async def long(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` (under the lock) on the long-work worker: one job at a time, off the event loop.

        Raises:
            Busy: One job runs and ``work_queue`` more wait already.
        """
        import anyio.to_thread

        with self._queue_lock:
            if self._queued > self.limits.work_queue:
                raise self._busy(
                    f"{self._queued} long jobs (imports, seals) are running or queued; retry "
                    f"after {self.limits.retry_after} s"
                )
            self._queued += 1
        try:
            if self._limiter is None:  # made inside the event loop (anyio needs one)
                self._limiter = anyio.CapacityLimiter(1)
            return await anyio.to_thread.run_sync(self._call_long, fn, limiter=self._limiter)
        finally:
            with self._queue_lock:
                self._queued -= 1

    def _call_long(self, fn: Callable[[], _T]) -> _T:
        with self.locked(bounded=False):
            return fn()

    def get(self, namespace: str, principal: Principal | None, *, must_exist: bool = True) -> Memory:
        """The memory of ``namespace``, if ``principal`` may use it.

        Raises:
            Forbidden: The principal's token does not allow this namespace.
            NotFoundError: ``must_exist`` and the namespace holds nothing yet.
            ValidationError: Invalid namespace name.
            Busy: See :meth:`locked`.
        """
        if not allowed(principal, namespace):
            raise Forbidden(f"this token may not use namespace {namespace!r}")
        with self.locked():
            mem = self._open.get(namespace)
            if mem is None:
                mem = self._open[namespace] = self.default.for_namespace(namespace)
            if must_exist and not mem.store.has_namespace(namespace):
                raise NotFoundError(f"unknown namespace {namespace!r}")
            return mem

    def names(self, principal: Principal | None) -> list[str]:
        """Namespaces in the store that ``principal`` may see, sorted."""
        with self.locked():
            names = self.default.store.namespaces()
        return sorted(n for n in names if allowed(principal, n))

    def close(self) -> None:
        """Close the shared store."""
        with self.lock:
            self.default.close()
