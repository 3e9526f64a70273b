"""The pyramid's read API: nodes, provenance, expansion back to full turns, storage statistics.

:class:`_Reads` is the part of :class:`~stratamem.pyramid.consolidate.Pyramid`
that only reads: the nodes of a namespace, the turns a node covers and where
its tier keeps them (canonical turns, warm encoding, cold archive, with a
fallback to the canonical turns when a tier copy is unreadable), and per-tier
and per-level statistics. What it returns beside the records are
:class:`Expansion` and :class:`LevelStats`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ArchiveError, DecodeError, StratamemError, ValidationError
from ..events import Event
from ..records import StoredTurn
from ..records.ids import parse_ref
from ..records.nodes import Node, TierStats
from .archive import Archive, is_reference
from .tiers import decode_turns, turn_from_record

__all__ = ["Expansion", "LevelStats"]


@dataclass(frozen=True, slots=True)
class LevelStats:
    """Size and compression of one level."""

    level: int
    """Level (1 = segments)."""
    nodes: int
    """Nodes at the level."""
    turns: int
    """Turns they cover."""
    tokens: int
    """Exact tokens of those turns."""
    summarized: int
    """Nodes with a summary."""
    summarized_tokens: int
    """Turn tokens under the summarized nodes."""
    summary_tokens: int
    """Tokens of their summaries."""

    @property
    def compression_ratio(self) -> float:
        """Turn tokens per summary token over the summarized nodes (0.0 when none is summarized)."""
        return self.summarized_tokens / self.summary_tokens if self.summary_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        out = {k: getattr(self, k) for k in self.__slots__}
        out["compression_ratio"] = round(self.compression_ratio, 3)
        return out


@dataclass(frozen=True, slots=True)
class Expansion:
    """The full turns of a node and where each segment's turns were read from."""

    turns: list[StoredTurn]
    """The turns, in order."""
    sources: Mapping[int, str] = field(default_factory=dict)
    """Per segment expanded: ``turns`` (the canonical table), ``warm`` (its warm encoding) or ``archive``."""
    fallbacks: Mapping[int, str] = field(default_factory=dict)
    """Segments whose tier copy could not be read (the error), read from the canonical turns instead."""


def _node_id(value: object) -> int:
    """A node id given as ``50`` or ``"node:50"`` (a bare number names a node here).

    Raises:
        ValidationError: Anything else, e.g. a turn's id.
    """
    ref = parse_ref(value, bare="node", path="node_id")
    if ref.kind != "node":
        raise ValidationError(f"{value!r} names {ref.kind} turns, not a pyramid node", path="node_id")
    return int(ref.key)


class _Reads:
    """Reading a namespace's tree: nodes, provenance, expansion, statistics (a part of ``Pyramid``)."""

    if TYPE_CHECKING:  # set by Pyramid.__init__; _emit and _event are Pyramid's
        store: Any
        namespace: str
        archive: Archive | None
        _nodes: Any

        def _event(self, event_kind: str, **data: Any) -> Event: ...

        def _emit(self, event: Event) -> None: ...

    def nodes(
        self,
        *,
        level: int | None = None,
        tier: str | None = None,
        session: str | None = None,
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[Node]:
        """Nodes of the namespace, filtered, in creation order (oldest first unless ``newest_first``).

        Raises:
            ValidationError: Unknown tier or a level below 1.
        """
        if tier is not None and tier not in ("hot", "warm", "cold"):
            raise ValidationError(f"unknown tier {tier!r} (expected hot, warm or cold)")
        if level is not None and level < 1:
            raise ValidationError("level must be at least 1")
        return self._nodes.list(
            self.namespace, level=level, tier=tier, session=session, newest_first=newest_first, limit=limit
        )

    def node(self, node_id: int | str) -> Node:
        """One node, by its id (``50``) or as search and manifests show it (``"node:50"``).

        Raises:
            NotFoundError: No such node in this namespace.
            ValidationError: Not a node id (``"turn:5"``, ``"abc"``, ``0``).
        """
        return self._nodes.get(self.namespace, _node_id(node_id))

    def children(self, node_id: int | str) -> list[Node]:
        """Nodes a consolidation merges, oldest first (empty for segments)."""
        return self._nodes.list(self.namespace, parent_id=self.node(node_id).id)

    def turn_ids(self, node_id: int | str) -> list[int]:
        """Provenance: ids of the turns a node covers, ascending."""
        return self._nodes.turn_ids(self.namespace, self.node(node_id).id)

    def embedding(self, node_id: int | str) -> np.ndarray | None:
        """The node's summary embedding (float32), or ``None``."""
        raw = self._nodes.embedding(self.namespace, self.node(node_id).id)
        return np.frombuffer(raw, dtype=np.float32) if raw else None

    def open_turns(self, session: str) -> list[StoredTurn]:
        """Turns of ``session`` not yet sealed into a segment (the current topic)."""
        return self.store.turns(self.namespace, session, min_seq=self._nodes.sealed_seq(self.namespace, session) + 1)

    def expand(self, node_id: int | str) -> list[StoredTurn]:
        """The full turns a node covers, from wherever its tier holds them (see :meth:`expansion`).

        Raises:
            NotFoundError: No such node.
            ValidationError: Not a node id (see :meth:`node`).
            ArchiveError: Neither the tier's copy nor the canonical turns are complete.
        """
        return self.expansion(node_id).turns

    def expansion(self, node_id: int | str) -> Expansion:
        """The full turns a node covers, and where each segment's turns came from.

        Hot segments read the canonical turns, warm ones decode their warm
        content, cold ones read their archive frame; a consolidation expands
        its children in order. When a tier's copy cannot be read (archive file
        deleted, corrupt frame, undecodable warm content) the canonical turns
        are used if all of them are still in the store: ``sources`` then says
        ``turns``, ``fallbacks`` holds the error, and an ``expand.fallback``
        event is emitted.

        Raises:
            NotFoundError: No such node.
            ArchiveError: The tier's copy is gone or unreadable and the canonical
                turns were deleted by retention.
        """
        node = self.node(node_id)
        node_id = node.id
        if node.level > 1:
            parts = [self.expansion(c.id) for c in self.children(node_id)]
            return Expansion(
                [t for part in parts for t in part.turns],
                {k: v for part in parts for k, v in part.sources.items()},
                {k: v for part in parts for k, v in part.fallbacks.items()},
            )
        ids = self._nodes.turn_ids(self.namespace, node_id)
        problem: StratamemError | None = None
        try:
            copy = self._tier_copy(node, ids)
        except (ArchiveError, DecodeError) as exc:
            copy, problem = None, exc
        if copy is not None:
            return Expansion(copy[1], {node_id: copy[0]})
        turns = self.store.turns(self.namespace, ids=ids)
        if len(turns) != len(ids):
            gone = (
                f"node {node_id}: {len(ids) - len(turns)} turns were deleted by retention and "
                "their archived content is gone"
            )
            if problem is not None:
                raise ArchiveError(f"{gone} ({problem})") from problem
            raise ArchiveError(gone)
        if problem is None:
            return Expansion(turns, {node_id: "turns"})
        self._emit(self._event("expand.fallback", node_id=node_id, tier=node.tier, error=type(problem).__name__))
        return Expansion(turns, {node_id: "turns"}, {node_id: f"{type(problem).__name__}: {problem}"})

    def _tier_copy(self, node: Node, ids: list[int]) -> tuple[str, list[StoredTurn]] | None:
        """``(source, turns)`` from a warm or cold segment's own copy; ``None`` when it has none.

        The source is ``warm`` for content held in the node (a warm segment, or a cold one
        with ``cold_format: ctf``), ``archive`` for the archive frame."""
        if node.tier in ("warm", "cold"):  # a cold segment holds its CTF with cold_format: ctf
            warm = self._nodes.warm_content(self.namespace, node.id)
            if warm is not None:
                known = self.store.turns(self.namespace, ids=ids) if warm[0] == "ctf" else None
                return "warm", decode_turns(warm[0], warm[1], self.namespace, known)
        if node.tier == "cold" and node.archive_ref is not None and self.archive is not None:
            return "archive", self.archived_turns(self.archive.read_node(node.archive_ref, node.id))
        return None

    def archived_turns(self, records: Sequence[Mapping[str, Any]]) -> list[StoredTurn]:
        """The turns of a segment's archive records: references read from the turns table, full records decoded.

        Raises:
            ArchiveError: A referenced turn is no longer in the store.
            DecodeError: A full record is malformed.
        """
        ids: list[int | None] = []
        for r in records:
            raw = r.get("id") if is_reference(r) else None
            ids.append(raw if isinstance(raw, int) and not isinstance(raw, bool) else None)
            if is_reference(r) and ids[-1] is None:
                raise DecodeError(f"malformed archive reference {r!r}")
        wanted = [i for i in ids if i is not None]
        held = {st.id: st for st in self.store.turns(self.namespace, ids=wanted)} if wanted else {}
        out: list[StoredTurn] = []
        for r, turn_id in zip(records, ids, strict=True):
            if turn_id is None:
                out.append(turn_from_record(r, self.namespace))  # type: ignore[arg-type]
            elif turn_id in held:
                out.append(held[turn_id])
            else:
                raise ArchiveError(f"archived turn {turn_id} is no longer in the store")
        return out

    def stats(self) -> list[TierStats]:
        """Storage statistics per tier, plus ``open`` for turns not yet sealed."""
        raw = self._nodes.tier_raw_bytes(self.namespace)
        archive = self.archive.size_bytes() if self.archive is not None else 0
        out = []
        seen = {r[0]: r for r in self._nodes.tier_sizes(self.namespace)}
        for tier in ("hot", "warm", "cold"):
            _, nodes, turns, tokens, view, warm_bytes, summary_bytes = seen.get(tier, (tier, 0, 0, 0, 0, 0, 0))
            if tier == "hot":
                view, size = tokens, raw.get(tier, 0)
            elif tier == "warm":
                size = warm_bytes + summary_bytes
            else:
                size = archive + summary_bytes
            out.append(TierStats(tier, nodes, turns or 0, tokens or 0, view or 0, size, raw.get(tier, 0)))
        ns = self.store.stats(self.namespace)
        sealed_turns = sum(s.turns for s in out)
        sealed_tokens = sum(s.tokens for s in out)
        open_bytes = ns.text_bytes - sum(raw.values())
        out.append(
            TierStats(
                "open",
                0,
                ns.turns - sealed_turns,
                ns.tokens - sealed_tokens,
                ns.tokens - sealed_tokens,
                open_bytes,
                open_bytes,
            )
        )
        return out

    def level_stats(self) -> list[LevelStats]:
        """Size and summary compression per level."""
        out = []
        for level in self._nodes.levels(self.namespace):
            nodes = self._nodes.list(self.namespace, level=level)
            done = [n for n in nodes if n.summary_tokens is not None]
            out.append(
                LevelStats(
                    level,
                    len(nodes),
                    sum(n.turn_count for n in nodes),
                    sum(n.tokens for n in nodes),
                    len(done),
                    sum(n.tokens for n in done),
                    sum(n.summary_tokens or 0 for n in done),
                )
            )
        return out

    def archive_path(self) -> Path | None:
        """Directory of this namespace's archive, if there is one."""
        return self.archive.dir if self.archive is not None else None
