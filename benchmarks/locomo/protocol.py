"""The LoCoMo recall protocol: data, ingestion through the library, gold ids.

Everything the engines see goes through the real library path:
:func:`stratamem.ingest.read_file` (format ``locomo``) and
:meth:`stratamem.Memory.add_sessions` into a fresh namespace per
conversation. The engines receive stored turns only; evidence, answers and
LoCoMo's own summaries, observations and event summaries stay here, on the
scoring side. Metrics live in :mod:`benchmarks.locomo.metrics`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from stratamem import Memory
from stratamem.ingest import read_file
from stratamem.records import StoredTurn

__all__ = ["CATEGORIES", "LOCOMO_PATH", "Conversation", "Question", "load_conversations", "normalise_evidence"]

# benchmarks/locomo/protocol.py -> the repository -> its parent holds shared/.
LOCOMO_PATH = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo10.json"

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

_DIA = re.compile(r"^D(\d+):(\d+)$")


@dataclass(frozen=True, slots=True)
class Question:
    """One scored question: the query text and its gold turns."""

    sample: str
    """LoCoMo sample id (one conversation)."""
    index: int
    """Position of the question in the sample's ``qa`` list."""
    text: str
    """The question: the only thing the engine is given."""
    category: int | str
    """LoCoMo category (see :data:`CATEGORIES`), or a question type name (synthetic set)."""
    gold: tuple[str, ...]
    """Normalised evidence ``dia_id``s that exist in the conversation."""
    question_date: datetime | None = None
    """When the question is asked (synthetic set; LoCoMo gives none)."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """One ingested LoCoMo conversation and its scored questions."""

    sample: str
    """LoCoMo sample id."""
    namespace: str
    """Namespace the conversation was ingested into."""
    turns: tuple[StoredTurn, ...]
    """Stored turns in conversation order (what the engines index)."""
    dia_of: Mapping[int, str]
    """Stored turn id -> LoCoMo ``dia_id`` (scoring side only)."""
    questions: tuple[Question, ...]
    """Questions with at least one existing evidence turn."""
    skipped: int
    """Questions skipped because no evidence id exists."""


def normalise_dia(raw: str) -> str:
    """``"D30:05"`` -> ``"D30:5"``; anything unreadable is returned stripped."""
    raw = raw.strip()
    m = _DIA.match(raw)
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else raw


def normalise_evidence(evidence: Iterable[Any], known: set[str]) -> tuple[str, ...]:
    """Gold ids from a raw evidence list.

    Splits entries that hold several ids (``"D8:6; D9:17"``), normalises
    zero-padded numbers and drops ids that name no turn. Order is kept and
    duplicates are removed.

    Args:
        evidence: The question's ``evidence`` field.
        known: Every ``dia_id`` of the conversation.
    """
    out: list[str] = []
    for entry in evidence:
        for part in re.split(r"[;,]", str(entry)):
            dia = normalise_dia(part)
            if dia and dia in known and dia not in out:
                out.append(dia)
    return tuple(out)


def _questions(sample: Mapping[str, Any], known: set[str]) -> tuple[list[Question], int]:
    out, skipped = [], 0
    for i, qa in enumerate(sample.get("qa", [])):
        gold = normalise_evidence(qa.get("evidence") or [], known)
        if not gold:
            skipped += 1
            continue
        out.append(Question(str(sample["sample_id"]), i, str(qa["question"]), int(qa["category"]), gold))
    return out, skipped


def load_conversations(
    store: Any, path: Path = LOCOMO_PATH, samples: Sequence[int] | None = None
) -> list[Conversation]:
    """Ingest LoCoMo conversations into ``store`` and pair them with their questions.

    Args:
        store: A fresh :class:`~stratamem.store.Store` (or SQLite path).
        path: The LoCoMo JSON file.
        samples: Positions of the conversations to load (default: all ten).
    """
    raw = json.loads(path.read_text(encoding="utf-8"))
    wanted = list(range(len(raw))) if samples is None else list(samples)
    sessions = read_file(path, fmt="locomo")
    by_ns: dict[str, list[Any]] = {}
    for s in sessions:
        by_ns.setdefault(str(s.namespace), []).append(s)
    out = []
    for pos in wanted:
        sample = raw[pos]
        ns = f"locomo-{sample['sample_id']}"
        mem = Memory(store, namespace=ns, embedder=None)
        stored = mem.add_sessions(by_ns[ns])
        dia_of = {st.id: str(st.turn.metadata["dia_id"]) for st in stored}
        questions, skipped = _questions(sample, set(dia_of.values()))
        out.append(Conversation(str(sample["sample_id"]), ns, tuple(stored), dia_of, tuple(questions), skipped))
    return out
