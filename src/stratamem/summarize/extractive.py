"""The extractive summarizer: local, deterministic, no network.

It picks whole sentences from the people's prose: those most central to the
segment (closest to the segment's word centroid) and those carrying names,
numbers and dates, which are what later questions ask about. Tool calls enter
only as short action mentions ("Ran pytest -q (2 failed, 9 passed).") ranked
below prose; tool output, tool arguments and code are never quoted (what is
quotable is decided in :mod:`stratamem.summarize._units`). Every sentence
keeps its source turn id, so a summary can always be traced back and
expanded. Merging re-ranks the children's sentences the same way, so
consolidations stay extractive and traceable too.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..records import KeyFact, Sentence, StoredTurn, Summary
from ..records.summaries import render
from ..tokens import Tokenizer
from . import MAX_KEY_FACTS
from ._text import content_words, fit_text, jaccard, signals, themes
from ._units import units

__all__ = ["ExtractiveSummarizer"]

# Weights of the score terms; tuned on nothing but common sense and kept round:
# a sentence with a name and a date beats a merely central one.
_NAME_WEIGHT = 0.20
_NUMBER_WEIGHT = 0.25
_QUESTION_FACTOR = 0.5
# Action mentions say what was done, not what was decided: they rank below prose,
# those that report a test tally or a failure ("(2 failed, 9 passed)") less far below.
_ACTION_FACTOR = 0.3
_OUTCOME_ACTION_FACTOR = 0.6
_NOTABLE_OUTCOME = re.compile(r"\((?:failed|\d+ (?:failed|passed|errors?)\b)")
_MIN_CONTENT_WORDS = 2
_REDUNDANCY = 0.6
_EXECUTIVE_SENTENCES = 3
# Longer "sentences" are code, logs or tables, not statements worth quoting.
_MAX_SENTENCE_WORDS = 60
_MIN_LETTER_SHARE = 0.6
# At most one key fact per this many candidate sentences (and never more than ten).
_SENTENCES_PER_FACT = 3


@dataclass(slots=True)
class _Candidate:
    text: str  # as shown, speaker-prefixed
    body: str  # the sentence itself
    turn_id: int | None
    position: int
    words: list[str]
    action: bool = False
    score: float = 0.0
    signal: int = 0


def _score(cands: list[_Candidate]) -> None:
    """Centrality (cosine to the centroid of all sentences) plus name/number bonuses."""
    centroid: Counter[str] = Counter()
    for c in cands:
        centroid.update(set(c.words))
    norm_c = math.sqrt(sum(v * v for v in centroid.values())) or 1.0
    for c in cands:
        vec = Counter(c.words)
        norm_v = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        # Leave the sentence's own contribution out, so a sentence is not central by itself alone.
        dot = sum(n * (centroid[w] - 1) for w, n in vec.items())
        central = dot / (norm_v * norm_c)
        names, numbers = signals(c.body)
        c.signal = names + numbers
        c.score = central + _NAME_WEIGHT * min(names, 3) + _NUMBER_WEIGHT * min(numbers, 2)
        if c.body.rstrip().endswith("?"):
            c.score *= _QUESTION_FACTOR
        if c.action:
            c.score *= _OUTCOME_ACTION_FACTOR if _NOTABLE_OUTCOME.search(c.body) else _ACTION_FACTOR


def _select(cands: list[_Candidate], max_tokens: int, tokenizer: Tokenizer) -> list[_Candidate]:
    """Best-scoring, non-redundant sentences whose rendered text fits, in their original order."""
    chosen: list[_Candidate] = []
    used = 0
    for c in sorted(cands, key=lambda c: (-c.score, c.position)):
        if any(jaccard(c.words, o.words) > _REDUNDANCY for o in chosen):
            continue
        # The body alone is a lower bound on what the sentence adds: skip the render when it cannot fit.
        if used + tokenizer.count(c.body) > max_tokens:
            continue
        trial = sorted([*chosen, c], key=lambda c: c.position)
        cost = tokenizer.count(render(_sentences(trial)))
        if cost > max_tokens:
            continue
        chosen, used = trial, cost
    return chosen


def _sentences(cands: list[_Candidate]) -> tuple[Sentence, ...]:
    return tuple(Sentence(c.text, c.turn_id, c.action) for c in cands)


def _prose(sentence: str) -> bool:
    """Whether a sentence reads as prose (not code, JSON or a log line) of quotable length."""
    if len(sentence.split()) > _MAX_SENTENCE_WORDS:
        return False
    visible = [ch for ch in sentence if not ch.isspace()]
    return bool(visible) and sum(ch.isalpha() for ch in visible) / len(visible) >= _MIN_LETTER_SHARE


def _key_facts(cands: list[_Candidate]) -> tuple[KeyFact, ...]:
    """The best sentences carrying names, numbers or dates, no near-duplicates, at most ten."""
    limit = min(MAX_KEY_FACTS, max(1, math.ceil(len(cands) / _SENTENCES_PER_FACT)))
    facts: list[_Candidate] = []
    for c in sorted(cands, key=lambda c: (-c.score, c.position)):
        # Facts come from what people said; an action mention is not knowledge to keep.
        if (
            c.action
            or c.signal == 0
            or c.body.rstrip().endswith("?")
            or any(jaccard(c.words, o.words) > _REDUNDANCY for o in facts)
        ):
            continue
        facts.append(c)
        if len(facts) == limit:
            break
    return tuple(KeyFact(c.text, c.turn_id) for c in sorted(facts, key=lambda c: c.position))


class ExtractiveSummarizer:
    """Central and fact-bearing sentences, each with its source turn id.

    Args:
        tokenizer: Counts summary tokens so ``max_tokens`` is respected.
    """

    name = "extractive"

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    def _candidates(self, turns: Sequence[StoredTurn]) -> list[_Candidate]:
        out: list[_Candidate] = []
        for u in units(turns):
            cw = content_words(u.body)
            if len(cw) < _MIN_CONTENT_WORDS or not _prose(u.body) or u.body.rstrip().endswith(":"):
                continue  # a lead-in ("The plan:") says nothing without what follows it
            out.append(_Candidate(f"{u.speaker}: {u.body}", u.body, u.turn_id, len(out), cw, u.action))
        return out

    def summarize(self, turns: Sequence[StoredTurn], *, max_tokens: int) -> Summary:
        """Pick sentences within ``max_tokens``; key facts and themes from the same candidates.

        Returns:
            A summary whose sentences name their source turns. A segment with no
            usable sentence gets a one-line description.
        """
        cands = self._candidates(turns)
        speakers = {t.turn.name for t in turns if t.turn.name}
        # Themes from what is quotable: tool output and code would crowd in words like "self" and "def".
        topic = themes((c.body for c in cands if not c.action), exclude=speakers)
        if not cands:
            text = fit_text(f"Conversation segment ({len(turns)} turns)", max_tokens, self.tokenizer)
            return Summary(text=text, themes=topic, summarizer=self.name)
        _score(cands)
        chosen = _select(cands, max_tokens, self.tokenizer)
        if not chosen:  # even the shortest sentence is over budget: cut the best one
            best = max(cands, key=lambda c: c.score)
            chosen = [
                _Candidate(fit_text(best.text, max_tokens, self.tokenizer), best.body, best.turn_id, 0, [], best.action)
            ]
        sentences = _sentences(chosen)
        return Summary(
            text=render(sentences), sentences=sentences, key_facts=_key_facts(cands), themes=topic, summarizer=self.name
        )

    def merge(self, parts: Sequence[Summary], *, max_tokens: int, executive: bool = False) -> Summary:
        """Re-rank the children's sentences and facts into one summary within ``max_tokens``."""
        cands: list[_Candidate] = []
        for p in parts:
            sources = p.sentences or (Sentence(p.text, None),)
            for s in (*sources, *(Sentence(f.text, f.turn_id) for f in p.key_facts)):
                body = s.text.split(": ", 1)[-1]
                cw = content_words(body)
                if len(cw) >= _MIN_CONTENT_WORDS and not any(c.text == s.text for c in cands):
                    cands.append(_Candidate(s.text, body, s.turn_id, len(cands), cw, s.action))
        counts: Counter[str] = Counter(th for p in parts for th in p.themes)
        merged_themes = tuple(w for w, _ in counts.most_common(5))
        if not cands:
            text = fit_text(" | ".join(p.text for p in parts if p.text), max_tokens, self.tokenizer)
            return Summary(text=text, themes=merged_themes, executive=text if executive else None, summarizer=self.name)
        _score(cands)
        chosen = _select(cands, max_tokens, self.tokenizer)
        exec_text = None
        if executive:
            top = sorted(chosen, key=lambda c: -c.score)[:_EXECUTIVE_SENTENCES]
            exec_text = render(_sentences(sorted(top, key=lambda c: c.position))) or None
        sentences = _sentences(chosen)
        return Summary(
            text=render(sentences),
            sentences=sentences,
            key_facts=_key_facts(cands),
            themes=merged_themes,
            executive=exec_text,
            summarizer=self.name,
        )
