"""The memories a server holds open: one :class:`~stratamem.Memory` per namespace, on one store.

Library calls go through :meth:`Spaces.call`, which holds one lock: the
request handlers run on a thread pool, and a ``Memory`` (its recall index, its
pyramid) is not meant to be driven by two threads at once. Reads of another
namespace open it lazily with :meth:`Memory.for_namespace`, which writes nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from ..errors import NotFoundError
from .errors import Forbidden
from .security import Principal, allowed

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["Spaces"]

_T = TypeVar("_T")


class Spaces:
    """Open memories by namespace, with the access check and the call lock.

    Args:
        memory: The memory the server was started with (its store, settings and
            models are shared by every namespace).
        project_dir: Where working state files live (``None``: no working state).
    """

    def __init__(self, memory: Memory, project_dir: str | os.PathLike[str] | None = None) -> None:
        self.default = memory
        self.project_dir = project_dir
        self.lock = threading.RLock()
        self._open: dict[str, Memory] = {memory.namespace: memory}

    def call(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn`` holding the lock (one library call at a time)."""
        with self.lock:
            return fn()

    def get(self, namespace: str, principal: Principal | None, *, must_exist: bool = True) -> Memory:
        """The memory of ``namespace``, if ``principal`` may use it.

        Raises:
            Forbidden: The principal's token does not allow this namespace.
            NotFoundError: ``must_exist`` and the namespace holds nothing yet.
            ValidationError: Invalid namespace name.
        """
        if not allowed(principal, namespace):
            raise Forbidden(f"this token may not use namespace {namespace!r}")
        with self.lock:
            mem = self._open.get(namespace)
            if mem is None:
                mem = self._open[namespace] = self.default.for_namespace(namespace)
            if must_exist and not mem.store.has_namespace(namespace):
                raise NotFoundError(f"unknown namespace {namespace!r}")
            return mem

    def names(self, principal: Principal | None) -> list[str]:
        """Namespaces in the store that ``principal`` may see, sorted."""
        with self.lock:
            names = self.default.store.namespaces()
        return sorted(n for n in names if allowed(principal, n))

    def close(self) -> None:
        """Close the shared store."""
        with self.lock:
            self.default.close()
