"""The synthetic assistant-chat set (``benchmarks/data/make_recall_chats.py``) under the LoCoMo protocol.

Each haystack is ingested into its own namespace through
:meth:`stratamem.Memory.add_sessions`, one stored session per generated
session, every turn with its real timestamp and its generated id in
``metadata["dia_id"]`` (the scoring side maps stored ids back to it, as for
LoCoMo). The engines see stored turns only; questions carry their type as
category and their question date.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from stratamem import Memory
from stratamem.ingest import IngestSession
from stratamem.records import Turn

from .protocol import Conversation, Question

__all__ = ["load_synth"]


def load_synth(store: Any, data: dict[str, Any], haystacks: Sequence[int] | None = None) -> list[Conversation]:
    """Ingest generated haystacks into ``store`` and pair them with their questions.

    Args:
        store: A fresh store (each haystack gets namespace ``synth-<id>``).
        data: The dataset (:func:`benchmarks.data.make_recall_chats.load_or_generate`).
        haystacks: Positions to load (default: all).
    """
    out = []
    wanted = range(len(data["haystacks"])) if haystacks is None else haystacks
    for pos in wanted:
        h = data["haystacks"][pos]
        ns = f"synth-{h['id']}"
        sessions = [
            IngestSession(
                s["id"],
                [
                    Turn(
                        t["role"],
                        t["text"],
                        timestamp=datetime.fromisoformat(t["timestamp"]),
                        metadata={"dia_id": t["id"]},
                    )
                    for t in s["turns"]
                ],
            )
            for s in h["sessions"]
        ]
        # No embedder at ingest (as for LoCoMo): the systems embed through the benchmark's cache.
        stored = Memory(store, namespace=ns, embedder=None).add_sessions(sessions)
        dia_of = {st.id: str(st.turn.metadata["dia_id"]) for st in stored}
        known = set(dia_of.values())
        questions = tuple(
            Question(
                h["id"],
                i,
                q["question"],
                q["type"],
                tuple(e for e in q["evidence"] if e in known),
                datetime.fromisoformat(q["question_date"]),
            )
            for i, q in enumerate(h["questions"])
        )
        out.append(Conversation(h["id"], ns, tuple(stored), dia_of, questions, 0))
    return out
