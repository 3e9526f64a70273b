"""The stored form of a context manifest, shared by every backend's manifest store.

A manifest explains a prompt by reference: which turns, nodes and items are
in it (their ids, tokens and reasons), the score breakdowns that ranked
them, and what competed and was left out. Its JSON form
(:meth:`~stratamem.records.manifests.Manifest.to_dict`) spells every key of
every entry and every score to 17 digits — ~60 KB for a 4,000-token LoCoMo
prompt. Stored (:func:`encode_manifest`), the entries become rows of values
under one list of score names, each score is kept to 4 decimals, a turn's
``turn_ids`` (its own id) are left out, a summary's are runs ``[first, last]``,
and the whole is zstd-compressed: ~4 KB. :func:`decode_manifest` gives back
the JSON form with those scores. A manifest over ``max_bytes`` loses its
near-misses from the worst up, then its entries' score breakdowns (``fused``
stays); what was dropped is counted under ``"stored_trimmed"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SCORE_DECIMALS", "StoredManifest", "brief_manifest", "check_keep", "decode_manifest", "encode_manifest"]

SCORE_DECIMALS = 4
"""Decimals a stored manifest keeps of each score (the live :class:`Manifest` has them all)."""

_FORMAT = 1
_LEVEL = 3  # level 9 saves ~10% more at ~4x the time (1.5 vs 6 ms per LoCoMo manifest), on the warm path
_BRIEF_LEVEL = 9  # a brief body is ~2/5 of a full one: level 9 costs about what level 3 does there, ~12% smaller


@dataclass(frozen=True, slots=True)
class StoredManifest:
    """A recorded manifest: what one assembled context held and why."""

    id: int
    """Store-assigned id, increasing."""
    namespace: str
    """Namespace the context was built for."""
    session: str | None
    """Current session of that context, if any."""
    data: Mapping[str, Any]
    """The manifest's JSON form (:meth:`stratamem.records.manifests.Manifest.to_dict`), scores to
    :data:`SCORE_DECIMALS` decimals."""


def check_keep(keep: object, what: str = "keep") -> int:
    """Validate how many manifests (or bytes of them) to keep per namespace.

    Raises:
        ValueError: ``keep`` is not an integer of at least 1.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"{what} must be an integer of at least 1, got {keep!r}")
    return keep


def _num(x: Any) -> Any:
    if isinstance(x, float):
        y = round(x, SCORE_DECIMALS)
        return int(y) if y.is_integer() and abs(y) < 2**53 else y
    return x


def _own(entry: Mapping[str, Any]) -> list[int] | None:
    """The turn ids a turn entry covers by itself (``[n]`` for ``turn:n``), else ``None``."""
    kind, _, tail = str(entry.get("id", "")).partition(":")
    return [int(tail)] if kind == "turn" and tail.isdigit() else None


def _runs(ids: Sequence[int]) -> list[int]:
    """``[first, last, first, last, ...]`` of the runs of consecutive ids, in order."""
    out: list[int] = []
    for i in ids:
        if out and i == out[-1] + 1:
            out[-1] = i
        else:
            out += [i, i]
    return out


def _unruns(runs: Sequence[int]) -> list[int]:
    return [i for a, b in zip(runs[::2], runs[1::2], strict=True) for i in range(a, b + 1)]


class _Names:
    def __init__(self) -> None:
        self.names: dict[str, int] = {}

    def scores(self, score: Mapping[str, Any], keep: bool) -> list[Any]:
        # Without the breakdown an entry keeps its ``fused`` score; one ranked by a single other score
        # (a memory item's ``match``) keeps that: it is what placed it.
        items = score.items() if keep or "fused" not in score else [("fused", score["fused"])]
        return [x for k, v in items for x in (self.names.setdefault(k, len(self.names)), _num(v))]


def _entries(data: Mapping[str, Any], near: int, scores: bool) -> dict[str, Any]:
    names = _Names()
    items = []
    for e in data.get("items", ()):
        ids = list(e.get("turn_ids", ()))
        row = [
            e["id"],
            e["kind"],
            e.get("tier"),
            e.get("format", "text"),
            e["tokens"],
            e["reason"],
            names.scores(e.get("score", {}), scores),
            0 if ids == _own(e) else _runs(ids),
        ]
        if e.get("duplicate_of"):
            row.append(list(e["duplicate_of"]))
        items.append(row)
    misses = []
    for n in list(data.get("near_misses", ()))[:near]:
        row = [n["id"], n["kind"], n["tokens"], n["reason"], names.scores(n.get("score", {}), scores)]
        if n.get("duplicate_of") is not None:
            row.append(n["duplicate_of"])
        misses.append(row)
    return {"s": list(names.names), "i": items, "m": misses}


def encode_manifest(data: Mapping[str, Any], max_bytes: int = 16384, *, brief: bool = False) -> bytes:
    """The stored form of a manifest's JSON form: compact rows, scores to 4 decimals, zstd.

    Over ``max_bytes`` the near-misses are dropped from the worst up, then the
    entries' score breakdowns; the items themselves always stay. ``brief``:
    the breakdowns are dropped from the start (each entry and near-miss keeps
    its ``fused`` score, or its scores when it has no ``fused``; every near-miss stays while it fits), the form an
    older manifest is kept in (:func:`brief_manifest`).
    """
    import zstandard

    head = {
        "v": _FORMAT,
        "t": data.get("timestamp"),
        "b": data.get("budget_tokens"),
        "T": data.get("total_tokens"),
        "p": data.get("policy"),
        "q": data.get("query"),
        "k": data.get("tokenizer"),
        "n": list(data.get("notes", ())),
        "c": data.get("counting"),
    }
    if data.get("cache"):  # the prompt-cache record (docs/context.md): small, kept whole
        head["C"] = data["cache"]
    if "tier_tokens" in data:
        head["x"] = [data["tier_tokens"], data.get("source_tokens"), data.get("compression_ratio")]
    trimmed = dict(data.get("stored_trimmed", {}))
    misses = len(data.get("near_misses", ()))
    near, scores = misses, not brief
    while True:
        body = {**head, **_entries(data, near, scores)}
        dropped = {
            **trimmed,
            **({"near_misses": trimmed.get("near_misses", 0) + misses - near} if near < misses else {}),
        }
        if not scores:
            dropped["scores"] = True
        if dropped:
            body["d"] = dropped
        blob: bytes = zstandard.ZstdCompressor(level=_LEVEL if scores else _BRIEF_LEVEL).compress(
            json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        )
        if len(blob) <= max_bytes or (near == 0 and not scores):
            return blob
        if near:
            near //= 2
        else:
            scores = False


def decode_manifest(blob: bytes) -> dict[str, Any]:
    """The JSON form of a stored manifest (as :meth:`Manifest.to_dict` gives it, scores to 4 decimals).

    Raises:
        ValueError: The blob is not a stored manifest of a known format.
    """
    import zstandard

    try:
        body = json.loads(zstandard.ZstdDecompressor().decompress(bytes(blob)))
    except (zstandard.ZstdError, ValueError) as exc:
        raise ValueError(f"not a stored manifest: {exc}") from None
    if not isinstance(body, dict) or body.get("v") != _FORMAT:
        raise ValueError(f"unknown stored manifest format {body.get('v') if isinstance(body, dict) else None!r}")
    names = body["s"]

    def score(flat: Sequence[Any]) -> dict[str, Any]:
        return {names[k]: v for k, v in zip(flat[::2], flat[1::2], strict=True)}

    items = []
    for row in body["i"]:
        entry = {
            "id": row[0],
            "kind": row[1],
            "tier": row[2],
            "format": row[3],
            "tokens": row[4],
            "reason": row[5],
            "score": score(row[6]),
            "turn_ids": (_own({"id": row[0]}) or []) if row[7] == 0 else _unruns(row[7]),
        }
        if len(row) > 8:
            entry["duplicate_of"] = row[8]
        items.append(entry)
    misses = []
    for row in body["m"]:
        miss = {"id": row[0], "kind": row[1], "tokens": row[2], "reason": row[3], "score": score(row[4])}
        if len(row) > 5:
            miss["duplicate_of"] = row[5]
        misses.append(miss)
    out: dict[str, Any] = {
        "timestamp": body["t"],
        "budget_tokens": body["b"],
        "total_tokens": body["T"],
        "policy": body["p"],
        "query": body["q"],
        "tokenizer": body["k"],
        "notes": body["n"],
        "items": items,
        "near_misses": misses,
        "counting": body["c"],
    }
    if "x" in body:
        out["tier_tokens"], out["source_tokens"], out["compression_ratio"] = body["x"]
    if "d" in body:
        out["stored_trimmed"] = body["d"]
    if "C" in body:
        out["cache"] = body["C"]
    return out


def brief_manifest(blob: bytes, max_bytes: int = 16384) -> bytes | None:
    """A stored manifest in its brief form (:func:`encode_manifest` with ``brief``), or ``None`` when it is
    brief already (its score breakdowns were dropped before).

    What stays answers "why is this in my prompt" as the full form does —
    every entry's id, kind, tier, tokens, reason, ``fused`` score and turns,
    every near-miss that fits — at about 40% of the bytes (LoCoMo, 4,000
    tokens: ~1.9 KB beside ~4.8 KB); ``stored_trimmed`` says ``"scores": true``.

    Raises:
        ValueError: The blob is not a stored manifest of a known format.
    """
    data = decode_manifest(blob)
    if data.get("stored_trimmed", {}).get("scores"):
        return None
    return encode_manifest(data, max_bytes, brief=True)
