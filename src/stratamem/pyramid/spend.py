"""What summarizing cost and what it saves (seed 000: "savings must exceed cost").

The pyramid records every model call its summarizer makes — calls, input and
output tokens as the provider reported them — per namespace and level
(``summary_spend``, migration ``m014_summary_spend``). Local summarizers
(``heuristic``, ``extractive``) make no call and cost nothing.

What it saves is counted in prompt tokens: the turn tokens of the summarized
segments minus their summary tokens, i.e. what one prompt that shows that
history as summaries instead of turns does not pay. Summarizing pays once;
the saving recurs with every prompt, so ``savings_exceed_cost`` compares one
prompt's saving with the whole spend: the most conservative reading.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["LevelSpend", "SummarySpend"]


@dataclass(frozen=True, slots=True)
class LevelSpend:
    """Model spend of summarizing one level of a namespace."""

    level: int
    """Level (1 = segments, 2+ = consolidations)."""
    calls: int
    """Model calls answered."""
    input_tokens: int
    """Input tokens the provider counted."""
    output_tokens: int
    """Output tokens the provider counted."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "level": self.level,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


@dataclass(frozen=True, slots=True)
class SummarySpend:
    """A namespace's summarization spend beside the tokens its summaries save."""

    namespace: str
    """The namespace."""
    levels: tuple[LevelSpend, ...]
    """Spend per level with any spend, ascending."""
    summarized_tokens: int
    """Turn tokens of the summarized segments."""
    summary_tokens: int
    """Tokens of their summaries."""

    @property
    def calls(self) -> int:
        """Model calls over every level."""
        return sum(s.calls for s in self.levels)

    @property
    def input_tokens(self) -> int:
        """Input tokens over every level."""
        return sum(s.input_tokens for s in self.levels)

    @property
    def output_tokens(self) -> int:
        """Output tokens over every level."""
        return sum(s.output_tokens for s in self.levels)

    @property
    def cost_tokens(self) -> int:
        """Input plus output tokens spent on summaries."""
        return self.input_tokens + self.output_tokens

    @property
    def tokens_saved(self) -> int:
        """Prompt tokens one prompt saves by showing summarized history as summaries."""
        return max(0, self.summarized_tokens - self.summary_tokens)

    @property
    def savings_exceed_cost(self) -> bool:
        """Whether one prompt's saving already exceeds the whole spend (true when nothing was spent)."""
        return self.tokens_saved >= self.cost_tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON form, with the totals."""
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_tokens": self.cost_tokens,
            "tokens_saved": self.tokens_saved,
            "savings_exceed_cost": self.savings_exceed_cost,
            "levels": [s.to_dict() for s in self.levels],
        }
