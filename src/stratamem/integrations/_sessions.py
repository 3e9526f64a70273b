"""Session lookups shared by the adapters."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import NotFoundError

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["session_exists"]


def session_exists(mem: Memory, session: str) -> bool:
    """Whether ``session`` exists in the memory's namespace (one indexed lookup, no listing)."""
    try:
        mem.store.session(mem.namespace, session)
    except NotFoundError:
        return False
    return True
