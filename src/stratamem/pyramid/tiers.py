"""Tier rules: which segments are hot, warm or cold, and how each tier holds its content.

* **hot** — the newest ``hot_chunks`` segments, while they fit ``hot_max_tokens``:
  the prompt sees their full turns (read from the canonical turns table).
* **warm** — older segments: a compact encoding of their turns plus the summary.
* **cold** — segments beyond the newest ``warm_max_turns`` turns (seed 000:
  hot is the last 20 turns, warm turns 20–100, cold 100+) or older than
  ``warm_max_age_hours``: summary and key facts only; the full content goes to
  the zstd archive (:mod:`stratamem.pyramid.archive`), expandable on demand.

Age is measured against the namespace's newest turn, not the wall clock, so
an imported or replayed history is tiered exactly as it was lived. Moves go
one way (hot → warm → cold); promotion back on access is the recall layer's call.

The warm encoding is chosen by ``warm_format``: ``ctf`` uses the lossless
CTF v1 codec (:mod:`stratamem.formats.ctf`), ``json`` compact canonical JSON.
The node records the format used, so what is stored is always what is said.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..errors import DecodeError
from ..formats import ctf
from ..records import StoredTurn, Turn
from ..records.nodes import Node, Tier

__all__ = ["decode_turns", "encode_turns", "plan_tiers", "turn_record", "turn_from_record"]


def turn_record(st: StoredTurn) -> dict[str, Any]:
    """The self-contained record of a stored turn kept in warm content and the archive."""
    return {"id": st.id, "session": st.session, "seq": st.seq, "tokens": st.tokens, "turn": st.turn.to_dict()}


def turn_from_record(rec: dict[str, Any], namespace: str) -> StoredTurn:
    """Inverse of :func:`turn_record`.

    Raises:
        DecodeError: The record is malformed.
    """
    try:
        return StoredTurn(
            int(rec["id"]), namespace, rec["session"], int(rec["seq"]), int(rec["tokens"]), Turn.from_dict(rec["turn"])
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DecodeError(f"malformed turn record: {exc}") from exc


def encode_turns(turns: Sequence[StoredTurn], fmt: str) -> tuple[str, str]:
    """Encode turns for the warm tier; returns ``(format_used, content)``.

    ``ctf`` uses the lossless CTF v1 codec (:mod:`stratamem.formats.ctf`);
    ``json`` (the only other configurable value) compact canonical JSON.
    """
    if fmt == "ctf":
        return "ctf", ctf.encode_turns([t.turn for t in turns])
    return "json", json.dumps([turn_record(t) for t in turns], ensure_ascii=False, separators=(",", ":"))


def decode_turns(fmt: str, content: str, namespace: str, ids: Sequence[StoredTurn] | None = None) -> list[StoredTurn]:
    """Inverse of :func:`encode_turns`.

    CTF carries turns only; their identities (id, session, seq, tokens) come
    from ``ids``, the stored turns of the node in order.

    Raises:
        DecodeError: Malformed content or an unknown format.
    """
    if fmt == "json":
        try:
            records = json.loads(content)
        except ValueError as exc:
            raise DecodeError(f"warm content is not JSON: {exc}") from exc
        return [turn_from_record(r, namespace) for r in records]
    if fmt == "ctf":
        if ids is None:
            raise DecodeError("CTF warm content needs the node's turn identities")
        turns = ctf.decode_turns(content)
        if len(turns) != len(ids):
            raise DecodeError(f"CTF content holds {len(turns)} turns, expected {len(ids)}")
        return [StoredTurn(s.id, s.namespace, s.session, s.seq, s.tokens, t) for s, t in zip(ids, turns, strict=True)]
    raise DecodeError(f"unknown warm format {fmt!r}")


def plan_tiers(
    segments: Sequence[Node],
    *,
    hot_chunks: int,
    hot_max_tokens: int,
    covered_by_top: Iterable[int],
    reference: datetime,
    warm_max_age: timedelta,
    warm_max_turns: int = 0,
) -> dict[int, Tier]:
    """Target tier of each segment that must move (segments staying put are left out).

    Args:
        segments: Level-1 nodes, oldest first, with their current tiers.
        hot_chunks: Newest segments kept hot.
        hot_max_tokens: Token budget of the hot tier.
        covered_by_top: Ids of segments under a top-level consolidation.
        reference: "Now" for ages (the namespace's newest turn).
        warm_max_age: Age past which a segment is cold.
        warm_max_turns: Seed 000's warm window: a segment beyond hot stays warm while
            it lies within the newest ``warm_max_turns`` turns of ``segments``
            (counted with the hot ones); older ones are cold. 0: a segment is cold
            once a top-level consolidation covers it.

    Returns:
        ``node_id -> tier`` for every segment whose tier changes; never a move to a hotter tier.
    """
    top = set(covered_by_top)
    order = {"hot": 0, "warm": 1, "cold": 2}
    hot_ids: set[int] = set()
    used = 0
    for node in reversed(segments):
        if len(hot_ids) >= hot_chunks or used + node.tokens > hot_max_tokens:
            break
        hot_ids.add(node.id)
        used += node.tokens
    # The turns from the newest segment back to each one (inclusive).
    depth: dict[int, int] = {}
    seen = 0
    for node in reversed(segments):
        seen += node.turn_count
        depth[node.id] = seen
    moves: dict[int, Tier] = {}
    for node in segments:
        beyond = depth[node.id] > warm_max_turns if warm_max_turns else node.id in top
        if node.id in hot_ids:
            target: Tier = "hot"
        elif beyond or reference - node.end > warm_max_age:
            target = "cold"
        else:
            target = "warm"
        current = node.tier or "hot"
        if order[target] > order[current]:
            moves[node.id] = target
    return moves
