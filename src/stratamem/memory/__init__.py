"""The ``Memory`` facade: one namespace's memory, wired from the parts.

* :mod:`~stratamem.memory.facade` — :class:`Memory`, the public API (writing,
  reading, context, status, export/import, forgetting, search);
* :mod:`~stratamem.memory.derived` — the recall index and the pyramid, kept in
  step with committed turns; their failures reported, never raised;
* :mod:`~stratamem.memory.status` — :class:`Status`, what ``Memory.status`` reports.
"""

from __future__ import annotations

from .facade import Memory
from .status import Status

__all__ = ["Memory", "Status"]
