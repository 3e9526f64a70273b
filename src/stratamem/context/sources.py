"""Context sources: gather what the assembler may put in a prompt, from the parts of memory.

:func:`stratamem.context.assemble.assemble` is pure; this module holds the
sources a policy reads through :mod:`~stratamem.context.gather`: project
instructions and the working state (seed 004), the agent-loop checkpoint of
the current session (seed 001), and summaries of older history from the
pyramid (seeds 000, 002), ranked for the query. Recall of verbatim turns
lives in :mod:`stratamem.retrieve`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelError, NotFoundError
from ..items.search import embed_texts
from ..records.ids import system_id
from ..records.manifests import Manifest
from ..records.nodes import Node
from ..retrieve.corpus import _Rows
from ..retrieve.lexical import BM25Index, analyze
from ..state.instructions import load_instructions
from ..state.prompt import project_state
from ..tokens import Tokenizer
from .units import FixedBlock, SummaryUnit

__all__ = [
    "SummaryIndex",
    "checkpoint_block",
    "omitted_line",
    "project_blocks",
    "state_block",
    "summary_line",
    "system_blocks",
    "topic_tiers",
]


def project_blocks(
    project_dir: str | os.PathLike[str], namespace: str, tokenizer: Tokenizer, state: Any
) -> list[FixedBlock]:
    """Instruction files and the working state of a project directory, in prompt order.

    ``state`` is the namespace's :class:`~stratamem.state.WorkingState`; it is
    included only when its ``state.json`` exists.
    """
    blocks = [
        FixedBlock(f"instructions:{f.path.name}", "instructions", f"## Project instructions ({f.path.name})", f.text)
        if f.scope != "adr"
        else FixedBlock(
            f"adr:{f.path.name}", "instructions", f"## Architecture decision record (docs/adr/{f.path.name})", f.text
        )
        for f in load_instructions(project_dir, tokenizer)
    ]
    if state is not None and Path(state.path).exists():
        blocks.append(state_block(state, None))
    return blocks


def state_block(state: Any, budget: int | None) -> FixedBlock:
    """The working state as a fixed block, projected within ``budget`` tokens (``None``: the window's top).

    Below the state's window (``state.min_tokens``) the projection goes on
    shrinking (goal and now shortened last) rather than the state being dropped;
    entries left out to fit are named on a last line, so the model knows they exist.

    Raises:
        BudgetError: Not even a shortened goal and now fit ``budget``.
    """
    if budget is None:
        proj = state.project()
    else:
        doc, cfg, now = state.read(), state.config, state.clock()
        top = min(budget, cfg.max_tokens)
        for _ in range(2):  # the second pass makes room for the line naming what was left out
            window = dataclasses.replace(cfg, min_tokens=min(cfg.min_tokens, top))
            proj = project_state(doc, state.tokenizer, config=window, budget=top, now=now)
            note = omitted_line(proj.omitted)
            extra = state.tokenizer.count(note) + 1 if note else 0
            if proj.tokens + extra <= budget or top - extra < 1:
                break
            top = budget - extra
    note = omitted_line(proj.omitted)
    text = proj.text + ("\n" + note if note else "")
    fit = None if budget is not None else partial(state_block, state)
    return FixedBlock("state", "state", "## Working state", text, format=proj.format, fit=fit)


def omitted_line(omitted: Any) -> str:
    """The line naming the state entries a projection left out to fit (``""`` when none were)."""
    groups: dict[str, list[str]] = {}
    for o in omitted:
        if o.reason == "budget":
            groups.setdefault(o.kind + "s", []).append(o.id)
        elif o.reason == "truncated":
            groups.setdefault("shortened", []).append(o.id)
    if not groups:
        return ""
    parts = [f"{k} {', '.join(v)}" if len(v) <= 6 else f"{len(v)} {k}" for k, v in groups.items()]
    return f"(left out to fit: {'; '.join(parts)}; all in state.json)"


def system_blocks(store: Any, namespace: str, session: str | None, scope: str = "session") -> list[FixedBlock]:
    """System prompts as standing instructions: the session's own (``scope="session"``), each distinct text once.

    A system turn (given to ``add``, or imported) instructs the model; it is
    not something that was said, so the context shows it in its fixed section,
    like project instructions, instead of as a history line that a small budget
    would drop first. A prompt belongs to its session: another session's
    prompt tells the model things (its date, its customer, its task) that are
    not true here, so by default only ``session``'s prompts are shown, in the
    order given. ``scope="namespace"`` adds every other session's, newest
    first, after the session's own; a text repeated in many sessions (every
    Codex session starts with the same instructions) is shown once.
    """
    if scope == "session":
        rows = store.turns(namespace, session, role="system") if session is not None else []
        texts = [st.text for st in rows]
    else:
        rows = store.turns(namespace, role="system")
        mine = [st.text for st in rows if st.session == session]
        texts = mine + [st.text for st in sorted(rows, key=lambda st: -st.id) if st.session != session]
    return [
        FixedBlock(system_id(t), "instructions", "## System prompt", t, reason="system_prompt")
        for t in dict.fromkeys(texts)
        if t.strip()
    ]


def checkpoint_block(store: Any, namespace: str, session: str | None) -> list[FixedBlock]:
    """The session's agent-loop checkpoint, if it was ever compacted."""
    if session is None:
        return []
    saved = store.conversations.get(namespace, session)
    if saved is None or not saved.summary:
        return []
    return [
        FixedBlock(
            f"checkpoint:{session}",
            "checkpoint",
            f"## Checkpoint of earlier conversation (compaction {saved.compaction_count})",
            saved.summary,
        )
    ]


def summary_line(node: Node) -> str:
    """A node's summary as one prompt line: ``- [8 May 2023, session_3, 10 turns] text``.

    A node not summarized yet (hot segments wait for demotion) says so.
    """
    day = f"{node.start.day} {node.start:%B %Y}"
    where = f"{node.session}, " if node.session else ""
    text = node.summary.text if node.summary is not None else "(not summarized yet)"
    return f"- [{day}, {where}{node.turn_count} turns] {text}"


VECTOR_FLOOR = 0.25
"""Cosine at or below which a summary's vector says nothing about a query (unrelated text scores about 0-0.2)."""


class _Stack:
    """The summaries' vectors for the cosine ranking, kept across queries (issue 28).

    Vectors sit in a pool of rows that only grows (amortised) and is compacted
    when half of it is stale; :attr:`order` gives each indexed document's pool
    row (-1: no vector). An appended summary adds a row; a rebuilt index
    (:meth:`restart`) re-orders the rows it already has, reading and copying
    no vector again; a changed summary's old row is dropped (:meth:`drop`).
    """

    def __init__(self) -> None:
        self.rows = 0
        """Documents stacked so far (in document order)."""
        self._dims: set[int] = set()
        self._pool: _Rows | None = None
        self._norms = _Rows(np.float64)
        self._row_of: dict[int, int] = {}
        self._order = _Rows(np.int64)

    def restart(self) -> None:
        """Stack the documents again from the first (the pool is kept)."""
        self.rows = 0
        self._order = _Rows(np.int64)

    def drop(self, node_id: int) -> None:
        """Forget ``node_id``'s row (its summary, hence its vector, changed)."""
        self._row_of.pop(node_id, None)

    def extend(self, node_ids: Sequence[int], vectors: Sequence[np.ndarray | None]) -> None:
        """Append one document per node (``None``: no vector)."""
        self.rows += len(node_ids)
        fresh = [(n, v) for n, v in zip(node_ids, vectors, strict=True) if v is not None and n not in self._row_of]
        self._dims.update(v.shape[0] for _, v in fresh)
        if fresh and len(self._dims) == 1:
            if self._pool is None:
                self._pool = _Rows(np.float32, next(iter(self._dims)))
            block = np.stack([v for _, v in fresh]).astype(np.float32, copy=False)
            start = self._pool.n
            self._pool.extend(block)
            # Norms in float32, as each summary's own was (then divided in float64).
            self._norms.extend(np.linalg.norm(block, axis=1).astype(np.float64))
            self._row_of.update((n, start + i) for i, (n, _) in enumerate(fresh))
        order = [self._row_of.get(n, -1) if v is not None else -1 for n, v in zip(node_ids, vectors, strict=True)]
        self._order.extend(np.asarray(order, dtype=np.int64))
        if self._pool is not None and self._pool.n > 1024 and self._pool.n > 2 * len(self._row_of):
            self._compact()

    def _compact(self) -> None:
        assert self._pool is not None
        live = sorted(self._row_of.items(), key=lambda kv: kv[1])
        old = np.asarray([r for _, r in live], dtype=np.int64)
        pool, norms = _Rows(np.float32, self._pool.view.shape[1]), _Rows(np.float64)
        pool.extend(self._pool.view[old])
        norms.extend(self._norms.view[old])
        renumber = np.full(self._pool.n, -1, dtype=np.int64)
        renumber[old] = np.arange(len(old))
        self._pool, self._norms = pool, norms
        self._row_of = {n: i for i, (n, _) in enumerate(live)}
        order = self._order.view
        self._order = _Rows(np.int64)
        self._order.extend(np.where(order >= 0, renumber[np.maximum(order, 0)], -1))

    @property
    def usable(self) -> bool:
        """Whether there are vectors, all of one size."""
        return len(self._dims) == 1 and self._pool is not None

    def cosines(self, q: np.ndarray) -> np.ndarray | None:
        """Each document's cosine with ``q`` (0 without a vector); ``None`` unless every vector has
        ``q``'s size."""
        if not self.usable or self._pool is None or self._pool.view.shape[1] != q.shape[0]:
            return None
        dots = (self._pool.view @ np.asarray(q, dtype=np.float32)).astype(np.float64)
        norms = self._norms.view
        cos = np.divide(dots, norms, out=np.zeros(len(norms)), where=norms > 0)
        order = self._order.view
        return np.where(order >= 0, cos[np.maximum(order, 0)], 0.0)


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
        self._vectors: dict[int, np.ndarray | None] = {}
        self._stack = _Stack()  # the documents' vectors for the cosines (see _stacked_vectors)
        self._made: dict[int, str] = {}

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
        if node.summary is None or node.tier == "hot":  # not eligible
            return node.id in self._doc_of
        text = node.summary.text + " " + " ".join(node.key_facts)
        known = self._text.get(node.id)
        if known is not None and known[0] == text:
            return False
        self._vectors.pop(node.id, None)  # a new summary has a new vector
        self._stack.drop(node.id)
        self._text[node.id] = (text, analyze(text))
        if node.id in self._doc_of:
            return True
        self._doc_of[node.id] = len(self._docs)
        self._docs.append(node.id)
        self._levels.append(0.1 * (node.level - 1))
        self._bm25.add(self._text[node.id][1])
        return False

    def _reindex(self) -> None:
        keep = [
            i
            for i in sorted(self._nodes)
            if i in self._text and self._nodes[i].tier != "hot" and self._nodes[i].summary is not None
        ]
        self._docs, self._doc_of = keep, {i: d for d, i in enumerate(keep)}
        self._stack.restart()
        self._levels = [0.1 * (self._nodes[i].level - 1) for i in keep]
        self._bm25 = BM25Index()
        self._bm25.extend(self._text[i][1] for i in keep)

    def rank(
        self, pyramid: Any, query: str | None, *, limit: int = 40, vector_text: str | None = None
    ) -> list[SummaryUnit]:
        """Summaries best first: relevance to ``query``, then level.

        Relevance is lexical (BM25 over summary and key facts, scaled to the
        best match) and, when the pyramid has an embedder and the summaries
        their stored vectors, semantic too: the cosine of the query with each
        summary's vector (seed 000's relevant-chunk search), rescaled so a
        cosine at or below :data:`VECTOR_FLOOR` (what unrelated text scores
        with MiniLM) counts nothing. Each signal weighs half; a summary without
        a vector scores on words alone. ``vector_text`` is what to embed when it
        is not ``query`` (a context passes turn recall's, so the question costs
        one model call).
        """
        self._refresh(pyramid)
        if not self._docs:
            return []
        n = len(self._docs)
        lexical, vector = np.zeros(n), None
        if query and query.strip():
            scores = self._bm25.scores(analyze(query))
            top = float(scores.max()) if scores.size else 0.0
            lexical = scores / top if top > 0 else np.zeros(n)
            vector = self._cosines(pyramid, vector_text if vector_text and vector_text.strip() else query)
        rel = lexical if vector is None else 0.5 * lexical + 0.5 * vector
        level = np.asarray(self._levels)
        fused = rel + level
        order = np.argsort(-fused, kind="stable")[:limit]
        units = []
        for i in order:
            node = self._nodes[self._docs[int(i)]]
            if query and rel[i] <= 0 and node.level == 1:
                continue  # an unrelated segment summary is noise; consolidations still give broad context
            score = {"lexical": float(lexical[i]), "level": float(level[i]), "fused": float(fused[i])}
            if vector is not None:
                score["vector"] = float(vector[i])
            units.append(self._unit(pyramid, node, score))
        return units

    def nodes(self, pyramid: Any) -> list[Node]:
        """Every node of the pyramid as last refreshed, by id (the cache layout's ledger reads them)."""
        self._refresh(pyramid)
        return [self._nodes[i] for i in sorted(self._nodes)]

    def unit(self, pyramid: Any, node: Node, score: dict[str, float]) -> SummaryUnit:
        """``node`` as a summary unit (its line, the turns it covers, its expansion), with ``score``."""
        return self._unit(pyramid, node, score)

    def pyramid_parts(
        self, pyramid: Any, query: str | None, *, chunks: int = 3, vector_text: str | None = None
    ) -> tuple[list[SummaryUnit], list[SummaryUnit]]:
        """Seed 000's view beyond the hot window: the ``chunks`` segments most relevant to ``query``
        (expandable to their turns) and the top-level consolidations (macro summaries), best first.

        Without a query no segment is relevant: only the macro summaries are given.
        """
        ranked = self.rank(pyramid, query, limit=max(40, len(self._docs)), vector_text=vector_text)
        segments = [u for u in ranked if u.kind == "segment"][:chunks] if query and query.strip() else []
        roots = [
            u for u in ranked if u.kind == "consolidation" and self._nodes[int(u.id.split(":", 1)[1])].parent_id is None
        ]
        return segments, roots

    def _cosines(self, pyramid: Any, query: str) -> np.ndarray | None:
        """Cosine of ``query`` with each indexed summary's stored vector (0 where none); ``None`` without vectors.

        Vectors are read once per summary (a changed summary is read again); a
        failing embedder makes the ranking lexical, never an error.
        """
        embedder = getattr(pyramid, "embedder", None)
        if embedder is None or not pyramid.config.pyramid.auto_embed:
            return None
        stack = self._stacked_vectors(pyramid)
        if not stack.usable:
            return None  # no vectors yet (or vectors of two models): words only
        try:
            q = embed_texts(embedder, [query])[0]
        except ModelError:
            return None
        cos = stack.cosines(q)
        if cos is None:
            return None
        return np.maximum(0.0, (cos - VECTOR_FLOOR) / (1.0 - VECTOR_FLOOR))

    def _stacked_vectors(self, pyramid: Any) -> _Stack:
        """The stack of the indexed summaries' vectors, brought up to the documents: a query costs one
        matrix-vector product, not a pass over every summary in Python (issue 28)."""
        new = self._docs[self._stack.rows :]
        for node_id in new:
            if node_id not in self._vectors:
                self._vectors[node_id] = pyramid.embedding(node_id) if self._nodes[node_id].has_embedding else None
        if new:
            self._stack.extend(new, [self._vectors[d] for d in new])
        return self._stack

    def _unit(self, pyramid: Any, node: Node, score: dict[str, float]) -> SummaryUnit:
        if node.id not in self._turn_ids:
            # Provenance never changes once a node exists (retention keeps it).
            self._turn_ids[node.id] = tuple(pyramid.turn_ids(node.id))
        segment = node.level == 1
        return SummaryUnit(
            id=f"node:{node.id}",
            kind="segment" if segment else "consolidation",
            text=summary_line(node),
            turn_ids=self._turn_ids[node.id],
            tier=node.tier,
            score=score,
            # A segment that wins a slot is expanded to its verbatim turns when they fit.
            expand=partial(pyramid.expand, node.id) if segment else None,
            expanded_tokens=node.tokens if segment else 0,
            expand_only=node.summary is None,
            excerpt_chars=pyramid.config.pyramid.max_message_chars if segment and node.summary is None else 0,
            summarize=partial(self._on_demand, pyramid, node) if segment and node.summary is None else None,
        )

    def _on_demand(self, pyramid: Any, node: Node) -> str:
        """A summary line for a segment not summarized yet, made by the local summarizer and kept here.

        Not stored: deferred summaries are made for good when the segment is demoted. A sealed
        segment's turns do not change, so the line is made once per node.
        """
        line = self._made.get(node.id)
        if line is None:
            made = pyramid.fallback.summarize(pyramid.expand(node.id), max_tokens=pyramid.summary_budget(node))
            line = self._made[node.id] = summary_line(dataclasses.replace(node, summary=made))
        return line

    def topics(self, pyramid: Any, session: str | None = None) -> tuple[list[SummaryUnit], list[SummaryUnit]]:
        """Seed 002's view: topic (segment) summaries and bulk (consolidation) summaries, newest first.

        Only top-level consolidations are bulks, and only topics no bulk covers
        are listed, so nothing is said twice. With ``session`` and per-session
        consolidation (the default ``consolidation_scope``), only that session's
        topics and bulks are listed: another conversation's history is not its topic.
        """
        self._refresh(pyramid)
        # The index leaves hot segments out (in other policies the window holds
        # them); here the window is only the current topic, so they are listed too.
        nodes = [self._nodes[d] for d in self._docs] + pyramid.nodes(level=1, tier="hot")
        if session is not None and pyramid.config.pyramid.consolidation_scope == "session":
            nodes = [n for n in nodes if n.session == session]
        top = [n for n in nodes if n.level >= 2 and n.parent_id is None]
        bulked = {t for n in top for t in self._unit(pyramid, n, {}).turn_ids}
        topics = [n for n in nodes if n.level == 1 and not set(self._unit(pyramid, n, {}).turn_ids) <= bulked]
        newest = lambda ns: sorted(ns, key=lambda n: n.last_turn_id, reverse=True)  # noqa: E731
        return (
            [self._unit(pyramid, n, {"recency": float(-i)}) for i, n in enumerate(newest(topics))],
            [self._unit(pyramid, n, {"recency": float(-i)}) for i, n in enumerate(newest(top))],
        )


_TOPIC_TIERS = {"turn": "current", "segment": "topics", "consolidation": "bulks"}


def topic_tiers(manifest: Manifest, pyramid: Any, turn_tokens: dict[int, int]) -> tuple[dict[str, int], int]:
    """Seed 002's per-tier totals of a ``topics`` context: ``({tier: tokens shown}, source tokens)``.

    Tiers are ``current`` (the current topic's turns), ``topics`` (segment
    summaries, or segments expanded) and ``bulks`` (consolidation summaries);
    source tokens are the exact tokens of the stored turns they stand for
    (``turn_tokens`` for the current turns, the node's tokens for a summary).
    Fixed blocks (instructions, state) belong to no tier.
    """
    tiers = {"current": 0, "topics": 0, "bulks": 0}
    source = 0
    for item in manifest.items:
        tier = _TOPIC_TIERS.get(item.kind)
        if tier is None:
            continue
        tiers[tier] += item.tokens
        if item.kind == "turn":
            source += turn_tokens.get(item.turn_ids[0], item.tokens)
        else:
            source += pyramid.node(int(item.id.split(":", 1)[1])).tokens
    return tiers, source
