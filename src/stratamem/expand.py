"""Expanding an id: the stored turns an id that search, a context or a manifest shows stands for.

Search hits and manifest items name what they show (``turn:805``, ``node:50``,
``system:f5ac7b929a86``); :func:`expand` gives back the turns behind such an
id, and :func:`turn_ids` the ids of the stored turns, which is what
:func:`stratamem.forget.forget` deletes. The ids are read by
:func:`stratamem.records.ids.parse_ref`:

* ``turn:N`` — that turn;
* ``node:N`` — the turns the pyramid node covers (a consolidation: all its
  segments'), read from wherever its tier keeps them
  (:meth:`~stratamem.pyramid.Pyramid.expansion`);
* ``system:<hash>`` — every system turn of the namespace with that text: a
  prompt repeated in many sessions is shown under one id, so the id stands
  for all its copies.

Reading only: nothing is recorded or promoted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .errors import NotFoundError
from .records import StoredTurn
from .records.ids import BareKind, Ref, parse_ref, system_id

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["expand", "turn_ids"]


def _system_turns(mem: Memory, ref: Ref) -> list[StoredTurn]:
    found = [st for st in mem.store.turns(mem.namespace, role="system") if system_id(st.text) == str(ref)]
    if not found:
        raise NotFoundError(f"no system prompt {ref} in namespace {mem.namespace!r}")
    return found


def _one_turn(mem: Memory, ref: Ref) -> list[StoredTurn]:
    found = mem.store.turns(mem.namespace, ids=[int(ref.key)])
    if not found:
        raise NotFoundError(f"no turn {ref.key} in namespace {mem.namespace!r}")
    return found


def expand(mem: Memory, id: object, *, bare: BareKind = "node") -> list[StoredTurn]:
    """The stored turns ``id`` stands for, in order (see the module docstring).

    Args:
        mem: The memory whose namespace holds them.
        id: ``turn:N``, ``node:N``, ``system:<hash>``, or a bare number (a ``bare`` id).
        bare: What a bare number names (``node``, as ``stratamem expand`` always took).

    Raises:
        ValidationError: Not such an id (``item:3``, ``abc``, ``0``).
        NotFoundError: Nothing of this namespace has that id.
        ArchiveError: A node's turns are neither in its tier's copy nor among the stored turns.
    """
    ref = parse_ref(id, bare=bare, path="id")
    if ref.kind == "turn":
        return _one_turn(mem, ref)
    if ref.kind == "system":
        return _system_turns(mem, ref)
    return mem.pyramid.expand(int(ref.key))


def turn_ids(mem: Memory, refs: Sequence[Ref]) -> list[int]:
    """Ids of the turns ``refs`` stand for, ascending, each once (a turn's id is taken as given).

    Raises:
        NotFoundError: A node or a system prompt that this namespace does not have.
    """
    ids: set[int] = set()
    for ref in refs:
        if ref.kind == "turn":
            ids.add(int(ref.key))
        elif ref.kind == "node":
            ids.update(mem.pyramid.turn_ids(int(ref.key)))
        else:
            ids.update(st.id for st in _system_turns(mem, ref))
    return sorted(ids)
