"""The ids search, contexts and manifests show, read back: ``turn:805``, ``node:50``, ``system:<hash>``.

Every shell prints these ids, and every shell must take them back
(``forget``, ``expand``). :func:`parse_ref` is the one reader: it accepts the
shown form, or a bare integer that names the kind the caller expects
(``forget`` takes turn numbers, ``expand`` node numbers, as before). Other ids
a manifest shows (``item:3``, ``state``, ``checkpoint:<session>``,
``instructions:<file>``) name things that are not turns; they are refused with
a message that says what to use instead.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..errors import ValidationError

__all__ = ["REF_KINDS", "BareKind", "Ref", "RefKind", "parse_ref", "parse_refs", "system_id"]

RefKind: TypeAlias = Literal["turn", "node", "system"]
BareKind: TypeAlias = Literal["turn", "node"]
REF_KINDS: tuple[str, ...] = ("turn", "node", "system")
"""Kinds of id that stand for stored turns (and so can be forgotten or expanded)."""

_HASH_CHARS = 12
_HASH_RE = re.compile(rf"^[0-9a-f]{{{_HASH_CHARS}}}$")
_NUMBER_RE = re.compile(r"^[1-9][0-9]{0,18}$")
_MAX_ID = 2**63 - 1
"""Largest id a store holds (a signed 64-bit integer on both backends)."""
_NOT_TURNS = {
    "item": "a memory item (reject it, or forget the turns it came from)",
    "checkpoint": "a session's agent-loop checkpoint (forget the session's turns instead)",
    "instructions": "a project instruction file (edit the file)",
    "state": "the working state (change it with the state commands)",
}


def system_id(text: str) -> str:
    """The id a system prompt is shown under: ``system:`` and the first 12 hex digits of its SHA-256."""
    return f"system:{hashlib.sha256(text.encode('utf-8')).hexdigest()[:_HASH_CHARS]}"


@dataclass(frozen=True, slots=True)
class Ref:
    """One id that stands for stored turns, as parsed."""

    kind: RefKind
    """``turn`` (one turn), ``node`` (the turns a pyramid node covers) or ``system`` (the system turns with a text)."""
    key: int | str
    """The turn or node id (an int), or the system prompt's 12-digit hash (a str)."""

    def __str__(self) -> str:
        return f"{self.kind}:{self.key}"


def parse_ref(value: object, *, bare: BareKind = "turn", path: str | None = None) -> Ref:
    """Read one id: ``turn:N``, ``node:N``, ``system:<12 hex digits>``, or a bare positive integer (64-bit).

    Args:
        value: The id as given (a string, or an int).
        bare: What a bare integer names (``turn`` for forget, ``node`` for a pyramid expand).
        path: Where in the input the id is, for the error.

    Raises:
        ValidationError: Not an id of these kinds (an item, the state, a
            malformed or non-positive number, a hash of the wrong form).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if not 1 <= value <= _MAX_ID:
            shown = repr(value) if value < 10**30 else f"an integer of {value.bit_length()} bits"
            raise ValidationError(f"an id must be a positive 64-bit integer, got {shown}", path=path)
        return Ref(bare, value)
    if not isinstance(value, str):
        raise ValidationError(
            f"an id must be a string such as 'turn:12' or an integer, got {type(value).__name__}", path=path
        )
    text = value.strip()
    if _NUMBER_RE.match(text) and int(text) <= _MAX_ID:
        return Ref(bare, int(text))
    kind, sep, key = text.partition(":")
    kind = kind.lower()
    if kind in ("turn", "node") and sep and _NUMBER_RE.match(key) and int(key) <= _MAX_ID:
        return Ref("turn" if kind == "turn" else "node", int(key))
    if kind == "system" and sep and _HASH_RE.match(key.lower()):
        return Ref("system", key.lower())
    shown = repr(value) if len(value) <= 60 else repr(value[:57] + "...")  # an error line, not an echo of the input
    if kind in _NOT_TURNS:
        raise ValidationError(f"{shown} names {_NOT_TURNS[kind]}, not stored turns", path=path)
    raise ValidationError(
        f"{shown} is not an id: expected turn:N, node:N, system:<{_HASH_CHARS} hex digits> or a positive integer",
        path=path,
    )


def parse_refs(values: object, *, bare: BareKind = "turn", path: str = "ids") -> list[Ref]:
    """Read a non-empty list of ids (see :func:`parse_ref`), each error naming its position; repeats dropped.

    Raises:
        ValidationError: Not a list, empty, or an id that does not parse.
    """
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise ValidationError("expected a list of ids", path=path)
    refs = [parse_ref(v, bare=bare, path=f"{path}[{i}]") for i, v in enumerate(values)]
    if not refs:
        raise ValidationError("the list is empty: name at least one id", path=path)
    return list(dict.fromkeys(refs))
