"""Summaries: what a summarizer writes for a segment or a consolidation, with its sources.

A :class:`Summary` holds the summary text, its sentences (each with the turn it
came from), key facts and themes; pyramid nodes carry one and the store keeps
its JSON form (:meth:`Summary.to_dict`). The strategies that write them live in
:mod:`stratamem.summarize`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["KeyFact", "Sentence", "Summary", "render"]


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence of a summary and the turn it came from."""

    text: str
    """The sentence as shown (speaker-prefixed for extractive summaries)."""
    turn_id: int | None = None
    """Source turn id, or ``None`` for generated text."""
    action: bool = False
    """Whether it mentions tool calls ("Ran pytest -q (2 failed).") rather than quoting prose."""


def render(sentences: Sequence[Sentence]) -> str:
    """Sentences as one readable line: a speaker's name once per run of their sentences.

    ``[dana: A., dana: B., assistant: C.]`` reads ``dana: A. B. assistant: C.``.
    Sentences without a source turn are shown as they are.
    """
    out: list[str] = []
    prev: str | None = None
    for s in sentences:
        speaker, sep, body = s.text.partition(": ")
        if s.turn_id is not None and sep and speaker == prev:
            out.append(body)
        else:
            out.append(s.text)
        prev = speaker if s.turn_id is not None and sep else None
    return " ".join(out)


@dataclass(frozen=True, slots=True)
class KeyFact:
    """A concrete, reusable fact and where it was said."""

    text: str
    """The fact."""
    turn_id: int | None = None
    """Source turn id, when known."""


@dataclass(frozen=True, slots=True)
class Summary:
    """What a summarizer produces for a segment or a consolidation."""

    text: str
    """The summary."""
    sentences: tuple[Sentence, ...] = ()
    """The summary's sentences with their sources (empty when not sentence-based)."""
    key_facts: tuple[KeyFact, ...] = ()
    """At most :data:`stratamem.summarize.MAX_KEY_FACTS` facts."""
    themes: tuple[str, ...] = ()
    """Three to five short themes (fewer only when the text has fewer content words)."""
    executive: str | None = None
    """High-level summary for top-level consolidations."""
    summarizer: str = ""
    """Name of the strategy that wrote it."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (inverse of :meth:`from_dict`)."""
        out: dict[str, Any] = {}
        index = {(x.text, x.turn_id): i for i, x in enumerate(self.sentences)}
        # A sentence-based summary's text is its sentences rendered: store it once.
        if self.sentences and self.text == render(self.sentences):
            out["rendered"] = True
        else:
            out["text"] = self.text
        return {
            **out,
            "sentences": [[s.text, s.turn_id, 1] if s.action else [s.text, s.turn_id] for s in self.sentences],
            # A key fact that repeats a summary sentence is stored as that sentence's index.
            "key_facts": [index.get((f.text, f.turn_id), [f.text, f.turn_id]) for f in self.key_facts],
            "themes": list(self.themes),
            "executive": self.executive,
            "summarizer": self.summarizer,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Summary:
        """Build from :meth:`to_dict` output (also the older form, whose text was the sentences space-joined)."""
        sentences = tuple(Sentence(x[0], x[1], bool(x[2]) if len(x) > 2 else False) for x in d.get("sentences", ()))
        if "text" in d:
            text = d["text"]
        else:
            text = render(sentences) if d.get("rendered") else " ".join(s.text for s in sentences)
        return cls(
            text=text,
            sentences=sentences,
            key_facts=tuple(
                KeyFact(sentences[f].text, sentences[f].turn_id) if isinstance(f, int) else KeyFact(*f)
                for f in d.get("key_facts", ())
            ),
            themes=tuple(d.get("themes", ())),
            executive=d.get("executive"),
            summarizer=d.get("summarizer", ""),
        )
