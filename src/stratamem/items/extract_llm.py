"""The model-powered extractor: a chat model reads the turns and names the facts worth an item.

:class:`LLMExtractor` stands behind the same interface as the offline rules
(:class:`~stratamem.items.extract.Extractor`); pass it to
``Memory(extractor=LLMExtractor(model, tokenizer))`` (and, if you like, set
``items.extractor: llm`` so a memory opened without it is refused). The
library never builds a model from configuration.

* **Input** — turns as ``[<turn id>] <speaker> (<date>): <text>`` lines, in
  parts of at most ``max_input_tokens``.
* **Batching** — the pyramid summarizes segments in groups; their turns go to
  the model together (:meth:`LLMExtractor.extract_groups`), so a 10-turn
  segment does not pay a whole prompt of instructions on its own.
* **Output** — one JSON object, :data:`SCHEMA`. A client with ``complete_json``
  (:class:`~stratamem.llm.OpenAIChat`: strict ``json_schema``;
  :class:`~stratamem.llm.AnthropicChat`: one forced tool) is held to the schema
  by the provider; any other :class:`~stratamem.llm.ChatModel` gets the schema
  in its instructions. Either way the answer is checked here: an item whose turn
  was not shown, whose type is unknown or whose text is empty is dropped; an
  answer that is not such an object raises :class:`~stratamem.errors.ModelError`,
  and the pyramid falls back to the offline rules for those segments, visibly.
* **Spend** — :meth:`LLMExtractor.take_usage` gives the calls and tokens since
  the last take (the provider's numbers; the tokenizer's count when it gives
  none; an answer that could not be read still cost its tokens); the pyramid
  adds them to the namespace's ``item_spend`` (``Memory.status().extract_*``).

The instructions are our own wording (:data:`SYSTEM`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..errors import ModelError
from ..llm import ChatModel
from ..records import StoredTurn
from ..records.candidates import Candidate
from ..summarize._text import fit_text
from ..summarize._units import turn_text
from ..tokens import Tokenizer

__all__ = ["SCHEMA", "SYSTEM", "TYPES", "LLMExtractor"]

TYPES: tuple[str, ...] = ("fact", "preference", "event", "decision")
"""The item types the model may give."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["items"],
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["turn", "text", "type", "subject", "attribute", "value", "when", "salience"],
                "properties": {
                    "turn": {"type": "integer", "description": "Id of the turn that states it."},
                    "text": {"type": "string", "description": "The fact in one plain sentence (at most 300 chars)."},
                    "type": {"type": "string", "enum": list(TYPES)},
                    "subject": {"type": "string", "description": "Whom it is about."},
                    "attribute": {"type": ["string", "null"], "description": "What about them it sets, if anything."},
                    "value": {"type": ["string", "null"], "description": "The attribute's value."},
                    "when": {"type": ["string", "null"], "description": "An event's date, YYYY-MM-DD."},
                    "salience": {"type": "number", "description": "0 to 1: how much it will matter later."},
                },
            },
        }
    },
}
"""The answer's JSON schema (strict-mode ready: every property required, optional ones nullable)."""

SYSTEM = """You read part of a conversation and pick out what is worth remembering about the people in it.
Each line of the transcript starts with a turn id in brackets, then the speaker and the date.

Keep statements about a person, a plan, a preference, a possession, a relationship, an event with
its date, a decision or a constraint. Leave out greetings, reactions, questions and compliments.
Write each as one plain sentence that names who it is about, in the third person, and give:
- turn: the id of the turn that states it;
- type: "preference" (likes, dislikes, wishes), "event" (something that happened or is planned),
  "decision" (something settled), or "fact" (anything else worth keeping);
- subject: whom it is about; attribute and value: what about them it sets, e.g. "residence" and
  "Denver", or null; when: an event's date as YYYY-MM-DD (work it out from the line's date), or null;
- salience: from 0 to 1, how much it will matter in a later conversation.
At most {max_items} items; an empty list is a fine answer.
Reply with one JSON object and nothing else: {"items": [...]}."""
"""The extractor's instructions ({max_items} is filled in)."""

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}")


class LLMExtractor:
    """Memory items written by a chat model, checked and bounded.

    Args:
        model: The chat model (its client owns timeout and retries).
        tokenizer: Counts input and output tokens (for parts, and spend when the provider reports none).
        max_input_tokens: Transcript tokens per call; more is split into parts.
        max_items: Items the model may give per call.
        max_output_tokens: Answer tokens per call.

    Raises:
        ValueError: A bound is too small.
    """

    name = "llm"

    def __init__(
        self,
        model: ChatModel,
        tokenizer: Tokenizer,
        *,
        max_input_tokens: int = 8_000,
        max_items: int = 40,
        max_output_tokens: int = 4_000,
    ) -> None:
        if max_input_tokens < 200 or max_items < 1 or max_output_tokens < 100:
            raise ValueError("max_input_tokens >= 200, max_items >= 1 and max_output_tokens >= 100 are needed")
        self.model = model
        self.tokenizer = tokenizer
        self.max_input_tokens = max_input_tokens
        self.max_items = max_items
        self.max_output_tokens = max_output_tokens
        self._usage = [0, 0, 0]

    def take_usage(self) -> tuple[int, int, int]:
        """``(calls, input_tokens, output_tokens)`` since the last take, then reset."""
        out = (self._usage[0], self._usage[1], self._usage[2])
        self._usage = [0, 0, 0]
        return out

    def extract(self, turns: Sequence[StoredTurn], *, before: Sequence[StoredTurn] = ()) -> list[Candidate]:
        """The items one segment's turns hold (``before`` is not sent: the model reads the segment only).

        Raises:
            ModelError: A call failed, or an answer was not a JSON object of items.
        """
        return self.extract_groups([(turns, before)])[0]

    def extract_groups(
        self, groups: Sequence[tuple[Sequence[StoredTurn], Sequence[StoredTurn]]]
    ) -> list[list[Candidate]]:
        """The items of several segments, asked together (in parts of ``max_input_tokens``); a list per group.

        Raises:
            ModelError: A call failed, or an answer was not a JSON object of items.
        """
        owner = {st.id: g for g, (turns, _) in enumerate(groups) for st in turns}
        by_id = {st.id: st for turns, _ in groups for st in turns}
        out: list[list[Candidate]] = [[] for _ in groups]
        for part in self._parts([st for turns, _ in groups for st in turns if st.role in ("user", "assistant")]):
            shown = {st.id for st in part}
            for item in self._call(part):
                turn = item["turn"]
                if turn in shown:
                    out[owner[turn]].append(self._candidate(item, by_id[turn]))
        return out

    # --- helpers -------------------------------------------------------------------------

    def _parts(self, turns: list[StoredTurn]) -> list[list[StoredTurn]]:
        parts: list[list[StoredTurn]] = [[]]
        used = 0
        for st in turns:
            cost = self.tokenizer.count(_line(st, self.max_input_tokens, self.tokenizer)) + 1
            if parts[-1] and used + cost > self.max_input_tokens:
                parts.append([])
                used = 0
            parts[-1].append(st)
            used += cost
        return [p for p in parts if p]

    def _call(self, part: list[StoredTurn]) -> list[dict[str, Any]]:
        system = SYSTEM.replace("{max_items}", str(self.max_items))
        user = "\n".join(_line(st, self.max_input_tokens, self.tokenizer) for st in part)
        messages = [{"role": "user", "content": user}]
        ask_json = getattr(self.model, "complete_json", None)
        if ask_json is not None:
            completion = ask_json(
                system, messages, schema=SCHEMA, max_tokens=self.max_output_tokens, name="memory_items"
            )
        else:  # a model without structured output: the schema goes in the instructions
            completion = self.model.complete(
                system + "\n\nJSON schema of the answer:\n" + json.dumps(SCHEMA),
                messages,
                max_tokens=self.max_output_tokens,
            )
        inp, out = completion.tokens(self.tokenizer, system, user)
        self._usage[0] += 1
        self._usage[1] += inp
        self._usage[2] += out
        match = _JSON_OBJECT.search(completion.text)
        try:
            data = json.loads(match.group(0)) if match else None
        except json.JSONDecodeError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("items"), list):
            raise ModelError(f"model {self.model.model!r} did not answer with a JSON object of items")
        return [item for item in data["items"][: self.max_items] if _valid(item)]

    def _candidate(self, item: Mapping[str, Any], st: StoredTurn) -> Candidate:
        when = item.get("when")
        valid = st.timestamp
        if item["type"] == "event" and isinstance(when, str) and _DAY.match(when):
            try:
                valid = datetime.fromisoformat(when[:10]).replace(tzinfo=UTC)
            except ValueError:
                valid = st.timestamp  # "2023-02-30": the turn's own time
        salience = item.get("salience")
        return Candidate(
            item["text"].strip()[:300],
            item["type"],
            (st.id,),
            min(1.0, max(0.0, float(salience))) if isinstance(salience, int | float) else 1.0,
            _optional(item.get("subject"), 80) or (st.turn.name or st.role),
            _optional(item.get("attribute"), 60),
            _optional(item.get("value"), 120),
            valid,
        )


def _line(st: StoredTurn, limit: int, tokenizer: Tokenizer) -> str:
    line = f"[{st.id}] {st.turn.name or st.role} ({st.timestamp:%Y-%m-%d}): {' '.join(turn_text(st).split())}"
    return fit_text(line, limit - 1, tokenizer) if tokenizer.count(line) >= limit else line


def _valid(item: Any) -> bool:
    """An item worth keeping: a shown turn is checked by the caller; here a turn id, a known type and a text."""
    return (
        isinstance(item, dict)
        and isinstance(item.get("turn"), int)
        and not isinstance(item.get("turn"), bool)
        and item.get("type") in TYPES
        and isinstance(item.get("text"), str)
        and bool(item["text"].strip())
    )


def _optional(value: Any, limit: int) -> str | None:
    return value.strip()[:limit] or None if isinstance(value, str) else None
