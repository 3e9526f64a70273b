"""The ``llm`` summarizer: any :class:`~stratamem.llm.ChatModel` writes the summary.

Calls are bounded. Input larger than ``max_input_tokens`` is split into parts
that are summarized separately and then merged; the timeout and the retries
with backoff belong to the chat client (:class:`~stratamem.llm.OpenAIChat`,
:class:`~stratamem.llm.AnthropicChat`). The model must answer with a JSON
object; anything else, like a failed call, raises
:class:`~stratamem.errors.ModelError`, and the caller (the pyramid) keeps the
node with an extractive summary and a visible failure record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..errors import ModelError
from ..llm import ChatModel
from ..records import KeyFact, StoredTurn, Summary
from ..tokens import Tokenizer
from . import MAX_KEY_FACTS
from ._text import fit_text
from .prompts import MERGE_SYSTEM, SEGMENT_SYSTEM

__all__ = ["LLMSummarizer"]

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
# Tokens per word of English prose, to turn a token budget into a word limit for the prompt.
_TOKENS_PER_WORD = 1.4


class LLMSummarizer:
    """Summaries written by a chat model, checked and bounded.

    Args:
        model: The chat model (its client owns timeout and retries).
        tokenizer: Counts input and output tokens.
        max_input_tokens: Larger transcripts are split into parts of at most this size.
    """

    name = "llm"

    def __init__(self, model: ChatModel, tokenizer: Tokenizer, *, max_input_tokens: int = 60_000) -> None:
        if max_input_tokens < 200:
            raise ValueError("max_input_tokens must be at least 200")
        self.model = model
        self.tokenizer = tokenizer
        self.max_input_tokens = max_input_tokens
        # Calls answered and the tokens they cost since the last take_usage() (the pyramid's spend).
        self._usage = [0, 0, 0]

    def take_usage(self) -> tuple[int, int, int]:
        """``(calls, input_tokens, output_tokens)`` of the model calls since the last take, then reset.

        Tokens are the provider's usage numbers; an answer without them is
        counted with the tokenizer (the prompt sent, the text received). An
        answer that was no JSON summary still cost its tokens and is counted.
        """
        out = (self._usage[0], self._usage[1], self._usage[2])
        self._usage = [0, 0, 0]
        return out

    # --- helpers -----------------------------------------------------------------------

    def _call(self, system: str, user: str, max_tokens: int) -> dict[str, Any]:
        # JSON framing costs tokens beyond the summary itself: leave room for it.
        completion = self.model.complete(system, [{"role": "user", "content": user}], max_tokens=max_tokens * 2 + 400)
        answer = completion.text
        inp, out = completion.tokens(self.tokenizer, system, user)
        self._usage[0] += 1
        self._usage[1] += inp
        self._usage[2] += out
        match = _JSON_OBJECT.search(answer)
        try:
            data = json.loads(match.group(0)) if match else None
        except json.JSONDecodeError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("summary"), str) or not data["summary"].strip():
            raise ModelError(f"model {self.model.model!r} did not answer with a JSON summary object")
        return data

    def _summary(self, data: dict[str, Any], max_tokens: int, known_ids: set[int] | None) -> Summary:
        facts = []
        for f in data.get("key_facts") or ():
            if isinstance(f, dict) and isinstance(f.get("fact"), str) and f["fact"].strip():
                turn = f.get("turn")
                # Keep a turn id only if it names a turn we showed the model.
                ok = isinstance(turn, int) and not isinstance(turn, bool) and (known_ids is None or turn in known_ids)
                facts.append(KeyFact(f["fact"].strip(), turn if ok else None))
        themes = tuple(str(t).strip().lower() for t in data.get("themes") or () if str(t).strip())[:5]
        executive = data.get("executive")
        return Summary(
            text=fit_text(data["summary"].strip(), max_tokens, self.tokenizer),
            key_facts=tuple(facts[:MAX_KEY_FACTS]),
            themes=themes,
            executive=executive.strip() if isinstance(executive, str) and executive.strip() else None,
            summarizer=self.name,
        )

    def _parts(self, lines: list[str]) -> list[list[str]]:
        parts: list[list[str]] = [[]]
        used = 0
        for line in lines:
            cost = self.tokenizer.count(line) + 1
            if cost > self.max_input_tokens:  # one huge turn: keep its head
                line = fit_text(line, self.max_input_tokens - 1, self.tokenizer)
                cost = self.max_input_tokens
            if parts[-1] and used + cost > self.max_input_tokens:
                parts.append([])
                used = 0
            parts[-1].append(line)
            used += cost
        return parts

    # --- protocol -----------------------------------------------------------------------

    def summarize(self, turns: Sequence[StoredTurn], *, max_tokens: int) -> Summary:
        """Summarize ``turns``; split into parts first if the transcript is too large.

        Raises:
            ModelError: A call failed or an answer was not a JSON summary.
        """
        lines = [f"[{t.id}] {t.turn.name or t.role}: {t.text}" for t in turns]
        ids = {t.id for t in turns}
        system = SEGMENT_SYSTEM.replace("{max_words}", str(max(10, int(max_tokens / _TOKENS_PER_WORD))))
        parts = self._parts(lines)
        summaries = [self._summary(self._call(system, "\n".join(p), max_tokens), max_tokens, ids) for p in parts]
        if len(summaries) == 1:
            return summaries[0]
        return self.merge(summaries, max_tokens=max_tokens)

    def merge(self, parts: Sequence[Summary], *, max_tokens: int, executive: bool = False) -> Summary:
        """Merge child summaries with one call (or several, if they are too large together).

        Raises:
            ModelError: A call failed or an answer was not a JSON summary.
        """
        blocks = []
        for i, p in enumerate(parts, 1):
            facts = "; ".join(f"{f.text} (turn {f.turn_id})" for f in p.key_facts)
            blocks.append(f"Part {i}: {p.text}" + (f"\nFacts: {facts}" if facts else ""))
        system = MERGE_SYSTEM.replace("{max_words}", str(max(10, int(max_tokens / _TOKENS_PER_WORD)))).replace(
            "{executive}",
            "2 to 4 sentences on what was achieved and decided, for later reference." if executive else "null",
        )
        groups = self._parts(blocks)
        if len(groups) > 1:  # merge in stages so no call exceeds the input bound
            if len(groups) >= len(parts):
                raise ModelError("child summaries are each too large to merge within max_input_tokens")
            partial = [self._summary(self._call(system, "\n\n".join(g), max_tokens), max_tokens, None) for g in groups]
            return self.merge(partial, max_tokens=max_tokens, executive=executive)
        known = {f.turn_id for p in parts for f in p.key_facts if f.turn_id is not None}
        out = self._summary(self._call(system, "\n\n".join(blocks), max_tokens), max_tokens, known)
        return out if executive else Summary(out.text, out.sentences, out.key_facts, out.themes, None, out.summarizer)
