"""Which memory items a read sees: the scope filter both backends put in their WHERE clauses.

The rule itself is :func:`stratamem.records.items.visible_in`; this is its SQL
form, written once so the two backends cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["view_clause"]


def view_clause(view: Sequence[str] | None, mark: str = "?") -> tuple[str, list[Any]]:
    """SQL condition (and its parameters) for the items a read sees.

    ``view`` ``None``: every item. Otherwise namespace-wide items plus the
    session-scoped items of the sessions named (an empty ``view``: namespace-wide
    items only). The rule is :func:`stratamem.records.items.visible_in`; both
    backends build their filter here (``mark`` is the parameter placeholder).
    """
    if view is None:
        return "1 = 1", []
    if not view:
        return "scope = 'namespace'", []
    return f"(scope = 'namespace' OR session IN ({', '.join(mark for _ in view)}))", list(view)
