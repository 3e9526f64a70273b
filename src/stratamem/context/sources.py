"""Context sources: gather what the assembler may put in a prompt, from the parts of memory.

:func:`stratamem.assemble.assemble` is pure; this module does the reading it
needs: project instructions and the working state (seed 004), the agent-loop
checkpoint of the current session (seed 001), and summaries of older history
from the pyramid (seeds 000, 002), ranked for the query. Recall of verbatim
turns lives in :mod:`stratamem.retrieve`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from .assemble import FixedBlock, SummaryUnit
from ..errors import NotFoundError
from ..state.instructions import load_instructions
from ..pyramid.nodes import Node
from ..retrieve.lexical import BM25Index, analyze
from ..tokens import Tokenizer

__all__ = ["SummaryIndex", "checkpoint_block", "project_blocks", "summary_line", "system_blocks"]


def project_blocks(project_dir: str | os.PathLike[str], namespace: str, tokenizer: Tokenizer,
                   state: Any) -> list[FixedBlock]:
    """Instruction files and the working state of a project directory, in prompt order.

    ``state`` is the namespace's :class:`~stratamem.state.WorkingState`; it is
    included only when its ``state.json`` exists.
    """
    blocks = [FixedBlock(f"instructions:{f.path.name}", "instructions", f"## Project instructions ({f.path.name})",
                         f.text) for f in load_instructions(project_dir, tokenizer)]
    if state is not None and Path(state.path).exists():
        proj = state.project()
        blocks.append(FixedBlock("state", "state", "## Working state", proj.text, format=proj.format))
    return blocks


def system_blocks(store: Any, namespace: str, session: str | None) -> list[FixedBlock]:
    """The namespace's system prompts, as standing instructions: each distinct text once.

    A system turn (given to ``add``, or imported) instructs the model; it is
    not something that was said, so the context shows it in its fixed section,
    like project instructions, instead of as a history line that a small budget
    would drop first. The current session's prompts come first, in the order
    given, then other sessions' newest first; a text repeated in many sessions
    (every Codex session starts with the same instructions) is shown once.
    """
    rows = store.turns(namespace, role="system")
    mine = [st.text for st in rows if st.session == session]
    others = [st.text for st in sorted(rows, key=lambda st: -st.id) if st.session != session]
    texts = [t for t in dict.fromkeys(mine + others) if t.strip()]
    return [FixedBlock(f"system:{hashlib.sha256(t.encode('utf-8')).hexdigest()[:12]}", "instructions",
                       "## System prompt", t, reason="system_prompt") for t in texts]


def checkpoint_block(store: Any, namespace: str, session: str | None) -> list[FixedBlock]:
    """The session's agent-loop checkpoint, if it was ever compacted."""
    if session is None:
        return []
    saved = store.conversations.get(namespace, session)
    if saved is None or not saved.summary:
        return []
    return [FixedBlock(f"checkpoint:{session}", "checkpoint",
                       f"## Checkpoint of earlier conversation (compaction {saved.compaction_count})", saved.summary)]


def summary_line(node: Node) -> str:
    """A node's summary as one prompt line: ``- [8 May 2023, session_3, 10 turns] text``.

    A node not summarized yet (hot segments wait for demotion) says so.
    """
    day = f"{node.start.day} {node.start:%B %Y}"
    where = f"{node.session}, " if node.session else ""
    text = node.summary.text if node.summary is not None else "(not summarized yet)"
    return f"- [{day}, {where}{node.turn_count} turns] {text}"


class SummaryIndex:
    """Lexical ranking of the pyramid's summaries, kept current without re-reading every node.

    Summaries of hot segments are left out (their turns are in the window or
    recallable verbatim); so are summaries still pending. Consolidations rank a
    little higher than segments at equal relevance, since they give broad context.

    The first use reads all nodes once; after that each refresh reads only
    nodes newer than the newest seen, the few nodes that may still change on
    their own (hot, or summary pending/failed), and nodes named by the
    pyramid's events (``tier.changed`` …). New summaries are appended to the
    BM25 index; only a changed or withdrawn summary rebuilds it, from cached
    terms. Nodes changed by another process are seen when they are new, hot
    or pending; a tier change made only by another process (warm to cold)
    keeps its old label here until the index is read afresh (a new ``Memory``,
    or after retention).
    """

    def __init__(self) -> None:
        self._subscribed: Any = None
        self._clear()

    def _clear(self) -> None:
        self._nodes: dict[int, Node] = {}
        self._max_id = 0
        self._top_level = 1
        self._watch: set[int] = set()
        self._changed: set[int] = set()
        self._reset = True
        self._text: dict[int, tuple[str, list[str]]] = {}
        self._turn_ids: dict[int, tuple[int, ...]] = {}
        self._docs: list[int] = []
        self._doc_of: dict[int, int] = {}
        self._levels: list[float] = []
        self._bm25 = BM25Index()

    def _on_event(self, namespace: str, event: Any) -> None:
        if event.namespace != namespace:
            return
        if event.kind == "retention.applied":
            self._reset = True
        elif "node_id" in event.data:
            self._changed.add(int(event.data["node_id"]))

    def _refresh(self, pyramid: Any) -> None:
        if self._subscribed is not pyramid.events:
            ns = pyramid.namespace
            pyramid.events.subscribe("*", lambda e: self._on_event(ns, e))
            self._subscribed, self._reset = pyramid.events, True
        if self._reset:
            self._clear()
            self._reset = False
            fetched = pyramid.nodes()
        else:
            fetched = self._newer(pyramid)
            for node_id in sorted((self._watch | self._changed) - {n.id for n in fetched}):
                try:
                    fetched.append(pyramid.node(node_id))
                except NotFoundError:
                    self._reset = True  # deleted behind our back: start over next time
        self._changed.clear()
        rebuild = False
        for node in sorted(fetched, key=lambda n: n.id):
            rebuild |= self._take(node)
        if rebuild:
            self._reindex()

    def _newer(self, pyramid: Any) -> list[Node]:
        """Nodes created since the last refresh, read newest first level by level.

        Per level, so each read walks the store's (namespace, level, id) index
        rather than every namespace's newest nodes; one level above the highest
        seen is asked too, for a consolidation that opens a new level.
        """
        out: list[Node] = []
        for level in range(1, self._top_level + 2):
            limit = 2  # usually nothing or one node is new: read little, widen while all are new
            while True:
                page = pyramid.nodes(level=level, newest_first=True, limit=limit)
                if len(page) < limit or page[-1].id <= self._max_id:
                    break
                limit *= 8
            out += [n for n in page if n.id > self._max_id]
        return out

    def _take(self, node: Node) -> bool:
        """Record a fresh copy of ``node``; True when the index must be rebuilt."""
        self._nodes[node.id] = node
        self._max_id = max(self._max_id, node.id)
        self._top_level = max(self._top_level, node.level)
        settled = node.tier != "hot" and node.summary is not None and node.summary_status == "ok"
        (self._watch.discard if settled else self._watch.add)(node.id)
        eligible = node.summary is not None and node.tier != "hot"
        if not eligible:
            return node.id in self._doc_of
        text = node.summary.text + " " + " ".join(node.key_facts)  # type: ignore[union-attr]
        known = self._text.get(node.id)
        if known is not None and known[0] == text:
            return False
        self._text[node.id] = (text, analyze(text))
        if node.id in self._doc_of:
            return True
        self._doc_of[node.id] = len(self._docs)
        self._docs.append(node.id)
        self._levels.append(0.1 * (node.level - 1))
        self._bm25.add(self._text[node.id][1])
        return False

    def _reindex(self) -> None:
        keep = [i for i in sorted(self._nodes) if i in self._text and self._nodes[i].tier != "hot"
                and self._nodes[i].summary is not None]
        self._docs, self._doc_of = keep, {i: d for d, i in enumerate(keep)}
        self._levels = [0.1 * (self._nodes[i].level - 1) for i in keep]
        self._bm25 = BM25Index()
        self._bm25.extend(self._text[i][1] for i in keep)

    def rank(self, pyramid: Any, query: str | None, *, limit: int = 40) -> list[SummaryUnit]:
        """Summaries best first: lexical relevance to ``query``, then level."""
        self._refresh(pyramid)
        if not self._docs:
            return []
        if query and query.strip():
            scores = self._bm25.scores(analyze(query))
            top = float(scores.max()) if scores.size else 0.0
            rel = scores / top if top > 0 else np.zeros(len(self._docs))
        else:
            rel = np.zeros(len(self._docs))
        level = np.asarray(self._levels)
        fused = rel + level
        order = np.argsort(-fused, kind="stable")[:limit]
        units = []
        for i in order:
            node = self._nodes[self._docs[int(i)]]
            if query and rel[i] == 0 and node.level == 1:
                continue  # an unrelated segment summary is noise; consolidations still give broad context
            units.append(self._unit(pyramid, node, {"lexical": float(rel[i]), "level": float(level[i]),
                                                     "fused": float(fused[i])}))
        return units

    def _unit(self, pyramid: Any, node: Node, score: dict[str, float]) -> SummaryUnit:
        if node.id not in self._turn_ids:
            # Provenance never changes once a node exists (retention keeps it).
            self._turn_ids[node.id] = tuple(pyramid.turn_ids(node.id))
        segment = node.level == 1
        return SummaryUnit(
            id=f"node:{node.id}", kind="segment" if segment else "consolidation", text=summary_line(node),
            turn_ids=self._turn_ids[node.id], tier=node.tier, score=score,
            # A segment that wins a slot is expanded to its verbatim turns when they fit.
            expand=(lambda nid=node.id: pyramid.expand(nid)) if segment else None,
            expanded_tokens=node.tokens if segment else 0, expand_only=node.summary is None)

    def topics(self, pyramid: Any) -> tuple[list[SummaryUnit], list[SummaryUnit]]:
        """Seed 002's view: topic (segment) summaries and bulk (consolidation) summaries, newest first.

        Only top-level consolidations are bulks, and only topics no bulk covers
        are listed, so nothing is said twice.
        """
        self._refresh(pyramid)
        # The index leaves hot segments out (in other policies the window holds
        # them); here the window is only the current topic, so they are listed too.
        nodes = [self._nodes[d] for d in self._docs] + pyramid.nodes(level=1, tier="hot")
        top = [n for n in nodes if n.level >= 2 and n.parent_id is None]
        bulked = {t for n in top for t in self._unit(pyramid, n, {}).turn_ids}
        topics = [n for n in nodes if n.level == 1 and not set(self._unit(pyramid, n, {}).turn_ids) <= bulked]
        newest = lambda ns: sorted(ns, key=lambda n: n.last_turn_id, reverse=True)  # noqa: E731
        return ([self._unit(pyramid, n, {"recency": float(-i)}) for i, n in enumerate(newest(topics))],
                [self._unit(pyramid, n, {"recency": float(-i)}) for i, n in enumerate(newest(top))])
