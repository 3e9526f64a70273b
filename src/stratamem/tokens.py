"""Token counting: exact offline BPE tokenizers, message overheads, calibration.

Every budget in stratamem is measured with a :class:`Tokenizer`. The default is
the exact ``o200k_base`` encoding (GPT-4o and later); ``cl100k_base`` is also
available. Both come from the ``bpe-openai`` package and need no network.

A :class:`CharEstimator` (``len(text) / 4``) exists for callers who choose it;
nothing falls back to it silently.

Message counts add a documented fixed overhead per message, per name, per tool
call and per image (see the ``*_TOKENS`` constants); provider-side framing is
not published exactly, so :class:`Calibration` learns a per-model correction
from the ``input_tokens`` a provider reports for a request.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from .errors import ConfigError
from .providers import to_openai
from .records import Turn

__all__ = [
    "IMAGE_TOKENS",
    "MESSAGE_TOKENS",
    "NAME_TOKENS",
    "REPLY_TOKENS",
    "TOOL_CALL_TOKENS",
    "PROVIDER_FACTORS",
    "BPETokenizer",
    "Calibration",
    "CharEstimator",
    "Counting",
    "Tokenizer",
    "count_message",
    "count_messages",
    "count_turn",
    "counting_for",
    "get_tokenizer",
    "truncate_to_tokens",
]

MESSAGE_TOKENS = 3
"""Framing tokens per message (role and separators), as in OpenAI's published recipe."""
NAME_TOKENS = 1
"""Extra tokens when a message carries a ``name``."""
REPLY_TOKENS = 3
"""Tokens that prime the assistant's reply, added once per request."""
TOOL_CALL_TOKENS = 8
"""Framing per tool call or tool result (id, type, wrapper), on top of its text."""
IMAGE_TOKENS = 1600
"""Fixed cost charged per image. Real costs depend on size: OpenAI high detail
at 1024x1024 is 765 tokens, Anthropic charges about width*height/750 and caps
images near 1.15 megapixels (~1,600 tokens). We charge the larger, so a budget
holding images is never exceeded."""

# bpe-openai refuses inputs past a few hundred thousand characters.
_CHUNK_CHARS = 100_000
# BPETokenizer.count remembers this many counts of texts up to this many characters.
_COUNT_CACHE = 8192
_COUNT_CACHE_CHARS = 2000


@runtime_checkable
class Tokenizer(Protocol):
    """Counts tokens of text. Implementations must be deterministic and thread-safe."""

    name: str
    """Identifies the encoding, e.g. ``o200k_base``; stored with counts so they are not mixed."""

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...


def _split_long(text: str) -> list[str]:
    """Split text into pieces the encoder accepts, at whitespace where possible.

    Cuts fall just before a space or newline, where the pre-tokenizer splits
    anyway, so the total count matches encoding the whole text except in rare
    runs of repeated whitespace.
    """
    pieces: list[str] = []
    start = 0
    while len(text) - start > _CHUNK_CHARS:
        end = start + _CHUNK_CHARS
        cut = max(text.rfind(" ", start + _CHUNK_CHARS // 2, end), text.rfind("\n", start + _CHUNK_CHARS // 2, end))
        if cut <= start:
            cut = end
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


class BPETokenizer:
    """Exact OpenAI BPE encodings (``o200k_base``, ``cl100k_base``), offline.

    Args:
        encoding: Encoding name.

    Raises:
        ConfigError: The encoding is unknown.
    """

    def __init__(self, encoding: str = "o200k_base") -> None:
        try:
            self._rust = _rust_bindings().tokenizer_for_encoding(encoding)
        except Exception as exc:  # the package raises several types for unknown names
            raise ConfigError(f"unknown tokenizer encoding {encoding!r}: {exc}") from exc
        self._enc: Any = None
        self.name = encoding
        # Counts of short texts are remembered: assembling a context counts the same turns,
        # items and summaries again and again (on LoCoMo 3 of 4 counts repeat one already
        # made). Long texts (tool output) are not kept, so the cache stays a few MB at most.
        self._counted = lru_cache(maxsize=_COUNT_CACHE)(self._count)

    def _encode_piece(self, text: str) -> list[int]:
        try:
            return list(self._rust.encode(text))
        except UnicodeEncodeError:
            # Lone surrogates: replaced as bpe-openai's own wrapper does, so ids stay equal.
            return list(self._rust.encode(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; special-token strings are encoded as ordinary text."""
        if len(text) <= _CHUNK_CHARS:
            return self._encode_piece(text) if text else []
        ids: list[int] = []
        for piece in _split_long(text):
            ids.extend(self._encode_piece(piece))
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        """Text of token ids (a token cut inside a UTF-8 character decodes to U+FFFD)."""
        try:
            return str(self._rust.decode(list(ids)))
        except ValueError:
            # Ids ending inside a character: the full wrapper decodes bytes with replacement.
            # It loads every encoding's tables (seconds), so only on this rare path.
            if self._enc is None:
                import bpe_openai

                self._enc = bpe_openai.get_encoding(self.name)
            return str(self._enc.decode(list(ids)))

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        if not text:
            return 0
        if len(text) <= _COUNT_CACHE_CHARS:
            return self._counted(text)
        return self._count(text)

    def _count(self, text: str) -> int:
        return len(self.encode(text))

    def truncate(self, text: str, max_tokens: int) -> str:
        """A prefix of ``text`` with at most ``max_tokens`` tokens (see :func:`truncate_to_tokens`)."""
        return truncate_to_tokens(text, max_tokens, self)

    def __repr__(self) -> str:
        return f"BPETokenizer({self.name!r})"


def _rust_bindings() -> Any:
    """bpe-openai's Rust extension, loaded without running the package's ``__init__``.

    Importing ``bpe_openai`` parses every shipped encoding's rank table in
    Python (o200k, cl100k and voyage3: ~3.5 s on a 2-core box), although
    encoding and counting only need the Rust tokenizer, which carries its own
    tables (~0.2 s). The extension is registered under its package name, so a
    later ``import bpe_openai`` reuses it instead of initialising it twice.
    """
    import importlib.machinery
    import importlib.util
    import os
    import sys

    name = "bpe_openai._bindings"
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the bpe-openai package is not installed")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for folder in spec.submodule_search_locations:
            path = f"{folder}/_bindings{suffix}"
            if not os.path.isfile(path):
                continue
            try:
                loader = importlib.machinery.ExtensionFileLoader(name, path)
                ext = importlib.util.spec_from_file_location(name, path, loader=loader)
                if ext is None:
                    continue
                mod = importlib.util.module_from_spec(ext)
            except ImportError:
                continue
            loader.exec_module(mod)
            sys.modules[name] = mod
            return mod
    import bpe_openai._bindings  # an unusual layout: the ordinary (slow) import

    return bpe_openai._bindings


class CharEstimator:
    """Estimate tokens as ``ceil(len(text) / chars_per_token)``. Never exact; opt in explicitly."""

    def __init__(self, chars_per_token: float = 4.0) -> None:
        if chars_per_token <= 0:
            raise ConfigError("chars_per_token must be positive")
        self.chars_per_token = chars_per_token
        self.name = f"chars/{chars_per_token:g}"

    def count(self, text: str) -> int:
        """Estimated number of tokens in ``text``."""
        return math.ceil(len(text) / self.chars_per_token)

    def __repr__(self) -> str:
        return f"CharEstimator({self.chars_per_token!r})"


_CACHE: dict[str, Tokenizer] = {}
_CACHE_LOCK = threading.Lock()


def get_tokenizer(name: str = "o200k_base") -> Tokenizer:
    """A shared tokenizer by name: ``o200k_base``, ``cl100k_base`` or ``chars/4``.

    Encoders are loaded once per process (the BPE tables take ~0.3 s).

    Raises:
        ConfigError: Unknown name.
    """
    with _CACHE_LOCK:
        tok = _CACHE.get(name)
        if tok is None:
            if name.startswith("chars/"):
                try:
                    tok = CharEstimator(float(name.split("/", 1)[1]))
                except ValueError:
                    raise ConfigError(f"bad estimator name {name!r}; use e.g. 'chars/4'") from None
            else:
                tok = BPETokenizer(name)
            _CACHE[name] = tok
        return tok


def count_turn(turn: Turn, tokenizer: Tokenizer) -> int:
    """Tokens ``turn`` costs as rendered for OpenAI Chat Completions, overhead included.

    This is the exact count of :func:`~stratamem.providers.to_openai` of the
    turn under :func:`count_message`, so a stored count equals what the turn
    costs in an OpenAI request: a tool turn with several results is several
    ``tool`` messages, each with its own framing, and thinking blocks (which
    OpenAI has no place for) cost nothing. The same turn rendered for
    Anthropic can cost a little more (its thinking is sent back) or less (its
    tool results share one message); context assembly counts each request as
    rendered, so budgets never rely on the stored number.
    """
    if isinstance(turn.content, str):
        # Fast path (most turns): one message holding the text, as to_openai renders it.
        return MESSAGE_TOKENS + (NAME_TOKENS if turn.name else 0) + tokenizer.count(turn.content)
    return sum(count_message(m, tokenizer) for m in to_openai([turn]))


def truncate_to_tokens(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """A prefix of ``text`` of at most ``max_tokens`` tokens, as long as the tokenizer allows.

    Works with any :class:`Tokenizer` (only ``count`` is required). When the
    tokenizer can ``encode`` and ``decode``, the cut found from the token ids is
    tried first; otherwise, or when that cut is not a clean prefix (a token that
    ends inside a multi-byte character), a binary search over character
    positions finds it with about ``log2(len(text))`` counts. The result is
    always a prefix of ``text`` and never over ``max_tokens``.

    Raises:
        ValueError: ``max_tokens`` is negative.
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must not be negative, got {max_tokens}")
    if tokenizer.count(text) <= max_tokens:
        return text
    encode = getattr(tokenizer, "encode", None)
    decode = getattr(tokenizer, "decode", None)
    if callable(encode) and callable(decode):
        guess = decode(encode(text)[:max_tokens])
        if isinstance(guess, str) and text.startswith(guess) and tokenizer.count(guess) <= max_tokens:
            return guess
    lo, hi = 0, len(text)  # invariant: text[:lo] fits; text[:hi + 1] was not shown to fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokenizer.count(text[:mid]) <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def _count_part(part: Any, tokenizer: Tokenizer) -> int:
    """Tokens of one content part of either provider's message shape."""
    if isinstance(part, str):
        return tokenizer.count(part)
    if not isinstance(part, Mapping):
        return tokenizer.count(json.dumps(part, ensure_ascii=False, default=str))
    kind = part.get("type")
    if kind in ("image", "image_url"):
        return IMAGE_TOKENS
    if kind == "text":
        return tokenizer.count(part.get("text") or "")
    if kind == "thinking":
        return tokenizer.count(part.get("thinking") or "")
    if kind == "tool_use":
        return (
            TOOL_CALL_TOKENS
            + tokenizer.count(part.get("name") or "")
            + tokenizer.count(json.dumps(part.get("input") or {}, ensure_ascii=False))
        )
    if kind == "tool_result":
        inner = part.get("content")
        if isinstance(inner, list):
            return TOOL_CALL_TOKENS + sum(_count_part(p, tokenizer) for p in inner)
        return TOOL_CALL_TOKENS + tokenizer.count(inner or "")
    return tokenizer.count(json.dumps(part, ensure_ascii=False, default=str))


def count_message(message: Mapping[str, Any], tokenizer: Tokenizer) -> int:
    """Tokens of one provider message (OpenAI or Anthropic shape), overhead included."""
    total = MESSAGE_TOKENS + (NAME_TOKENS if message.get("name") else 0)
    content = message.get("content")
    if isinstance(content, list):
        total += sum(_count_part(p, tokenizer) for p in content)
    elif isinstance(content, str):
        total += tokenizer.count(content)
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        total += TOOL_CALL_TOKENS + tokenizer.count(fn.get("name") or "") + tokenizer.count(fn.get("arguments") or "")
    if message.get("role") == "tool":
        total += TOOL_CALL_TOKENS
    return total


def count_messages(messages: Iterable[Mapping[str, Any]], tokenizer: Tokenizer, *, system: str | None = None) -> int:
    """Tokens of a whole request: every message, an optional system prompt, and reply priming."""
    total = REPLY_TOKENS + sum(count_message(m, tokenizer) for m in messages)
    if system:
        total += MESSAGE_TOKENS + tokenizer.count(system)
    return total


@dataclass
class Calibration:
    """Per-model correction of our estimates from provider-reported usage.

    Providers frame requests with tokens they do not publish, and models other
    than OpenAI's use other tokenizers. After each request, call :meth:`observe`
    with our estimate and the ``input_tokens``/``prompt_tokens`` the provider
    returned; :meth:`adjust` then scales later estimates for that model by an
    exponential moving average of ``actual / estimated``. The factor never
    drops below 1.0 unless ``allow_shrink`` is set, so calibration can only make
    budgets safer by default.
    """

    alpha: float = 0.3
    """Weight of the newest observation in the moving average."""
    allow_shrink: bool = False
    """Whether a model whose real counts are lower than ours may shrink estimates."""
    _factors: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def observe(self, model: str, estimated: int, actual: int) -> float:
        """Record one request's estimate and real input-token count; return the new factor.

        Raises:
            ValueError: ``estimated`` or ``actual`` is not positive.
        """
        if estimated <= 0 or actual <= 0:
            raise ValueError("estimated and actual token counts must be positive")
        ratio = actual / estimated
        with self._lock:
            old = self._factors.get(model)
            new = ratio if old is None else (1 - self.alpha) * old + self.alpha * ratio
            self._factors[model] = new
            return new

    def factor(self, model: str) -> float:
        """Current multiplier for ``model`` (1.0 until something was observed)."""
        with self._lock:
            f = self._factors.get(model, 1.0)
        return f if self.allow_shrink else max(1.0, f)

    def adjust(self, model: str, estimated: int) -> int:
        """``estimated`` scaled by the model's factor, rounded up."""
        return math.ceil(estimated * self.factor(model))

    def to_dict(self) -> dict[str, float]:
        """The learned factors, for persistence."""
        with self._lock:
            return dict(self._factors)

    @classmethod
    def from_dict(cls, factors: Mapping[str, float], **kwargs: Any) -> Calibration:
        """Restore factors saved by :meth:`to_dict`."""
        cal = cls(**kwargs)
        cal._factors.update({str(k): float(v) for k, v in factors.items()})
        return cal


PROVIDER_FACTORS: Mapping[str, float] = {"openai": 1.0, "anthropic": 1.07}
"""Provider tokens per exact-tokenizer token, for providers whose tokenizer we do not have.

``openai``: 1.0, the exact ``o200k_base`` encoding is OpenAI's own (GPT-4o and later).
``anthropic``: 1.07, measured: the tokenizer Anthropic published
(``@anthropic-ai/tokenizer`` 0.0.4 on npm) counts the 5,882 turn texts of
LoCoMo (``locomo10.json``) as 169,849 tokens against 159,658 in ``o200k_base``,
a ratio of 1.0638, rounded up. Anthropic says that tokenizer is not exact for
its current models, so learn the real factor from reported usage
(:class:`Calibration`, as ``wrap`` does) and pass it to ``Memory.context``.
"""


@dataclass(frozen=True, slots=True)
class Counting:
    """How a budget is counted for a target provider: our exact count times ``factor``, rounded up."""

    counter: str
    """The exact tokenizer that counts (e.g. ``o200k_base``)."""
    factor: float = 1.0
    """Provider tokens per ``counter`` token."""
    provider: str | None = None
    """Target provider (``openai``, ``anthropic``; ``None``: plain text, no provider)."""
    model: str | None = None
    """Target model, the calibration key."""
    source: str = "exact"
    """Where ``factor`` comes from: ``exact``, ``measured ratio`` (:data:`PROVIDER_FACTORS`) or ``usage``."""

    def tokens(self, counted: int) -> int:
        """``counted`` exact tokens in the provider's counting."""
        return counted if self.factor == 1.0 else math.ceil(counted * self.factor)

    def room(self, budget: int) -> int:
        """Most exact tokens whose provider count stays within ``budget``."""
        if self.factor == 1.0:
            return budget
        room = math.floor(budget / self.factor)
        while room > 0 and self.tokens(room) > budget:  # guards float rounding at the edge
            room -= 1
        return room

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the manifest's ``counting``)."""
        return {
            "counter": self.counter,
            "factor": self.factor,
            "provider": self.provider,
            "model": self.model,
            "source": self.source,
        }


def counting_for(
    counter: str, provider: str | None, model: str | None = None, calibration: Calibration | None = None
) -> Counting:
    """The :class:`Counting` for ``provider``/``model``: learned usage first, else the measured ratio.

    A ``calibration`` that has observed ``model`` gives its factor (source
    ``usage``); otherwise the provider's :data:`PROVIDER_FACTORS` entry applies.

    Raises:
        ValueError: Unknown provider (the caller validates and raises its own error first).
    """
    if provider is None:
        return Counting(counter, 1.0, None, model, "exact")
    if provider not in PROVIDER_FACTORS:
        raise ValueError(f"unknown provider {provider!r}")
    if calibration is not None and model is not None and model in calibration.to_dict():
        return Counting(counter, calibration.factor(model), provider, model, "usage")
    factor = PROVIDER_FACTORS[provider]
    if factor != 1.0:
        return Counting(counter, factor, provider, model, "measured ratio")
    # o200k_base is OpenAI's own encoding; another counter is taken as 1:1, and said so.
    return Counting(counter, 1.0, provider, model, "exact" if counter == "o200k_base" else "assumed 1:1")
