"""LoCoMo for the peer benchmark, read with the standard library only.

Every system under test runs in its own interpreter (stratamem in the
project's venv, the peers in theirs), so this module imports nothing but the
standard library. It reproduces what ``stratamem ingest --format locomo``
makes of the file (``src/stratamem/ingest/locomo.py``): one session per
LoCoMo session in order, speaker A as ``user`` and speaker B as
``assistant``, each turn named after its speaker, a shared photo's caption
appended as ``[shares <caption>]``, turns 30 seconds apart from the
session's date. Gold ids follow DESIGN.md's protocol (split ``;``/``,``
lists, ``D30:05`` -> ``D30:5``, drop ids that name no turn, skip questions
left without evidence), as ``benchmarks/locomo/protocol.py`` does.

The systems receive :func:`conversations` (turns) and :func:`question_texts`
(questions without answers or evidence); the gold stays with the runner
(:func:`gold`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["LOCOMO_PATH", "PeerQuestion", "PeerTurn", "conversations", "gold", "question_texts"]

# benchmarks/peers/data.py -> the repository -> its parent holds shared/.
LOCOMO_PATH = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo10.json"

_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_SPACING = timedelta(seconds=30)
_DIA = re.compile(r"^D(\d+):(\d+)$")


@dataclass(frozen=True, slots=True)
class PeerTurn:
    """One LoCoMo turn as every system is given it."""

    dia_id: str
    """LoCoMo turn id (``D3:7``): carried as metadata, used only to score."""
    session: str
    """``session_<n>``."""
    session_date: str
    """The session's date as LoCoMo writes it (``1:56 pm on 8 May, 2023``)."""
    role: str
    """``user`` (speaker A) or ``assistant`` (speaker B)."""
    speaker: str
    """Speaker's name."""
    text: str
    """What was said, with a shared photo's caption appended."""
    timestamp: datetime
    """Session date + 30 s per earlier turn of the session (UTC)."""


@dataclass(frozen=True, slots=True)
class PeerQuestion:
    """One scored question (the gold never leaves the runner)."""

    sample: str
    """LoCoMo sample id."""
    index: int
    """Position in the sample's ``qa`` list."""
    text: str
    """The question."""
    category: int
    """LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial)."""
    gold: tuple[str, ...]
    """Normalised evidence ``dia_id``s that name a turn of the conversation."""


def _load(path: Path) -> list[dict[str, Any]]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _turns(sample: dict[str, Any]) -> list[PeerTurn]:
    conv = sample["conversation"]
    numbers = sorted(
        int(k.split("_")[1])
        for k in conv
        if k.startswith("session_") and k.count("_") == 1 and isinstance(conv[k], list)
    )
    out = []
    for n in numbers:
        date = str(conv[f"session_{n}_date_time"])
        start = datetime.strptime(date, _DATE_FORMAT).replace(tzinfo=UTC)
        for i, t in enumerate(conv[f"session_{n}"]):
            text = t["text"]
            if t.get("blip_caption"):
                text = f"{text} [shares {t['blip_caption']}]"
            out.append(
                PeerTurn(
                    _normalise(str(t["dia_id"])),
                    f"session_{n}",
                    date,
                    "user" if t["speaker"] == conv["speaker_a"] else "assistant",
                    str(t["speaker"]),
                    text,
                    start + i * _SPACING,
                )
            )
    return out


def _normalise(raw: str) -> str:
    raw = raw.strip()
    m = _DIA.match(raw)
    return f"D{int(m.group(1))}:{int(m.group(2))}" if m else raw


def conversations(path: Path = LOCOMO_PATH, count: int | None = None) -> list[tuple[str, list[PeerTurn]]]:
    """``(sample_id, turns in order)`` for the first ``count`` conversations (default: all ten)."""
    raw = _load(path)[:count]
    return [(str(s["sample_id"]), _turns(s)) for s in raw]


def question_texts(
    path: Path = LOCOMO_PATH, count: int | None = None, limit: int | None = None
) -> dict[str, list[tuple[int, str]]]:
    """Per sample, ``(qa index, question)`` of every scored question, at most ``limit`` each.

    Only questions :func:`gold` scores are listed, so every system answers the same set.
    """
    return {q_sample: [(q.index, q.text) for q in qs] for q_sample, qs in gold(path, count, limit).items()}


def gold(path: Path = LOCOMO_PATH, count: int | None = None, limit: int | None = None) -> dict[str, list[PeerQuestion]]:
    """Per sample, the scored questions with their gold turns (runner side only)."""
    out: dict[str, list[PeerQuestion]] = {}
    for sample in _load(path)[:count]:
        known = {t.dia_id for t in _turns(sample)}
        qs = []
        for i, qa in enumerate(sample.get("qa", [])):
            ids: list[str] = []
            for entry in qa.get("evidence") or []:
                for part in re.split(r"[;,]", str(entry)):
                    dia = _normalise(part)
                    if dia and dia in known and dia not in ids:
                        ids.append(dia)
            if ids:
                qs.append(
                    PeerQuestion(str(sample["sample_id"]), i, str(qa["question"]), int(qa["category"]), tuple(ids))
                )
        out[str(sample["sample_id"])] = qs[:limit]
    return out
