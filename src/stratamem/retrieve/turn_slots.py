"""The recall index's turns, one slot each, kept where the cyclic garbage collector does not walk them.

An index opened from the store holds a :class:`~stratamem.store.base_turn_index.TurnKey`
per turn until the turn is recalled. A named tuple is a tuple subclass, and
CPython's collector only stops tracking *exact* tuples whose items cannot
form cycles: every key stayed tracked, so each full collection walked one
object per turn (issue 28: at 100k turns ~100k keys, a full pass of 40-57 ms
on about one agent-loop call in 60). :class:`TurnSlots` keeps a key's fields
as a plain tuple instead (ints, strings, a timestamp: the collector drops it
from its lists the first time it meets it) and hands out the same
:class:`TurnKey` when a slot is read; a turn that was recalled or added in
full stays the :class:`~stratamem.records.StoredTurn` it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, overload

import numpy as np

from ..records import StoredTurn
from ..store.base_turn_index import TurnKey
from .vector_rows import _Rows

__all__ = ["TurnSlots"]

_make = TurnKey._make


class TurnSlots:
    """A list of turns (:class:`StoredTurn` or :class:`TurnKey`) that stores keys as plain tuples.

    Reads give what was stored: a :class:`TurnKey` equal to the one added,
    or the :class:`StoredTurn` itself. Supports what the index does with its
    turns: length, indexing (negative too), iteration, assignment of a full
    turn to a slot, and appending at the end. The slots are a numpy object
    array, not a list: the collector does not walk an array's elements either
    (a list of 1M tuples is 1M visits per full collection), and the ids are
    kept beside them as int64 (:meth:`ids` reads no slot).
    """

    __slots__ = ("_ids", "_rows")

    def __init__(self) -> None:
        self._rows = _Rows(object)
        self._ids = _Rows(np.int64)

    def __len__(self) -> int:
        return self._rows.n

    @overload
    def __getitem__(self, at: int) -> Any: ...

    @overload
    def __getitem__(self, at: slice) -> list[Any]: ...

    def __getitem__(self, at: int | slice) -> Any:
        if isinstance(at, slice):
            return [_make(r) if type(r) is tuple else r for r in self._rows.view[at].tolist()]
        row = self._rows.view[at]
        return _make(row) if type(row) is tuple else row

    def __setitem__(self, at: int, turn: StoredTurn | TurnKey) -> None:
        self._rows.view[at] = tuple(turn) if isinstance(turn, TurnKey) else turn
        self._ids.view[at] = turn.id

    def __iter__(self) -> Iterator[Any]:
        return (_make(r) if type(r) is tuple else r for r in self._rows.view.tolist())

    def ids(self, positions: Iterable[int]) -> list[int]:
        """The turn ids at ``positions`` (no slot read)."""
        at = np.fromiter(positions, dtype=np.int64)
        return self._ids.view[at].tolist()

    def extend(self, turns: Iterable[StoredTurn | TurnKey]) -> None:
        """Append turns in order (keys are kept as plain tuples)."""
        given = [tuple(t) if isinstance(t, TurnKey) else t for t in turns]
        # (fromiter: each tuple one element; an array made from the list would read tuples as rows)
        self._rows.extend(np.fromiter(given, dtype=object, count=len(given)))
        self._ids.extend(np.fromiter((t[0] if isinstance(t, tuple) else t.id for t in given), np.int64, len(given)))

    def append(self, turn: StoredTurn | TurnKey) -> None:
        """Append one turn."""
        self.extend([turn])

    def __repr__(self) -> str:
        return f"TurnSlots({len(self)} turns)"
