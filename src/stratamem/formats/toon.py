"""TOON projection: a JSON value rendered as TOON for a prompt, verified by a round trip.

TOON (Token-Oriented Object Notation) is written and read by the ``toon-format``
package; this module never formats TOON itself. A projection is only a view:
the JSON value stays the source of truth. :func:`project` encodes the value,
decodes the result and compares it with the source; it uses TOON only when
that round trip is exact and TOON costs fewer tokens than compact JSON, and
otherwise returns compact JSON with the reason in :attr:`Projection.reason`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

import toon_format

from ..errors import ValidationError
from ..tokens import Tokenizer

__all__ = ["Projection", "compact_json", "project"]


@dataclass(frozen=True, slots=True)
class Projection:
    """A value rendered for a prompt, with its cost and how it was chosen."""

    text: str
    """The rendered text."""
    format: Literal["toon", "json"]
    """``toon``, or ``json`` when TOON was not used."""
    tokens: int
    """Tokens of :attr:`text`."""
    json_tokens: int
    """Tokens of the compact JSON form (the baseline)."""
    toon_tokens: int | None
    """Tokens of the TOON form, or ``None`` when it could not be produced."""
    reason: str | None
    """Why JSON was used instead of TOON; ``None`` when TOON was used."""


def compact_json(value: Any) -> str:
    """``value`` as compact JSON (no spaces, non-ASCII kept as itself).

    Raises:
        ValidationError: ``value`` is not JSON-serializable (or holds NaN/infinity).
    """
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(f"not a JSON value: {exc}") from None


def _same(a: Any, b: Any) -> bool:
    # Compare as JSON text so 1 and 1.0, True and 1, and key order all count.
    return json.dumps(a, ensure_ascii=False, allow_nan=False) == json.dumps(b, ensure_ascii=False, allow_nan=False)


def project(value: Any, tokenizer: Tokenizer) -> Projection:
    """Render ``value`` as TOON if that is exact and smaller, else as compact JSON.

    Args:
        value: A JSON value (dicts, lists, strings, numbers, booleans, ``None``).
        tokenizer: Counts the tokens of both forms.

    Returns:
        The chosen rendering; :attr:`Projection.reason` says why JSON was chosen.

    Raises:
        ValidationError: ``value`` is not JSON-serializable.
    """
    as_json = compact_json(value)
    json_tokens = tokenizer.count(as_json)
    try:
        as_toon = toon_format.dumps(value)
    except (TypeError, ValueError, RecursionError) as exc:
        return Projection(as_json, "json", json_tokens, json_tokens, None, f"TOON encoding failed: {exc}")
    toon_tokens = tokenizer.count(as_toon)
    try:
        back = toon_format.loads(as_toon)
    except (toon_format.ToonDecodeError, ValueError, TypeError, RecursionError) as exc:
        return Projection(
            as_json, "json", json_tokens, json_tokens, toon_tokens, f"TOON does not round-trip: decoding failed ({exc})"
        )
    if not _same(back, value):
        return Projection(
            as_json,
            "json",
            json_tokens,
            json_tokens,
            toon_tokens,
            "TOON does not round-trip: the decoded value differs",
        )
    if toon_tokens >= json_tokens:
        return Projection(
            as_json,
            "json",
            json_tokens,
            json_tokens,
            toon_tokens,
            f"TOON is not smaller ({toon_tokens} tokens vs {json_tokens} for compact JSON)",
        )
    return Projection(as_toon, "toon", toon_tokens, json_tokens, toon_tokens, None)
