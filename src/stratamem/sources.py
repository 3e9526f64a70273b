"""Context sources: gather what the assembler may put in a prompt, from the parts of memory.

:func:`stratamem.assemble.assemble` is pure; this module does the reading it
needs: project instructions and the working state (seed 004), the agent-loop
checkpoint of the current session (seed 001), and summaries of older history
from the pyramid (seeds 000, 002), ranked for the query. Recall of verbatim
turns lives in :mod:`stratamem.retrieve`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from .assemble import FixedBlock, SummaryUnit
from .instructions import load_instructions
from .nodes import Node
from .retrieve.lexical import BM25Index, analyze
from .tokens import Tokenizer

__all__ = ["SummaryIndex", "checkpoint_block", "project_blocks", "summary_line"]


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


def checkpoint_block(store: Any, namespace: str, session: str | None) -> list[FixedBlock]:
    """The session's agent-loop checkpoint, if it was ever compacted."""
    conversations = getattr(store, "conversations", None)
    if conversations is None or session is None:
        return []
    saved = conversations.get(namespace, session)
    if saved is None or not saved.summary:
        return []
    return [FixedBlock(f"checkpoint:{session}", "checkpoint",
                       f"## Checkpoint of earlier conversation (compaction {saved.compaction_count})", saved.summary)]


def summary_line(node: Node) -> str:
    """A node's summary as one prompt line: ``- [8 May 2023, session_3, 10 turns] text``."""
    assert node.summary is not None
    day = f"{node.start.day} {node.start:%B %Y}"
    where = f"{node.session}, " if node.session else ""
    return f"- [{day}, {where}{node.turn_count} turns] {node.summary.text}"


class SummaryIndex:
    """Lexical ranking of the pyramid's summaries, rebuilt when the nodes change.

    Summaries of hot segments are left out (their turns are in the window or
    recallable verbatim); so are summaries still pending. Consolidations rank a
    little higher than segments at equal relevance, since they give broad context.
    """

    def __init__(self) -> None:
        self._key: tuple[int, int] | None = None
        self._nodes: list[Node] = []
        self._bm25 = BM25Index()

    def _refresh(self, pyramid: Any) -> None:
        nodes = [n for n in pyramid.nodes() if n.summary is not None and n.tier != "hot"]
        key = (len(nodes), max((n.id for n in nodes), default=0))
        if key == self._key:
            return
        self._nodes = nodes
        self._bm25 = BM25Index()
        self._bm25.extend(analyze(n.summary.text + " " + " ".join(n.key_facts)) for n in nodes)  # type: ignore[union-attr]
        self._key = key

    def rank(self, pyramid: Any, query: str | None, *, limit: int = 40) -> list[SummaryUnit]:
        """Summaries best first: lexical relevance to ``query``, newest first without one."""
        self._refresh(pyramid)
        if not self._nodes:
            return []
        if query and query.strip():
            scores = self._bm25.scores(analyze(query))
            top = float(scores.max()) if scores.size else 0.0
            rel = scores / top if top > 0 else np.zeros(len(self._nodes))
        else:
            rel = np.zeros(len(self._nodes))
        level = np.array([0.1 * (n.level - 1) for n in self._nodes])
        fused = rel + level
        order = np.argsort(-fused, kind="stable")[:limit]
        units = []
        for i in order:
            node = self._nodes[int(i)]
            if query and rel[i] == 0 and node.level == 1:
                continue  # an unrelated segment summary is noise; consolidations still give broad context
            units.append(SummaryUnit(
                id=f"node:{node.id}", kind="segment" if node.level == 1 else "consolidation",
                text=summary_line(node), turn_ids=tuple(pyramid.turn_ids(node.id)), tier=node.tier,
                score={"lexical": float(rel[i]), "level": float(level[i]), "fused": float(fused[i])}))
        return units
