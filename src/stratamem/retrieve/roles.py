"""Role routing: a question about what the assistant said looks in the assistant's turns.

In an assistant chat the user's facts are in the user's turns ("What car do
I drive?") and the assistant's advice is in the assistant's ("What soil ratio
did you suggest?"). :func:`role_cue` reads which one a query asks about:

* ``assistant`` — the query recalls something said *to* the user: "you"
  followed by a past-tense verb of saying ("you said", "you suggested",
  "did you recommend", "you told me", "you gave me");
* ``user`` — otherwise, a first-person query ("I", "my", "me"): the user
  asks about themselves;
* ``None`` — neither (a third-person question, as in LoCoMo): no routing.

A request ("Can you recommend a film?") is not a recall of advice, so it is
no ``assistant`` cue. Routing applies to turns whose speaker is the role
itself (unnamed turns, indexed as ``user: …`` / ``assistant: …``); turns of
named speakers are never routed, so a persisted index (which holds each
turn's terms, not its role) routes exactly like the writer's.
"""

from __future__ import annotations

import re

__all__ = ["ROLE_CODES", "role_code", "role_cue"]

ROLE_CODES = {"user": 1, "assistant": 2}
"""Code per routed role (0: a named speaker, never routed)."""

_ASSISTANT = re.compile(
    r"\b(you|you'd|you've)\s+(said|say|told|tell|suggested|suggest|recommended|recommend|mentioned|mention|"
    r"advised|advise|gave|give|proposed|propose|explained|explain|wrote|write|listed|list|called|call|named)\b",
    re.IGNORECASE,
)
_PAST = re.compile(
    r"\b(did|had|have|once|earlier|before|last time|our chats?|you said|you told|you suggested|"
    r"you recommended|you mentioned|you advised|you gave|you proposed|you explained|you wrote|"
    r"you listed|you called|you named)\b",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|my|me|mine|myself)\b", re.IGNORECASE)


def role_cue(query: str) -> str | None:
    """``"assistant"``, ``"user"`` or ``None``: whose turns ``query`` asks about (see the module doc)."""
    if _ASSISTANT.search(query) and _PAST.search(query):
        return "assistant"
    if _FIRST_PERSON.search(query):
        return "user"
    return None


def role_code(terms: list[str] | str) -> int:
    """The routed role of a turn from its index terms (their first is the speaker), 0 if named.

    ``terms`` may also be the stored, space-joined form: only its first word is
    read, so an index opened from the store never splits every turn's terms.
    """
    if isinstance(terms, str):
        return ROLE_CODES.get(terms.partition(" ")[0], 0)
    return ROLE_CODES.get(terms[0], 0) if terms else 0
