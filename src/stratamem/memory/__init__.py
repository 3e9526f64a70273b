"""The ``Memory`` facade: one namespace's memory, wired from the parts.

* :mod:`~stratamem.memory.facade` — :class:`Memory`, the public API (writing,
  reading, context, status, export/import, forgetting, search);
* :mod:`~stratamem.memory.derived` — the recall index and the pyramid, kept in
  step with committed turns; their failures reported, never raised;
* :mod:`~stratamem.memory.status` — :class:`Status`, what ``Memory.status`` reports,
  and :func:`~stratamem.memory.status.store_status`, the same from the store alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .status import Status

if TYPE_CHECKING:
    from .facade import Memory

__all__ = ["Memory", "Status"]


def __getattr__(name: str) -> Any:
    """``Memory``, imported when first asked for: ``stratamem status`` reads :mod:`.status` without the facade."""
    if name == "Memory":
        from .facade import Memory

        globals()["Memory"] = Memory
        return Memory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
