"""One serialization of a model request, counted in the project's tokenizer, and its prefix arithmetic.

The serialization (defined here once, used for every arm and every provider shape):

A request is ``system`` (``None``, a string, or a list of text blocks) plus
``messages`` in the provider's shape (OpenAI Chat Completions or Anthropic
Messages). It becomes a sequence of *pieces*, each encoded on its own with the
project's exact tokenizer (``o200k_base``) and the token ids concatenated:

1. each system block's text (a string is one block);
2. for each message, in order: a header piece, the message's fields other than
   ``content`` and ``tool_calls`` as compact JSON with sorted keys (e.g.
   ``{"name":"Caroline","role":"user"}``); then one piece per content block
   (a string content is one piece, its text; a block is its compact sorted-key
   JSON without ``cache_control``); then one piece per OpenAI tool call
   (compact sorted-key JSON).

Encoding piece by piece keeps message and block boundaries token boundaries, as
a provider's chat template does with its special tokens, so two requests that
share their first messages share exactly their tokens. ``cache_control`` is
never part of the bytes (providers exclude it from the cache key); a block
carrying it is a *breakpoint*. The ends of the system pieces and of the content
pieces are *block boundaries*: the only places an Anthropic cache entry can
begin or end.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Request", "Serializer", "lcp", "rolling_breakpoints"]

_TITLES = (
    "## Earlier conversation (recalled, verbatim)",
    "## Summaries of older conversation",
    "## Remembered facts",
    "## Working state",
    "## Project instructions",
    "## System prompt",
    "## Checkpoint of earlier conversation",
)
"""Section titles of today's assembly (``context/assemble.py``, ``context/sources.py``): where in a
system text the first changed token falls is reported by the section it falls in."""


def _canon(value: Any) -> str:
    if isinstance(value, Mapping):
        value = {k: v for k, v in value.items() if k != "cache_control"}
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@dataclass(slots=True)
class Request:
    """A serialized request: its token ids, where its pieces end, and which pieces are breakpoints."""

    tokens: np.ndarray
    """Token ids of the whole request (int32)."""
    ends: np.ndarray
    """Token offset just past each piece."""
    labels: list[str]
    """Per piece: ``system``, ``msg[i].header``, ``msg[i].<role> content`` or ``msg[i].tool_call``."""
    texts: list[str]
    """Per piece: its text (for locating a change inside a section)."""
    boundaries: list[int]
    """Indices of the pieces that end a block (system pieces and content pieces)."""
    breakpoints: list[int]
    """Indices of the pieces whose block carries ``cache_control``."""

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def where(self, position: int) -> str:
        """Where token ``position`` (the first changed token) lies, coarsely: the section of an
        assembled text it falls in (``system: ## Earlier conversation …``), else the kind of piece
        (``messages: user content``, ``messages: header`` …), or ``unchanged``.

        Pieces that hold assembled sections (the system text, or the first user message that
        carries them when a window does not open with a user turn) are named by the section
        title the position falls under.
        """
        if position >= len(self):
            return "unchanged"
        i = int(np.searchsorted(self.ends, position, side="right"))
        label, text = self.labels[i], self.texts[i]
        where = "system" if label == "system" else "messages"
        found = [(text.find(t), t) for t in _TITLES if t in text]
        if found:
            start = int(self.ends[i - 1]) if i else 0
            # The share of the piece's tokens stands in for the character offset: sections are
            # hundreds of tokens long, so it names the right one (decoding would be exact but slow).
            offset = int((position - start) / max(1, int(self.ends[i]) - start) * len(text))
            title = max(((pos, t) for pos, t in found if pos <= offset), default=min(found))[1]
            return f"{where}: {title}"
        return f"{where}: {label.split('.', 1)[1].replace('_', ' ') if '.' in label else label}"


class Serializer:
    """Encodes requests piece by piece with a tokenizer, remembering each piece's ids."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._memo: dict[str, np.ndarray] = {}

    def clear(self) -> None:
        """Forget remembered pieces (between conversations)."""
        self._memo.clear()

    def _ids(self, text: str) -> np.ndarray:
        ids = self._memo.get(text)
        if ids is None:
            ids = self._memo[text] = np.asarray(self.tokenizer.encode(text), dtype=np.int32)
        return ids

    def request(self, system: Any, messages: Sequence[Mapping[str, Any]]) -> Request:
        """Serialize ``system`` + ``messages`` (see the module docstring)."""
        pieces: list[tuple[str, str, bool, bool]] = []  # (label, text, is_block_end, breakpoint)
        if isinstance(system, str) and system:
            pieces.append(("system", system, True, False))
        elif isinstance(system, Sequence) and not isinstance(system, str):
            for block in system:
                text = block.get("text", "") if isinstance(block, Mapping) else str(block)
                pieces.append(("system", text, True, isinstance(block, Mapping) and "cache_control" in block))
        for i, m in enumerate(messages):
            head = {k: v for k, v in m.items() if k not in ("content", "tool_calls", "cache_control")}
            role = str(m.get("role"))
            pieces.append((f"msg[{i}].header", _canon(head), False, False))
            content = m.get("content")
            if isinstance(content, str):
                pieces.append((f"msg[{i}].{role} content", content, True, False))
            elif isinstance(content, Sequence):
                for block in content:
                    if (
                        isinstance(block, Mapping)
                        and block.get("type") == "text"
                        and set(block) <= {"type", "text", "cache_control"}
                    ):
                        text = block.get("text", "")  # a plain text block is its text, as a string content is
                    else:
                        text = _canon(block)
                    pieces.append(
                        (
                            f"msg[{i}].{role} content",
                            text,
                            True,
                            isinstance(block, Mapping) and "cache_control" in block,
                        )
                    )
            for call in m.get("tool_calls") or ():
                pieces.append((f"msg[{i}].tool_call", _canon(call), True, False))
        arrays = [self._ids(text) for _, text, _, _ in pieces]
        tokens = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int32)
        ends = np.cumsum([a.shape[0] for a in arrays]) if arrays else np.zeros(0, dtype=np.int64)
        return Request(
            tokens,
            ends,
            [p[0] for p in pieces],
            [p[1] for p in pieces],
            [k for k, p in enumerate(pieces) if p[2]],
            [k for k, p in enumerate(pieces) if p[3]],
        )


def lcp(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the longest common prefix of two token arrays."""
    n = min(a.shape[0], b.shape[0])
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def rolling_breakpoints(req: Request) -> list[int]:
    """Where a caller without our help would put ``cache_control``: the end of the system text and the
    last block of the request (the pattern the Anthropic docs give for multi-turn conversations)."""
    out: list[int] = []
    system = [k for k in req.boundaries if req.labels[k] == "system"]
    if system:
        out.append(system[-1])
    if req.boundaries and req.boundaries[-1] not in out:
        out.append(req.boundaries[-1])
    return out
