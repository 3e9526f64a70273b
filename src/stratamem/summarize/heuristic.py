"""The heuristic summarizer: seed 000's free rule, kept as the cheap baseline.

The summary names what the user asked for: the first sentence (at most 50
characters) of each of the first three user turns. It extracts no key facts
(the seed's rule has none without a model); themes are the most frequent
content words. Merging joins the first three child summaries.

Only the user's own text blocks count as a request (never images or tool
payloads).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..records import StoredTurn, Summary
from ..tokens import Tokenizer
from ._text import fit_text, themes
from ._units import turn_text

__all__ = ["HeuristicSummarizer"]

_FIRST_USER_TURNS = 3
_REQUEST_CHARS = 50


class HeuristicSummarizer:
    """Seed 000's rule-based summary: the user's first requests.

    Args:
        tokenizer: Counts summary tokens so ``max_tokens`` is respected.
    """

    name = "heuristic"

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def summarize(self, turns: Sequence[StoredTurn], *, max_tokens: int) -> Summary:
        """Summarize as "Discussion of: <first requests>".

        Returns:
            A summary within ``max_tokens`` tokens, no key facts, frequent-word themes.
        """
        written = [text for t in turns if t.role == "user" and (text := turn_text(t)).strip()]
        requests = [r.split(".")[0][:_REQUEST_CHARS].strip() for r in written[:_FIRST_USER_TURNS]]
        requests = [r for r in requests if r]
        text = f"Discussion of: {'; '.join(requests)}" if requests else f"Conversation segment ({len(turns)} turns)"
        speakers = {t.turn.name for t in turns if t.turn.name}
        return Summary(
            text=fit_text(text, max_tokens, self.tokenizer),
            themes=themes((t.text for t in turns), exclude=speakers),
            summarizer=self.name,
        )

    def merge(self, parts: Sequence[Summary], *, max_tokens: int, executive: bool = False) -> Summary:
        """Join the first three child summaries with `` | `` (seed 000's fallback)."""
        text = fit_text(" | ".join(p.text for p in parts[:3] if p.text), max_tokens, self.tokenizer)
        counts: dict[str, int] = {}
        for p in parts:
            for th in p.themes:
                counts[th] = counts.get(th, 0) + 1
        merged_themes = tuple(sorted(counts, key=lambda k: -counts[k])[:5])
        return Summary(text=text, themes=merged_themes, executive=text if executive else None, summarizer=self.name)
