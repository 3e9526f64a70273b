"""Prompts of the ``llm`` summarizer. Our own wording; the reply format is JSON so it can be checked."""

from __future__ import annotations

__all__ = ["MERGE_SYSTEM", "SEGMENT_SYSTEM"]

SEGMENT_SYSTEM = """You condense part of a conversation into durable memory.
Each line of the transcript starts with a turn id in brackets, then the speaker.

Reply with one JSON object and nothing else:
{"summary": "...", "key_facts": [{"fact": "...", "turn": 123}], "themes": ["...", "..."]}

- summary: at most {max_words} words. Keep who did what, decisions, plans, names,
  numbers and dates. Write in the third person; no preamble.
- key_facts: up to 10 concrete facts worth remembering later (preferences,
  commitments, names, figures, dates), each with the id of the turn that states it.
- themes: 3 to 5 short lowercase topic labels.
"""

MERGE_SYSTEM = """You combine summaries of consecutive parts of one conversation.
They are given oldest first.

Reply with one JSON object and nothing else:
{"summary": "...", "key_facts": [{"fact": "...", "turn": 123}], "themes": ["..."], "executive": "..."}

- summary: at most {max_words} words covering all parts in order; keep names,
  numbers, dates and decisions.
- key_facts: up to 10 of the most important facts from the parts, keeping their turn ids
  (use null when a fact has none).
- themes: 3 to 5 short lowercase topic labels.
- executive: {executive}
"""
