"""LoCoMo conversations (``locomo10.json``), for benchmarks and demos.

Each sample becomes its own namespace with one session per LoCoMo session,
dated with the session's date; speaker A is ``user`` and speaker B
``assistant``, each turn named after its speaker, with the LoCoMo ``dia_id``
(also the turn's dedupe key) and any shared-photo caption in its metadata.
Turns are spaced 30 seconds apart from the session start, since LoCoMo dates
sessions, not turns.

Namespaces: ``locomo-<sample_id>`` by default. A namespace given by the caller
is used as is for a file of one sample; for several samples it is a prefix,
``<namespace>-<sample_id>``, because their session names (``session_1``...)
would otherwise collide.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from ..errors import DecodeError
from ..records import Turn, check_name
from ._common import IngestSession, id_key

__all__ = ["LOCOMO_DATE_FORMAT", "looks_like_locomo", "read_locomo"]

LOCOMO_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_TURN_SPACING = timedelta(seconds=30)


def looks_like_locomo(data: Any) -> bool:
    """Whether parsed JSON is LoCoMo (a sample or a list of samples with a ``conversation``)."""
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, Mapping) and "conversation" in first


def _sessions(sample: Mapping[str, Any], ns: str) -> list[IngestSession]:
    conv = sample.get("conversation")
    sample_id = str(sample.get("sample_id", "sample"))
    if not isinstance(conv, Mapping):
        raise DecodeError(f"LoCoMo {sample_id}: a sample needs a 'conversation' object")
    speaker_a = conv.get("speaker_a")
    numbers = sorted(
        int(k.split("_")[1])
        for k in conv
        if k.startswith("session_") and k.count("_") == 1 and isinstance(conv[k], list)
    )
    out: list[IngestSession] = []
    for n in numbers:
        date_text = conv.get(f"session_{n}_date_time")
        try:
            start = datetime.strptime(str(date_text), LOCOMO_DATE_FORMAT).replace(tzinfo=UTC)
        except ValueError:
            raise DecodeError(f"LoCoMo {sample_id} session_{n}: unreadable date {date_text!r}") from None
        turns: list[Turn] = []
        keys: list[str] = []
        for i, t in enumerate(conv[f"session_{n}"]):
            if not isinstance(t, Mapping) or not isinstance(t.get("text"), str):
                raise DecodeError(f"LoCoMo {sample_id} session_{n}[{i}]: a turn needs 'text'")
            text = t["text"]
            meta: dict[str, Any] = {"dia_id": t.get("dia_id")}
            caption = t.get("blip_caption")
            if caption:
                # The shared photo is part of what was said; its caption is how a
                # text-only reader sees it.
                meta["image_caption"] = caption
                text = f"{text} [shares {caption}]"
            speaker = t.get("speaker")
            turns.append(
                Turn(
                    role="user" if speaker == speaker_a else "assistant",
                    content=text,
                    timestamp=start + i * _TURN_SPACING,
                    name=speaker,
                    metadata=meta,
                )
            )
            keys.append(id_key("locomo", str(t["dia_id"])) if t.get("dia_id") else f"locomo:{n}:{i}")
        out.append(
            IngestSession(
                f"session_{n}",
                turns,
                namespace=ns,
                platform="locomo",
                labels={"date": str(date_text)},
                keys=tuple(keys),
            )
        )
    return out


def read_locomo(data: Any, namespace: str | None = None) -> list[IngestSession]:
    """LoCoMo samples as sessions, each sample in its own namespace (see the module docstring).

    Raises:
        DecodeError: A sample, session or turn is malformed.
        ValidationError: A namespace built from ``namespace`` and a sample id is not a valid name.
    """
    samples = data if isinstance(data, list) else [data]
    out: list[IngestSession] = []
    for sample in samples:
        if not isinstance(sample, Mapping):
            raise DecodeError("a LoCoMo file holds sample objects")
        sample_id = str(sample.get("sample_id", "sample"))
        if namespace is None:
            ns = f"locomo-{sample_id}"
        else:
            ns = namespace if len(samples) == 1 else f"{namespace}-{sample_id}"
        out.extend(_sessions(sample, check_name(ns, "namespace")))
    return out
