"""What an extractor proposes as a memory item: :class:`Candidate`.

An extractor (the offline :class:`stratamem.items.extract.RuleExtractor`, the
model-powered :class:`stratamem.items.extract_llm.LLMExtractor`, or your own)
reads turns and returns candidates; :meth:`stratamem.items.Items.extract`
stores them, one item per fact. A candidate is a pure value: the store decides
whether it is new, a restatement of an item it already has (same text, or the
same subject, attribute and value), or a new value of an item's attribute
(which supersedes the old one).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .checks import format_timestamp

__all__ = ["Candidate"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A statement an extractor proposes to keep as an item."""

    text: str
    """The statement as the item will say it (``"Caroline: I moved to Denver last year."``)."""
    type: str
    """``fact``, ``preference``, ``event`` or ``decision`` (any of :data:`stratamem.records.ITEM_TYPES`)."""
    turn_ids: tuple[int, ...]
    """The turns that state it (its provenance; at least one)."""
    salience: float = 1.0
    """How likely it is a durable fact about a person, plan, preference, event or decision (0-1)."""
    subject: str | None = None
    """Whom it is about (``"Caroline"``, ``"Caroline's sister"``), when known."""
    attribute: str | None = None
    """The attribute it gives a value to (``"residence"``, ``"job"``, ``"pet"``), when one is recognised."""
    value: str | None = None
    """The attribute's value (``"denver"``); a later candidate with another value supersedes this one."""
    valid_from: datetime | None = None
    """When it starts to hold: an event's day; ``None`` means when it was said."""

    @property
    def slot(self) -> str | None:
        """``subject:attribute`` (lower case), the item ``key`` a newer value supersedes; ``None`` without both."""
        if not self.subject or not self.attribute:
            return None
        return f"{' '.join(self.subject.lower().split())}:{self.attribute.lower()}"

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "text": self.text,
            "type": self.type,
            "turn_ids": list(self.turn_ids),
            "salience": round(self.salience, 4),
            "subject": self.subject,
            "attribute": self.attribute,
            "value": self.value,
            "valid_from": format_timestamp(self.valid_from) if self.valid_from is not None else None,
        }
