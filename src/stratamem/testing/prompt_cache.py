"""A fake provider prompt cache, so tests see the usage fields a caching provider reports.

:class:`FakePromptCache` follows the providers' published rules closely enough
for tests of code that reads cache usage or places ``cache_control``; it bills
nothing and keeps no time (entries never expire):

* **Anthropic** (:meth:`FakePromptCache.anthropic`): a block carrying
  ``cache_control`` writes the prefix up to it, when that prefix is at least
  ``min_tokens`` long (at most 4 marks count); a request reads the longest
  entry found by looking back at most 20 blocks from each of its marks. The
  usage then reports ``cache_read_input_tokens``, ``cache_creation_input_tokens``
  and, as ``input_tokens``, only the rest.
* **OpenAI** (:meth:`FakePromptCache.openai`): automatic. A request of at least
  ``min_tokens`` reads the longest prefix, at block boundaries, it shares with
  one of the last 16 requests, in steps of 128 tokens; ``prompt_tokens`` stays
  the whole request and ``prompt_tokens_details.cached_tokens`` says how much of it was cached.

A prefix is compared block by block (system blocks, then each message's
blocks, a string content being one text block), ``cache_control`` left out,
and counted with the server's :func:`~stratamem.testing.llm_requests.request_input_tokens`
rules. Give one to :class:`~stratamem.testing.llm_server.FakeLLMServer` as ``prompt_cache=``.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from .llm_requests import FRAME_MESSAGE, FRAME_REQUEST, FRAME_TOOL, _count_block

__all__ = ["FakePromptCache"]

LOOKBACK = 20
"""Block boundaries an Anthropic mark looks back over for an earlier entry."""
OPENAI_STEP = 128
"""OpenAI reports cached tokens in steps of this many."""


def _canon(block: Any) -> str:
    if isinstance(block, Mapping):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return json.dumps(block, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _pieces(body: Mapping[str, Any], count: Callable[[str], int]) -> list[tuple[str, int, bool]]:
    """``(canonical block, tokens including framing, carries cache_control)`` in request order."""
    out: list[tuple[str, int, bool]] = []
    system = body.get("system")
    if system:
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
        for k, b in enumerate(blocks):
            out.append((_canon(b), _count_block(b, count) + (FRAME_MESSAGE if k == 0 else 0), _marked(b)))
    for m in body.get("messages") or ():
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        head = FRAME_MESSAGE + (FRAME_TOOL if m.get("role") == "tool" else 0)
        head += sum(
            FRAME_TOOL
            + count(str((c.get("function") or {}).get("name") or ""))
            + count(str((c.get("function") or {}).get("arguments") or ""))
            for c in m.get("tool_calls") or ()
        )
        role = _canon({k: v for k, v in m.items() if k not in ("content", "tool_calls")})
        calls = _canon(m.get("tool_calls") or [])
        if not blocks:
            out.append((role + calls, head, False))
        for k, b in enumerate(blocks):
            out.append(
                (
                    (role + calls if k == 0 else "") + _canon(b),
                    _count_block(b, count) + (head if k == 0 else 0),
                    _marked(b),
                )
            )
    return out


def _marked(block: Any) -> bool:
    return isinstance(block, Mapping) and bool(block.get("cache_control"))


class FakePromptCache:
    """One provider's prompt cache across the requests of a test (see the module docstring).

    Args:
        min_tokens: Shortest prefix cached (Anthropic writes, OpenAI reads).
        count: Token counter (default: the ``o200k_base`` tokenizer's).
    """

    def __init__(self, min_tokens: int = 1024, count: Callable[[str], int] | None = None) -> None:
        if count is None:
            from ..tokens import get_tokenizer

            count = get_tokenizer("o200k_base").count
        self.min_tokens = min_tokens
        self._count = count
        self._entries: set[bytes] = set()
        self._recent: deque[list[bytes]] = deque(maxlen=16)

    def _prefixes(self, body: Mapping[str, Any]) -> tuple[list[bytes], list[int], list[bool]]:
        """Per block: the hash of the prefix ending there, the tokens up to there, and whether it is marked."""
        hashes, ends, marks = [], [], []
        digest = hashlib.sha256()
        total = FRAME_REQUEST
        for canon, tokens, marked in _pieces(body, self._count):
            digest.update(canon.encode("utf-8") + b"\x00")
            total += tokens
            hashes.append(digest.copy().digest())
            ends.append(total)
            marks.append(marked)
        return hashes, ends, marks

    def anthropic(self, body: Mapping[str, Any]) -> tuple[int, int]:
        """``(tokens read, tokens written)`` for an Anthropic request; its marks write their entries."""
        hashes, ends, marks = self._prefixes(body)
        points = [i for i, m in enumerate(marks) if m][:4]
        read = 0
        for p in points:
            for k in range(p, max(-1, p - LOOKBACK - 1), -1):
                if ends[k] <= read:
                    break
                if hashes[k] in self._entries:
                    read = ends[k]
                    break
        cacheable = [p for p in points if ends[p] >= self.min_tokens]
        for p in cacheable:
            self._entries.add(hashes[p])
        written = max(0, max((ends[p] for p in cacheable), default=0) - read)
        return read, written

    def openai(self, body: Mapping[str, Any]) -> int:
        """Tokens of an OpenAI request read from the cache; the request is remembered for later ones."""
        hashes, ends, _ = self._prefixes(body)
        best = 0
        for old in self._recent:
            shared = 0
            for a, b in zip(old, hashes, strict=False):
                if a != b:
                    break
                shared += 1
            if shared:
                best = max(best, ends[shared - 1])
        self._recent.append(hashes)
        if not ends or ends[-1] < self.min_tokens or best < self.min_tokens:
            return 0
        return best // OPENAI_STEP * OPENAI_STEP
