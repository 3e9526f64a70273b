"""``AsyncMemory``: the :class:`~stratamem.Memory` API for asyncio code, one implementation.

Every rule (validation, token counting, one transaction per write, recall,
assembly) lives in :class:`~stratamem.Memory`. ``AsyncMemory`` owns a
``Memory`` and runs each call on one dedicated worker thread, so:

* **Concurrent tasks are safe.** Calls run one at a time, in submission order,
  on the worker; ``Memory``'s in-process structures (the recall index, the
  pyramid cursor) are never touched by two threads at once, and the event loop
  never blocks on SQLite or PostgreSQL I/O.
* **Cancellation never half-writes.** A call cancelled before the worker starts
  it never runs; one cancelled while running completes (or fails) as a whole on
  the worker, in the store's single transaction, and its result is dropped.
  Either way the store holds the whole batch or none of it.
* **Nothing can drift.** The async methods are generated from ``Memory``'s
  public methods when this module is imported; a method that cannot be
  forwarded safely (it returns a lazy iterator or a live sync object) is listed
  in :data:`EXCLUDED` with the reason, and a test fails on any public ``Memory``
  method that has neither an async twin nor an entry there.

Both backends use the same worker-offload design; see ``docs/integrations/async.md``
for why PostgreSQL does not get a separate psycopg async store.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import itertools
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import StratamemError, ValidationError
from .memory import Memory

if TYPE_CHECKING:
    import os

    from .config import Config
    from .events import EventBus
    from .store.base import Store
    from .tokens import Tokenizer

__all__ = ["EXCLUDED", "AsyncMemory"]

T = TypeVar("T")

EXCLUDED: dict[str, str] = {
    "for_namespace": "returns a sync Memory; AsyncMemory.for_namespace returns an AsyncMemory on the same worker",
    "close": "AsyncMemory.close also stops the worker thread",
    "items": "a live sync object (Items); use `await amem.run(lambda m: m.items.add(...))`",
    "pyramid": "a live sync object (Pyramid); use `await amem.run(lambda m: m.pyramid.nodes())`",
    "embedder": "a plain attribute (readable on AsyncMemory); set it on the sync Memory before sharing it",
    "indexer": "a live sync object (the persisted recall index); use `await amem.run(lambda m: m.indexer...)`",
}
"""Public ``Memory`` names without a generated async twin, and why (documented in docs/integrations/async.md)."""

_ATTRIBUTES = ("namespace", "config", "events", "tokenizer", "store", "embedder", "project_dir")
"""Plain ``Memory`` attributes, readable on an ``AsyncMemory`` (they never do I/O)."""

_LAZY_MARKERS = ("Iterator", "Iterable", "Generator")
_names = itertools.count()


def _forwardable(name: str, attr: Any) -> bool:
    """Whether ``Memory.<name>`` can be run on the worker and its result handed back as is.

    A method returning an iterator would be consumed on the event loop's
    thread, outside the worker, so it is not forwarded (and the parity test
    reports it until someone writes a twin or excludes it with a reason).
    """
    if name.startswith("_") or name in EXCLUDED or not inspect.isfunction(attr):
        return False
    returns = str(inspect.signature(attr).return_annotation)
    return not any(marker in returns for marker in _LAZY_MARKERS)


def _twin(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """An ``async def`` that runs ``Memory.<name>`` on the worker with the same arguments."""

    @functools.wraps(method)
    async def twin(self: AsyncMemory, *args: Any, **kwargs: Any) -> Any:
        return await self._call(method, self._memory, *args, **kwargs)

    twin.__doc__ = f"Async twin of :meth:`stratamem.Memory.{name}` (run on the worker thread).\n\n" + (
        inspect.getdoc(method) or ""
    )
    twin.__qualname__ = f"AsyncMemory.{name}"
    return twin


class _Worker:
    """One thread that runs every call of the ``AsyncMemory`` objects sharing it, in order."""

    def __init__(self) -> None:
        self.thread_id: int | None = None
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"stratamem-aio-{next(_names)}", initializer=self._mark
        )
        self.members: weakref.WeakSet[AsyncMemory] = weakref.WeakSet()
        """Every AsyncMemory on this worker (the root and its ``for_namespace`` siblings)."""

    def _mark(self) -> None:
        self.thread_id = threading.get_ident()


_WRAPPED: weakref.WeakKeyDictionary[Memory, AsyncMemory] = weakref.WeakKeyDictionary()
"""The ``AsyncMemory`` of each wrapped ``Memory``: wrapping one twice gives the same worker."""


class AsyncMemory:
    """Memory for one namespace, with ``async def`` methods (see the module docs).

    Takes exactly the arguments of :class:`~stratamem.Memory` (the store is
    opened right away, as ``Memory`` does), or wrap an existing ``Memory`` with
    :meth:`wrap`. Every public ``Memory`` method has an ``async`` twin with the
    same signature, result and exceptions; :meth:`run` runs any other code on
    the worker.

    >>> import asyncio
    >>> async def demo():
    ...     async with AsyncMemory(":memory:", namespace="demo") as amem:
    ...         await amem.add({"role": "user", "content": "Our budget is $50K."})
    ...         return (await amem.context("budget", budget=100)).messages[0]["content"]
    >>> asyncio.run(demo())
    'Our budget is $50K.'
    """

    if TYPE_CHECKING:
        # Set on the class from ``Memory`` when this module is imported (the loops at the end):
        # the plain attributes, typed as on ``Memory``, and one async twin per public method,
        # which a type checker sees through ``__getattr__`` as ``Any``.
        namespace: str
        config: Config
        events: EventBus
        tokenizer: Tokenizer
        store: Store
        embedder: Any
        project_dir: str | os.PathLike[str] | None

        def __getattr__(self, name: str) -> Any: ...

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._init(Memory(*args, **kwargs), _Worker())

    def _init(self, memory: Memory, worker: _Worker) -> None:
        self._memory = memory
        self._worker = worker
        self._closed = False
        self._root = not worker.members
        worker.members.add(self)

    @classmethod
    def wrap(cls, memory: Memory) -> AsyncMemory:
        """An ``AsyncMemory`` over an existing ``Memory``.

        Wrapping the same ``Memory`` again (e.g. by several adapters) returns the
        same ``AsyncMemory``, so one worker serializes all of them. Do not call
        the ``Memory`` directly from other threads afterwards; sync code that
        shares it uses :meth:`run_sync`.

        Raises:
            ValidationError: ``memory`` is not a :class:`~stratamem.Memory`.
        """
        if not isinstance(memory, Memory):
            raise ValidationError(f"AsyncMemory.wrap needs a Memory, got {type(memory).__name__}")
        out = _WRAPPED.get(memory)
        if out is None or out._closed:
            out = cls.__new__(cls)
            out._init(memory, _Worker())
            _WRAPPED[memory] = out
        return out

    @property
    def memory(self) -> Memory:
        """The wrapped sync ``Memory`` (call it only through :meth:`run`)."""
        return self._memory

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise StratamemError("this AsyncMemory is closed")
        future = self._worker.pool.submit(fn, *args, **kwargs)
        # Cancelling the awaiting task cancels a call not yet started; a running
        # one finishes on the worker (its transaction commits or rolls back whole).
        return await asyncio.wrap_future(future)

    async def run(self, fn: Callable[[Memory], T]) -> T:
        """Run ``fn(memory)`` on the worker and return its result (for items, pyramid, anything sync).

        ``fn`` must finish its work inside the call: a lazy iterator it returns
        would be consumed outside the worker.
        """
        if not callable(fn):
            raise ValidationError(f"run needs a callable, got {type(fn).__name__}")
        return await self._call(fn, self._memory)

    def run_sync(self, fn: Callable[[Memory], T]) -> T:
        """Run ``fn(memory)`` on the worker and wait for it, from sync code that shares this memory.

        Called on the worker itself (from inside :meth:`run`), it runs ``fn`` directly.
        """
        if not callable(fn):
            raise ValidationError(f"run_sync needs a callable, got {type(fn).__name__}")
        if self._closed:
            raise StratamemError("this AsyncMemory is closed")
        if threading.get_ident() == self._worker.thread_id:
            return fn(self._memory)
        return self._worker.pool.submit(fn, self._memory).result()

    def for_namespace(self, namespace: str) -> AsyncMemory:
        """An ``AsyncMemory`` for another namespace on the same store, worker and settings.

        Sharing the worker keeps calls on one store serialized, as ``Memory`` expects.
        Closing this (the root) ``AsyncMemory`` closes the siblings too.
        """
        out = AsyncMemory.__new__(AsyncMemory)
        out._init(self._memory.for_namespace(namespace), self._worker)
        return out

    async def close(self) -> None:
        """Close this memory. Idempotent.

        The ``AsyncMemory`` that opened the store (not one made by :meth:`for_namespace`)
        waits for queued calls, closes the store, stops the worker and closes its
        siblings; a sibling only stops accepting calls (the store stays open for the others).
        """
        if self._closed:
            return
        self._closed = True
        if not self._root:
            return
        worker = self._worker
        for member in list(worker.members):
            member._closed = True
        try:
            await asyncio.wrap_future(worker.pool.submit(self._memory.close))
        finally:
            worker.pool.shutdown(wait=False)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncMemory({self._memory.store!r}, namespace={self._memory.namespace!r})"


def _attribute(name: str) -> property:
    return property(lambda self: getattr(self._memory, name), doc=f"``Memory.{name}`` (read-only).")


for _name, _attr in vars(Memory).items():
    if _forwardable(_name, _attr):
        setattr(AsyncMemory, _name, _twin(_name, _attr))
for _name in _ATTRIBUTES:
    setattr(AsyncMemory, _name, _attribute(_name))
del _name, _attr

# Shown as ``stratamem.AsyncMemory``, like the other exported names.
AsyncMemory.__module__ = "stratamem"
