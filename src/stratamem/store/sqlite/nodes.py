"""The pyramid's tables on SQLite: the names this module used to define, kept importable.

Statements and DDL are one implementation for every backend,
:mod:`stratamem.store.node_store`; on SQLite ``node_turns`` has the primary key
``(level, turn_id)``, so the database itself refuses a turn in two nodes of one
level.
"""

from __future__ import annotations

from ..new_rows import NewNode
from ..node_store import m003_pyramid, m014_summary_spend

__all__ = ["NewNode", "m003_pyramid", "m014_summary_spend"]
